//! The `estimate` flags typed on a command line, for `check` and `plan`:
//! read from clap's matches into the ordered [`Flags`] those commands
//! assemble (defined with the typed request, in `request/`, as the web
//! API's plan builds them too).

use std::ffi::OsString;

use clap::ArgMatches;
use clap::parser::ValueSource;
use clap::{Args, CommandFactory};

use super::args::{Cli, EstimateArgs};
pub use crate::request::flag_list::Flags;

/// The `estimate` flags typed on the command line of `subcommand`, as
/// given: its arguments that are [`EstimateArgs`]' (the subcommand's own,
/// such as `plan --top`, are left out by being declared elsewhere, with no
/// list of them to keep).
pub fn explicit(matches: &ArgMatches, subcommand: &str) -> Vec<(String, Option<OsString>)> {
    let command = Cli::command();
    let Some(found) = command.find_subcommand(subcommand) else {
        return Vec::new();
    };
    let estimate = EstimateArgs::augment_args(clap::Command::new("estimate"));
    let mut out = Vec::new();
    for argument in found.get_arguments() {
        let id = argument.get_id().as_str();
        let Some(long) = argument.get_long() else {
            continue;
        };
        let is_estimate = estimate
            .get_arguments()
            .any(|other| other.get_long() == Some(long));
        if !is_estimate || matches.value_source(id) != Some(ValueSource::CommandLine) {
            continue;
        }
        let flag = format!("--{long}");
        if argument.get_action().takes_values() {
            if let Some(values) = matches.get_raw(id) {
                for value in values {
                    out.push((flag.clone(), Some(value.to_os_string())));
                }
            }
        } else {
            out.push((flag, None));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::args::EstimateArgs;
    use crate::request::{ModelSource, RunFlags};

    /// The `estimate` flags alone: the shell's parser, to compare with.
    #[derive(Debug, Parser)]
    #[command(name = "trainmem estimate", no_binary_name = true)]
    struct Shell {
        #[command(flatten)]
        estimate: EstimateArgs,
    }

    fn flags(pairs: &[(&str, Option<&str>)]) -> Flags {
        let mut flags = Flags::default();
        for (flag, value) in pairs {
            flags.set(flag, value.map(OsString::from));
        }
        flags
    }

    fn error_of(pairs: &[(&str, Option<&str>)]) -> String {
        match flags(pairs).request() {
            Ok(request) => panic!("{pairs:?} gave {request:?}"),
            Err(error) => error.to_string(),
        }
    }

    /// The request is the one `trainmem estimate` with the same flags
    /// parses: every group's fields, model and count alike.
    #[test]
    fn the_request_is_the_shells() {
        let pairs: &[(&str, Option<&str>)] = &[
            ("--model", Some("llama-3.2-1b")),
            ("--optimizer", Some("adamw")),
            ("--precision", Some("mixed-bf16")),
            ("--micro-batch", Some("4")),
            ("--seq-len", Some("2048")),
            ("--grad-accumulation", Some("8")),
            ("--gpus", Some("8")),
            ("--zero", Some("3")),
            ("--recompute", Some("full")),
            ("--lora-rank", Some("16")),
            ("--lora-targets", Some("all-linear")),
            ("--quantize", Some("nf4")),
            ("--double-quant", None),
            ("--freeze", Some("embed")),
            ("--freeze", Some("norm")),
            ("--offload-activations", None),
            ("--device", Some("h100-80gb")),
        ];
        let flags = flags(pairs);
        let request = flags.request().unwrap();
        let shell = Shell::try_parse_from(flags.words()).unwrap().estimate;
        let json = |f: RunFlags| serde_json::to_value(f).unwrap();
        let from_shell = RunFlags {
            training: shell.training,
            parallel: shell.parallel,
            finetune: shell.finetune,
            workload: shell.workload,
            capacity: shell.capacity,
            speed: shell.speed,
            report: shell.report,
        };
        assert_eq!(json(request.flags), json(from_shell));
        assert_eq!(
            request.model,
            Some(ModelSource::Path(OsString::from("llama-3.2-1b")))
        );
        assert_eq!(request.params, shell.params);
    }

    /// A value the request refuses is named with the command line's flag,
    /// the value in backticks (which `check` traces to the config's key).
    #[test]
    fn errors_name_the_flag() {
        let message = error_of(&[("--params", Some("7B")), ("--gpus", Some("0"))]);
        assert!(
            message.contains("--gpus") && message.contains("`0`"),
            "{message}"
        );
        let message = error_of(&[("--params", Some("7B")), ("--lora-dtype", Some("bf16"))]);
        assert!(
            message.contains("`--lora-rank`") && message.contains("`--lora-dtype`"),
            "{message}"
        );
        let message = error_of(&[("--params", Some("7B")), ("--micro-batch", Some("two"))]);
        assert!(
            message.contains("--micro-batch") && message.contains("`two`"),
            "{message}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_model_path_keeps_its_bytes() {
        use std::os::unix::ffi::OsStringExt;
        let path = OsString::from_vec(b"/tmp/\xff.json".to_vec());
        let mut flags = Flags::default();
        flags.set("--model", Some(path.clone()));
        assert_eq!(
            flags.request().unwrap().model,
            Some(ModelSource::Path(path))
        );
    }
}
