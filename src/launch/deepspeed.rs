//! A DeepSpeed config JSON (deepspeed.ai/docs/config-json), alone or named
//! by another config. `"auto"` is what the HF integration fills in from the
//! TrainingArguments (`HfTrainerDeepSpeedConfig.trainer_config_process`):
//! the batch from `per_device_train_batch_size`, bf16/fp16 from the Trainer's
//! own flags, `reduce_bucket_size` as hidden_size².

use serde_json::{Map, Value};

use super::key::{Choice, Effect, Key, Rule, choose, name_of, truth};
use super::{Change, Deferred, Setting};

/// `bf16.enabled`: true is DeepSpeed's bf16 engine, bf16 weights with fp32
/// master weights and states (`mixed-bf16`).
fn bf16(value: &Value, _: &Map<String, Value>) -> Result<Effect, String> {
    half(value, "bf16")
}

fn fp16(value: &Value, _: &Map<String, Value>) -> Result<Effect, String> {
    half(value, "fp16")
}

fn half(value: &Value, dtype: &'static str) -> Result<Effect, String> {
    if name_of(value).is_some_and(|v| v.eq_ignore_ascii_case("auto")) {
        return Ok(Effect::Defer(
            Deferred::Half(dtype),
            "auto: on when the TrainingArguments ask for it",
        ));
    }
    Ok(if truth(value)? {
        Effect::Set(vec![Setting {
            flag: "--precision",
            value: Some(format!("mixed-{dtype}")),
        }])
    } else {
        Effect::Nothing("off".to_string())
    })
}

/// `zero_optimization.offload_optimizer.device`, with `offload_param`.
fn offload_optimizer(value: &Value, document: &Map<String, Value>) -> Result<Effect, String> {
    let params = device(document, "offload_param")?;
    match name_of(value).map(|v| v.to_ascii_lowercase()).as_deref() {
        Some("cpu") => Ok(Effect::Set(vec![Setting {
            flag: "--offload",
            value: Some(
                if params == "cpu" {
                    "optimizer+params"
                } else {
                    "optimizer"
                }
                .to_string(),
            ),
        }])),
        Some("nvme") => Ok(Effect::NotModelled(
            "ZeRO-Infinity's NVMe offload".to_string(),
        )),
        Some("none") | None => Ok(Effect::Nothing("none".to_string())),
        Some(_) => Err("accepted: none, cpu, nvme".to_string()),
    }
}

/// `zero_optimization.offload_param.device`: with the optimizer's, both offloaded.
fn offload_param(value: &Value, document: &Map<String, Value>) -> Result<Effect, String> {
    let optimizer = device(document, "offload_optimizer")?;
    match name_of(value).map(|v| v.to_ascii_lowercase()).as_deref() {
        Some("cpu") if optimizer == "cpu" => Ok(Effect::Nothing(
            "read with offload_optimizer: --offload optimizer+params".to_string(),
        )),
        Some("cpu") => Ok(Effect::NotModelled(
            "parameters offloaded without the optimizer states".to_string(),
        )),
        Some("nvme") => Ok(Effect::NotModelled(
            "ZeRO-Infinity's NVMe offload".to_string(),
        )),
        Some("none") | None => Ok(Effect::Nothing("none".to_string())),
        Some(_) => Err("accepted: none, cpu, nvme".to_string()),
    }
}

/// The device of `zero_optimization.<section>.device`, lowercase, `none` if absent.
fn device(document: &Map<String, Value>, section: &str) -> Result<String, String> {
    Ok(document
        .get("zero_optimization")
        .and_then(|z| z.get(section))
        .and_then(|s| s.get("device"))
        .and_then(name_of)
        .map(|d| d.to_ascii_lowercase())
        .unwrap_or_else(|| "none".to_string()))
}

/// `reduce_bucket_size`: elements, or `"auto"` (hidden_size²).
fn reduce_bucket(value: &Value, _: &Map<String, Value>) -> Result<Effect, String> {
    if name_of(value).is_some_and(|v| v.eq_ignore_ascii_case("auto")) {
        return Ok(Effect::Defer(
            Deferred::HiddenSquared("--reduce-bucket-size"),
            "auto: hidden_size², as the HF integration sets it",
        ));
    }
    let elements = elements(value)?;
    Ok(Effect::Set(vec![Setting {
        flag: "--reduce-bucket-size",
        value: Some(elements.to_string()),
    }]))
}

