//! A command asked with a dict, not a command line: the Python package's
//! front door (and the web API's for `plan`). Each keyword is a flag's long
//! name (`micro-batch`) with its value as text, `true` for a switch or a
//! list for a repeated flag; the positional arguments (check's files,
//! params' model, completions' shell) come apart from them.
//!
//! Nothing here lists a command's flags: which flags a command takes, which
//! take a value, their defaults and which refuse each other are read from
//! clap's definition (not run on an argv), and the command's arguments are
//! the clap structs of `args.rs` filled by serde from one JSON object. The
//! flags that price a run go through the typed request as the web API's
//! JSON does ([`super::flags::Flags::request`], whose messages for a bad
//! value are the shell's); the command's own flags are typed by the parser
//! clap declares for them. A flag added to an `Args` struct is taken here
//! with no other change. No command line is built or parsed.

use std::any::TypeId;
use std::ffi::OsString;
use std::sync::OnceLock;

use clap::{Arg, ArgAction, Args, CommandFactory};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::args::{Cli, Command, EstimateArgs};
use super::check::Checked;
use super::flags::Flags;
use crate::catalogue::closest_spelling;
use crate::request::ModelSource;
use crate::request::flags::{ParallelArgs, ReportArgs, WorkloadArgs, at_least_one};

/// The command line's definition, built on first use (only read here):
/// built, so that an argument says itself as the shell does
/// (`--micro-batch <B>`), global flags are on each command and each
/// command's usage line is `trainmem COMMAND`.
fn definition() -> &'static clap::Command {
    static DEFINITION: OnceLock<clap::Command> = OnceLock::new();
    DEFINITION.get_or_init(|| {
        let mut definition = Cli::command();
        definition.build();
        definition
    })
}

/// The commands [`call`] answers: every command of the command line (clap's
/// own `help` command aside: [`help`] gives the text).
pub fn commands() -> Vec<&'static str> {
    definition()
        .get_subcommands()
        .map(clap::Command::get_name)
        .filter(|name| *name != "help")
        .collect()
}

/// The flags of `command` that price a run: the groups of the typed request
/// its arguments flatten, read through [`Flags::request`]. Its other flags
/// are its own. `None`: a command that prices no run.
fn run_flags(command: &str) -> Option<&'static clap::Command> {
    static ESTIMATE: OnceLock<clap::Command> = OnceLock::new();
    static COMPARE: OnceLock<clap::Command> = OnceLock::new();
    match command {
        // EstimateArgs, or (fit) the same less the speed model's flags.
        "estimate" | "timeline" | "techniques" | "check" | "plan" | "fit" => Some(
            ESTIMATE.get_or_init(|| EstimateArgs::augment_args(clap::Command::new("estimate"))),
        ),
        // CompareArgs' groups (plot flattens CompareArgs).
        "compare" | "plot" => Some(COMPARE.get_or_init(|| {
            let command = ParallelArgs::augment_args(clap::Command::new("compare"));
            ReportArgs::augment_args(WorkloadArgs::augment_args(command))
        })),
        _ => None,
    }
}

/// Not a flag a keyword may name: clap's `--help` and `--version`, and the
/// global `--offline`, the shell's (Python reads HF_HUB_OFFLINE as the
/// shell does; a switch would stay on for the whole process).
fn not_a_keyword(arg: &Arg) -> bool {
    matches!(arg.get_id().as_str(), "help" | "version") || arg.is_global_set()
}

/// One keyword's value: text, a switch, or the values of a repeated flag.
type Given = Option<Vec<OsString>>;

