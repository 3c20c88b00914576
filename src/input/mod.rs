//! Inputs: turning what a user has (a preset name, a config.json, a model
//! folder, a .safetensors file or a sharded index) into a [`Model`].
//!
//! This is the only part of the library that reads files. Files are
//! untrusted: sizes are capped before anything is allocated.

mod hub;
mod inventory;
mod preset;
mod separate_head;

pub use hub::{
    HubSettings, HubSource, Snapshot, hub_cache_dir, hub_cache_dir_from, is_hub_id, resolve_hub_id,
    resolve_hub_id_in, resolve_hub_id_with, set_offline,
};
pub use inventory::{MAX_INVENTORY_BYTES, parse_inventory, read_inventory};
pub use preset::{PRESETS, Preset, preset_with_hub_id};
pub use separate_head::with_separate_head;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::architecture::{self, Task};
use crate::checkpoint::{self, Checkpoint};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::model::{CheckpointSummary, Model, Role, Tensor};
use crate::units::{Bytes, Count};

/// The largest config.json read. Real ones are a few kilobytes, the largest
/// (with label maps or module lists) under a few hundred. Parsed JSON takes
/// about 16 times its text (serde_json's `Value` is 32 bytes per number),
/// so 1 MiB keeps a hostile file (`"mlp_only_layers": [0, 0, ...]`) to
/// tens of megabytes where 16 MiB cost 350 MB.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The model that `spec` names: an existing file or folder, else a preset,
/// else a Hugging Face hub id ([`resolve_hub_id`]).
pub fn load_model(spec: &str) -> Result<Model> {
    let path = Path::new(spec);
    if let Ok(metadata) = std::fs::metadata(path) {
        return if metadata.is_dir() {
            folder(path)
        } else if metadata.is_file() {
            file(path)
        } else {
            Err(not_regular(path, &metadata))
        };
    }
    match crate::catalogue::find("model", spec, PRESETS) {
        Ok(preset) => preset_model(preset),
        Err(Error::UnknownName { suggestion, .. }) if !looks_like_path(spec) => {
            Err(Error::UnknownName {
                kind: "model",
                name: spec.to_string(),
                suggestion,
                accepted: format!(
                    "a path to a config.json, a .safetensors file, a model.safetensors.index.json or a model folder, or a preset: {}",
                    PRESETS
                        .iter()
                        .map(|p| p.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })
        }
        Err(_) if is_hub_id(spec) => resolve_hub_id(spec)?.load(),
        Err(_) => Err(file_error(path, "no such file or folder")),
    }
}

/// A path that exists but is neither a folder nor a regular file (a FIFO,
/// a socket, a device): opening it could block or have effects.
fn not_regular(path: &Path, metadata: &std::fs::Metadata) -> Error {
    file_error(
        path,
        format!(
            "not a regular file ({}); expected a config.json, a .safetensors file, a model.safetensors.index.json or a model folder",
            checkpoint::file_kind(&metadata.file_type())
        ),
    )
}

/// The model that `spec` names, given as the operating system passed it: a
/// path need not be UTF-8; a spec that is not is a file or folder, never a
/// preset name.
pub fn load_model_os(spec: &std::ffi::OsStr) -> Result<Model> {
    if let Some(text) = spec.to_str() {
        return load_model(text);
    }
    let path = Path::new(spec);
    if path.is_dir() {
        folder(path)
    } else if path.is_file() {
        file(path)
    } else {
        Err(file_error(path, "no such file or folder"))
    }
}

/// The note a preset's model carries.
const PRESET_NOTE: &str = "preset: the published config.json, embedded in trainmem";

/// The model of an embedded preset.
pub fn preset_model(preset: &Preset) -> Result<Model> {
    let config: Value = serde_json::from_str(preset.config).map_err(|e| Error::File {
        path: format!("preset {}", preset.name),
        problem: format!("invalid JSON: {e}"),
    })?;
    let mut model = from_config(&config, preset.name, format!("preset {}", preset.name))?;
    model.notes.push(match preset.abridged {
        None => PRESET_NOTE.to_string(),
        Some(left_out) => format!("{PRESET_NOTE}, without {left_out}"),
    });
    Ok(model)
}

fn looks_like_path(spec: &str) -> bool {
    spec.contains(['/', '\\']) || spec.ends_with(".json") || spec.ends_with(".safetensors")
}

fn file_error(path: &Path, problem: impl Into<String>) -> Error {
    Error::File {
        path: path.display().to_string(),
        problem: problem.into(),
    }
}

/// A single file: a checkpoint, an index, or a config.json.
fn file(path: &Path) -> Result<Model> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    if name.ends_with(".safetensors") {
        from_checkpoint(checkpoint::read_safetensors(path)?, path)
    } else if name.ends_with(".inventory.json") {
        read_inventory(path)
    } else if name.ends_with(".index.json") {
        from_checkpoint(checkpoint::read_index(path)?, path)
    } else if name.ends_with(".json") {
        config_file(path)
    } else {
        Err(file_error(
            path,
            "not a model file: expected a config.json, a .safetensors file or a model.safetensors.index.json",
        ))
    }
}

/// A model folder: its config.json when transformers' architecture is known,
/// with the checkpoint's stored size beside it; else the checkpoint alone.
fn folder(path: &Path) -> Result<Model> {
    folder_reading(path, folder_checkpoint)
}

/// [`folder`], with the folder's checkpoint read by `checkpoint` (the hub
/// cache's snapshots read trainmem's header-only copies too).
fn folder_reading(
    path: &Path,
    checkpoint: impl FnOnce(&Path) -> Result<Option<Checkpoint>>,
) -> Result<Model> {
    let config_path = path.join("config.json");
    let config_metadata = match std::fs::metadata(&config_path) {
        Ok(metadata) => Some(metadata),
        // A link that leads nowhere (dangling, or a loop) is an error, not
        // a folder without a config.json: the hub cache's config.json is
        // such a link into `blobs/`.
        Err(error) if std::fs::symlink_metadata(&config_path).is_ok() => {
            return Err(file_error(
                &config_path,
                format!(
                    "a link that cannot be followed: {}",
                    checkpoint::io_problem(&error)
                ),
            ));
        }
        Err(_) => None,
    };
    if let Some(metadata) = config_metadata.as_ref().filter(|m| !m.is_file()) {
        return Err(not_regular(&config_path, metadata));
    }
    let checkpoint = checkpoint(path)?;
    if config_metadata.is_some() {
        match (config_file(&config_path), checkpoint) {
            (Ok(mut model), Some(checkpoint)) => {
                let summary = summary(&checkpoint)?;
                model.notes.extend(checkpoint_note(&summary, &model)?);
                model.checkpoint = Some(summary);
                return Ok(model);
            }
            (Ok(model), None) => return Ok(model),
            (Err(Error::File { .. }), Some(checkpoint))
            | (Err(Error::UnsupportedModelType { .. }), Some(checkpoint)) => {
                let mut model = from_checkpoint(checkpoint, path)?;
                model.notes.push(
                    "config.json could not be used (unsupported model_type or unreadable): the inventory comes from the safetensors headers"
                        .to_string(),
                );
                return Ok(model);
            }
            (Err(error), _) => return Err(error),
        }
    }
    match checkpoint {
        Some(checkpoint) => from_checkpoint(checkpoint, path),
        None => Err(file_error(
            path,
            "holds no config.json and no .safetensors files; give a model folder, a file, or a preset name",
        )),
    }
}

/// The start of the note a model read from a folder carries when its
/// checkpoint and its architecture differ in size.
const CHECKPOINT_NOTE: &str = "the checkpoint holds ";

/// The note saying the checkpoint and the architecture differ, if they do.
fn checkpoint_note(summary: &CheckpointSummary, model: &Model) -> Result<Option<String>> {
    let total = model.total_parameters()?;
    Ok((summary.parameters != total).then(|| {
        format!(
            "{CHECKPOINT_NOTE}{} elements, the architecture {} parameters: training follows the architecture (buffers, extra prediction layers or duplicated tied weights live only in the checkpoint)",
            summary.parameters.grouped(),
            total.grouped()
        )
    }))
}

/// The checkpoint of a folder: its index if there is one, else every
/// `.safetensors` file in name order; `None` when it has neither.
fn folder_checkpoint(path: &Path) -> Result<Option<Checkpoint>> {
    let entries = std::fs::read_dir(path)
        .map_err(|e| file_error(path, format!("cannot list the folder: {e}")))?;
    let mut indexes: Vec<PathBuf> = Vec::new();
    let mut shards: Vec<PathBuf> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| file_error(path, format!("cannot list the folder: {e}")))?;
        let name = entry.file_name().to_string_lossy().to_string();
        if name.ends_with(".safetensors.index.json") {
            indexes.push(entry.path());
        } else if name.ends_with(".safetensors") {
            shards.push(entry.path());
        }
    }
    indexes.sort();
    shards.sort();
    if let Some(index) = indexes.first() {
        return checkpoint::read_index(index).map(Some);
    }
    let mut merged: Option<Checkpoint> = None;
    for shard in shards {
        let next = checkpoint::read_safetensors(&shard)?;
        merged = Some(match merged {
            None => next,
            Some(mut all) => {
                all.data_bytes = all.data_bytes.add(next.data_bytes, "the checkpoint size")?;
                all.tensors.extend(next.tensors);
                if all.tensors.len() > checkpoint::MAX_CHECKPOINT_TENSORS {
                    return Err(file_error(path, checkpoint::too_many_tensors()));
                }
                all.files.extend(next.files);
                all
            }
        });
    }
    Ok(merged)
}

