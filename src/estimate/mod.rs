//! The centre of trainmem: `estimate(&Model, &Setup) -> Estimate`.
//!
//! Pure arithmetic on the model's inventory: no I/O, no command line.

mod adapters;
mod comparison;
mod device;
mod fit;
mod in_backward;
mod memory;
mod prepared;
mod pricer;
mod setup;
mod slice;
mod step_plan;
mod techniques;
mod textbook;

pub use comparison::{Check, Comparison, Swap};
pub use fit::{
    Fit, Hint, MAX_PARAMETERS, Question, RecomputeFit, max_micro_batch, max_parameters,
    max_seq_len, min_gpus,
};
pub use memory::Memory;
pub use prepared::PreparedModel;
pub use pricer::{Priced, Pricer};
pub use setup::{Capacity, Setup, StepOptions};
pub use slice::{Slice, SliceTerm};
pub use step_plan::DEEPSPEED_REDUCE_BUCKET;
pub use techniques::{Ladder, Rung, Skipped};
pub use textbook::{Textbook, TextbookRequest};

use std::collections::BTreeMap;

use serde::Serialize;

use crate::activation::{self, Activations, Workload};
use crate::architecture::{Dimensions, ImageInputs};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::model::{CheckpointSummary, Model, Quantization, Role};
use crate::optimizer::{GlobalContext, Location, Options, StateTensor};
use crate::parallel::Parallelism;
use crate::precision::Precision;
use crate::step_time::{Speed, StepTime, Work};
use crate::timeline::{self, Timeline};
use crate::units::{Bytes, Count};

/// The training memory of one model under one setup, piece by piece.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Estimate {
    /// The model, as summarized for the report.
    pub model: ModelSummary,
    /// The optimizer's name.
    pub optimizer: &'static str,
    /// Whether each parameter is stepped inside backward as its gradient is
    /// produced (`--optimizer-in-backward`, or LOMO/AdaLomo, which only work that way).
    pub optimizer_in_backward: bool,
    /// The optimizer's options, defaults included.
    pub options: Options,
    /// The precision recipe: the dtype of each piece.
    pub precision: Precision,
    /// The dtypes each piece is kept in (`bf16`, `nf4+bf16` under QLoRA, `-` for none).
    pub dtypes: PieceDtypes,
    /// Parameter counts.
    pub parameters: Parameters,
    /// Optimizer states in CUDA unified memory on the rank (bitsandbytes'
    /// paged optimizers): left out of `memory`, counted in
    /// `host.optimizer_states` (times the ranks of a node).
    pub paged_states: Bytes,
    /// The LoRA adapters, if any: rank, dtype and dropout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lora: Option<adapters::LoraSummary>,
    /// The quantized part of a frozen base (QLoRA), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quantized: Option<Quantized>,
    /// Memory per accelerator.
    pub memory: Memory,
    /// Memory on the host (torch's `step` counters live there).
    pub host: Memory,
    /// Memory allocated and freed within a step, per accelerator: part of the
    /// step's peak, not of the persistent total.
    pub transients: Transients,
    /// The step timeline's peak and phases (`memory.peak` is its maximum);
    /// `trainmem timeline` lists its events.
    pub timeline: Timeline,
    /// How training is spread, and which accelerator `memory` describes.
    pub parallelism: ParallelismSummary,
    /// Fixed overhead added to the peak (CUDA context, fragmentation).
    pub overhead: Bytes,
    /// Whether `memory.activations` was estimated (a micro-batch and a known architecture).
    pub activations_estimated: bool,
    /// The activations by part, when estimated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub activations: Option<Activations>,
    /// The seed's M = P x V x B.
    pub gradient_optimizer_slice: Slice,
    /// How many parameter-sized values each piece holds per parameter.
    pub copies: Copies,
    /// The accelerator memory checked against, if any.
    pub capacity: Option<Capacity>,
    /// Whether `memory.reserved` (the caching allocator's reserve, the
    /// overhead included) plus [`RESERVED_MARGIN`] fits the capacity: real
    /// runs run out of memory on what is reserved, not on what is
    /// allocated. Null without a capacity.
    pub fits: Option<bool>,
    /// The time of one step (FLOPs, compute, communication, bubble);
    /// null without a micro-batch or a device whose peak is known.
    pub time: Option<StepTime>,
    /// Why `time` is null, when it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_unavailable: Option<String>,
    /// Assumptions and approximations the figures rest on.
    pub notes: Vec<String>,
    /// Whether `memory.peak`, the allocated peak, fits the capacity (the
    /// strict figure, `fits` before the allocator was counted); null
    /// without a capacity. Allocated fits and reserved does not: tight.
    pub fits_allocated: Option<bool>,
}

/// What a run must leave free beyond `memory.reserved` to fit: nothing
/// more. The capacities are nvidia-smi's `memory.total` (the driver's own
/// reservations already out), and `memory.reserved` already adds the
/// overhead (`--overhead`, 1 GiB by default on CUDA: the CUDA context and
/// what the allocator cannot reuse), which is the margin.
pub const RESERVED_MARGIN: Bytes = Bytes(0);

/// The parallel layout of an estimate and the accelerator it reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ParallelismSummary {
    /// GPUs, nodes, ZeRO stage, offload, tp, pp, ep, framework.
    #[serde(flatten)]
    pub layout: Parallelism,
    /// Data-parallel degree: gpus / (tp × pp).
    pub data_parallel: u64,
    /// The pipeline stage of the most loaded accelerator (0 without pipelining).
    pub pipeline_stage: u64,
    /// Parameters that accelerator holds before data-parallel sharding.
    pub local_parameters: Count,
}

/// The dtypes the tensors of each piece are kept in, joined by `+`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PieceDtypes {
    /// Weights (a quantization's name for quantized ones).
    pub weights: String,
    /// Master weights.
    pub master_weights: String,
    /// Gradients.
    pub gradients: String,
    /// Optimizer states (the dtype the rule is given; some rules keep fp32 or 8-bit state).
    pub optimizer_states: String,
}

