//! Liger's fused linear-cross-entropy (`LigerFusedLinearCrossEntropyLoss`,
//! liger-kernel 0.8.5 `src/liger_kernel/ops/fused_linear_cross_entropy.py`,
//! `fused_linear_cross_entropy_forward`): the output projection and the
//! loss in one autograd node that never materializes the whole logits and
//! computes the head's gradients during the forward. Triton kernels: CUDA
//! only (its dispatcher "does not silently fall back to PyTorch reference
//! code", `liger_kernel/backends/dispatch.py`), so no CPU measurement.
//!
//! On CPU the fused loss is Apple's cut-cross-entropy (25.1.1) with
//! `impl="torch_compile"` (`cut_cross_entropy/torch_compile.py`: `logits =
//! e @ c.T` and `F.cross_entropy(logits.float(), ...)` under
//! `torch.compile(fullgraph=True)`), the implementation CCE names where its
//! Triton kernel cannot run: see [`torch_compile_phase`].
//!
//! Read from the source, with the default `reduction="mean"`,
//! `chunk_mem_const = 1`, no bias, `accum_dtype=None`:
//! * chunk size (lines 103-105): `inc_factor = ceil(V / H)`, `chunk =
//!   min(next_power_of_2(ceil(BT / inc_factor)), BT)`;
//! * kept from the forward to the backward (`ctx.save_for_backward(
//!   grad_input, grad_weight)`, line 574): `grad_input = zeros_like(_input)`
//!   P·BT·H (line 108) and `grad_weight = zeros_like(weight)` in the
//!   weight's dtype, V·H (line 116), with `loss_1d` fp32 [BT] (line 125)
//!   and the bool `target_mask` [BT] (line 131) alive through the forward;
//! * per chunk: the logits `_input_chunk @ weight.t()` P·chunk·V (line 168;
//!   the `out=` buffer of line 151 only serves no-grad calls, line 38),
//!   which the kernel overwrites with their gradient in place, then
//!   `grad_logits_chunk @ weight` P·chunk·H copied into `grad_input` (line
//!   322), then the weight gradient: in place (`addmm`, line 364) for
//!   bf16/fp16 weights on sm80+, or a V·H fp32 `torch.mm` temporary for fp32
//!   weights (line 375);
//! * backward (line 420): nothing new when the loss's gradient is 1.0; the
//!   saved `grad_input` flows to the final norm and `grad_weight` becomes
//!   `lm_head`'s gradient.
//!
//! Under autocast the weights stay fp32 while the logits are bf16:
//! `grad_weight` is then fp32 and accumulated in place through `addmm`'s
//! `out_dtype` (line 341), without the fp32 temporary of line 375.

use super::loss::LossPhase;
use super::parallel::Rank;
use super::tally::Tally;
use crate::error::Result;
use crate::units::Bytes;

/// Bytes of an fp32 element.
const FP32: u64 = 4;

/// Bytes of a bool.
const BOOL: u64 = 1;

/// Liger's chunk of tokens: min(next_power_of_2(ceil(BT / ceil(V / H))), BT).
pub fn chunk_tokens(tokens: u64, vocab: u64, hidden: u64) -> u64 {
    let inc_factor = vocab.div_ceil(hidden.max(1)).max(1);
    let chunk = tokens
        .div_ceil(inc_factor)
        .checked_next_power_of_two()
        .unwrap_or(u64::MAX);
    chunk.min(tokens)
}

/// The fused loss's timeline pieces for weights of `weight_element` bytes:
/// no logits, one chunk's buffers as the temporary (P·c·V logits plus the
/// larger of the P·c·H input-gradient product and, when the logits are fp32
/// too, the 4·V·H weight-gradient product), and `grad_input` P·T·H,
/// `grad_weight` W·V·H, `loss_1d` and `target_mask` kept until backward;
/// no backward temporaries, no logits gradient.
pub fn phase(rank: &Rank, weight_element: u64) -> Result<LossPhase> {
    let (t, v, h, p) = (rank.tokens, rank.vocab, rank.hidden, rank.element);
    let chunk = chunk_tokens(t, v, h);
    let size = |factors: &[u64]| -> Result<Bytes> {
        let mut tally = Tally::new();
        tally.tensor(factors)?;
        Ok(tally.bytes())
    };
    let input_product = size(&[p, chunk, h])?;
    // Line 375: fp32 logits gradient (fp32 weights and activations).
    let weight_product = if p == FP32 {
        size(&[FP32, v, h])?
    } else {
        Bytes::ZERO
    };
    let mut upcast = Tally::new();
    upcast.tensor(&[p, chunk, v])?;
    upcast.add(input_product.max(weight_product))?;
    let mut saved = Tally::new();
    saved.tensor(&[p, t, h])?;
    saved.tensor(&[weight_element, v, h])?;
    saved.tensor(&[FP32, t])?;
    saved.tensor(&[BOOL, t])?;
    Ok(LossPhase {
        logits: Bytes::ZERO,
        upcast: upcast.bytes(),
        saved: saved.bytes(),
        backward: Bytes::ZERO,
        logits_gradient: Bytes::ZERO,
    })
}

/// Bytes of an int64 label.
const INT64: u64 = 8;

