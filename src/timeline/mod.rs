//! The step timeline: one training step of the most loaded rank as a
//! sequence of allocations and frees, whose maximum is the step's peak.
//!
//! Real memory is not a sum of pieces that all exist at once: activations
//! are allocated layer by layer in forward and freed layer by layer in
//! backward, gradients appear as backward produces them, ZeRO-3/FSDP gather a
//! layer's parameters just before it runs and free them after, and the
//! optimizer's temporaries exist only during its step. [`build`] replays
//! that sequence from the same inventory the pieces come from
//! ([`StepPlan`]: the residents, the modules in execution order, the
//! activations layer by layer) and keeps the running total; the peak is its
//! maximum, and names the moment it is reached ("backward, layer 3").
//!
//! The order of events follows what the frameworks do (each choice is
//! stated where the plan is made, in `estimate/plan.rs`):
//!
//! 1. `load`: the CUDA context and allocator reserve (`--overhead`); the
//!    weights as `--init` materializes them (the whole model on every rank
//!    before sharding, or only the shard); the master weights and the
//!    optimizer states kept from the previous step; gradient buffers that
//!    persist across steps (Megatron's `main_grad`, or gradients accumulated
//!    over earlier micro-batches).
//! 2. `forward`, module by module: gathered parameters (with the next
//!    module prefetched), each layer's saved activations, the head's saved
//!    tensors and the logits.
//! 3. `loss`: the fp32 upcast of half-precision logits and the log-softmax it
//!    saves; the Trainer then drops the model's outputs (the logits).
//! 4. `backward`, module by module in reverse: the loss's fp32 gradients,
//!    recomputed activations, the gradients flowing through the layer, each
//!    parameter gradient as it is produced (reduce-scattered to a shard
//!    under ZeRO-2/3), the layer's activations freed.
//! 5. `optimizer`: DeepSpeed's fp32 gradient partition, the step's
//!    temporaries, then `zero_grad(set_to_none=True)` frees the gradients.

mod allocator;
mod builder;
mod stream;
pub mod torchtune_setup;

pub use allocator::AllocatorOptions;
pub use stream::{StreamPeaks, replay_stream};

use serde::Serialize;

use crate::activation::Schedule;
use crate::error::Result;
use crate::units::Bytes;

/// A part of the training step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Before the first step: loading, sharding, the states the step starts with.
    Load,
    /// The forward pass.
    Forward,
    /// The loss over the logits.
    Loss,
    /// The backward pass.
    Backward,
    /// The optimizer step and `zero_grad`.
    Optimizer,
}

impl Phase {
    /// The name in reports.
    pub const fn name(self) -> &'static str {
        match self {
            Phase::Load => "load",
            Phase::Forward => "forward",
            Phase::Loss => "loss",
            Phase::Backward => "backward",
            Phase::Optimizer => "optimizer",
        }
    }

    /// Every phase, in step order.
    pub const ALL: [Phase; 5] = [
        Phase::Load,
        Phase::Forward,
        Phase::Loss,
        Phase::Backward,
        Phase::Optimizer,
    ];
}

/// What an allocation is, for the stacked chart and the breakdown of the peak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The CUDA context and the allocator's reserve (`--overhead`).
    Overhead,
    /// Weights, resident or gathered.
    Weights,
    /// The optimizer's higher-precision copy of the weights.
    MasterWeights,
    /// Parameter gradients.
    Gradients,
    /// What the optimizer keeps between steps.
    OptimizerStates,
    /// What autograd saves for backward, and the logits.
    Activations,
    /// Buffers that live within one phase: the loss's gradients, gradients
    /// of activations, reduction buffers, the optimizer step's temporaries.
    Temporaries,
}

impl Kind {
    /// Every kind, in stacking order (bottom first).
    pub const ALL: [Kind; 7] = [
        Kind::Overhead,
        Kind::Weights,
        Kind::MasterWeights,
        Kind::Gradients,
        Kind::OptimizerStates,
        Kind::Activations,
        Kind::Temporaries,
    ];

    /// The name in reports.
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Overhead => "overhead",
            Kind::Weights => "weights",
            Kind::MasterWeights => "master weights",
            Kind::Gradients => "gradients",
            Kind::OptimizerStates => "optimizer states",
            Kind::Activations => "activations",
            Kind::Temporaries => "temporaries",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// One allocation (positive `bytes`) or free (negative) and the running total after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Event {
    /// The part of the step.
    pub phase: Phase,
    /// The decoder layer it belongs to, if any.
    pub layer: Option<u64>,
    /// What it is.
    pub kind: Kind,
    /// Which tensors: `saved activations`, `gathered parameters`, ...
    pub tensor: &'static str,
    /// Bytes allocated (positive) or freed (negative).
    pub bytes: i64,
    /// Bytes allocated on the rank after this event.
    pub total: Bytes,
    /// The allocation this event makes or frees, for the allocator simulation.
    #[serde(skip)]
    pub block: usize,
}

