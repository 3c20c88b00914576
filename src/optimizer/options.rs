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
    /// A whole number: `rank=128`.
    Count,
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
    /// keys and malformed values are errors that list what is accepted.
    pub fn resolve(optimizer: &Optimizer, pairs: &[String]) -> Result<Options> {
        let mut values: BTreeMap<&'static str, String> = optimizer
            .options
            .iter()
            .map(|o| (o.key, o.default.to_string()))
            .collect();
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
            values.insert(spec.key, value.to_ascii_lowercase());
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
                OptionKind::Float => "expected a non-negative number or `none`".to_string(),
                OptionKind::Flag => "expected `true` or `false`".to_string(),
            })
        }
    }
}
