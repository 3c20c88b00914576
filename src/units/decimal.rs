//! Reading decimal numbers such as `1.5`, `13e9` or `6,738,415,616` exactly,
//! and printing ratios with two decimals, without going through floats.

/// Longest number text accepted; anything longer is refused before parsing.
const MAX_INPUT_LEN: usize = 64;
/// Largest decimal exponent accepted in `1e30` notation.
const MAX_EXPONENT: i32 = 30;

/// A non-negative decimal number, exactly: `mantissa x 10^exponent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Decimal {
    pub mantissa: u128,
    pub exponent: i32,
}

impl Decimal {
    /// Parses digits with an optional fraction and exponent. Underscores
    /// may separate digits of the integer part anywhere (`7_000`), as in
    /// Rust and Python; a comma only as a thousands separator in its place
    /// (`6,738,415,616`, see [`THOUSANDS_RULE`]), never as a decimal point.
    /// Returns a lowercase reason on failure.
    pub fn parse(text: &str) -> Result<Decimal, String> {
        if text.len() > MAX_INPUT_LEN {
            return Err(format!("longer than {MAX_INPUT_LEN} characters"));
        }
        if text.starts_with('-') {
            return Err("negative values are not allowed".to_string());
        }
        let text = text.strip_prefix('+').unwrap_or(text);
        let (number, exponent) = match text.find(['e', 'E']) {
            Some(at) => {
                let exponent_text = &text[at + 1..];
                let exponent: i32 = exponent_text.parse().map_err(|_| {
                    if exponent_text.is_empty() {
                        "`e` needs a whole exponent after it, such as `13e9`".to_string()
                    } else {
                        format!("`{exponent_text}` after `e` is not a whole exponent such as `9` in `13e9`")
                    }
                })?;
                if exponent.abs() > MAX_EXPONENT {
                    return Err(format!("exponent {exponent} is out of range"));
                }
                (&text[..at], exponent)
            }
            None => (text, 0),
        };
        let (integer, fraction) = match number.split_once('.') {
            Some((integer, fraction)) => (integer, fraction),
            None => (number, ""),
        };
        if integer.contains(',') && !thousands_grouped(integer) {
            return Err(THOUSANDS_RULE.to_string());
        }
        let integer: String = integer.chars().filter(|c| *c != ',' && *c != '_').collect();
        if integer.is_empty() && fraction.is_empty() {
            return Err("no digits".to_string());
        }
        let mut mantissa: u128 = 0;
        for c in integer.chars().chain(fraction.chars()) {
            let digit = c
                .to_digit(10)
                .ok_or_else(|| format!("unexpected character `{c}`"))?;
            mantissa = mantissa
                .checked_mul(10)
                .and_then(|m| m.checked_add(u128::from(digit)))
                .ok_or_else(|| "too many digits".to_string())?;
        }
        let fraction_len =
            i32::try_from(fraction.len()).map_err(|_| "too many digits".to_string())?;
        Ok(Decimal {
            mantissa,
            exponent: exponent - fraction_len,
        })
    }

    /// `self x factor`, as an exact integer, or `Err(true)` when the result
    /// has a fractional part, `Err(false)` when it overflows. With
    /// `round_down`, a fractional part is dropped instead.
    pub fn times(self, factor: u128, round_down: bool) -> Result<u128, bool> {
        let scaled = self.mantissa.checked_mul(factor).ok_or(false)?;
        if self.exponent >= 0 {
            let power = 10u128.checked_pow(self.exponent as u32).ok_or(false)?;
            scaled.checked_mul(power).ok_or(false)
        } else {
            let power = 10u128
                .checked_pow(self.exponent.unsigned_abs())
                .ok_or(false)?;
            if scaled % power != 0 && !round_down {
                return Err(true);
            }
            Ok(scaled / power)
        }
    }
}

/// What a comma may be, as the reason a misplaced one is refused: `1,5B`
/// would otherwise read as `15B` and `8,0GB` as `80GB`.
pub(crate) const THOUSANDS_RULE: &str =
    "a comma is only a thousands separator, between groups of three digits such as `6,738,415,616`";

/// Why the commas of `input` (a count or size whose number part is
/// `number`) are refused, if they are: a comma that is not a thousands
/// separator (`1,5B`, `8,0GB`, `,,,7B`), or any comma before a suffix or
/// unit, where `1,000B` could mean a thousand billion or one billion written
/// with a decimal comma. Only a plain number may group its digits
/// (`6,738,415,616`).
pub(crate) fn comma_problem(input: &str, number: &str, scaled: bool) -> Option<String> {
    if !number.contains(',') {
        return None;
    }
    let input = input.trim();
    let decimal = input.replacen(',', ".", 1);
    let integer = number.split(['.', 'e', 'E']).next().unwrap_or_default();
    if !thousands_grouped(integer) {
        return Some(if number.matches(',').count() == 1 {
            format!("{THOUSANDS_RULE}; for a decimal write `{decimal}`")
        } else {
            THOUSANDS_RULE.to_string()
        });
    }
    if scaled {
        let digits: String = input.chars().filter(|c| *c != ',').collect();
        return Some(format!(
            "{THOUSANDS_RULE}, in a plain number; before a suffix or unit a comma is ambiguous: write `{digits}`, or `{decimal}` for a decimal"
        ));
    }
    None
}

