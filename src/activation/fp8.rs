//! What fp8 matmuls add to a layer (the recipes are `crate::precision::Fp8`,
//! whose module doc cites the sources).
//!
//! * torchao float8: the saved tensors stay those of bf16; each linear's
//!   casts are temporaries. Forward (`matmul_with_hp_or_float8_args.forward`):
//!   the input and the weight in fp8, T·in + in·out bytes. Backward
//!   (`.backward`): the output gradient twice, the weight and the input,
//!   2·T·out + in·out + T·in bytes, alive until the weight gradient's
//!   matmul. Scales: 4 bytes per cast (tensorwise), or one fp32 per row or
//!   column of each cast operand (rowwise: forward 4·(T + out), backward
//!   4·(T + in + out + in)). The widest linear of the layer counts.
//! * Transformer Engine: linears save their input in fp8 (see
//!   `megatron.rs`); each layer's four GEMM modules (`linear_qkv`,
//!   `linear_proj`, `linear_fc1`, `linear_fc2`) keep their fp32 scaling state
//!   and the cached fp8 weight with its transpose, 2 bytes per weight element.

use serde::Serialize;

use super::parallel::Rank;
use super::tally::{Tally, times};
use crate::architecture::Dimensions;
use crate::error::Result;
use crate::precision::{Fp8, Scaling, te_scaling_state_bytes};
use crate::units::Bytes;

/// Bytes of an fp8 element.
const FP8: u64 = 1;
/// Bytes of an fp32 scale.
const FP32: u64 = 4;
/// GEMM modules in a Megatron layer with Transformer Engine.
const TE_GEMMS_PER_LAYER: u64 = 4;

/// The fp8 figures of one rank, for the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Fp8Activations {
    /// The implementation followed.
    pub implementation: &'static str,
    /// `tensorwise`, `rowwise` or `delayed`.
    pub scaling: Scaling,
    /// Whether linears save their input in fp8.
    pub saves_fp8_inputs: bool,
    /// The widest linear's fp8 casts in forward (a temporary of each layer).
    pub forward_casts: Bytes,
    /// The widest linear's fp8 casts in backward.
    pub backward_casts: Bytes,
    /// Transformer Engine's cached fp8 weights and transposes on the rank.
    pub weight_cache: Bytes,
    /// Transformer Engine's fp32 amax histories, scales and inverse scales on the rank.
    pub scaling_state: Bytes,
}

/// The layer's linears as (input width, output width) on the rank.
fn linears(rank: &Rank, dims: &Dimensions) -> Vec<(u64, u64)> {
    let d = dims.head_dim;
    let (h, f) = (rank.hidden, rank.intermediate);
    let mut all = vec![
        (h, rank.heads.saturating_mul(d)),
        (h, rank.kv_heads.saturating_mul(d)),
        (h, rank.kv_heads.saturating_mul(d)),
        (super::attention::output_width(rank, dims), h),
        (f, h),
    ];
    all.extend(dims.linears.mlp_input.iter().map(|_| (h, f)));
    all
}

/// The widest linear's casts in forward and in backward under torchao.
fn torchao_casts(rank: &Rank, dims: &Dimensions, scaling: Scaling) -> Result<(Bytes, Bytes)> {
    let t = rank.tokens;
    let (mut forward, mut backward) = (Bytes::ZERO, Bytes::ZERO);
    for (input, output) in linears(rank, dims) {
        let mut f = Tally::new();
        f.tensor(&[FP8, t, input])?;
        f.tensor(&[FP8, input, output])?;
        let mut b = Tally::new();
        b.tensor(&[2, FP8, t, output])?;
        b.tensor(&[FP8, input, output])?;
        b.tensor(&[FP8, t, input])?;
        match scaling {
            Scaling::Rowwise => {
                f.tensor(&[FP32, t.saturating_add(output)])?;
                b.tensor(&[
                    FP32,
                    t.saturating_add(input.saturating_mul(2))
                        .saturating_add(output),
                ])?;
            }
            Scaling::Tensorwise | Scaling::Delayed => {
                f.tensor(&[2, FP32])?;
                b.tensor(&[4, FP32])?;
            }
        }
        forward = forward.max(f.bytes());
        backward = backward.max(b.bytes());
    }
    Ok((forward, backward))
}

