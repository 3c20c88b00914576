//! Optimizer options that change the state: `--optimizer-option KEY=VALUE`.

use std::collections::BTreeMap;

use serde::Serialize;

use super::Optimizer;
use crate::error::{Error, Result};

/// One option an optimizer accepts, with its default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct OptionSpec {
    /// The key: `rank`, `history_size`, `beta1`, `fused`.
    pub key: &'static str,
    /// What values mean.
    pub kind: OptionKind,
    /// The reference implementation's default, as text.
    pub default: &'static str,
    /// What it changes, in one line.
    pub help: &'static str,
}

/// `fused=true`: torch's fused kernel keeps `step` counters on the device.
pub const FUSED: OptionSpec = OptionSpec {
    key: "fused",
    kind: OptionKind::Flag,
    default: "false",
    help: "fused kernel: `step` counters live on the device",
};

/// `foreach=true|false`: torch's multi-tensor (`foreach`) implementation, or
/// the per-tensor loop. Unset, torch picks foreach for CUDA tensors and the
/// loop on the CPU (`_default_to_fused_or_foreach` in `torch/optim/optimizer.py`).
pub const FOREACH: OptionSpec = OptionSpec {
    key: "foreach",
    kind: OptionKind::Flag,
    default: "auto",
    help: "multi-tensor step (true) or per-tensor loop (false); auto: foreach on CUDA, the loop on the CPU",
};

/// `capturable=true`: torch keeps `step` counters on the device for CUDA graphs.
pub const CAPTURABLE: OptionSpec = OptionSpec {
    key: "capturable",
    kind: OptionKind::Flag,
    default: "false",
    help: "CUDA-graph capturable: `step` counters live on the device",
};

/// `adamw_embeddings=true`: Muon and GaLore leave embedding and output-head
/// matrices to AdamW, as Keller Jordan's Muon recipe, Moonlight and GaLore's
/// training scripts do (trainmem's default follows the fixtures: every matrix).
pub const ADAMW_EMBEDDINGS: OptionSpec = OptionSpec {
    key: "adamw_embeddings",
    kind: OptionKind::Flag,
    default: "false",
    help: "give embedding and output-head matrices (by role) AdamW state instead of the matrix rule",
};

/// Whether `text` is the decimal spelling of `value`, evaluated at compile
/// time: `const _: () = assert!(spells(OPTION.default, CONSTANT));` ties an
/// option's default text to the named constant it stands for.
pub const fn spells(text: &str, value: u64) -> bool {
    let digits = text.as_bytes();
    if digits.is_empty() {
        return false;
    }
    let mut parsed: u64 = 0;
    let mut i = 0;
    while i < digits.len() {
        if !digits[i].is_ascii_digit() {
            return false;
        }
        parsed = parsed * 10 + (digits[i] - b'0') as u64;
        i += 1;
    }
    parsed == value
}

/// The type of an option's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OptionKind {
    /// A whole number: `min_8bit_size=0`.
    Count,
    /// A whole number of at least 1 (a rank, a size, a head count):
    /// `rank=128`; listed as a count.
    #[serde(rename = "count")]
    PositiveCount,
    /// A real number: `momentum=0.9`; `none` where the default is `none`.
    Float,
    /// `true` or `false`.
    Flag,
}

/// The resolved options of one optimizer: every accepted key with a value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Options(BTreeMap<&'static str, String>);

