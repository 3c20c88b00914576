//! Memory of the most loaded accelerator (and its host) when training is
//! spread over many: tensor, pipeline and expert parallelism place each
//! tensor, then data parallelism shards the pieces its ZeRO stage names.
//!
//! Sharding over d ranks, per piece (ZeRO paper, arXiv 1910.02054, §5):
//! stage 1 shards master weights and optimizer states, stage 2 also
//! gradients, stage 3 also weights. DeepSpeed and Megatron shard flat buffers,
//! so the largest shard of N elements is ceil(N / d) and the optimizer steps
//! on one flat vector; FSDP2 shards each tensor's dim 0 to ceil(dim0 / d) rows
//! and the optimizer steps on those shards.

use std::collections::BTreeMap;

use super::{Memory, Setup, Transients};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::model::{Model, Quantization, Role, Shape, Tensor};
use crate::optimizer::{GlobalContext, Location, StateTensor};
use crate::parallel::{Framework, Layout, NameFacts, Offload, layer_of, place_named};
use crate::timeline::Module;
use crate::units::{Bytes, Count};

/// What one accelerator (the most loaded) and its host hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceMemory {
    /// On the accelerator.
    pub memory: Memory,
    /// On the host, for the whole node (every rank's process on it).
    pub host: Memory,
    /// The rank's optimizer states in CUDA unified memory (bitsandbytes'
    /// paged optimizers), counted in `host.optimizer_states`.
    pub paged_states: Bytes,
    /// Temporary memory within a step.
    pub transients: Transients,
    /// The pipeline stage reported (the most loaded one).
    pub stage: u64,
    /// Parameters the accelerator is responsible for (its tensor-, pipeline-
    /// and expert-parallel part, before data-parallel sharding).
    pub local_parameters: Count,
    /// The stage's modules in forward order, for the step timeline.
    pub modules: Vec<Module>,
    /// The stage's weights before data-parallel sharding, in their stored dtype.
    pub unsharded_weights: Bytes,
    /// Its largest module's weights before sharding, in their stored dtype.
    pub largest_module_weights: Bytes,
    /// Trainable elements of the rank's optimizer partition (after sharding).
    pub trainable_partition: Count,
    /// The most elements of one placed tensor inside the stage's layers.
    pub largest_tensor: Count,
    /// The part of `memory.gradients` no optimizer zeroes (trainable tensors
    /// the optimizer does not hold): alive across steps.
    pub kept_gradients: Bytes,
}

/// One module's footprint on a stage, summed over its tensors.
#[derive(Debug, Default, Clone)]
struct ModuleTally {
    module: Module,
    /// Its weights before sharding, in their stored dtype.
    weights: Bytes,
    /// Its weights with their whole gradient in the recipe's gradient dtype:
    /// the ZeRO-3 gathered-layer temporary reported in `transients`
    /// (DeepSpeed's estimator counts the largest layer the same way).
    weights_and_gradient: Bytes,
}

/// A piece kept either whole per tensor or in flat data-parallel buffers.
#[derive(Debug, Default, Clone)]
struct Piece {
    /// Bytes already final (unsharded, or sharded per tensor).
    bytes: Bytes,
    /// Elements in flat buffers, one per dtype, each sharded as ceil(N / d) at the end.
    flat: BTreeMap<DType, u64>,
}

/// One data-parallel group's pieces on one pipeline stage: dense weights
/// shard over every data-parallel rank, experts over the expert-data-parallel ranks.
#[derive(Debug, Default, Clone)]
struct Group {
    weights: Piece,
    master_weights: Piece,
    gradients: Piece,
    /// Gradients of trainable tensors no optimizer holds (`Tensor::optimized`):
    /// never zeroed, they stay across steps.
    kept_gradients: Piece,
    states: Bytes,
    host_states: Bytes,
    paged_states: Bytes,
    /// Trainable elements, per state dtype, whose optimizer steps on a flat partition.
    flat_states: BTreeMap<DType, u64>,
    /// With an update fused into backward, the largest gradient held at once.
    largest_gradient: Bytes,
    /// Trainable elements and the largest trainable tensor, for the step's temporaries.
    trainable: u64,
    largest: u64,
    tensors: usize,
    parameters: u64,
}

