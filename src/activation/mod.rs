//! Activation memory: what autograd saves for backward in the transformers
//! implementation of each architecture, plus the logits and the loss.

use serde::Serialize;

use crate::architecture::Dimensions;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::units::Bytes;

/// The attention implementation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Attention {
    /// transformers' eager attention: the softmax probabilities are saved.
    Eager,
    /// `scaled_dot_product_attention` (flash or memory-efficient kernel).
    Sdpa,
    /// flash-attention 2.
    Flash,
}

/// Activation recomputation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Recompute {
    /// Everything saved.
    None,
    /// Attention recomputed (Korthikanti et al. 2022).
    Selective,
    /// Gradient checkpointing: each layer keeps only its input.
    Full,
}

/// Where the kernels run: their saved tensors differ in a few places
/// (LayerNorm statistics, dropout masks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    /// CUDA kernels.
    Cuda,
    /// CPU kernels (what the fixtures measured).
    Cpu,
}

/// One training micro-step's shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Workload {
    /// Sequences per micro-batch B.
    pub micro_batch: u64,
    /// Tokens per sequence S.
    pub seq_len: u64,
    /// The attention implementation.
    pub attention: Attention,
    /// Activation recomputation.
    pub recompute: Recompute,
    /// The dtype activations are computed in.
    pub dtype: DType,
    /// The kernels' platform.
    pub platform: Platform,
    /// Whether the base weights are frozen (LoRA): frozen linears save no input.
    pub frozen_base: bool,
    /// Module-name suffixes carrying LoRA adapters (`q_proj`), whose inputs stay saved.
    pub adapted: Vec<String>,
    /// The LoRA rank r (its A outputs, T × r, are saved).
    pub lora_rank: u64,
    /// Tensor-parallel degree t.
    pub tensor_parallel: u64,
    /// Whether sequence parallelism splits the non-tensor-parallel parts by t.
    pub sequence_parallel: bool,
    /// Pipeline stages p: the first stage holds p micro-batches in flight (1F1B).
    pub pipeline: u64,
}

/// A part of the activation memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Part {
    /// What: `attention`, `mlp`, `norms`, `experts`, ...
    pub name: String,
    /// Bytes, summed over all layers.
    pub bytes: Bytes,
}

/// The activation memory of one micro-batch (times the micro-batches in flight).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Activations {
    /// Everything autograd keeps until backward, plus the logits: `memory.activations`.
    pub total: Bytes,
    /// The decoder layers' share, by layer part.
    pub layers: Vec<Part>,
    /// Embedding outputs, rotary tables and the like outside the layers.
    pub outside_layers: Bytes,
    /// The logits the model returns (P × T × V).
    pub logits: Bytes,
    /// The loss's saved tensors (fp32 log-softmax and targets).
    pub loss: Bytes,
    /// The largest temporary of backward (the gradient of the logits).
    pub backward_transient: Bytes,
    /// How figures were rounded or assumed.
    pub notes: Vec<String>,
}

/// The activation memory of `dims` under `workload`.
pub fn activations(dims: &Dimensions, workload: &Workload) -> Result<Activations> {
    Err(Error::UnsupportedModelType {
        model_type: dims.model_type.clone(),
        supported: format!("(activation models are not built yet; {workload:?})"),
    })
}