impl PieceDtypes {
    fn of(model: &Model, setup: &Setup) -> PieceDtypes {
        let mut sets: [std::collections::BTreeSet<String>; 4] = Default::default();
        for tensor in &model.tensors {
            let precision = setup.precision.for_tensor(tensor);
            sets[0].insert(match tensor.quantization {
                Some(q) => q
                    .describe()
                    .split(' ')
                    .next()
                    .unwrap_or("quantized")
                    .to_string(),
                None => precision.weights.to_string(),
            });
            if tensor.trainable {
                if let Some(master) = precision.master_weights {
                    sets[1].insert(master.to_string());
                }
                sets[2].insert(precision.gradients.to_string());
                sets[3].insert(precision.optimizer_dtype().to_string());
            }
        }
        let [weights, master_weights, gradients, optimizer_states] = sets.map(|set| {
            if set.is_empty() {
                "-".to_string()
            } else {
                set.into_iter().collect::<Vec<_>>().join("+")
            }
        });
        PieceDtypes {
            weights,
            master_weights,
            gradients,
            optimizer_states,
        }
    }
}

/// The quantized weights of a frozen base.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Quantized {
    /// Parameters stored quantized.
    pub parameters: Count,
    /// Their bytes, block scales and code tables included.
    pub bytes: Bytes,
    /// Bits per quantized parameter: 8 × bytes / parameters.
    pub bits_per_parameter: f64,
}

impl Quantized {
    fn of(model: &Model, precision: &Precision) -> Result<Option<Quantized>> {
        let (mut parameters, mut bytes) = (0u64, Bytes::ZERO);
        for tensor in model.tensors.iter().filter(|t| t.quantization.is_some()) {
            add_elements(&mut parameters, tensor.shape.elements().0)?;
            bytes = bytes.add(precision.weight_bytes(tensor, &tensor.shape)?, WHAT)?;
        }
        Ok((parameters > 0).then(|| Quantized {
            parameters: Count(parameters),
            bytes,
            bits_per_parameter: 8.0 * bytes.0 as f64 / parameters as f64,
        }))
    }
}

/// Temporary memory of a training step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Transients {
    /// The optimizer step's temporaries (Adam's foreach `sqrt` buffer, ...).
    pub optimizer_step: Bytes,
    /// Backward's largest temporary (the gradient of the logits), when
    /// activations are estimated.
    pub backward: Bytes,
    /// ZeRO-3 / FSDP: one layer's weights gathered whole, with its full
    /// gradient before the reduce-scatter (DeepSpeed's estimator counts the
    /// largest layer the same way).
    pub parameter_gather: Bytes,
}

/// The model as the report names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelSummary {
    /// `7B parameters`, `llama-2-7b`.
    pub name: String,
    /// Where the inventory came from.
    pub source: String,
    /// Whether tensor shapes are known (false for a bare `--params`).
    pub shapes_known: bool,
    /// How many parameter tensors the inventory holds.
    pub tensors: usize,
    /// The HuggingFace `model_type`, when read from a config.json.
    pub model_type: Option<String>,
    /// The task whose head the inventory holds (`causal-lm`, `masked-lm`,
    /// `seq-cls:N`, ...), when read from a config.json.
    pub task: Option<crate::architecture::Task>,
    /// The checkpoint on disk, when read from one: what loading it costs.
    pub checkpoint: Option<CheckpointSummary>,
    /// The keys its config.json lacked and the defaults taken (empty
    /// without a config.json): what a truncated file silently became.
    pub defaulted_keys: Vec<crate::model::DefaultedKey>,
}

/// Parameter counts of an estimate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Parameters {
    /// Every parameter.
    pub total: Count,
    /// Those that receive gradients.
    pub trainable: Count,
}

/// Per-parameter copies of the parameter vector held by each piece (the
/// counting of seed 001: Adam in fp32 holds 4, weights and gradient included).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Copies {
    /// Weights: 1.
    pub weights: f64,
    /// Master copy: 1 under mixed precision, else 0.
    pub master_weights: f64,
    /// Gradients: 1 for a fully trainable model.
    pub gradients: f64,
    /// Optimizer states kept on the accelerator: 0 (SGD) to 2 (Adam).
    pub optimizer_states: f64,
    /// The sum.
    pub total: f64,
}

/// Element counts of each piece, summed over tensors, for the copies and
/// the slice of the whole model on one accelerator.
#[derive(Default)]
struct Elements {
    weights: u64,
    master_weights: u64,
    gradients: u64,
    optimizer_states: u64,
    trainable: u64,
    largest_trainable: u64,
    trainable_tensors: usize,
    slice_by_width: BTreeMap<u64, u64>,
}

const WHAT: &str = "the training memory";

fn add_elements(sum: &mut u64, more: u64) -> Result<()> {
    *sum = sum.checked_add(more).ok_or_else(|| Error::overflow(WHAT))?;
    Ok(())
}

impl Elements {
    /// Counts a gradient of `n` elements, which joins the slice.
    fn add_gradient(&mut self, n: Count, dtype: DType) -> Result<()> {
        add_elements(&mut self.gradients, n.0)?;
        add_elements(self.slice_by_width.entry(dtype.bytes()).or_default(), n.0)
    }

    /// Counts one state tensor; those on the device join the slice, and so
    /// do paged ones: values kept per parameter wherever the driver puts them.
    fn add_state(&mut self, state: &StateTensor) -> Result<()> {
        if matches!(state.location, Location::Device | Location::Paged) {
            let n = state.shape.elements().0;
            add_elements(&mut self.optimizer_states, n)?;
            add_elements(
                self.slice_by_width.entry(state.dtype.bytes()).or_default(),
                n,
            )?;
        }
        Ok(())
    }