const WHAT: &str = "the per-accelerator memory";

fn add(sum: &mut Bytes, more: Bytes) -> Result<()> {
    *sum = sum.add(more, WHAT)?;
    Ok(())
}

fn add_count(sum: &mut u64, more: u64) -> Result<()> {
    *sum = sum.checked_add(more).ok_or_else(|| Error::overflow(WHAT))?;
    Ok(())
}

/// The shape of the largest of `degree` shards of `shape` along dim 0.
fn dim0_shard(shape: &Shape, degree: u64) -> Result<Shape> {
    let mut dims = shape.dims().to_vec();
    if let Some(first) = dims.first_mut() {
        *first = first.div_ceil(degree);
    }
    Shape::new(dims)
}

impl Piece {
    /// Adds a tensor of `shape` in `dtype`, sharded over `degree` ranks when `sharded`.
    fn add(
        &mut self,
        shape: &Shape,
        dtype: DType,
        sharded: bool,
        framework: Framework,
        degree: u64,
    ) -> Result<()> {
        match (sharded, framework) {
            (false, _) => add(&mut self.bytes, dtype.size_of(shape.elements())?),
            (true, Framework::Fsdp2) => add(
                &mut self.bytes,
                dtype.size_of(dim0_shard(shape, degree)?.elements())?,
            ),
            (true, _) => add_count(self.flat.entry(dtype).or_default(), shape.elements().0),
        }
    }

    /// Adds bytes that are not elements of one dtype (a quantized weight),
    /// the largest shard being ceil(bytes / d) when `sharded`.
    fn add_bytes(&mut self, bytes: Bytes, sharded: bool, degree: u64) -> Result<()> {
        add(
            &mut self.bytes,
            if sharded {
                Bytes(bytes.0.div_ceil(degree))
            } else {
                bytes
            },
        )
    }

    /// The bytes of the largest shard.
    fn finish(self, degree: u64) -> Result<Bytes> {
        let mut total = self.bytes;
        for (dtype, elements) in self.flat {
            add(&mut total, dtype.size_of(Count(elements.div_ceil(degree)))?)?;
        }
        Ok(total)
    }
}

impl Group {
    fn add_state(&mut self, state: &StateTensor) -> Result<()> {
        let bytes = state.dtype.size_of(state.shape.elements())?;
        match state.location {
            Location::Device => add(&mut self.states, bytes),
            Location::Host => add(&mut self.host_states, bytes),
            Location::Paged => add(&mut self.paged_states, bytes),
        }
    }
}

/// What [`per_stage`] reads of a model's tensor names, read once: a layout
/// search prices one model under thousands of layouts, and parsing the
/// names was most of that work.
#[derive(Debug, Clone)]
pub struct ModelIndex {
    layout: Layout,
    names: Vec<NameFacts>,
    linear: Vec<bool>,
    /// The module ZeRO-3 gathers each tensor with.
    module: Vec<String>,
}

impl ModelIndex {
    /// What the layout checks read of the model, from the layout read here.
    pub fn splittable(&self, model: &Model) -> crate::parallel::Splittable {
        crate::parallel::Splittable::with_layout(model, &self.layout)
    }

    /// The index of `model`'s tensors.
    pub fn of(model: &Model) -> ModelIndex {
        let mut linear = vec![false; model.tensors.len()];
        for found in crate::finetune::linears(model) {
            if let Some(flag) = linear.get_mut(found.weight) {
                *flag = true;
            }
        }
        ModelIndex {
            layout: Layout::of(model),
            names: model.tensors.iter().map(NameFacts::of).collect(),
            linear,
            module: model
                .tensors
                .iter()
                .map(|t| gathered_module(&t.name))
                .collect(),
        }
    }
}

