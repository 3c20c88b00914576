//! A litgpt finetune config (the YAML files of litgpt's
//! `config_hub/finetune/`, run by `litgpt finetune_lora --config FILE` or
//! `finetune_full`): the arguments of `litgpt/finetune/*.py` `setup()`
//! and `litgpt/args.py` `TrainArgs`. The model is the checkpoint folder
//! (`checkpoints/meta-llama/Meta-Llama-3.1-8B`), named here as the preset
//! of that repository. `precision` is Lightning Fabric's: `bf16-true` holds
//! everything in bf16 (LoRA adapters too), `bf16-mixed` autocasts over fp32
//! weights. A file with `lora_r` is `finetune_lora`'s (its other LoRA keys
//! default as there: query and value), one without is `finetune_full`'s.
//! On more than one device, `finetune_lora` shards with FSDP2 and
//! `finetune_full` with FSDP, both checkpointing every block.

use serde_json::{Map, Value};

use super::key::{Absent, Choice, Effect, Key, Rule, choose, count, count_of, truth};
use super::{Change, Setting, setting};
use crate::input::PRESETS;

/// `checkpoint_dir`: the preset whose hub repository the folder is named
/// after (`checkpoints/ORG/NAME`, litgpt's download layout), or the one
/// whose name is NAME without `Meta-`, `-Instruct` or `-hf`.
fn checkpoint(value: &Value, _: &Map<String, Value>) -> Result<Effect, String> {
    let folder = value
        .as_str()
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .ok_or(
            "expected the checkpoint folder, such as checkpoints/meta-llama/Meta-Llama-3.1-8B",
        )?;
    let parts: Vec<&str> = folder.trim_end_matches('/').rsplit('/').take(2).collect();
    let name = parts.first().copied().unwrap_or(folder);
    let repository = parts
        .get(1)
        .map(|org| format!("{org}/{name}"))
        .unwrap_or_default();
    let plain = {
        let lower = name.to_ascii_lowercase();
        let lower = lower.strip_prefix("meta-").unwrap_or(&lower).to_string();
        ["-instruct", "-hf"].iter().fold(lower, |n, suffix| {
            n.strip_suffix(suffix).unwrap_or(&n).to_string()
        })
    };
    let preset = PRESETS
        .iter()
        .find(|p| p.hub_id.eq_ignore_ascii_case(&repository))
        .or_else(|| PRESETS.iter().find(|p| p.name == plain));
    Ok(match preset {
        // litgpt's own model code, and its loops (`finetune/full.py`,
        // `finetune/lora.py`: `logits = model(input_ids)` ...
        // `fabric.backward(loss)`) keep the logits referenced through
        // backward, in the loop body itself: the previous micro-batch's until
        // the next forward returns.
        Some(preset) => Effect::Set(vec![
            setting("--model", preset.name),
            setting("--implementation", "litgpt"),
            Setting {
                flag: "--keep-outputs",
                value: None,
            },
            Setting {
                flag: "--carry-outputs",
                value: None,
            },
        ]),
        None => Effect::NotModelled(format!(
            "the checkpoint `{name}` has no preset here; give --model with its config.json"
        )),
    })
}

/// litgpt's modules and the Hugging Face names trainmem uses, with
/// whether `finetune_lora` adapts them by default.
const TARGETS: &[(&str, &str, bool)] = &[
    ("lora_query", "q_proj", true),
    ("lora_key", "k_proj", false),
    ("lora_value", "v_proj", true),
    ("lora_projection", "o_proj", false),
    ("lora_mlp", "gate_proj,up_proj,down_proj", false),
    ("lora_head", "lm_head", false),
];