/// A count of elements, also written `5e8`.
fn elements(value: &Value) -> Result<u64, String> {
    let number = match value {
        Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 1e18)
                .map(|f| f as u64)
        }),
        Value::String(text) => text
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 1e18)
            .map(|f| f as u64),
        _ => None,
    };
    number.ok_or_else(|| "expected a number of elements such as 500000000 or \"auto\"".to_string())
}

/// A ZeRO-3 bucket trainmem does not model by itself: `"auto"` or DeepSpeed's
/// default is what the layer-by-layer gather of the timeline stands for;
/// another value is not modelled.
fn gather_bucket(default: u64) -> impl Fn(&Value) -> Result<Effect, String> {
    move |value| {
        if name_of(value).is_some_and(|v| v.eq_ignore_ascii_case("auto"))
            || elements(value)? == default
        {
            Ok(Effect::Nothing(
                "auto or the default: the timeline gathers one layer at a time".to_string(),
            ))
        } else {
            Ok(Effect::NotModelled(
                "a ZeRO-3 gather bucket other than the default; the timeline gathers one layer at a time"
                    .to_string(),
            ))
        }
    }
}

/// DeepSpeed's defaults for the ZeRO-3 gather knobs (`runtime/zero/config.py`).
const PREFETCH_BUCKET: u64 = 50_000_000;
const MAX_LIVE_PARAMETERS: u64 = 1_000_000_000;
const MAX_REUSE_DISTANCE: u64 = 1_000_000_000;
const PERSISTENCE_THRESHOLD: u64 = 100_000;
const ALLGATHER_BUCKET: u64 = 500_000_000;
const SUB_GROUP: u64 = 1_000_000_000;

/// DeepSpeed's optimizer types (`optimizer.type`).
const OPTIMIZER: &[(&str, Choice)] = &[
    ("Adam", Choice::Set(&[("--optimizer", "adamw")])),
    ("AdamW", Choice::Set(&[("--optimizer", "adamw")])),
    ("Lamb", Choice::Set(&[("--optimizer", "lamb")])),
    ("Lion", Choice::Set(&[("--optimizer", "lion")])),
    ("Adagrad", Choice::Set(&[("--optimizer", "adagrad")])),
    (
        "OneBitAdam",
        Choice::NotModelled("1-bit Adam's error-feedback buffers"),
    ),
    ("ZeroOneAdam", Choice::NotModelled("0/1 Adam's buffers")),
    ("OneBitLamb", Choice::NotModelled("1-bit LAMB's buffers")),
    ("MuAdam", Choice::Set(&[("--optimizer", "adam")])),
    ("MuAdamW", Choice::Set(&[("--optimizer", "adamw")])),
];

/// A switch that changes memory in a way not modelled when on.
fn not_modelled_when_on(why: &'static str) -> impl Fn(&Value) -> Result<Effect, String> {
    move |value| {
        Ok(if truth(value)? {
            Effect::NotModelled(why.to_string())
        } else {
            Effect::Nothing("off".to_string())
        })
    }
}

