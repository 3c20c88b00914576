//! The typed request the front doors share.
//!
//! `trainmem estimate` (clap) and the web API's `POST /api/estimate` (JSON)
//! both build one [`EstimateRequest`]: a model source and the run's flags
//! in their groups ([`RunFlags`], each group deriving clap's `Args` and
//! serde's traits on the same struct). [`EstimateRequest::resolve`] then
//! turns it into a model and a setup, once, for both. No front door goes
//! through another's text: the API never builds a command line.
//!
//! JSON keys are the flags' long names in kebab-case (`micro-batch`,
//! `optimizer-option`, `lora-rank`); the snake_case spelling of the same
//! name (`micro_batch`) is accepted as the same key, and giving both is
//! refused as a key given twice. A switch takes `true` or `false`, a flag
//! with a value a string or a number, a repeatable flag a list (or one
//! value). `null` means "not given". The model is `model` (a preset name;
//! the web reads no files) or `config` (a config.json held in memory, as an
//! object), or `params` (a bare count).

pub mod change;
pub mod flag_list;
pub mod flags;
pub mod plan;
pub mod resolve;
pub mod resolver;
pub mod run;
pub mod techniques;

pub use change::{Category, Change, Slot};

pub use flags::{
    CapacityArgs, FineTuneArgs, OutputArgs, ParallelArgs, ReportArgs, SpeedArgs, TECHNIQUES,
    TrainingArgs, WorkloadArgs, at_least_one,
};

use std::ffi::OsString;
use std::sync::OnceLock;

use clap::{ArgAction, Args, FromArgMatches};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::catalogue::{self, closest_spelling};
use crate::error::{Error, Result};
use crate::estimate::Setup;
use crate::format::Format;
use crate::input::{
    PRESETS, load_model_os, pasted_model, preset_model, with_image_size, with_task,
};
use crate::model::Model;
use crate::units::UnitSystem;

/// Where the model of a request comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelSource {
    /// A preset by name (`trainmem models`): read from the binary, never
    /// from a file.
    Preset(String),
    /// A config.json held in memory (pasted on the web page), read by the
    /// same architecture code as a file.
    Config(Value),
    /// What `--model` names on the command line: a file, a folder, a preset
    /// or a hub id. The command line only: JSON cannot give it.
    Path(OsString),
    /// A hub id (`meta-llama/Llama-3.1-8B`), resolved as `--model` resolves
    /// one (the local cache, the hub, a preset) and never as a path: the
    /// server's `model` key for a client on the same machine.
    Hub(String),
}

/// The front door a request came through: how a message spells its fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Door {
    /// The web API's JSON body: `micro-batch`.
    Json,
    /// The command line, and `check`'s launch configs merged under it:
    /// `--micro-batch` (`check` adds the config's own key to a message
    /// about a value a file set).
    CommandLine,
}

impl Door {
    /// The field `long` (a flag's long name, a JSON key) as this door
    /// spells it: `micro-batch` or `--micro-batch`.
    pub fn spell(self, long: &'static str) -> &'static str {
        match self {
            Door::Json => long,
            Door::CommandLine => dashed()
                .iter()
                .find(|(key, _)| *key == long)
                .map_or(long, |(_, flag)| flag.as_str()),
        }
    }
}

/// Each key with its command-line spelling (`micro-batch`,
/// `--micro-batch`), built once.
fn dashed() -> &'static [(&'static str, String)] {
    static DASHED: OnceLock<Vec<(&'static str, String)>> = OnceLock::new();
    DASHED.get_or_init(|| keys().into_iter().map(|k| (k, format!("--{k}"))).collect())
}

/// Every flag of a priced run except the model's, in their groups.
#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub struct RunFlags {
    #[command(flatten)]
    #[serde(flatten)]
    pub training: TrainingArgs,
    #[command(flatten)]
    #[serde(flatten)]
    pub parallel: ParallelArgs,
    #[command(flatten)]
    #[serde(flatten)]
    pub finetune: FineTuneArgs,
    #[command(flatten)]
    #[serde(flatten)]
    pub workload: WorkloadArgs,
    #[command(flatten)]
    #[serde(flatten)]
    pub capacity: CapacityArgs,
    #[command(flatten)]
    #[serde(flatten)]
    pub speed: SpeedArgs,
    #[command(flatten)]
    #[serde(flatten)]
    pub report: ReportArgs,
}