/// `lora_r` with the `lora_*` switches: LoRA adapters (on litgpt's fused
/// qkv linear, counted as the separate projections, the same parameters),
/// in bf16 under `bf16-true`.
fn lora(value: &Value, document: &Map<String, Value>) -> Result<Effect, String> {
    let rank = count_of("lora_r", value)?;
    let mut targets = Vec::new();
    for (key, names, default) in TARGETS {
        let on = match document.get(*key) {
            Some(v) => truth(v).map_err(|e| format!("{key}: {e}"))?,
            None => *default,
        };
        if on {
            targets.push(*names);
        }
    }
    if targets.is_empty() {
        return Err("lora_r: no lora_* switch is on; accepted: lora_query, lora_key, lora_value, lora_projection, lora_mlp or lora_head true".to_string());
    }
    let mut flags = vec![
        setting("--lora-rank", &rank.to_string()),
        setting("--lora-targets", &targets.join(",")),
    ];
    if precision_of(document) == Some("bf16-true") {
        flags.push(setting("--lora-dtype", "bf16"));
    }
    if let Some(p) = document
        .get("lora_dropout")
        .and_then(Value::as_f64)
        .filter(|p| *p > 0.0)
    {
        flags.push(setting("--lora-dropout", &p.to_string()));
    }
    Ok(Effect::Set(flags))
}

/// The `precision` the file writes.
fn precision_of(document: &Map<String, Value>) -> Option<&str> {
    document
        .get("precision")
        .and_then(Value::as_str)
        .map(str::trim)
}

fn with_lora(_: &Value, _: &Map<String, Value>) -> Result<Effect, String> {
    Ok(Effect::Nothing("read with lora_r".to_string()))
}

fn with_devices(_: &Value, _: &Map<String, Value>) -> Result<Effect, String> {
    Ok(Effect::Nothing("read with devices".to_string()))
}

/// Lightning Fabric's precision names.
const PRECISION: &[(&str, Choice)] = &[
    ("bf16-true", Choice::Set(&[("--precision", "bf16")])),
    ("bf16-mixed", Choice::Set(&[("--precision", "amp-bf16")])),
    ("16-true", Choice::Set(&[("--precision", "fp16")])),
    ("16-mixed", Choice::Set(&[("--precision", "amp-fp16")])),
    ("32-true", Choice::Set(&[("--precision", "fp32")])),
    ("32", Choice::Set(&[("--precision", "fp32")])),
    (
        "transformer-engine",
        Choice::NotModelled("Transformer Engine's fp8 through Fabric"),
    ),
];

/// `quantize`: bitsandbytes' storage of the base's linears.
const QUANTIZE: &[(&str, Choice)] = &[
    ("bnb.nf4", Choice::Set(&[("--quantize", "nf4")])),
    (
        "bnb.nf4-dq",
        Choice::Set(&[("--quantize", "nf4"), ("--double-quant", "on")]),
    ),
    ("bnb.fp4", Choice::Set(&[("--quantize", "fp4")])),
    (
        "bnb.fp4-dq",
        Choice::Set(&[("--quantize", "fp4"), ("--double-quant", "on")]),
    ),
    ("bnb.int8-training", Choice::Set(&[("--quantize", "int8")])),
];

/// `devices` with `num_nodes`: more than one device is FSDP2
/// (`finetune_lora`'s ModelParallelStrategy with `fully_shard`) or FSDP
/// (`finetune_full`'s FSDPStrategy), with every block checkpointed.
fn devices(value: &Value, document: &Map<String, Value>) -> Result<Effect, String> {
    let Some(devices) = count(value)? else {
        return Ok(Effect::Nothing(
            "auto: every visible GPU; give --gpus N".to_string(),
        ));
    };
    let nodes = match document.get("num_nodes") {
        Some(n) => count_of("num_nodes", n)?,
        None => 1,
    };
    let gpus = devices.saturating_mul(nodes);
    if gpus == 1 {
        return Ok(Effect::Nothing("one device".to_string()));
    }
    let framework = if document.contains_key("lora_r") {
        "fsdp2"
    } else {
        "fsdp1"
    };
    Ok(Effect::Set(vec![
        setting("--gpus", &gpus.to_string()),
        setting("--fsdp", "full-shard"),
        setting("--framework", framework),
        setting("--recompute", "full"),
    ]))
}