    /// The counts of `model` trained under `setup` on one accelerator.
    fn of(model: &Model, setup: &Setup) -> Result<Elements> {
        let mut elements = Elements::default();
        let mut largest_gradient = (0u64, DType::Fp32);
        // A weight the optimizer alone still holds is one more copy of it.
        for tensor in &model.optimizer_only {
            add_elements(&mut elements.weights, tensor.shape.elements().0)?;
        }
        for tensor in &model.tensors {
            let n = tensor.shape.elements();
            add_elements(&mut elements.weights, n.0)?;
            if !tensor.trainable {
                continue;
            }
            let precision = setup.precision.for_tensor(tensor);
            if !tensor.optimized {
                // A gradient no optimizer holds: no master copy, no states.
                elements.add_gradient(n, precision.gradients)?;
                continue;
            }
            add_elements(&mut elements.trainable, n.0)?;
            elements.largest_trainable = elements.largest_trainable.max(n.0);
            elements.trainable_tensors += 1;
            if precision.master_weights.is_some() {
                add_elements(&mut elements.master_weights, n.0)?;
            }
            if setup.steps_in_backward() {
                largest_gradient = largest_gradient.max((n.0, precision.gradients));
            } else {
                elements.add_gradient(n, precision.gradients)?;
            }
            for state in setup.optimizer.states_on(
                tensor,
                precision.optimizer_dtype(),
                &setup.options,
                !setup.step.cpu,
            )? {
                elements.add_state(&state)?;
            }
        }
        if setup.steps_in_backward() {
            // The update runs inside backward: one gradient at a time, the largest.
            elements.add_gradient(Count(largest_gradient.0), largest_gradient.1)?;
        }
        let group = GlobalContext {
            elements: Count(elements.trainable),
            largest: Count(elements.largest_trainable),
            tensors: elements.trainable_tensors,
            dtype: setup.precision.optimizer_dtype(),
            options: &setup.options,
        };
        for state in setup.optimizer.global_states(&group)? {
            elements.add_state(&state)?;
        }
        Ok(elements)
    }
}

/// Prices the memory of training `model` under `setup`.
///
/// Per tensor of n elements: weights n x |weight dtype| (or its quantized
/// storage); if trainable, a master copy n x |master dtype| (mixed precision
/// only), a gradient n x |gradient dtype|, and the states the optimizer's rule
/// gives in the state dtype; then the optimizer's global state and the
/// temporaries of its step. The parallel layout decides which part of each
/// piece the most loaded accelerator holds (see `device.rs`). The peak is the
/// maximum of the step's timeline (see `crate::timeline` and `plan.rs`).
pub fn estimate(model: &Model, setup: &Setup) -> Result<Estimate> {
    Ok(estimate_with_timeline(model, setup, false)?.0)
}

/// The estimate and the step timeline of its most loaded rank, every event kept.
pub fn timeline(model: &Model, setup: &Setup) -> Result<(Estimate, Timeline)> {
    estimate_with_timeline(model, setup, true)
}

fn estimate_with_timeline(
    model: &Model,
    setup: &Setup,
    keep_events: bool,
) -> Result<(Estimate, Timeline)> {
    // The tensor names are read once for every walk below.
    estimate_with_facts(model, &prepared::ModelFacts::of(model), setup, keep_events)
}

/// [`estimate_with_timeline`] with what depends on `model` alone read
/// into `facts` (once, when one model is priced under many setups).
fn estimate_with_facts(
    model: &Model,
    facts: &prepared::ModelFacts,
    setup: &Setup,
    keep_events: bool,
) -> Result<(Estimate, Timeline)> {
    check_setup(model, &facts.sizes, setup)?;
    let precision = &setup.precision;
    let elements = Elements::of(model, setup)?;
    // The whole model on one accelerator describes the method (slice and
    // copies); the most loaded accelerator of the real layout is what fits.
    let single = device::most_loaded(facts.per_stage(
        model,
        &Setup {
            parallelism: Parallelism::SINGLE,
            ..setup.clone()
        },
    )?)?;
    let stages = if setup.parallelism.is_single()
        && setup.parallelism.tensor == 1
        && setup.parallelism.pipeline == 1
    {
        vec![single.clone()]
    } else {
        facts.per_stage(model, setup)?
    };
    let (device, activations, step) =
        heaviest_step(model, &facts.adapters, setup, stages, keep_events)?;
    let mut transients = device.transients;
    let (mut memory, mut host) = (device.memory, device.host);
    let paged_states = device.paged_states;
    let ranks_per_node = (setup.parallelism.gpus / setup.parallelism.nodes).max(1);
    let step_counters = Bytes(
        host.optimizer_states
            .0
            .saturating_sub(paged_states.times(ranks_per_node, WHAT)?.0),
    );
    if let Some(activations) = &activations {
        memory = memory.with_activations(activations.total)?;
        transients.backward = activations.backward_transient;
        if let Some(offload) = &activations.offload {
            // Host memory is reported per node.
            host = host.with_activations(
                offload
                    .host_bytes
                    .times(ranks_per_node, "the host memory of a node")?,
            )?;
        }
    }
    memory.peak = step.peak.bytes;
    memory.reserved = step.reserved.add(setup.overhead, "the reserved memory")?;
    let parameters = Parameters {
        total: model.total_parameters()?,
        trainable: model.trainable_parameters()?,
    };
    let slice_bytes = single.memory.gradients.add(
        single.memory.optimizer_states,
        "the gradient-and-optimizer slice",
    )?;
    let fits_allocated = setup.capacity.as_ref().map(|c| memory.peak <= c.bytes);
    let fits = setup
        .capacity
        .as_ref()
        .map(|c| memory.reserved.0.saturating_add(RESERVED_MARGIN.0) <= c.bytes.0);
    let summary = Timeline {
        events: Vec::new(),
        ..step.clone()
    };
    let (time, time_unavailable) = step_time(setup, || facts.work(model));
    let estimate = Estimate {
        time,
        time_unavailable,
        model: ModelSummary {
            name: model.name.clone(),
            source: model.source.clone(),
            shapes_known: model.shapes_known,
            tensors: model.tensors.len(),
            model_type: model.model_type.clone(),
            task: model.task,
            checkpoint: model.checkpoint.clone(),
            defaulted_keys: model.defaulted_keys.clone(),
        },
        optimizer: setup.optimizer.name,
        optimizer_in_backward: setup.steps_in_backward(),
        options: setup.options.clone(),
        precision: *precision,
        dtypes: PieceDtypes::of(model, setup),
        parameters,
        lora: adapters::LoraSummary::of(model, setup),
        quantized: Quantized::of(model, precision)?,
        memory,
        host,
        paged_states,
        transients,
        timeline: summary,
        overhead: setup.overhead,
        activations_estimated: activations.is_some(),
        activations,
        parallelism: ParallelismSummary {
            layout: setup.parallelism,
            data_parallel: setup.parallelism.data(),
            pipeline_stage: device.stage,
            local_parameters: device.local_parameters,
        },
        gradient_optimizer_slice: Slice::new(
            parameters.trainable,
            slice_bytes,
            single.paged_states,
            &elements.slice_by_width,
        ),
        copies: copies(&elements, parameters.total),
        capacity: setup.capacity.clone(),
        fits,
        notes: model
            .notes
            .iter()
            .cloned()
            .chain(notes(model, setup, step_counters, paged_states))
            .chain(step_notes(model, setup))
            .collect(),
        fits_allocated,
    };
    Ok((estimate, step))
}