/// One priced run, as any front door asks for it.
#[derive(Debug, Clone)]
pub struct EstimateRequest {
    /// The model, unless `params` gives a bare count.
    pub model: Option<ModelSource>,
    /// A bare parameter count (`7B`) instead of a model.
    pub params: Option<String>,
    /// Everything else.
    pub flags: RunFlags,
}

/// The key of a preset name.
pub const MODEL: &str = "model";
/// The key of a pasted config.json.
pub const CONFIG: &str = "config";
/// The key of a bare parameter count.
pub const PARAMS: &str = "params";

impl<'de> Deserialize<'de> for EstimateRequest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let object = Map::<String, Value>::deserialize(deserializer)?;
        EstimateRequest::from_json(&object).map_err(serde::de::Error::custom)
    }
}

impl EstimateRequest {
    /// The request a JSON object asks for (see the module's documentation
    /// for its keys). Numbers are held to the command line's rule (a whole
    /// number of at least 1), names and sizes are checked when the request
    /// is resolved, exactly as the command line's are, and the flags the
    /// command line refuses together are refused together.
    pub fn from_json(object: &Map<String, Value>) -> Result<EstimateRequest> {
        EstimateRequest::from_door(object, Door::Json)
    }

    /// The request a JSON object asks for, its fields spelled in messages
    /// as `door` spells them. From [`Door::CommandLine`], `model` is what
    /// `--model` names (a path, a preset or a hub id), not a preset alone.
    pub fn from_door(object: &Map<String, Value>, door: Door) -> Result<EstimateRequest> {
        let mut merged = defaults()?.clone();
        let mut given: Vec<&'static str> = Vec::new();
        // The keys with a value (`null` is "not given").
        let mut set: Vec<&'static str> = Vec::new();
        let (mut named, mut config, mut params) = (None, None, None);
        for (key, value) in object {
            let long = key_named(key)?;
            if given.contains(&long) {
                return Err(invalid(
                    door.spell(long),
                    key,
                    "the key is given twice (kebab-case and snake_case spell the same key); give it once",
                ));
            }
            given.push(long);
            if value.is_null() {
                continue;
            }
            set.push(long);
            match long {
                MODEL if door == Door::CommandLine => {
                    let spec = scalar(door.spell(MODEL), value)?;
                    named = Some(ModelSource::Path(OsString::from(spec)));
                }
                MODEL => named = Some(model_name(value)?),
                CONFIG => config = Some(config_object(value)?),
                PARAMS if value.is_array() => {
                    return Err(invalid(
                        door.spell(PARAMS),
                        value,
                        "takes one value, not a list",
                    ));
                }
                PARAMS => params = Some(scalar(door.spell(PARAMS), value)?),
                _ => {
                    let typed = flag_value(long, value, &merged, door)?;
                    merged.insert(long.to_string(), typed);
                }
            }
        }
        refuse_together(&set, door)?;
        let flags: RunFlags =
            serde_json::from_value(Value::Object(merged)).map_err(|e| Error::InvalidValue {
                what: "request",
                value: "the JSON object".to_string(),
                reason: e.to_string(),
            })?;
        if flags.finetune.lora_rank.is_none()
            && let Some(lora) = set
                .iter()
                .find(|k| k.starts_with("lora-") && **k != "lora-rank")
        {
            let example = match door {
                Door::Json => "{\"lora-rank\": 16}",
                Door::CommandLine => "--lora-rank 16",
            };
            return Err(Error::Missing {
                what: door.spell("lora-rank"),
                accepted: format!(
                    "`{}` sets up LoRA adapters: give `{}` too, such as {example}",
                    door.spell(lora),
                    door.spell("lora-rank"),
                ),
            });
        }
        let model = match (named, config) {
            (Some(_), Some(_)) => {
                return Err(Error::InvalidValue {
                    what: "model",
                    value: "`model` and `config`".to_string(),
                    reason: "give one model: a preset name as `model`, or a pasted config.json as `config`".to_string(),
                });
            }
            (Some(named), None) => Some(named),
            (None, Some(config)) => Some(ModelSource::Config(config)),
            (None, None) => None,
        };
        if let (Some(model), Some(_)) = (&model, &params) {
            let key = match model {
                ModelSource::Config(_) => CONFIG,
                _ => MODEL,
            };
            return Err(Error::InvalidValue {
                what: "request",
                value: format!("`params` with `{key}`"),
                reason: format!(
                    "`params` cannot be combined with `{key}`: give a bare count as `params`, or a model as `model` or `config`"
                ),
            });
        }
        Ok(EstimateRequest {
            model,
            params,
            flags,
        })
    }