/// A config.json file, read with a size cap.
fn config_file(path: &Path) -> Result<Model> {
    let (file, _) =
        checkpoint::open_regular_file(path).map_err(|problem| file_error(path, problem))?;
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| file_error(path, format!("cannot read: {e}")))?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(file_error(
            path,
            "larger than 1 MiB; a config.json is a few kilobytes",
        ));
    }
    let config: Value = serde_json::from_slice(&bytes)
        .map_err(|e| file_error(path, format!("invalid JSON: {e}")))?;
    let name = model_name(path);
    from_config(&config, &name, path.display().to_string()).map_err(|error| match error {
        Error::InvalidConfig { .. }
        | Error::UnsupportedModelType { .. }
        | Error::Overflow { .. } => file_error(path, error.to_string()),
        other => other,
    })
}

/// The model of a config.json held in memory (pasted on the web page),
/// read by the same code as a file: named `config.json`, its source said
/// to be pasted.
pub fn pasted_model(config: &Value) -> Result<Model> {
    from_config(config, "config.json", "pasted config.json".to_string())
}

/// `meta-llama/Llama-2-7b-hf/config.json` is called `Llama-2-7b-hf`.
fn model_name(path: &Path) -> String {
    let named = if path.file_name().is_some_and(|n| n == "config.json") {
        path.parent().and_then(Path::file_name)
    } else {
        path.file_stem()
    };
    named.map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().to_string(),
    )
}