/// The keys, each with the flags it sets.
pub const KEYS: &[Key] = &[
    Key {
        name: "train_micro_batch_size_per_gpu",
        rule: Rule::Count("--micro-batch"),
    },
    Key {
        name: "gradient_accumulation_steps",
        rule: Rule::Count("--grad-accumulation"),
    },
    Key {
        name: "train_batch_size",
        rule: Rule::Read(|_, _| {
            Ok(Effect::Nothing(
        "micro-batch × accumulation × data-parallel ranks; the micro-batch is what memory sees".to_string(),
    ))
        }),
    },
    Key {
        name: "zero_optimization.stage",
        rule: Rule::Choice(&[
            ("0", Choice::Set(&[("--zero", "0")])),
            ("1", Choice::Set(&[("--zero", "1")])),
            ("2", Choice::Set(&[("--zero", "2")])),
            ("3", Choice::Set(&[("--zero", "3")])),
        ]),
    },
    Key {
        name: "zero_optimization.offload_optimizer.device",
        rule: Rule::Read(offload_optimizer),
    },
    Key {
        name: "zero_optimization.offload_optimizer.pin_memory",
        rule: Rule::NoMemory,
    },
    Key {
        name: "zero_optimization.offload_optimizer.buffer_count",
        rule: Rule::NoMemory,
    },
    Key {
        name: "zero_optimization.offload_optimizer.fast_init",
        rule: Rule::NoMemory,
    },
    Key {
        name: "zero_optimization.offload_optimizer.nvme_path",
        rule: Rule::NoMemory,
    },
    Key {
        name: "zero_optimization.offload_optimizer.ratio",
        rule: Rule::NotModelled("a partial optimizer offload"),
    },
    Key {
        name: "zero_optimization.offload_param.device",
        rule: Rule::Read(offload_param),
    },
    Key {
        name: "zero_optimization.offload_param.pin_memory",
        rule: Rule::NoMemory,
    },
    Key {
        name: "zero_optimization.offload_param.buffer_count",
        rule: Rule::NoMemory,
    },
    Key {
        name: "zero_optimization.offload_param.buffer_size",
        rule: Rule::NoMemory,
    },
    Key {
        name: "zero_optimization.offload_param.max_in_cpu",
        rule: Rule::NoMemory,
    },
    Key {
        name: "zero_optimization.offload_param.nvme_path",
        rule: Rule::NoMemory,
    },
    Key {
        name: "zero_optimization.reduce_bucket_size",
        rule: Rule::Read(reduce_bucket),
    },
    Key {
        name: "zero_optimization.stage3_prefetch_bucket_size",
        rule: Rule::Read(|v, _| gather_bucket(PREFETCH_BUCKET)(v)),
    },
    Key {
        name: "zero_optimization.stage3_max_live_parameters",
        rule: Rule::Read(|v, _| gather_bucket(MAX_LIVE_PARAMETERS)(v)),
    },
    Key {
        name: "zero_optimization.stage3_max_reuse_distance",
        rule: Rule::Read(|v, _| gather_bucket(MAX_REUSE_DISTANCE)(v)),
    },
    Key {
        name: "zero_optimization.stage3_param_persistence_threshold",
        rule: Rule::Read(|v, _| gather_bucket(PERSISTENCE_THRESHOLD)(v)),
    },
    Key {
        name: "zero_optimization.allgather_bucket_size",
        rule: Rule::Read(|v, _| gather_bucket(ALLGATHER_BUCKET)(v)),
    },
    Key {
        name: "zero_optimization.sub_group_size",
        rule: Rule::Read(|v, _| gather_bucket(SUB_GROUP)(v)),
    },
    Key {
        name: "zero_optimization.overlap_comm",
        rule: Rule::NoMemory,
    },
    Key {
        name: "zero_optimization.contiguous_gradients",
        rule: Rule::NoMemory,
    },
    Key {
        name: "zero_optimization.allgather_partitions",
        rule: Rule::NoMemory,
    },
    Key {
        name: "zero_optimization.reduce_scatter",
        rule: Rule::NoMemory,
    },
    Key {
        name: "zero_optimization.round_robin_gradients",
        rule: Rule::NoMemory,
    },
    Key {
        name: "zero_optimization.stage3_gather_16bit_weights_on_model_save",
        rule: Rule::NoMemory,
    },
    Key {
        name: "zero_optimization.gather_16bit_weights_on_model_save",
        rule: Rule::NoMemory,
    },
    Key {
        name: "zero_optimization.load_from_fp32_weights",
        rule: Rule::NoMemory,
    },
    Key {
        name: "zero_optimization.elastic_checkpoint",
        rule: Rule::NoMemory,
    },
    Key {
        name: "zero_optimization.ignore_unused_parameters",
        rule: Rule::NoMemory,
    },
    Key {
        name: "zero_optimization.zero_hpz_partition_size",
        rule: Rule::NotModelled("ZeRO++'s secondary weight partition"),
    },
    Key {
        name: "zero_optimization.zero_quantized_weights",
        rule: Rule::Read(|v, _| not_modelled_when_on("ZeRO++'s quantized weight gathers")(v)),
    },
    Key {
        name: "zero_optimization.zero_quantized_gradients",
        rule: Rule::Read(|v, _| not_modelled_when_on("ZeRO++'s quantized gradients")(v)),
    },
    Key {
        name: "bf16.enabled",
        rule: Rule::Read(bf16),
    },
    Key {
        name: "bfloat16.enabled",
        rule: Rule::Read(bf16),
    },
    Key {
        name: "fp16.enabled",
        rule: Rule::Read(fp16),
    },
    Key {
        name: "fp16.loss_scale",
        rule: Rule::NoMemory,
    },
    Key {
        name: "fp16.loss_scale_window",
        rule: Rule::NoMemory,
    },
    Key {
        name: "fp16.initial_scale_power",
        rule: Rule::NoMemory,
    },
    Key {
        name: "fp16.hysteresis",
        rule: Rule::NoMemory,
    },
    Key {
        name: "fp16.min_loss_scale",
        rule: Rule::NoMemory,
    },
    Key {
        name: "fp16.auto_cast",
        rule: Rule::NoMemory,
    },
    Key {
        name: "data_types.grad_accum_dtype",
        rule: Rule::Choice(&[
            ("fp32", Choice::Set(&[("--grad-dtype", "fp32")])),
            ("bf16", Choice::Set(&[("--grad-dtype", "bf16")])),
            ("fp16", Choice::Set(&[("--grad-dtype", "fp16")])),
        ]),
    },
    Key {
        name: "optimizer.type",
        rule: Rule::Read(|v, _| choose(v, OPTIMIZER)),
    },
    Key {
        name: "optimizer.params",
        rule: Rule::NoMemory,
    },
    Key {
        name: "scheduler",
        rule: Rule::NoMemory,
    },
    Key {
        name: "activation_checkpointing.partition_activations",
        rule: Rule::Read(|v, _| {
            not_modelled_when_on("activations partitioned across model-parallel ranks")(v)
        }),
    },
    Key {
        name: "activation_checkpointing.cpu_checkpointing",
        rule: Rule::Read(|v, _| {
            not_modelled_when_on("checkpointed activations kept in host memory")(v)
        }),
    },
    Key {
        name: "activation_checkpointing.contiguous_memory_optimization",
        rule: Rule::NoMemory,
    },
    Key {
        name: "activation_checkpointing.number_checkpoints",
        rule: Rule::NoMemory,
    },
    Key {
        name: "activation_checkpointing.synchronize_checkpoint_boundary",
        rule: Rule::NoMemory,
    },
    Key {
        name: "activation_checkpointing.profile",
        rule: Rule::NoMemory,
    },
    Key {
        name: "amp",
        rule: Rule::NotModelled("apex AMP"),
    },
    Key {
        name: "gradient_clipping",
        rule: Rule::NoMemory,
    },
    Key {
        name: "steps_per_print",
        rule: Rule::NoMemory,
    },
    Key {
        name: "wall_clock_breakdown",
        rule: Rule::NoMemory,
    },
    Key {
        name: "zero_allow_untested_optimizer",
        rule: Rule::NoMemory,
    },
    Key {
        name: "zero_force_ds_cpu_optimizer",
        rule: Rule::NoMemory,
    },
    Key {
        name: "communication_data_type",
        rule: Rule::NoMemory,
    },
    Key {
        name: "prescale_gradients",
        rule: Rule::NoMemory,
    },
    Key {
        name: "gradient_predivide_factor",
        rule: Rule::NoMemory,
    },
    Key {
        name: "flops_profiler",
        rule: Rule::NoMemory,
    },
    Key {
        name: "tensorboard",
        rule: Rule::NoMemory,
    },
    Key {
        name: "wandb",
        rule: Rule::NoMemory,
    },
    Key {
        name: "csv_monitor",
        rule: Rule::NoMemory,
    },
    Key {
        name: "comms_logger",
        rule: Rule::NoMemory,
    },
    Key {
        name: "checkpoint",
        rule: Rule::NoMemory,
    },
    Key {
        name: "dump_state",
        rule: Rule::NoMemory,
    },
];

/// A change in these keys.
pub fn spell(change: &Change) -> Option<Vec<(String, String)>> {
    let pairs: Vec<(&str, String)> = match change {
        Change::MicroBatch {
            micro_batch,
            accumulation,
        } => vec![
            ("train_micro_batch_size_per_gpu", micro_batch.to_string()),
            ("gradient_accumulation_steps", accumulation.to_string()),
        ],
        Change::Zero(stage) => vec![("zero_optimization.stage", stage.to_string())],
        Change::OffloadOptimizer => {
            vec![(
                "zero_optimization.offload_optimizer.device",
                "cpu".to_string(),
            )]
        }
        Change::OffloadParameters => vec![
            ("zero_optimization.stage", "3".to_string()),
            (
                "zero_optimization.offload_optimizer.device",
                "cpu".to_string(),
            ),
            ("zero_optimization.offload_param.device", "cpu".to_string()),
        ],
        _ => return None,
    };
    Some(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}