/// Whether `integer` (digits, commas and underscores) is grouped by
/// thousands: one to three digits, then `,` and exactly three digits, again
/// and again (`6,738,415,616`; not `1,5`, `,,,7` or `1,0000`).
fn thousands_grouped(integer: &str) -> bool {
    let mut groups = integer.split(',');
    let first = groups.next().unwrap_or_default();
    let plain = |group: &str| group.chars().all(|c| c.is_ascii_digit());
    (1..=3).contains(&first.len())
        && plain(first)
        && groups.all(|group| group.len() == 3 && plain(group))
}

/// `numerator / denominator` with at most two decimals, trailing zeros
/// removed, rounded half up: `992/1000` gives `0.99`, `12/1` gives `12`.
pub fn format_two_decimals(numerator: u128, denominator: u128) -> String {
    if denominator == 0 {
        return "-".to_string();
    }
    let hundredths = numerator
        .saturating_mul(100)
        .saturating_add(denominator / 2)
        / denominator;
    let whole = hundredths / 100;
    let fraction = hundredths % 100;
    match fraction {
        0 => whole.to_string(),
        f if f % 10 == 0 => format!("{whole}.{}", f / 10),
        f => format!("{whole}.{f:02}"),
    }
}

/// A ratio for display, with two decimals: `format_ratio(1, 3)` is `0.33`;
/// a nonzero ratio too small to show is `<0.01`, never `0`.
pub fn format_ratio(numerator: u64, denominator: u64) -> String {
    let text = format_two_decimals(u128::from(numerator), u128::from(denominator));
    if text == "0" && numerator > 0 && denominator > 0 {
        "<0.01".to_string()
    } else {
        text
    }
}

/// A float ratio (copies per parameter) with at most two decimals: `4`,
/// `4.02`; a nonzero value too small to show is `<0.01`.
pub fn format_float(value: f64) -> String {
    let hundredths = (value * 100.0).round();
    let text = format_two_decimals(hundredths.max(0.0) as u128, 100);
    if text == "0" && value > 0.0 {
        "<0.01".to_string()
    } else {
        text
    }
}

/// A share in percent with two decimals: `format_percent(1, 3)` is `33.33%`;
/// a nonzero share too small to show is `<0.01%`.
pub fn format_percent(part: u64, whole: u64) -> String {
    let text = format_two_decimals(u128::from(part) * 100, u128::from(whole));
    if text == "0" && part > 0 {
        "<0.01%".to_string()
    } else {
        format!("{text}%")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_plain_fraction_and_exponent() {
        assert_eq!(
            Decimal::parse("6738415616").unwrap().times(1, false),
            Ok(6_738_415_616)
        );
        assert_eq!(
            Decimal::parse("1.5").unwrap().times(1_000_000_000, false),
            Ok(1_500_000_000)
        );
        assert_eq!(
            Decimal::parse("13e9").unwrap().times(1, false),
            Ok(13_000_000_000)
        );
        assert_eq!(
            Decimal::parse("6,738,415,616").unwrap().times(1, false),
            Ok(6_738_415_616)
        );
        assert_eq!(Decimal::parse("2.5e-1").unwrap().times(4, false), Ok(1));
    }

    #[test]
    fn fractions_are_refused_or_rounded_down() {
        assert_eq!(Decimal::parse("0.5").unwrap().times(1, false), Err(true));
        assert_eq!(Decimal::parse("0.5").unwrap().times(1, true), Ok(0));
        assert_eq!(Decimal::parse("1.9").unwrap().times(1, true), Ok(1));
    }

    #[test]
    fn malformed_numbers_are_refused() {
        for bad in [
            "",
            ".",
            "1.2.3",
            "abc",
            "-3",
            "1e",
            "1e999",
            "1x",
            &"9".repeat(65),
        ] {
            assert!(Decimal::parse(bad).is_err(), "{bad:?} should be refused");
        }
        assert_eq!(
            Decimal::parse(&"9".repeat(38)).unwrap().times(10, false),
            Err(false)
        );
        assert!(Decimal::parse(&"9".repeat(60)).is_err());
    }

    #[test]
    fn floats() {
        assert_eq!(format_float(4.0), "4");
        assert_eq!(format_float(1.003906762), "1");
        assert_eq!(format_float(4.015625), "4.02");
        assert_eq!(format_float(0.001), "<0.01");
    }

    #[test]
    fn percents() {
        assert_eq!(format_percent(1, 3), "33.33%");
        assert_eq!(format_percent(1, 1_000_000), "<0.01%");
        assert_eq!(format_percent(0, 5), "0%");
    }

    #[test]
    fn two_decimals() {
        assert_eq!(format_two_decimals(992, 1000), "0.99");
        assert_eq!(format_two_decimals(1984, 1000), "1.98");
        assert_eq!(format_two_decimals(12, 1), "12");
        assert_eq!(format_two_decimals(20, 3), "6.67");
        assert_eq!(format_two_decimals(1, 2), "0.5");
        assert_eq!(format_two_decimals(1, 0), "-");
    }
}
