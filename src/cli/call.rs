//! A command asked with a dict, not a command line: the Python package's
//! front door. Each keyword is a flag's long name (`micro-batch`) with its
//! value as text, `true` for a switch or a list for a repeated flag. Which
//! flags a command takes, which take a value and which refuse each other
//! is read from clap's definition (not run on an argv), and said in the
//! shell's words; the `estimate` flags become the typed request as the web
//! API's JSON does ([`super::flags::Flags::request`], whose messages for a
//! bad value are the shell's), the command's own flags its typed
//! arguments, and the same function as the binary's answers. No command
//! line is built or parsed.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::OnceLock;

use clap::{Arg, ArgAction, CommandFactory};
use serde_json::Value;

use super::args::{
    CatalogueArgs, CheckArgs, Cli, Command, CompareArgs, EstimateArgs, FitArgs, ModelsArgs,
    OutputArgs, ParamsArgs, PlanArgs, TechniquesArgs, TimelineArgs,
};
use super::check::Checked;
use super::flags::Flags;
use crate::request::flags::at_least_one;
use crate::request::{EstimateRequest, ModelSource};

/// The commands [`call`] answers; any other is left to the command line.
pub const CALLED: &[&str] = &[
    "estimate",
    "timeline",
    "techniques",
    "fit",
    "check",
    "plan",
    "models",
    "optimizers",
    "precisions",
    "devices",
    "params",
    "schema",
    "compare",
];

/// The flags of each command that are its own, not an `estimate` flag: long
/// names, read into the command's typed arguments.
const OWN: &[(&str, &[&str])] = &[
    ("timeline", &["output", "events"]),
    ("techniques", &["output"]),
    ("check", &["strict", "allow-tight"]),
    (
        "plan",
        &[
            "allow",
            "headroom",
            "top",
            "global-batch",
            "jobs",
            "exhaustive",
        ],
    ),
    ("models", &["format", "verbose"]),
    ("optimizers", &["format", "verbose"]),
    ("precisions", &["format", "verbose"]),
    ("devices", &["format", "verbose"]),
    ("params", &["tensors", "task", "image-size", "format"]),
    (
        "compare",
        &[
            "params",
            "model",
            "optimizer",
            "precision",
            "capacity",
            "device",
            "swap",
            "swap-at",
            "slice-params",
            "slice-precision",
        ],
    ),
];

/// The command line's definition, built on first use (only read here).
static DEFINITION: OnceLock<clap::Command> = OnceLock::new();

/// One keyword's value: text, a switch, or the values of a repeated flag.
type Given = Option<Vec<OsString>>;

