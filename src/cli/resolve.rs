//! Raw command-line strings resolved, once, into validated domain values.

use super::args::{
    CapacityArgs, FineTuneArgs, OutputArgs, ParallelArgs, ReportArgs, TrainingArgs, WorkloadArgs,
};
use crate::activation::{Attention, Platform, Recompute, Workload};
use crate::architecture::Dimensions;
use crate::device::DeviceSpec;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::estimate::{Capacity, Setup};
use crate::finetune::{Bias, FineTune, Lora, Quantization, Targets};
use crate::optimizer::{OPTIMIZERS, Optimizer, Options};
use crate::parallel::{Framework, Offload, Parallelism, ZeroStage};
use crate::precision::Precision;
use crate::render::Format;
use crate::units::{Bytes, Count, UnitSystem};

/// The optimizer, its options and the precision of `--optimizer`,
/// `--optimizer-option`, `--precision` and the dtype overrides.
/// The recipe is first kept the way `parallelism`'s framework keeps it, then
/// the explicit dtype flags override it.
pub fn setup(
    training: &TrainingArgs,
    capacity: Option<Capacity>,
    parallelism: Parallelism,
) -> Result<Setup> {
    let optimizer = Optimizer::find(&training.optimizer)?;
    let mut precision = parallelism
        .framework
        .adjust(*Precision::find(&training.precision)?);
    if let Some(name) = &training.grad_dtype {
        precision.gradients = DType::from_name(name)?;
    }
    if let Some(name) = &training.master_dtype {
        precision.master_weights = match name.trim().to_ascii_lowercase().as_str() {
            "none" => None,
            _ => Some(DType::from_name(name)?),
        };
    }
    if let Some(name) = &training.state_dtype {
        precision.optimizer_states = Some(DType::from_name(name)?);
    }
    let mut setup = Setup::new(optimizer, precision).with_capacity(capacity);
    setup.options = Options::resolve(optimizer, &training.optimizer_options)?;
    setup.parallelism = parallelism;
    Ok(setup)
}

/// The parallel layout of `--gpus`, `--zero`/`--fsdp`, `--offload`, `--tp`,
/// `--pp`, `--ep` and `--framework`.
pub fn parallelism(args: &ParallelArgs) -> Result<Parallelism> {
    let (zero, hybrid) = match (&args.zero, &args.fsdp) {
        (_, Some(strategy)) => ZeroStage::from_fsdp(strategy)?,
        (Some(stage), None) => (ZeroStage::parse(stage)?, false),
        (None, None) => (ZeroStage::None, false),
    };
    let framework = match (&args.framework, &args.fsdp) {
        (Some(name), _) => Framework::parse(name)?,
        (None, Some(_)) => Framework::Fsdp2,
        (None, None) => Framework::DeepSpeed,
    };
    Parallelism {
        gpus: args.gpus,
        nodes: args.nodes,
        zero,
        hybrid,
        offload: Offload::parse(&args.offload)?,
        tensor: args.tp,
        pipeline: args.pp,
        expert: args.ep,
        framework,
    }
    .validated()
}

/// The fine-tuning of `--lora-*`, `--freeze`, `--quantize` and `--double-quant`.
pub fn finetune(args: &FineTuneArgs) -> Result<FineTune> {
    let double_quant = match args.double_quant.trim().to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" => true,
        "off" | "false" | "no" => false,
        other => {
            return Err(Error::InvalidValue {
                what: "--double-quant",
                value: other.to_string(),
                reason: "give `on` or `off`".to_string(),
            });
        }
    };
    let lora = args
        .lora_rank
        .map(|rank| -> Result<Lora> {
            Ok(Lora {
                rank,
                targets: Targets::parse(&args.lora_targets)?,
                bias: Bias::parse(&args.lora_bias)?,
                modules_to_save: args
                    .lora_modules_to_save
                    .as_deref()
                    .map(|list| split(list, "--lora-modules-to-save list"))
                    .transpose()?
                    .unwrap_or_default()
                    .into_iter()
                    .map(str::to_string)
                    .collect(),
                dora: args.lora_dora,
            })
        })
        .transpose()?;
    Ok(FineTune {
        lora,
        freeze: args.freeze.clone(),
        quantize: args
            .quantize
            .as_deref()
            .map(|kind| Quantization::parse(kind, double_quant))
            .transpose()?,
    })
}

/// The default of `--overhead` when activations are estimated.
const DEFAULT_OVERHEAD: &str = "1GiB";

/// The workload of `--micro-batch`, `--seq-len`, `--attention` and
/// `--recompute` (none without a micro-batch), and the overhead added to the peak.
pub fn workload(args: &WorkloadArgs, parallel: &ParallelArgs) -> Result<(Option<Workload>, Bytes)> {
    let attention = Attention::parse(&args.attention)?;
    let recompute = Recompute::parse(&args.recompute)?;
    let (micro_batch, seq_len) = match (args.micro_batch, args.seq_len) {
        (None, None) => {
            let overhead = args
                .overhead
                .as_deref()
                .map(overhead)
                .transpose()?
                .unwrap_or(Bytes::ZERO);
            return Ok((None, overhead));
        }
        (Some(b), Some(s)) => (b, s),
        (Some(_), None) => {
            return Err(missing(
                "--seq-len",
                "activations need --seq-len S with --micro-batch",
            ));
        }
        (None, Some(_)) => {
            return Err(missing(
                "--micro-batch",
                "activations need --micro-batch B with --seq-len",
            ));
        }
    };
    for (flag, value) in [("--micro-batch", micro_batch), ("--seq-len", seq_len)] {
        if value == 0 {
            return Err(Error::InvalidValue {
                what: "workload",
                value: format!("{flag} 0"),
                reason: "must be at least 1".to_string(),
            });
        }
    }
    let workload = Workload {
        micro_batch,
        seq_len,
        attention,
        recompute,
        dtype: crate::dtype::DType::Bf16,
        platform: Platform::Cuda,
        frozen_base: false,
        adapted: Vec::new(),
        lora_rank: 0,
        tensor_parallel: 1,
        sequence_parallel: parallel.sequence_parallel,
        pipeline: 1,
    };
    let overhead = overhead(args.overhead.as_deref().unwrap_or(DEFAULT_OVERHEAD))?;
    Ok((Some(workload), overhead))
}

