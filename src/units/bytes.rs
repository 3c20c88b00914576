//! A number of bytes, and sizes such as `80GB` or `80GiB`.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use super::decimal::{Decimal, comma_problem, format_two_decimals};
use crate::error::{Error, Result};

/// A whole number of bytes. Arithmetic is checked: overflow is an error.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Bytes(pub u64);

impl Bytes {
    /// No bytes.
    pub const ZERO: Bytes = Bytes(0);

    /// `self + other`, or an overflow error naming `what`.
    pub fn add(self, other: Bytes, what: &str) -> Result<Bytes> {
        self.0
            .checked_add(other.0)
            .map(Bytes)
            .ok_or_else(|| Error::overflow(what))
    }

    /// `self x factor`, or an overflow error naming `what`.
    pub fn times(self, factor: u64, what: &str) -> Result<Bytes> {
        self.0
            .checked_mul(factor)
            .map(Bytes)
            .ok_or_else(|| Error::overflow(what))
    }

    /// The sum of many sizes, or an overflow error naming `what`.
    pub fn sum<I: IntoIterator<Item = Bytes>>(items: I, what: &str) -> Result<Bytes> {
        items
            .into_iter()
            .try_fold(Bytes::ZERO, |total, b| total.add(b, what))
    }

    /// Printed in the given unit with two decimals: `112 GB`, `0.99 GB`.
    /// A nonzero size too small for the unit shows as `<0.01 GB`.
    pub fn display_in(self, unit: ByteUnit) -> String {
        let text = format_two_decimals(u128::from(self.0), u128::from(unit.bytes));
        if text == "0" && self.0 > 0 {
            format!("<0.01 {}", unit.symbol)
        } else {
            format!("{text} {}", unit.symbol)
        }
    }

    /// Printed in the largest unit of `system` that the size reaches.
    pub fn display(self, system: UnitSystem) -> String {
        self.display_in(ByteUnit::for_size(self, system))
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.display(UnitSystem::Decimal))
    }
}

/// Decimal (GB = 10^9) or binary (GiB = 2^30) units.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum UnitSystem {
    /// kB, MB, GB, TB, PB, EB: powers of 1000.
    #[default]
    Decimal,
    /// KiB, MiB, GiB, TiB, PiB, EiB: powers of 1024.
    Binary,
}

/// One unit of size, such as GB or GiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteUnit {
    /// How it is written: `GB`.
    pub symbol: &'static str,
    /// How many bytes it holds.
    pub bytes: u64,
    /// Which family it belongs to.
    pub system: UnitSystem,
}

const fn unit(symbol: &'static str, bytes: u64, system: UnitSystem) -> ByteUnit {
    ByteUnit {
        symbol,
        bytes,
        system,
    }
}

/// Every unit accepted on input, smallest first within each family.
const UNITS: &[ByteUnit] = &[
    unit("B", 1, UnitSystem::Decimal),
    unit("kB", 1_000, UnitSystem::Decimal),
    unit("MB", 1_000_000, UnitSystem::Decimal),
    unit("GB", 1_000_000_000, UnitSystem::Decimal),
    unit("TB", 1_000_000_000_000, UnitSystem::Decimal),
    unit("PB", 1_000_000_000_000_000, UnitSystem::Decimal),
    unit("EB", 1_000_000_000_000_000_000, UnitSystem::Decimal),
    unit("B", 1, UnitSystem::Binary),
    unit("KiB", 1 << 10, UnitSystem::Binary),
    unit("MiB", 1 << 20, UnitSystem::Binary),
    unit("GiB", 1 << 30, UnitSystem::Binary),
    unit("TiB", 1 << 40, UnitSystem::Binary),
    unit("PiB", 1 << 50, UnitSystem::Binary),
    unit("EiB", 1 << 60, UnitSystem::Binary),
];

impl ByteUnit {
    /// The gigabyte, 10^9 bytes: the unit of the seed texts.
    pub const GB: ByteUnit = unit("GB", 1_000_000_000, UnitSystem::Decimal);

    /// The largest unit of `system` not larger than `size` (bytes for tiny sizes).
    pub fn for_size(size: Bytes, system: UnitSystem) -> ByteUnit {
        UNITS
            .iter()
            .rfind(|u| u.system == system && u.bytes <= size.0.max(1))
            .copied()
            .unwrap_or(UNITS[0])
    }