/// Refuses a setup `model` cannot be trained under (`sizes`: what it
/// reveals of its heads, layers and experts).
fn check_setup(model: &Model, sizes: &crate::parallel::Splittable, setup: &Setup) -> Result<()> {
    in_backward::check(setup)?;
    crate::parallel::check_layout_sizes(
        &model.name,
        sizes,
        &setup.parallelism,
        setup.workload.as_ref().is_some_and(|w| w.sequence_parallel),
    )?;
    check_fp8(setup)?;
    crate::parallel::check_virtual_stages(
        sizes.layers,
        setup.parallelism.pipeline,
        setup.step.virtual_stages,
    )?;
    if let Some(workload) = &setup.workload {
        crate::parallel::check_sequence_split(
            setup.parallelism.tensor,
            setup.parallelism.context,
            Some(workload.seq_len),
            workload.sequence_parallel,
        )?;
    }
    crate::parallel::check_context_parallel(
        setup.parallelism.context,
        setup.workload.as_ref().map(|w| w.seq_len),
        setup
            .workload
            .as_ref()
            .is_some_and(|w| w.attention == activation::Attention::Eager),
    )
}

/// The step's time under `setup.speed`, or why there is none. `work` is
/// asked for only when the step is timed (`Work::of` walks the tensors; a
/// layout search passes the one it read once).
pub fn step_time<W: std::borrow::Borrow<Work>>(
    setup: &Setup,
    work: impl FnOnce() -> W,
) -> (Option<StepTime>, Option<String>) {
    match (&setup.speed, &setup.workload) {
        (Speed::Unknown(why), _) => (None, Some(why.clone())),
        (Speed::Known(_), None) => (
            None,
            Some("no step to time: give --micro-batch and --seq-len".to_string()),
        ),
        (Speed::Known(rates), Some(workload)) => (
            Some(crate::step_time::price(
                work().borrow(),
                &setup.parallelism,
                workload,
                setup.step.grad_accumulation,
                setup.precision.fp8.is_some(),
                rates,
            )),
            None,
        ),
    }
}

/// Refuses an fp8 recipe where its implementation does not run: Transformer
/// Engine's through Megatron-core's TE layers only, torchao's in the
/// transformers/torchtitan models (Megatron uses TE for fp8), and neither on
/// the CPU (`torch._scaled_mm` needs CUDA sm89+).
fn check_fp8(setup: &Setup) -> Result<()> {
    let Some(fp8) = setup.precision.fp8 else {
        return Ok(());
    };
    let megatron = setup.parallelism.framework == crate::parallel::Framework::Megatron;
    let refuse = |reason: &str| Error::InvalidValue {
        what: "--precision",
        value: setup.precision.name.to_string(),
        reason: reason.to_string(),
    };
    if fp8.needs_megatron && !megatron {
        return Err(refuse(
            "Transformer Engine's fp8 is priced through Megatron-core's TE layers: add --framework megatron, or use fp8-tensorwise / fp8-rowwise (torchao)",
        ));
    }
    if !fp8.needs_megatron && megatron {
        return Err(refuse(
            "Megatron-core runs fp8 through Transformer Engine: use --precision te-fp8 with --framework megatron",
        ));
    }
    if setup
        .workload
        .as_ref()
        .is_some_and(|w| w.platform == activation::Platform::Cpu)
    {
        return Err(refuse(
            "fp8 matmuls (torch._scaled_mm, TE's GEMMs) need CUDA sm89+; --platform cpu has no fp8 kernel to price",
        ));
    }
    Ok(())
}

/// The stage whose step peaks highest, with its activations and timeline:
/// every stage without a micro-batch, else the stages that can be the most
/// loaded (the first holds the most micro-batches, the last the loss).
fn heaviest_step(
    model: &Model,
    adapters: &AdapterFacts,
    setup: &Setup,
    stages: Vec<device::DeviceMemory>,
    keep_events: bool,
) -> Result<(device::DeviceMemory, Option<Activations>, Timeline)> {
    let candidates = stage_candidates(model, adapters, setup, stages.len())?;
    let mut best: Option<(usize, Option<Activations>, Timeline)> = None;
    for (stage, activations) in candidates {
        let Some(device) = stages.get(stage) else {
            continue;
        };
        // A trace already holds what autocast saved, if it ran under it.
        let activations = match model.traced {
            Some(_) => activations,
            None => activations.map(|a| with_autocast(a, device)).transpose()?,
        };
        let step = timeline::peak_of(&step_plan::plan(
            model,
            setup,
            device,
            activations.as_ref().map(|a| &a.schedule),
        )?)?;
        if best
            .as_ref()
            .is_none_or(|(_, _, b)| step.peak.bytes > b.peak.bytes)
        {
            best = Some((stage, activations, step));
        }
    }
    let (stage, activations, mut step) =
        best.ok_or_else(|| Error::overflow("the pipeline stages"))?;
    let device = stages
        .into_iter()
        .nth(stage)
        .ok_or_else(|| Error::overflow("the pipeline stages"))?;
    if keep_events {
        step = timeline::build(&step_plan::plan(
            model,
            setup,
            &device,
            activations.as_ref().map(|a| &a.schedule),
        )?)?;
    }
    Ok((device, activations, step))
}