/// The moment of the peak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Peak {
    /// The maximum running total: `memory.peak`.
    pub bytes: Bytes,
    /// The phase it is reached in.
    pub phase: Phase,
    /// The layer, when it is reached inside one.
    pub layer: Option<u64>,
    /// What is allocated at that moment, by kind.
    pub by_kind: ByKind,
}

/// Bytes by [`Kind`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ByKind(pub [Bytes; 7]);

impl ByKind {
    /// The bytes of `kind`.
    pub fn get(&self, kind: Kind) -> Bytes {
        self.0[kind.index()]
    }
}

impl Serialize for ByKind {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(Kind::ALL.len()))?;
        for kind in Kind::ALL {
            map.serialize_entry(&kind, &self.get(kind))?;
        }
        map.end()
    }
}

/// Where a phase starts, peaks and ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PhaseSummary {
    /// The phase.
    pub phase: Phase,
    /// The running total when it starts.
    pub start: Bytes,
    /// Its largest running total.
    pub peak: Bytes,
    /// The running total when it ends.
    pub end: Bytes,
}

/// One step of the most loaded rank.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Timeline {
    /// Every allocation and free, in order (empty when only the peak was asked for).
    pub events: Vec<Event>,
    /// The maximum of the running total.
    pub peak: Peak,
    /// Each phase's start, peak and end.
    pub phases: Vec<PhaseSummary>,
    /// The largest running total before the first step (loading).
    pub load_peak: Bytes,
    /// What PyTorch's caching allocator would have reserved at most over the
    /// same allocations (`torch.cuda.max_memory_reserved()`), the overhead
    /// excluded: see [`AllocatorOptions`].
    pub reserved: Bytes,
}

/// One module the step runs as a unit: a decoder layer, or a module outside
/// the layers (the embedding, the final norm and output head).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Module {
    /// The decoder layer, or `None` outside the layers.
    pub layer: Option<u64>,
    /// Its parameters whole, in their stored dtype: what FSDP1's
    /// initialization materializes and flattens ([`UnitInit`]).
    pub weights: Bytes,
    /// Whether it runs before the layers (the embeddings).
    pub before_layers: bool,
    /// ZeRO-3/FSDP: its parameters gathered whole while it runs.
    pub gathered: Bytes,
    /// The gradient its backward produces, unsharded, in the dtype it is produced in.
    pub gradient: Bytes,
    /// The part of `gradient` no optimizer holds: accumulated into a
    /// gradient kept across steps (`Residents::kept_gradients`), so its
    /// backward makes it only as a temporary.
    pub kept_gradient: Bytes,
    /// Its largest single parameter gradient (an update fused into backward
    /// frees each gradient as soon as it is applied).
    pub largest_gradient: Bytes,
    /// An optimizer stepped inside backward: the largest temporaries of one
    /// of its parameters' steps, alive while that parameter's gradient is.
    pub step_temporaries: Bytes,
    /// FSDP: the reduce-scatter input its gradient is copied into, in the reduce dtype.
    pub reduce_buffer: Bytes,
    /// torch.autocast's half-precision copies of its linear weights, saved for backward.
    pub autocast: Bytes,
    /// bitsandbytes: its largest quantized weight dequantized to the compute
    /// dtype, alive during that one matmul (forward and backward).
    pub dequantized: Bytes,
    /// FSDP with parameters offloaded to the host: the rank's shard of the
    /// unit copied to the device for the all-gather, in the gathered dtype.
    pub host_shard: Bytes,
    /// Whether that copy lives as long as the gathered unit (FSDP1 without
    /// parameter mixed precision: `flat_param_to(device)` in `pre_unshard`)
    /// or only until the all-gather has copied it in (FSDP2, FSDP1's
    /// low-precision shard).
    pub host_shard_kept: bool,
    /// FSDP2 with parameters offloaded: the reduce-scatter output of the
    /// unit's gradient, on the device until its copy to the host.
    pub gradient_to_host: Bytes,
}

