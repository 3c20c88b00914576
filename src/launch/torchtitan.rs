//! A torchtitan job config (the TOML files of torchtitan's
//! `torchtitan/models/*/train_configs/`, run by `torchrun ... -m
//! torchtitan.train --job.config_file FILE`). Its keys and defaults are
//! `torchtitan/config/job_config.py`. The model is `[model]` `name` and
//! `flavor` (`llama3`, `8B`), named here as the preset of the same
//! architecture. torchtitan shards with FSDP2 (`data_parallel_shard_degree`,
//! -1: every rank the other degrees leave), whose MixedPrecisionPolicy
//! keeps fp32 sharded weights and computes in `mixed_precision_param`
//! (bf16); without FSDP the model trains in fp32. Tensor parallelism comes
//! with sequence parallelism on the norms (`parallelize_llama`).

use serde_json::{Map, Value};

use super::key::{Absent, Choice, Effect, Key, Rule, choose, count, name_of, truth};
use super::{Change, setting};

/// `(model.name, model.flavor)` and the preset of each.
const FLAVORS: &[(&str, &str, &str)] = &[
    ("llama3", "8B", "llama-3.1-8b"),
    ("llama3", "70B", "llama-3.1-70b"),
    ("llama3", "405B", "llama-3.1-405b"),
    ("llama2", "7B", "llama-2-7b"),
    ("llama2", "13B", "llama-2-13b"),
    ("llama2", "70B", "llama-2-70b"),
    ("qwen3", "0.6B", "qwen3-0.6b"),
    ("qwen3", "1.7B", "qwen3-1.7b"),
    ("qwen3", "4B", "qwen3-4b"),
    ("qwen3", "8B", "qwen3-8b"),
    ("qwen3", "14B", "qwen3-14b"),
    ("qwen3", "32B", "qwen3-32b"),
    ("qwen3", "30B-A3B", "qwen3-30b-a3b"),
    ("qwen3", "235B-A22B", "qwen3-235b-a22b"),
    ("deepseek_v3", "671B", "deepseek-v3"),
];

/// torchtitan's default flavor (`[model] flavor = "debugmodel"`).
const DEFAULT_FLAVOR: &str = "debugmodel";

/// `model.name` with `model.flavor`: the preset.
fn model(value: &Value, document: &Map<String, Value>) -> Result<Effect, String> {
    let name = value
        .as_str()
        .ok_or("expected a model name such as llama3")?;
    let flavor = match document.get("model").and_then(|m| m.get("flavor")) {
        Some(flavor) => flavor
            .as_str()
            .ok_or("model.flavor: expected a flavor such as 8B")?
            .to_string(),
        None => DEFAULT_FLAVOR.to_string(),
    };
    match FLAVORS
        .iter()
        .find(|(n, f, _)| n.eq_ignore_ascii_case(name) && f.eq_ignore_ascii_case(&flavor))
    {
        // torchtitan's own model code; its train step deletes the logits
        // before backward (`del pred` in `train.py`), so they are not kept.
        Some((_, _, preset)) => Ok(Effect::Set(vec![
            setting("--model", preset),
            setting("--implementation", "torchtitan"),
        ])),
        None => Ok(Effect::NotModelled(format!(
            "the flavor `{flavor}` of `{name}` has no preset here; give --model with its config.json"
        ))),
    }
}

/// `model.converters`: torchao's float8 linears, by the recipe of
/// `quantize.linear.float8.recipe_name` (or the older `float8.recipe_name`),
/// tensorwise by default.
fn converters(value: &Value, document: &Map<String, Value>) -> Result<Effect, String> {
    let names: Vec<String> = match value {
        Value::String(text) => text.split(',').map(|s| s.trim().to_string()).collect(),
        Value::Array(items) => items
            .iter()
            .map(|item| item.as_str().map(|s| s.trim().to_string()))
            .collect::<Option<_>>()
            .ok_or("expected a list of converter names")?,
        _ => return Err("expected a list of converter names".to_string()),
    };
    let names: Vec<String> = names.into_iter().filter(|n| !n.is_empty()).collect();
    if names.is_empty() {
        return Ok(Effect::Nothing("none".to_string()));
    }
    let float8 = |name: &str| name == "float8" || name == "quantize.linear.float8";
    if let Some(other) = names.iter().find(|n| !float8(n)) {
        return Ok(Effect::NotModelled(format!("the converter `{other}`")));
    }
    let recipe = float8_section(document)
        .and_then(|section| section.get("recipe_name"))
        .and_then(name_of);
    match recipe.as_deref() {
        None | Some("tensorwise") => Ok(Effect::flags(&[("--precision", "fp8-tensorwise")])),
        Some("rowwise") => Ok(Effect::flags(&[("--precision", "fp8-rowwise")])),
        Some(other) => Ok(Effect::NotModelled(format!("the float8 recipe `{other}`"))),
    }
}