/// The memory of every pipeline stage's accelerator under
/// `setup.parallelism`, the model's names read into `index` once.
pub fn per_stage_indexed(
    model: &Model,
    index: &ModelIndex,
    setup: &Setup,
) -> Result<Vec<DeviceMemory>> {
    let parallelism = setup.parallelism;
    let layout = index.layout;
    let zero = parallelism.zero;
    let framework = parallelism.framework;
    let stages = usize::try_from(parallelism.pipeline)
        .map_err(|_| Error::overflow("the pipeline stages"))?;
    // [stage][dense, experts]
    let mut groups: Vec<[Group; 2]> = vec![Default::default(); stages];
    // ZeRO-3 gathers one module at a time: a decoder layer, or a tensor's own
    // module outside the layers (the embedding, the head).
    let mut modules: BTreeMap<(u64, &str), ModuleTally> = BTreeMap::new();
    let compute = setup.precision.activations;
    let mut largest_tensor = vec![Count::default(); stages];
    let fsdp_policy = framework.is_fsdp()
        && parallelism.fsdp_mixed_precision == crate::parallel::FsdpMixedPrecision::Policy;

    for (((tensor, facts), &linear), module) in model
        .tensors
        .iter()
        .zip(&index.names)
        .zip(&index.linear)
        .zip(&index.module)
    {
        let Some(placement) = place_named(tensor, facts, &layout, &parallelism)? else {
            continue;
        };
        let precision = setup.precision.for_tensor(tensor);
        let degree = parallelism.shard_degree(placement.expert);
        let shape = &placement.shape;
        let elements = shape.elements();
        for stage in &placement.stages {
            let group = groups
                .get_mut(*stage as usize)
                .and_then(|g| g.get_mut(usize::from(placement.expert)))
                .ok_or_else(|| Error::overflow("the pipeline stage index"))?;
            add_count(&mut group.parameters, elements.0)?;
            // The largest tensor inside the layers: the typical size of the
            // step's buffers (a flat model's one tensor, when there are no layers).
            if (facts.layer.is_some() || !model.shapes_known)
                && let Some(largest) = largest_tensor.get_mut(*stage as usize)
            {
                *largest = (*largest).max(elements);
            }
            let weight_bytes = precision.weight_bytes(tensor, shape)?;
            // A quantized weight's state outside its parameter data stays
            // whole on every rank when the parameters are sharded.
            let unsharded_state = match tensor.quantization {
                Some(quantization) if zero.shards_weights() => quantization
                    .unsharded_state_bytes(elements, shape.dims().first().copied().unwrap_or(1))?,
                _ => Bytes::ZERO,
            };
            if tensor.quantization.is_some() {
                let data = Bytes(weight_bytes.0.saturating_sub(unsharded_state.0));
                group
                    .weights
                    .add_bytes(data, zero.shards_weights(), degree)?;
                group.weights.add_bytes(unsharded_state, false, degree)?;
            } else {
                group.weights.add(
                    shape,
                    precision.weights,
                    zero.shards_weights(),
                    framework,
                    degree,
                )?;
            }
            module_footprint(
                modules.entry((*stage, module.as_str())).or_default(),
                Footprint {
                    tensor,
                    layer: facts.layer,
                    elements,
                    weight_bytes,
                    unsharded_state,
                    degree,
                    precision: &precision,
                    compute,
                    fsdp_policy,
                    linear,
                    setup,
                },
            )?;
            if !tensor.trainable {
                continue;
            }
            let add_gradient = |piece: &mut Piece| {
                piece.add(
                    shape,
                    precision.gradients,
                    zero.shards_gradients(),
                    framework,
                    degree,
                )
            };
            if !tensor.optimized {
                add_gradient(&mut group.kept_gradients)?;
                continue;
            }
            if let Some(master) = precision.master_weights {
                group.master_weights.add(
                    shape,
                    master,
                    zero.shards_optimizer(),
                    framework,
                    degree,
                )?;
            }
            if setup.steps_in_backward() {
                group.largest_gradient = group
                    .largest_gradient
                    .max(precision.gradients.size_of(elements)?);
            } else {
                add_gradient(&mut group.gradients)?;
            }
            group.tensors += 1;
            match (zero.shards_optimizer(), framework) {
                (true, Framework::DeepSpeed | Framework::Megatron) => {
                    add_count(&mut group.trainable, elements.0)?;
                    add_count(
                        group
                            .flat_states
                            .entry(precision.optimizer_dtype())
                            .or_default(),
                        elements.0,
                    )?;
                }
                (sharded, _) => {
                    let local_shape = if sharded {
                        dim0_shard(shape, degree)?
                    } else {
                        shape.clone()
                    };
                    // The optimizer steps on the rank's shards (FSDP), so its
                    // temporaries are sized by them, not by the whole tensors.
                    add_count(&mut group.trainable, local_shape.elements().0)?;
                    group.largest = group.largest.max(local_shape.elements().0);
                    let local = Tensor {
                        shape: local_shape,
                        ..tensor.clone()
                    };
                    for state in setup.optimizer.states_on(
                        &local,
                        precision.optimizer_dtype(),
                        &setup.options,
                        !setup.step.cpu,
                    )? {
                        group.add_state(&state)?;
                    }
                }
            }
        }
    }

    // What the optimizer holds beyond the model (litgpt's replaced
    // embedding): frozen weights of the first stage, whole on every rank.
    if let Some(group) = groups.first_mut().and_then(|stage| stage.first_mut()) {
        for tensor in &model.optimizer_only {
            let bytes = setup
                .precision
                .for_tensor(tensor)
                .weight_bytes(tensor, &tensor.shape)?;
            group.weights.add_bytes(bytes, false, 1)?;
        }
    }

    let mut all = Vec::with_capacity(groups.len());
    for (stage, stage_groups) in groups.into_iter().enumerate() {
        let stage = stage as u64;
        let mut device = finish_stage(stage, stage_groups, setup)?;
        let mut stage_modules: Vec<ModuleTally> = modules
            .range((stage, "")..)
            .take_while(|((s, _), _)| *s == stage)
            .map(|(_, tally)| tally.clone())
            .collect();
        stage_modules.sort_by_key(|m| {
            (
                !m.module.before_layers,
                m.module.layer.is_none(),
                m.module.layer,
            )
        });
        device.largest_tensor = largest_tensor
            .get(stage as usize)
            .copied()
            .unwrap_or_default();
        for tally in &stage_modules {
            device.unsharded_weights = device.unsharded_weights.add(tally.weights, WHAT)?;
            device.largest_module_weights = device.largest_module_weights.max(tally.weights);
            if zero.shards_weights() && model.shapes_known {
                // One layer gathered whole, with its gradient before the reduce-scatter.
                device.transients.parameter_gather = device
                    .transients
                    .parameter_gather
                    .max(tally.weights_and_gradient);
            }
        }
        device.modules = stage_modules
            .into_iter()
            .map(|m| Module {
                weights: m.weights,
                ..m.module
            })
            .collect();
        all.push(device);
    }
    Ok(all)
}

