//! Activation memory: what autograd saves for backward in the transformers
//! implementation of each architecture, plus the logits and the loss.
//!
//! Each formula is the sum of the tensors torch's autograd keeps (the
//! `saved_tensors` of the `*Backward0` nodes), counted once per storage,
//! as `tools/measure_activations.py` measures them with
//! `torch.autograd.graph.saved_tensors_hooks`; the fixtures in
//! `tests/fixtures/activations/` and `tools/check_activation_formulas.py`
//! hold the measurements and the closed forms this module ports.
//!
//! `workload.rs` says what one micro-step is (its shape, kernels and the
//! techniques switched on); `step.rs` assembles one micro-batch on one rank
//! into a pipeline stage's [`Activations`] and [`Schedule`]. Within it:
//! `parallel.rs` says which sizes a rank holds, `norms.rs`, `attention.rs`, `mlp.rs` and `experts.rs` what each
//! part of a layer saves, `layer.rs` assembles a layer by layout,
//! `recompute.rs` what recomputation keeps, `embeddings.rs` and `loss.rs`
//! what sits outside the layers. `kernels.rs` holds the CPU/CUDA
//! differences as data ([`Kernels`]): with [`Platform::Cpu`] every fixture
//! is reproduced to the byte; [`Platform::Cuda`] differs where CUDA
//! kernels save other tensors (fp32 LayerNorm statistics, 1-byte
//! `native_dropout` masks, sdpa's CUDA dispatch, which refuses no dropout).

mod attention;
mod autocast;
mod chunked_loss;
mod context;
mod embeddings;
mod encoder_head;
mod experts;
mod fp8;
mod fused_loss;
mod implementation;
mod keep_outputs;
mod kernels;
mod layer;
mod lora;
mod loss;
mod mamba;
mod megatron;
mod mlp;
mod norms;
mod offload;
mod parallel;
mod recompute;
mod seq2seq;
mod step;
mod tally;
mod techniques;
#[cfg(test)]
mod tests;
pub mod traced;
mod workload;

use serde::Serialize;

pub use self::fp8::Fp8Activations;
pub use self::kernels::{DropoutMask, ExpertsKernel, Kernels, SdpaDispatch, StatsDtype};
pub use self::lora::LoraDropout;
pub use self::mamba::notes as state_space_notes;
pub use self::offload::{MIN_OFFLOAD_SIZE, Offloaded};
use self::parallel::candidate_stages;
pub use self::seq2seq::notes as encoder_decoder_notes;
use self::step::Step;
use self::tally::plus;
pub use self::techniques::notes as technique_notes;
pub use self::traced::{ActivationTrace, TracedBlock};
pub use self::workload::{Attention, Loss, Platform, Recompute, Workload};
use crate::architecture::Dimensions;
use crate::error::Result;
use crate::units::Bytes;

/// Bytes of an fp32 element.
const FP32_BYTES: u64 = 4;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Part {
    /// What: `attention`, `mlp`, `norms`, `experts`, ...
    pub name: String,
    /// Bytes, summed over all layers.
    pub bytes: Bytes,
}

/// The activation memory of one micro-batch (times the micro-batches in flight).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Activations {
    /// Everything autograd keeps until backward, plus the logits: `memory.activations`.
    pub total: Bytes,
    /// The decoder layers' share, by layer part.
    pub layers: Vec<Part>,
    /// Outside the layers: embedding indices and dropout mask, rotary
    /// tables, the final norm, the output head's input (and Gemma 2's
    /// soft-capped logits).
    pub outside_layers: Bytes,
    /// The logits the model returns (P × T × V).
    pub logits: Bytes,
    /// The loss's saved tensors (fp32 log-softmax and targets).
    pub loss: Bytes,
    /// The largest temporary of backward, on top of `total`: the loss's
    /// two fp32 T x V gradients alive together (`nll_loss_backward`'s and
    /// `log_softmax_backward_data`'s, 8·T·V), or the saved tensors of one
    /// layer rebuilt by recomputation, whichever is larger. (HF's Trainer
    /// drops the returned logits before backward, which frees P·T·V of
    /// `total` meanwhile; not subtracted.)
    pub backward_transient: Bytes,
    /// The loss function priced: `standard`, `chunked:N` or `fused`.
    pub loss_function: Loss,
    /// The recomputation priced: `none`, `selective`, `op` or `full`.
    pub recompute: Recompute,
    /// Recomputation applies to every N-th layer (1: all).
    pub recompute_every: u64,
    /// Activation offloading, when on: what left the device, what the host holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offload: Option<Offloaded>,
    /// fp8 matmuls, when the precision has them: their casts and state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fp8: Option<Fp8Activations>,
    /// How figures were rounded or assumed.
    pub notes: Vec<String>,
    /// The same figures layer by layer, in the order the step allocates and
    /// frees them: what the step timeline reads.
    #[serde(skip)]
    pub schedule: Schedule,
}