/// `train.global_batch_size`: accumulation of
/// `global_batch_size // (devices × num_nodes) // micro_batch_size` steps
/// (`TrainArgs.gradient_accumulation_iters`).
fn global_batch(value: &Value, document: &Map<String, Value>) -> Result<Effect, String> {
    let global = count_of("train.global_batch_size", value)?;
    let micro = match document
        .get("train")
        .and_then(|t| t.get("micro_batch_size"))
    {
        Some(m) => count_of("train.micro_batch_size", m)?,
        None => DEFAULT_MICRO_BATCH,
    };
    let gpus = match document.get("devices").map(count) {
        Some(Ok(Some(d))) => d,
        _ => 1,
    };
    let nodes = match document.get("num_nodes").map(count) {
        Some(Ok(Some(n))) => n,
        _ => 1,
    };
    let steps = (global / gpus.saturating_mul(nodes).max(1) / micro).max(1);
    Ok(Effect::Set(vec![setting(
        "--grad-accumulation",
        &steps.to_string(),
    )]))
}

/// litgpt's `TrainArgs.micro_batch_size` default.
const DEFAULT_MICRO_BATCH: u64 = 4;

/// `optimizer`: a class name, or `class_path` with `init_args`. With a
/// bitsandbytes `quantize`, `finetune/lora.py` (0.5.13, lines 218-219)
/// builds `instantiate_bnb_optimizer(optimizer, model.parameters())`
/// instead (`litgpt/utils.py` lines 619-633): AdamW only, as
/// `bitsandbytes.optim.PagedAdamW` with its `init_args`.
fn optimizer(value: &Value, document: &Map<String, Value>) -> Result<Effect, String> {
    let quantized = document
        .get("quantize")
        .and_then(Value::as_str)
        .is_some_and(|q| q.starts_with("bnb."));
    let name = match value {
        Value::String(name) => name.as_str(),
        Value::Object(map) => map
            .get("class_path")
            .and_then(Value::as_str)
            .ok_or("expected class_path, such as torch.optim.AdamW")?,
        _ => return Err("expected an optimizer class, such as AdamW".to_string()),
    };
    let class = name.trim();
    let class = class.strip_prefix("torch.optim.").unwrap_or(class);
    if quantized {
        return if class.contains("AdamW") {
            Ok(Effect::flags(&[("--optimizer", "paged-adamw")]))
        } else {
            Err("a bitsandbytes quantize runs AdamW only (litgpt's instantiate_bnb_optimizer builds bitsandbytes.optim.PagedAdamW)".to_string())
        };
    }
    choose(&Value::String(class.to_string()), OPTIMIZER)
}

/// Optimizer classes, without `torch.optim.`.
const OPTIMIZER: &[(&str, Choice)] = &[
    ("AdamW", Choice::Set(&[("--optimizer", "adamw")])),
    ("Adam", Choice::Set(&[("--optimizer", "adam")])),
    ("SGD", Choice::Set(&[("--optimizer", "sgd")])),
    (
        "bitsandbytes.optim.AdamW8bit",
        Choice::Set(&[("--optimizer", "adamw-8bit")]),
    ),
    (
        "bitsandbytes.optim.PagedAdamW8bit",
        Choice::Set(&[("--optimizer", "paged-adamw-8bit")]),
    ),
    (
        "bitsandbytes.optim.PagedAdamW",
        Choice::Set(&[("--optimizer", "paged-adamw")]),
    ),
];