/// The stage whose persistent total is the largest.
pub fn most_loaded(stages: Vec<DeviceMemory>) -> Result<DeviceMemory> {
    stages
        .into_iter()
        .reduce(|best, next| {
            if next.memory.total > best.memory.total {
                next
            } else {
                best
            }
        })
        .ok_or_else(|| Error::overflow("the pipeline stages"))
}

/// What one tensor adds to its module's footprint.
struct Footprint<'a> {
    tensor: &'a Tensor,
    layer: Option<u64>,
    elements: Count,
    weight_bytes: Bytes,
    /// The part of a quantized weight every rank keeps whole (not gathered).
    unsharded_state: Bytes,
    /// The ranks its parameters are sharded over.
    degree: u64,
    precision: &'a crate::precision::Precision,
    compute: DType,
    fsdp_policy: bool,
    linear: bool,
    setup: &'a Setup,
}

/// The bytes bitsandbytes holds at once when it dequantizes a 4-bit
/// weight of `elements` for a matmul in `compute`.
///
/// `dequantize_4bit` returns the dtype the weight was quantized from
/// (`quant_state.dtype`), and `MatMul4Bit.backward` casts it:
/// `F.dequantize_4bit(B, ctx.state).to(grad_output.dtype)`
/// (`bitsandbytes/autograd/_functions.py` 0.50.2, line 384).
/// transformers quantizes the weight as loaded, in the compute dtype: one
/// tensor. litgpt's QLoRA quantizes through Lightning's
/// `_Linear4bit.quantize`, which starts from `weight.to(dtype=torch.half)`
/// (`lightning/fabric/plugins/precision/bitsandbytes.py` 2.6.6, lines
/// 336-351): an fp16 weight and its cast to a bf16 or fp32 compute dtype,
/// both alive (measured: `tests/fixtures/timeline/*litgpt-qlora*`, the
/// peak at the head's `MatMul4BitBackward` `aten::to`, which the timeline
/// places while the logits' gradient is alive). The forward
/// (`gemm_4bit`'s dequantize in the input's dtype) holds one; the timeline
/// charges the larger to both. torchao 0.1's `get_original_weight`
/// (torchtune's `linear_nf4`) holds about 14n bytes at once (int64 nibble
/// indices, both halves dequantized and scaled, the stacked bf16 weight):
/// `timeline::torchtune_setup::dequantize_peak`.
fn dequantized(
    setup: &Setup,
    quantization: Quantization,
    compute: DType,
    elements: Count,
) -> Result<Bytes> {
    if quantization == Quantization::Nf4Torchao01 {
        return crate::timeline::torchtune_setup::dequantize_peak(elements.0);
    }
    let one = compute.size_of(elements)?;
    if setup.step.implementation == crate::architecture::Implementation::Litgpt
        && compute != DType::Fp16
    {
        return one.add(DType::Fp16.size_of(elements)?, WHAT);
    }
    Ok(one)
}