    /// The request with every flag at the command line's default.
    pub fn with_model(model: Option<ModelSource>, params: Option<String>) -> Result<Self> {
        Ok(EstimateRequest {
            model,
            params,
            flags: serde_json::from_value(Value::Object(defaults()?.clone())).map_err(|e| {
                Error::InvalidValue {
                    what: "request",
                    value: "defaults".to_string(),
                    reason: e.to_string(),
                }
            })?,
        })
    }

    /// The model, setup, format and units the request asks for.
    pub fn resolve(&self) -> Result<(Model, Setup, Format, UnitSystem)> {
        // The model first: without one nothing else matters.
        let model = model_of(
            self.params.as_deref(),
            self.model.as_ref(),
            &self.flags.workload,
        )?;
        let (mut setup, steps, format, units) = resolve_flags(&self.flags, &model)?;
        let model = steps.apply(model)?;
        finish_setup(&self.flags, &mut setup)?;
        Ok((model, setup, format, units))
    }
}

/// The first part of the resolution of `flags` for `model` (the model of
/// the request's source): the format and units, the setup before its
/// speed, and the steps that make the model ([`run::ModelSteps`]). The
/// caller applies the steps, then [`finish_setup`]: the sequence of
/// [`EstimateRequest::resolve`], which [`resolver::Resolver`] shares.
fn resolve_flags(
    flags: &RunFlags,
    model: &Model,
) -> Result<(Setup, run::ModelSteps, Format, UnitSystem)> {
    let (format, units) = resolve::report(&flags.report, flags.capacity.capacity.as_deref())?;
    let parallelism = resolve::parallelism(&flags.parallel)?;
    let mut setup = resolve::setup(
        &flags.training,
        resolve::capacity(&flags.capacity)?,
        parallelism,
    )?;
    let steps = run::resolve_lone(
        model,
        &mut setup,
        &flags.workload,
        &flags.parallel,
        Some(&flags.finetune),
    )?;
    Ok((setup, steps, format, units))
}

/// The last part of the resolution: the step's speed on the setup's layout.
fn finish_setup(flags: &RunFlags, setup: &mut Setup) -> Result<()> {
    setup.speed = resolve::speed(&flags.speed, &flags.capacity, &setup.parallelism)?;
    setup.step.virtual_stages = flags.speed.virtual_stages;
    Ok(())
}

/// What `--model` takes, for the messages that ask for one.
pub const MODEL_ACCEPTED: &str = "a preset such as `llama-3.1-8b` (`trainmem models` lists them), a config.json, a model folder, a .safetensors file or a hub id such as `meta-llama/Llama-3.1-8B`";

/// The model of a bare count or a model source, built for `--task` and
/// `--image-size`.
pub fn model_of(
    params: Option<&str>,
    model: Option<&ModelSource>,
    workload: &WorkloadArgs,
) -> Result<Model> {
    let task = resolve::task(workload.task.as_deref())?;
    let model = match (params, model) {
        (_, Some(ModelSource::Path(spec))) => load_model_os(spec)?,
        (_, Some(ModelSource::Preset(name))) => {
            preset_model(catalogue::find(MODEL, name, PRESETS)?)?
        }
        (_, Some(ModelSource::Config(config))) => pasted_model(config)?,
        (_, Some(ModelSource::Hub(id))) => crate::input::resolve_hub_id(id)?.load()?,
        (Some(count), None) => Model::flat(count.parse()?),
        (None, None) => {
            return Err(Error::Missing {
                what: "model",
                accepted: format!(
                    "give --model MODEL, {MODEL_ACCEPTED}; or --params N, a bare parameter count such as `7B`"
                ),
            });
        }
    };
    let model = match task {
        Some(task) => with_task(model, task)?,
        None => model,
    };
    let model = match workload.image_size {
        Some(image_size) => with_image_size(model, image_size)?,
        None => model,
    };
    // litgpt's GPT has its own head where the config ties it.
    match resolve::implementation(workload)? {
        crate::architecture::Implementation::Litgpt => crate::input::with_separate_head(model),
        _ => Ok(model),
    }
}

