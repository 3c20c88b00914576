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
use crate::model::{Model, Role, Shape, Tensor};
use crate::optimizer::{GlobalContext, Location, StateTensor};
use crate::parallel::{Framework, Layout, Offload, layer_of, place};
use crate::units::{Bytes, Count};

/// What one accelerator (the most loaded) and its host hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceMemory {
    /// On the accelerator.
    pub memory: Memory,
    /// On the host, for the whole node (every rank's process on it).
    pub host: Memory,
    /// Temporary memory within a step.
    pub transients: Transients,
    /// The pipeline stage reported (the most loaded one).
    pub stage: u64,
    /// Parameters the accelerator is responsible for (its tensor-, pipeline-
    /// and expert-parallel part, before data-parallel sharding).
    pub local_parameters: Count,
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
    states: Bytes,
    host_states: Bytes,
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
        }
    }
}

/// The memory of the most loaded accelerator under `setup.parallelism`.
pub fn per_device(model: &Model, setup: &Setup) -> Result<DeviceMemory> {
    let parallelism = setup.parallelism;
    let layout = Layout::of(model);
    let zero = parallelism.zero;
    let framework = parallelism.framework;
    let stages = usize::try_from(parallelism.pipeline)
        .map_err(|_| Error::overflow("the pipeline stages"))?;
    // [stage][dense, experts]
    let mut groups: Vec<[Group; 2]> = vec![Default::default(); stages];
    // ZeRO-3 gathers one module at a time: a decoder layer, or a tensor's own
    // module outside the layers (the embedding, the head).
    let mut layer_weights: BTreeMap<(u64, String), Bytes> = BTreeMap::new();

    for tensor in &model.tensors {
        let Some(placement) = place(tensor, &layout, &parallelism)? else {
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
            let weight_bytes = precision.weight_bytes(tensor, shape)?;
            if tensor.quantization.is_some() {
                group
                    .weights
                    .add_bytes(weight_bytes, zero.shards_weights(), degree)?;
            } else {
                group.weights.add(
                    shape,
                    precision.weights,
                    zero.shards_weights(),
                    framework,
                    degree,
                )?;
            }
            if zero.shards_weights() && model.shapes_known {
                // One layer gathered whole, with its gradient before the reduce-scatter.
                let gradient = if tensor.trainable {
                    precision.gradients.size_of(elements)?
                } else {
                    Bytes::ZERO
                };
                let slot = layer_weights
                    .entry((*stage, gathered_module(&tensor.name)))
                    .or_default();
                *slot = slot.add(weight_bytes, WHAT)?.add(gradient, WHAT)?;
            }
            if !tensor.trainable {
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
            if setup.optimizer.fused_backward {
                group.largest_gradient = group
                    .largest_gradient
                    .max(precision.gradients.size_of(elements)?);
            } else {
                group.gradients.add(
                    shape,
                    precision.gradients,
                    zero.shards_gradients(),
                    framework,
                    degree,
                )?;
            }
            add_count(&mut group.trainable, elements.0)?;
            group.tensors += 1;
            match (zero.shards_optimizer(), framework) {
                (true, Framework::DeepSpeed | Framework::Megatron) => {
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
                    group.largest = group.largest.max(local_shape.elements().0);
                    let local = Tensor {
                        shape: local_shape,
                        ..tensor.clone()
                    };
                    for state in setup.optimizer.states(
                        &local,
                        precision.optimizer_dtype(),
                        &setup.options,
                    )? {
                        group.add_state(&state)?;
                    }
                }
            }
        }
    }

    let mut best: Option<DeviceMemory> = None;
    for (stage, stage_groups) in groups.into_iter().enumerate() {
        let device = finish_stage(stage as u64, stage_groups, setup, &layer_weights)?;
        if best
            .as_ref()
            .is_none_or(|b| device.memory.total > b.memory.total)
        {
            best = Some(device);
        }
    }
    best.ok_or_else(|| Error::overflow("the pipeline stages"))
}

/// Shards one stage's pieces, applies the optimizer's flat partitions,
/// global state and offload, and adds up the stage.
fn finish_stage(
    stage: u64,
    stage_groups: [Group; 2],
    setup: &Setup,
    layer_weights: &BTreeMap<(u64, String), Bytes>,
) -> Result<DeviceMemory> {
    let parallelism = setup.parallelism;
    let state_dtype = setup.precision.optimizer_dtype();
    let (mut weights, mut master, mut gradients, mut states, mut host_states) = (
        Bytes::ZERO,
        Bytes::ZERO,
        Bytes::ZERO,
        Bytes::ZERO,
        Bytes::ZERO,
    );
    let (mut trainable, mut largest, mut tensors, mut parameters) = (0u64, 0u64, 0usize, 0u64);
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
                for state in setup.optimizer.states(&flat, dtype, &setup.options)? {
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
        add(&mut states, group.states)?;
        add(&mut host_states, group.host_states)?;
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
        }
    }
    let optimizer_step = setup.optimizer.step_temporaries.bytes(&context)?;

    // Offload: what moves to the host.
    let mut host = [Bytes::ZERO; 4];
    if parallelism.offload != Offload::None {
        host[1] = std::mem::take(&mut master);
        host[3] = std::mem::take(&mut states);
        if parallelism.zero.shards_gradients() {
            host[2] = std::mem::take(&mut gradients);
        }
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
        per_node(host[3].add(host_states, WHAT)?)?,
        Bytes::ZERO,
    )?;
    let parameter_gather = layer_weights
        .iter()
        .filter(|((s, _), _)| *s == stage)
        .map(|(_, bytes)| *bytes)
        .max()
        .unwrap_or(Bytes::ZERO);
    Ok(DeviceMemory {
        memory: Memory::new(weights, master, gradients, states, Bytes::ZERO)?,
        host,
        transients: Transients {
            optimizer_step,
            backward: Bytes::ZERO,
            parameter_gather,
        },
        stage,
        local_parameters: Count(parameters),
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