/// Whether torch.autocast casts the linear weight `tensor` to `compute`
/// for its matmul: under autocast (amp's fp32 weights, or `--autocast`
/// over half-precision ones) a weight stored in another dtype, such as
/// peft's fp32 adapters over a bf16 base (the `__autocast` CPU fixtures:
/// each adapter's `lora_A` and `lora_B` casts saved for backward).
fn autocast_casts(setup: &Setup, tensor: &crate::model::Tensor, compute: DType) -> bool {
    let autocast = setup.runs_autocast() || setup.workload.as_ref().is_some_and(|w| w.autocast);
    let stored = tensor.training_dtype.unwrap_or(setup.precision.weights);
    autocast && stored != compute
}

/// Adds one tensor to its module: what ZeRO-3 gathers (FSDP's
/// `MixedPrecisionPolicy` gathers in the compute dtype, DeepSpeed the
/// stored half-precision weights), the gradient backward produces (in the
/// compute dtype under the policy, the recipe's gradient dtype otherwise),
/// FSDP's reduce-scatter input (the reduce dtype, the sharded gradient's),
/// autocast's saved half copy of a linear weight, and the largest weight
/// bitsandbytes dequantizes.
fn module_footprint(tally: &mut ModuleTally, part: Footprint) -> Result<()> {
    let Footprint {
        tensor,
        layer,
        elements,
        weight_bytes,
        unsharded_state,
        degree,
        precision,
        compute,
        fsdp_policy,
        linear,
        setup,
    } = part;
    let parallelism = setup.parallelism;
    let module = &mut tally.module;
    module.layer = layer;
    module.before_layers = module.layer.is_none() && tensor.role == Role::Embedding;
    tally.weights = tally.weights.add(weight_bytes, WHAT)?;
    tally.weights_and_gradient = tally.weights_and_gradient.add(weight_bytes, WHAT)?;
    if tensor.trainable {
        tally.weights_and_gradient = tally
            .weights_and_gradient
            .add(precision.gradients.size_of(elements)?, WHAT)?;
    }
    if parallelism.zero.shards_weights() {
        let gathered = match (tensor.quantization, fsdp_policy) {
            (None, true) => compute.size_of(elements)?,
            // The packed data in its storage dtype: FSDP gathers the
            // quantized parameter as stored (peft's and Answer.AI's recipes
            // set `bnb_4bit_quant_storage` to the compute dtype so that FSDP
            // can flatten it with the other parameters, and
            // `MixedPrecision` leaves it uncast).
            (Some(_), _) => Bytes(weight_bytes.0.saturating_sub(unsharded_state.0)),
            _ => weight_bytes,
        };
        module.gathered = module.gathered.add(gathered, WHAT)?;
        if parallelism.framework.is_fsdp() && parallelism.offload == Offload::OptimizerAndParams {
            // `CPUOffload(offload_params=True)` / `CPUOffloadPolicy`: the
            // rank's shard lives in pinned host memory and comes to the
            // device, cast to the gathered dtype, before each all-gather.
            module.host_shard = module
                .host_shard
                .add(Bytes(gathered.0.div_ceil(degree)), WHAT)?;
            module.host_shard_kept = parallelism.framework == Framework::Fsdp1
                && !(fsdp_policy && setup.precision.weights != compute);
        }
    }
    if let Some(quantization) = tensor.quantization {
        module.dequantized =
            module
                .dequantized
                .max(dequantized(setup, quantization, compute, elements)?);
    } else if linear && autocast_casts(setup, tensor, compute) {
        module.autocast = module.autocast.add(compute.size_of(elements)?, WHAT)?;
    }
    if tensor.trainable {
        let produced = if fsdp_policy && tensor.training_dtype.is_none() {
            compute
        } else {
            precision.gradients
        };
        let gradient = produced.size_of(elements)?;
        module.gradient = module.gradient.add(gradient, WHAT)?;
        if !tensor.optimized {
            module.kept_gradient = module.kept_gradient.add(gradient, WHAT)?;
        }
        module.largest_gradient = module.largest_gradient.max(gradient);
        if setup.steps_in_backward() {
            module.step_temporaries = module
                .step_temporaries
                .max(in_backward_step(setup, precision, elements)?);
        }
        // FSDP2 always copies the gradient into its reduce-scatter input
        // (`foreach_reduce`); FSDP1 reduce-scatters the flat gradient in place
        // (`_get_reduce_scatter_tensors` in `torch/distributed/fsdp/_runtime_utils.py`:
        // the flat parameter is already padded to a multiple of the world
        // size) and copies it only to cast it to the reduce dtype.
        let copied = parallelism.framework == Framework::Fsdp2 || produced != precision.gradients;
        if parallelism.zero.shards_gradients() && parallelism.framework.is_fsdp() && copied {
            let reduced = precision.gradients.size_of(elements)?;
            module.reduce_buffer = module.reduce_buffer.add(reduced, WHAT)?;
            if parallelism.framework == Framework::Fsdp2
                && parallelism.offload == Offload::OptimizerAndParams
            {
                module.gradient_to_host = module
                    .gradient_to_host
                    .add(Bytes(reduced.0.div_ceil(degree)), WHAT)?;
            }
        }
    }
    Ok(())
}

