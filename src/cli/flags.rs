//! `estimate` settings as an ordered list keyed by flag: what `check`
//! assembles from launch configs and `plan` from its layouts. They become
//! the typed request as the web API's JSON does ([`EstimateRequest::from_door`],
//! no command line built or parsed again), so that the command line printed
//! for them is exactly what was priced.

use std::ffi::OsString;

use clap::ArgMatches;
use clap::parser::ValueSource;
use clap::{Args, CommandFactory};
use serde_json::{Map, Value};

use super::args::{Cli, EstimateArgs};
use crate::error::Result;
use crate::request::{Door, EstimateRequest, ModelSource};

/// Flags that may be given more than once; each other flag has one value,
/// the last one set.
const REPEATABLE: &[&str] = &["--freeze", "--optimizer-option"];

/// Pairs of flags of which only one may be given: the later one wins.
const EXCLUSIVE: &[(&str, &str)] = &[
    ("--zero", "--fsdp"),
    ("--capacity", "--device"),
    ("--model", "--params"),
];

/// An ordered set of `estimate` flags, each with its value (none for a switch).
#[derive(Debug, Clone, Default)]
pub struct Flags(pub Vec<(String, Option<OsString>)>);

impl Flags {
    pub fn set(&mut self, flag: &str, value: Option<OsString>) {
        for (a, b) in EXCLUSIVE {
            let other = if flag == *a {
                b
            } else if flag == *b {
                a
            } else {
                continue;
            };
            self.0.retain(|(f, _)| f != other);
        }
        if !REPEATABLE.contains(&flag)
            && let Some(slot) = self.0.iter_mut().find(|(f, _)| f == flag)
        {
            slot.1 = value;
            return;
        }
        self.0.push((flag.to_string(), value));
    }

    pub fn get(&self, flag: &str) -> Option<String> {
        self.0
            .iter()
            .rev()
            .find(|(f, _)| f == flag)
            .and_then(|(_, v)| v.as_ref())
            .map(|v| v.to_string_lossy().into_owned())
    }

    pub fn has(&self, flag: &str) -> bool {
        self.0.iter().any(|(f, _)| f == flag)
    }

    pub fn with(&self, changes: &[(&str, &str)]) -> Flags {
        let mut next = self.clone();
        for (flag, value) in changes {
            next.set(flag, (!value.is_empty()).then(|| OsString::from(value)));
        }
        next
    }

    /// The words of the equivalent command line, to print it
    /// ([`Flags::command`], `plan`'s rows); nothing parses them.
    pub fn words(&self) -> Vec<OsString> {
        let mut out = Vec::new();
        for (flag, value) in &self.0 {
            out.push(OsString::from(flag));
            if let Some(value) = value {
                out.push(value.clone());
            }
        }
        out
    }

    /// `trainmem estimate --a 1 --b`, for the report.
    pub fn command(&self) -> String {
        let mut words = vec!["trainmem estimate".to_string()];
        for argument in self.words() {
            let text = argument.to_string_lossy().into_owned();
            if text.is_empty()
                || text.contains(|c: char| c.is_whitespace() || "'\"$`\\|&;<>()*?".contains(c))
            {
                words.push(format!("'{}'", text.replace('\'', r"'\''")));
            } else {
                words.push(text);
            }
        }
        words.join(" ")
    }

    /// The typed request these settings make: their JSON form (each flag's
    /// long name a key, a switch `true`, a repeated flag a list) read by
    /// [`EstimateRequest::from_door`] as the command line spells its
    /// fields. `--model` stays the path or name it was given, bytes and all.
    pub fn request(&self) -> Result<EstimateRequest> {
        let mut object = Map::new();
        let mut model = None;
        for (flag, value) in &self.0 {
            if flag == "--model" {
                model = value.clone();
                continue;
            }
            let key = flag.trim_start_matches("--").to_string();
            let value = value.as_ref().map_or(Value::Bool(true), |v| {
                Value::String(v.to_string_lossy().into_owned())
            });
            if REPEATABLE.contains(&flag.as_str()) {
                match object
                    .entry(key)
                    .or_insert_with(|| Value::Array(Vec::new()))
                {
                    Value::Array(items) => items.push(value),
                    other => *other = Value::Array(vec![value]),
                }
            } else {
                object.insert(key, value);
            }
        }
        let mut request = EstimateRequest::from_door(&object, Door::CommandLine)?;
        if let Some(model) = model {
            request.model = Some(ModelSource::Path(model));
        }
        Ok(request)
    }
}

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
    use crate::request::RunFlags;

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
