//! Launch configs in, `estimate` flags out: the readers behind `trainmem check`.
//!
//! Each format (HF `TrainingArguments`, DeepSpeed, accelerate, axolotl,
//! torchtune, LLaMA-Factory) is one module holding one table of its
//! documented keys, each key with the
//! `estimate` flags it sets ([`key::Rule`]). Reading a file records every key
//! as `{file, key, value, set}`: what it set, that it does not change memory,
//! that it changes memory in a way trainmem does not model, or that trainmem
//! does not know it (ignored). Nothing is dropped without a record.
//!
//! The settings of all files are combined into one list of flags, which the
//! command line completes and overrides and the `estimate` parser reads: the
//! estimate of a config is `trainmem estimate` with those flags.

pub mod accelerate;
pub mod axolotl;
pub mod deepspeed;
mod document;
pub mod key;
pub mod llama_factory;
pub mod torchtune;
pub mod training_arguments;

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use key::{Effect, Key};

pub use document::{MAX_BYTES, MAX_DEPTH};

/// A launch-config format, detected from its keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Format {
    /// HF `TrainingArguments` / TRL `SFTConfig` (with TRL's `ModelConfig` keys).
    TrainingArguments,
    /// A DeepSpeed config JSON.
    DeepSpeed,
    /// An accelerate config YAML (`accelerate config`).
    Accelerate,
    /// An axolotl config YAML.
    Axolotl,
    /// A torchtune recipe config YAML.
    Torchtune,
    /// A LLaMA-Factory training YAML.
    LlamaFactory,
}

impl Format {
    /// The name said in reports.
    pub fn name(self) -> &'static str {
        match self {
            Format::TrainingArguments => "TrainingArguments",
            Format::DeepSpeed => "DeepSpeed",
            Format::Accelerate => "accelerate",
            Format::Axolotl => "axolotl",
            Format::Torchtune => "torchtune",
            Format::LlamaFactory => "LLaMA-Factory",
        }
    }

    /// The format's table of keys.
    fn keys(self) -> &'static [Key] {
        match self {
            Format::TrainingArguments => training_arguments::KEYS,
            Format::DeepSpeed => deepspeed::KEYS,
            Format::Accelerate => accelerate::KEYS,
            Format::Axolotl => axolotl::KEYS,
            Format::Torchtune => torchtune::KEYS,
            Format::LlamaFactory => llama_factory::KEYS,
        }
    }

    /// What the project does when a key is absent, for the flags that
    /// matter: `(key, value, flags)`.
    fn defaults(self) -> &'static [key::Absent] {
        match self {
            Format::TrainingArguments => training_arguments::DEFAULTS,
            Format::Axolotl => axolotl::DEFAULTS,
            Format::LlamaFactory => llama_factory::DEFAULTS,
            Format::DeepSpeed | Format::Accelerate | Format::Torchtune => &[],
        }
    }

    /// The format's spelling of a change, as `key: value` pairs.
    pub fn spell(self, change: &Change) -> Option<Vec<(String, String)>> {
        match self {
            Format::TrainingArguments => training_arguments::spell(change),
            Format::DeepSpeed => deepspeed::spell(change),
            Format::Accelerate => accelerate::spell(change),
            Format::Axolotl => axolotl::spell(change),
            Format::Torchtune => torchtune::spell(change),
            Format::LlamaFactory => llama_factory::spell(change),
        }
    }

    /// Which format a document is, from keys only that format has.
    fn detect(document: &Map<String, Value>) -> Option<Format> {
        let has = |key: &str| document.contains_key(key);
        let component = |key: &str| {
            document
                .get(key)
                .is_some_and(|v| v.get("_component_").is_some())
        };
        if component("model") || component("tokenizer") || component("checkpointer") {
            Some(Format::Torchtune)
        } else if has("model_name_or_path")
            && (has("finetuning_type") || has("stage") || has("cutoff_len") || has("template"))
        {
            Some(Format::LlamaFactory)
        } else if has("distributed_type") || has("compute_environment") {
            Some(Format::Accelerate)
        } else if has("zero_optimization")
            || has("train_micro_batch_size_per_gpu")
            || has("train_batch_size")
        {
            Some(Format::DeepSpeed)
        } else if has("base_model") || has("micro_batch_size") || has("sequence_len") {
            Some(Format::Axolotl)
        } else if has("per_device_train_batch_size")
            || has("output_dir")
            || has("optim")
            || has("model_name_or_path")
        {
            Some(Format::TrainingArguments)
        } else {
            None
        }
    }

    /// The order files combine in: a later format's settings win. DeepSpeed
    /// last, as its engine owns the batch, the precision and the sharding
    /// when it runs.
    fn precedence(self) -> u8 {
        match self {
            Format::TrainingArguments
            | Format::Axolotl
            | Format::Torchtune
            | Format::LlamaFactory => 0,
            Format::Accelerate => 1,
            Format::DeepSpeed => 2,
        }
    }
}

