//! torchtune's chunked cross-entropy: the output projection applied per
//! chunk of the sequence and `CEWithChunkedOutputLoss`
//! (torchtune `modules/transformer.py` `TransformerDecoder.chunked_output`:
//! `[self.output(chunk) for chunk in last_hidden_state.chunk(N, dim=1)]`;
//! `modules/loss/ce_chunked_output_loss.py`: per chunk
//! `F.cross_entropy(logits.float(), labels, reduction="sum")`).
//!
//! All N logits chunks exist after the forward (the output layer runs on
//! every chunk before the loss), but each is upcast to fp32 alone: the fp32
//! copy of one chunk lives until its `cross_entropy` returns, and backward
//! runs one chunk's fp32 gradients at a time. Every chunk's fp32
//! log-softmax stays saved until backward, as many bytes as the standard
//! loss keeps. `torch.chunk` makes chunks of ceil(S / N) tokens (fewer
//! chunks when N does not divide S): the largest chunk is priced.
//!
//! Backward (torch's autograd engine runs ready nodes by decreasing
//! sequence number, and every loss node was created after every chunk's
//! output projection): each chunk's loss backward runs first, leaving all
//! N logits gradients (P·T·V together); then the output projection's
//! backward runs chunk by chunk, and the N weight gradients are summed
//! into one (`InputBuffer::accumulate`, out of place: at the second chunk
//! the first gradient, the new one and their sum, 3·P·V·h, while N - 2
//! chunks' logits gradients remain; measured on CPU in fp32).
//!
//! The labels are shifted outside the model (torchtune's recipes:
//! `torch.hstack((labels[..., 1:], ignore_labels_cache[:B]))`, int64
//! [B, S]), and each chunk's `nll_loss` saves its targets and an fp32
//! `total_weight`.

use super::loss::LossPhase;
use super::parallel::Rank;
use super::tally::{Tally, product};
use crate::error::Result;
use crate::units::Bytes;

/// Bytes of an fp32 element.
const FP32: u64 = 4;

/// Bytes of an int64 label.
const INT64: u64 = 8;

/// Tokens in the largest of the `chunks` chunks: B·ceil(S / N).
pub fn chunk_tokens(rank: &Rank, chunks: u64) -> u64 {
    rank.batch
        .saturating_mul(rank.seq.div_ceil(chunks.max(1)))
        .min(rank.tokens)
}

/// The logits gradients and the weight-gradient sums of the output
/// projection's backward, at the larger of its two moments.
fn logits_gradient(rank: &Rank, chunk: u64, count: u64) -> Result<Bytes> {
    let mut all = Tally::new();
    all.tensor(&[rank.element, rank.tokens, rank.vocab])?;
    if count < 2 {
        return Ok(all.bytes());
    }
    all.tensor(&[rank.element, rank.vocab, rank.hidden])?;
    let mut second = Tally::new();
    second.tensor(&[
        rank.element,
        rank.tokens.saturating_sub(chunk.saturating_mul(2)),
        rank.vocab,
    ])?;
    second.tensor(&[3, rank.element, rank.vocab, rank.hidden])?;
    Ok(all.bytes().max(second.bytes()))
}

/// The chunked loss's timeline pieces for `chunks` chunks:
/// * logits: all chunks, P·T·V;
/// * upcast: one chunk's fp32 copy, 4·Tc·V (0 for fp32 logits);
/// * saved: every chunk's fp32 log-softmax 4·T·V, the int64 targets 8·T and
///   one fp32 `total_weight` per chunk, 4·N;
/// * backward: one chunk's two fp32 gradients (`nll_loss_backward`,
///   `log_softmax_backward_data`), 2 x 4·Tc·V;
/// * logits gradient: what the output projection's backward holds besides
///   the projection's final gradient (which the timeline allocates after
///   it): every chunk's logits gradient with the first chunk's weight
///   gradient, P·T·V + P·V·h, or at the second chunk the remaining
///   P·(T - 2·Tc)·V with three weight gradients 3·P·V·h, whichever is
///   larger (one chunk: P·T·V, as the standard loss).
pub fn phase(rank: &Rank, chunks: u64) -> Result<LossPhase> {
    let chunk = chunk_tokens(rank, chunks);
    // torch.chunk's count: ceil(S / ceil(S / N)).
    let count = rank.seq.div_ceil(rank.seq.div_ceil(chunks.max(1)).max(1));
    let mut saved = Tally::new();
    saved.tensor(&[FP32, rank.tokens, rank.vocab])?;
    saved.tensor(&[INT64, rank.tokens])?;
    saved.tensor(&[FP32, count])?;
    Ok(LossPhase {
        logits: product(&[rank.element, rank.tokens, rank.vocab])?,
        upcast: if rank.element == FP32 {
            Bytes::ZERO
        } else {
            product(&[FP32, chunk, rank.vocab])?
        },
        saved: saved.bytes(),
        backward: product(&[2, FP32, chunk, rank.vocab])?,
        logits_gradient: logits_gradient(rank, chunk, count)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;

    fn rank(batch: u64, seq: u64, dtype: DType) -> Rank {
        Rank::tiny_llama(batch, seq, dtype)
    }

    #[test]
    fn eight_chunks_of_a_bf16_sequence_by_hand() {
        // T = 512, V = 4096, Tc = 64, h = 256.
        let (t, v, tc, h) = (512u64, 4096u64, 64u64, 256u64);
        let phase = phase(&rank(1, 512, DType::Bf16), 8).unwrap();
        assert_eq!(phase.logits.0, 2 * t * v);
        assert_eq!(phase.upcast.0, 4 * tc * v);
        assert_eq!(phase.saved.0, 4 * t * v + 8 * t + 4 * 8);
        assert_eq!(phase.backward.0, 2 * 4 * tc * v);
        // max(P·T·V + P·V·h, P·(T - 2Tc)·V + 3·P·V·h)
        let all = 2 * t * v + 2 * v * h;
        let second = 2 * (t - 2 * tc) * v + 3 * 2 * v * h;
        assert_eq!(phase.logits_gradient.0, all.max(second));
    }

    #[test]
    fn fp32_logits_are_not_copied_and_one_chunk_is_the_standard_loss() {
        let fp32 = phase(&rank(2, 128, DType::Fp32), 4).unwrap();
        assert_eq!(fp32.upcast, Bytes::ZERO);
        let rank = rank(2, 128, DType::Bf16);
        let one = phase(&rank, 1).unwrap();
        let (t, v) = (256u64, 4096u64);
        assert_eq!(one.upcast.0, 4 * t * v);
        assert_eq!(one.backward.0, 8 * t * v);
        assert_eq!(one.logits_gradient.0, 2 * t * v);
    }

    #[test]
    fn torch_chunk_makes_ceil_sized_chunks() {
        // S = 10, N = 4: chunks of 3, 3, 3, 1; S = 9, N = 4: three chunks of 3.
        assert_eq!(chunk_tokens(&rank(1, 10, DType::Bf16), 4), 3);
        assert_eq!(chunk_tokens(&rank(2, 10, DType::Bf16), 4), 6);
        let nine = phase(&rank(1, 9, DType::Bf16), 4).unwrap();
        assert_eq!(nine.saved.0, 4 * 9 * 4096 + 8 * 9 + 4 * 3);
        // More chunks than tokens: one token each.
        assert_eq!(chunk_tokens(&rank(1, 4, DType::Bf16), 8), 1);
    }
}