impl Options {
    /// The optimizer's defaults, overridden by `KEY=VALUE` pairs. Unknown
    /// keys, malformed values and values outside the option's range are
    /// errors that list what is accepted; a key given twice must be given
    /// the same value (`rank=4` then `rank=8` is refused, not decided by order).
    pub fn resolve(optimizer: &Optimizer, pairs: &[String]) -> Result<Options> {
        let mut values: BTreeMap<&'static str, String> = optimizer
            .options
            .iter()
            .map(|o| (o.key, o.default.to_string()))
            .collect();
        let mut given: BTreeMap<&'static str, &str> = BTreeMap::new();
        for pair in pairs {
            let invalid = |reason: String| Error::InvalidValue {
                what: "optimizer option",
                value: pair.clone(),
                reason,
            };
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| invalid("write it as KEY=VALUE, such as `rank=128`".to_string()))?;
            let (key, value) = (key.trim(), value.trim());
            let spec = optimizer
                .options
                .iter()
                .find(|o| o.key == key)
                .ok_or_else(|| {
                    let accepted: Vec<String> = optimizer
                        .options
                        .iter()
                        .map(|o| format!("{} (default {})", o.key, o.default))
                        .collect();
                    invalid(if accepted.is_empty() {
                        format!("{} takes no options", optimizer.name)
                    } else {
                        format!("{} accepts {}", optimizer.name, accepted.join(", "))
                    })
                })?;
            spec.kind.check(value).map_err(invalid)?;
            let value = value.to_ascii_lowercase();
            if let Some(earlier) = given.get(spec.key)
                && values.get(spec.key) != Some(&value)
            {
                return Err(invalid(format!(
                    "`{earlier}` was given first; give {} once, or the same value each time",
                    spec.key
                )));
            }
            given.insert(spec.key, pair.as_str());
            values.insert(spec.key, value);
        }
        Ok(Options(values))
    }

    /// The value of `key` as a whole number.
    pub fn count(&self, key: &str) -> Result<u64> {
        let text = self.text(key)?;
        text.parse().map_err(|_| self.bad(key, "a whole number"))
    }

    /// The value of `key` as a real number; `None` for `none`.
    pub fn float(&self, key: &str) -> Result<Option<f64>> {
        match self.text(key)? {
            "none" | "null" => Ok(None),
            text => text
                .parse()
                .map(Some)
                .map_err(|_| self.bad(key, "a number or `none`")),
        }
    }

    /// The value of `key` as a whole number of at least 1 (a rank, a block
    /// size, a head count): zero is an error that names the option.
    pub fn positive_count(&self, key: &str) -> Result<u64> {
        match self.count(key)? {
            0 => Err(self.bad(key, "a whole number of at least 1")),
            value => Ok(value),
        }
    }

    /// Whether the option `key` switches a state on: a flag set to `true`, or
    /// a number other than zero (`momentum=0.9`); `false`, `0` and `none` are off.
    pub fn enabled(&self, key: &str) -> Result<bool> {
        match self.text(key)? {
            "true" => Ok(true),
            "false" | "none" | "null" => Ok(false),
            text => text
                .parse::<f64>()
                .map(|value| value != 0.0)
                .map_err(|_| self.bad(key, "`true`, `false`, a number or `none`")),
        }
    }

    /// The value of a flag that may be left unset (`auto`): `None` then, or
    /// when the optimizer has no such key.
    pub fn choice(&self, key: &str) -> Option<bool> {
        match self.0.get(key).map(String::as_str) {
            Some("true") => Some(true),
            Some("false") => Some(false),
            _ => None,
        }
    }

    /// The value of `key` as a flag; false when the optimizer has no such key.
    pub fn flag(&self, key: &str) -> bool {
        self.0.get(key).is_some_and(|v| v == "true")
    }

    fn text(&self, key: &str) -> Result<&str> {
        self.0
            .get(key)
            .map(String::as_str)
            .ok_or_else(|| Error::InvalidValue {
                what: "optimizer option",
                value: key.to_string(),
                reason: "this optimizer has no such option".to_string(),
            })
    }

    fn bad(&self, key: &str, expected: &str) -> Error {
        Error::InvalidValue {
            what: "optimizer option",
            value: format!("{key}={}", self.0.get(key).cloned().unwrap_or_default()),
            reason: format!("expected {expected}"),
        }
    }
}

impl OptionKind {
    fn check(self, value: &str) -> std::result::Result<(), String> {
        let ok = match self {
            OptionKind::Count => value.parse::<u64>().is_ok(),
            OptionKind::PositiveCount => value.parse::<u64>().is_ok_and(|v| v >= 1),
            OptionKind::Float => {
                value.eq_ignore_ascii_case("none")
                    || value
                        .parse::<f64>()
                        .is_ok_and(|v| v.is_finite() && v >= 0.0)
            }
            OptionKind::Flag => matches!(value.to_ascii_lowercase().as_str(), "true" | "false"),
        };
        if ok {
            Ok(())
        } else {
            Err(match self {
                OptionKind::Count => "expected a whole number".to_string(),
                OptionKind::PositiveCount => "expected a whole number of at least 1".to_string(),
                OptionKind::Float => "expected a non-negative number or `none`".to_string(),
                OptionKind::Flag => "expected `true` or `false`".to_string(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(name: &str, pairs: &[&str]) -> Result<Options> {
        let pairs: Vec<String> = pairs.iter().map(|p| p.to_string()).collect();
        Options::resolve(Optimizer::find(name).unwrap(), &pairs)
    }

    fn reason(name: &str, pairs: &[&str]) -> String {
        match resolve(name, pairs) {
            Err(Error::InvalidValue { reason, .. }) => reason,
            other => panic!("{pairs:?} should be refused, got {other:?}"),
        }
    }

    #[test]
    fn ranks_sizes_and_head_counts_start_at_one() {
        assert_eq!(
            reason("galore-adamw", &["rank=0"]),
            "expected a whole number of at least 1"
        );
        assert!(resolve("galore-adamw", &["rank=1"]).is_ok());
        assert!(resolve("adam-mini", &["n_heads=0"]).is_err());
        // torch's L-BFGS takes history_size=0 (tests/fixtures measure it).
        assert!(resolve("lbfgs", &["history_size=0"]).is_ok());
        assert!(resolve("adamw-8bit", &["min_8bit_size=0"]).is_ok());
    }

    #[test]
    fn a_key_given_twice_needs_the_same_value() {
        assert_eq!(
            reason("galore-adamw", &["rank=4", "rank=8"]),
            "`rank=4` was given first; give rank once, or the same value each time"
        );
        let same = resolve("galore-adamw", &["rank=4", "rank = 4"]).unwrap();
        assert_eq!(same.count("rank").unwrap(), 4);
        assert!(resolve("adamw", &["fused=true", "fused=TRUE"]).is_ok());
    }
}
