//! What the kernels of a platform save, as data: a platform is a table of
//! choices, one per place where CPU and CUDA kernels keep different
//! tensors for backward.

use serde::Serialize;

use super::Platform;

/// The kernel choices that change saved tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Kernels {
    /// The dtype of the mean and rstd `native_layer_norm` saves.
    pub layer_norm_stats: StatsDtype,
    /// The mask dropout saves.
    pub dropout_mask: DropoutMask,
    /// How `scaled_dot_product_attention` picks its kernel.
    pub sdpa: SdpaDispatch,
    /// transformers' `experts_implementation`.
    pub experts: ExpertsKernel,
}

/// The dtype of LayerNorm's saved statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StatsDtype {
    /// The input's dtype (the CPU kernel measured by the fixtures).
    Input,
    /// fp32 (CUDA's `layer_norm` accumulates and saves in fp32).
    Fp32,
}

/// The mask dropout saves for backward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DropoutMask {
    /// CPU `F.dropout` is `input * bernoulli_mask / (1 - p)`: the mask has
    /// the input's dtype (saved as `MulBackward0.other`).
    InputDtype,
    /// `native_dropout`, which `F.dropout` calls on CUDA: a 1-byte bool mask.
    Bool,
}

/// How `scaled_dot_product_attention` (torch `sdp_utils`) picks a kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SdpaDispatch {
    /// CPU: the flash kernel, unless attention dropout is active or the
    /// query and value head sizes differ, which fall back to math.
    Cpu,
    /// CUDA: flash for fp16/bf16 with equal head sizes up to 256;
    /// otherwise memory-efficient without grouped-query heads and with
    /// aligned head sizes; otherwise math. Dropout refuses nothing.
    Cuda,
    /// The math backend, forced (`sdpa_kernel(SDPBackend.MATH)`).
    Math,
    /// The flash backend, forced.
    Flash,
}

/// transformers' `experts_implementation` for fused mixture-of-experts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExpertsKernel {
    /// `grouped_mm` (the default): tokens sorted by expert, one grouped GEMM.
    GroupedMm,
    /// A Python loop over the experts.
    Eager,
}

impl DropoutMask {
    /// Bytes per mask element when dropping a tensor of `input_bytes` per element.
    pub fn bytes(self, input_bytes: u64) -> u64 {
        match self {
            DropoutMask::InputDtype => input_bytes,
            DropoutMask::Bool => 1,
        }
    }
}

impl StatsDtype {
    /// Bytes per statistic for an input of `input_bytes` per element.
    pub fn bytes(self, input_bytes: u64) -> u64 {
        match self {
            StatsDtype::Input => input_bytes,
            StatsDtype::Fp32 => 4,
        }
    }
}

impl Platform {
    /// The kernel choices of this platform.
    pub fn kernels(self) -> Kernels {
        match self {
            Platform::Cpu => Kernels {
                layer_norm_stats: StatsDtype::Input,
                dropout_mask: DropoutMask::InputDtype,
                sdpa: SdpaDispatch::Cpu,
                experts: ExpertsKernel::GroupedMm,
            },
            Platform::Cuda => Kernels {
                layer_norm_stats: StatsDtype::Fp32,
                dropout_mask: DropoutMask::Bool,
                sdpa: SdpaDispatch::Cuda,
                experts: ExpertsKernel::GroupedMm,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_differs_from_cpu_in_stats_masks_and_dispatch_only() {
        let (cpu, cuda) = (Platform::Cpu.kernels(), Platform::Cuda.kernels());
        assert_eq!(cpu.layer_norm_stats.bytes(2), 2);
        assert_eq!(cuda.layer_norm_stats.bytes(2), 4);
        assert_eq!(cpu.dropout_mask.bytes(2), 2);
        assert_eq!(cuda.dropout_mask.bytes(4), 1);
        assert_eq!(
            (cpu.sdpa, cuda.sdpa),
            (SdpaDispatch::Cpu, SdpaDispatch::Cuda)
        );
        assert_eq!(cpu.experts, cuda.experts);
    }
}