/// The float8 options: `[quantize.linear.float8]`, or `[float8]` in older configs.
fn float8_section(document: &Map<String, Value>) -> Option<&Map<String, Value>> {
    document
        .get("quantize")
        .and_then(|q| q.get("linear"))
        .and_then(|l| l.get("float8"))
        .or_else(|| document.get("float8"))
        .and_then(Value::as_object)
}

/// Whether `model.converters` turns float8 on, which sets the precision.
fn float8_on(document: &Map<String, Value>) -> bool {
    let Some(value) = document.get("model").and_then(|m| m.get("converters")) else {
        return false;
    };
    let names: Vec<&str> = match value {
        Value::String(text) => text.split(',').map(str::trim).collect(),
        Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    names
        .iter()
        .any(|n| *n == "float8" || *n == "quantize.linear.float8")
}

/// A degree of `[parallelism]`: a whole number ≥ 1, or -1 (the rest of
/// the ranks) where torchtitan accepts it; `None` for -1.
fn degree(key: &str, value: &Value) -> Result<Option<u64>, String> {
    if value.as_i64() == Some(-1) {
        return Ok(None);
    }
    match count(value) {
        Ok(Some(n)) => Ok(Some(n)),
        _ => Err(format!("{key}: expected a whole number ≥ 1, or -1")),
    }
}

/// One degree of `[parallelism]`, 1 when absent.
fn degree_of(document: &Map<String, Value>, name: &str) -> Result<u64, String> {
    match document.get("parallelism").and_then(|p| p.get(name)) {
        Some(value) => match count(value) {
            Ok(Some(n)) => Ok(n),
            _ => Err(format!("parallelism.{name}: expected a whole number ≥ 1")),
        },
        None => Ok(1),
    }
}

/// `parallelism.data_parallel_shard_degree`, with
/// `data_parallel_replicate_degree` and `fsdp_reshard_after_forward`:
/// FSDP2 over the shard ranks (hybrid with replicas), or none at 1, when
/// torchtitan trains in fp32 (`mixed_precision_param` is FSDP's policy).
/// At -1 the launcher's world size decides the shard degree; priced on
/// the fewest GPUs the other degrees need, tp × pp × cp.
fn data_parallel_shard(value: &Value, document: &Map<String, Value>) -> Result<Effect, String> {
    let shard = degree("parallelism.data_parallel_shard_degree", value)?;
    let replicate = degree_of(document, "data_parallel_replicate_degree")?;
    let others = [
        "tensor_parallel_degree",
        "pipeline_parallel_degree",
        "context_parallel_degree",
    ]
    .iter()
    .try_fold(1u64, |product, name| {
        degree_of(document, name).map(|d| product.saturating_mul(d))
    })?;
    let reshard = document
        .get("parallelism")
        .and_then(|p| p.get("fsdp_reshard_after_forward"))
        .and_then(name_of)
        .unwrap_or_else(|| "default".to_string());
    let strategy = match (reshard.as_str(), replicate > 1) {
        (_, true) => "hybrid-shard",
        ("never", false) => "shard-grad-op",
        ("default" | "always", false) => "full-shard",
        _ => {
            return Err(
                "parallelism.fsdp_reshard_after_forward: accepted: default, always, never"
                    .to_string(),
            );
        }
    };
    let fsdp = |gpus: Option<u64>| {
        let mut flags = vec![setting("--fsdp", strategy), setting("--framework", "fsdp2")];
        if let Some(gpus) = gpus.filter(|g| *g > 1) {
            flags.push(setting("--gpus", &gpus.to_string()));
        }
        flags
    };
    Ok(match shard {
        Some(1) if replicate == 1 => Effect::Set(vec![setting("--precision", "fp32")]),
        Some(shard) => Effect::Set(fsdp(Some(
            shard.saturating_mul(replicate).saturating_mul(others),
        ))),
        None => Effect::Set(fsdp(Some(replicate.saturating_mul(others)))),
    })
}

/// `parallelism.tensor_parallel_degree`: tensor parallelism, with
/// sequence parallelism on the norms as torchtitan applies it.
fn tensor_parallel(value: &Value, _: &Map<String, Value>) -> Result<Effect, String> {
    match count(value) {
        Ok(Some(1)) => Ok(Effect::Nothing("no tensor parallelism".to_string())),
        Ok(Some(n)) => Ok(Effect::Set(vec![
            setting("--tp", &n.to_string()),
            setting("--sequence-parallel", ""),
        ])),
        _ => Err("expected a whole number ≥ 1".to_string()),
    }
}

/// `training.mixed_precision_param`: FSDP2's compute dtype over fp32
/// sharded weights; float8 linears (`model.converters`) set the precision.
fn mixed_precision(value: &Value, document: &Map<String, Value>) -> Result<Effect, String> {
    if float8_on(document) {
        return Ok(Effect::Nothing("read with model.converters".to_string()));
    }
    let shard = document
        .get("parallelism")
        .and_then(|p| p.get("data_parallel_shard_degree"))
        .and_then(Value::as_i64);
    if shard == Some(1) {
        return Ok(Effect::Nothing(
            "FSDP is off (data_parallel_shard_degree = 1): fp32, as torchtitan trains without it"
                .to_string(),
        ));
    }
    choose(
        value,
        &[
            ("bfloat16", Choice::Set(&[("--precision", "mixed-bf16")])),
            ("float32", Choice::Set(&[("--precision", "fp32")])),
        ],
    )
}

/// `activation_checkpoint.mode` with `selective_ac_option`: full
/// checkpointing, every N-th block (an integer option), or the per-op
/// policy (`op`).
fn activation_checkpoint(value: &Value, document: &Map<String, Value>) -> Result<Effect, String> {
    let mode = name_of(value)
        .ok_or("accepted: none, selective, full, memory_budget")?
        .to_ascii_lowercase();
    match mode.as_str() {
        "none" => Ok(Effect::flags(&[("--recompute", "none")])),
        "full" => Ok(Effect::flags(&[("--recompute", "full")])),
        "selective" => {
            let option = document
                .get("activation_checkpoint")
                .and_then(|a| a.get("selective_ac_option"))
                .and_then(name_of)
                .unwrap_or_else(|| SELECTIVE_EVERY.to_string());
            selective(&option)
        }
        "memory_budget" => Ok(Effect::NotModelled(
            "torch.compile's memory-budget recomputation".to_string(),
        )),
        _ => Err("accepted: none, selective, full, memory_budget".to_string()),
    }
}

/// `selective_ac_option`: `op`, or checkpoint every N-th block.
fn selective(option: &str) -> Result<Effect, String> {
    if option.eq_ignore_ascii_case("op") {
        return Ok(Effect::flags(&[("--recompute", "op")]));
    }
    match option.trim().parse::<u64>() {
        Ok(1) => Ok(Effect::flags(&[("--recompute", "full")])),
        Ok(n) if n > 1 => Ok(Effect::Set(vec![
            setting("--recompute", "full"),
            setting("--recompute-every", &n.to_string()),
        ])),
        _ => Err(
            "activation_checkpoint.selective_ac_option: expected op or a whole number ≥ 1"
                .to_string(),
        ),
    }
}

/// torchtitan's default `selective_ac_option`: every second block.
const SELECTIVE_EVERY: &str = "2";

/// A switch whose `true` changes memory in a way trainmem does not model.
fn not_modelled_on(value: &Value, why: &str) -> Result<Effect, String> {
    Ok(if truth(value)? {
        Effect::NotModelled(why.to_string())
    } else {
        Effect::Nothing("off".to_string())
    })
}

/// `filter_fqns`: the linears kept in bf16; trainmem keeps the output layer so.
fn filter_fqns(value: &Value, _: &Map<String, Value>) -> Result<Effect, String> {
    let names: Vec<&str> = match value {
        Value::String(text) => text.split(',').map(str::trim).collect(),
        Value::Array(items) => items
            .iter()
            .map(Value::as_str)
            .collect::<Option<_>>()
            .ok_or("expected a list of module names")?,
        _ => return Err("expected a list of module names".to_string()),
    };
    if names == ["output"] {
        Ok(Effect::Nothing(
            "the output layer stays bf16, as trainmem prices float8".to_string(),
        ))
    } else {
        Ok(Effect::NotModelled(
            "float8 linears other than all but the output layer".to_string(),
        ))
    }
}

/// `training.global_batch_size`: the accumulation steps, when every
/// data-parallel degree is written: global / (local × shard × replicate).
fn global_batch(value: &Value, document: &Map<String, Value>) -> Result<Effect, String> {
    if value.as_i64() == Some(-1) {
        return Ok(Effect::Nothing(
            "-1: local_batch_size on every data-parallel rank, no accumulation".to_string(),
        ));
    }
    let global = count(value)
        .ok()
        .flatten()
        .ok_or("expected a whole number ≥ 1, or -1")?;
    let training = document.get("training");
    let local = training
        .and_then(|t| t.get("local_batch_size").or_else(|| t.get("batch_size")))
        .and_then(|v| count(v).ok().flatten())
        .unwrap_or(DEFAULT_LOCAL_BATCH);
    let shard = document
        .get("parallelism")
        .and_then(|p| p.get("data_parallel_shard_degree"))
        .and_then(|v| count(v).ok().flatten());
    let replicate = degree_of(document, "data_parallel_replicate_degree")?;
    match shard.and_then(|s| local.checked_mul(s)?.checked_mul(replicate)) {
        Some(per_step) if per_step > 0 && global % per_step == 0 => Ok(Effect::Set(vec![
            setting("--grad-accumulation", &(global / per_step).to_string()),
        ])),
        Some(_) => Err(
            "training.global_batch_size: expected a multiple of local_batch_size × the data-parallel degrees"
                .to_string(),
        ),
        None => Ok(Effect::Nothing(
            "the accumulation steps follow from the launcher's GPU count".to_string(),
        )),
    }
}

/// torchtitan's default `training.local_batch_size`.
const DEFAULT_LOCAL_BATCH: u64 = 8;

/// Read with `parallelism.data_parallel_shard_degree`.
fn with_shard(_: &Value, _: &Map<String, Value>) -> Result<Effect, String> {
    Ok(Effect::Nothing(
        "read with parallelism.data_parallel_shard_degree".to_string(),
    ))
}

/// Read with `activation_checkpoint.mode`.
fn with_mode(_: &Value, _: &Map<String, Value>) -> Result<Effect, String> {
    Ok(Effect::Nothing(
        "read with activation_checkpoint.mode".to_string(),
    ))
}

/// Read with `model.converters`.
fn with_converters(_: &Value, _: &Map<String, Value>) -> Result<Effect, String> {
    Ok(Effect::Nothing("read with model.converters".to_string()))
}

/// The keys, each with the flags it sets.
pub const KEYS: &[Key] = &[
    Key {
        name: "model.name",
        rule: Rule::Read(model),
    },
    Key {
        name: "model.flavor",
        rule: Rule::Read(|_, _| Ok(Effect::Nothing("read with model.name".to_string()))),
    },
    Key {
        name: "model.converters",
        rule: Rule::Read(converters),
    },
    Key {
        name: "model.tokenizer_path",
        rule: Rule::NoMemory,
    },
    Key {
        name: "model.hf_assets_path",
        rule: Rule::NoMemory,
    },
    Key {
        name: "model.print_after_conversion",
        rule: Rule::NoMemory,
    },
    Key {
        name: "training.local_batch_size",
        rule: Rule::Count("--micro-batch"),
    },
    Key {
        name: "training.batch_size",
        rule: Rule::Count("--micro-batch"),
    },
    Key {
        name: "training.global_batch_size",
        rule: Rule::Read(global_batch),
    },
    Key {
        name: "training.seq_len",
        rule: Rule::Count("--seq-len"),
    },
    Key {
        name: "training.mixed_precision_param",
        rule: Rule::Read(mixed_precision),
    },
    Key {
        name: "training.mixed_precision_reduce",
        rule: Rule::NoMemory,
    },
    Key {
        name: "training.enable_cpu_offload",
        rule: Rule::Read(|v, _| {
            Ok(if truth(v)? {
                Effect::flags(&[("--offload", "optimizer+params")])
            } else {
                Effect::Nothing("off".to_string())
            })
        }),
    },
    Key {
        name: "training.compile",
        rule: Rule::Read(super::training_arguments::compile),
    },
    Key {
        name: "training.max_norm",
        rule: Rule::NoMemory,
    },
    Key {
        name: "training.steps",
        rule: Rule::NoMemory,
    },
    Key {
        name: "training.dataset",
        rule: Rule::NoMemory,
    },
    Key {
        name: "training.dataset_path",
        rule: Rule::NoMemory,
    },
    Key {
        name: "training.warmup_steps",
        rule: Rule::NoMemory,
    },
    Key {
        name: "training.seed",
        rule: Rule::NoMemory,
    },
    Key {
        name: "training.deterministic",
        rule: Rule::NoMemory,
    },
    Key {
        name: "training.gc_freq",
        rule: Rule::NoMemory,
    },
    Key {
        name: "parallelism.data_parallel_shard_degree",
        rule: Rule::Read(data_parallel_shard),
    },
    Key {
        name: "parallelism.data_parallel_replicate_degree",
        rule: Rule::Read(with_shard),
    },
    Key {
        name: "parallelism.fsdp_reshard_after_forward",
        rule: Rule::Read(with_shard),
    },
    Key {
        name: "parallelism.tensor_parallel_degree",
        rule: Rule::Read(tensor_parallel),
    },
    Key {
        name: "parallelism.pipeline_parallel_degree",
        rule: Rule::Count("--pp"),
    },
    Key {
        name: "parallelism.context_parallel_degree",
        rule: Rule::Count("--cp"),
    },
    Key {
        name: "parallelism.expert_parallel_degree",
        rule: Rule::Count("--ep"),
    },
    Key {
        name: "parallelism.enable_async_tensor_parallel",
        rule: Rule::Read(|v, _| {
            not_modelled_on(v, "async tensor parallelism's symmetric-memory buffers")
        }),
    },
    Key {
        name: "parallelism.pipeline_parallel_schedule",
        rule: Rule::Read(|_, document| {
            Ok(if degree_of(document, "pipeline_parallel_degree")? > 1 {
                Effect::NotModelled("the pipeline schedule's micro-batches in flight".to_string())
            } else {
                Effect::Nothing("no pipeline".to_string())
            })
        }),
    },
    Key {
        name: "parallelism.disable_loss_parallel",
        rule: Rule::NoMemory,
    },
    Key {
        name: "activation_checkpoint.mode",
        rule: Rule::Read(activation_checkpoint),
    },
    Key {
        name: "activation_checkpoint.selective_ac_option",
        rule: Rule::Read(with_mode),
    },
    Key {
        name: "optimizer.name",
        rule: Rule::Choice(&[
            ("AdamW", Choice::Set(&[("--optimizer", "adamw")])),
            ("Adam", Choice::Set(&[("--optimizer", "adam")])),
        ]),
    },
    Key {
        name: "optimizer.implementation",
        rule: Rule::Choice(&[
            (
                "fused",
                Choice::Set(&[("--optimizer-option", "fused=true")]),
            ),
            ("foreach", Choice::Nothing("PyTorch's default, priced")),
            (
                "for-loop",
                Choice::NotModelled("the for-loop step's smaller temporaries"),
            ),
        ]),
    },
    Key {
        name: "optimizer.early_step_in_backward",
        rule: Rule::Read(|v, _| {
            Ok(if truth(v)? {
                Effect::flags(&[("--optimizer-in-backward", "")])
            } else {
                Effect::Nothing("off".to_string())
            })
        }),
    },
    Key {
        name: "optimizer.lr",
        rule: Rule::NoMemory,
    },
    Key {
        name: "optimizer.eps",
        rule: Rule::NoMemory,
    },
    Key {
        name: "optimizer.weight_decay",
        rule: Rule::NoMemory,
    },
    Key {
        name: "optimizer.beta1",
        rule: Rule::NoMemory,
    },
    Key {
        name: "optimizer.beta2",
        rule: Rule::NoMemory,
    },
    Key {
        name: "compile.enable",
        rule: Rule::Read(super::training_arguments::compile),
    },
    Key {
        name: "compile.components",
        rule: Rule::NoMemory,
    },
    Key {
        name: "compile.backend",
        rule: Rule::NoMemory,
    },
    Key {
        name: "quantize.linear.float8.recipe_name",
        rule: Rule::Read(with_converters),
    },
    Key {
        name: "quantize.linear.float8.enable_fsdp_float8_all_gather",
        rule: Rule::Read(|v, _| not_modelled_on(v, "FSDP2's float8 all-gather")),
    },
    Key {
        name: "quantize.linear.float8.precompute_float8_dynamic_scale_for_fsdp",
        rule: Rule::NoMemory,
    },
    Key {
        name: "quantize.linear.float8.filter_fqns",
        rule: Rule::Read(filter_fqns),
    },
    Key {
        name: "float8.recipe_name",
        rule: Rule::Read(with_converters),
    },
    Key {
        name: "float8.enable_fsdp_float8_all_gather",
        rule: Rule::Read(|v, _| not_modelled_on(v, "FSDP2's float8 all-gather")),
    },
    Key {
        name: "float8.precompute_float8_dynamic_scale_for_fsdp",
        rule: Rule::NoMemory,
    },
    Key {
        name: "float8.filter_fqns",
        rule: Rule::Read(filter_fqns),
    },
    Key {
        name: "job.*",
        rule: Rule::NoMemory,
    },
    Key {
        name: "profiling.*",
        rule: Rule::NoMemory,
    },
    Key {
        name: "metrics.*",
        rule: Rule::NoMemory,
    },
    Key {
        name: "lr_scheduler.*",
        rule: Rule::NoMemory,
    },
    Key {
        name: "checkpoint.*",
        rule: Rule::NoMemory,
    },
    Key {
        name: "validation.*",
        rule: Rule::NoMemory,
    },
    Key {
        name: "comm.*",
        rule: Rule::NoMemory,
    },
];

/// What torchtitan does when a key is absent (`job_config.py`).
pub const DEFAULTS: &[Absent] = &[
    Absent {
        key: "training.local_batch_size",
        value: "8",
        flags: &[("--micro-batch", "8")],
    },
    Absent {
        key: "training.seq_len",
        value: "2048",
        flags: &[("--seq-len", "2048")],
    },
    Absent {
        key: "parallelism.data_parallel_shard_degree",
        value: "-1",
        flags: &[("--fsdp", "full-shard"), ("--framework", "fsdp2")],
    },
    Absent {
        key: "training.mixed_precision_param",
        value: "bfloat16",
        flags: &[("--precision", "mixed-bf16")],
    },
    Absent {
        key: "activation_checkpoint.mode",
        value: "selective (every 2nd block)",
        flags: &[("--recompute", "full"), ("--recompute-every", "2")],
    },
    Absent {
        key: "optimizer.name",
        value: "AdamW",
        flags: &[("--optimizer", "adamw")],
    },
    Absent {
        key: "optimizer.implementation",
        value: "fused",
        flags: &[("--optimizer-option", "fused=true")],
    },
];

/// A change in these keys, as TOML values.
pub fn spell(change: &Change) -> Option<Vec<(String, String)>> {
    let pairs: Vec<(&str, String)> = match change {
        Change::MicroBatch { micro_batch, .. } => {
            vec![("training.local_batch_size", micro_batch.to_string())]
        }
        Change::Recompute => vec![("activation_checkpoint.mode", "\"full\"".to_string())],
        Change::FullShard => vec![(
            "parallelism.fsdp_reshard_after_forward",
            "\"always\"".to_string(),
        )],
        _ => return None,
    };
    Some(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}