/// `estimate(model, setup).memory.peak`, replayed for the peak alone: the
/// same stages as [`estimate_with_facts`] and [`heaviest_step`], each
/// replayed without the allocator simulation and without the report.
fn heaviest_peak(model: &Model, facts: &prepared::ModelFacts, setup: &Setup) -> Result<Bytes> {
    check_setup(model, &facts.sizes, setup)?;
    let layout = setup.parallelism;
    let stages = if layout.is_single() && layout.tensor == 1 && layout.pipeline == 1 {
        facts.per_stage(
            model,
            &Setup {
                parallelism: Parallelism::SINGLE,
                ..setup.clone()
            },
        )?
    } else {
        facts.per_stage(model, setup)?
    };
    let mut peak: Option<Bytes> = None;
    for (stage, activations) in stage_candidates(model, &facts.adapters, setup, stages.len())? {
        let Some(device) = stages.get(stage) else {
            continue;
        };
        let activations = match model.traced {
            Some(_) => activations,
            None => activations.map(|a| with_autocast(a, device)).transpose()?,
        };
        let step = timeline::peak_only(&step_plan::plan(
            model,
            setup,
            device,
            activations.as_ref().map(|a| &a.schedule),
        )?)?;
        peak = Some(peak.map_or(step, |p| p.max(step)));
    }
    peak.ok_or_else(|| Error::overflow("the pipeline stages"))
}

/// The stages that can be the most loaded, with their activations: every
/// stage without a micro-batch, else those `activations_of` gives.
fn stage_candidates(
    model: &Model,
    adapters: &AdapterFacts,
    setup: &Setup,
    stages: usize,
) -> Result<Vec<(usize, Option<Activations>)>> {
    Ok(match activations_with(model, adapters, setup)? {
        None => (0..stages).map(|stage| (stage, None)).collect(),
        Some(all) => all
            .into_iter()
            .map(|a| {
                (
                    usize::try_from(a.schedule.stage).unwrap_or(usize::MAX),
                    Some(a),
                )
            })
            .collect(),
    })
}

/// Adds torch.autocast's saved half copies of the stage's linear weights
/// (one set per micro-batch in flight) to its activations.
fn with_autocast(
    mut activations: Activations,
    device: &device::DeviceMemory,
) -> Result<Activations> {
    let per_micro_batch = device
        .modules
        .iter()
        .try_fold(Bytes::ZERO, |sum, m| sum.add(m.autocast, "the activations"))?;
    let autocast =
        per_micro_batch.times(activations.schedule.in_flight.max(1), "the activations")?;
    if autocast > Bytes::ZERO {
        activations.total = activations.total.add(autocast, "the activations")?;
        activations.layers.push(activation::Part {
            name: "autocast weight copies".to_string(),
            bytes: autocast,
        });
        activations.notes.push(
            "torch.autocast casts each fp32 linear weight to half precision once per forward (saved for backward; under full recomputation held by autocast's cache until the forward returns and cast again by each layer's recompute); the residual stream and its norms stay fp32, and each linear reading a norm's output saves its own half-precision cast of it".to_string(),
        );
    }
    Ok(activations)
}

/// What the step's timeline rests on.
fn step_notes(model: &Model, setup: &Setup) -> Vec<String> {
    let mut notes = Vec::new();
    let parallelism = setup.parallelism;
    if parallelism.zero.shards_weights() && model.shapes_known {
        let init = step_plan::init_mode(setup);
        notes.push(format!(
            "init {}: {}",
            init.name(),
            match init {
                crate::parallel::Init::Meta
                    if parallelism.framework == crate::parallel::Framework::Fsdp1 =>
                    "the model is built on the meta device; FSDP1 materializes, flattens and shards one wrapped unit at a time (torch's _materialize_meta_module: each unit whole on the GPU while it is wrapped)",
                crate::parallel::Init::Meta =>
                    "each rank materializes only its shard (meta device, zero.Init)",
                crate::parallel::Init::Rank0 =>
                    "rank 0 loads the model in host memory and broadcasts it module by module",
                crate::parallel::Init::EveryRank =>
                    "every rank holds the whole model before sharding it (the load phase)",
                crate::parallel::Init::PerUnit =>
                    "FSDP1 with device_id moves, flattens and shards one wrapped unit at a time from host memory (each unit whole, its flat copy and its shard at once; the load phase replays them in turn)",
            }
        ));
    }
    if parallelism.framework == crate::parallel::Framework::Fsdp1
        && parallelism.zero.shards_weights()
        && model.shapes_known
    {
        notes.push("FSDP1: the root unit (the embedding, final norm and head) is gathered by the root's pre-forward and not resharded after forward (torch's _post_forward_reshard), so it stays whole until backward ends; flat gradients are reduce-scattered in place".to_string());
        if crate::estimate::step_plan::has_adapters(model) {
            notes.push("FSDP1 with LoRA: each adapter is wrapped as its own unit (peft's fsdp_auto_wrap_policy, which HF Trainer sets for a PeftModel); a layer's backward prefetch then targets its own last adapter, and the layer before is gathered only when the backward reaches the layer's first adapter (after its activation gradients here)".to_string());
        }
    }
    if parallelism.framework.is_fsdp() && setup.precision.weights != setup.precision.activations {
        notes.push(match parallelism.fsdp_mixed_precision {
            crate::parallel::FsdpMixedPrecision::Policy => "FSDP mixed precision: MixedPrecisionPolicy gathers each module's parameters in the compute dtype and frees them after use; no autocast copies (--fsdp-mixed-precision autocast for torch.autocast over fp32 parameters)".to_string(),
            crate::parallel::FsdpMixedPrecision::Autocast => "FSDP mixed precision: fp32 parameters under torch.autocast, whose half copies of the linear weights are saved for backward".to_string(),
        });
    }
    if parallelism.framework == crate::parallel::Framework::DeepSpeed
        && parallelism.data_and_context() > 1
    {
        notes.push(format!(
            "DeepSpeed reduces gradients through a bucket of reduce_bucket_size = {} elements (--reduce-bucket-size)",
            setup.step.reduce_bucket_size.unwrap_or(DEEPSPEED_REDUCE_BUCKET)
        ));
    }
    notes.extend(in_backward::note(setup));
    if setup.step.grad_accumulation > 1 {
        notes.push(format!(
            "gradient accumulation over {} micro-batches: the gradients exist before each backward",
            setup.step.grad_accumulation
        ));
    }
    if step_plan::replays_torchtune_setup(model, setup) {
        notes.push("torchtune's QLoRA setup under torchao 0.1 is replayed before the step (lora_finetune_single_device at 0914d5c: one layer built on the device and to_nf4'd, deep-copied per layer, each weight quantized again by load_state_dict from an fp16 or fp32 checkpoint; to_nf4 quantizes a whole weight at once, about 68 bytes per value): its freed temporaries stay cached, so they count in reserved; the peak includes the setup's, which torchtune's own logs after model init leave out".to_string());
    }
    notes.push(format!(
        "reserved memory (torch.cuda.max_memory_reserved() plus the overhead) is simulated with the caching allocator's rounding and pools over the timeline's allocations{}: approximate",
        if setup.step.allocator.expandable_segments { ", expandable_segments" } else { "" }
    ));
    notes
}