/// The pieces that persist across steps, on the rank.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Residents {
    /// Weights (the shard under ZeRO-3).
    pub weights: Bytes,
    /// Master weights.
    pub master_weights: Bytes,
    /// Gradients as they stand when backward ends (the shard under ZeRO-2/3),
    /// less `kept_gradients`.
    pub gradients: Bytes,
    /// Gradients no optimizer zeroes (trainable tensors it does not hold):
    /// on the device from the step's start to its end.
    pub kept_gradients: Bytes,
    /// Optimizer states.
    pub optimizer_states: Bytes,
}

/// How the weights first reach the rank (`--init`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Load {
    /// The weights a rank materializes whole before sharding (`every-rank`),
    /// or zero when it builds only its shard.
    pub whole_model: Bytes,
    /// A module received whole before its shard is kept (`rank0`'s broadcast).
    pub broadcast_module: Bytes,
    /// FSDP1's `per-unit` init: the largest wrapped unit moved whole to the
    /// device with its flat concatenation, before its shard is kept.
    pub unit_flattened: Bytes,
    /// FSDP1: the wrap replayed unit by unit (the decoder layers in order,
    /// then the root), which replaces the three figures above.
    pub units: Option<UnitInit>,
    /// torchtune's QLoRA setup under torchao 0.1 (the model built on the
    /// device, its layer deep-copied, the checkpoint quantized again as it
    /// loads), replayed allocation by allocation before the step: its
    /// freed temporaries stay cached by the allocator
    /// ([`torchtune_setup`]).
    pub torchtune: Option<torchtune_setup::TorchtuneSetup>,
}

/// How FSDP1 builds each wrapped unit's flat parameter
/// (`_init_param_handle_from_module` in `torch/distributed/fsdp/_init_utils.py`,
/// torch 2.15): the auto-wrap policy wraps the decoder layers first, in
/// order, then the root (the embedding, the final norm and the head). For
/// each unit `FlatParamHandle` concatenates its parameters into one flat
/// parameter (`torch.cat` in `flatten_tensors`, `_flat_param.py`), clones the
/// rank's shard out of it (`FlatParamHandle.shard`: `_get_shard` then
/// `.clone()`), frees the flat tensor and then the original parameters,
/// replaced by views. Measured on CPU with two gloo ranks
/// (`tools/measure_fsdp.py`): each unit peaks at its originals, its flat
/// concatenation and its shard at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnitInit {
    /// The whole model is on the device before wrapping (`--init
    /// every-rank`): each unit's originals are freed as it is sharded.
    Resident,
    /// Each unit reaches the device only when it is wrapped: moved from host
    /// memory with `device_id` (`_move_module_to_device`, `--init
    /// per-unit`), or materialized from the meta device
    /// (`_materialize_meta_module`: `param_init_fn` or `to_empty` plus
    /// `reset_parameters`, FSDP1's `--init meta`).
    Materialized,
    /// As `Materialized`, then broadcast from rank 0 (`sync_module_states`,
    /// `--init rank0`): `_sync_module_params_and_buffers` calls
    /// `dist._broadcast_coalesced` with 250 MiB buckets
    /// (`PARAM_BROADCAST_BUCKET_SIZE`), which flattens each bucket of
    /// several tensors into one tensor (`flatten_dense_tensors`, two buckets
    /// in flight, `torch/csrc/distributed/c10d/comm.cpp`): a copy of the unit,
    /// at most two buckets, alive before the flat concatenation.
    Broadcast,
}

/// `PARAM_BROADCAST_BUCKET_SIZE` (`torch/distributed/fsdp/_init_utils.py`), times
/// the two buckets `broadcast_coalesced` keeps in flight.
pub const BROADCAST_IN_FLIGHT: u64 = 2 * 250 * 1024 * 1024;

/// How gradients come and go.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Gradients {
    /// They exist before backward: Megatron's persistent `main_grad`
    /// buffers, or gradients accumulated over earlier micro-batches.
    pub resident_from_start: bool,
    /// ZeRO-2/3: each module's gradient is reduce-scattered and only a shard stays.
    pub sharded: bool,
    /// The update is applied inside backward, one parameter at a time, and
    /// each gradient freed at once (LOMO, `--optimizer-in-backward`): the
    /// step's temporaries then come with each gradient and the optimizer
    /// phase has none.
    pub fused_update: bool,
    /// DeepSpeed's gradient-reduction bucket (`reduce_bucket_size`), alive through backward.
    pub reduce_bucket: Bytes,
    /// `zero_grad(set_to_none=True)` frees them after the step (not Megatron's buffers).
    pub freed_after_step: bool,
}

