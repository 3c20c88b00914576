//! Launch configs in, `estimate` flags out: the readers behind `trainmem check`.
//!
//! Each format (HF `TrainingArguments`, DeepSpeed, accelerate, axolotl,
//! torchtune, LLaMA-Factory, torchtitan, litgpt) is one module holding one table of its
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
pub mod litgpt;
pub mod llama_factory;
pub mod torchtitan;
pub mod torchtune;
pub mod training_arguments;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

use crate::error::{Error, MAX_PATH_CHARS, Result, cut, shown as shown_text};
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
    /// A torchtitan job config TOML.
    Torchtitan,
    /// A litgpt finetune config YAML.
    Litgpt,
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
            Format::Torchtitan => "torchtitan",
            Format::Litgpt => "litgpt",
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
            Format::Torchtitan => torchtitan::KEYS,
            Format::Litgpt => litgpt::KEYS,
        }
    }

    /// What the project does when a key is absent, for the flags that
    /// matter: `(key, value, flags)`.
    fn defaults(self) -> &'static [key::Absent] {
        match self {
            Format::TrainingArguments => training_arguments::DEFAULTS,
            Format::Axolotl => axolotl::DEFAULTS,
            Format::LlamaFactory => llama_factory::DEFAULTS,
            Format::Torchtitan => torchtitan::DEFAULTS,
            Format::Litgpt => litgpt::DEFAULTS,
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
            Format::Torchtitan => torchtitan::spell(change),
            Format::Litgpt => litgpt::spell(change),
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
        let section_has = |section: &str, keys: &[&str]| {
            document
                .get(section)
                .and_then(Value::as_object)
                .is_some_and(|s| keys.iter().any(|k| s.contains_key(*k)))
        };
        if component("model") || component("tokenizer") || component("checkpointer") {
            Some(Format::Torchtune)
        } else if section_has("training", &["local_batch_size", "seq_len", "batch_size"])
            || section_has(
                "parallelism",
                &["data_parallel_shard_degree", "tensor_parallel_degree"],
            )
            || section_has("model", &["flavor"])
        {
            Some(Format::Torchtitan)
        } else if has("checkpoint_dir")
            && (has("train") || has("precision") || has("lora_r") || has("devices"))
        {
            Some(Format::Litgpt)
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
            | Format::LlamaFactory
            | Format::Torchtitan
            | Format::Litgpt => 0,
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
    /// The count of a companion file's keys trainmem does not know, which
    /// are not listed.
    Unread,
}

/// One key read: where, what it said, and what it set.
#[derive(Debug, Clone, Serialize)]
pub struct KeyRecord {
    pub file: String,
    pub key: String,
    /// The value as written, cut to a bounded length; `None` for the keys
    /// of a file another config names, whose values are never shown.
    pub value: Option<String>,
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

/// A change the suggestions make, spelled by each format in its own keys:
/// the typed change of the request, re-exported where the formats spell it.
pub use crate::request::Change;

/// Reads the launch configs at `paths`, and the DeepSpeed configs they name.
///
/// A file a config names (a companion: axolotl's or LLaMA-Factory's
/// `deepspeed`, accelerate's `deepspeed_config_file`, the Trainer's
/// `deepspeed`) is read only as the launcher reads it, a DeepSpeed config
/// JSON, and nothing of its text is said back: not its values, not the keys
/// trainmem does not know (counted instead), not its bytes in an error. The
/// path is the user's, its content may be anyone's (`/etc/shadow`, a token
/// file), and `check` runs in CI logs.
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
        let (label, parsed, named_by) = match &source {
            Source::Path(path) | Source::Companion { path, .. } => {
                let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
                if read_paths.contains(&canonical) {
                    continue;
                }
                read_paths.push(canonical);
                let label = cut(&path.display().to_string(), MAX_PATH_CHARS).into_owned();
                match &source {
                    Source::Companion { named_by, .. } => {
                        let refused = |problem: String| Error::File {
                            path: label.clone(),
                            problem: format!(
                                "{}: {problem}; accepted: a DeepSpeed config JSON (an object of DeepSpeed's keys), which is what DeepSpeed reads",
                                named_by.phrase()
                            ),
                        };
                        let text = document::read_text(path).map_err(|problem| {
                            refused(match problem.as_str() {
                                document::NOT_UTF8 => "not UTF-8 text".to_string(),
                                _ => problem,
                            })
                        })?;
                        let parsed = document::parse_companion(&text).map_err(refused)?;
                        (label, parsed, Some(named_by.clone()))
                    }
                    _ => {
                        let text = document::read_text(path).map_err(|problem| Error::File {
                            path: label.clone(),
                            problem,
                        })?;
                        let parsed =
                            document::parse(&text, path).map_err(|problem| Error::File {
                                path: label.clone(),
                                problem,
                            })?;
                        (label, parsed, None)
                    }
                }
            }
            Source::Inline(label, value, order) => (
                label.clone(),
                document::Parsed {
                    value: value.clone(),
                    order: order.clone(),
                },
                None,
            ),
        };
        let Value::Object(map) = &parsed.value else {
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
                    problem: "not a launch config trainmem reads: expected HF TrainingArguments / TRL SFTConfig (per_device_train_batch_size, optim, ...), a DeepSpeed config (zero_optimization, train_micro_batch_size_per_gpu), an accelerate config (distributed_type), an axolotl config (base_model, micro_batch_size, sequence_len), a torchtune recipe config (model._component_), a LLaMA-Factory YAML (model_name_or_path with finetuning_type), a torchtitan job config TOML ([training] seq_len, [parallelism]) or a litgpt finetune YAML (checkpoint_dir with train)".to_string(),
                });
            }
        };
        launch.files.push((label.clone(), format));
        let base = match &source {
            Source::Path(path) | Source::Companion { path, .. } => {
                path.parent().map(Path::to_path_buf)
            }
            Source::Inline(..) => None,
        };
        let settings = read_document(
            &mut launch,
            &Reading {
                label: &label,
                format,
                document: map,
                order: &parsed.order,
                base: base.as_deref(),
                named_by: named_by.as_ref(),
                given: paths,
            },
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
                value: Some(format!("{value} (the default)")),
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

/// Where a document comes from: a file given, a file a config names, or a
/// mapping inside another file (a `deepspeed` key given as an object), with
/// the order of its keys.
#[derive(Debug, Clone)]
enum Source {
    Path(PathBuf),
    Companion { path: PathBuf, named_by: NamedBy },
    Inline(String, Value, Vec<String>),
}

/// The file and the key that named a companion file.
#[derive(Debug, Clone)]
struct NamedBy {
    file: String,
    key: String,
}

impl NamedBy {
    /// `the DeepSpeed config that `a.yaml` key `deepspeed` names`.
    fn phrase(&self) -> String {
        format!(
            "the DeepSpeed config that `{}` key `{}` names",
            self.file, self.key
        )
    }
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

/// One document being read: its name, format, keys and their order, the
/// folder companions are found from, and, for a companion, who named it.
struct Reading<'a> {
    label: &'a str,
    format: Format,
    document: &'a Map<String, Value>,
    order: &'a [String],
    base: Option<&'a Path>,
    named_by: Option<&'a NamedBy>,
    /// The files given on the command line, which satisfy a reference by name.
    given: &'a [PathBuf],
}

/// Records every key of one document and returns the settings it makes.
/// A companion's keys are recorded without their values, and those the
/// table does not name are counted, not listed.
fn read_document(
    launch: &mut Launch,
    reading: &Reading,
    queue: &mut Vec<(Source, Option<Format>)>,
) -> Result<Vec<Sourced>> {
    let Reading {
        label,
        format,
        document,
        order,
        base,
        named_by,
        given,
    } = *reading;
    let mut found = Vec::new();
    walk(format.keys(), "", document, &mut found);
    // The keys in the order the file writes them (the parsed mapping is sorted).
    in_document_order(&mut found, order);
    let mut settings = Vec::new();
    let mut unread = 0usize;
    for (path, value, key) in found {
        let Some(key) = key else {
            if named_by.is_some() {
                unread += 1;
                continue;
            }
            launch.keys.push(KeyRecord {
                file: label.to_string(),
                key: shown_text(&path).into_owned(),
                value: Some(shown_value(value)),
                set: "ignored: not a key trainmem knows".to_string(),
                kind: KeyKind::Ignored,
            });
            continue;
        };
        // A companion's key as the table writes it: `section.*` for a key
        // of a known section that the table does not name.
        let path = match named_by {
            Some(_) if key.name.ends_with(".*") => key.name.to_string(),
            _ => shown_text(&path).into_owned(),
        };
        let shown = named_by.is_none().then(|| shown_value(value));
        let effect = key.rule.read(value, document).map_err(|problem| {
            // A rule that reads another key names it first (`lora_r: ...`):
            // the problem is that key's, said with its value.
            let (path, shown, problem) = match owner(&problem, format.keys(), document) {
                Some((other, value, rest)) => (
                    other.to_string(),
                    named_by.is_none().then(|| shown_value(value)),
                    rest,
                ),
                None => (path.clone(), shown.clone(), problem.as_str()),
            };
            Error::File {
                path: label.to_string(),
                problem: match (named_by, shown) {
                    (Some(named_by), _) => {
                        format!("{}: key `{path}`: {problem}", named_by.phrase())
                    }
                    (None, Some(shown)) => format!("key `{path}` = `{shown}`: {problem}"),
                    (None, None) => format!("key `{path}`: {problem}"),
                },
            }
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
                    let Some((companion, place)) = companion(name, base, given) else {
                        return Err(Error::File {
                            path: label.to_string(),
                            problem: format!(
                                "key `{path}` = `{}`: no such file in the current folder, nor in the config's folder or the {MAX_PARENT_FOLDERS} folders above it; accepted: the path from the current folder or from the repository root, or the file itself given on the command line",
                                shown.unwrap_or_default()
                            ),
                        });
                    };
                    let said = cut(&companion.display().to_string(), MAX_PATH_CHARS).into_owned();
                    queue.push((
                        Source::Companion {
                            path: companion,
                            named_by: NamedBy {
                                file: label.to_string(),
                                key: path.clone(),
                            },
                        },
                        Some(Format::DeepSpeed),
                    ));
                    (
                        format!("reads {said} as a DeepSpeed config ({place})"),
                        KeyKind::Sets,
                    )
                }
                Value::Object(_) => {
                    let inner = format!("{label}#{path}");
                    let prefix = format!("{path}.");
                    let inner_order = order
                        .iter()
                        .filter_map(|p| p.strip_prefix(&prefix).map(str::to_string))
                        .collect();
                    queue.push((
                        Source::Inline(inner.clone(), value.clone(), inner_order),
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
                            "key `{path}` = `{}`: expected the path of a DeepSpeed config JSON",
                            shown.unwrap_or_default()
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
    if unread > 0 {
        launch.keys.push(KeyRecord {
            file: label.to_string(),
            key: format!(
                "{unread} {} not read",
                if unread == 1 { "key" } else { "keys" }
            ),
            value: None,
            set: "not keys trainmem knows, in a file another config names: counted, not shown"
                .to_string(),
            kind: KeyKind::Unread,
        });
    }
    Ok(settings)
}

/// The key a problem names first (`lora_r: expected ...`), when it is a key
/// of the table that the document holds: that key, its value and the rest
/// of the problem.
fn owner<'a, 'd>(
    problem: &'a str,
    table: &'static [Key],
    document: &'d Map<String, Value>,
) -> Option<(&'static str, &'d Value, &'a str)> {
    let (name, rest) = problem.split_once(": ")?;
    let key = table.iter().find(|k| k.name == name)?;
    let mut parts = key.name.split('.');
    let mut value = document.get(parts.next()?)?;
    for part in parts {
        value = value.get(part)?;
    }
    Some((key.name, value, rest))
}

/// `found` sorted in the order the file writes its keys: each key's place
/// looked up once in the order the parser recorded (keys it did not record,
/// none in practice, go last, as they came). Returns the work done, the
/// bytes of key paths hashed: each recorded path once and each found one
/// once, so linear in the keys (searching the text for each key, as this
/// once did, is quadratic: 49,000 keys took 75 s).
fn in_document_order<T>(found: &mut [(String, &Value, T)], order: &[String]) -> usize {
    let mut rank: HashMap<&str, usize> = HashMap::with_capacity(order.len());
    let mut hashed = 0usize;
    for (place, path) in order.iter().enumerate() {
        hashed = hashed.saturating_add(path.len());
        rank.entry(path.as_str()).or_insert(place);
    }
    found.sort_by_cached_key(|(path, _, _)| {
        hashed = hashed.saturating_add(path.len());
        rank.get(path.as_str()).copied().unwrap_or(usize::MAX)
    });
    hashed
}

/// The most folders above a config's own that are searched for a file it
/// names: a repository root is a few levels up (LLaMA-Factory's configs sit
/// two below it, `examples/train_full/`), and the walk stops at the root
/// of the file system before this bound in practice.
pub const MAX_PARENT_FOLDERS: usize = 16;

/// The file a config names as `name`, found as the launcher finds it, and
/// where it was found, in words. In order: an absolute path as it is; the
/// path from the current folder (where the launchers resolve it: they run
/// from the repository root); a file given on the command line whose path
/// ends with `name`, or failing that has its file name; the path from the
/// config's own folder, then from each folder above it, up to
/// [`MAX_PARENT_FOLDERS`] (a checkout's root, when `check` runs elsewhere).
/// `None` when no place has it.
fn companion(name: &str, base: Option<&Path>, given: &[PathBuf]) -> Option<(PathBuf, String)> {
    let path = PathBuf::from(name);
    if path.is_absolute() {
        return Some((path, "an absolute path".to_string()));
    }
    if path.exists() {
        return Some((path, "from the current folder".to_string()));
    }
    let wanted: Vec<_> = path.components().collect();
    let ends_with = |file: &&PathBuf| {
        let components: Vec<_> = file.components().collect();
        components.ends_with(&wanted)
    };
    let same_name =
        |file: &&PathBuf| path.file_name().is_some() && file.file_name() == path.file_name();
    if let Some(file) = given
        .iter()
        .find(ends_with)
        .or_else(|| given.iter().find(same_name))
    {
        return Some((file.clone(), "given on the command line".to_string()));
    }
    let base = base?;
    let beside = base.join(&path);
    if beside.exists() {
        return Some((beside, "beside the config".to_string()));
    }
    // The folders above, from the config's absolute folder (without
    // resolving links), so that a config named from inside its checkout
    // (`check llama3_full_sft.yaml`) still reaches the root.
    let absolute = if base.as_os_str().is_empty() {
        std::env::current_dir().ok()
    } else {
        std::path::absolute(base).ok()
    }
    .unwrap_or_else(|| base.to_path_buf());
    let mut folder = absolute.parent();
    for above in 1..=MAX_PARENT_FOLDERS {
        let here = folder?;
        let candidate = here.join(&path);
        if candidate.exists() {
            let place = match above {
                1 => "from the folder above the config".to_string(),
                n => format!("from {n} folders above the config"),
            };
            return Some((candidate, place));
        }
        folder = here.parent();
    }
    None
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

/// A section the table knows, left empty (`fsdp_config:` with nothing under it).
static EMPTY_SECTION: Key = Key {
    name: "",
    rule: key::Rule::Read(|_, _| Ok(Effect::Nothing("empty".to_string()))),
};

/// A value as the report shows it: scalars bare, the rest as compact JSON,
/// cut as every echoed value is ([`crate::error::shown`]).
fn shown_value(value: &Value) -> String {
    match value {
        Value::String(text) => shown_text(text).into_owned(),
        other => shown_text(&other.to_string()).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const FORMATS: [Format; 8] = [
        Format::TrainingArguments,
        Format::DeepSpeed,
        Format::Accelerate,
        Format::Axolotl,
        Format::Torchtune,
        Format::LlamaFactory,
        Format::Torchtitan,
        Format::Litgpt,
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

    /// Issue 28, finding 2: `check` was quadratic in the keys. The order of
    /// 49,000 YAML keys (the most the node budget admits: a key and its
    /// value are two nodes) and of 40,000 and 50,000 JSON keys costs a
    /// bounded number of bytes hashed per byte of text; searching the text
    /// for each key cost keys × text / 2 bytes (12 billion here).
    #[test]
    fn keys_are_ordered_with_work_linear_in_the_text() {
        let head = "base_model: gpt2\nmicro_batch_size: 1\nsequence_len: 128\n";
        let yaml: String = head.to_string()
            + &(0..49_000)
                .map(|i| format!("k{i}: 1\n"))
                .collect::<String>();
        let json = |n: usize| {
            r#"{"base_model": "gpt2", "micro_batch_size": 1, "sequence_len": 128"#.to_string()
                + &(0..n)
                    .map(|i| format!(r#", "k{i}": 1"#))
                    .collect::<String>()
                + "}"
        };
        for (name, text) in [
            ("keys.yaml", yaml),
            ("keys.json", json(40_000)),
            ("more.json", json(50_000)),
        ] {
            let parsed = document::parse(&text, Path::new(name)).unwrap();
            let Value::Object(map) = &parsed.value else {
                panic!("{name}: not a mapping")
            };
            let mut found = Vec::new();
            walk(Format::Axolotl.keys(), "", map, &mut found);
            let work = in_document_order(&mut found, &parsed.order);
            assert!(
                work <= 2 * text.len(),
                "{name}: {work} bytes hashed for {} bytes of text",
                text.len()
            );
            let names: Vec<&str> = found.iter().map(|(p, _, _)| p.as_str()).collect();
            // The file's order, not the sorted mapping's (k0, k1, k10, k100, ...).
            assert_eq!(
                names[..6],
                [
                    "base_model",
                    "micro_batch_size",
                    "sequence_len",
                    "k0",
                    "k1",
                    "k2"
                ],
                "{name}"
            );
            assert_eq!(names[13], "k10", "{name}");
        }
    }

    /// Issue 28, finding 1: a companion's known key with a bad value is
    /// refused without saying the value: no DeepSpeed rule puts its value in
    /// its problem.
    #[test]
    fn deepspeed_problems_never_quote_the_value() {
        let marker = "zqsecretmarker";
        let values = [
            serde_json::json!(marker),
            serde_json::json!([marker]),
            serde_json::json!({ marker: marker }),
        ];
        for key in Format::DeepSpeed.keys() {
            for value in &values {
                let mut document = Map::new();
                document.insert(key.name.to_string(), value.clone());
                let problem = match key.rule.read(value, &document) {
                    Err(problem) => problem,
                    Ok(effect) => format!("{effect:?}"),
                };
                assert!(!problem.contains(marker), "{}: {problem}", key.name);
            }
        }
    }

    proptest! {
        #[test]
        fn any_text_is_parsed_or_refused_without_panicking(text in "\\PC{0,200}") {
            let _ = document::parse(&text, Path::new("a.yaml"));
            let _ = document::parse(&text, Path::new("a.json"));
            let _ = document::parse(&text, Path::new("a.toml"));
        }

        #[test]
        fn toml_like_text_is_parsed_or_refused(text in "(\\[{1,2}[a-z_.]{1,8}\\]{1,2}\n|[a-z_]{1,8} ?= ?(\\[|\\{|\"x\"|-?[0-9]{1,3}|true|[a-z]{1,3} ?=|\\]|\\}|, )*\n){0,12}") {
            if let Ok(Value::Object(map)) = document::parse(&text, Path::new("a.toml")).map(|p| p.value) {
                let mut found = Vec::new();
                walk(Format::Torchtitan.keys(), "", &map, &mut found);
                for (_, value, key) in found {
                    if let Some(key) = key {
                        let _ = key.rule.read(value, &map);
                    }
                }
            }
        }

        #[test]
        fn yaml_like_text_is_parsed_or_refused(text in "([a-z_]{1,8}: ?(\\[|\\{|&a |\\*a|-|[0-9]{1,3}|true|auto|\\]|\\}|, )*\n){0,12}") {
            if let Ok(Value::Object(map)) = document::parse(&text, Path::new("a.yaml")).map(|p| p.value) {
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