/// The clap definition of the run flags, built once: their long names are
/// the JSON keys, and their value parsers check JSON values exactly as they
/// check the command line's.
fn command() -> &'static clap::Command {
    static COMMAND: OnceLock<clap::Command> = OnceLock::new();
    COMMAND.get_or_init(|| {
        let mut command = RunFlags::augment_args(clap::Command::new("estimate"));
        command.build();
        command
    })
}

/// Every flag at the command line's default, as JSON: what clap gives a
/// run none of whose flags were typed.
fn defaults() -> Result<&'static Map<String, Value>> {
    static DEFAULTS: OnceLock<std::result::Result<Map<String, Value>, String>> = OnceLock::new();
    DEFAULTS
        .get_or_init(|| {
            let matches = command()
                .clone()
                .try_get_matches_from(["estimate"])
                .map_err(|e| e.to_string())?;
            let flags = RunFlags::from_arg_matches(&matches).map_err(|e| e.to_string())?;
            match serde_json::to_value(flags).map_err(|e| e.to_string())? {
                Value::Object(map) => Ok(map),
                _ => Err("the flags are not a JSON object".to_string()),
            }
        })
        .as_ref()
        .map_err(|reason| Error::InvalidValue {
            what: "request",
            value: "defaults".to_string(),
            reason: format!("internal error: {reason}"),
        })
}

/// The keys a request takes: the model's, then every run flag's long name.
pub fn keys() -> Vec<&'static str> {
    [MODEL, CONFIG, PARAMS]
        .into_iter()
        .chain(command().get_arguments().filter_map(|a| a.get_long()))
        .filter(|k| !matches!(*k, "help" | "version"))
        .collect()
}

/// A flag of a run, as clap declares it: for the web page's controls.
#[derive(Debug, Clone)]
pub struct FlagInfo {
    /// `micro-batch`: the JSON key and the long flag.
    pub name: &'static str,
    /// What it means, from the help text.
    pub help: String,
    /// `N`, `SIZE`, `NAME`.
    pub value_name: Option<String>,
    /// A switch (`--fused`) rather than a flag with a value.
    pub switch: bool,
    /// May be given several times (`--optimizer-option`).
    pub repeatable: bool,
    /// The command line's default, if any, as JSON.
    pub default: Value,
}

/// The model's keys, then every run flag in clap's order.
pub fn flag_list() -> Vec<FlagInfo> {
    let defaults = defaults().ok();
    let model = |name, help: &str, value_name: &str| FlagInfo {
        name,
        help: help.to_string(),
        value_name: Some(value_name.to_string()),
        switch: false,
        repeatable: false,
        default: Value::Null,
    };
    let models = [
        model(
            MODEL,
            "A preset name (`trainmem models` lists them).",
            "MODEL",
        ),
        model(
            CONFIG,
            "A config.json, pasted: the object or its text.",
            "CONFIG",
        ),
        model(
            PARAMS,
            "A bare parameter count instead of a model: 124M, 1.5B, 7B.",
            "N",
        ),
    ];
    models
        .into_iter()
        .chain(command().get_arguments().filter_map(|arg| {
            let name = arg.get_long()?;
            if matches!(name, "help" | "version") {
                return None;
            }
            Some(FlagInfo {
                name,
                help: arg.get_help().map(ToString::to_string).unwrap_or_default(),
                value_name: arg
                    .get_value_names()
                    .and_then(|names| names.first())
                    .map(ToString::to_string),
                switch: !arg.get_action().takes_values(),
                repeatable: matches!(arg.get_action(), ArgAction::Append),
                default: defaults
                    .and_then(|d| d.get(name).cloned())
                    .unwrap_or(Value::Null),
            })
        }))
        .collect()
}

/// The flag a JSON key names, or why none does.
fn key_named(key: &str) -> Result<&'static str> {
    let name = key.trim().to_ascii_lowercase().replace('_', "-");
    let keys = keys();
    if let Some(found) = keys.iter().find(|k| **k == name) {
        return Ok(found);
    }
    Err(Error::UnknownName {
        kind: "key",
        name: key.to_string(),
        suggestion: closest_spelling(&name, keys.iter().copied()).map(str::to_string),
        accepted: keys.join(", "),
    })
}

fn invalid(what: &'static str, value: impl ToString, reason: impl Into<String>) -> Error {
    Error::InvalidValue {
        what,
        value: value.to_string(),
        reason: reason.into(),
    }
}