/// The temporaries of one parameter's own `step()` inside backward
/// (torchtune's `optimizer_in_bwd` builds one optimizer per parameter,
/// `torchtune/training/memory.py`): the optimizer's step over a one-tensor
/// list, on the rank's shard under FSDP (FSDP2 runs the post-accumulate-grad
/// hook on the sharded parameter after the reduce-scatter).
fn in_backward_step(
    setup: &Setup,
    precision: &crate::precision::Precision,
    elements: Count,
) -> Result<Bytes> {
    let parallelism = setup.parallelism;
    let local = if parallelism.zero.shards_optimizer() {
        Count(elements.0.div_ceil(parallelism.shard_degree(false)))
    } else {
        elements
    };
    let context = GlobalContext {
        elements: local,
        largest: local,
        tensors: 1,
        dtype: precision.optimizer_dtype(),
        options: &setup.options,
    };
    setup
        .optimizer
        .step_temporaries_on(&setup.options, setup.step.cpu)
        .bytes(&context)
}

/// Shards one stage's pieces, applies the optimizer's flat partitions,
/// global state and offload, and adds up the stage.
fn finish_stage(stage: u64, stage_groups: [Group; 2], setup: &Setup) -> Result<DeviceMemory> {
    let parallelism = setup.parallelism;
    let state_dtype = setup.precision.optimizer_dtype();
    let mut paged_states = Bytes::ZERO;
    let (mut weights, mut master, mut gradients, mut states, mut host_states) = (
        Bytes::ZERO,
        Bytes::ZERO,
        Bytes::ZERO,
        Bytes::ZERO,
        Bytes::ZERO,
    );
    let (mut trainable, mut largest, mut tensors, mut parameters) = (0u64, 0u64, 0usize, 0u64);
    let mut kept_gradients = Bytes::ZERO;
    for (index, mut group) in stage_groups.into_iter().enumerate() {
        let degree = parallelism.shard_degree(index == 1);
        let flat_states = std::mem::take(&mut group.flat_states);
        if !flat_states.is_empty() {
            // The optimizer sees one flat vector per dtype.
            group.trainable = 0;
            group.tensors = 0;
            for (dtype, elements) in flat_states {
                let partition = elements.div_ceil(degree);
                let flat = Tensor::new("flat partition", Shape::vector(partition), Role::Other);
                for state in
                    setup
                        .optimizer
                        .states_on(&flat, dtype, &setup.options, !setup.step.cpu)?
                {
                    group.add_state(&state)?;
                }
                group.largest = group.largest.max(partition);
                add_count(&mut group.trainable, partition)?;
                group.tensors += 1;
            }
        }
        add(&mut weights, group.weights.finish(degree)?)?;
        add(&mut master, group.master_weights.finish(degree)?)?;
        add(&mut gradients, group.gradients.finish(degree)?)?;
        add(&mut gradients, group.largest_gradient)?;
        add(&mut kept_gradients, group.kept_gradients.finish(degree)?)?;
        add(&mut states, group.states)?;
        add(&mut host_states, group.host_states)?;
        add(&mut paged_states, group.paged_states)?;
        add_count(&mut trainable, group.trainable)?;
        largest = largest.max(group.largest);
        tensors += group.tensors;
        add_count(&mut parameters, group.parameters)?;
    }
    let context = GlobalContext {
        elements: Count(trainable),
        largest: Count(largest),
        tensors,
        dtype: state_dtype,
        options: &setup.options,
    };
    for state in setup.optimizer.global_states(&context)? {
        let bytes = state.dtype.size_of(state.shape.elements())?;
        match state.location {
            Location::Device => add(&mut states, bytes)?,
            Location::Host => add(&mut host_states, bytes)?,
            Location::Paged => add(&mut paged_states, bytes)?,
        }
    }
    // Stepped inside backward, each parameter's step sees a one-tensor list:
    // the largest of them is the step's temporary.
    let one_tensor = GlobalContext {
        elements: Count(largest),
        tensors: 1.min(tensors),
        ..context
    };
    let mut optimizer_step = setup
        .optimizer
        .step_temporaries_on(&setup.options, setup.step.cpu)
        .bytes(if setup.steps_in_backward() {
            &one_tensor
        } else {
            &context
        })?;
    // DeepSpeed's ZeRO optimizers wrap the optimizer DeepSpeed builds from
    // its config: FusedAdam for Adam and AdamW on the GPU
    // (`_configure_basic_optimizer` in `deepspeed/runtime/engine.py`), one
    // multi-tensor kernel with no list temporaries.
    if parallelism.framework == Framework::DeepSpeed
        && parallelism.zero.shards_optimizer()
        && matches!(setup.optimizer.name, "adam" | "adamw")
    {
        optimizer_step = Bytes::ZERO;
    }

    // Offload (ZeRO-Offload, `stage_1_and_2.py` and `stage3.py` with
    // `offload_optimizer`): the master weights and states live on the host,
    // the step runs there on an fp32 copy of the gradient partition (4 bytes
    // per parameter of the partition), and its temporaries are host memory.
    // ZeRO-2 copies each reduced gradient straight into that pinned buffer,
    // so no gradient partition stays on the device; ZeRO-3 also keeps the
    // half-precision gradient partition on the host. Per parameter of the
    // partition with Adam: 16 host bytes (ZeRO-1/2), 18 (ZeRO-3), 20 (ZeRO-3
    // with the parameters offloaded too).
    let mut host = [Bytes::ZERO; 4];
    let fsdp_offload =
        parallelism.framework.is_fsdp() && parallelism.offload == Offload::OptimizerAndParams;
    if fsdp_offload {
        // FSDP's parameter offload (`CPUOffload(offload_params=True)`,
        // FSDP2's `CPUOffloadPolicy`) puts the sharded parameters, their
        // sharded gradients (FSDP1's pinned `_cpu_grad`, `zeros_like` the
        // local shard, `_flat_param.py` lines 1256-1265; FSDP2's
        // `new_sharded_grad.to("cpu")`) and so the optimizer and its step on
        // the host, in the parameters' own dtype: no fp32 copy as
        // ZeRO-Offload makes. FSDP1 still keeps each unit's reduced shard on
        // the device as `_saved_grad_shard` until backward ends
        // (`_accumulate_sharded_grad` in `_runtime_utils.py` lines 906-928;
        // freed by `prepare_gradient_for_optim`, `_flat_param.py` lines
        // 1679-1721): those gradients stay in the device's figures. FSDP2
        // copies each one out as it is reduced (`gradient_to_host`).
        host[1] = std::mem::take(&mut master);
        host[3] = std::mem::take(&mut states);
        host[2] = if parallelism.framework == Framework::Fsdp1 {
            gradients
        } else {
            std::mem::take(&mut gradients)
        };
        optimizer_step = Bytes::ZERO;
    } else if parallelism.offload != Offload::None {
        host[1] = std::mem::take(&mut master);
        host[3] = std::mem::take(&mut states);
        host[2] = DType::Fp32.size_of(Count(trainable))?;
        if parallelism.zero.shards_gradients() {
            let partition = std::mem::take(&mut gradients);
            if parallelism.zero.shards_weights() {
                host[2] = host[2].add(partition, WHAT)?;
            }
        }
        optimizer_step = Bytes::ZERO;
    }
    if parallelism.offload == Offload::OptimizerAndParams {
        host[0] = std::mem::take(&mut weights);
    }
    let ranks_per_node = (parallelism.gpus / parallelism.nodes).max(1);
    let per_node = |b: Bytes| b.times(ranks_per_node, "the host memory of a node");
    let host = Memory::new(
        per_node(host[0])?,
        per_node(host[1])?,
        per_node(host[2])?,
        per_node(host[3].add(host_states, WHAT)?.add(paged_states, WHAT)?)?,
        Bytes::ZERO,
    )?;
    // Kept gradients stay on the device whatever is offloaded: no
    // optimizer, on the host or not, ever sees them.
    add(&mut gradients, kept_gradients)?;
    Ok(DeviceMemory {
        kept_gradients,
        memory: Memory::new(weights, master, gradients, states, Bytes::ZERO)?,
        host,
        paged_states,
        transients: Transients {
            optimizer_step,
            backward: Bytes::ZERO,
            parameter_gather: Bytes::ZERO,
        },
        stage,
        local_parameters: Count(parameters),
        modules: Vec::new(),
        unsharded_weights: Bytes::ZERO,
        largest_module_weights: Bytes::ZERO,
        trainable_partition: Count(trainable),
        largest_tensor: Count::default(),
    })
}

/// What ZeRO-3 gathers together with `name`: its decoder layer, or else
/// its own module.
fn gathered_module(name: &str) -> String {
    match layer_of(name) {
        Some(layer) => format!("layer {layer}"),
        None => name
            .rsplit_once('.')
            .map_or(name, |(module, _)| module)
            .to_string(),
    }
}