/// One `estimate` flag and its value (`None` for a bare switch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    pub flag: &'static str,
    pub value: Option<String>,
}

impl Setting {
    /// `--flag value`, or `--flag`.
    pub fn spelled(&self) -> String {
        match &self.value {
            Some(value) => format!("{} {value}", self.flag),
            None => self.flag.to_string(),
        }
    }
}

/// What a key did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeyKind {
    /// It set flags, or was resolved from another file.
    Sets,
    /// It changes memory, but trainmem does not model it: the verdict is unknown.
    NotModelled,
    /// It does not change memory (a learning rate, a path).
    NoMemory,
    /// trainmem does not know it.
    Ignored,
}

/// One key read: where, what it said, and what it set.
#[derive(Debug, Clone, Serialize)]
pub struct KeyRecord {
    pub file: String,
    pub key: String,
    pub value: String,
    pub set: String,
    #[serde(skip)]
    pub kind: KeyKind,
}

/// A value that waits for the model or the other files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deferred {
    /// DeepSpeed `"auto"`: hidden_size², as the HF integration fills
    /// `reduce_bucket_size`.
    HiddenSquared(&'static str),
    /// DeepSpeed `bf16.enabled` / `fp16.enabled` `"auto"`: on when the
    /// companion TrainingArguments ask for that half dtype.
    Half(&'static str),
    /// accelerate's `mixed_precision`: autocast over the weights as the
    /// training script loads them; under an engine (FSDP, DeepSpeed) fp32
    /// weights become the master copy of half-precision compute weights.
    Autocast { dtype: &'static str, engine: Engine },
}

/// The engine that owns the weights' precision under accelerate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// Plain PyTorch: autocast only.
    None,
    /// FSDP's MixedPrecision: fp32 weights become the sharded master copy;
    /// weights loaded in half precision stay so.
    Fsdp,
    /// DeepSpeed's bf16/fp16 engine: always an fp32 master copy.
    DeepSpeed,
}

/// A setting and the key that made it.
#[derive(Debug, Clone)]
pub struct Sourced {
    pub setting: Setting,
    /// Index into [`Launch::keys`].
    pub key: usize,
}

/// Every file read, every key recorded, and the combined settings.
#[derive(Debug, Default)]
pub struct Launch {
    /// Each file and its detected format, in the order read.
    pub files: Vec<(String, Format)>,
    pub keys: Vec<KeyRecord>,
    /// The settings, in the order they combine: later ones win.
    pub settings: Vec<Sourced>,
    /// Values that wait for the model, with the key that asked.
    pub deferred: Vec<(Deferred, usize)>,
}

impl Launch {
    /// Whether a key changes memory in a way trainmem does not model.
    pub fn unknown(&self) -> bool {
        self.keys.iter().any(|k| k.kind == KeyKind::NotModelled)
    }

    /// The file whose keys set `flag`, last one winning.
    pub fn file_setting(&self, flag: &str) -> Option<&str> {
        self.settings
            .iter()
            .rev()
            .find(|s| s.setting.flag == flag)
            .map(|s| self.keys[s.key].file.as_str())
    }
}

/// The most files one check reads, companions included.
const MAX_FILES: usize = 16;

/// A change the suggestions make, spelled by each format in its own keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A smaller micro-batch and more accumulation: the same global batch.
    MicroBatch { micro_batch: u64, accumulation: u64 },
    /// A loss that never materializes the logits (Liger's fused linear cross-entropy).
    FusedLoss,
    /// Full activation recomputation (gradient checkpointing).
    Recompute,
    /// The saved activations in host memory.
    OffloadActivations,
    /// This ZeRO stage.
    Zero(u8),
    /// FSDP full sharding.
    FullShard,
    /// The optimizer states in host memory.
    OffloadOptimizer,
    /// 8-bit AdamW from bitsandbytes.
    Optimizer8bit,
    /// LoRA adapters of rank 16 on every linear.
    Lora,
    /// QLoRA: the base in nf4, with LoRA adapters added unless the run has them.
    Qlora { with_lora: bool },
}

