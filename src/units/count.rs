//! A count of parameters or elements, and how `124M`, `1.5B` or `13e9` read.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use super::decimal::{Decimal, comma_problem, format_two_decimals};
use crate::error::{Error, Result};

/// A whole number of parameters (or tensor elements).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Count(pub u64);

/// Suffixes accepted after a count, and what they multiply by.
const SUFFIXES: &[(&str, u64)] = &[
    ("K", 1_000),
    ("M", 1_000_000),
    ("B", 1_000_000_000),
    ("T", 1_000_000_000_000),
];

impl Count {
    /// Short form with a suffix and two decimals: `124M`, `1.5B`, `6.67B`.
    pub fn short(self) -> String {
        match SUFFIXES.iter().rev().find(|(_, scale)| self.0 >= *scale) {
            Some((suffix, scale)) => format!(
                "{}{suffix}",
                format_two_decimals(u128::from(self.0), u128::from(*scale))
            ),
            None => self.0.to_string(),
        }
    }

    /// Every digit, grouped by thousands: `6,738,415,616`.
    pub fn grouped(self) -> String {
        let digits = self.0.to_string();
        let mut out = String::with_capacity(digits.len() + digits.len() / 3);
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(c);
        }
        out
    }
}

impl fmt::Display for Count {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.short())
    }
}

impl FromStr for Count {
    type Err = Error;

    /// Reads `124M`, `1.5B`, `7B`, `1T`, `13e9`, `6738415616`, `6,738,415,616`.
    /// The count must be a positive whole number (`1.2345678901B` is refused).
    /// Commas group thousands in a plain number only: `1,5B` and `1,000B`
    /// are refused rather than read as 15B or guessed.
    fn from_str(input: &str) -> Result<Count> {
        let invalid = |reason: &str| Error::InvalidCount {
            input: input.to_string(),
            reason: reason.to_string(),
        };
        let text = input.trim();
        let last = text
            .chars()
            .last()
            .map(|c| c.to_ascii_uppercase().to_string());
        let suffix = SUFFIXES
            .iter()
            .find(|(suffix, _)| last.as_deref() == Some(*suffix));
        let (number, scale) = match suffix {
            // The suffix is one ASCII letter, so cutting one byte keeps UTF-8 intact.
            Some((_, scale)) if text.len() > 1 => (text[..text.len() - 1].trim_end(), *scale),
            _ => (text, 1),
        };
        if let Some(problem) = comma_problem(input, number, scale != 1) {
            return Err(invalid(&problem));
        }
        let value = Decimal::parse(number).map_err(|reason| invalid(&reason))?;
        let count = value
            .times(u128::from(scale), false)
            .map_err(|fractional| {
                if fractional {
                    invalid("not a whole number of parameters")
                } else {
                    invalid("too large")
                }
            })?;
        let count = u64::try_from(count).map_err(|_| invalid("too large"))?;
        if count == 0 {
            return Err(invalid("a model needs at least one parameter"));
        }
        Ok(Count(count))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_accepted_form() {
        let cases = [
            ("124M", 124_000_000),
            ("1.5B", 1_500_000_000),
            ("7B", 7_000_000_000),
            ("1T", 1_000_000_000_000),
            ("13e9", 13_000_000_000),
            ("6738415616", 6_738_415_616),
            ("6,738,415,616", 6_738_415_616),
            ("7b", 7_000_000_000),
            ("350k", 350_000),
            (" 7 B ", 7_000_000_000),
        ];
        for (text, expected) in cases {
            assert_eq!(text.parse::<Count>().unwrap(), Count(expected), "{text}");
        }
    }

    #[test]
    fn refuses_bad_counts() {
        for bad in [
            "",
            "0",
            "-7B",
            "é",
            "7é",
            "1€B",
            "7X",
            "1.2345678901B",
            "0.5",
            "B",
            "1e40",
            "99999999999T",
            "7BB",
        ] {
            assert!(bad.parse::<Count>().is_err(), "{bad:?} should be refused");
        }
    }

    fn reason(text: &str) -> String {
        match text.parse::<Count>() {
            Err(Error::InvalidCount { reason, .. }) => reason,
            other => panic!("{text:?} should be refused, got {other:?}"),
        }
    }

    #[test]
    fn commas_only_group_thousands_of_a_plain_number() {
        assert_eq!(
            reason("1,5B"),
            "a comma is only a thousands separator, between groups of three digits such as `6,738,415,616`; for a decimal write `1.5B`"
        );
        for bad in [",,,7B", "1,0000", "12,34,567", "1,", ",1"] {
            assert!(reason(bad).starts_with("a comma is only"), "{bad}");
        }
        assert_eq!(
            reason("1,000B"),
            "a comma is only a thousands separator, between groups of three digits such as `6,738,415,616`, in a plain number; before a suffix or unit a comma is ambiguous: write `1000B`, or `1.000B` for a decimal"
        );
        assert_eq!("1,000".parse::<Count>().unwrap(), Count(1_000));
        assert_eq!("7_000_000".parse::<Count>().unwrap(), Count(7_000_000));
    }

    #[test]
    fn short_and_grouped_forms() {
        assert_eq!(Count(6_666_666_666).short(), "6.67B");
        assert_eq!(Count(5_000_000_000).short(), "5B");
        assert_eq!(Count(124_000_000).short(), "124M");
        assert_eq!(Count(999).short(), "999");
        assert_eq!(Count(6_738_415_616).grouped(), "6,738,415,616");
        assert_eq!(Count(100).grouped(), "100");
    }
}