/// Answers `command` with `positional` arguments and the keywords
/// `options` (long flag names, in the caller's order): the report, the
/// warnings and the exit status `trainmem COMMAND --flags` gives. `Err`
/// holds a one-line message: the one the binary prints after `error: `
/// for a bad value, and for a keyword or command that does not exist, its
/// name and what is accepted.
pub fn call(
    command: &str,
    positional: &[String],
    options: &[(String, Value)],
) -> Result<Checked, String> {
    let sub = subcommand(command)?;
    let run = run_flags(command);
    let in_run =
        |long: &str| run.is_some_and(|run| run.get_arguments().any(|a| a.get_long() == Some(long)));
    // The command's arguments as serde reads them: each flag's long name
    // (a positional's id) to its typed value.
    let mut object = Map::new();
    let mut typed: Vec<(String, Option<OsString>)> = Vec::new();
    let mut given: Vec<&Arg> = Vec::new();
    for (key, value) in options {
        let arg = keyword(sub, key)?;
        if let Some(other) = given.iter().find(|g| {
            sub.get_arg_conflicts_with(arg).contains(g)
                || sub.get_arg_conflicts_with(g).contains(&arg)
        }) {
            return Err(format!(
                "the argument '{other}' cannot be used with '{arg}'; For more information, try '--help'."
            ));
        }
        given.push(arg);
        let value = checked(arg, key, value)?;
        let long = arg.get_long().unwrap_or(key);
        if in_run(long) {
            let flag = format!("--{long}");
            match value {
                None => typed.push((flag, None)),
                Some(values) => {
                    typed.extend(values.into_iter().map(|v| (flag.clone(), Some(v))));
                }
            }
        } else {
            object.insert(long.to_string(), own_value(arg, long, value)?);
        }
    }
    positionals(sub, positional, &mut object)?;
    // The command's own flags not given, at the defaults clap declares.
    for arg in sub.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if not_a_keyword(arg) || in_run(long) || object.contains_key(long) {
            continue;
        }
        if arg.is_required_set() {
            return Err(missing(arg));
        }
        object.insert(long.to_string(), default_value(arg, long)?);
    }
    if run.is_some() {
        // In the definition's order, as the shell's matches list them
        // (`plan` prints its base flags so).
        let position = |flag: &str| {
            sub.get_arguments()
                .position(|a| a.get_long() == flag.strip_prefix("--"))
        };
        typed.sort_by_key(|(flag, _)| position(flag));
        let mut flags = Flags::default();
        for (flag, value) in &typed {
            flags.set(flag, value.clone());
        }
        let request = flags.request().map_err(|e| e.to_string())?;
        let mut part = match serde_json::to_value(&request.flags) {
            Ok(Value::Object(part)) => part,
            _ => return Err(internal(command, "the run's flags are not a JSON object")),
        };
        part.insert("params".to_string(), request.params.into());
        let model = match request.model {
            Some(ModelSource::Path(path)) => Value::String(path.to_string_lossy().into_owned()),
            _ => Value::Null,
        };
        part.insert("model".to_string(), model);
        // A flag of the command's own by the same name (compare's
        // `--precision`) is the command's.
        for (key, value) in part {
            object.entry(key).or_insert(value);
        }
    }
    // The command itself, as serde names clap's subcommand: `{"plan": {...}}`.
    // A command with no arguments (`schema`) is a unit variant.
    let arguments = if object.is_empty() {
        Value::Null
    } else {
        Value::Object(object)
    };
    let mut tagged = Map::new();
    tagged.insert(sub.get_name().to_string(), arguments);
    let parsed = Command::deserialize(Value::Object(tagged))
        .map_err(|error| internal(command, &error.to_string()))?;
    let answer = match parsed {
        Command::Check(args) => super::check::run_typed(&args, &typed),
        Command::Plan(args) => super::plan::run_typed(&args, &typed).map(answered),
        other => super::run(Cli {
            command: Some(other),
            offline: false,
        })
        .map(answered),
    };
    answer.map_err(|error| error.to_string())
}

/// The help text of `trainmem COMMAND --help` (of `trainmem --help` for
/// `None`; `-h`'s when not `long`), rendered from clap's definition as
/// `--help` renders it: the long form where the command has any long
/// text, else the short one.
pub fn help(command: Option<&str>, long: bool) -> Result<String, String> {
    let mut definition = definition().clone();
    let sub = match command {
        None => &mut definition,
        Some(name) => {
            subcommand(name)?;
            definition
                .find_subcommand_mut(name)
                .ok_or_else(|| unknown_command(name))?
        }
    };
    let text = if long && has_long_help(sub) {
        sub.render_long_help()
    } else {
        sub.render_help()
    };
    Ok(text.to_string())
}