/// Answers `command` with `positional` arguments and the keywords
/// `options` (long flag names, in the caller's order): the report, the
/// warnings and the exit status `trainmem COMMAND --flags` gives. `Err`
/// holds the one-line message the binary prints after `error: `.
pub fn call(
    command: &str,
    positional: &[OsString],
    options: &[(String, Value)],
) -> Result<Checked, String> {
    let definition = DEFINITION.get_or_init(|| {
        // Built, so that an argument says itself as the shell does (`--micro-batch <B>`).
        let mut definition = Cli::command();
        definition.build();
        definition
    });
    let Some(sub) = definition
        .find_subcommand(command)
        .filter(|_| CALLED.contains(&command))
    else {
        return Err(format!(
            "command `{command}` is not answered from keywords; accepted: {}, or trainmem.run for any command",
            CALLED.join(", ")
        ));
    };
    let own = OWN
        .iter()
        .find(|(name, _)| *name == command)
        .map_or(&[][..], |(_, own)| own);
    // `check` takes its files, `params` its one model; the others none.
    let takes = match command {
        "check" => positional.len(),
        "params" => 1,
        _ => 0,
    };
    if let Some(extra) = positional.get(takes) {
        return Err(unexpected(&extra.to_string_lossy()));
    }
    let mut mine: Vec<(&str, Given)> = Vec::new();
    let mut typed: Vec<(String, Option<OsString>)> = Vec::new();
    let mut given: Vec<&Arg> = Vec::new();
    for (key, value) in options {
        let Some(arg) = sub.get_arguments().find(|a| {
            a.get_long() == Some(key)
                || a.get_all_aliases()
                    .is_some_and(|aliases| aliases.contains(&key.as_str()))
        }) else {
            return Err(unexpected(&format!("--{key}")));
        };
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
        if own.contains(&long) {
            mine.push((long, value));
            continue;
        }
        let flag = format!("--{long}");
        match value {
            None => typed.push((flag, None)),
            Some(values) => typed.extend(values.into_iter().map(|v| (flag.clone(), Some(v)))),
        }
    }
    // In the definition's order, as the shell's matches list them (`plan`
    // prints its base flags so).
    let position = |flag: &str| {
        sub.get_arguments()
            .position(|a| a.get_long() == flag.strip_prefix("--"))
    };
    typed.sort_by_key(|(flag, _)| position(flag));
    let mut flags = Flags::default();
    for (flag, value) in &typed {
        flags.set(flag, value.clone());
    }
    let own = Own(mine);
    let command = match command {
        "schema" => Command::Schema,
        "params" => Command::Params(ParamsArgs {
            model: positional.first().cloned(),
            tensors: own.switch("tensors"),
            task: own.text("task"),
            image_size: own
                .text("image-size")
                .map(|text| whole(&text, "image-size"))
                .transpose()?,
            output: own.output(),
        }),
        "models" => Command::Models(ModelsArgs {
            output: own.output(),
            verbose: own.switch("verbose"),
        }),
        "optimizers" | "precisions" | "devices" => {
            let args = CatalogueArgs {
                output: own.output(),
                verbose: own.switch("verbose"),
            };
            match command {
                "optimizers" => Command::Optimizers(args),
                "precisions" => Command::Precisions(args),
                _ => Command::Devices(args),
            }
        }
        "compare" => {
            // The run's groups as the typed request reads them; the
            // comparison's own flags over `trainmem compare`'s defaults.
            let request = flags.request().map_err(|e| e.to_string())?;
            let mut args = CompareArgs::defaults().map_err(|e| e.to_string())?;
            if let Some(params) = own.text("params") {
                args.params = params;
            }
            args.model = own.path("model").map(PathBuf::into_os_string);
            for (long, field) in [
                ("optimizer", &mut args.optimizers),
                ("precision", &mut args.precision),
                ("swap", &mut args.swap),
                ("slice-params", &mut args.slice_params),
                ("slice-precision", &mut args.slice_precision),
            ] {
                if let Some(text) = own.text(long) {
                    *field = text;
                }
            }
            args.capacity = own.text("capacity");
            args.device = own.text("device");
            args.swap_at = own.text("swap-at");
            args.parallel = request.flags.parallel;
            args.workload = request.flags.workload;
            args.report = request.flags.report;
            Command::Compare(args)
        }
        _ => {
            let estimate = estimate_args(flags.request().map_err(|e| e.to_string())?);
            match command {
                "estimate" => Command::Estimate(estimate),
                "timeline" => Command::Timeline(TimelineArgs {
                    estimate,
                    output: own.path("output"),
                    events: own.switch("events"),
                }),
                "techniques" => Command::Techniques(TechniquesArgs {
                    estimate,
                    output: own.path("output"),
                }),
                "fit" => Command::Fit(fit_args(estimate)),
                "check" => {
                    if positional.is_empty() {
                        return Err(MISSING_FILES.to_string());
                    }
                    let args = CheckArgs {
                        files: positional.iter().map(PathBuf::from).collect(),
                        strict: own.switch("strict"),
                        estimate,
                        allow_tight: own.switch("allow-tight"),
                    };
                    return super::check::run_typed(&args, &typed).map_err(|e| e.to_string());
                }
                _ => {
                    let args = PlanArgs {
                        estimate,
                        allow: own.text("allow"),
                        headroom: own.text_or(sub, "headroom"),
                        top: own.number(sub, "top")?,
                        global_batch: own
                            .text("global-batch")
                            .map(|text| whole(&text, "global-batch"))
                            .transpose()?,
                        jobs: own.number(sub, "jobs")?,
                        exhaustive: own.switch("exhaustive"),
                    };
                    return super::plan::run_typed(&args, &typed)
                        .map(answered)
                        .map_err(|e| e.to_string());
                }
            }
        }
    };
    super::run(Cli {
        command: Some(command),
        // Python reads HF_HUB_OFFLINE as the shell does; `--offline` is the shell's.
        offline: false,
    })
    .map(answered)
    .map_err(|error| error.to_string())
}