/// cut-cross-entropy's `torch_compile` implementation, as measured on CPU
/// (the `__cce-torch-compile` timeline fixtures), with `shift=True` over the
/// n = T - B positions that have a next token:
/// * forward: `e[valids]` copies the hidden states, P·n·h, while they are
///   still alive (the copy then replaces them as the projection's saved
///   input, counted with the head); the compiled graph saves the logits in
///   their own dtype, P·n·V (Inductor fuses the fp32 upcast and the
///   log-softmax: no fp32 T x V tensor is kept), with the fp32 log-sum-exp
///   4·n and the int64 targets 8·n;
/// * backward: the gradient is written over the saved logits; the weight
///   gradient W·V·h exists before the logits are freed.
pub fn torch_compile_phase(rank: &Rank, weight_element: u64) -> Result<LossPhase> {
    let p = rank.element;
    let n = rank.tokens.saturating_sub(rank.batch);
    let size = |factors: &[u64]| -> Result<Bytes> {
        let mut tally = Tally::new();
        tally.tensor(factors)?;
        Ok(tally.bytes())
    };
    let mut saved = Tally::new();
    saved.tensor(&[p, n, rank.vocab])?;
    saved.tensor(&[FP32, n])?;
    saved.tensor(&[INT64, n])?;
    Ok(LossPhase {
        logits: Bytes::ZERO,
        upcast: size(&[p, n, rank.hidden])?,
        saved: saved.bytes(),
        backward: size(&[weight_element, rank.vocab, rank.hidden])?,
        logits_gradient: Bytes::ZERO,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::activation::Workload;
    use crate::architecture::Dimensions;
    use crate::dtype::DType;

    #[test]
    fn the_chunk_size_follows_the_source_comment() {
        // "BT = 4096*4, V = 32000, H = 4096 ==> inc_factor = 8, chunk_size = 2048"
        assert_eq!(chunk_tokens(4096 * 4, 32000, 4096), 2048);
        // Llama 3: V = 128256, H = 4096: inc_factor 32, 4096 / 32 = 128.
        assert_eq!(chunk_tokens(4096, 128_256, 4096), 128);
        // Rounded up to a power of two, never beyond BT.
        assert_eq!(chunk_tokens(3000, 128_256, 4096), 128);
        assert_eq!(chunk_tokens(100, 1000, 4096), 100);
    }

    fn llama3_8b(dtype: DType, weights: DType) -> LossPhase {
        let dims = Dimensions::generic(32, 4096, 32, 8, 14336, 128_256).unwrap();
        let workload = Workload {
            dtype,
            ..Workload::new(1, 4096)
        };
        phase(&Rank::new(&dims, &workload).unwrap(), weights.bytes()).unwrap()
    }

    #[test]
    fn cut_cross_entropy_on_cpu_keeps_the_shifted_logits_by_hand() {
        let dims = Dimensions::generic(4, 256, 8, 4, 704, 4096).unwrap();
        let workload = Workload {
            dtype: DType::Bf16,
            ..Workload::new(1, 512)
        };
        let phase = torch_compile_phase(&Rank::new(&dims, &workload).unwrap(), 2).unwrap();
        // 511 positions with a next token: the bf16 logits the fixture
        // measured (4,186,112 bytes), the log-sum-exp and the targets.
        assert_eq!(phase.saved.0, 2 * 511 * 4096 + 4 * 511 + 8 * 511);
        assert_eq!(2 * 511 * 4096, 4_186_112);
        assert_eq!(phase.upcast.0, 2 * 511 * 256);
        assert_eq!(phase.backward.0, 2 * 4096 * 256);
        assert_eq!(phase.logits, Bytes::ZERO);
    }

    #[test]
    fn liger_buffers_for_llama_3_8b_by_hand() {
        let (t, v, h, c) = (4096u64, 128_256u64, 4096u64, 128u64);
        let bf16 = llama3_8b(DType::Bf16, DType::Bf16);
        assert_eq!(bf16.logits, Bytes::ZERO);
        // grad_input, grad_weight (bf16), loss_1d fp32, target_mask bool.
        assert_eq!(bf16.saved.0, 2 * t * h + 2 * v * h + 4 * t + t);
        // One chunk's logits and its grad_input product; addmm in place.
        assert_eq!(bf16.upcast.0, 2 * c * v + 2 * c * h);
        assert_eq!(bf16.backward, Bytes::ZERO);
        assert_eq!(bf16.logits_gradient, Bytes::ZERO);
        // fp32 weights: the weight gradient's fp32 mm temporary (line 375).
        let fp32 = llama3_8b(DType::Fp32, DType::Fp32);
        assert_eq!(fp32.upcast.0, 4 * c * v + 4 * v * h);
        assert_eq!(fp32.saved.0, 4 * t * h + 4 * v * h + 4 * t + t);
        // Autocast: bf16 logits, an fp32 weight gradient accumulated in place.
        let mixed = llama3_8b(DType::Bf16, DType::Fp32);
        assert_eq!(mixed.upcast, bf16.upcast);
        assert_eq!(mixed.saved.0, 2 * t * h + 4 * v * h + 4 * t + t);
    }
}
