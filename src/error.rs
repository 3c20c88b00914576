//! The one error type of the library.
//!
//! Every message is lowercase, names the offending value in backticks and says
//! what would be accepted, on one line, so the binary can print it as
//! `error: ...` and exit with status 2.

use std::borrow::Cow;

use thiserror::Error;

/// Everything that can go wrong between raw input and an [`Estimate`](crate::Estimate).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum Error {
    /// A parameter count that is not a positive whole number.
    #[error(
        "invalid parameter count `{}`: {reason}; accepted: a whole number such as `6738415616`, `13e9`, or with a suffix K, M, B or T such as `124M`, `1.5B`, `7B`, `1T`",
        shown(.input)
    )]
    InvalidCount { input: String, reason: String },

    /// A memory size that cannot be read.
    #[error(
        "invalid size `{}`: {reason}; accepted: a number with a unit, decimal (B, KB, MB, GB, TB, PB, EB = 10^3n bytes) or binary (KiB, MiB, GiB, TiB, PiB, EiB = 2^10n bytes), such as `80GB`, `80GiB` or `141 GB`",
        shown(.input)
    )]
    InvalidSize { input: String, reason: String },

    /// A name that is not in one of the catalogues.
    #[error("unknown {kind} `{}`{} (accepted: {accepted})", shown(.name), suggestion.as_ref().map(|s| format!("; did you mean `{}`?", shown(s))).unwrap_or_default())]
    UnknownName {
        kind: &'static str,
        name: String,
        suggestion: Option<String>,
        accepted: String,
    },

    /// A value that is well-formed but not allowed where it was given.
    #[error("invalid {what} `{}`: {reason}", shown(.value))]
    InvalidValue {
        what: &'static str,
        value: String,
        reason: String,
    },

    /// A value the command needs was not given.
    #[error("missing {what}: {accepted}")]
    Missing {
        what: &'static str,
        accepted: String,
    },

    /// A file that cannot be read or does not hold what it should: a
    /// truncated or malformed safetensors header, a broken index, a missing
    /// shard, unreadable JSON. `path` names the file.
    #[error("`{}`: {problem}", cut(.path, MAX_PATH_CHARS))]
    File { path: String, problem: String },

    /// A config.json key whose value cannot describe a model.
    #[error("config.json key `{}`: {problem}", shown(.key))]
    InvalidConfig { key: String, problem: String },

    /// A config.json whose `model_type` trainmem does not know.
    #[error(
        "unsupported model_type `{}` (supported: {supported}); for another architecture, point --model at its .safetensors file or index, or give --params, or price any PyTorch module through the Python package (`pip install .`, then `trainmem.estimate(module=model, ...)`)",
        shown(.model_type)
    )]
    UnsupportedModelType {
        model_type: String,
        supported: String,
    },

    /// Arithmetic on bytes or counts that would not fit in 64 bits.
    #[error(
        "{what} overflows 64-bit arithmetic (more than 18.4 exabytes or elements); no real training run is that large"
    )]
    Overflow { what: String },

    /// A hub id that the Hugging Face hub did not answer for (gated, not
    /// found, timed out, unreachable, or an answer refused as hostile).
    #[error("hub id `{}`: {problem}", shown(.id))]
    Hub { id: String, problem: String },

    /// A flag's value refused as the shell's parser refuses it
    /// (`invalid value `-1` for --gpus: must be a whole number ≥ 1`): the
    /// same line whether the value was typed or given from Python.
    #[error("invalid value `{}` for {flag}: {reason}", shown(.value))]
    FlagValue {
        flag: &'static str,
        value: String,
        reason: String,
    },
}

/// The library's result type.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An overflow of the named quantity.
    pub fn overflow(what: impl Into<String>) -> Error {
        Error::Overflow { what: what.into() }
    }
}

/// The most characters of a value a message or a report echoes: enough to
/// recognise any real value, so that a megabyte scalar is not said back
/// whole on a one-line error.
pub const SHOWN_CHARS: usize = 80;

/// The most characters of a path said: Linux's `PATH_MAX`, so that every
/// path the system can open is named whole.
pub const MAX_PATH_CHARS: usize = 4096;

/// What follows a value that was cut.
pub const ELLIPSIS: &str = "...";

/// `value` as messages echo it: whole up to [`SHOWN_CHARS`] characters,
/// else its first [`SHOWN_CHARS`] and an ellipsis.
pub fn shown(value: &str) -> Cow<'_, str> {
    cut(value, SHOWN_CHARS)
}

/// `text` whole up to `most` characters, else its first `most` and an
/// ellipsis. Reads at most `most` characters of it.
pub fn cut(text: &str, most: usize) -> Cow<'_, str> {
    match text.char_indices().nth(most) {
        Some((end, _)) => Cow::Owned(format!("{}{ELLIPSIS}", &text[..end])),
        None => Cow::Borrowed(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_echoed_within_a_bound() {
        assert_eq!(shown("7B"), "7B");
        let long = "x".repeat(10_000_000);
        let error = Error::InvalidCount {
            input: long.clone(),
            reason: "not a number".to_string(),
        };
        let message = error.to_string();
        assert!(message.len() < 500, "{} bytes", message.len());
        assert!(message.contains(&format!("`{}{ELLIPSIS}`", "x".repeat(SHOWN_CHARS))));
        let name = Error::UnknownName {
            kind: "model",
            name: long.clone(),
            suggestion: Some(long.clone()),
            accepted: "gpt2".to_string(),
        };
        assert!(name.to_string().len() < 500);
        // Characters, not bytes: a cut never splits one.
        assert_eq!(cut("ééé", 2), format!("éé{ELLIPSIS}"));
        assert_eq!(cut("ééé", 3), "ééé");
    }
}