impl Change {
    /// The flags a change touches, to find the file that set them.
    pub fn flags(&self) -> &'static [&'static str] {
        match self {
            Change::MicroBatch { .. } => &["--micro-batch", "--grad-accumulation"],
            Change::FusedLoss => &["--loss"],
            Change::Recompute => &["--recompute"],
            Change::OffloadActivations => &["--offload-activations"],
            Change::Zero(_) => &["--zero"],
            Change::FullShard => &["--fsdp"],
            Change::OffloadOptimizer => &["--offload"],
            Change::Optimizer8bit => &["--optimizer"],
            Change::Lora => &["--lora-rank"],
            Change::Qlora { .. } => &["--quantize", "--lora-rank"],
        }
    }
}

/// Reads the launch configs at `paths`, and the DeepSpeed configs they name.
pub fn read(paths: &[PathBuf]) -> Result<Launch> {
    let mut launch = Launch::default();
    let mut queue: Vec<(Source, Option<Format>)> = paths
        .iter()
        .map(|p| (Source::Path(p.clone()), None))
        .collect();
    let mut read_paths: Vec<PathBuf> = Vec::new();
    // Each file's settings, with its precedence, combined after all are read.
    let mut pending: Vec<(u8, usize, Vec<Sourced>)> = Vec::new();
    let mut index = 0;
    while index < queue.len() {
        if index >= MAX_FILES {
            return Err(Error::InvalidValue {
                what: "launch configs",
                value: format!("{} files", queue.len()),
                reason: format!("at most {MAX_FILES} files are read, companions included"),
            });
        }
        let (source, expected) = queue[index].clone();
        index += 1;
        let (label, document, text) = match &source {
            Source::Path(path) => {
                let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
                if read_paths.contains(&canonical) {
                    continue;
                }
                read_paths.push(canonical);
                let label = path.display().to_string();
                let text = document::read_text(path).map_err(|problem| Error::File {
                    path: label.clone(),
                    problem,
                })?;
                let document = document::parse(&text, path).map_err(|problem| Error::File {
                    path: label.clone(),
                    problem,
                })?;
                (label, document, text)
            }
            Source::Inline(label, value) => (label.clone(), value.clone(), String::new()),
        };
        let Value::Object(map) = &document else {
            return Err(Error::File {
                path: label,
                problem: "the top level is not a mapping of keys to values".to_string(),
            });
        };
        let format = match expected.or_else(|| Format::detect(map)) {
            Some(format) => format,
            None => {
                return Err(Error::File {
                    path: label,
                    problem: "not a launch config trainmem reads: expected HF TrainingArguments / TRL SFTConfig (per_device_train_batch_size, optim, ...), a DeepSpeed config (zero_optimization, train_micro_batch_size_per_gpu), an accelerate config (distributed_type), an axolotl config (base_model, micro_batch_size, sequence_len), a torchtune recipe config (model._component_) or a LLaMA-Factory YAML (model_name_or_path with finetuning_type)".to_string(),
                });
            }
        };
        launch.files.push((label.clone(), format));
        let base = match &source {
            Source::Path(path) => path.parent().map(Path::to_path_buf),
            Source::Inline(..) => None,
        };
        let settings = read_document(
            &mut launch,
            &label,
            format,
            map,
            &text,
            base.as_deref(),
            &mut queue,
        )?;
        pending.push((format.precedence(), launch.files.len() - 1, settings));
    }
    // Defaults of the training formats first, so that any file overrides them.
    let mut defaults = Vec::new();
    for (label, format) in launch.files.clone() {
        for key::Absent { key, value, flags } in format.defaults() {
            let taken = pending
                .iter()
                .flat_map(|(_, _, s)| s)
                .any(|s| flags.iter().any(|(flag, _)| *flag == s.setting.flag))
                || defaults
                    .iter()
                    .any(|s: &Sourced| flags.iter().any(|(f, _)| *f == s.setting.flag));
            if taken {
                continue;
            }
            let set: Vec<Setting> = flags.iter().map(|(f, v)| setting(f, v)).collect();
            launch.keys.push(KeyRecord {
                file: label.clone(),
                key: key.to_string(),
                value: format!("{value} (the default)"),
                set: spelled(&set),
                kind: KeyKind::Sets,
            });
            let key = launch.keys.len() - 1;
            defaults.extend(set.into_iter().map(|setting| Sourced { setting, key }));
        }
    }
    launch.settings = defaults;
    pending.sort_by_key(|(precedence, order, _)| (*precedence, *order));
    for (_, _, settings) in pending {
        launch.settings.extend(settings);
    }
    // accelerate's autocast reads the precision the others set; DeepSpeed's
    // "auto" reads the result; the model's size comes last.
    launch.deferred.sort_by_key(|(deferred, _)| match deferred {
        Deferred::Autocast { .. } => 0,
        Deferred::Half(_) => 1,
        Deferred::HiddenSquared(_) => 2,
    });
    Ok(launch)
}

