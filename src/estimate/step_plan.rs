//! The step plan of one rank: what each framework puts where, and when, as
//! the step timeline (`crate::timeline`) replays it.
//!
//! Choices, by framework (read from their sources):
//! * ZeRO-3 / FSDP full shard gather one module at a time, the next one
//!   prefetched: FSDP2's implicit forward prefetch and `BACKWARD_PRE`,
//!   FSDP1's `limit_all_gathers` (two in flight), DeepSpeed's
//!   `stage3_prefetch_bucket_size`.
//! * Gradients: none exist when backward starts (`zero_grad(set_to_none=True)`,
//!   the default since torch 2.0) unless they accumulate over micro-batches
//!   or live in Megatron's persistent `main_grad` buffers
//!   (`megatron/core/distributed/param_and_grad_buffer.py`), which
//!   `zero_grad` zeroes in place rather than frees.
//! * ZeRO-2/3 and FSDP reduce-scatter each module's gradient and keep a
//!   shard; FSDP copies the gradient into a reduce-scatter input in the
//!   reduce dtype first (`foreach_reduce` in
//!   `torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py`).
//! * DeepSpeed reduces gradients through a bucket of `reduce_bucket_size`
//!   elements (default 500,000,000, `deepspeed/runtime/zero/config.py`), and
//!   at the step copies its half-precision gradient partition to fp32
//!   (`single_partition_of_fp32_groups[i].grad` in `stage_1_and_2.py`; per
//!   `sub_group_size` of 1e9 elements in `stage3.py`).
//! * Offloaded optimizers step on the host: no step temporaries on the device.

use super::device::DeviceMemory;
use super::setup::Setup;
use crate::activation::Schedule;
use crate::architecture::Implementation;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::model::{Model, Quantization};
use crate::parallel::{Framework, Init, Offload};
use crate::timeline::torchtune_setup::{MOST_LINEARS, TorchtuneSetup};
use crate::timeline::{Gradients, Load, OptimizerStep, Residents, StepPlan, UnitInit};
use crate::units::{Bytes, Count};

/// DeepSpeed's default `reduce_bucket_size`, in elements.
pub const DEEPSPEED_REDUCE_BUCKET: u64 = 500_000_000;

/// DeepSpeed ZeRO-3's default `sub_group_size`, in elements: the step
/// converts one sub-group's gradients to fp32 at a time.
const DEEPSPEED_SUB_GROUP: u64 = 1_000_000_000;

const WHAT: &str = "the step plan";

/// FSDP1's per-unit initialization holds a unit's moved parameters and
/// their flat concatenation at once (`FlatParamHandle`'s `torch.cat`).
const FLATTENED_COPIES: u64 = 2;

/// Whether `model` carries LoRA adapters (FSDP1 wraps each as its own unit).
pub(crate) fn has_adapters(model: &Model) -> bool {
    model.tensors.iter().any(|t| t.name.contains(".lora_A."))
}

/// The init mode the step uses: the one given, or the framework's default.
pub fn init_mode(setup: &Setup) -> Init {
    setup.step.init.unwrap_or_else(|| {
        Init::default_for(setup.parallelism.framework, setup.step.implementation)
    })
}

/// The plan of `device`'s step under `setup`, with `activations` when a
/// micro-batch is given.
pub fn plan<'a>(
    model: &Model,
    setup: &Setup,
    device: &'a DeviceMemory,
    activations: Option<&'a Schedule>,
) -> Result<StepPlan<'a>> {
    let parallelism = setup.parallelism;
    let framework = parallelism.framework;
    let zero = parallelism.zero;
    let memory = &device.memory;
    let gathers = zero.shards_weights() && model.shapes_known;
    // FSDP1 builds each wrapped unit's flat parameter in turn, whichever way
    // the weights reach the device (`UnitInit`).
    let fsdp1_units = framework == Framework::Fsdp1 && gathers;
    let load = match (init_mode(setup), zero.shards_weights()) {
        (Init::EveryRank, true) if fsdp1_units => Load {
            units: Some(UnitInit::Resident),
            ..Load::default()
        },
        (Init::Rank0, true) if fsdp1_units => Load {
            units: Some(UnitInit::Broadcast),
            ..Load::default()
        },
        (_, true) if fsdp1_units => Load {
            units: Some(UnitInit::Materialized),
            ..Load::default()
        },
        (Init::EveryRank, true) => Load {
            whole_model: device.unsharded_weights,
            ..Load::default()
        },
        (Init::Rank0, true) => Load {
            whole_model: Bytes::ZERO,
            broadcast_module: device.largest_module_weights,
            ..Load::default()
        },
        (Init::PerUnit, true) => Load {
            unit_flattened: device
                .largest_module_weights
                .times(FLATTENED_COPIES, WHAT)?,
            ..Load::default()
        },
        _ => Load::default(),
    };
    let load = Load {
        torchtune: torchtune_setup(model, setup, device)?,
        ..load
    };
    let produced = device
        .modules
        .iter()
        .try_fold(Bytes::ZERO, |sum, m| sum.add(m.gradient, WHAT))?;
    let reduce_bucket = if framework == Framework::DeepSpeed && parallelism.data_and_context() > 1 {
        let elements = setup
            .step
            .reduce_bucket_size
            .unwrap_or(DEEPSPEED_REDUCE_BUCKET);
        setup
            .precision
            .gradients
            .size_of(Count(elements))?
            .min(produced)
    } else {
        Bytes::ZERO
    };
    let gradient_partition = if framework == Framework::DeepSpeed
        && zero.shards_optimizer()
        && setup.precision.master_weights.is_some()
        && setup.precision.gradients != DType::Fp32
        && parallelism.offload == Offload::None
    {
        let partition = device.trainable_partition.0;
        let elements = if zero.shards_weights() {
            partition.min(DEEPSPEED_SUB_GROUP)
        } else {
            partition
        };
        DType::Fp32.size_of(Count(elements))?
    } else {
        Bytes::ZERO
    };
    Ok(StepPlan {
        overhead: setup.overhead,
        residents: Residents {
            weights: memory.weights,
            master_weights: memory.master_weights,
            gradients: Bytes(memory.gradients.0.saturating_sub(device.kept_gradients.0)),
            kept_gradients: device.kept_gradients,
            optimizer_states: memory.optimizer_states,
        },
        modules: &device.modules,
        gathers,
        prefetch: true,
        root_kept: fsdp1_units,
        late_layer_prefetch: fsdp1_units && has_adapters(model),
        limit_all_gathers: fsdp1_units,
        activations,
        load,
        gradients: Gradients {
            resident_from_start: framework == Framework::Megatron
                || setup.step.grad_accumulation > 1,
            sharded: zero.shards_gradients(),
            fused_update: setup.steps_in_backward(),
            reduce_bucket,
            freed_after_step: framework != Framework::Megatron,
        },
        optimizer: OptimizerStep {
            // Stepped inside backward, the temporaries come with each
            // gradient (`Module::step_temporaries`), not in the optimizer phase.
            temporaries: if setup.steps_in_backward() {
                Bytes::ZERO
            } else {
                device.transients.optimizer_step
            },
            gradient_partition,
        },
        allocator: setup.step.allocator,
        granularity: DType::Fp32
            .size_of(device.largest_tensor)?
            .max(activations.map_or(Bytes::ZERO, |a| a.widest_tensor)),
    })
}

