//! A tensor inventory written by a framework that holds the model itself:
//! `trainmem.from_module(module)` in the Python package lists an
//! `nn.Module`'s parameters (names, shapes, dtypes, `requires_grad`, tied
//! storages once) and its buffers into a `*.inventory.json` file:
//!
//! ```json
//! {"trainmem_inventory": 1, "name": "GPT2LMHeadModel",
//!  "parameters": [{"name": "transformer.wte.weight", "shape": [50257, 768],
//!                  "dtype": "F32", "trainable": true,
//!                  "tied": ["lm_head.weight"]}],
//!  "buffers": [{"name": "transformer.h.0.attn.bias", "shape": [1, 1, 1024, 1024], "dtype": "BOOL"}],
//!  "config": {"model_type": "gpt2", "n_layer": 12, ...}}
//! ```
//!
//! Each parameter becomes a [`Tensor`] as a safetensors header's does (role
//! guessed from the name, the dtype kept as the stored dtype); `trainable`
//! is `requires_grad`, so a peft model's frozen base and trainable adapters
//! are priced as they are. A transformers `config` gives the activation
//! sizes (and nothing else: the tensors are the module's). Buffers are not
//! trained and not priced; a note counts them.
//!
//! `"activations_trace"` (optional, `trainmem.Trace.schedule()`) carries
//! what `trainmem.trace_activations` saw autograd save in one forward: the
//! traced micro-batch (and sequence length), the saved bytes of each
//! top-level block in run order, what was saved before and after the
//! blocks, the outputs not saved, and their total. The engine then prices
//! those activations instead of a rule's (`crate::activation::traced`).

use std::io::Read;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::activation::{ActivationTrace, TracedBlock};
use crate::architecture;
use crate::checkpoint::{self, MAX_CHECKPOINT_TENSORS};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::model::{Model, Role, Shape, Tensor};
use crate::units::{Bytes, Count};

/// The largest inventory read: about 150 bytes per parameter tensor, so a
/// model of [`MAX_CHECKPOINT_TENSORS`] tensors and its config fit.
pub const MAX_INVENTORY_BYTES: u64 = 64 << 20;

/// The version of the format this reader knows.
const VERSION: u64 = 1;

/// An inventory as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    trainmem_inventory: u64,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    source: Option<String>,
    parameters: Vec<RawParameter>,
    #[serde(default)]
    buffers: Vec<RawBuffer>,
    #[serde(default)]
    config: Option<Value>,
    #[serde(default)]
    notes: Vec<String>,
    /// What `trainmem.trace_activations` saw autograd save, when traced.
    #[serde(default)]
    activations_trace: Option<RawTrace>,
}

/// A trace's saved bytes by top-level block, in run order (see
/// `crate::activation::traced`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTrace {
    micro_batch: u64,
    #[serde(default)]
    seq_len: Option<u64>,
    blocks: Vec<RawBlock>,
    before_blocks: u64,
    after_blocks: u64,
    outputs: u64,
    /// The largest single storage saved.
    #[serde(default)]
    largest_storage: u64,
    /// The trace's own total, checked against the parts.
    total: u64,
}

/// One traced block.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBlock {
    name: String,
    bytes: u64,
}

/// One parameter tensor, stored once however many names it has.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawParameter {
    name: String,
    shape: Vec<u64>,
    /// A safetensors dtype name: `F32`, `BF16`, `F16`, `F8_E4M3`, ...
    dtype: String,
    trainable: bool,
    /// The dtype training keeps it in when not the recipe's (peft's fp32
    /// adapters under a half-precision base).
    #[serde(default)]
    training_dtype: Option<String>,
    /// Other names of the same storage (tied weights).
    #[serde(default)]
    tied: Vec<String>,
}

/// A registered buffer: reported, not trained.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBuffer {
    #[allow(dead_code)]
    name: String,
    shape: Vec<u64>,
    dtype: String,
}