/// Where a document comes from: a file, or a mapping inside another file
/// (a `deepspeed` key given as an object).
#[derive(Debug, Clone)]
enum Source {
    Path(PathBuf),
    Inline(String, Value),
}

/// A setting from table text: an empty value is a bare switch.
fn setting(flag: &'static str, value: &str) -> Setting {
    Setting {
        flag,
        value: (!value.is_empty()).then(|| value.to_string()),
    }
}

/// `--a 1 --b`.
fn spelled(settings: &[Setting]) -> String {
    settings
        .iter()
        .map(Setting::spelled)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Records every key of one document and returns the settings it makes.
fn read_document(
    launch: &mut Launch,
    label: &str,
    format: Format,
    document: &Map<String, Value>,
    text: &str,
    base: Option<&Path>,
    queue: &mut Vec<(Source, Option<Format>)>,
) -> Result<Vec<Sourced>> {
    let mut found = Vec::new();
    walk(format.keys(), "", document, &mut found);
    // The keys in the order the file writes them (the parsed mapping is sorted).
    found.sort_by_key(|(path, _, _)| position(text, path));
    let mut settings = Vec::new();
    for (path, value, key) in found {
        let shown = shown(value);
        let Some(key) = key else {
            launch.keys.push(KeyRecord {
                file: label.to_string(),
                key: path,
                value: shown,
                set: "ignored: not a key trainmem knows".to_string(),
                kind: KeyKind::Ignored,
            });
            continue;
        };
        let effect = key
            .rule
            .read(value, document)
            .map_err(|problem| Error::File {
                path: label.to_string(),
                problem: format!("key `{path}` = `{shown}`: {problem}"),
            })?;
        let (set, kind) = match effect {
            Effect::Set(set) => {
                let text = spelled(&set);
                let index = launch.keys.len();
                settings.extend(set.into_iter().map(|setting| Sourced {
                    setting,
                    key: index,
                }));
                (text, KeyKind::Sets)
            }
            Effect::Nothing(why) => (why, KeyKind::Sets),
            Effect::NoMemory => ("no effect on memory".to_string(), KeyKind::NoMemory),
            Effect::NotModelled(why) => (format!("not modelled: {why}"), KeyKind::NotModelled),
            Effect::Defer(deferred, why) => {
                launch.deferred.push((deferred, launch.keys.len()));
                (why.to_string(), KeyKind::Sets)
            }
            Effect::Include => match value {
                Value::String(name) => {
                    let path = companion(name, base);
                    queue.push((Source::Path(path.clone()), Some(Format::DeepSpeed)));
                    (
                        format!("reads {} as a DeepSpeed config", path.display()),
                        KeyKind::Sets,
                    )
                }
                Value::Object(_) => {
                    let inner = format!("{label}#{path}");
                    queue.push((
                        Source::Inline(inner.clone(), value.clone()),
                        Some(Format::DeepSpeed),
                    ));
                    (
                        format!("reads {inner} as a DeepSpeed config"),
                        KeyKind::Sets,
                    )
                }
                Value::Null => ("no DeepSpeed".to_string(), KeyKind::Sets),
                _ => {
                    return Err(Error::File {
                        path: label.to_string(),
                        problem: format!(
                            "key `{path}` = `{shown}`: expected the path of a DeepSpeed config JSON"
                        ),
                    });
                }
            },
        };
        launch.keys.push(KeyRecord {
            file: label.to_string(),
            key: path,
            value: shown,
            set,
            kind,
        });
    }
    Ok(settings)
}

/// A companion file named in a config: as given when it exists (the
/// launchers resolve it from the working folder), else beside the config.
fn companion(name: &str, base: Option<&Path>) -> PathBuf {
    let path = PathBuf::from(name);
    if path.is_absolute() || path.exists() {
        return path;
    }
    match base {
        Some(base) => base.join(path),
        None => path,
    }
}

/// Every key of `map` under `prefix`, paired with its table entry: a key in
/// the table is read whole; a mapping whose keys the table names under it
/// is entered; anything else is unknown.
fn walk<'a>(
    table: &'static [Key],
    prefix: &str,
    map: &'a Map<String, Value>,
    found: &mut Vec<(String, &'a Value, Option<&'static Key>)>,
) {
    for (name, value) in map {
        let path = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        if let Some(key) = table.iter().find(|k| k.name == path) {
            found.push((path, value, Some(key)));
            continue;
        }
        // `section.*`: every other key of a known section.
        let rest_of_section = format!("{prefix}.*");
        if !prefix.is_empty()
            && let Some(key) = table.iter().find(|k| k.name == rest_of_section)
        {
            found.push((path, value, Some(key)));
            continue;
        }
        let nested = format!("{path}.");
        let known_section = table.iter().any(|k| k.name.starts_with(&nested));
        match value {
            Value::Object(inner) if known_section => walk(table, &path, inner, found),
            Value::Null if known_section => found.push((path, value, Some(&EMPTY_SECTION))),
            _ => found.push((path, value, None)),
        }
    }
}