/// What one pipeline stage's activations are made of, layer by layer, for the
/// step timeline (`crate::timeline`): each layer's saved tensors appear in
/// forward and disappear in backward; the loss's tensors sit between.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Schedule {
    /// The pipeline stage, from 0.
    pub stage: u64,
    /// Micro-batches whose activations the stage holds at once (1F1B).
    pub in_flight: u64,
    /// The stage's layers, in forward order.
    pub layers: Vec<LayerActivations>,
    /// Saved before the layers: the embedding's indices and dropout mask.
    pub embeddings: Bytes,
    /// The batch's tensors alive through the step that autograd does not
    /// save (not in the activation totals): a vision model's fp32 pixels
    /// beside the half-precision cast its patch embedding saves.
    pub batch_inputs: Bytes,
    /// Shared by the layers of a micro-batch: the rotary tables.
    pub shared: Bytes,
    /// What persists across steps with the layers (Transformer Engine's
    /// cached fp8 weights and scaling state), from before the first step.
    pub resident: Bytes,
    /// Whether `embeddings` and `shared` die at the end of the micro-batch's
    /// forward (offloading: each use was copied to the host).
    pub outside_forward_only: bool,
    /// Saved by the final norm and the output head (its input, Gemma 2's
    /// soft-capped logits).
    pub head: Bytes,
    /// The output head's input, when the head is a 4-bit linear whose
    /// bitsandbytes (< 0.43.2) holds it until the graph dies (litgpt's
    /// QLoRA quantizes the head; see `LayerActivations::held`).
    pub head_held: Bytes,
    /// LoRA on the output head: what its adapter holds beside the logits at
    /// the height of one head call's forward (`lora::HeadAdapter`).
    pub head_forward: Bytes,
    /// LoRA on the output head: what its adapter's backward holds beside
    /// the logits' gradient, per head call.
    pub head_backward: Bytes,
    /// The logits the model returns, P·T·V (0 with a fused loss).
    pub logits: Bytes,
    /// The largest temporary while the loss runs: the fp32 copy
    /// `ForCausalLMLoss` makes of half-precision logits, 4·T·V, alive until
    /// `cross_entropy` returns (0 when the logits are fp32); one chunk's
    /// copy with `--loss chunked:N`; one chunk's buffers with `--loss fused`
    /// (see `loss::LossPhase`).
    pub logits_upcast: Bytes,
    /// The loss's saved tensors (fp32 log-softmax, targets; the fused
    /// loss's precomputed gradients).
    pub loss: Bytes,
    /// The loss's backward temporaries (two fp32 T x V gradients, or one
    /// chunk's).
    pub loss_backward: Bytes,
    /// The gradient of the logits in their own dtype, P·T·V, alive while the
    /// output head runs backward (with the chunked loss, also the output
    /// projection's weight-gradient sums).
    pub logits_gradient: Bytes,
    /// Whether the stage holds the output head and the loss.
    pub has_head: bool,
    /// The largest single activation tensor of a layer, P·T·w for its widest
    /// intermediate w.
    pub widest_tensor: Bytes,
    /// Whether the loop keeps the logits until the step ends
    /// (`Workload::keep_outputs`) instead of dropping them before backward.
    pub logits_kept: bool,
    /// The loop's outputs of the step before, alive when this one starts
    /// (`--carry-outputs`: the variable is rebound only as the next forward
    /// returns): the logits it kept, the loss scalar aside. The held inputs
    /// of that step's graph (`LayerActivations::held`) come with them.
    pub outputs_carried: Bytes,
    /// The inputs that step's graph still holds (`LayerActivations::held`
    /// summed over the stage's layers), dying with its outputs.
    pub held_carried: Bytes,
    /// Whether the model returns before its loss (litgpt, torchtune,
    /// torchtitan: the loop computes it), so the carried outputs die
    /// before the loss; transformers computes the loss inside the forward.
    pub loss_outside_model: bool,
    /// When the logits are kept: the model returns their fp32 upcast as its
    /// output instead (transformers 4.38-4.44's `LlamaForCausalLM` ran
    /// `logits = logits.float()` before its loss, `--loss shift-copy`), so
    /// the loop keeps this many bytes and the half-precision logits die at
    /// the upcast. Zero otherwise.
    pub outputs_upcast: Bytes,
    /// The copy of the logits the loop's wrapper returns in their place
    /// (litgpt's Fabric `convert_output`: fp32, 4·T·V, when the model
    /// computes them in a half dtype): made as the loss phase begins, when
    /// the model's own logits die, and the tensor the loss runs on and a
    /// loop that keeps its outputs holds. Zero otherwise.
    pub outputs_cast: Bytes,
    /// Under autocast, the final norm's output in the residual dtype (the
    /// model's `last_hidden_state`; the output head saves a cast copy),
    /// alive until transformers' causal-LM forward returns after its loss;
    /// zero otherwise (see `autocast.rs`).
    pub last_hidden_state: Bytes,
}