fn copies(elements: &Elements, parameters: Count) -> Copies {
    let per_parameter = |n: u64| {
        if parameters.0 == 0 {
            0.0
        } else {
            n as f64 / parameters.0 as f64
        }
    };
    Copies {
        weights: per_parameter(elements.weights),
        master_weights: per_parameter(elements.master_weights),
        gradients: per_parameter(elements.gradients),
        optimizer_states: per_parameter(elements.optimizer_states),
        total: per_parameter(
            elements.weights
                + elements.master_weights
                + elements.gradients
                + elements.optimizer_states,
        ),
    }
}

/// The activations of one micro-batch on each pipeline stage that can be
/// the most loaded, when a micro-batch is given and the architecture is known.
/// What the activations read of a model's LoRA adapters, read once per model.
#[derive(Debug, Clone, Default)]
pub(crate) struct AdapterFacts {
    /// The adapted modules' short names (`q_proj`), sorted.
    adapted: Vec<String>,
    /// Whether any adapter exists.
    any: bool,
    /// Whether the base trains none of its weights (adapters, or all frozen).
    frozen_base: bool,
    /// The smallest adapter rank (0 without adapters).
    rank: u64,
    /// The adapters' own dtype, if they keep one.
    training_dtype: Option<DType>,
    /// Whether the base's linears are bitsandbytes 4-bit (`Linear4bit`).
    four_bit_linears: bool,
    /// Whether a token or position embedding trains.
    embeddings_train: bool,
}

impl AdapterFacts {
    pub(crate) fn of(model: &Model) -> AdapterFacts {
        let adapters: Vec<&crate::model::Tensor> = model
            .tensors
            .iter()
            .filter(|t| t.name.contains(".lora_A."))
            .collect();
        let mut adapted: Vec<String> = adapters
            .iter()
            .filter_map(|t| t.name.split(".lora_A.").next())
            .filter_map(|module| module.trim_end_matches(".base_layer").rsplit('.').next())
            .map(str::to_string)
            .collect();
        adapted.sort();
        adapted.dedup();
        AdapterFacts {
            adapted,
            any: !adapters.is_empty(),
            frozen_base: !adapters.is_empty() || model.tensors.iter().all(|t| !t.trainable),
            rank: adapters
                .iter()
                .filter_map(|t| t.shape.dims().first().copied())
                .min()
                .unwrap_or(0),
            training_dtype: adapters.iter().find_map(|t| t.training_dtype),
            four_bit_linears: model.tensors.iter().any(|tensor| {
                matches!(
                    tensor.quantization,
                    Some(Quantization::Nf4 { .. } | Quantization::Fp4 { .. })
                )
            }),
            embeddings_train: model
                .tensors
                .iter()
                .any(|t| t.role == Role::Embedding && t.trainable),
        }
    }
}

/// The activations of the stages that can be the most loaded.
fn activations_with(
    model: &Model,
    adapters: &AdapterFacts,
    setup: &Setup,
) -> Result<Option<Vec<Activations>>> {
    // A trace of the module gives its activations, for the shape it ran.
    if let (Some(trace), Some(workload)) = (&model.traced, &setup.workload) {
        let workload = Workload {
            tensor_parallel: setup.parallelism.tensor,
            pipeline: setup.parallelism.pipeline,
            context_parallel: setup.parallelism.context,
            ..workload.clone()
        };
        return Ok(Some(vec![activation::traced::activations(
            trace, &workload,
        )?]));
    }
    match activation_workload(model, adapters, setup)? {
        Some(workload) => Ok(Some(activation::stages(
            &*activation_dimensions(model)?,
            &workload,
        )?)),
        None => Ok(None),
    }
}

/// The dimensions the activations are computed from: a vision-language
/// model's image inputs as its inventory trains them (see
/// [`trained_image_parts`]). Call only when `model.dimensions` is known.
fn activation_dimensions(model: &Model) -> Result<std::borrow::Cow<'_, Dimensions>> {
    let dims = model
        .dimensions
        .as_ref()
        .ok_or_else(|| Error::overflow("the model's dimensions"))?;
    Ok(match &dims.images {
        Some(images) => std::borrow::Cow::Owned(Dimensions {
            images: Some(trained_image_parts(model, images)?),
            ..dims.clone()
        }),
        None => std::borrow::Cow::Borrowed(dims),
    })
}

