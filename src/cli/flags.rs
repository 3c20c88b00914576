//! `estimate` flags as an ordered list: what `check` assembles from launch
//! configs and `plan` from its layouts, parsed by the same `estimate`
//! parser, so that a printed command line is exactly what was priced.

use std::ffi::OsString;

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, Parser};

use super::args::{Cli, EstimateArgs};
use crate::error::{Error, Result};

/// The `estimate` flags alone, to parse the assembled command line.
#[derive(Debug, Parser)]
#[command(name = "trainmem estimate", no_binary_name = true)]
pub struct EstimateCommand {
    #[command(flatten)]
    pub estimate: EstimateArgs,
}

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

    pub fn arguments(&self) -> Vec<OsString> {
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
        for argument in self.arguments() {
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

    /// The parsed `estimate` arguments these flags spell.
    pub fn parse(&self) -> Result<EstimateArgs> {
        EstimateCommand::try_parse_from(self.arguments())
            .map(|c| c.estimate)
            .map_err(|error| {
                // clap's message as the command line says it: one line, the
                // value cut to a bounded length.
                let text = super::usage_error(&error, &[]);
                let first = text
                    .split("; For more information")
                    .next()
                    .unwrap_or_default()
                    .trim_start_matches("error: ")
                    .to_string();
                Error::InvalidValue {
                    what: "settings",
                    value: self.command(),
                    reason: first,
                }
            })
    }
}

/// The `estimate` flags typed on the command line of `subcommand`, as
/// given, less the subcommand's `own` flags (long names without dashes).
pub fn explicit(
    matches: &ArgMatches,
    subcommand: &str,
    own: &[&str],
) -> Vec<(String, Option<OsString>)> {
    let command = Cli::command();
    let Some(found) = command.find_subcommand(subcommand) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for argument in found.get_arguments() {
        let id = argument.get_id().as_str();
        let Some(long) = argument.get_long() else {
            continue;
        };
        if own.contains(&long) || matches.value_source(id) != Some(ValueSource::CommandLine) {
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