fn from_config(config: &Value, name: &str, source: String) -> Result<Model> {
    if !config.is_object() {
        return Err(Error::InvalidConfig {
            key: "(top level)".to_string(),
            problem: "a config.json must hold a JSON object".to_string(),
        });
    }
    // The keys the file lacks, read by the inventory or the activation
    // sizes, and the defaults they took: said, not silently assumed.
    let (laid_out, defaulted_keys) = architecture::recording_defaults(|| {
        let (task, tensors) = architecture::tensors_for_task(config, None)?;
        // Activation sizes for the architectures that have an activation
        // model; the parameter inventory does not depend on them.
        let dimensions = architecture::dimensions_for_task(config, Some(task)).ok();
        Ok::<_, Error>((task, tensors, dimensions))
    });
    let (task, tensors, dimensions) = laid_out?;
    let mut model = Model::from_tensors(name, source, tensors);
    model.model_type = config
        .get("model_type")
        .and_then(Value::as_str)
        .map(str::to_string);
    model.task = Some(task);
    model.config = Some(config.clone());
    model.dimensions = dimensions;
    model.defaulted_keys = defaulted_keys;
    if let Some(tokens) = architecture::input_tokens(config)? {
        model.notes.push(format!("{INPUT_TOKENS_NOTE}{tokens}"));
    }
    Ok(model)
}

/// The start of the note that says what a vision input becomes.
const INPUT_TOKENS_NOTE: &str = "input tokens: ";