/// Whether `--help` shows `command`'s long help: clap's own rule (its
/// `long_help_exists`, not public): a long about or after-help, or an
/// argument with a long help, a help hidden from one form, or possible
/// values with help. [`tests::help_is_the_shells`] holds it to the shell's.
fn has_long_help(command: &clap::Command) -> bool {
    let long = |arg: &Arg| {
        !arg.is_hide_set()
            && (arg.get_long_help().is_some()
                || arg.is_hide_long_help_set()
                || arg.is_hide_short_help_set()
                || (!arg.is_hide_possible_values_set()
                    && arg
                        .get_possible_values()
                        .iter()
                        .any(|value| !value.is_hide_set() && value.get_help().is_some())))
    };
    command.get_long_about().is_some()
        || command.get_before_long_help().is_some()
        || command.get_after_long_help().is_some()
        || command.get_arguments().any(long)
}

/// The subcommand `command` names, or a message naming it and the commands.
fn subcommand(command: &str) -> Result<&'static clap::Command, String> {
    definition()
        .find_subcommand(command)
        .filter(|sub| sub.get_name() != "help")
        .ok_or_else(|| unknown_command(command))
}

/// `command` named as unknown, with the nearest command and every one.
fn unknown_command(command: &str) -> String {
    crate::error::Error::UnknownName {
        kind: "command",
        name: command.to_string(),
        suggestion: closest_spelling(command, commands()).map(str::to_string),
        accepted: commands().join(", "),
    }
    .to_string()
}

