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
                let usage = flag;
                let flag = flag.split_whitespace().next().unwrap_or(flag);
                let reason = match (error.source(), error.get(ContextKind::ValidValue)) {
                    (Some(source), _) => source.to_string(),
                    (None, Some(ContextValue::Strings(valid))) if !valid.is_empty() => {
                        format!("accepted: {}", valid.join(", "))
                    }
                    // A flag given bare (`--micro-batch` at the end of the
                    // line, or `micro_batch=True` from Python): clap reports
                    // an empty value with an empty list of values it takes.
                    _ if value.is_empty() => {
                        return escape(&format!(
                            "error: {flag} needs a value; accepted: `{usage}`, see --help"
                        ))
                        .into_owned();
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
        ErrorKind::UnknownArgument => {
            if let Some(line) = without_a_command(arguments) {
                return escape(&line).into_owned();
            }
        }
        _ => {}
    }
    // clap quotes what it did not expect (an argument of any length).
    escape(&cut(&one_line(&error.render().to_string()), MAX_PATH_CHARS)).into_owned()
}

/// The refusal of flags given before any command (`trainmem --micro-batch
/// 4`): flags belong to a command, and only `trainmem` alone means
/// `compare`. The hint repeats the command line with the command that
/// takes the first flag put first: `estimate`, or `compare` for its own.
fn without_a_command(arguments: &[OsString]) -> Option<String> {
    let first = arguments.get(1)?.to_str()?;
    if !first.starts_with('-') {
        return None;
    }
    let flag = first.split('=').next().unwrap_or(first);
    let long = flag.trim_start_matches('-');
    let cli = <super::Cli as clap::CommandFactory>::command();
    let knows = |command: &str| {
        cli.find_subcommand(command).is_some_and(|sub| {
            sub.get_arguments().any(|arg| {
                arg.get_long() == Some(long)
                    || arg.get_all_aliases().is_some_and(|a| a.contains(&long))
            })
        })
    };
    // A list of sizes (`--params 1B,13B`) is compare's; estimate takes one.
    let a_list = arguments
        .get(2)
        .is_some_and(|value| value.to_string_lossy().contains(','));
    let command = if knows("compare") && (!knows("estimate") || a_list) {
        "compare"
    } else {
        "estimate"
    };
    let rest: Vec<String> = arguments[1..]
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    Some(format!(
        "error: `{flag}` was given without a command; flags come after one (trainmem COMMAND --flags; `trainmem -h` lists the commands); hint: put a command first: trainmem {command} {}",
        rest.join(" ")
    ))
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
    fn a_bare_flag_that_takes_a_value_says_so() {
        use clap::Parser as _;
        let arguments: Vec<OsString> = ["trainmem", "estimate", "--params", "7B", "--micro-batch"]
            .iter()
            .map(OsString::from)
            .collect();
        let error = crate::cli::Cli::try_parse_from(&arguments).unwrap_err();
        let line = usage_error(&error, &arguments);
        assert_eq!(
            line,
            "error: --micro-batch needs a value; accepted: `--micro-batch <B>`, see --help"
        );
    }

    #[test]
    fn clap_errors_are_one_line() {
        let rendered = "error: a value is required\n\nUsage: trainmem estimate\n\nFor more information, try '--help'.\n";
        assert_eq!(
            one_line(rendered),
            "error: a value is required; For more information, try '--help'."
        );
    }
}
