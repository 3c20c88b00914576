//! `torch.autocast` over weights kept in fp32 (`--precision amp-bf16`, HF
//! Trainer's `bf16=True`: accelerate's `prepare_model` wraps the forward in
//! `torch.autocast` and `convert_outputs_to_fp32`).
//!
//! Autocast casts the inputs of the ops on its lower-precision list
//! (`linear`, `matmul`, `scaled_dot_product_attention`) to the compute
//! dtype and leaves the others in their inputs' dtype. So the embedding's
//! output is fp32 and so is the residual stream: each block's bf16 output
//! is added to the fp32 residual (type promotion), and the norms over it
//! compute and return fp32 (transformers' `LlamaRMSNorm` casts back to its
//! input's dtype, fp32; `layer_norm` keeps its input's). A linear
//! reading a norm's output casts it for itself: q_proj, k_proj and v_proj
//! each save their own bf16 copy of the same fp32 tensor, and so do
//! gate_proj and up_proj, and the output head; linears reading a bf16
//! tensor (o_proj, down_proj) cast nothing. The weights' casts are cached
//! per forward (`module.autocast` in the estimate's device memory).
//!
//! Measured on CPU (`tools/measure_timeline.py`, the `__amp-bf16__`
//! fixtures): a Llama layer saves 10·T·h bytes of these casts and 2·T·h
//! more in its two norms' fp32 outputs than in pure bf16 terms, and the
//! final norm's fp32 output, the model's `last_hidden_state`, lives until
//! the causal-LM forward returns, after transformers' loss inside it. CPU
//! autocast and CUDA autocast run these ops alike; CUDA's fp32 list has
//! more (`layer_norm`, `pow`, `softmax`: [`cuda_lists`]), which changes
//! LayerNorm models (GPT-2, Phi, BERT) and NewGELU, not Llama's layers.

use super::Platform;
use super::lora::Training;
use super::norms::FP32;
use super::parallel::Rank;
use super::tally::Tally;
use super::{Loss, Workload};
use crate::architecture::Implementation;
use crate::architecture::{Dimensions, NormKind};
use crate::error::Result;
use crate::units::Bytes;

/// Bytes per element of the residual stream and its norms: the weights'
/// dtype under autocast, the compute dtype otherwise.
pub(super) fn residual_element(workload: &Workload) -> u64 {
    if workload.autocast {
        workload.weights_dtype.bytes()
    } else {
        workload.dtype.bytes()
    }
}

/// Bytes per element of the MLP's projections' outputs. bitsandbytes'
/// `Linear4bit.forward` casts its input to its compute dtype and returns
/// `bnb.matmul_4bit(x, ...).to(inp_dtype)` (`bitsandbytes/nn/modules.py`
/// 0.50.2): over the fp32 residual stream (fp32 weights under autocast,
/// peft's `prepare_model_for_kbit_training` included) the gate and up
/// projections, the activation and the product are fp32, twice the bf16
/// tensors of the same model unquantized. The attention's projections
/// are fp32 too, but sdpa and eager attention save autocast's bf16 casts
/// of them, so only the MLP's saved tensors change.
pub(super) fn projected_element(workload: &Workload) -> u64 {
    if workload.four_bit_linears {
        residual_element(workload)
    } else {
        workload.dtype.bytes()
    }
}

/// Whether autocast runs with CUDA's op lists (`--autocast-ops`, by
/// default the platform's). Beyond the lower-precision ops both devices
/// share, CUDA's fp32 list has `layer_norm`, `rms_norm`, `group_norm`,
/// `pow`, `softmax`, `log_softmax`, `rsqrt`, `exp`, `sum` and more that CPU
/// autocast leaves in their inputs' dtype (torch 2.15: the ops
/// `torch._C._dispatch_dump` shows registered for AutocastCUDA and not
/// AutocastCPU). CUDA casts their floating inputs to fp32, and autograd
/// saves those fp32 copies: measured on the CPU with the casts emulated
/// (`tools/measure_timeline.py` `cuda_autocast_mode`, the
/// `__cuda-autocast` fixtures).
pub(super) fn cuda_lists(workload: &Workload) -> bool {
    workload.autocast && workload.autocast_ops.unwrap_or(workload.platform) == Platform::Cuda
}

/// Bytes per element of the residual norms' computation and output: fp32
/// for `nn.LayerNorm` and `nn.RMSNorm` under CUDA autocast (they save an
/// fp32 copy of their input and return fp32, which each linear reading it
/// casts for itself); the residual's otherwise (transformers' RMSNorms
/// upcast by themselves and cast back).
pub(super) fn normed_element(dims: &Dimensions, workload: &Workload) -> u64 {
    if cuda_lists(workload) && matches!(dims.norm, NormKind::LayerNorm | NormKind::FusedRmsNorm) {
        FP32
    } else {
        residual_element(workload)
    }
}

/// How many copies of one block input the linears `names` save: one
/// shared tensor when any of them keeps its input, or under autocast one
/// cast per linear that keeps it.
pub(super) fn input_copies(rank: &Rank, training: &Training, names: &[&str]) -> u64 {
    if rank.normed == rank.element {
        u64::from(training.keeps_input(names))
    } else {
        names
            .iter()
            .filter(|name| training.keeps_input(&[name]))
            .count() as u64
    }
}

/// The final norm's output in the residual dtype, alive from the end of
/// the layers until transformers' causal-LM forward returns (after its
/// loss) when autocast makes the output head save a cast copy instead of
/// it; zero otherwise.
pub(super) fn last_hidden_state(rank: &Rank, workload: &Workload) -> Result<Bytes> {
    let in_model_loss = workload.implementation == Implementation::Transformers
        && matches!(workload.loss, Loss::Standard | Loss::ShiftCopy);
    let mut tally = Tally::new();
    tally.tensor_if(
        rank.normed != rank.element && in_model_loss,
        &[rank.normed, rank.sequence_tokens, rank.hidden],
    )?;
    Ok(tally.bytes())
}
