//! One layer as Megatron-core builds it with Transformer Engine's fused
//! kernels (`--framework megatron`), instead of the transformers modules.
//!
//! Read from `megatron/core/transformer/transformer_layer.py` with the TE
//! spec (`get_gpt_layer_with_transformer_engine_spec`) and TE's modules;
//! not measured (TE needs a GPU): approximate. Per layer and rank, with P
//! bytes per element, T = B·S tokens, n = T (or T / t under sequence
//! parallelism), a and kv heads of size d on the rank, f the MLP width:
//!
//! * `TELayerNormColumnParallelLinear` (the input norm fused into q/k/v, and
//!   the pre-MLP norm fused into fc1): the norm's input P·n·h and its fp32
//!   statistics (rsigma 4·n; LayerNorm also the mean 4·n), and the
//!   normalized output the GEMM reads for the weight gradient, P·n·h.
//! * `TEDotProductAttention` (flash or cuDNN fused attention): q, k, v,
//!   the output and the fp32 log-sum-exp, as the flash kernel saves them;
//!   the output is also `linear_proj`'s saved input (one storage).
//! * The fused `bias_swiglu` (or `bias_gelu`) saves its input, fc1's
//!   output (P·T·2f gated, P·T·f otherwise), and `linear_fc2` its input
//!   P·T·f.
//! * Dropout masks, when the config keeps dropout, are 1-byte (CUDA).
//!
//! Mixtures of experts keep the transformers formulas for the expert part.
//!
//! With Transformer Engine's fp8 (`--precision te-fp8`), each linear saves
//! its input quantized (`saved_inputmat = inputmat`, column-wise fp8 data
//! only, `transformer_engine/pytorch/module/linear.py` and
//! `layernorm_linear.py`): the normalized outputs and fc2's input take 1
//! byte per element, and `linear_proj` keeps an fp8 copy of the attention
//! output, 1·T·a·d, besides the bf16 output the attention saves.

use super::attention::{self, Core, CoreOptions, Kernel};
use super::experts;
use super::kernels::{DropoutMask, Kernels};
use super::layer::SavedLayer;
use super::norms::FP32;
use super::parallel::Rank;
use super::tally::{Tally, plus};
use crate::architecture::{Dimensions, MlpKind, NormKind};
use crate::error::Result;
use crate::units::Bytes;

/// Bytes of an fp8 element.
const FP8: u64 = 1;

/// The flash kernels pad head sizes to a multiple of 8, as TE's do.
const FLASH: Kernel = Kernel::Flash {
    head_dim_multiple: 8,
};