/// A report with no warnings, exit 0.
fn answered(report: String) -> Checked {
    Checked {
        report,
        warnings: Vec::new(),
        exit: 0,
    }
}

/// What the shell says when `check` has no file.
const MISSING_FILES: &str = "the following required arguments were not provided: <FILE>...; For more information, try '--help'.";

/// A count of at least 1 given to `--long`, refused as the shell refuses it.
fn whole(text: &str, long: &str) -> Result<u64, String> {
    at_least_one(text).map_err(|reason| format!("invalid value `{text}` for --{long}: {reason}"))
}

/// A whole number given to `--long` (`--top`, `--jobs`).
fn own_number<T: std::str::FromStr>(text: &str, long: &str) -> Result<T, String> {
    text.parse()
        .map_err(|_| format!("invalid value `{text}` for --{long}: must be a whole number"))
}

/// What the shell says of an argument the command does not take.
fn unexpected(argument: &str) -> String {
    format!("unexpected argument '{argument}' found; For more information, try '--help'.")
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

/// The command's own keywords, checked.
struct Own<'a>(Vec<(&'a str, Given)>);

impl Own<'_> {
    fn get(&self, long: &str) -> Option<&Given> {
        self.0
            .iter()
            .rev()
            .find(|(l, _)| *l == long)
            .map(|(_, v)| v)
    }

    fn switch(&self, long: &str) -> bool {
        self.get(long).is_some()
    }

    fn text(&self, long: &str) -> Option<String> {
        self.get(long)
            .and_then(Option::as_ref)
            .and_then(|values| values.last())
            .map(|value| value.to_string_lossy().into_owned())
    }

    fn path(&self, long: &str) -> Option<PathBuf> {
        self.get(long)
            .and_then(Option::as_ref)
            .and_then(|values| values.last())
            .map(PathBuf::from)
    }

    fn output(&self) -> OutputArgs {
        OutputArgs {
            format: self.text("format"),
        }
    }

    /// The value given, else the flag's declared default.
    fn text_or(&self, sub: &clap::Command, long: &str) -> String {
        self.text(long).unwrap_or_else(|| default_of(sub, long))
    }

    fn number(&self, sub: &clap::Command, long: &str) -> Result<usize, String> {
        own_number(&self.text_or(sub, long), long)
    }
}

/// The default clap declares for `long` (empty if none).
fn default_of(sub: &clap::Command, long: &str) -> String {
    sub.get_arguments()
        .find(|a| a.get_long() == Some(long))
        .and_then(|a| a.get_default_values().first())
        .map(|v| v.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The `estimate` flags of a typed request, as the command line fills them.
fn estimate_args(request: EstimateRequest) -> EstimateArgs {
    let flags = request.flags;
    EstimateArgs {
        params: request.params,
        model: match request.model {
            Some(ModelSource::Path(path)) => Some(path),
            _ => None,
        },
        training: flags.training,
        parallel: flags.parallel,
        finetune: flags.finetune,
        workload: flags.workload,
        capacity: flags.capacity,
        speed: flags.speed,
        report: flags.report,
    }
}

/// `fit`'s flags: `estimate`'s but the speed model's, which `fit` does not take.
fn fit_args(estimate: EstimateArgs) -> FitArgs {
    FitArgs {
        model: estimate.model,
        params: estimate.params,
        training: estimate.training,
        parallel: estimate.parallel,
        finetune: estimate.finetune,
        workload: estimate.workload,
        capacity: estimate.capacity,
        report: estimate.report,
    }
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
        let given: Vec<OsString> = positional.iter().map(OsString::from).collect();
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
        same_error("estimate", &[gpt2.clone(), ("no-such-flag", json!("1"))]);
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
            let given: Vec<OsString> = vit.iter().map(OsString::from).collect();
            assert_eq!(
                call("params", &given, &options(&pairs)).map(|c| c.report),
                run_args(&words("params", &vit, &pairs)).map(|c| c.report),
                "{size}"
            );
        }
    }

    #[test]
    fn other_commands_are_named() {
        let error = call("plot", &[], &[]).err().unwrap();
        assert!(
            error.contains("`plot`") && error.contains("accepted: "),
            "{error}"
        );
    }
}