/// The flag `key` names among `sub`'s (its long name or an alias), or a
/// message naming the keyword and the ones `sub` takes.
fn keyword(sub: &'static clap::Command, key: &str) -> Result<&'static Arg, String> {
    let flags = || {
        sub.get_arguments()
            .filter(|a| !not_a_keyword(a))
            .filter_map(Arg::get_long)
    };
    if let Some(arg) = sub.get_arguments().filter(|a| !not_a_keyword(a)).find(|a| {
        a.get_long() == Some(key)
            || a.get_all_aliases()
                .is_some_and(|aliases| aliases.contains(&key))
    }) {
        return Ok(arg);
    }
    Err(crate::error::Error::UnknownName {
        kind: "keyword",
        name: key.to_string(),
        suggestion: closest_spelling(&key.replace('_', "-"), flags()).map(str::to_string),
        accepted: format!(
            "the flags of `trainmem {}`: {}",
            sub.get_name(),
            flags().collect::<Vec<_>>().join(", ")
        ),
    }
    .to_string())
}

/// The positional arguments, each under its argument's id: a list for one
/// that takes several (check's files), else one value each. One that is
/// required and not given is refused as the shell refuses it.
fn positionals(
    sub: &clap::Command,
    positional: &[String],
    object: &mut Map<String, Value>,
) -> Result<(), String> {
    let mut rest = positional;
    for arg in sub.get_positionals() {
        let id = arg.get_id().as_str().to_string();
        let many = matches!(arg.get_action(), ArgAction::Append);
        let taken = if many { rest.len() } else { rest.len().min(1) };
        let (mine, after) = rest.split_at(taken);
        rest = after;
        if mine.is_empty() && arg.is_required_set() {
            return Err(missing(arg));
        }
        let value = if many {
            Value::Array(mine.iter().cloned().map(Value::String).collect())
        } else {
            mine.first().cloned().map_or(Value::Null, Value::String)
        };
        object.insert(id, value);
    }
    match rest.first() {
        Some(extra) => Err(unexpected(extra)),
        None => Ok(()),
    }
}

/// A report with no warnings, exit 0.
fn answered(report: String) -> Checked {
    Checked {
        report,
        warnings: Vec::new(),
        exit: 0,
    }
}

/// A mistake of this door, not of the caller.
fn internal(command: &str, reason: &str) -> String {
    format!(
        "internal error: the keywords of `{command}` did not make its arguments ({reason}); accepted: please report the call"
    )
}

/// What the shell says of a required argument not given (`plot`'s
/// `--output`, `check`'s files).
fn missing(arg: &Arg) -> String {
    format!(
        "the following required arguments were not provided: {arg}; For more information, try '--help'."
    )
}

/// What the shell says of an argument the command does not take.
fn unexpected(argument: &str) -> String {
    format!("unexpected argument '{argument}' found; For more information, try '--help'.")
}

/// The JSON value of one of the command's own flags, typed as the parser
/// clap declares for it: a switch a boolean, a repeated flag a list, a
/// count a number (`u64`: at least 1, the rule of every count, as the typed
/// request holds the run's), any other text (a path, a name, a share).
fn own_value(arg: &Arg, long: &str, given: Given) -> Result<Value, String> {
    let texts = match given {
        None if !arg.get_action().takes_values() => return Ok(Value::Bool(true)),
        // No own flag's value may be left out (`--double-quant`'s may: a run's).
        None => {
            return Err(format!(
                "--{long} needs a value; accepted: `{arg}`, see --help"
            ));
        }
        Some(texts) => texts,
    };
    typed_values(arg, long, &texts)
}

/// The value clap gives `arg` when it is not given.
fn default_value(arg: &Arg, long: &str) -> Result<Value, String> {
    if !arg.get_action().takes_values() {
        return Ok(Value::Bool(false));
    }
    let defaults: Vec<OsString> = arg
        .get_default_values()
        .iter()
        .map(|v| v.to_os_string())
        .collect();
    if defaults.is_empty() && !matches!(arg.get_action(), ArgAction::Append) {
        return Ok(Value::Null);
    }
    typed_values(arg, long, &defaults)
}

fn typed_values(arg: &Arg, long: &str, texts: &[OsString]) -> Result<Value, String> {
    let values = texts
        .iter()
        .map(|text| typed_text(arg, long, &text.to_string_lossy()))
        .collect::<Result<Vec<_>, _>>()?;
    if matches!(arg.get_action(), ArgAction::Append) {
        return Ok(Value::Array(values));
    }
    Ok(values.into_iter().last().unwrap_or(Value::Null))
}

/// `text` as the type of `arg`'s parser.
fn typed_text(arg: &Arg, long: &str, text: &str) -> Result<Value, String> {
    let parser = arg.get_value_parser().type_id();
    if parser == TypeId::of::<u64>() {
        return at_least_one(text)
            .map(Value::from)
            .map_err(|reason| format!("invalid value `{text}` for --{long}: {reason}"));
    }
    for (kind, most) in [
        (TypeId::of::<usize>(), usize::MAX as u64),
        (TypeId::of::<u32>(), u64::from(u32::MAX)),
        (TypeId::of::<u16>(), u64::from(u16::MAX)),
    ] {
        if parser == kind {
            return whole(text, long, most).map(Value::from);
        }
    }
    if parser == TypeId::of::<bool>() {
        return match text {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => Err(format!(
                "invalid value `{text}` for --{long}: accepted: true, false"
            )),
        };
    }
    // String, PathBuf, OsString: text (the door's values are text).
    Ok(Value::String(text.to_string()))
}

/// A whole number from 0 to `most` given to `--long` (`--top`, `--port`).
fn whole(text: &str, long: &str, most: u64) -> Result<u64, String> {
    text.parse::<u64>()
        .ok()
        .filter(|number| *number <= most)
        .ok_or_else(|| {
            format!("invalid value `{text}` for --{long}: must be a whole number from 0 to {most}")
        })
}

/// `value` for `arg` as the command line would give it: `None` for a
/// switch, else its values (the typed request checks them).
fn checked(arg: &Arg, key: &str, value: &Value) -> Result<Given, String> {
    let takes = arg.get_action().takes_values();
    let texts: Vec<OsString> = match value {
        // A switch, or a flag whose value may be left out (`--double-quant`).
        Value::Bool(true) if !takes || arg.get_num_args().is_some_and(|n| n.min_values() == 0) => {
            return Ok(None);
        }
        Value::Bool(true) => {
            return Err(format!(
                "--{key} needs a value; accepted: `{arg}`, see --help"
            ));
        }
        Value::String(text) if !takes => {
            return Err(format!(
                "unexpected value '{text}' for '--{key}' found; no more were expected; For more information, try '--help'."
            ));
        }
        Value::String(text) => vec![OsString::from(text)],
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::String(text) => Ok(OsString::from(text)),
                other => Err(format!(
                    "invalid value `{other}` for --{key}: accepted: text"
                )),
            })
            .collect::<Result<_, _>>()?,
        other => {
            return Err(format!(
                "invalid value `{other}` for --{key}: accepted: text, true for a switch, or a list of texts"
            ));
        }
    };
    if texts.len() > 1 && !matches!(arg.get_action(), ArgAction::Append) {
        return Err(format!(
            "the argument '{arg}' cannot be used multiple times; For more information, try '--help'."
        ));
    }
    Ok(Some(texts))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::cli::run_args;

    /// `(key, value)` pairs from a JSON object, in its order as written.
    fn options(pairs: &[(&str, Value)]) -> Vec<(String, Value)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    /// The words of the same command at the shell, to compare with.
    fn words(command: &str, positional: &[&str], pairs: &[(&str, Value)]) -> Vec<OsString> {
        let mut out = vec![OsString::from(command)];
        out.extend(positional.iter().map(OsString::from));
        for (key, value) in pairs {
            match value {
                Value::Bool(true) => out.push(OsString::from(format!("--{key}"))),
                Value::Array(items) => {
                    for item in items {
                        out.push(OsString::from(format!(
                            "--{key}={}",
                            item.as_str().unwrap()
                        )));
                    }
                }
                other => out.push(OsString::from(format!(
                    "--{key}={}",
                    other.as_str().unwrap()
                ))),
            }
        }
        out
    }

    fn both(
        command: &str,
        positional: &[&str],
        pairs: &[(&str, Value)],
    ) -> (Result<Checked, String>, Result<Checked, String>) {
        let given: Vec<String> = positional.iter().map(|p| p.to_string()).collect();
        (
            call(command, &given, &options(pairs)),
            run_args(&words(command, positional, pairs)),
        )
    }

    fn same(command: &str, positional: &[&str], pairs: &[(&str, Value)]) {
        match both(command, positional, pairs) {
            (Ok(called), Ok(shell)) => {
                let differ = called
                    .report
                    .lines()
                    .zip(shell.report.lines())
                    .find(|(a, b)| a != b);
                assert_eq!(differ, None, "{command} {pairs:?}");
                assert_eq!(called.report, shell.report, "{command} {pairs:?}");
                assert_eq!(called.warnings, shell.warnings);
                assert_eq!(called.exit, shell.exit);
            }
            (called, shell) => panic!(
                "{command} {pairs:?}: called {:?}, shell {:?}",
                called.map(|c| c.report),
                shell.map(|c| c.report)
            ),
        }
    }

    fn same_error(command: &str, pairs: &[(&str, Value)]) {
        match both(command, &[], pairs) {
            (Err(called), Err(shell)) => assert_eq!(called, shell, "{pairs:?}"),
            (called, shell) => panic!(
                "{pairs:?}: called {:?}, shell {:?}",
                called.map(|c| c.report),
                shell.map(|c| c.report)
            ),
        }
    }

    /// The Python package's cases (python/tests/test_command.py): each
    /// command's report from keywords is the shell's, byte for byte.
    #[test]
    fn reports_are_the_shells() {
        let json = ("format", json!("json"));
        same("estimate", &[], &[("model", json!("gpt2")), json.clone()]);
        same(
            "estimate",
            &[],
            &[
                ("model", json!("llama-3.1-8b")),
                ("optimizer", json!("adamw")),
                ("precision", json!("mixed-bf16")),
                ("micro-batch", json!("1")),
                ("seq-len", json!("4096")),
                ("gpus", json!("8")),
                ("zero", json!("3")),
                json.clone(),
            ],
        );
        same(
            "estimate",
            &[],
            &[
                ("model", json!("gpt2")),
                ("micro-batch", json!("2")),
                ("seq-len", json!("512")),
                ("recompute", json!("full")),
                ("recompute-reentrant", json!(true)),
                ("freeze", json!(["wte", "wpe"])),
                json.clone(),
            ],
        );
        same(
            "estimate",
            &[],
            &[
                ("model", json!("llama-3.2-1b")),
                ("lora-rank", json!("16")),
                ("lora-targets", json!("q_proj,v_proj")),
                ("quantize", json!("nf4")),
                ("double-quant", json!(true)),
                ("micro-batch", json!("1")),
                ("seq-len", json!("1024")),
            ],
        );
        let run = [
            ("model", json!("gpt2")),
            ("micro-batch", json!("4")),
            ("seq-len", json!("1024")),
            ("device", json!("h100-80gb")),
            json.clone(),
        ];
        same("timeline", &[], &run);
        same(
            "timeline",
            &[],
            &[&run[..], &[("events", json!(true))]].concat(),
        );
        same("techniques", &[], &run);
        same("fit", &[], &[&run[..1], &run[2..]].concat());
        same(
            "plan",
            &[],
            &[
                ("model", json!("gpt2")),
                ("device", json!("h100-80gb")),
                ("gpus", json!("2")),
                ("seq-len", json!("1024")),
                ("allow", json!("zero,recompute")),
                ("top", json!("3")),
                json.clone(),
            ],
        );
        let config = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/launch/ds-zero1.json"
        );
        same(
            "check",
            &[config],
            &[
                ("model", json!("gpt2")),
                ("device", json!("h100-80gb")),
                ("seq-len", json!("512")),
                json.clone(),
            ],
        );
        same("models", &[], std::slice::from_ref(&json));
        same("devices", &[], &[("verbose", json!(true))]);
        same("params", &["gpt2"], std::slice::from_ref(&json));
        same(
            "params",
            &["bert-base-uncased"],
            &[("tensors", json!(true)), ("task", json!("seq-cls:2"))],
        );
        same("schema", &[], &[]);
        same("compare", &[], std::slice::from_ref(&json));
        same(
            "compare",
            &[],
            &[
                ("params", json!("1B,7B")),
                ("optimizers", json!("adam,adamw-8bit")),
                ("precision", json!("mixed-bf16")),
                ("device", json!("h100-80gb")),
                ("micro-batch", json!("1")),
                ("seq-len", json!("512")),
                ("gpus", json!("2")),
                ("units", json!("gib")),
            ],
        );
        same("compare", &[], &[("model", json!("gpt2")), json.clone()]);
    }

    /// Mistakes get the line the shell prints (python/tests checks it too).
    #[test]
    fn errors_are_the_shells() {
        let gpt2 = ("model", json!("gpt2"));
        same_error("estimate", &[gpt2.clone(), ("optimizer", json!("adamm"))]);
        same_error("estimate", &[gpt2.clone(), ("gpus", json!("-1"))]);
        same_error("estimate", &[gpt2.clone(), ("micro-batch", json!("two"))]);
        same_error("estimate", &[("model", json!("no-such-model"))]);
        same_error(
            "estimate",
            &[("params", json!("7B")), ("micro-batch", json!("1"))],
        );
        same_error(
            "estimate",
            &[("params", json!("7B")), ("micro-batch", json!(true))],
        );
        same_error("estimate", &[gpt2.clone(), ("seq-len", json!(["1", "2"]))]);
        same_error("estimate", &[("params", json!("7B")), gpt2.clone()]);
        same_error("fit", &[gpt2.clone(), ("seq-len", json!("512"))]);
        same_error("plan", &[gpt2, ("global-batch", json!("0"))]);
        let vit = ["vit-base-patch16-224"];
        for size in ["0", "224", "100000"] {
            let pairs = [("image-size", json!(size))];
            let given: Vec<String> = vit.iter().map(|p| p.to_string()).collect();
            assert_eq!(
                call("params", &given, &options(&pairs)).map(|c| c.report),
                run_args(&words("params", &vit, &pairs)).map(|c| c.report),
                "{size}"
            );
        }
    }

    /// The commands the shell answers from words alone, answered from
    /// keywords: a chart on stdout, a completion script, the comparison.
    #[test]
    fn every_command_is_answered() {
        same(
            "plot",
            &[],
            &[("output", json!("-")), ("kind", json!("scaling"))],
        );
        same("completions", &["bash"], &[]);
        same("compare", &[], &[]);
        same("optimizers", &[], &[("verbose", json!(true))]);
        // Every command of the definition is one the door takes.
        let names = commands();
        for name in ["plot", "completions", "serve", "schema", "compare"] {
            assert!(names.contains(&name), "{name}: {names:?}");
        }
        assert!(!names.contains(&"help"));
        // A required argument missing, as the shell says it: check's files,
        // plot's --output, completions' shell.
        for (command, pairs) in [
            ("check", vec![("model", json!("gpt2"))]),
            ("plot", vec![("kind", json!("scaling"))]),
            ("completions", vec![]),
        ] {
            match both(command, &[], &pairs) {
                (Err(called), Err(shell)) => assert_eq!(called, shell, "{command}"),
                (called, shell) => panic!(
                    "{command}: {:?} {:?}",
                    called.map(|c| c.report),
                    shell.map(|c| c.report)
                ),
            }
        }
    }

    /// The own flags of each command come from its clap struct: each given
    /// at a value other than its default changes the answer as the shell's
    /// does (`--top`, `--headroom`, `--verbose`, `--swap`, `--tensors`).
    #[test]
    fn own_flags_are_the_structs() {
        let plan = [
            ("model", json!("gpt2")),
            ("device", json!("h100-80gb")),
            ("gpus", json!("2")),
            ("seq-len", json!("1024")),
            ("allow", json!("zero")),
            ("headroom", json!("20%")),
            ("top", json!("2")),
            ("global-batch", json!("8")),
        ];
        same("plan", &[], &plan);
        same(
            "compare",
            &[],
            &[
                ("swap", json!("adam,sgd")),
                ("swap-at", json!("7B")),
                ("slice-params", json!("1B")),
                ("slice-precision", json!("fp32")),
                ("capacity", json!("40GB")),
            ],
        );
        same(
            "check",
            &[concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/fixtures/launch/ds-zero1.json"
            )],
            &[
                ("model", json!("gpt2")),
                ("device", json!("h100-80gb")),
                ("seq-len", json!("512")),
                ("strict", json!(true)),
                ("allow-tight", json!(true)),
            ],
        );
        let error = call("plan", &[], &options(&[("top", json!("many"))]))
            .err()
            .unwrap();
        assert!(
            error.contains("`many`") && error.contains("--top"),
            "{error}"
        );
    }

    /// An unknown command or keyword: one line naming it, the nearest
    /// name and what is accepted.
    #[test]
    fn unknown_names_say_what_is_accepted() {
        let error = call("estimat", &[], &[]).err().unwrap();
        assert!(
            error.contains("`estimat`")
                && error.contains("did you mean `estimate`")
                && error.contains("accepted: ")
                && error.contains("plot"),
            "{error}"
        );
        let error = call("estimate", &[], &options(&[("micro-bach", json!("1"))]))
            .err()
            .unwrap();
        assert!(
            error.contains("`micro-bach`")
                && error.contains("did you mean `micro-batch`")
                && error.contains("accepted: the flags of `trainmem estimate`: ")
                && !error.contains('\n'),
            "{error}"
        );
        // The shell's global switch is not a keyword.
        let error = call("estimate", &[], &options(&[("offline", json!(true))]))
            .err()
            .unwrap();
        assert!(error.contains("`offline`"), "{error}");
    }

    /// `help` is the shell's `--help`, from clap's definition.
    #[test]
    fn help_is_the_shells() {
        let commands = [
            "estimate", "check", "plot", "serve", "plan", "params", "schema",
        ];
        for (flag, long) in [("--help", true), ("-h", false)] {
            for command in commands {
                let shell = run_args(&[OsString::from(command), OsString::from(flag)])
                    .unwrap()
                    .report;
                assert_eq!(
                    help(Some(command), long).unwrap(),
                    shell,
                    "{command} {flag}"
                );
            }
            let shell = run_args(&[OsString::from(flag)]).unwrap().report;
            assert_eq!(help(None, long).unwrap(), shell, "{flag}");
        }
        assert!(help(Some("nope"), true).unwrap_err().contains("`nope`"));
    }
}
