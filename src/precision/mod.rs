//! Precision recipes: which dtype each piece of the model state is kept in.

mod catalogue;
mod fp8;

pub use catalogue::PRECISIONS;
pub use fp8::{Fp8, Scaling, TE_AMAX_HISTORY, te_scaling_state_bytes};

use serde::Serialize;

use crate::catalogue::Named;
use crate::dtype::DType;
use crate::error::Result;
use crate::model::{Shape, Tensor};
use crate::units::Bytes;

/// A precision recipe, as a table of dtypes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Precision {
    /// The name used with `--precision`: `mixed-bf16`.
    pub name: &'static str,
    /// Other accepted names.
    pub aliases: &'static [&'static str],
    /// What it is, in one line.
    pub summary: &'static str,
    /// The dtype of the weights the forward pass reads.
    pub weights: DType,
    /// The dtype gradients are accumulated in.
    pub gradients: DType,
    /// The dtype of a separate master copy of the weights, if any.
    pub master_weights: Option<DType>,
    /// The dtype activations are computed in (the autocast dtype under amp).
    pub activations: DType,
    /// The dtype of optimizer states when it is not that of the updated copy
    /// (`--state-dtype`); `None` in every catalogue recipe.
    pub optimizer_states: Option<DType>,
    /// The fp8 matmul recipe, when the linears run in float8 (see `fp8.rs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fp8: Option<Fp8>,
}

impl Precision {
    /// Looks a recipe up by name or alias.
    pub fn find(name: &str) -> Result<&'static Precision> {
        crate::catalogue::find("precision", name, PRECISIONS)
    }

    /// The recipe as it applies to one tensor: a tensor kept in its own
    /// dtype (peft's fp32 adapters) has weights, gradients and states in it
    /// and no separate master copy.
    pub fn for_tensor(&self, tensor: &Tensor) -> Precision {
        match tensor.training_dtype {
            Some(dtype) => Precision {
                weights: dtype,
                gradients: dtype,
                master_weights: None,
                optimizer_states: self.optimizer_states.or(Some(dtype)),
                ..*self
            },
            None => *self,
        }
    }

    /// The bytes of `tensor`'s weights of `shape` (its local part): quantized
    /// storage when it has one, else elements × the weight dtype.
    pub fn weight_bytes(&self, tensor: &Tensor, shape: &Shape) -> Result<Bytes> {
        match tensor.quantization {
            Some(quantization) => {
                let rows = shape.dims().first().copied().unwrap_or(1);
                quantization.bytes(shape.elements(), rows)
            }
            None => self.for_tensor(tensor).weights.size_of(shape.elements()),
        }
    }

    /// The dtype of the copy the optimizer updates, and so of its states:
    /// torch creates state with `zeros_like(p)` of that copy.
    pub fn optimizer_dtype(&self) -> DType {
        self.optimizer_states
            .or(self.master_weights)
            .unwrap_or(self.weights)
    }
}

impl Named for Precision {
    fn name(&self) -> &'static str {
        self.name
    }
    fn aliases(&self) -> &'static [&'static str] {
        self.aliases
    }
}