/// A string or a number, as text.
fn scalar(long: &'static str, value: &Value) -> Result<String> {
    match value {
        Value::String(text) => Ok(text.clone()),
        Value::Number(number) => Ok(number.to_string()),
        other => Err(invalid(
            long,
            other,
            "takes a string or a number, such as \"7B\"",
        )),
    }
}

/// A hub id (`owner/name`, never read as a path), else a preset by its
/// canonical name.
fn model_name(value: &Value) -> Result<ModelSource> {
    match value.as_str().map(str::trim) {
        Some(text) if crate::input::is_hub_id(text) => Ok(ModelSource::Hub(text.to_string())),
        _ => preset_name(value).map(ModelSource::Preset),
    }
}

/// A preset's canonical name; anything that looks like a path is refused,
/// since a web request reads no files.
fn preset_name(value: &Value) -> Result<String> {
    let text = scalar(MODEL, value)?;
    let lowered = text.to_ascii_lowercase();
    if text.contains(['/', '\\'])
        || text.contains("..")
        || lowered.ends_with(".json")
        || lowered.ends_with(".safetensors")
    {
        return Err(invalid(
            MODEL,
            &text,
            "a request reads no files: give a preset name (`trainmem models`), or the config.json itself as `config`",
        ));
    }
    Ok(catalogue::find(MODEL, &text, PRESETS)?.name.to_string())
}

/// A pasted config.json: an object (or its text).
fn config_object(value: &Value) -> Result<Value> {
    let config = match value {
        Value::String(text) => serde_json::from_str(text)
            .map_err(|e| invalid(CONFIG, "the pasted text", format!("not valid JSON: {e}")))?,
        other => other.clone(),
    };
    if !config.is_object() {
        return Err(invalid(
            CONFIG,
            "the pasted value",
            "a config.json must hold a JSON object, such as {\"model_type\": \"llama\", ...}",
        ));
    }
    Ok(config)
}

/// The value a flag given bare takes (`--double-quant`).
const BARE_ON: &str = "on";

/// The JSON value of flag `long` as its group's field takes it: a switch a
/// boolean, a repeatable flag a list of strings, a numeric field a whole
/// number of at least 1 (the rule of the command line's numeric parser,
/// `at_least_one`), any other a string.
fn flag_value(
    long: &'static str,
    value: &Value,
    merged: &Map<String, Value>,
    door: Door,
) -> Result<Value> {
    let command = command();
    let what = door.spell(long);
    let Some(arg) = command.get_arguments().find(|a| a.get_long() == Some(long)) else {
        return Err(invalid(what, value, "not a flag of a run"));
    };
    let takes_values = arg.get_action().takes_values();
    if !takes_values {
        return match value {
            Value::Bool(_) => Ok(value.clone()),
            other => Err(invalid(what, other, "a switch: give true or false")),
        };
    }
    if matches!(arg.get_action(), ArgAction::Append) {
        let items = match value {
            Value::Array(items) => items.clone(),
            other => vec![other.clone()],
        };
        let texts = items
            .iter()
            .map(|item| scalar(what, item))
            .collect::<Result<Vec<_>>>()?;
        return Ok(Value::Array(texts.into_iter().map(Value::String).collect()));
    }
    let text = match value {
        // A flag whose value may be left out (`--double-quant`): true is
        // the flag given bare, false the flag not given.
        Value::Bool(on) if arg.get_num_args().is_some_and(|n| n.min_values() == 0) => {
            if !on {
                return Ok(merged.get(long).cloned().unwrap_or(Value::Null));
            }
            BARE_ON.to_string()
        }
        Value::Array(_) => {
            return Err(invalid(what, value, "takes one value, not a list"));
        }
        other => scalar(what, other)?,
    };
    // The field holds a string or a number: whichever its group takes.
    let mut trial = merged.clone();
    trial.insert(long.to_string(), Value::String(text.clone()));
    if serde_json::from_value::<RunFlags>(Value::Object(trial)).is_ok() {
        return Ok(Value::String(text));
    }
    // Every numeric flag is a count, a degree or a size: at least 1, as
    // the command line's parser says (a 0 that a later check names, such as
    // `virtual-stages`, is refused here with the same reason).
    match at_least_one(&text) {
        Ok(number) => Ok(Value::from(number)),
        Err(reason) if door == Door::CommandLine => Err(Error::FlagValue {
            flag: what,
            value: text,
            reason,
        }),
        Err(reason) => Err(invalid(what, &text, reason)),
    }
}