    /// One unit for a column of sizes: the largest unit of `system` in which
    /// the smallest nonzero size still shows as at least 0.1 (so a column
    /// holds `0.99 GB` and `112 GB`, not `992 MB` and `0.11 TB`), and in
    /// which sizes that differ print differently: the next smaller unit when
    /// two would print alike and it tells every size apart (104.13 GB and
    /// 104.14 GB are not both `0.1 TB`; sizes a few bytes apart keep theirs).
    pub fn for_column(sizes: impl IntoIterator<Item = Bytes>, system: UnitSystem) -> ByteUnit {
        let mut sizes: Vec<Bytes> = sizes.into_iter().collect();
        sizes.sort_unstable();
        sizes.dedup();
        let smallest = sizes
            .iter()
            .copied()
            .find(|b| b.0 > 0)
            .unwrap_or(Bytes::ZERO);
        let mut candidates = UNITS.iter().rev().filter(|u| {
            u.system == system && u128::from(smallest.0.max(1)) * 10 >= u128::from(u.bytes)
        });
        let distinct = |unit: &ByteUnit| {
            sizes
                .windows(2)
                .all(|pair| pair[0].display_in(*unit) != pair[1].display_in(*unit))
        };
        let first = candidates.next().copied().unwrap_or(UNITS[0]);
        match candidates.next() {
            Some(finer) if !distinct(&first) && distinct(finer) => *finer,
            _ => first,
        }
    }

    /// The unit written as `symbol`, case-insensitively (`gb`, `GiB`, `kb`).
    fn from_symbol(symbol: &str) -> Option<ByteUnit> {
        UNITS
            .iter()
            .find(|u| u.symbol.eq_ignore_ascii_case(symbol))
            .copied()
    }
}

impl FromStr for Bytes {
    type Err = Error;

    /// Reads `80GB`, `80 GiB`, `141 GB`, `1.5TB`, `16EB`. A unit is
    /// required; a size that is not a whole number of bytes (`0.1GiB`) is
    /// rounded down. Units are bytes: bits (`80Gb`, `80Gbit`) are refused
    /// rather than read as bytes, and so is a comma (`8,0GB`).
    fn from_str(input: &str) -> Result<Bytes> {
        let invalid = |reason: &str| Error::InvalidSize {
            input: input.to_string(),
            reason: reason.to_string(),
        };
        let (number, symbol) = split_unit(input);
        if symbol.is_empty() {
            return Err(invalid("a unit is required"));
        }
        if is_bits(symbol) {
            return Err(invalid(&format!(
                "`{symbol}` is a unit of bits; sizes are in bytes, with an uppercase `B`, such as `80GB`"
            )));
        }
        let unit = ByteUnit::from_symbol(symbol)
            .ok_or_else(|| invalid(&format!("unknown unit `{symbol}`")))?;
        if let Some(problem) = comma_problem(input, number, true) {
            return Err(invalid(&problem));
        }
        let value = Decimal::parse(number).map_err(|reason| invalid(&reason))?;
        let bytes = value
            .times(u128::from(unit.bytes), true)
            .map_err(|_| invalid("too large"))?;
        let bytes = u64::try_from(bytes).map_err(|_| invalid("too large"))?;
        if bytes == 0 {
            return Err(invalid("a size must be more than zero bytes"));
        }
        Ok(Bytes(bytes))
    }
}

/// A size split into its number and its unit, both trimmed: the unit is
/// the letters at the end (`16EB` is 16 and `EB`, `13e9 B` is `13e9` and
/// `B`), so an exponent's `e` stays with the number.
pub fn split_unit(input: &str) -> (&str, &str) {
    let text = input.trim();
    let number = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    (number.trim_end(), &text[number.len()..])
}