/// `model` rebuilt for square images of `image_size` pixels
/// (`--image-size`): its config.json with that `image_size` (see
/// [`architecture::with_image_size`]), read again for its task. A model
/// without a config.json, or one that takes no images, is refused.
pub fn with_image_size(mut model: Model, image_size: u64) -> Result<Model> {
    let Some(config) = &model.config else {
        return Err(Error::InvalidValue {
            what: "--image-size",
            value: image_size.to_string(),
            reason: format!(
                "the image size is set in a config.json, and {} has none; accepted: a vision model's preset, config.json, model folder or hub id",
                model.name
            ),
        });
    };
    let config = architecture::with_image_size(config, image_size)?;
    let (task, tensors) = architecture::tensors_for_task(&config, model.task)?;
    model.dimensions = architecture::dimensions_for_task(&config, Some(task)).ok();
    model.tensors = tensors;
    model.task = Some(task);
    model
        .notes
        .retain(|note| !note.starts_with(INPUT_TOKENS_NOTE) && !note.starts_with(CHECKPOINT_NOTE));
    if let Some(tokens) = architecture::input_tokens(&config)? {
        model.notes.push(format!("{INPUT_TOKENS_NOTE}{tokens}"));
    }
    model.config = Some(config);
    if let Some(summary) = model.checkpoint.clone() {
        let note = checkpoint_note(&summary, &model)?;
        model.notes.extend(note);
    }
    Ok(model)
}

/// `model` built for `task`: its config.json read again with the head of
/// that task's auto class, and the activation sizes of that head. A model known only by its parameter count or
/// its checkpoint has no head to change: it is accepted as a causal LM,
/// the only task its inventory can stand for, and any other task is refused.
pub fn with_task(mut model: Model, task: Task) -> Result<Model> {
    if model.task == Some(task) {
        return Ok(model);
    }
    let Some(config) = &model.config else {
        return match task {
            Task::CausalLm => Ok(model),
            other => Err(Error::InvalidValue {
                what: "--task",
                value: other.to_string(),
                reason: format!(
                    "the head of a task is read from a config.json, and {} has none; accepted: a preset, a config.json, a model folder or a hub id with --task, or no --task",
                    model.name
                ),
            }),
        };
    };
    let (task, tensors) = architecture::tensors_for_task(config, Some(task))?;
    model.dimensions = architecture::dimensions_for_task(config, Some(task)).ok();
    model.tensors = tensors;
    model.task = Some(task);
    if let Some(summary) = model.checkpoint.clone() {
        model
            .notes
            .retain(|note| !note.starts_with(CHECKPOINT_NOTE));
        let note = checkpoint_note(&summary, &model)?;
        model.notes.extend(note);
    }
    Ok(model)
}

/// The inventory of a checkpoint: every tensor, its role guessed from its name.
fn from_checkpoint(checkpoint: Checkpoint, path: &Path) -> Result<Model> {
    let summary = summary(&checkpoint)?;
    let tensors = checkpoint
        .tensors
        .into_iter()
        .map(|t| {
            let mut tensor = Tensor::new(t.name.clone(), t.shape, Role::from_name(&t.name));
            tensor.stored_dtype = Some(t.dtype);
            tensor
        })
        .collect();
    let mut model = Model::from_tensors(model_name(path), path.display().to_string(), tensors);
    model.checkpoint = Some(summary);
    model
        .notes
        .push("read from safetensors headers: roles are guessed from tensor names".to_string());
    Ok(model)
}

fn summary(checkpoint: &Checkpoint) -> Result<CheckpointSummary> {
    let mut dtypes: BTreeMap<DType, Bytes> = BTreeMap::new();
    let mut parameters = Count(0);
    for tensor in &checkpoint.tensors {
        let elements = tensor.shape.elements();
        let bytes = tensor.dtype.size_of(elements)?;
        let entry = dtypes.entry(tensor.dtype).or_default();
        *entry = entry.add(bytes, "the checkpoint size")?;
        parameters = Count(
            parameters
                .0
                .checked_add(elements.0)
                .ok_or_else(|| Error::overflow("the checkpoint's element count"))?,
        );
    }
    Ok(CheckpointSummary {
        files: checkpoint.files.len(),
        tensors: checkpoint.tensors.len(),
        parameters,
        data_bytes: checkpoint.data_bytes,
        dtypes: dtypes.into_iter().collect(),
    })
}