/// One layer's activations on one rank.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LayerActivations {
    /// The layer's index in the model.
    pub layer: u64,
    /// What it keeps from its forward until its backward.
    pub kept: Bytes,
    /// The part of `kept` that outlives its backward: bitsandbytes before
    /// 0.43.2 holds each 4-bit linear's input as a `ctx` attribute
    /// (`MatMul4Bit.forward`: `ctx.tensors = (A, B)`), which autograd does
    /// not release after the node's backward, so it lives as long as the
    /// graph (`Workload::quantized_inputs_kept`). Zero otherwise.
    pub held: Bytes,
    /// What recomputation rebuilds of it at the start of its backward.
    pub recomputed: Bytes,
    /// The gradients its backward holds at once besides its saved tensors:
    /// the gradient of its output and of its widest intermediate.
    pub backward: Bytes,
    /// Offloading: what its backward brings back from the host at once.
    pub unpacked: Bytes,
    /// Context parallelism: the ring's key/value buffers while its attention
    /// runs forward.
    pub ring: Bytes,
    /// fp8 matmuls: the widest linear's casts in forward.
    pub fp8_casts: Bytes,
    /// Autocast over a fully checkpointed layer: its forward saves none of
    /// its weights' casts (autocast's cache holds them until the forward
    /// returns) and its recompute casts them again, kept with the rebuilt
    /// tensors until its backward ends (see `autocast.rs`).
    pub recast: bool,
    /// Offloading without recomputation: the layer's last node, its first
    /// norm's backward, alive after the layer's gradients exist (the
    /// gradient flow included).
    pub closing: Bytes,
}

/// The activation memory of every pipeline stage that can be the most loaded
/// (the first and the last; the only one without pipelining).
pub fn stages(dims: &Dimensions, workload: &Workload) -> Result<Vec<Activations>> {
    stages_with(dims, workload, &workload.platform.kernels())
}

/// [`stages`] with explicit kernel choices.
fn stages_with(
    dims: &Dimensions,
    workload: &Workload,
    kernels: &Kernels,
) -> Result<Vec<Activations>> {
    let rewritten = &*implementation::dimensions(dims, workload.implementation, workload.platform);
    let mut stages = if let Some(model) = &rewritten.encoder_decoder {
        vec![seq2seq::activations(rewritten, model, workload, kernels)?]
    } else if let Some(mixer) = rewritten.state_space {
        vec![mamba::activations(rewritten, mixer, workload)?]
    } else {
        // The step rewrites the architecture itself (it also reads what
        // the rules replace: litgpt's adapters read the key heads).
        let step = Step::new(dims, workload, kernels)?;
        candidate_stages(dims.layers, workload.pipeline, workload.micro_batches)
            .into_iter()
            .map(|stage| {
                let mut activations = step.stage(stage)?;
                activations.notes.extend(step.notes());
                Ok(activations)
            })
            .collect::<Result<Vec<_>>>()?
    };
    for stage in &mut stages {
        keep_outputs::apply(workload, stage);
        stage.notes.extend(implementation::notes(
            workload.implementation,
            workload.platform,
        ));
    }
    Ok(stages)
}

/// The activation memory of `dims` under `workload`, on the most loaded
/// rank, with the kernels of `workload.platform`.
pub fn activations(dims: &Dimensions, workload: &Workload) -> Result<Activations> {
    activations_with(dims, workload, &workload.platform.kernels())
}

/// [`activations`] with explicit kernel choices (a forced sdpa backend,
/// `native_dropout` masks on CPU, eager experts): the stage whose
/// activations and backward temporary together are the largest.
pub fn activations_with(
    dims: &Dimensions,
    workload: &Workload,
    kernels: &Kernels,
) -> Result<Activations> {
    let mut heaviest: Option<(Bytes, Activations)> = None;
    for activations in stages_with(dims, workload, kernels)? {
        let peak = plus(activations.total, activations.backward_transient)?;
        if heaviest.as_ref().is_none_or(|(most, _)| peak > *most) {
            heaviest = Some((peak, activations));
        }
    }
    match heaviest {
        Some((_, activations)) => Ok(activations),
        None => {
            let step = Step::new(dims, workload, kernels)?;
            let mut empty = step.empty();
            empty.notes.extend(step.notes());
            Ok(empty)
        }
    }
}

/// What decoder layer `index` keeps for one micro-batch on one rank.
pub fn layer_bytes(
    dims: &Dimensions,
    workload: &Workload,
    kernels: &Kernels,
    index: u64,
) -> Result<Bytes> {
    if let Some(mixer) = dims.state_space {
        return mamba::layer_bytes(dims, mixer, workload, index);
    }
    let step = Step::new(dims, workload, kernels)?;
    step.layer(
        dims.is_sparse(index),
        recompute::checkpointed(index, workload.recompute_every),
    )?
    .total()
}
