//! Every precision recipe trainmem knows, as data.

use super::Precision;
use super::fp8::{TE_DELAYED, TORCHAO_ROWWISE, TORCHAO_TENSORWISE};
use crate::dtype::DType::{Bf16, Fp16, Fp32};

/// The recipes, in the order `trainmem precisions` lists them.
pub const PRECISIONS: &[Precision] = &[
    Precision {
        name: "fp32",
        aliases: &["float32", "full"],
        summary: "everything in fp32: 4 bytes for weights, gradients and states",
        weights: Fp32,
        gradients: Fp32,
        master_weights: None,
        optimizer_states: None,
        activations: Fp32,
        fp8: None,
    },
    Precision {
        name: "bf16",
        aliases: &["pure-bf16"],
        summary: "pure bf16: weights, gradients and states in 2 bytes (B = 2 in M = P × V × B)",
        weights: Bf16,
        gradients: Bf16,
        master_weights: None,
        optimizer_states: None,
        activations: Bf16,
        fp8: None,
    },
    Precision {
        name: "fp16",
        aliases: &["pure-fp16", "half"],
        summary: "pure fp16: weights, gradients and states in 2 bytes",
        weights: Fp16,
        gradients: Fp16,
        master_weights: None,
        optimizer_states: None,
        activations: Fp16,
        fp8: None,
    },
    Precision {
        name: "mixed-bf16",
        aliases: &[],
        summary: "bf16 weights and gradients, fp32 master weights and states (ZeRO paper, K = 12 with Adam)",
        weights: Bf16,
        gradients: Bf16,
        master_weights: Some(Fp32),
        optimizer_states: None,
        activations: Bf16,
        fp8: None,
    },
    Precision {
        name: "mixed-fp16",
        aliases: &["mixed"],
        summary: "fp16 weights and gradients, fp32 master weights and states (ZeRO paper, K = 12 with Adam)",
        weights: Fp16,
        gradients: Fp16,
        master_weights: Some(Fp32),
        optimizer_states: None,
        activations: Fp16,
        fp8: None,
    },
    Precision {
        name: "amp-bf16",
        aliases: &["autocast-bf16"],
        summary: "torch.autocast to bf16: fp32 weights, gradients and states; bf16 only inside the forward/backward",
        weights: Fp32,
        gradients: Fp32,
        master_weights: None,
        optimizer_states: None,
        activations: Bf16,
        fp8: None,
    },
    Precision {
        name: "amp-fp16",
        aliases: &["autocast-fp16"],
        summary: "torch.autocast to fp16 with a GradScaler: fp32 weights, gradients and states",
        weights: Fp32,
        gradients: Fp32,
        master_weights: None,
        optimizer_states: None,
        activations: Fp16,
        fp8: None,
    },
    Precision {
        name: "fp8-tensorwise",
        aliases: &["float8", "float8-tensorwise", "torchao-fp8"],
        summary: "mixed-bf16 with torchao float8 linears, tensorwise dynamic scaling: bf16 saved inputs, per-linear fp8 casts (torchao/float8/float8_linear.py)",
        weights: Bf16,
        gradients: Bf16,
        master_weights: Some(Fp32),
        optimizer_states: None,
        activations: Bf16,
        fp8: Some(TORCHAO_TENSORWISE),
    },
    Precision {
        name: "fp8-rowwise",
        aliases: &["float8-rowwise"],
        summary: "mixed-bf16 with torchao float8 linears, rowwise dynamic scaling (fp32 scale per row): bf16 saved inputs, per-linear fp8 casts (torchao/float8/config.py)",
        weights: Bf16,
        gradients: Bf16,
        master_weights: Some(Fp32),
        optimizer_states: None,
        activations: Bf16,
        fp8: Some(TORCHAO_ROWWISE),
    },
    Precision {
        name: "te-fp8",
        aliases: &["te-fp8-delayed", "transformer-engine-fp8"],
        summary: "mixed-bf16 with Transformer Engine fp8 (DelayedScaling, amax history 1024) through --framework megatron: fp8 saved linear inputs, cached fp8 weights, fp32 scaling state per module",
        weights: Bf16,
        gradients: Bf16,
        master_weights: Some(Fp32),
        optimizer_states: None,
        activations: Bf16,
        fp8: Some(TE_DELAYED),
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 2: mixed precision with Adam is 2 + 2 + 4 + 8 = 16 bytes/param.
    #[test]
    fn mixed_precision_bytes() {
        let mixed = Precision::find("mixed-fp16").unwrap();
        let adam_states = 2 * mixed.optimizer_dtype().bytes();
        let master = mixed.master_weights.map_or(0, |d| d.bytes());
        assert_eq!(
            mixed.weights.bytes() + mixed.gradients.bytes() + master + adam_states,
            16
        );
    }

    #[test]
    fn pure_half_keeps_states_in_half() {
        assert_eq!(Precision::find("bf16").unwrap().optimizer_dtype(), Bf16);
        assert_eq!(Precision::find("amp-bf16").unwrap().optimizer_dtype(), Fp32);
    }
}
