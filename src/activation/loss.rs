//! The output head, the logits and the loss (transformers
//! `loss/loss_utils.py` `ForCausalLMLoss`: `logits.float()`, labels padded
//! and shifted, `cross_entropy` = `log_softmax` + `nll_loss`).

use super::kernels::Kernels;
use super::lora::Training;
use super::norms::{self, NormSite};
use super::parallel::Rank;
use super::tally::Tally;
use crate::architecture::Dimensions;
use crate::error::Result;
use crate::units::Bytes;

/// Bytes of an int64 label.
const INT64: u64 = 8;

/// Bytes of an fp32 element.
const FP32: u64 = 4;

/// What the logits and the loss put on the timeline, whichever loss
/// function runs (see `Schedule`'s fields of the same names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LossPhase {
    /// The logits the model returns, alive until the loss is computed.
    pub logits: Bytes,
    /// The largest temporary while the loss is computed, freed before backward.
    pub upcast: Bytes,
    /// What the loss keeps until backward.
    pub saved: Bytes,
    /// The loss's backward temporaries, on top of `saved`.
    pub backward: Bytes,
    /// The gradient of the logits, alive while the output head runs backward.
    pub logits_gradient: Bytes,
}

/// transformers' `ForCausalLMLoss` on the whole logits: [`logits`],
/// [`upcast`], [`loss`], [`backward_transient`], and a logits gradient as
/// large as the logits.
pub fn standard(rank: &Rank) -> Result<LossPhase> {
    let logits = logits(rank)?;
    Ok(LossPhase {
        logits,
        upcast: upcast(rank)?,
        saved: loss(rank)?,
        backward: backward_transient(rank)?,
        logits_gradient: logits,
    })
}

/// transformers' `ForCausalLMLoss` as it was up to 4.48 (4.48.1
/// `loss/loss_utils.py`: `logits = logits.float()`, then
/// `shift_logits = logits[..., :-1, :].contiguous()` and
/// `cross_entropy(shift_logits.view(-1, V), shift_labels.view(-1))`): the
/// shifted rows B·(S − 1) are copied to a contiguous fp32 tensor,
/// 4·B·(S − 1)·V, even from fp32 logits, and live with the upcast until
/// the log-softmax exists; the log-softmax, its targets (int64, copied
/// likewise) and its two backward gradients cover the B·(S − 1) shifted
/// rows. With B = 1 the slice `[..., :-1, :]` is already contiguous:
/// `.contiguous()` copies nothing, and the targets are a view of the
/// labels (the input ids). In backward
/// `SliceBackward0` scatters the fp32 gradient into a zeroed [B, S, V]
/// tensor (4·T·V with the 4·B·(S − 1)·V gradient: below the two
/// gradients and the saved log-softmax).
pub fn shift_copy(rank: &Rank) -> Result<LossPhase> {
    let rows = rank.batch.saturating_mul(rank.seq.saturating_sub(1));
    // A slice along the sequence is contiguous only for one sequence.
    let copied = rank.batch > 1;
    let mut upcast_and_copy = Tally::new();
    upcast_and_copy.add(upcast(rank)?)?;
    upcast_and_copy.tensor_if(copied, &[FP32, rows, rank.vocab])?;
    let mut saved = Tally::new();
    saved.tensor(&[FP32, rows, rank.vocab])?;
    saved.tensor_if(copied, &[INT64, rows])?;
    saved.tensor(&[FP32])?;
    let mut backward = Tally::new();
    backward.tensor(&[2, FP32, rows, rank.vocab])?;
    let logits = logits(rank)?;
    Ok(LossPhase {
        logits,
        upcast: upcast_and_copy.bytes(),
        saved: saved.bytes(),
        backward: backward.bytes(),
        logits_gradient: logits,
    })
}

/// The output head's saved tensors besides the logits: the final norm
/// over n sequence tokens, `lm_head`'s input P·n·h (unless frozen, or
/// `lm_head_saves_input` is false: a fused linear-cross-entropy computes
/// the head's gradients in its forward), and Gemma 2's `tanh(logits / cap)`
/// P·T·V.
pub fn head(
    rank: &Rank,
    dims: &Dimensions,
    kernels: &Kernels,
    training: &Training,
    lm_head_saves_input: bool,
) -> Result<Bytes> {
    let mut saved = Tally::new();
    saved.add(norms::saved(
        NormSite {
            kind: dims.norm,
            width: rank.hidden,
            rows: rank.sequence_tokens,
            element: rank.normed,
            frozen: training.frozen_base,
        },
        kernels.layer_norm_stats,
    )?)?;
    saved.tensor_if(
        lm_head_saves_input && training.keeps_input(&["lm_head"]),
        &[rank.element, rank.sequence_tokens, rank.hidden],
    )?;
    saved.tensor_if(
        dims.softcap.logits,
        &[rank.element, rank.tokens, rank.vocab],
    )?;
    saved.add(tied_weight_cast(rank, dims.tied_embeddings)?)?;
    Ok(saved.bytes())
}

