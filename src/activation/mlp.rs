//! What a dense MLP saves between its input and output projections.

use super::norms::FP32;
use super::parallel::Rank;
use super::tally::Tally;
use crate::architecture::MlpKind;
use crate::error::Result;
use crate::units::Bytes;

/// The `T x f` tensors an MLP saves besides the output projection's input.
///
/// * `Gated` (`LlamaMLP`: `down(act(gate(x)) * up(x))`): gate (saved by
///   the activation, `SiluBackward0.self`), act(gate) and up (saved by the
///   product, `MulBackward0`): 3. Phi-3's `gate_up_proj` output is the
///   storage of gate and up: the same 2 x T x f.
/// * `Gelu` (`Starcoder2MLP`, `GPTNeoXMLP`: `fc2(gelu(fc1(x)))`): fc1's
///   output (`GeluBackward0.self`): 1.
/// * `NewGelu` (GPT-2's `NewGELUActivation`, `0.5 x (1 + tanh(sqrt(2/pi)
///   (x + 0.044715 x^3)))` in Python): x (`PowBackward0`), tanh's output,
///   `0.5 x` and `1 + tanh` (`MulBackward0`): 4.
/// * `QuickGelu` (CLIP's `QuickGELUActivation`, `x * sigmoid(1.702 x)` in
///   Python): x and the sigmoid's result (`MulBackward0`, whose sigmoid
///   result `SigmoidBackward0` saves too): 2.
pub fn intermediates(kind: MlpKind) -> u64 {
    match kind {
        MlpKind::Gated => 3,
        MlpKind::Gelu => 1,
        MlpKind::NewGelu => 4,
        MlpKind::QuickGelu => 2,
    }
}

/// The MLP's saved intermediates on a rank, P·T·f·(intermediates + 1
/// when the output projection keeps its input, the activation's output),
/// with P the projections' output element (`Rank::projected`).
///
/// Under CUDA autocast `NewGELU`'s `torch.pow(x, 3.0)` is on the fp32 list:
/// it saves an fp32 copy of x, and what follows from it is fp32 (tanh's
/// output and `1 + tanh`), `0.5 x` stays in P: (4 + 4 + P + 4)·T·f for the
/// four, and the output projection saves its own cast of the fp32 product
/// (P·T·f). Measured on the CPU with CUDA's casts emulated
/// (`gpt2__*__cuda-autocast`): 6·T·f bytes per layer above CPU autocast.
pub fn saved(rank: &Rank, kind: MlpKind, width: u64, output_keeps_input: bool) -> Result<Bytes> {
    let mut tally = Tally::new();
    if kind == MlpKind::NewGelu && rank.cuda_autocast {
        tally.tensor(&[3 * FP32 + rank.projected, rank.tokens, width])?;
        tally.tensor_if(output_keeps_input, &[rank.element, rank.tokens, width])?;
        return Ok(tally.bytes());
    }
    let count = intermediates(kind) + u64::from(output_keeps_input);
    tally.tensor(&[count, rank.projected, rank.tokens, width])?;
    Ok(tally.bytes())
}

/// QuickGELU's product `x * sigmoid(1.702 x)` in backward, after `fc2`
/// released its saved input: the product's gradient and the gradients of
/// its two factors, less the freed input.
const QUICK_GELU_GRADIENTS: u64 = 2;

/// What a gated MLP's backward holds at its height besides its saved
/// tensors and the layer's output gradient, on a rank, when its output
/// projection is frozen and kept no input (LoRA on the attention only, or
/// adapters that keep their own copy of the product).
///
/// `MulBackward0` of `act(gate(x)) * up(x)` (autograd's `mul_tensor_backward`)
/// makes the gradients of both factors, P·T·f each, while the gradient of
/// the product (`down_proj`'s input gradient, P·T·f) is still alive:
/// 3·P·T·f on top of the saved gate, act and up, with no weight gradient of
/// the layer made yet besides the adapters' (CPU fixtures
/// `*__full__*__lora-*`, peak at `MulBackward0`).
///
/// A trained `down_proj` released its saved input (the product) in its own
/// `MmBackward0` before, and the layer's other weight gradients, which the
/// timeline counts from the layer's start, are not made yet at this moment:
/// the widest tensor stands for it there (0 here), as the fully trained
/// fixtures show. The other kinds: 0 (not measured).
pub fn product_backward(
    rank: &Rank,
    kind: MlpKind,
    width: u64,
    output_keeps_input: bool,
) -> Result<Bytes> {
    /// The product's gradient and its two factors' gradients.
    const GATED_GRADIENTS: u64 = 3;
    if kind == MlpKind::QuickGelu && output_keeps_input {
        let mut tally = Tally::new();
        tally.tensor(&[QUICK_GELU_GRADIENTS, rank.projected, rank.tokens, width])?;
        return Ok(tally.bytes());
    }
    if kind != MlpKind::Gated || output_keeps_input {
        return Ok(Bytes::ZERO);
    }
    let mut tally = Tally::new();
    tally.tensor(&[GATED_GRADIENTS, rank.projected, rank.tokens, width])?;
    Ok(tally.bytes())
}

/// A gated MLP's backward under a frozen base (LoRA), on top of its saved
/// tensors and the layer's output gradient: the same three `T x f`
/// gradients of `MulBackward0` (see [`product_backward`]), less what the
/// output projection saved of its input (`released`), which its backward
/// has freed by then: the frozen base's weight gradients that stand for it
/// in full training are never made.
///
/// With an adapter on the output projection the product's gradient is the
/// sum over two paths, the frozen `MmBackward0` and `lora_A`'s (after
/// peft's dropout and cast, `ToCopyBackward0`): autograd's `InputBuffer`
/// (`torch/csrc/autograd/input_buffer.cpp`) adds them out of place (the
/// fixtures' `aten::add` under `ViewBackward0`), three `T x f` tensors
/// again, when the saved input is already released. The CPU fixtures
/// `*__full__*__lora-all-r16-d0-bf16*.json` peak at that `aten::add`.
pub fn frozen_product_backward(rank: &Rank, width: u64, released: Bytes) -> Result<Bytes> {
    /// The product's gradient and its two factors' gradients.
    const GATED_GRADIENTS: u64 = 3;
    let mut tally = Tally::new();
    tally.tensor(&[GATED_GRADIENTS, rank.projected, rank.tokens, width])?;
    Ok(Bytes(tally.bytes().0.saturating_sub(released.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swiglu_saves_four_tensors_unless_down_is_frozen() {
        // The llama fixture: 4 x 45056 bytes for T = 128, f = 176 in bf16.
        assert_eq!(intermediates(MlpKind::Gated) + 1, 4);
        assert_eq!(intermediates(MlpKind::NewGelu) + 1, 5);
        assert_eq!(intermediates(MlpKind::Gelu) + 1, 2);
        // CLIP's quick_gelu: x, the sigmoid, fc2's input (the clip fixtures).
        assert_eq!(intermediates(MlpKind::QuickGelu) + 1, 3);
    }
}