/// The workload the activations are computed for: the user's, with what
/// the layout, the recipe and the adapters decide.
fn activation_workload(
    model: &Model,
    adapters: &AdapterFacts,
    setup: &Setup,
) -> Result<Option<Workload>> {
    // `estimate` reads a trace before this (`activations_with`); a search
    // over workloads (`plan`'s pricer) would price others than the traced.
    if model.traced.is_some() && setup.workload.is_some() {
        return Err(Error::InvalidValue {
            what: "--model",
            value: model.name.clone(),
            reason: "its inventory carries an activation trace, which prices the one workload traced: `estimate` and `timeline` read it; accepted here: the inventory without `activations_trace`".to_string(),
        });
    }
    let (Some(workload), Some(_)) = (&setup.workload, &model.dimensions) else {
        return Ok(None);
    };
    if workload.offload_activations
        && setup.parallelism.framework == crate::parallel::Framework::Megatron
    {
        return Err(Error::InvalidValue {
            what: "--offload-activations",
            value: "--framework megatron".to_string(),
            reason: "the offloading priced is torchtune's saved-tensor hooks; Megatron-core's own activation offloading is not modelled".to_string(),
        });
    }
    let workload = Workload {
        megatron_kernels: setup.parallelism.framework == crate::parallel::Framework::Megatron,
        dtype: setup.precision.activations,
        weights_dtype: setup.precision.weights,
        autocast: workload.autocast || setup.runs_autocast(),
        tensor_parallel: setup.parallelism.tensor,
        pipeline: setup.parallelism.pipeline,
        micro_batches: setup.step.grad_accumulation,
        context_parallel: setup.parallelism.context,
        fp8: setup.precision.fp8,
        frozen_base: adapters.frozen_base,
        four_bit_linears: adapters.four_bit_linears,
        embeddings_train: adapters.embeddings_train,
        lora_rank: adapters.rank,
        // peft casts each adapter's input to the adapter's dtype; under
        // torch.autocast the adapter's matmul runs in the compute dtype
        // whatever its weights' dtype, priced as adapters in that dtype.
        lora_dropout: if adapters.any {
            setup.lora_dropout
        } else {
            activation::LoraDropout::default()
        },
        // Under autocast the adapters keep the dtype they are stored in
        // (TRL casts a quantized model's to bf16 over fp32 weights).
        lora_dtype: if setup.precision.weights == setup.precision.activations
            || setup.runs_autocast()
        {
            adapters.training_dtype
        } else {
            None
        },
        adapted: adapters.adapted.clone(),
        ..workload.clone()
    };
    Ok(Some(workload))
}

/// A vision-language model's image inputs as its inventory trains them:
/// the projector saves its inputs when it trains, the merge its mask when
/// the projector or the token embedding trains. Measured with the vision
/// tower frozen and no adapters in the tower or the projector; anything
/// else is refused by name.
fn trained_image_parts(model: &Model, images: &ImageInputs) -> Result<ImageInputs> {
    let model_type = model.model_type.as_deref().unwrap_or_default();
    let part = |name: &str| crate::architecture::part_prefixes(model_type, name).unwrap_or(&[]);
    let within = |name: &str, tensor: &crate::model::Tensor| {
        part(name)
            .iter()
            .any(|prefix| tensor.name.starts_with(prefix))
    };
    let missing = |what: &'static str, reason: &str| Error::Missing {
        what,
        accepted: format!("{} ({})", reason, model.name),
    };
    if model
        .tensors
        .iter()
        .any(|t| within("vision_tower", t) && t.trainable)
    {
        return Err(missing(
            "--freeze vision_tower",
            "the activations of a vision-language model are modelled with its vision tower frozen (no autograd in the tower); add it, or drop --micro-batch and --seq-len for the model states alone",
        ));
    }
    if model
        .tensors
        .iter()
        .any(|t| within("multi_modal_projector", t) && t.name.contains(".lora_"))
    {
        return Err(missing(
            "--freeze multi_modal_projector",
            "LoRA adapters on the projector are not measured for activation memory; add it for the language model's adapters alone, or drop --micro-batch and --seq-len",
        ));
    }
    let projector_trains = model
        .tensors
        .iter()
        .any(|t| within("multi_modal_projector", t) && t.trainable);
    let embeddings_train = model
        .tensors
        .iter()
        .any(|t| t.name.ends_with("language_model.embed_tokens.weight") && t.trainable);
    Ok(ImageInputs {
        projector_trains,
        embeddings_train,
        ..*images
    })
}

