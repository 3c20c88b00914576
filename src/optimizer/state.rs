//! The state tensors an optimizer keeps between steps.

use serde::Serialize;

use crate::dtype::DType;
use crate::model::{Shape, Tensor};

/// Where a state tensor lives during training.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Location {
    /// On the accelerator, beside the parameter.
    Device,
    /// In host memory (torch keeps `step` counters on the CPU unless the
    /// optimizer is `fused` or `capturable`).
    Host,
}

/// One state tensor kept for one parameter tensor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StateTensor {
    /// The key in `optimizer.state[p]`: `exp_avg`.
    pub name: &'static str,
    /// Its shape.
    pub shape: Shape,
    /// Its element type.
    pub dtype: DType,
    /// Where it lives.
    pub location: Location,
}

/// A state of a per-tensor rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateSpec {
    /// `torch.zeros_like(p)`: the parameter's shape, in the dtype of the copy
    /// being updated.
    LikeParam(&'static str),
    /// A 0-d float32 counter on the host, such as torch's `state["step"]`
    /// (`torch.tensor(0.0, dtype=_get_scalar_dtype())`).
    HostCounter(&'static str),
}

impl StateSpec {
    /// The state tensor this spec gives for `tensor` updated in `dtype`.
    pub fn state_for(self, tensor: &Tensor, dtype: DType) -> StateTensor {
        match self {
            StateSpec::LikeParam(name) => StateTensor {
                name,
                shape: tensor.shape.clone(),
                dtype,
                location: Location::Device,
            },
            StateSpec::HostCounter(name) => StateTensor {
                name,
                shape: Shape::scalar(),
                dtype: DType::Fp32,
                location: Location::Host,
            },
        }
    }
}