/// Whether the step is preceded by torchtune's QLoRA setup under torchao
/// 0.1: `--implementation torchtune` with weights stored as
/// `nf4-torchao-0.1`, the whole model on one device (no weight sharding,
/// no pipeline). The estimate's notes say so when it is.
pub(super) fn replays_torchtune_setup(model: &Model, setup: &Setup) -> bool {
    setup.step.implementation == Implementation::Torchtune
        && model
            .tensors
            .iter()
            .any(|t| t.quantization == Some(Quantization::Nf4Torchao01))
        && !setup.parallelism.zero.shards_weights()
        && setup.parallelism.pipeline == 1
}

/// torchtune's QLoRA setup under torchao 0.1 (`--implementation torchtune
/// --quantize nf4-torchao-0.1`, one device holding the whole model): one
/// decoder layer's quantized linears (the first of the inventory's
/// quantized tensors, a layer's worth, in inventory order), every layer
/// built as a copy of it (torchtune's builders deep-copy one layer), the
/// layer's other parameters and those outside the layers from the modules'
/// weights, and the checkpoint's dtype from config.json's `torch_dtype`
/// (bf16 when not given). `None` elsewhere.
fn torchtune_setup(
    model: &Model,
    setup: &Setup,
    device: &DeviceMemory,
) -> Result<Option<TorchtuneSetup>> {
    const WHAT: &str = "torchtune's setup";
    let quantized: Vec<&crate::model::Tensor> = model
        .tensors
        .iter()
        .filter(|t| t.quantization == Some(Quantization::Nf4Torchao01))
        .collect();
    let layers: Vec<&crate::timeline::Module> = device
        .modules
        .iter()
        .filter(|m| m.layer.is_some())
        .collect();
    if !replays_torchtune_setup(model, setup) || layers.is_empty() {
        return Ok(None);
    }
    let per_layer = quantized.len() / layers.len();
    if per_layer == 0 || per_layer > MOST_LINEARS || !quantized.len().is_multiple_of(layers.len()) {
        return Ok(None);
    }
    let mut linears = [0u64; MOST_LINEARS];
    let mut layer_quantized = Bytes::ZERO;
    for (slot, tensor) in linears.iter_mut().zip(&quantized) {
        let elements = tensor.shape.elements();
        *slot = elements.0;
        let rows = tensor.shape.dims().first().copied().unwrap_or(1);
        layer_quantized =
            layer_quantized.add(Quantization::Nf4Torchao01.bytes(elements, rows)?, WHAT)?;
    }
    let first = layers.first().map_or(Bytes::ZERO, |m| m.weights);
    let outside = device
        .modules
        .iter()
        .filter(|m| m.layer.is_none())
        .try_fold(Bytes::ZERO, |sum, m| sum.add(m.weights, WHAT))?;
    let checkpoint = model
        .config
        .as_ref()
        .and_then(|c| c.get("torch_dtype"))
        .and_then(|d| d.as_str())
        .unwrap_or("bfloat16");
    let (checkpoint_element, checkpoint_cast) = match checkpoint {
        "float32" => (4, true),
        "float16" => (2, true),
        _ => (2, false),
    };
    Ok(Some(TorchtuneSetup {
        linears,
        count: per_layer,
        layers: u64::try_from(layers.len()).map_err(|_| Error::overflow(WHAT))?,
        layer_other: Bytes(first.0.saturating_sub(layer_quantized.0)),
        outside,
        checkpoint_element,
        checkpoint_cast,
    }))
}