fn notes(model: &Model, setup: &Setup, host_states: Bytes, paged: Bytes) -> Vec<String> {
    let mut notes = Vec::new();
    match (&setup.workload, &model.dimensions) {
        (Some(_), _) if model.traced.is_some() => {
            notes.extend(model.traced.iter().flat_map(activation::traced::notes));
        }
        (None, _) => notes.push(
            "activations are not estimated: no micro-batch given (--micro-batch and --seq-len); the peak is the model states and the step's temporaries"
                .to_string(),
        ),
        // The bare model of an encoder whose other tasks are modelled;
        // CLIP's and SigLIP's activations are not modelled for any task.
        (Some(_), None)
            if model.task == Some(crate::architecture::Task::Embedding)
                && model.model_type.as_deref().is_some_and(|model_type| {
                    crate::architecture::supported_for_activations().contains(&model_type)
                }) =>
        {
            notes.push(match model.model_type.as_deref() {
                Some("clip") => "activations are not estimated: CLIPModel's contrastive training of both towers is not modelled yet; give --task seq-cls:N for CLIPForImageClassification, its vision tower's classifier".to_string(),
                model_type => format!(
                    "activations are not estimated: the embedding task is the bare AutoModel, whose loss (contrastive, pooling) is the training script's own; give --task {} for transformers' heads",
                    if model_type == Some("vit") {
                        "seq-cls:N (ViTForImageClassification)"
                    } else {
                        "masked-lm, seq-cls:N or token-cls:N"
                    }
                ),
            })
        }
        (Some(_), None)
            if matches!(model.model_type.as_deref(), Some("t5" | "bart" | "whisper"))
                && model.task != Some(crate::architecture::Task::Seq2Seq) =>
        {
            notes.push(format!(
                "activations are not estimated: for `{}` trainmem models seq2seq (AutoModelForSeq2SeqLM, Whisper's AutoModelForSpeechSeq2Seq), whose saved tensors are measured; give --task seq2seq",
                model.model_type.as_deref().unwrap_or_default()
            ))
        }
        (Some(_), None) => match model.model_type.as_deref() {
            Some(model_type) if crate::architecture::supported().contains(&model_type) => {
                notes.push(format!(
                    "activations are not estimated: trainmem counts the parameters of `{model_type}` exactly but does not model its activations yet (modelled: {})",
                    crate::architecture::supported_for_activations().join(", ")
                ));
            }
            _ => notes.push(format!(
                "activations are not estimated: the architecture of {} is unknown (give --model with a config.json or preset, or --layers --hidden --heads --ffn --vocab)",
                model.name
            )),
        },
        (Some(workload), Some(dims)) => {
            // The techniques as priced: with the adapters and the
            // quantized linears the model carries (an error here is the
            // estimate's own, reported there).
            let priced = activation_workload(model, &AdapterFacts::of(model), setup)
                .ok()
                .flatten();
            notes.extend(activation::technique_notes(priced.as_ref().unwrap_or(workload)));
            notes.extend(activation::encoder_decoder_notes(dims, workload));
            notes.extend(activation::state_space_notes(
                dims,
                &Workload {
                    weights_dtype: setup.precision.weights,
                    ..workload.clone()
                },
            ));
        }
    }
    if let (false, Some(assumption)) = (model.shapes_known, setup.optimizer.flat_assumption) {
        notes.push(format!(
            "{} is shape-aware and --params gives no shapes: {assumption}; give --model for the exact figure",
            setup.optimizer.name
        ));
    }
    let parallel = &setup.parallelism;
    if parallel.zero.shards_weights() && !model.shapes_known {
        notes.push("--params gives no layers: the gathered-layer temporary of ZeRO-3 is not known (give --model)".to_string());
    }
    if parallel.zero.shards_optimizer()
        && parallel.framework != crate::parallel::Framework::Fsdp2
        && setup.optimizer.flat_assumption.is_some()
    {
        notes.push(format!(
            "{:?} steps the optimizer on one flat partition per rank: {} sees 1-D vectors, not the tensors' shapes",
            parallel.framework, setup.optimizer.name
        ));
    }
    notes.extend(crate::parallel::layout_notes(model, parallel));
    if paged > Bytes::ZERO {
        notes.push(format!(
            "{}: the states of tensors of 1e5 values or more ({} per GPU) are paged (cudaMallocManaged unified memory, bitsandbytes' get_state_buffer): the driver keeps them on the GPU while there is room and pages them to host RAM under pressure, and torch.cuda.memory_allocated() does not see them, so they are left out of the device peak and counted with host memory (host.optimizer_states)",
            setup.optimizer.name,
            paged.display(crate::units::UnitSystem::Decimal)
        ));
    }
    if host_states > Bytes::ZERO && parallel.offload == crate::parallel::Offload::None {
        notes.push(format!(
            "{}'s `step` counters ({}) are 0-d fp32 tensors that torch keeps on the host unless the optimizer is fused or capturable",
            setup.optimizer.name,
            host_states.display(crate::units::UnitSystem::Decimal)
        ));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimizer::Optimizer;

    fn run(params: &str, optimizer: &str, precision: &str) -> Estimate {
        let setup = Setup::new(
            Optimizer::find(optimizer).unwrap(),
            *Precision::find(precision).unwrap(),
        );
        estimate(&Model::flat(params.parse().unwrap()), &setup).unwrap()
    }

    /// Seed 000: 13B x 3 x 2 bytes = 78 GB; 1B gives 6 GB; the ratio is 13.
    #[test]
    fn seed_000_slice() {
        let big = run("13B", "adam", "bf16").gradient_optimizer_slice;
        let small = run("1B", "adam", "bf16").gradient_optimizer_slice;
        assert_eq!(big.bytes, Bytes(78_000_000_000));
        assert_eq!(small.bytes, Bytes(6_000_000_000));
        assert_eq!(big.bytes.0 / small.bytes.0, 13);
        assert_eq!(big.values_per_parameter, 3.0);
        assert_eq!(big.bytes_per_value, Some(2));
        assert_eq!(big.equation(), "13B × 3 × 2 B");
        for (optimizer, v) in [("sgd", 1.0), ("sgd-momentum", 2.0), ("adam", 3.0)] {
            assert_eq!(
                run("1B", optimizer, "bf16")
                    .gradient_optimizer_slice
                    .values_per_parameter,
                v
            );
        }
    }

    /// Seed 001, Step 2: totals in fp32 at 124M, 1.5B and 7B.
    #[test]
    fn seed_001_priced() {
        let table = [
            ("sgd", [992_000_000, 12_000_000_000, 56_000_000_000], 2.0),
            (
                "sgd-momentum",
                [1_488_000_000, 18_000_000_000, 84_000_000_000],
                3.0,
            ),
            (
                "rmsprop",
                [1_488_000_000, 18_000_000_000, 84_000_000_000],
                3.0,
            ),
            (
                "adam",
                [1_984_000_000, 24_000_000_000, 112_000_000_000],
                4.0,
            ),
        ];
        for (optimizer, totals, copies) in table {
            for (size, total) in ["124M", "1.5B", "7B"].iter().zip(totals) {
                let e = run(size, optimizer, "fp32");
                assert_eq!(e.memory.total, Bytes(total), "{optimizer} at {size}");
                assert_eq!(e.copies.total, copies);
            }
        }
    }

    /// Issue 2: mixed precision with Adam is 16 bytes per parameter (K = 12).
    #[test]
    fn mixed_precision_is_sixteen_bytes_per_parameter() {
        let e = run("1B", "adam", "mixed-fp16");
        assert_eq!(e.memory.total, Bytes(16_000_000_000));
        assert_eq!(e.memory.master_weights, Bytes(4_000_000_000));
        assert_eq!(e.copies.total, 5.0);
        assert_eq!(e.gradient_optimizer_slice.bytes_per_value, None);
        assert_eq!(
            e.gradient_optimizer_slice.equation(),
            "1B × (1 × 2 B + 2 × 4 B)"
        );
    }

    #[test]
    fn step_counters_live_on_the_host() {
        let e = run("7B", "adam", "fp32");
        assert_eq!(e.host.optimizer_states, Bytes(4));
        assert_eq!(e.memory.optimizer_states, Bytes(56_000_000_000));
    }

    #[test]
    fn overflow_is_an_error_not_a_wrap() {
        let setup = Setup::new(
            Optimizer::find("adam").unwrap(),
            *Precision::find("fp32").unwrap(),
        );
        let huge = Model::flat(Count(u64::MAX / 2));
        assert!(matches!(
            estimate(&huge, &setup),
            Err(Error::Overflow { .. })
        ));
    }
}
