//! Command-line mistakes that clap catches, as one `error: ...` line in the
//! style of the library's own errors.

use std::error::Error as _;
use std::ffi::OsString;

use clap::error::{ContextKind, ContextValue, ErrorKind};

use crate::error::{MAX_PATH_CHARS, cut, shown};
use crate::render::escape;

/// The line to print for a usage error: a flag's invalid value named in
/// backticks with its rule (`invalid value `-1` for --gpus: must be a whole
/// number ≥ 1`), an argument that is not UTF-8 named as far as it can be
/// read, anything else as clap says it, joined onto one line. `arguments`
/// is the command line as the operating system passed it.
pub fn usage_error(error: &clap::Error, arguments: &[OsString]) -> String {
    match error.kind() {
        ErrorKind::ValueValidation | ErrorKind::InvalidValue => {
            let text = |kind| match error.get(kind) {
                Some(ContextValue::String(text)) => Some(text.as_str()),
                _ => None,
            };
            if let (Some(flag), Some(value)) = (
                text(ContextKind::InvalidArg),
                text(ContextKind::InvalidValue),
            ) {
                let flag = flag.split_whitespace().next().unwrap_or(flag);
                let reason = match (error.source(), error.get(ContextKind::ValidValue)) {
                    (Some(source), _) => source.to_string(),
                    (None, Some(ContextValue::Strings(valid))) => {
                        format!("accepted: {}", valid.join(", "))
                    }
                    _ => "see --help".to_string(),
                };
                return escape(&format!(
                    "error: invalid value `{}` for {flag}: {reason}",
                    shown(value)
                ))
                .into_owned();
            }
        }
        ErrorKind::InvalidUtf8 => {
            if let Some(argument) = arguments.iter().find(|a| a.to_str().is_none()) {
                return escape(&format!(
                    "error: the argument `{}` is not valid UTF-8 (shown with \u{fffd} for the bytes that are not); file names (--model, params MODEL, --output) may be any bytes, other values must be text",
                    cut(&argument.to_string_lossy(), MAX_PATH_CHARS)
                ))
                .into_owned();
            }
        }
        _ => {}
    }
    // clap quotes what it did not expect (an argument of any length).
    escape(&cut(&one_line(&error.render().to_string()), MAX_PATH_CHARS)).into_owned()
}

/// clap's multi-line usage error as one line: the error, its tip and where
/// help is (what `main.rs` prints, and what the web API answers).
pub(crate) fn one_line(rendered: &str) -> String {
    let mut line = String::new();
    for part in rendered.lines().map(str::trim) {
        if part.is_empty() || part.starts_with("Usage:") {
            continue;
        }
        if !line.is_empty() {
            line += if line.ends_with(':') { " " } else { "; " };
        }
        line += part;
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_errors_are_one_line() {
        let rendered = "error: a value is required\n\nUsage: trainmem estimate\n\nFor more information, try '--help'.\n";
        assert_eq!(
            one_line(rendered),
            "error: a value is required; For more information, try '--help'."
        );
    }
}
