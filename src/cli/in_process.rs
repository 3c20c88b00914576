//! A command line run inside the calling process: what the `trainmem`
//! binary prints, for a front door that is not a shell (the Python package).
//!
//! The arguments are parsed by the same clap definition and answered by the
//! same [`respond`]; an error is the one line the binary prints after
//! `error: `, without that prefix.

use std::ffi::OsString;
use std::sync::{Mutex, OnceLock};

use clap::error::ErrorKind as ClapErrorKind;
use clap::{CommandFactory, FromArgMatches};

use super::{Checked, Cli, respond, usage_error};

/// The command line's definition, built on first use.
static COMMAND: OnceLock<Mutex<clap::Command>> = OnceLock::new();

/// Runs `trainmem ARGUMENTS...` (without the program name) and returns the
/// report, the warnings and the exit status the binary would give; `--help`
/// and `--version` answer their text as the report. `Err` holds the one-line
/// message the binary prints to stderr, without its `error: ` prefix: a
/// usage mistake clap caught or the library's own error.
pub fn run_args(arguments: &[OsString]) -> Result<Checked, String> {
    let mut argv: Vec<OsString> = Vec::with_capacity(arguments.len() + 1);
    argv.push(OsString::from("trainmem"));
    argv.extend(arguments.iter().cloned());
    let parsed = {
        // Building clap's command tree costs more than most estimates, so it
        // is built once and reused (clap's `_mut` parse leaves it reusable);
        // a panic while it was held cannot leave it half-changed, as a parse
        // only reads it.
        let mut command = COMMAND
            .get_or_init(|| Mutex::new(Cli::command()))
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        command.try_get_matches_from_mut(&argv)
    }
    .and_then(|matches| Cli::from_arg_matches(&matches).map(|cli| (cli, matches)));
    let (cli, matches) = match parsed {
        Ok(parsed) => parsed,
        Err(error)
            if matches!(
                error.kind(),
                ClapErrorKind::DisplayHelp | ClapErrorKind::DisplayVersion
            ) =>
        {
            return Ok(Checked {
                report: error.to_string(),
                warnings: Vec::new(),
                exit: 0,
            });
        }
        Err(error) => {
            let line = usage_error(&error, &argv);
            return Err(line
                .strip_prefix("error: ")
                .map_or_else(|| line.clone(), str::to_string));
        }
    };
    respond(cli, &matches).map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(text: &str) -> String {
        match run_args(&args(text)) {
            Ok(checked) => panic!("`{text}` answered {}", checked.report),
            Err(error) => error,
        }
    }

    fn args(text: &str) -> Vec<OsString> {
        text.split_whitespace().map(OsString::from).collect()
    }

    #[test]
    fn estimate_answers_the_report() {
        let checked = run_args(&args("estimate --params 7B --format json")).unwrap();
        let report: serde_json::Value = serde_json::from_str(&checked.report).unwrap();
        // fp32 Adam by default: 4 copies of 4 bytes per parameter.
        assert_eq!(report["memory"]["total"], 112_000_000_000u64);
        assert_eq!(checked.exit, 0);
    }

    #[test]
    fn library_errors_are_one_line_without_prefix() {
        let error = error_of("estimate --params 7B --optimizer adamm");
        assert!(error.starts_with("unknown optimizer `adamm`"), "{error}");
        assert!(!error.contains('\n'));
    }

    #[test]
    fn usage_errors_are_one_line_without_prefix() {
        let error = error_of("estimate --params 7B --gpus -1");
        assert!(
            error.starts_with("invalid value `-1` for --gpus"),
            "{error}"
        );
        let error = error_of("estimat");
        assert!(
            !error.starts_with("error:") && !error.contains('\n'),
            "{error}"
        );
    }

    #[test]
    fn the_reused_definition_answers_each_line_afresh() {
        let first = run_args(&args("estimate --params 7B --format json")).unwrap();
        assert!(run_args(&args("estimate --params 7B --gpus 0")).is_err());
        let again = run_args(&args("estimate --params 7B --format json")).unwrap();
        assert_eq!(first.report, again.report);
        let other = run_args(&args("estimate --params 1B --format json")).unwrap();
        assert_ne!(first.report, other.report);
    }

    #[test]
    fn help_is_a_report() {
        let checked = run_args(&args("estimate --help")).unwrap();
        assert!(checked.report.contains("--micro-batch"));
    }
}
