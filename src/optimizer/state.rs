//! The state tensors an optimizer keeps between steps.

use std::borrow::Cow;

use serde::Serialize;

use super::Options;
use crate::dtype::DType;
use crate::error::Result;
use crate::model::{Role, Shape, Tensor};

/// Where a state tensor lives during training.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Location {
    /// On the accelerator, beside the parameter.
    Device,
    /// In host memory (torch keeps `step` counters on the CPU unless the
    /// optimizer is `fused` or `capturable`).
    Host,
    /// In CUDA unified memory (`cudaMallocManaged`, bitsandbytes' paged
    /// optimizers): on the device while there is room, paged out to the
    /// host by the driver under pressure, and never seen by torch's
    /// allocator. Priced with the host's memory: it cannot make a step run
    /// out of device memory.
    Paged,
}

/// One state tensor kept for one parameter tensor (or for the optimizer).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StateTensor {
    /// The key in `optimizer.state[p]`: `exp_avg`, `GG[0]`.
    pub name: Cow<'static, str>,
    /// Its shape.
    pub shape: Shape,
    /// Its element type.
    pub dtype: DType,
    /// Where it lives.
    pub location: Location,
}

impl StateTensor {
    /// A state on the accelerator.
    pub fn device(name: impl Into<Cow<'static, str>>, shape: Shape, dtype: DType) -> StateTensor {
        StateTensor {
            name: name.into(),
            shape,
            dtype,
            location: Location::Device,
        }
    }
}

/// What a rule sees of one parameter tensor.
#[derive(Debug, Clone, Copy)]
pub struct StateContext<'a> {
    /// The parameter tensor.
    pub tensor: &'a Tensor,
    /// The dtype states are kept in (the updated copy's, unless overridden).
    pub dtype: DType,
    /// The resolved options.
    pub options: &'a Options,
}

impl StateContext<'_> {
    /// The parameter's dimensions.
    pub fn dims(&self) -> &[u64] {
        self.tensor.shape.dims()
    }

    /// The parameter's element count.
    pub fn elements(&self) -> u64 {
        self.tensor.shape.elements().0
    }

    /// `torch.zeros_like(p)` in the state dtype.
    pub fn like_param(&self, name: impl Into<Cow<'static, str>>) -> StateTensor {
        self.like_param_in(name, self.dtype)
    }

    /// A tensor of the parameter's shape in `dtype`.
    pub fn like_param_in(&self, name: impl Into<Cow<'static, str>>, dtype: DType) -> StateTensor {
        StateTensor::device(name, self.tensor.shape.clone(), dtype)
    }

    /// A device tensor of the given dimensions; an error if their product
    /// overflows 64 bits.
    pub fn tensor(
        &self,
        name: impl Into<Cow<'static, str>>,
        dims: Vec<u64>,
        dtype: DType,
    ) -> Result<StateTensor> {
        Ok(StateTensor::device(name, Shape::new(dims)?, dtype))
    }

    /// A 0-d device tensor in `dtype` (Adafactor's `RMS`, Adam-mini's `vmean`).
    pub fn scalar(&self, name: impl Into<Cow<'static, str>>, dtype: DType) -> StateTensor {
        StateTensor::device(name, Shape::scalar(), dtype)
    }

    /// torch's 0-d fp32 `step` counter: on the host, or on the device when the
    /// optimizer is `fused` or `capturable` (`torch/optim/adam.py`, `_init_group`).
    pub fn counter(&self, name: impl Into<Cow<'static, str>>) -> StateTensor {
        let on_device = self.options.flag("fused") || self.options.flag("capturable");
        StateTensor {
            name: name.into(),
            shape: Shape::scalar(),
            dtype: DType::Fp32,
            location: if on_device {
                Location::Device
            } else {
                Location::Host
            },
        }
    }

    /// Whether the tensor is an embedding or an output head, by its role.
    pub fn is_embedding_or_head(&self) -> bool {
        matches!(self.tensor.role, Role::Embedding | Role::OutputHead)
    }
}

/// The dtype of `grad.float()` in implementations that compute in fp32: fp32
/// for 16-bit and 8-bit floats, unchanged otherwise (transformers' Adafactor,
/// CAME).
pub fn widened_to_fp32(dtype: DType) -> DType {
    match dtype {
        DType::Fp16 | DType::Bf16 | DType::Fp8E4m3 | DType::Fp8E5m2 | DType::Fp8E8m0 => DType::Fp32,
        other => other,
    }
}

/// A state of a per-tensor rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateSpec {
    /// `torch.zeros_like(p)`: the parameter's shape, in the state dtype.
    LikeParam(&'static str),
    /// A 0-d float32 counter such as torch's `state["step"]`
    /// (`torch.tensor(0.0, dtype=_get_scalar_dtype())`), on the host unless
    /// the optimizer is `fused` or `capturable`.
    Counter(&'static str),
    /// A 0-d float32 counter created on the parameter's device whatever the
    /// options (`torch/optim/asgd.py`: `step`, `eta`, `mu`).
    DeviceCounter(&'static str),
    /// The state only when the option named first is on: a flag set to
    /// `true` or a number other than zero (`momentum_buffer` needs `momentum > 0`).
    When(&'static str, &'static StateSpec),
}

impl StateSpec {
    /// The state tensor this spec gives in `context`, if any.
    pub fn state_for(self, context: &StateContext) -> Result<Option<StateTensor>> {
        Ok(Some(match self {
            StateSpec::LikeParam(name) => context.like_param(name),
            StateSpec::Counter(name) => context.counter(name),
            StateSpec::DeviceCounter(name) => StateTensor {
                location: Location::Device,
                ..context.counter(name)
            },
            StateSpec::When(key, spec) => {
                if !context.options.enabled(key)? {
                    return Ok(None);
                }
                return spec.state_for(context);
            }
        }))
    }
}