/// Under autocast over fp32 weights, a head tied to the token embedding
/// casts the embedding's weight for its matmul and saves that cast for
/// backward: P·V·h (an untied head's cast is its own module's, counted
/// with the device's weights). Measured: the `gpt2__amp-bf16__*` and
/// `bert-tiny__amp-bf16__*masked-lm*` CPU fixtures, which were low by
/// exactly this before.
pub fn tied_weight_cast(rank: &Rank, tied: bool) -> Result<Bytes> {
    let mut tally = Tally::new();
    tally.tensor_if(
        tied && rank.residual != rank.element,
        &[rank.element, rank.vocab, rank.hidden],
    )?;
    Ok(tally.bytes())
}

/// The logits the model returns, P·T·V (V per rank with a
/// vocabulary-parallel head).
pub fn logits(rank: &Rank) -> Result<Bytes> {
    let mut tally = Tally::new();
    tally.tensor(&[rank.element, rank.tokens, rank.vocab])?;
    Ok(tally.bytes())
}

/// The loss's saved tensors: the fp32 log-softmax [T, V]
/// (`LogSoftmaxBackward0.result`, `NllLossBackward0.self`) 4·T·V, the
/// int64 targets (`NllLossBackward0.target`): 8·T, or 8·(S + 1) when
/// B = 1 (the shifted labels are then a view of the padded ones), and the
/// fp32 `total_weight`.
pub fn loss(rank: &Rank) -> Result<Bytes> {
    let mut saved = Tally::new();
    saved.tensor(&[FP32, rank.tokens, rank.vocab])?;
    if rank.batch == 1 {
        saved.tensor(&[INT64, rank.seq + 1])?;
    } else {
        saved.tensor(&[INT64, rank.tokens])?;
    }
    saved.tensor(&[FP32])?;
    Ok(saved.bytes())
}

/// The fp32 copy `ForCausalLMLoss` makes of half-precision logits
/// (`logits.float()`), 4·T·V: it lives until `cross_entropy` has computed
/// the log-softmax, which saves its own output, not this input. fp32 logits
/// are not copied.
pub fn upcast(rank: &Rank) -> Result<Bytes> {
    let mut tally = Tally::new();
    tally.tensor_if(rank.element != FP32, &[FP32, rank.tokens, rank.vocab])?;
    Ok(tally.bytes())
}

/// The loss's backward temporaries: `nll_loss_backward` writes an fp32
/// [T, V] gradient of the log-softmax, and `log_softmax_backward_data`
/// an fp32 [T, V] gradient of the logits while the first is still alive:
/// 2 x 4·T·V. The cast back to the logits' dtype that follows (4·T·V +
/// P·T·V) is no larger.
pub fn backward_transient(rank: &Rank) -> Result<Bytes> {
    let mut tally = Tally::new();
    tally.tensor(&[2, FP32, rank.tokens, rank.vocab])?;
    Ok(tally.bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::activation::Workload;
    use crate::architecture::Dimensions;

    /// Two bf16 sequences of 128 tokens, V = 4096: the upcast 4·256·V and
    /// the shifted copy 4·254·V live together; one sequence copies nothing.
    #[test]
    fn the_shifted_logits_are_copied_only_for_several_sequences_by_hand() {
        let dims = Dimensions::generic(4, 256, 8, 4, 704, 4096).unwrap();
        let rank = Rank::new(&dims, &Workload::new(2, 128)).unwrap();
        let phase = shift_copy(&rank).unwrap();
        let v = 4096u64;
        assert_eq!(phase.upcast.0, 4 * 256 * v + 4 * 254 * v);
        assert_eq!(phase.saved.0, 4 * 254 * v + 8 * 254 + 4);
        assert_eq!(phase.backward.0, 2 * 4 * 254 * v);
        let one = Rank::new(&dims, &Workload::new(1, 128)).unwrap();
        let phase = shift_copy(&one).unwrap();
        assert_eq!(phase.upcast.0, 4 * 128 * v);
        assert_eq!(phase.saved.0, 4 * 127 * v + 4);
    }
}