/// Refuses flags the command line refuses together (`capacity` with
/// `device`, `zero` with `fsdp`), as clap declares them.
fn refuse_together(set: &[&'static str], door: Door) -> Result<()> {
    let command = command();
    for arg in command.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if !set.contains(&long) {
            continue;
        }
        for other in command.get_arg_conflicts_with(arg) {
            if let Some(other_long) = other.get_long()
                && set.contains(&other_long)
            {
                let (long, other_long) = (door.spell(long), door.spell(other_long));
                return Err(Error::InvalidValue {
                    what: "request",
                    value: format!("`{long}` with `{other_long}`"),
                    reason: format!(
                        "they cannot be given together: give `{long}` or `{other_long}`"
                    ),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(value: Value) -> Result<EstimateRequest> {
        EstimateRequest::from_json(value.as_object().unwrap())
    }

    #[test]
    fn every_flag_is_a_key_and_every_key_has_a_default() {
        let defaults = defaults().unwrap();
        let keys = keys();
        for key in defaults.keys() {
            assert!(keys.contains(&key.as_str()), "{key}");
        }
        for key in &keys[3..] {
            assert!(defaults.contains_key(*key), "{key}");
        }
    }

    #[test]
    fn defaults_are_the_command_lines() {
        let flags = EstimateRequest::with_model(None, None).unwrap().flags;
        assert_eq!(flags.training.optimizer, "adam");
        assert_eq!(flags.parallel.gpus, 1);
        assert_eq!(flags.workload.recompute, "none");
        assert_eq!(flags.speed.virtual_stages, 1);
    }

    #[test]
    fn values_take_strings_numbers_and_lists() {
        let r = request(json!({"params": 7, "micro_batch": "2", "seq-len": 512, "gpus": 8, "zero": 3,
            "optimizer-option": "fused=true", "freeze": ["a", "b"], "double-quant": true, "lora-rank": 8}))
        .unwrap();
        assert_eq!(r.params.as_deref(), Some("7"));
        assert_eq!(r.flags.workload.micro_batch, Some(2));
        assert_eq!(r.flags.workload.seq_len, Some(512));
        assert_eq!(r.flags.parallel.zero.as_deref(), Some("3"));
        assert_eq!(r.flags.training.optimizer_options, ["fused=true"]);
        assert_eq!(r.flags.finetune.freeze, ["a", "b"]);
        assert_eq!(r.flags.finetune.double_quant, "on");
    }

    #[test]
    fn bad_requests_name_the_key() {
        for (body, named) in [
            (json!({"gpus": 0}), "gpus"),
            (json!({"micro-batch": "two"}), "micro-batch"),
            (json!({"micro-btach": 1}), "micro-batch"),
            (json!({"fused": "yes"}), "fused"),
            (json!({"capacity": "80GB", "device": "h100"}), "device"),
            (json!({"lora-targets": "q_proj"}), "lora-rank"),
            (json!({"micro-batch": 1.5}), "micro-batch"),
            (json!({"quantize": true}), "quantize"),
            (json!({"seq_len": 1, "seq-len": 2}), "seq-len"),
            (json!({"model": "../x.json"}), "model"),
            (json!({"model": "llama-3.1-8b", "params": "7B"}), "params"),
            (json!({"config": [1]}), "config"),
        ] {
            let message = match request(body.clone()) {
                Ok(_) => panic!("{body} was accepted"),
                Err(e) => e.to_string(),
            };
            assert!(message.contains(named), "{body}: {message}");
            assert!(!message.contains('\n'), "{message}");
        }
    }

    #[test]
    fn serde_deserializes_the_same_request() {
        let r: EstimateRequest = serde_json::from_value(
            json!({"config": {"model_type": "gpt2"}, "lora-rank": 8, "zero": 2}),
        )
        .unwrap();
        assert!(matches!(r.model, Some(ModelSource::Config(_))));
        assert_eq!(r.flags.finetune.lora_rank, Some(8));
        let refused = serde_json::from_value::<EstimateRequest>(json!({"gpus": 0})).unwrap_err();
        assert!(refused.to_string().contains("gpus"), "{refused}");
    }

    #[test]
    fn json_never_names_a_path() {
        let r = request(json!({"model": "LLAMA-3.1-8B"})).unwrap();
        assert_eq!(
            r.model,
            Some(ModelSource::Preset("llama-3.1-8b".to_string()))
        );
    }
}