/// The keys, each with the flags it sets.
pub const KEYS: &[Key] = &[
    Key {
        name: "checkpoint_dir",
        rule: Rule::Read(checkpoint),
    },
    Key {
        name: "precision",
        rule: Rule::Read(|v, _| match v {
            Value::Null => Ok(Effect::Nothing(
                "null: bf16-mixed, litgpt's choice on a GPU with bf16".to_string(),
            )),
            _ => choose(v, PRECISION),
        }),
    },
    Key {
        name: "quantize",
        rule: Rule::Read(|v, _| match v {
            Value::Null => Ok(Effect::Nothing("none".to_string())),
            _ => choose(v, QUANTIZE),
        }),
    },
    Key {
        name: "devices",
        rule: Rule::Read(devices),
    },
    Key {
        name: "num_nodes",
        rule: Rule::Read(with_devices),
    },
    Key {
        name: "lora_r",
        rule: Rule::Read(lora),
    },
    Key {
        name: "lora_alpha",
        rule: Rule::NoMemory,
    },
    Key {
        name: "lora_dropout",
        rule: Rule::Read(with_lora),
    },
    Key {
        name: "lora_query",
        rule: Rule::Read(with_lora),
    },
    Key {
        name: "lora_key",
        rule: Rule::Read(with_lora),
    },
    Key {
        name: "lora_value",
        rule: Rule::Read(with_lora),
    },
    Key {
        name: "lora_projection",
        rule: Rule::Read(with_lora),
    },
    Key {
        name: "lora_mlp",
        rule: Rule::Read(with_lora),
    },
    Key {
        name: "lora_head",
        rule: Rule::Read(with_lora),
    },
    Key {
        name: "train.micro_batch_size",
        rule: Rule::Count("--micro-batch"),
    },
    Key {
        name: "train.global_batch_size",
        rule: Rule::Read(global_batch),
    },
    Key {
        name: "train.max_seq_length",
        rule: Rule::Read(|v, _| {
            match v {
            Value::Null => Ok(Effect::Nothing(
                "null: each batch as long as its longest sample; check answers with the longest that fits"
                    .to_string(),
            )),
            _ => Ok(Effect::Set(vec![Setting {
                flag: "--seq-len",
                value: Some(count(v)?.ok_or("expected a whole number")?.to_string()),
            }])),
        }
        }),
    },
    Key {
        name: "train.tie_embeddings",
        rule: Rule::Read(|v, _| {
            Ok(if truth(v)? {
                Effect::NotModelled("tying the embeddings of a model that does not".to_string())
            } else {
                Effect::Nothing("as the model is".to_string())
            })
        }),
    },
    Key {
        name: "train.*",
        rule: Rule::NoMemory,
    },
    Key {
        name: "optimizer",
        rule: Rule::Read(optimizer),
    },
    Key {
        name: "out_dir",
        rule: Rule::NoMemory,
    },
    Key {
        name: "data",
        rule: Rule::NoMemory,
    },
    Key {
        name: "eval",
        rule: Rule::NoMemory,
    },
    Key {
        name: "log",
        rule: Rule::NoMemory,
    },
    Key {
        name: "logger_name",
        rule: Rule::NoMemory,
    },
    Key {
        name: "seed",
        rule: Rule::NoMemory,
    },
    Key {
        name: "resume",
        rule: Rule::NoMemory,
    },
    Key {
        name: "access_token",
        rule: Rule::NoMemory,
    },
];

/// What litgpt does when a key is absent.
pub const DEFAULTS: &[Absent] = &[Absent {
    key: "precision",
    value: "bf16-mixed",
    flags: &[("--precision", "amp-bf16")],
}];

/// A change in these keys.
pub fn spell(change: &Change) -> Option<Vec<(String, String)>> {
    let pairs: Vec<(&str, String)> = match change {
        // The global batch stays; litgpt accumulates the rest.
        Change::MicroBatch { micro_batch, .. } => {
            vec![("train.micro_batch_size", micro_batch.to_string())]
        }
        Change::Optimizer8bit => {
            vec![("optimizer", "bitsandbytes.optim.PagedAdamW8bit".to_string())]
        }
        Change::Lora => vec![
            ("lora_r", "16".to_string()),
            ("lora_query", "true".to_string()),
            ("lora_key", "true".to_string()),
            ("lora_value", "true".to_string()),
            ("lora_projection", "true".to_string()),
            ("lora_mlp", "true".to_string()),
        ],
        Change::Qlora { .. } => vec![("quantize", "bnb.nf4".to_string())],
        _ => return None,
    };
    Some(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_folders_name_their_presets() {
        for (folder, preset) in [
            ("checkpoints/meta-llama/Meta-Llama-3.1-8B", "llama-3.1-8b"),
            ("checkpoints/meta-llama/Llama-3.2-1B", "llama-3.2-1b"),
            (
                "checkpoints/meta-llama/Meta-Llama-3.1-8B-Instruct",
                "llama-3.1-8b",
            ),
        ] {
            let effect = checkpoint(&Value::from(folder), &Map::new()).unwrap();
            assert_eq!(
                effect,
                Effect::Set(vec![
                    setting("--model", preset),
                    setting("--implementation", "litgpt"),
                    setting("--keep-outputs", ""),
                    setting("--carry-outputs", ""),
                ]),
                "{folder}"
            );
        }
    }
}
