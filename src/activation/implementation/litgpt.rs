//! litgpt's model code (`litgpt/model.py` at 0.5.13) and the loss of its
//! training scripts (`litgpt/utils.py` `chunked_cross_entropy`).
//!
//! * MLP: `GptNeoxMLP` (Phi, GPT-NeoX, Falcon) runs
//!   `torch.nn.functional.gelu(x, approximate=config.gelu_approximate)`,
//!   one aten op that saves its input (`GeluBackward0.self`), where
//!   transformers' Phi (`NewGELUActivation`, Python pointwise ops) saves
//!   four `T x f` tensors: priced as [`MlpKind::Gelu`]. `LLaMAMLP`
//!   (`fc_2(silu(fc_1(x)) * fc_2(x))`) saves what `LlamaMLP` saves.
//! * RMSNorm: `litgpt.model.RMSNorm.forward` computes
//!   `(x.float() * rsqrt(mean(x²) + eps) * weight.float()).to(dtype)`: the
//!   product with the weight saves the fp32 normalized tensor, as
//!   `Olmo2RMSNorm` does (transformers' `LlamaRMSNorm` saves it cast back):
//!   priced as [`NormKind::Olmo2RmsNorm`]. `add_unit_offset` (Gemma) is
//!   `(1 + weight)` before the same product: Gemma's kind already saves the
//!   fp32 tensor.
//! * Grouped-query attention (`CausalSelfAttention.forward`, lines
//!   536-539): `if n_query_groups != n_head and (input_pos is None or
//!   n_query_groups != 1)`: `k.repeat_interleave(q_per_kv, dim=1)` and
//!   the same for `v` before `scaled_dot_product_attention`: in training
//!   (no `input_pos`) the kernel saves keys and values at the query heads,
//!   as torchtune's expand does: priced with as many key heads as query
//!   heads. Without grouping (`n_query_groups == n_head`) nothing is
//!   repeated: q and k are rotated into new tensors (`torch.cat((q_roped,
//!   q[..., rope_n_elem:]), dim=-1)`, lines 512-513) while v stays a view of
//!   the fused `qkv` output (`qkv.split(...)`, line 478), which the kernel
//!   saving v keeps alive whole: priced as [`QkvLayout::Fused`] (Phi-3's
//!   and GPT-NeoX's layout in transformers).
//! * Loss (`finetune/full.py`, `pretrain.py`: `chunked_cross_entropy(
//!   logits[..., :-1, :], targets[..., 1:])`, chunk_size 128): see [`loss`];
//!   with a frozen base (`finetune/lora.py`, `adapter.py`: `model(input_ids,
//!   lm_head_chunk_size=128)`, then `chunked_cross_entropy(logits, ...)` on
//!   the list of chunks): see [`chunked_head_loss`].
//! * The scripts call the model through `fabric.setup(model)`:
//!   `_FabricModule.forward` (lightning/fabric/wrappers.py 2.6.6) ends with
//!   `precision.convert_output(output)`, which casts every floating output
//!   to `torch.get_default_dtype()`. Under `bf16-true`, `16-true` and
//!   `BitsandbytesPrecision` the logits the loop holds and computes its
//!   loss on are an fp32 copy ([`outputs_cast`]), the head's own logits die
//!   at the cast, and the loss runs in fp32.

use crate::activation::loss::LossPhase;
use crate::activation::norms::FP32;
use crate::activation::parallel::Rank;
use crate::activation::tally::{Tally, product};
use crate::architecture::{Dimensions, MlpKind, NormKind, Positions, QkvLayout};
use crate::error::Result;
use crate::units::Bytes;

/// `chunked_cross_entropy`'s rows per chunk (its `chunk_size` default).
pub const CHUNK_ROWS: u64 = 128;

/// Bytes of an int64 target.
const INT64: u64 = 8;

/// The architecture with litgpt's module kinds.
pub fn dimensions(dims: &Dimensions) -> Dimensions {
    let mut dims = dims.clone();
    if dims.mlp == MlpKind::NewGelu {
        dims.mlp = MlpKind::Gelu;
    }
    if dims.norm == NormKind::RmsNorm {
        dims.norm = NormKind::Olmo2RmsNorm;
    }
    if dims.kv_heads == dims.heads && dims.qkv == QkvLayout::Separate {
        // No repeat: v stays a view of the fused qkv output.
        dims.qkv = QkvLayout::Fused;
    }
    dims.kv_heads = dims.heads;
    // `CausalSelfAttention.forward`: q and k leave the rotary as
    // `torch.cat((q_roped, q[..., rope_n_elem:]), dim=-1)`, new tensors laid
    // out per head, whose layout the flash output takes: `y.transpose(1,
    // 2).reshape(...)` then copies it (measured: the `__bnb-0.42` fixtures,
    // where bitsandbytes 0.42 holds that copy as the projection's input).
    if let Positions::Rotary { concatenated, .. } = &mut dims.positions {
        *concatenated = true;
    }
    dims
}

