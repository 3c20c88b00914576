//! FP8 training recipes: the linears' matmuls run in float8, around the
//! bf16 mixed-precision states. What each keeps differs (not measured:
//! float8 matmuls need CUDA sm89+, so every rule cites its source):
//!
//! * torchao float8 (`torchao/float8/float8_linear.py`, torchao 0.18), the
//!   `tensorwise` and `rowwise` recipes of `Float8LinearConfig.from_recipe_name`
//!   (`config.py`; rowwise: axiswise scales, `round_scales_to_power_of_2`).
//!   `matmul_with_hp_or_float8_args.forward` saves the high-precision
//!   operands, `ctx.save_for_backward(input_hp, weight_hp_t)` (line 45), and
//!   casts them with `hp_tensor_to_float8_dynamic` (lines 56-83) for the
//!   forward matmul: the saved activations are those of bf16, and the casts
//!   are temporaries of one linear, 1 byte per element of its input and of
//!   its weight. Backward casts again (lines 107-190): the output gradient
//!   twice (`grad_output_reshaped_maybe_fp8_dim0` and `_dim1`), the weight
//!   for the input gradient and the input for the weight gradient, all
//!   alive until the weight gradient's matmul. Scales are fp32: one per
//!   tensor (tensorwise), one per row or column (rowwise). Scaling is
//!   dynamic: no amax history is kept. torchtitan leaves the output head in
//!   bf16 (`filter_fqns = ["output"]`); FSDP2's float8 all-gather
//!   (`enable_fsdp_float8_all_gather`) is not modelled.
//! * Transformer Engine's `DelayedScaling` (`te.fp8_autocast`; recipe
//!   `transformer_engine/common/recipe/__init__.py`, `amax_history_len: int
//!   = 1024`), through Megatron-core's TE layers (`--framework megatron`):
//!   each TE linear module keeps `fp8_meta["scaling_fwd"]` (input, weight,
//!   output: an fp32 `amax_history` [1024, 3], `scale` and `scale_inv` [3])
//!   and `fp8_meta["scaling_bwd"]` (output and input gradients: [1024, 2]
//!   and [2] twice); the linear saves its input in fp8 (`saved_inputmat =
//!   inputmat`, the quantized input with only its column-wise data kept,
//!   `transformer_engine/pytorch/module/linear.py`), 1 byte per element; and
//!   Megatron passes `is_first_microbatch` (`TELinear.forward` in
//!   `megatron/core/extensions/transformer_engine.py`), so TE caches each
//!   weight's fp8 copy and its transpose across micro-batches (2 bytes per
//!   linear weight element).

use serde::Serialize;

/// How the fp8 scales are found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Scaling {
    /// One dynamic fp32 scale per tensor, from its current amax.
    Tensorwise,
    /// One dynamic fp32 scale per row (or column) of each operand.
    Rowwise,
    /// Scales from an amax history kept across steps (TE `DelayedScaling`).
    Delayed,
}

impl Scaling {
    /// The name in reports, as the JSON spells it.
    pub const fn name(self) -> &'static str {
        match self {
            Scaling::Tensorwise => "tensorwise",
            Scaling::Rowwise => "rowwise",
            Scaling::Delayed => "delayed",
        }
    }
}

/// An fp8 recipe's rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Hash)]
pub struct Fp8 {
    /// Who implements it.
    pub implementation: &'static str,
    /// How scales are found.
    pub scaling: Scaling,
    /// Whether linears save their input in fp8 (1 byte) rather than in the
    /// activation dtype.
    pub saves_fp8_inputs: bool,
    /// Rows of each module's amax history (0: dynamic scaling keeps none).
    pub amax_history_len: u64,
    /// Whether each weight's fp8 copy and transpose are cached across micro-batches.
    pub caches_weights: bool,
    /// Whether it runs through `--framework megatron` (Transformer Engine's modules).
    pub needs_megatron: bool,
    /// The source file the rule follows.
    pub source: &'static str,
}

/// TE `DelayedScaling`'s default `amax_history_len`.
pub const TE_AMAX_HISTORY: u64 = 1024;

/// torchao float8 with tensorwise dynamic scaling.
pub const TORCHAO_TENSORWISE: Fp8 = Fp8 {
    implementation: "torchao float8",
    scaling: Scaling::Tensorwise,
    saves_fp8_inputs: false,
    amax_history_len: 0,
    caches_weights: false,
    needs_megatron: false,
    source: "torchao/float8/float8_linear.py (matmul_with_hp_or_float8_args), config.py recipe tensorwise",
};

/// torchao float8 with rowwise dynamic scaling.
pub const TORCHAO_ROWWISE: Fp8 = Fp8 {
    scaling: Scaling::Rowwise,
    source: "torchao/float8/float8_linear.py (matmul_with_hp_or_float8_args), config.py recipe rowwise",
    ..TORCHAO_TENSORWISE
};

/// Transformer Engine with delayed scaling.
pub const TE_DELAYED: Fp8 = Fp8 {
    implementation: "Transformer Engine",
    scaling: Scaling::Delayed,
    saves_fp8_inputs: true,
    amax_history_len: TE_AMAX_HISTORY,
    caches_weights: true,
    needs_megatron: true,
    source: "transformer_engine/pytorch/module/linear.py, common/recipe DelayedScaling(amax_history_len=1024), via megatron/core/extensions/transformer_engine.py",
};

/// fp8 tensors per TE GEMM module in forward (input, weight, output) and
/// backward (output gradient, input gradient).
pub const TE_FORWARD_TENSORS: u64 = 3;
/// See [`TE_FORWARD_TENSORS`].
pub const TE_BACKWARD_TENSORS: u64 = 2;

/// The fp32 scaling state one TE GEMM module keeps with `history` rows:
/// per direction an amax history [history, n], a scale [n] and a scale_inv [n].
pub fn te_scaling_state_bytes(history: u64) -> u64 {
    let fp32 = 4;
    [TE_FORWARD_TENSORS, TE_BACKWARD_TENSORS]
        .iter()
        .map(|n| fp32 * n * (history + 2))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_te_linear_keeps_about_20_kilobytes_of_scaling_state() {
        // [1024, 3] + 2 x [3] and [1024, 2] + 2 x [2], fp32.
        assert_eq!(
            te_scaling_state_bytes(1024),
            4 * (1024 * 3 + 6) + 4 * (1024 * 2 + 4)
        );
    }
}
