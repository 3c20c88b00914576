//! A model is an inventory of parameter tensors.
//!
//! Every input (a bare `--params 7B`, and later a preset, a config.json or a
//! safetensors header) becomes the same list of named tensors with shapes and
//! roles. Optimizers, precision and sharding all read this one inventory.

pub mod activation_trace;
pub mod dimensions;
mod quantization;
mod shape;
pub mod task;
mod tensor;

pub use activation_trace::{ActivationTrace, TracedBlock};
pub use dimensions::Dimensions;
pub use quantization::Quantization;
pub use shape::Shape;
pub use task::Task;
pub use tensor::{Role, Tensor};

use serde::Serialize;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::units::{Bytes, Count};

/// The parameter tensors a training run holds, and where they came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Model {
    /// A human name: `7B parameters`, `llama-2-7b`.
    pub name: String,
    /// How the inventory was obtained, for the report.
    pub source: String,
    /// Whether the shapes are real or one flat vector stands for the model.
    pub shapes_known: bool,
    /// The HuggingFace `model_type`, when read from a config.json.
    pub model_type: Option<String>,
    /// The task whose head the inventory holds, when read from a config.json.
    pub task: Option<Task>,
    /// The config.json the inventory was read from, to build it again for
    /// another task.
    #[serde(skip)]
    pub config: Option<serde_json::Value>,
    /// What the checkpoint files hold, when the model was read from them.
    pub checkpoint: Option<CheckpointSummary>,
    /// The sizes activation memory depends on, when the architecture is known.
    pub dimensions: Option<Dimensions>,
    /// What the reader assumed or noticed, for the report.
    pub notes: Vec<String>,
    /// Every parameter tensor, tied weights once.
    pub tensors: Vec<Tensor>,
    /// Tensors the optimizer still holds that are no longer the model's
    /// (litgpt's token embedding, replaced by `StableEmbedding` after the
    /// optimizer was built): frozen weights on the device, not parameters.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub optimizer_only: Vec<Tensor>,
    /// What a trace of the module saw autograd save, when its inventory
    /// carries one (`trainmem.trace_activations`): its activations.
    #[serde(skip)]
    pub traced: Option<ActivationTrace>,
    /// The keys its config.json lacked, each with the default the config
    /// class took for it; empty for a model not read from a config.json.
    pub defaulted_keys: Vec<DefaultedKey>,
}

/// A key a config.json lacked and the default taken for it
/// (`intermediate_size`, `11008`): what a truncated file silently became.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DefaultedKey {
    /// The key, as transformers' config class names it.
    pub key: String,
    /// The default taken, as the config class writes it (`4096`, `false`, `none`).
    pub default: String,
}

/// How many tensors and parameters play one role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RoleCount {
    /// The role.
    pub role: Role,
    /// Tensors in it.
    pub tensors: usize,
    /// Parameters in it.
    pub parameters: Count,
}

/// The checkpoint on disk: what loading it costs, in the dtypes it is stored in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckpointSummary {
    /// How many files were read (one, or every shard).
    pub files: usize,
    /// Tensors in the checkpoint.
    pub tensors: usize,
    /// Elements in the checkpoint.
    pub parameters: Count,
    /// Bytes of tensor data, as stored.
    pub data_bytes: Bytes,
    /// The stored dtypes, with the bytes of each.
    pub dtypes: Vec<(DType, Bytes)>,
}

impl Model {
    /// A model known only by its parameter count: one flat trainable tensor
    /// of `parameters` elements. Shape-aware rules see a single vector.
    pub fn flat(parameters: Count) -> Model {
        Model {
            name: format!("{} parameters", parameters.short()),
            source: "--params".to_string(),
            shapes_known: false,
            model_type: None,
            task: None,
            config: None,
            checkpoint: None,
            dimensions: None,
            notes: Vec::new(),
            traced: None,
            defaulted_keys: Vec::new(),
            tensors: vec![Tensor::new(
                "parameters",
                Shape::vector(parameters.0),
                Role::Other,
            )],
            optimizer_only: Vec::new(),
        }
    }

    /// A model read from real shapes: a preset, a config.json or a checkpoint.
    pub fn from_tensors(
        name: impl Into<String>,
        source: impl Into<String>,
        tensors: Vec<Tensor>,
    ) -> Model {
        Model {
            name: name.into(),
            source: source.into(),
            shapes_known: true,
            model_type: None,
            task: None,
            config: None,
            checkpoint: None,
            dimensions: None,
            notes: Vec::new(),
            traced: None,
            defaulted_keys: Vec::new(),
            tensors,
            optimizer_only: Vec::new(),
        }
    }

    /// All parameters, trainable or frozen.
    pub fn total_parameters(&self) -> Result<Count> {
        self.count_where(|_| true)
    }

    /// Parameters that receive gradients.
    pub fn trainable_parameters(&self) -> Result<Count> {
        self.count_where(|t| t.trainable)
    }

    /// Tensors and parameters per role, in [`Role::ALL`] order, roles with
    /// no tensor left out.
    pub fn by_role(&self) -> Result<Vec<RoleCount>> {
        Role::ALL
            .iter()
            .map(|role| {
                Ok(RoleCount {
                    role: *role,
                    tensors: self.tensors.iter().filter(|t| t.role == *role).count(),
                    parameters: self.count_where(|t| t.role == *role)?,
                })
            })
            .filter(|count| !matches!(count, Ok(RoleCount { tensors: 0, .. })))
            .collect()
    }

    fn count_where(&self, keep: impl Fn(&Tensor) -> bool) -> Result<Count> {
        self.tensors
            .iter()
            .filter(|t| keep(t))
            .try_fold(0u64, |sum, t| sum.checked_add(t.shape.elements().0))
            .map(Count)
            .ok_or_else(|| Error::overflow(format!("the parameter count of {}", self.name)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_model_is_one_trainable_vector() {
        let model = Model::flat(Count(7_000_000_000));
        assert_eq!(model.tensors.len(), 1);
        assert_eq!(model.total_parameters().unwrap(), Count(7_000_000_000));
        assert_eq!(model.trainable_parameters().unwrap(), Count(7_000_000_000));
        assert!(!model.shapes_known);
    }

    #[test]
    fn frozen_tensors_count_in_total_only() {
        let mut frozen = Tensor::new("b", Shape::new(vec![3, 4]).unwrap(), Role::Mlp);
        frozen.trainable = false;
        let model = Model::from_tensors(
            "m",
            "test",
            vec![Tensor::new("a", Shape::vector(10), Role::Norm), frozen],
        );
        assert_eq!(model.total_parameters().unwrap(), Count(22));
        assert_eq!(model.trainable_parameters().unwrap(), Count(10));
    }
}
