//! The one error type of the library.
//!
//! Every message is lowercase, names the offending value in backticks and says
//! what would be accepted, on one line, so the binary can print it as
//! `error: ...` and exit with status 2.

use thiserror::Error;

/// Everything that can go wrong between raw input and an [`Estimate`](crate::Estimate).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum Error {
    /// A parameter count that is not a positive whole number.
    #[error(
        "invalid parameter count `{input}`: {reason}; accepted: a whole number such as `6738415616`, `13e9`, or with a suffix K, M, B or T such as `124M`, `1.5B`, `7B`, `1T`"
    )]
    InvalidCount { input: String, reason: String },

    /// A memory size that cannot be read.
    #[error(
        "invalid size `{input}`: {reason}; accepted: a number with a unit, decimal (B, KB, MB, GB, TB, PB, EB = 10^3n bytes) or binary (KiB, MiB, GiB, TiB, PiB, EiB = 2^10n bytes), such as `80GB`, `80GiB` or `141 GB`"
    )]
    InvalidSize { input: String, reason: String },

    /// A name that is not in one of the catalogues.
    #[error("unknown {kind} `{name}`{} (accepted: {accepted})", suggestion.as_ref().map(|s| format!("; did you mean `{s}`?")).unwrap_or_default())]
    UnknownName {
        kind: &'static str,
        name: String,
        suggestion: Option<String>,
        accepted: String,
    },

    /// A value that is well-formed but not allowed where it was given.
    #[error("invalid {what} `{value}`: {reason}")]
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
    #[error("`{path}`: {problem}")]
    File { path: String, problem: String },

    /// A config.json key whose value cannot describe a model.
    #[error("config.json key `{key}`: {problem}")]
    InvalidConfig { key: String, problem: String },

    /// A config.json whose `model_type` trainmem does not know.
    #[error(
        "unsupported model_type `{model_type}` (supported: {supported}); for another architecture, point --model at its .safetensors file or index, or give --params, or price any PyTorch module through the Python package (`pip install .`, then `trainmem.estimate(module=model, ...)`)"
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
}

/// The library's result type.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An overflow of the named quantity.
    pub fn overflow(what: impl Into<String>) -> Error {
        Error::Overflow { what: what.into() }
    }
}