/// The fp32 copy of the logits Fabric's `convert_output` returns to the
/// loop, 4·B·S·V, when the model computes them in a half dtype; zero when
/// they are fp32 already.
pub fn outputs_cast(rank: &Rank) -> Result<Bytes> {
    if rank.element >= FP32 {
        return Ok(Bytes::ZERO);
    }
    product(&[FP32, rank.tokens, rank.vocab])
}

/// litgpt's loss on the whole logits, P·B·S·V from the head, which the loop
/// gets as Fabric's fp32 copy (F = 4 bytes, [`outputs_cast`]):
/// `logits[..., :-1, :].reshape(-1, V)` copies the shifted rows, R =
/// B·(S − 1), when B > 1 (the slice is not contiguous; a view when B = 1),
/// alive until the function returns; `split(128)` and one `cross_entropy`
/// per chunk in the logits' dtype saves every chunk's log-softmax, F·R·V
/// together, the targets (an int64 copy of the shifted labels when B > 1)
/// and an fp32 `total_weight` per chunk.
///
/// Backward: each chunk's `nll_loss_backward` and `_log_softmax_backward_data`
/// gradients, 2·F·128·V at once; `SplitBackward0` concatenates the chunks'
/// gradients into one F·R·V tensor and `SliceBackward0` scatters it into a
/// zeroed [B, S, V] one (F·B·S·V): both alive while the output head starts
/// its backward.
pub fn loss(rank: &Rank) -> Result<LossPhase> {
    let rows = rank.batch.saturating_mul(rank.seq.saturating_sub(1));
    let copied = rank.batch > 1;
    let chunks = rows.div_ceil(CHUNK_ROWS).max(1);
    let mut saved = Tally::new();
    saved.tensor(&[FP32, rows, rank.vocab])?;
    saved.tensor_if(copied, &[INT64, rows])?;
    saved.tensor(&[FP32, chunks])?;
    let mut gradient = Tally::new();
    gradient.tensor(&[FP32, rows, rank.vocab])?;
    gradient.tensor(&[FP32, rank.tokens, rank.vocab])?;
    Ok(LossPhase {
        logits: product(&[rank.element, rank.tokens, rank.vocab])?,
        upcast: if copied {
            product(&[FP32, rows, rank.vocab])?
        } else {
            Bytes::ZERO
        },
        saved: saved.bytes(),
        backward: product(&[2, FP32, CHUNK_ROWS.min(rows), rank.vocab])?,
        logits_gradient: gradient.bytes(),
    })
}

/// The tokens of one chunk of the output head under
/// `lm_head_chunk_size=128`: B·min(128, S).
pub fn head_chunk_tokens(rank: &Rank) -> u64 {
    rank.batch.saturating_mul(CHUNK_ROWS.min(rank.seq))
}

/// litgpt's loss when the output head runs in chunks of 128 positions
/// (`GPT.forward(lm_head_chunk_size=128)`: `[self.lm_head(x_i) for x_i in
/// x.split(128, dim=1)]`, the fine-tuning scripts of a frozen base): all
/// chunks' logits exist, P·B·S·V, and come to the loop as Fabric's fp32
/// copies (F = 4 bytes); one `cross_entropy` per chunk saves each chunk's
/// log-softmax (F·B·S·V together, the last chunk shifted by one) and its
/// targets; in backward every chunk's loss gradient runs first (the loss
/// nodes are the newest), leaving all chunks' logits gradients, F·B·S·V;
/// the frozen output head then runs its backward
/// chunk by chunk and makes no weight gradient (the scripts that chunk the
/// head freeze it; with a trained head torchtune's chunked loss sums them,
/// see `chunked_loss.rs`). The last chunk's slice `[..., :-1, :]` is copied
/// when B > 1.
pub fn chunked_head_loss(rank: &Rank) -> Result<LossPhase> {
    let rows = rank.batch.saturating_mul(rank.seq.saturating_sub(1));
    let copied = rank.batch > 1;
    let count = rank.seq.div_ceil(CHUNK_ROWS).max(1);
    let chunk = head_chunk_tokens(rank);
    let last = rank
        .batch
        .saturating_mul((rank.seq - (count - 1) * CHUNK_ROWS.min(rank.seq)).saturating_sub(1));
    let mut saved = Tally::new();
    saved.tensor(&[FP32, rows, rank.vocab])?;
    saved.tensor_if(copied, &[INT64, rows])?;
    saved.tensor(&[FP32, count])?;
    Ok(LossPhase {
        logits: product(&[rank.element, rank.tokens, rank.vocab])?,
        upcast: if copied {
            product(&[FP32, last, rank.vocab])?
        } else {
            Bytes::ZERO
        },
        saved: saved.bytes(),
        backward: product(&[2, FP32, chunk, rank.vocab])?,
        logits_gradient: product(&[FP32, rank.tokens, rank.vocab])?,
    })
}