/// What `recipe` adds on `layers` layers of the rank.
pub fn figures(
    rank: &Rank,
    dims: &Dimensions,
    recipe: &Fp8,
    layers: u64,
) -> Result<Fp8Activations> {
    let (mut forward_casts, mut backward_casts) = (Bytes::ZERO, Bytes::ZERO);
    let (mut weight_cache, mut scaling_state) = (Bytes::ZERO, Bytes::ZERO);
    if recipe.saves_fp8_inputs {
        let elements = linears(rank, dims)
            .into_iter()
            .try_fold(0u64, |sum, (i, o)| {
                i.checked_mul(o).and_then(|w| sum.checked_add(w))
            })
            .ok_or_else(|| crate::error::Error::overflow("the fp8 weight cache"))?;
        let mut cache = Tally::new();
        cache.tensor(&[2, FP8, elements, layers])?;
        weight_cache = cache.bytes();
        scaling_state = times(
            Bytes(te_scaling_state_bytes(recipe.amax_history_len)),
            TE_GEMMS_PER_LAYER.saturating_mul(layers),
        )?;
    } else {
        (forward_casts, backward_casts) = torchao_casts(rank, dims, recipe.scaling)?;
    }
    Ok(Fp8Activations {
        implementation: recipe.implementation,
        scaling: recipe.scaling,
        saves_fp8_inputs: recipe.saves_fp8_inputs,
        forward_casts,
        backward_casts,
        weight_cache,
        scaling_state,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::activation::Workload;
    use crate::precision::Precision;

    fn llama_8b(seq: u64) -> (Dimensions, Rank) {
        let dims = Dimensions::generic(32, 4096, 32, 8, 14336, 128_256).unwrap();
        let rank = Rank::new(&dims, &Workload::new(1, seq)).unwrap();
        (dims, rank)
    }

    #[test]
    fn torchao_casts_of_the_widest_linear_by_hand() {
        let (dims, rank) = llama_8b(8192);
        let (t, h, f) = (8192u64, 4096u64, 14336u64);
        let tensorwise = Precision::find("fp8-tensorwise").unwrap().fp8.unwrap();
        let e = figures(&rank, &dims, &tensorwise, 32).unwrap();
        // Forward: down_proj, T·f + f·h; backward: gate/up, 2·T·f + h·f + T·h.
        assert_eq!(e.forward_casts, Bytes(t * f + f * h + 8));
        assert_eq!(e.backward_casts, Bytes(2 * t * f + h * f + t * h + 16));
        assert_eq!(e.weight_cache, Bytes::ZERO);
        let rowwise = Precision::find("fp8-rowwise").unwrap().fp8.unwrap();
        let r = figures(&rank, &dims, &rowwise, 32).unwrap();
        assert_eq!(r.forward_casts, Bytes(t * f + f * h + 4 * (t + h)));
    }

    #[test]
    fn transformer_engine_caches_two_bytes_per_weight_and_its_scaling_state() {
        let (dims, rank) = llama_8b(8192);
        let te = Precision::find("te-fp8").unwrap().fp8.unwrap();
        let e = figures(&rank, &dims, &te, 32).unwrap();
        let per_layer =
            4096 * 4096 + 2 * 4096 * 1024 + 4096 * 4096 + 14336 * 4096 + 2 * 4096 * 14336u64;
        assert_eq!(e.weight_cache, Bytes(2 * per_layer * 32));
        assert_eq!(
            e.scaling_state,
            Bytes(4 * 32 * (4 * (1024 * 3 + 6) + 4 * (1024 * 2 + 4)))
        );
        assert_eq!(e.forward_casts, Bytes::ZERO);
    }
}