/// Where `path` (`a.b.c`) is written in `text`: each part searched after
/// the one before, as a key (`c:` in YAML, `"c"` in JSON); the end when
/// not found. Only for the order of the report.
fn position(text: &str, path: &str) -> usize {
    let mut at = 0;
    for part in path.split('.') {
        let found = [format!("\"{part}\""), format!("{part}:")]
            .iter()
            .filter_map(|needle| text.get(at..).and_then(|rest| rest.find(needle.as_str())))
            .min();
        match found {
            Some(offset) => at += offset + part.len(),
            None => return usize::MAX,
        }
    }
    at
}

/// A section the table knows, left empty (`fsdp_config:` with nothing under it).
static EMPTY_SECTION: Key = Key {
    name: "",
    rule: key::Rule::Read(|_, _| Ok(Effect::Nothing("empty".to_string()))),
};

/// A value as the report shows it: scalars bare, the rest as compact JSON,
/// cut at [`SHOWN_CHARS`] characters.
fn shown(value: &Value) -> String {
    let text = match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    if text.chars().count() > SHOWN_CHARS {
        let cut: String = text.chars().take(SHOWN_CHARS).collect();
        format!("{cut}...")
    } else {
        text
    }
}

/// The longest value shown in full.
const SHOWN_CHARS: usize = 60;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const FORMATS: [Format; 6] = [
        Format::TrainingArguments,
        Format::DeepSpeed,
        Format::Accelerate,
        Format::Axolotl,
        Format::Torchtune,
        Format::LlamaFactory,
    ];

    /// Values of every JSON kind, and the edge cases of each.
    fn samples() -> Vec<Value> {
        serde_json::from_str(
            r#"[null, true, false, 0, 1, -1, 1.5, 1e30, -1e30, 18446744073709551615,
                "", "auto", "AUTO", "x", "true", "4", "-3", "1e9", "nf4", "cpu", "FSDP",
                "torchtune.models.llama3_1.lora_llama3_1_8b", "qlora_nothing_like_it",
                [], [1], ["q_proj"], [null], {}, {"a": 1}, {"_component_": 3}]"#,
        )
        .unwrap()
    }

    #[test]
    fn every_key_of_every_table_reads_any_value_without_panicking() {
        for format in FORMATS {
            for key in format.keys() {
                for value in samples() {
                    // The key alone, and beside every other key of the table
                    // holding the same value (the rules that read the whole document).
                    let mut alone = Map::new();
                    alone.insert(key.name.to_string(), value.clone());
                    let _ = key.rule.read(&value, &alone);
                    let crowded: Map<String, Value> = format
                        .keys()
                        .iter()
                        .map(|k| (k.name.to_string(), value.clone()))
                        .chain([
                            ("model".to_string(), serde_json::json!({"lora_rank": value.clone(), "lora_attn_modules": value.clone()})),
                            ("fsdp_config".to_string(), serde_json::json!({"fsdp_version": value.clone()})),
                            ("zero_optimization".to_string(), serde_json::json!({"offload_param": {"device": value.clone()}})),
                        ])
                        .collect();
                    let _ = key.rule.read(&value, &crowded);
                }
            }
        }
    }

    #[test]
    fn every_table_names_each_key_once() {
        for format in FORMATS {
            let keys = format.keys();
            for (i, key) in keys.iter().enumerate() {
                assert!(
                    keys[i + 1..].iter().all(|k| k.name != key.name),
                    "{} names `{}` twice",
                    format.name(),
                    key.name
                );
            }
        }
    }

    proptest! {
        #[test]
        fn any_text_is_parsed_or_refused_without_panicking(text in "\\PC{0,200}") {
            let _ = document::parse(&text, Path::new("a.yaml"));
            let _ = document::parse(&text, Path::new("a.json"));
        }

        #[test]
        fn yaml_like_text_is_parsed_or_refused(text in "([a-z_]{1,8}: ?(\\[|\\{|&a |\\*a|-|[0-9]{1,3}|true|auto|\\]|\\}|, )*\n){0,12}") {
            if let Ok(Value::Object(map)) = document::parse(&text, Path::new("a.yaml")) {
                let mut found = Vec::new();
                for format in FORMATS {
                    walk(format.keys(), "", &map, &mut found);
                    for (_, value, key) in found.drain(..) {
                        if let Some(key) = key {
                            let _ = key.rule.read(value, &map);
                        }
                    }
                }
            }
        }
    }
}