fn overhead(text: &str) -> Result<Bytes> {
    if text.trim() == "0" {
        return Ok(Bytes::ZERO);
    }
    text.parse()
}

fn missing(what: &'static str, accepted: &str) -> Error {
    Error::Missing {
        what,
        accepted: accepted.to_string(),
    }
}

/// The dimensions of a bare `--params` model from `--layers --hidden --heads
/// --kv-heads --ffn --vocab`, when they are given.
pub fn dimensions(args: &WorkloadArgs) -> Result<Option<Dimensions>> {
    match (args.layers, args.hidden, args.heads, args.ffn, args.vocab) {
        (None, None, None, None, None) if args.kv_heads.is_none() => Ok(None),
        (Some(layers), Some(hidden), Some(heads), Some(ffn), Some(vocab)) => Dimensions::generic(
            layers,
            hidden,
            heads,
            args.kv_heads.unwrap_or(heads),
            ffn,
            vocab,
        )
        .map(Some),
        _ => Err(missing(
            "architecture flags",
            "a bare --params model's architecture needs all of --layers, --hidden, --heads, --ffn and --vocab (--kv-heads optional)",
        )),
    }
}

/// The capacity of `--capacity SIZE` or `--device NAME`, if either is given.
pub fn capacity(args: &CapacityArgs) -> Result<Option<Capacity>> {
    capacity_of(args.capacity.as_deref(), args.device.as_deref())
}

/// The capacity of a size or a device name.
pub fn capacity_of(size: Option<&str>, device: Option<&str>) -> Result<Option<Capacity>> {
    match (size, device) {
        (Some(size), _) => {
            let bytes: Bytes = size.parse()?;
            Ok(Some(Capacity {
                bytes,
                label: spaced(size),
            }))
        }
        (None, Some(name)) => {
            let device = DeviceSpec::find(name)?;
            Ok(Some(Capacity {
                bytes: device.memory(),
                label: format!("{} ({})", device.name, device.memory()),
            }))
        }
        (None, None) => Ok(None),
    }
}

/// The output format of `--format`; a table when none is given.
pub fn format(args: &OutputArgs) -> Result<Format> {
    args.format
        .as_deref()
        .map_or(Ok(Format::Table), Format::parse)
}

/// The output format and units.
pub fn report(args: &ReportArgs, capacity_text: Option<&str>) -> Result<(Format, UnitSystem)> {
    Ok((format(&args.output)?, units(args, capacity_text)?))
}

/// The units of `--units`; binary by default when the capacity was written
/// in binary units (`80GiB`).
pub fn units(args: &ReportArgs, capacity_text: Option<&str>) -> Result<UnitSystem> {
    Ok(
        match args
            .units
            .as_deref()
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("gb" | "decimal") => UnitSystem::Decimal,
            Some("gib" | "binary") => UnitSystem::Binary,
            Some(_) => {
                return Err(Error::UnknownName {
                    kind: "units",
                    name: args.units.clone().unwrap_or_default(),
                    suggestion: None,
                    accepted: "gb (10^9 bytes), gib (2^30 bytes)".to_string(),
                });
            }
            None if capacity_text.is_some_and(|c| c.to_ascii_lowercase().contains("ib")) => {
                UnitSystem::Binary
            }
            None => UnitSystem::Decimal,
        },
    )
}

/// A comma-separated list of parameter counts.
pub fn counts(list: &str) -> Result<Vec<Count>> {
    split(list, "parameter count list")?
        .into_iter()
        .map(str::parse)
        .collect()
}

/// A comma-separated list of optimizers, or `all`.
pub fn optimizers(list: &str) -> Result<Vec<&'static Optimizer>> {
    if list.trim().eq_ignore_ascii_case("all") {
        return Ok(OPTIMIZERS.iter().collect());
    }
    split(list, "optimizer list")?
        .into_iter()
        .map(Optimizer::find)
        .collect()
}

/// `FROM,TO` of `--swap`.
pub fn swap(pair: &str) -> Result<(&'static Optimizer, &'static Optimizer)> {
    match optimizers(pair)?.as_slice() {
        [from, to] => Ok((from, to)),
        _ => Err(Error::InvalidValue {
            what: "swap",
            value: pair.to_string(),
            reason: "give two optimizers as FROM,TO, such as `adam,sgd-momentum`".to_string(),
        }),
    }
}

fn split<'a>(list: &'a str, what: &'static str) -> Result<Vec<&'a str>> {
    let items: Vec<&str> = list.split(',').map(str::trim).collect();
    if items.iter().any(|item| item.is_empty()) {
        return Err(Error::InvalidValue {
            what,
            value: list.to_string(),
            reason: "an item is empty; separate items with single commas".to_string(),
        });
    }
    Ok(items)
}

/// `80GB` written as `80 GB`, the way the reports print sizes.
fn spaced(size: &str) -> String {
    let size = size.trim();
    match size.find(|c: char| c.is_ascii_alphabetic() && c != 'e' && c != 'E') {
        Some(at) => format!("{} {}", size[..at].trim(), size[at..].trim()),
        None => size.to_string(),
    }
}