/// Reads the inventory file at `path`, with a size cap.
pub fn read_inventory(path: &Path) -> Result<Model> {
    let file_error = |problem: String| Error::File {
        path: path.display().to_string(),
        problem,
    };
    let (file, _) = checkpoint::open_regular_file(path).map_err(file_error)?;
    let mut bytes = Vec::new();
    file.take(MAX_INVENTORY_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| file_error(format!("cannot read: {e}")))?;
    if bytes.len() as u64 > MAX_INVENTORY_BYTES {
        return Err(file_error(format!(
            "larger than {} MiB; accepted: an inventory of at most {MAX_CHECKPOINT_TENSORS} tensors",
            MAX_INVENTORY_BYTES >> 20
        )));
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .and_then(|n| n.strip_suffix(".inventory.json").map(str::to_string))
        .unwrap_or_else(|| path.display().to_string());
    parse_inventory(&bytes, &name, &path.display().to_string()).map_err(|error| match error {
        Error::File { problem, .. } => file_error(problem),
        other => file_error(other.to_string()),
    })
}

/// The model an inventory's JSON text describes; `name` and `source` stand
/// in for the ones the inventory does not give.
pub fn parse_inventory(bytes: &[u8], name: &str, source: &str) -> Result<Model> {
    let invalid = |problem: String| Error::File {
        path: source.to_string(),
        problem,
    };
    let raw: Raw = serde_json::from_slice(bytes).map_err(|e| {
        invalid(format!(
            "not a trainmem inventory: {}",
            checkpoint::abbreviated(&e.to_string())
        ))
    })?;
    if raw.trainmem_inventory != VERSION {
        return Err(invalid(format!(
            "inventory version `{}`; accepted: {VERSION}",
            raw.trainmem_inventory
        )));
    }
    if raw.parameters.len() > MAX_CHECKPOINT_TENSORS {
        return Err(invalid(format!(
            "more than {MAX_CHECKPOINT_TENSORS} parameter tensors; accepted: at most {MAX_CHECKPOINT_TENSORS}"
        )));
    }
    if raw.parameters.is_empty() {
        return Err(invalid(
            "the inventory lists no parameters; accepted: a module with at least one parameter"
                .to_string(),
        ));
    }
    let mut tensors = Vec::with_capacity(raw.parameters.len());
    let mut tied_names = 0usize;
    for parameter in raw.parameters {
        let dtype = dtype(&parameter.dtype, &parameter.name)?;
        let mut tensor = Tensor::new(
            parameter.name.clone(),
            Shape::new(parameter.shape)?,
            Role::from_name(&parameter.name),
        );
        tensor.trainable = parameter.trainable;
        tensor.stored_dtype = Some(dtype);
        tensor.training_dtype = parameter
            .training_dtype
            .as_deref()
            .map(|d| self::dtype(d, &parameter.name))
            .transpose()?;
        tied_names += parameter.tied.len();
        tensors.push(tensor);
    }
    let mut model = Model::from_tensors(
        raw.name.unwrap_or_else(|| name.to_string()),
        raw.source.unwrap_or_else(|| source.to_string()),
        tensors,
    );
    if let Some(config) = raw.config.filter(Value::is_object) {
        model.model_type = config
            .get("model_type")
            .and_then(Value::as_str)
            .map(str::to_string);
        let task = model
            .model_type
            .as_deref()
            .and_then(architecture::default_task);
        model.dimensions = architecture::dimensions_for_task(&config, task).ok();
        model.task = task;
    }
    model.notes.extend(raw.notes);
    if let Some(trace) = raw.activations_trace {
        model.traced = Some(activation_trace(trace).map_err(invalid)?);
    }
    if tied_names > 0 {
        model.notes.push(format!(
            "{tied_names} tied parameter names share a storage with another and are counted once"
        ));
    }
    if !raw.buffers.is_empty() {
        let mut bytes = Bytes(0);
        for buffer in &raw.buffers {
            let elements: Count = Shape::new(buffer.shape.clone())?.elements();
            bytes = bytes.add(
                dtype(&buffer.dtype, &buffer.name)?.size_of(elements)?,
                "the buffers' size",
            )?;
        }
        model.notes.push(format!(
            "{} registered buffers ({} bytes) are not trained and not priced",
            raw.buffers.len(),
            bytes.0
        ));
    }
    Ok(model)
}

/// A trace as the engine prices it, its parts adding up to its total.
fn activation_trace(raw: RawTrace) -> std::result::Result<ActivationTrace, String> {
    if raw.micro_batch == 0 || raw.seq_len == Some(0) {
        return Err(
            "activations_trace: a micro-batch or sequence of 0; accepted: the traced input's sizes, at least 1"
                .to_string(),
        );
    }
    if raw.blocks.len() > MAX_CHECKPOINT_TENSORS {
        return Err(format!(
            "activations_trace: more than {MAX_CHECKPOINT_TENSORS} blocks; accepted: at most {MAX_CHECKPOINT_TENSORS}"
        ));
    }
    let trace = ActivationTrace {
        micro_batch: raw.micro_batch,
        seq_len: raw.seq_len,
        blocks: raw
            .blocks
            .into_iter()
            .map(|b| TracedBlock {
                name: b.name,
                bytes: Bytes(b.bytes),
            })
            .collect(),
        before_blocks: Bytes(raw.before_blocks),
        after_blocks: Bytes(raw.after_blocks),
        outputs: Bytes(raw.outputs),
        largest_storage: Bytes(raw.largest_storage),
    };
    let total = trace
        .total()
        .map_err(|e| format!("activations_trace: {e}"))?;
    if total != Bytes(raw.total) {
        return Err(format!(
            "activations_trace: the blocks, before_blocks, after_blocks and outputs add up to {} bytes, not the total {}; accepted: a trace written by trainmem.trace_activations",
            total.0, raw.total
        ));
    }
    Ok(trace)
}

/// The dtype named `text` (a safetensors name) of tensor `name`.
fn dtype(text: &str, name: &str) -> Result<DType> {
    DType::from_safetensors(text).ok_or_else(|| Error::InvalidValue {
        what: "inventory dtype",
        value: text.to_string(),
        reason: format!(
            "of tensor `{name}`; accepted: F64, F32, F16, BF16, F8_E4M3, F8_E5M2, F8_E8M0, I64, U64, I32, U32, I16, U16, I8, U8, BOOL"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Model> {
        parse_inventory(text.as_bytes(), "m", "test")
    }

    #[test]
    fn parameters_become_tensors_with_their_flags() {
        let model = parse(
            r#"{"trainmem_inventory": 1, "name": "Tiny",
                "parameters": [
                  {"name": "embed.weight", "shape": [10, 4], "dtype": "BF16", "trainable": false, "tied": ["head.weight"]},
                  {"name": "layers.0.q_proj.lora_A.default.weight", "shape": [2, 4], "dtype": "F32", "trainable": true, "training_dtype": "F32"}
                ],
                "buffers": [{"name": "rope.inv_freq", "shape": [2], "dtype": "F32"}]}"#,
        )
        .unwrap();
        assert_eq!(model.name, "Tiny");
        assert_eq!(model.total_parameters().unwrap(), Count(48));
        assert_eq!(model.trainable_parameters().unwrap(), Count(8));
        assert_eq!(model.tensors[0].role, Role::Embedding);
        assert_eq!(model.tensors[0].stored_dtype, Some(DType::Bf16));
        assert_eq!(model.tensors[1].training_dtype, Some(DType::Fp32));
        assert!(model.notes.iter().any(|n| n.starts_with("1 tied")));
        assert!(
            model
                .notes
                .iter()
                .any(|n| n.contains("1 registered buffers (8 bytes)"))
        );
        assert!(model.dimensions.is_none());
    }

    #[test]
    fn a_known_config_gives_activation_sizes() {
        let model = parse(
            r#"{"trainmem_inventory": 1, "parameters": [{"name": "w", "shape": [2], "dtype": "F32", "trainable": true}],
                "config": {"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 100, "n_positions": 128}}"#,
        )
        .unwrap();
        assert_eq!(model.model_type.as_deref(), Some("gpt2"));
        assert_eq!(model.task, Some(architecture::Task::CausalLm));
        assert!(model.dimensions.is_some());
    }

    #[test]
    fn a_trace_is_read_and_its_parts_must_add_up() {
        let text = |total: u64| {
            format!(
                r#"{{"trainmem_inventory": 1, "parameters": [{{"name": "w", "shape": [2], "dtype": "F32", "trainable": true}}],
                    "activations_trace": {{"micro_batch": 2, "blocks": [{{"name": "a", "bytes": 10}}, {{"name": "b", "bytes": 20}}],
                      "before_blocks": 1, "after_blocks": 2, "outputs": 3, "total": {total}}}}}"#
            )
        };
        let trace = parse(&text(36)).unwrap().traced.unwrap();
        assert_eq!(trace.micro_batch, 2);
        assert_eq!(trace.seq_len, None);
        assert_eq!(trace.blocks[1].bytes, Bytes(20));
        assert_eq!(trace.total().unwrap(), Bytes(36));
        let error = parse(&text(35)).unwrap_err().to_string();
        assert!(
            error.contains("add up to 36 bytes, not the total 35"),
            "{error}"
        );
        assert!(parse(&text(36).replace("\"total\"", "\"totl\"")).is_err());
    }

    #[test]
    fn bad_inventories_are_errors_naming_the_problem() {
        for (text, wanted) in [
            ("[]", "not a trainmem inventory"),
            (
                r#"{"trainmem_inventory": 2, "parameters": []}"#,
                "version `2`",
            ),
            (
                r#"{"trainmem_inventory": 1, "parameters": []}"#,
                "no parameters",
            ),
            (
                r#"{"trainmem_inventory": 1, "parameters": [{"name": "w", "shape": [2], "dtype": "F33", "trainable": true}]}"#,
                "`F33`",
            ),
            (
                r#"{"trainmem_inventory": 1, "parameters": [{"name": "w", "shape": [4294967296, 4294967296, 2], "dtype": "F32", "trainable": true}]}"#,
                "overflows",
            ),
            (
                r#"{"trainmem_inventory": 1, "parameters": [{"name": "w", "shape": [-1], "dtype": "F32", "trainable": true}]}"#,
                "not a trainmem inventory",
            ),
        ] {
            let error = parse(text).unwrap_err().to_string();
            assert!(error.contains(wanted), "{text}: {error}");
        }
    }
}