/// What one Megatron layer (dense, or `sparse` with the experts) saves on a rank.
pub fn saved(
    rank: &Rank,
    dims: &Dimensions,
    kernels: &Kernels,
    sparse: bool,
    fp8_inputs: bool,
) -> Result<SavedLayer> {
    let p = rank.element;
    // What a linear's saved input takes per element.
    let linear_input = if fp8_inputs { FP8 } else { p };
    let (n, t, h) = (rank.sequence_tokens, rank.tokens, rank.hidden);
    // One fused norm + linear: its input, fp32 statistics and normalized output.
    let mut one_norm = Tally::new();
    one_norm.tensor(&[p, n, h])?;
    one_norm.tensor(&[FP32, n])?;
    one_norm.tensor_if(dims.norm == NormKind::LayerNorm, &[FP32, n])?;
    let mut norms = Tally::new();
    norms.add(one_norm.bytes())?;
    norms.add(one_norm.bytes())?;
    let mut normalized = Tally::new();
    normalized.tensor(&[linear_input, n, h])?;

    let core: Core = attention::core(
        rank,
        dims,
        FLASH,
        CoreOptions {
            dropout: false,
            softcap: false,
            mask: DropoutMask::Bool,
        },
    )?;
    let core = Core {
        output_shared: true,
        ..core
    };

    let (mut mlp, mut expert_bytes) = (Tally::new(), Bytes::ZERO);
    match (&dims.experts, sparse) {
        (Some(moe), true) => {
            let mut tally = normalized;
            tally.add(experts::router(rank, moe)?)?;
            tally.add(experts::routed(rank, moe, kernels.experts)?)?;
            tally.add(experts::shared(rank, moe.shared, true)?)?;
            expert_bytes = tally.bytes();
        }
        _ => {
            let fc1_outputs = match dims.mlp {
                MlpKind::Gated => 2,
                MlpKind::Gelu | MlpKind::NewGelu | MlpKind::QuickGelu => 1,
            };
            mlp.add(normalized.bytes())?;
            mlp.tensor(&[fc1_outputs, p, t, rank.intermediate])?;
            mlp.tensor(&[linear_input, t, rank.intermediate])?;
        }
    }
    let mut projection_input = Tally::new();
    projection_input.tensor_if(fp8_inputs, &[FP8, t, attention::output_width(rank, dims)])?;
    let mut dropout = Tally::new();
    dropout.tensor_if(dims.dropout.residual, &[2, n, h])?;
    let mut input = Tally::new();
    input.tensor(&[p, n, h])?;
    Ok(SavedLayer {
        norms: norms.bytes(),
        attention: plus(normalized.bytes(), projection_input.bytes())?,
        output_input: Bytes::ZERO,
        core,
        core_inputs: attention::checkpoint_inputs(rank, dims)?,
        mlp: mlp.bytes(),
        experts: expert_bytes,
        dropout: dropout.bytes(),
        lora: Bytes::ZERO,
        input: input.bytes(),
    })
}

/// Megatron's `vocab_parallel_cross_entropy` over `logits.float()`: the fp32
/// copy becomes the saved softmax in place (4·T·V on the rank), with the
/// int64 targets; backward writes the gradient into that same storage and
/// casts it to the logits' dtype (P·T·V) while it is still alive.
pub fn loss(rank: &Rank) -> Result<(Bytes, Bytes)> {
    let mut saved = Tally::new();
    saved.tensor(&[FP32, rank.tokens, rank.vocab])?;
    saved.tensor(&[8, rank.tokens])?;
    let mut backward = Tally::new();
    backward.tensor(&[rank.element, rank.tokens, rank.vocab])?;
    Ok((saved.bytes(), backward.bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::activation::{Workload, parallel::Rank};

    /// A Llama-2-7B layer in bf16 at 4,096 tokens, by hand: two fused norms
    /// 2(2Th + 4T), q/k/v's normalized input 2Th, flash's q, k, v and output
    /// 2T(4·ad) with its log-sum-exp 4·a·S, the MLP's normalized input 2Th,
    /// SwiGLU's input 2·2Tf and fc2's input 2Tf.
    #[test]
    fn a_llama_layer_by_hand() {
        let dims = Dimensions::generic(32, 4096, 32, 32, 11008, 32000).unwrap();
        let workload = Workload::new(1, 4096);
        let rank = Rank::new(&dims, &workload).unwrap();
        let layer = saved(
            &rank,
            &dims,
            &crate::activation::Platform::Cuda.kernels(),
            false,
            false,
        )
        .unwrap();
        let (t, h, f, a, d) = (4096u64, 4096u64, 11008u64, 32u64, 128u64);
        let expected = 2 * (2 * t * h + 4 * t)
            + 2 * t * h
            + 2 * t * 4 * a * d
            + 4 * a * t
            + 2 * t * h
            + 2 * 2 * t * f
            + 2 * t * f;
        let total = [
            layer.norms,
            layer.attention,
            layer.output_input,
            layer.core.saved,
            layer.mlp,
            layer.dropout,
        ]
        .iter()
        .map(|b| b.0)
        .sum::<u64>();
        assert_eq!(total, expected);
    }
}