/// Whether `symbol` names bits rather than bytes: `bit`, `Gbit`, `Gbits`,
/// or a lowercase `b` after an uppercase prefix (`Gb`, `Mb`, `Gib`), as
/// network speeds are written. An all-lowercase `gb` stays gigabytes.
fn is_bits(symbol: &str) -> bool {
    let lower = symbol.to_ascii_lowercase();
    lower.ends_with("bit")
        || lower.ends_with("bits")
        || (symbol.ends_with('b') && symbol.chars().any(|c| c.is_ascii_uppercase()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_column_shows_distinct_sizes_distinctly() {
        let close = [Bytes(104_130_000_000), Bytes(104_140_000_000)];
        let unit = ByteUnit::for_column(close, UnitSystem::Decimal);
        assert_eq!(
            close.map(|b| b.display_in(unit)),
            ["104.13 GB", "104.14 GB"]
        );
        // Sizes that print apart keep the largest unit, and equal sizes do too.
        let apart = [Bytes(990_000_000), Bytes(112_000_000_000)];
        assert_eq!(
            ByteUnit::for_column(apart, UnitSystem::Decimal).symbol,
            "GB"
        );
        let same = [Bytes(2_000_000_000_000), Bytes(2_000_000_000_000)];
        assert_eq!(ByteUnit::for_column(same, UnitSystem::Decimal).symbol, "TB");
        // A few bytes apart: no unit but bytes would tell them apart.
        let bytes_apart = [Bytes(12_000_000_000), Bytes(12_000_000_004)];
        assert_eq!(
            ByteUnit::for_column(bytes_apart, UnitSystem::Decimal).symbol,
            "GB"
        );
    }

    #[test]
    fn parses_decimal_and_binary_units() {
        assert_eq!("80GB".parse::<Bytes>().unwrap(), Bytes(80_000_000_000));
        assert_eq!("80GiB".parse::<Bytes>().unwrap(), Bytes(80 * (1 << 30)));
        assert_eq!("141 GB".parse::<Bytes>().unwrap(), Bytes(141_000_000_000));
        assert_eq!("1.5TB".parse::<Bytes>().unwrap(), Bytes(1_500_000_000_000));
        assert_eq!("80gb".parse::<Bytes>().unwrap(), Bytes(80_000_000_000));
        assert_eq!("512 B".parse::<Bytes>().unwrap(), Bytes(512));
        assert_eq!("0.1GiB".parse::<Bytes>().unwrap(), Bytes(107_374_182));
    }

    #[test]
    fn refuses_bad_sizes() {
        for bad in [
            "80", "GB", "-80GB", "0GB", "80XB", "80 G B", "1e30PB", "eGB",
        ] {
            assert!(bad.parse::<Bytes>().is_err(), "{bad:?} should be refused");
        }
    }

    fn reason(text: &str) -> String {
        match text.parse::<Bytes>() {
            Err(Error::InvalidSize { reason, .. }) => reason,
            other => panic!("{text:?} should be refused, got {other:?}"),
        }
    }

    #[test]
    fn exabytes_parse_while_they_fit_in_64_bits() {
        assert_eq!("16EB".parse::<Bytes>().unwrap(), Bytes(16 * 10u64.pow(18)));
        assert_eq!("1 EiB".parse::<Bytes>().unwrap(), Bytes(1 << 60));
        assert_eq!(reason("16EiB"), "too large");
        assert_eq!("13e9 B".parse::<Bytes>().unwrap(), Bytes(13_000_000_000));
    }

    #[test]
    fn bits_are_refused_not_read_as_bytes() {
        for bits in ["80Gb", "80Mb", "80 Gbit", "10Gbits", "1Tb", "80Gib", "8bit"] {
            assert!(reason(bits).contains("a unit of bits"), "{bits}");
        }
        assert_eq!("80gb".parse::<Bytes>().unwrap(), Bytes(80_000_000_000));
        assert_eq!("80kb".parse::<Bytes>().unwrap(), Bytes(80_000));
    }

    #[test]
    fn a_comma_is_never_a_decimal_point() {
        assert_eq!(
            reason("8,0GB"),
            "a comma is only a thousands separator, between groups of three digits such as `6,738,415,616`; for a decimal write `8.0GB`"
        );
        assert!(reason("81,559MiB").contains("ambiguous"));
        assert!(reason(",,80GB").starts_with("a comma is only"));
    }

    #[test]
    fn displays_in_chosen_units() {
        assert_eq!(Bytes(992_000_000).display_in(ByteUnit::GB), "0.99 GB");
        assert_eq!(
            Bytes(112_000_000_000).display(UnitSystem::Decimal),
            "112 GB"
        );
        assert_eq!(Bytes(80 << 30).display(UnitSystem::Binary), "80 GiB");
        assert_eq!(Bytes(4).display_in(ByteUnit::GB), "<0.01 GB");
        assert_eq!(Bytes(0).display_in(ByteUnit::GB), "0 GB");
        assert_eq!(Bytes(0).display(UnitSystem::Decimal), "0 B");
    }

    #[test]
    fn one_unit_per_column() {
        let gb = |x: &[u64]| {
            ByteUnit::for_column(x.iter().map(|b| Bytes(*b)), UnitSystem::Decimal).symbol
        };
        assert_eq!(gb(&[992_000_000, 112_000_000_000]), "GB");
        assert_eq!(gb(&[8_000_000_000, 1_120_000_000_000]), "GB");
        assert_eq!(gb(&[1_000, 2_000_000]), "kB");
        assert_eq!(gb(&[810_000_000_000, 6_480_000_000_000]), "TB");
        assert_eq!(gb(&[0, 5]), "B");
        assert_eq!(gb(&[]), "B");
    }

    #[test]
    fn checked_arithmetic() {
        assert!(Bytes(u64::MAX).add(Bytes(1), "total").is_err());
        assert!(Bytes(u64::MAX / 2 + 1).times(2, "total").is_err());
        assert_eq!(Bytes::sum([Bytes(1), Bytes(2)], "total").unwrap(), Bytes(3));
    }
}