/// What the rules assume.
pub fn notes() -> Vec<String> {
    vec!["implementation litgpt (litgpt/model.py 0.5.13): F.gelu(approximate) saves one T x f tensor, RMSNorm saves its fp32 normalized tensor; loss chunked_cross_entropy on Fabric's fp32 copy of the logits (convert_output casts the model's outputs to the default dtype): 128-row chunks of the whole logits (finetune/full.py), or, with a frozen base, the output head itself in chunks of 128 positions (finetune/lora.py lm_head_chunk_size=128)".to_string()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;

    fn rank(batch: u64, seq: u64, dtype: DType) -> Rank {
        Rank::tiny_llama(batch, seq, dtype)
    }

    #[test]
    fn the_loss_runs_on_fabrics_fp32_copy_by_hand() {
        // B = 2, S = 256: T = 512, R = 510 shifted rows, V = 4096.
        let (t, r, v) = (512u64, 510u64, 4096u64);
        let bf16 = rank(2, 256, DType::Bf16);
        assert_eq!(outputs_cast(&bf16).unwrap().0, 4 * t * v);
        assert_eq!(
            outputs_cast(&rank(2, 256, DType::Fp32)).unwrap(),
            Bytes::ZERO
        );
        let whole = loss(&bf16).unwrap();
        // The head's own logits are bf16; everything after the cast is fp32.
        assert_eq!(whole.logits.0, 2 * t * v);
        assert_eq!(whole.upcast.0, 4 * r * v);
        assert_eq!(
            whole.saved.0,
            4 * r * v + 8 * r + 4 * r.div_ceil(CHUNK_ROWS)
        );
        assert_eq!(whole.backward.0, 2 * 4 * CHUNK_ROWS * v);
        assert_eq!(whole.logits_gradient.0, 4 * r * v + 4 * t * v);
        // The chunked head: 2 chunks of 128 positions, the last shifted.
        let chunked = chunked_head_loss(&bf16).unwrap();
        assert_eq!(chunked.upcast.0, 4 * 2 * 127 * v);
        assert_eq!(chunked.saved.0, 4 * r * v + 8 * r + 4 * 2);
        assert_eq!(chunked.backward.0, 2 * 4 * 2 * CHUNK_ROWS * v);
        assert_eq!(chunked.logits_gradient.0, 4 * t * v);
    }

    #[test]
    fn litgpt_saves_one_gelu_input_and_the_fp32_normalized_tensor() {
        let mut dims = Dimensions::generic(4, 256, 8, 8, 1024, 4096).unwrap();
        dims.mlp = MlpKind::NewGelu;
        let litgpt = dimensions(&dims);
        assert_eq!(litgpt.mlp, MlpKind::Gelu);
        assert_eq!(litgpt.norm, NormKind::Olmo2RmsNorm);
        dims.mlp = MlpKind::Gated;
        assert_eq!(dimensions(&dims).mlp, MlpKind::Gated);
    }

    #[test]
    fn grouped_keys_are_repeated_and_ungrouped_values_stay_views() {
        // 8 heads, 4 key heads: repeat_interleave copies k and v.
        let grouped = dimensions(&Dimensions::generic(4, 256, 8, 4, 704, 4096).unwrap());
        assert_eq!(grouped.kv_heads, 8);
        assert_eq!(grouped.qkv, QkvLayout::Separate);
        // No grouping: nothing repeated, v a view of the fused output.
        let ungrouped = dimensions(&Dimensions::generic(4, 256, 8, 8, 704, 4096).unwrap());
        assert_eq!(ungrouped.kv_heads, 8);
        assert_eq!(ungrouped.qkv, QkvLayout::Fused);
    }
}