/// The optimizer step on the rank.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OptimizerStep {
    /// Its temporaries on the device (nothing when it runs on the host).
    pub temporaries: Bytes,
    /// DeepSpeed ZeRO-1/2: the fp32 copy of the gradient partition the step reads.
    pub gradient_partition: Bytes,
}

/// Everything [`build`] replays.
#[derive(Debug, Clone, Copy)]
pub struct StepPlan<'a> {
    /// The fixed overhead (CUDA context, allocator reserve).
    pub overhead: Bytes,
    /// The pieces that persist across steps.
    pub residents: Residents,
    /// The modules in forward order.
    pub modules: &'a [Module],
    /// Whether modules' parameters are gathered (ZeRO-3/FSDP full shard).
    pub gathers: bool,
    /// Whether the next module is gathered before the current one is freed.
    pub prefetch: bool,
    /// FSDP1: the modules outside the decoder layers form the root unit,
    /// one flat parameter gathered by the root's pre-forward and never
    /// resharded after forward (`_post_forward_reshard` in
    /// `torch/distributed/fsdp/_runtime_utils.py`: "Do not free the root's
    /// parameters in the post-forward"), so it stays whole until backward
    /// ends; its gradient is assembled and reduce-scattered only then (the
    /// flat parameter's `SplitWithSizesBackward` waits for every piece),
    /// and the root's pre-backward hook prefetches the last layer before the
    /// loss's gradients (`BACKWARD_PRE`).
    pub root_kept: bool,
    /// FSDP1 with adapters wrapped as their own units (peft's
    /// `fsdp_auto_wrap_policy`, which HF Trainer sets for a `PeftModel`, and
    /// Answer.AI's lambda policy, each trainable leaf linear a unit inside
    /// its decoder layer's): `BACKWARD_PRE` prefetches the unit before the
    /// current one in the post-forward order
    /// (`_ExecOrderData.get_handle_to_backward_prefetch`), which for a
    /// decoder layer is its own last adapter; the layer before is
    /// prefetched by the pre-backward hook of the layer's first adapter,
    /// once its backward reaches it: after the layer's activation
    /// gradients here. Measured on two gloo ranks
    /// (`*__lora-qkvo-*__reentrant__fsdp1-2` fixtures).
    pub late_layer_prefetch: bool,
    /// FSDP1's `limit_all_gathers` (on by default since torch 2.1): a
    /// resharded unit's gathered parameters are freed with the compute
    /// stream recorded on them (`_free_unsharded_flat_param` in
    /// `torch/distributed/fsdp/_flat_param.py`: `record_stream`, then
    /// `_free_storage`), so the caching allocator keeps the block out of its
    /// cache until the GPU has run past the free (`insert_events`, then
    /// `process_events` at a later `malloc`). The CPU runs ahead of the GPU
    /// and waits only at the rate limiter: before each unshard, with two
    /// free events outstanding, on the older one (`_unshard` in
    /// `_runtime_utils.py`, `_FreeEventQueue` in `_limiter_utils.py`,
    /// `_max_num_inflight_all_gathers = 2`). Approximate: it assumes the
    /// GPU lags (a step bound by compute or communication, not by Python);
    /// the allocated peak does not change, only what the allocator reserves.
    pub limit_all_gathers: bool,
    /// The activations, layer by layer, when a micro-batch is given.
    pub activations: Option<&'a Schedule>,
    /// Loading.
    pub load: Load,
    /// Gradients.
    pub gradients: Gradients,
    /// The optimizer step.
    pub optimizer: OptimizerStep,
    /// The caching allocator the reserved estimate simulates.
    pub allocator: AllocatorOptions,
    /// The largest single tensor of the step: the simulation splits the
    /// timeline's aggregate allocations into blocks of at most this size.
    pub granularity: Bytes,
}

/// Replays `plan` and keeps every event.
pub fn build(plan: &StepPlan) -> Result<Timeline> {
    builder::replay(plan, true, true)
}

/// Replays `plan` for its peak and reserved estimate, without keeping the events.
pub fn peak_of(plan: &StepPlan) -> Result<Timeline> {
    builder::replay(plan, false, true)
}

/// Replays `plan` for its peak's bytes only: no events, no reserved
/// estimate, no breakdown, and the middle of each run of identical layers
/// accounted for without replaying it (exactly: the same bytes as
/// [`build`]'s peak). What a layout search needs, many times over.
pub fn peak_only(plan: &StepPlan) -> Result<Bytes> {
    Ok(builder::replay(plan, false, false)?.peak.bytes)
}

#[cfg(test)]
mod tests;
