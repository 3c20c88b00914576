//! Attention's time on one rank, by kernel: flash kernels (`sdpa`, whose
//! CUDA bf16 path is FlashAttention-2, and `flash`) skip the masked half
//! of a causal score matrix and run at the generation's forward and
//! backward shares (`efficiency.rs`), lower for short sequences and narrow
//! heads; eager attention computes every score with batched matmuls and
//! reads and writes the whole score matrix.

use super::efficiency::Figures;
use crate::activation::Attention;

/// A causal mask leaves half the score blocks to compute (flash kernels
/// skip the rest: Dao 2023, section 3.1.1).
const CAUSAL_SHARE: f64 = 0.5;
/// Flash attention's efficiency grows with the sequence length S as
/// S / (S + S₀), read against the 16k-token figures: FlashAttention-2's
/// causal curves (Dao 2023, Figures 4-6) reach about 60% of their 16k speed
/// at 512 tokens and 85% at 2k. Approximate.
const HALF_SPEED_SEQUENCE: f64 = 384.0;
const REFERENCE_SEQUENCE: f64 = 16384.0;
/// Head width 64 runs at about 92% of head width 128 (Dao 2023, Figure 4).
const NARROW_HEAD_SHARE: f64 = 0.92;
const WIDE_HEAD: u64 = 128;
/// Bytes eager attention moves per score element: forward writes the
/// bf16 scores, reads them into an fp32 softmax and writes the bf16
/// probabilities (2 + 2 + 4 + 2); backward reads the probabilities and
/// their gradient and writes the scores' gradient, twice as much.
/// Approximate.
const EAGER_FORWARD_BYTES: f64 = 10.0;
const EAGER_BACKWARD_BYTES: f64 = 20.0;

/// What attention computes on one rank per step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Attended {
    /// Forward FLOPs of QK^T and PV, unmasked, recomputation included.
    pub forward_flops: f64,
    /// Backward FLOPs, unmasked.
    pub backward_flops: f64,
    /// Score elements per step (heads on the rank × queries × keys).
    pub scores: f64,
    /// Tokens of a sequence a rank's kernel sees at once (S / cp).
    pub sequence: u64,
    /// Head width.
    pub head_dim: u64,
}

/// Seconds of attention on one rank at `peak` FLOP/s, `memory` bytes/s,
/// large-matmul share `matmul` (for eager).
pub fn seconds(
    attended: &Attended,
    kernel: Attention,
    figures: &Figures,
    peak: f64,
    memory: f64,
    matmul: f64,
) -> f64 {
    if attended.forward_flops <= 0.0 {
        return 0.0;
    }
    match kernel {
        Attention::Eager => {
            let compute = (attended.forward_flops + attended.backward_flops) / (peak * matmul);
            let bytes = attended.scores * (EAGER_FORWARD_BYTES + EAGER_BACKWARD_BYTES);
            compute + if memory > 0.0 { bytes / memory } else { 0.0 }
        }
        Attention::Sdpa | Attention::Flash => {
            let s = attended.sequence as f64;
            let length = s / (s + HALF_SPEED_SEQUENCE)
                * ((REFERENCE_SEQUENCE + HALF_SPEED_SEQUENCE) / REFERENCE_SEQUENCE);
            let width = if attended.head_dim >= WIDE_HEAD {
                1.0
            } else {
                NARROW_HEAD_SHARE
            };
            let scale = length.min(1.0) * width;
            CAUSAL_SHARE
                * (attended.forward_flops / (peak * figures.attention_forward * scale)
                    + attended.backward_flops / (peak * figures.attention_backward * scale))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Generation;

    fn attended(sequence: u64) -> Attended {
        Attended {
            forward_flops: 1e15,
            backward_flops: 2e15,
            scores: 1e12,
            sequence,
            head_dim: 128,
        }
    }

    #[test]
    fn short_sequences_are_slower_per_flop_and_backward_dominates() {
        let f = super::super::efficiency::figures(Some(Generation::Hopper));
        let long = seconds(&attended(16384), Attention::Sdpa, &f, 1e15, 3e12, 0.7);
        let short = seconds(&attended(512), Attention::Sdpa, &f, 1e15, 3e12, 0.7);
        assert!(short > 1.5 * long, "{short} {long}");
        // Eager computes the masked half too and moves the scores.
        let eager = seconds(&attended(16384), Attention::Eager, &f, 1e15, 3e12, 0.7);
        assert!(eager > long);
    }
}
