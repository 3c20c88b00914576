//! A torchtune recipe config (the YAML files of torchtune's `recipes/configs`,
//! run by `tune run RECIPE --config FILE`). The model is its builder,
//! `model._component_` (`torchtune.models.llama3_1.lora_llama3_1_8b`), named
//! here as the preset of the same architecture; torchtune builds it in
//! `dtype` and keeps LoRA adapters in that dtype too. `qlora_` builders
//! quantize the base to torchao's NF4 (`--quantize nf4-torchao`: int8
//! scalers per 64 values, one factor per 256 scalers). Every builder is
//! torchtune's own model code (`--implementation torchtune`).

use serde_json::{Map, Value};

use super::key::{Choice, Effect, Key, Rule, choose, count, count_of, name_of, truth, truth_or};
use super::{Change, Setting};

/// Builder names (without `lora_`/`qlora_` and `_base`/`_instruct`) and the preset of each.
const BUILDERS: &[(&str, &str)] = &[
    ("llama2_7b", "llama-2-7b"),
    ("llama2_13b", "llama-2-13b"),
    ("llama2_70b", "llama-2-70b"),
    ("llama3_1_8b", "llama-3.1-8b"),
    ("llama3_1_70b", "llama-3.1-70b"),
    ("llama3_1_405b", "llama-3.1-405b"),
    ("llama3_2_1b", "llama-3.2-1b"),
    ("llama3_2_3b", "llama-3.2-3b"),
    ("mistral_7b", "mistral-7b"),
    ("gemma_2b", "gemma-2b"),
    ("gemma_7b", "gemma-7b"),
    ("gemma2_2b", "gemma-2-2b"),
    ("gemma2_9b", "gemma-2-9b"),
    ("gemma2_27b", "gemma-2-27b"),
    ("phi3_mini", "phi-3-mini"),
    ("qwen2_5_0_5b", "qwen2.5-0.5b"),
    ("qwen2_5_1_5b", "qwen2.5-1.5b"),
    ("qwen2_5_3b", "qwen2.5-3b"),
    ("qwen2_5_7b", "qwen2.5-7b"),
    ("qwen2_5_14b", "qwen2.5-14b"),
    ("qwen2_5_32b", "qwen2.5-32b"),
    ("qwen2_5_72b", "qwen2.5-72b"),
    ("qwen3_0_6b", "qwen3-0.6b"),
    ("qwen3_1_7b", "qwen3-1.7b"),
    ("qwen3_4b", "qwen3-4b"),
    ("qwen3_8b", "qwen3-8b"),
    ("qwen3_14b", "qwen3-14b"),
    ("qwen3_32b", "qwen3-32b"),
];

/// torchtune's attention module names and the Hugging Face names trainmem uses.
const MODULES: &[(&str, &str)] = &[
    ("q_proj", "q_proj"),
    ("k_proj", "k_proj"),
    ("v_proj", "v_proj"),
    ("output_proj", "o_proj"),
];

/// The MLP's linears (torchtune's w1, w2, w3) under Hugging Face names.
const MLP: &str = "gate_proj,down_proj,up_proj";

/// `model._component_`: the preset, and LoRA with the `model` section's options.
fn model(value: &Value, document: &Map<String, Value>) -> Result<Effect, String> {
    let path = value
        .as_str()
        .ok_or("expected a builder such as torchtune.models.llama3_1.llama3_1_8b")?;
    let builder = path.rsplit('.').next().unwrap_or(path);
    let (kind, rest) = if let Some(rest) = builder.strip_prefix("qlora_") {
        ("qlora", rest)
    } else if let Some(rest) = builder.strip_prefix("lora_") {
        ("lora", rest)
    } else {
        ("full", builder)
    };
    let base = rest
        .strip_suffix("_base")
        .or_else(|| rest.strip_suffix("_instruct"))
        .unwrap_or(rest);
    let Some((_, preset)) = BUILDERS.iter().find(|(name, _)| *name == base) else {
        return Ok(Effect::NotModelled(format!(
            "the builder `{builder}` has no preset here; give --model with its config.json"
        )));
    };
    let mut flags = vec![
        Setting {
            flag: "--model",
            value: Some(preset.to_string()),
        },
        Setting {
            flag: "--implementation",
            value: Some("torchtune".to_string()),
        },
    ];
    if kind == "full" {
        return Ok(Effect::Set(flags));
    }
    let section = document.get("model").and_then(Value::as_object);
    let get = |key: &str| section.and_then(|m| m.get(key));
    let rank = match get("lora_rank") {
        Some(r) => count_of("model.lora_rank", r)?,
        None => return Err("a LoRA builder needs model.lora_rank".to_string()),
    };
    let mut targets: Vec<String> = Vec::new();
    if let Some(Value::Array(names)) = get("lora_attn_modules") {
        for name in names {
            let name = name
                .as_str()
                .ok_or("model.lora_attn_modules: expected names")?;
            let (_, hf) = MODULES
                .iter()
                .find(|(tt, _)| *tt == name)
                .ok_or("model.lora_attn_modules: accepted q_proj, k_proj, v_proj, output_proj")?;
            targets.push(hf.to_string());
        }
    }
    if truth_or(get("apply_lora_to_mlp"), false)? {
        targets.push(MLP.to_string());
    }
    if truth_or(get("apply_lora_to_output"), false)? {
        targets.push("lm_head".to_string());
    }
    if targets.is_empty() {
        return Err(
            "a LoRA builder needs model.lora_attn_modules or apply_lora_to_mlp".to_string(),
        );
    }
    flags.push(Setting {
        flag: "--lora-rank",
        value: Some(rank.to_string()),
    });
    flags.push(Setting {
        flag: "--lora-targets",
        value: Some(targets.join(",")),
    });
    // torchtune keeps the adapters in the model's dtype.
    let dtype = document
        .get("dtype")
        .and_then(name_of)
        .unwrap_or_else(|| "bf16".to_string());
    if dtype == "bf16" {
        flags.push(Setting {
            flag: "--lora-dtype",
            value: Some("bf16".to_string()),
        });
    }
    let quantize = kind == "qlora" || truth_or(get("quantize_base"), false)?;
    if quantize {
        flags.push(Setting {
            flag: "--quantize",
            value: Some("nf4-torchao".to_string()),
        });
    }
    if let Some(p) = get("lora_dropout")
        .and_then(Value::as_f64)
        .filter(|p| *p > 0.0)
    {
        flags.push(Setting {
            flag: "--lora-dropout",
            value: Some(p.to_string()),
        });
    }
    if truth_or(get("use_dora"), false)? {
        flags.push(Setting {
            flag: "--lora-dora",
            value: None,
        });
    }
    Ok(Effect::Set(flags))
}

fn with_model(_: &Value, _: &Map<String, Value>) -> Result<Effect, String> {
    Ok(Effect::Nothing("read with model._component_".to_string()))
}

/// `loss._component_`.
fn loss(value: &Value, document: &Map<String, Value>) -> Result<Effect, String> {
    let name = value.as_str().ok_or("expected a loss class")?;
    let chunks = document
        .get("loss")
        .and_then(|l| l.get("num_output_chunks"))
        .map(count)
        .transpose()?
        .flatten()
        .unwrap_or(TORCHTUNE_CHUNKS);
    let class = name.rsplit('.').next().unwrap_or(name);
    Ok(match class {
        "CEWithChunkedOutputLoss" | "LinearCrossEntropyLoss" => Effect::Set(vec![Setting {
            flag: "--loss",
            value: Some(format!("chunked:{chunks}")),
        }]),
        "CrossEntropyLoss" => Effect::Nothing("the standard loss".to_string()),
        _ => Effect::NotModelled(format!("the loss `{class}`")),
    })
}

/// torchtune's default `num_output_chunks`.
const TORCHTUNE_CHUNKS: u64 = 8;

/// `optimizer._component_`.
const OPTIMIZER: &[(&str, Choice)] = &[
    (
        "torch.optim.AdamW",
        Choice::Set(&[("--optimizer", "adamw")]),
    ),
    ("torch.optim.Adam", Choice::Set(&[("--optimizer", "adam")])),
    ("torch.optim.SGD", Choice::Set(&[("--optimizer", "sgd")])),
    (
        "bitsandbytes.optim.PagedAdamW8bit",
        Choice::Set(&[("--optimizer", "paged-adamw-8bit")]),
    ),
    (
        "bitsandbytes.optim.PagedAdamW",
        Choice::Set(&[("--optimizer", "paged-adamw")]),
    ),
    (
        "bitsandbytes.optim.PagedAdamW32bit",
        Choice::Set(&[("--optimizer", "paged-adamw")]),
    ),
    (
        "bitsandbytes.optim.AdamW8bit",
        Choice::Set(&[("--optimizer", "adamw-8bit")]),
    ),
    (
        "torchao.optim.AdamW8bit",
        Choice::Set(&[("--optimizer", "adamw-8bit")]),
    ),
    (
        "torchao.optim.AdamW4bit",
        Choice::Set(&[("--optimizer", "adamw-4bit")]),
    ),
    (
        "torchao.optim.AdamWFp8",
        Choice::Set(&[("--optimizer", "adamw-fp8")]),
    ),
    (
        "torchao.prototype.low_bit_optim.AdamW8bit",
        Choice::Set(&[("--optimizer", "adamw-8bit")]),
    ),
    (
        "torchao.prototype.low_bit_optim.AdamW4bit",
        Choice::Set(&[("--optimizer", "adamw-4bit")]),
    ),
];

/// A switch that sets flags when on.
fn when_on(value: &Value, flags: &[(&'static str, &'static str)]) -> Result<Effect, String> {
    Ok(if truth(value)? {
        Effect::flags(flags)
    } else {
        Effect::Nothing("off".to_string())
    })
}

/// `fsdp_cpu_offload`: a distributed recipe (FSDP2, full sharding), with
/// parameters, gradients and optimizer states on the CPU when true.
fn fsdp_cpu_offload(value: &Value, document: &Map<String, Value>) -> Result<Effect, String> {
    // With fsdp_reshard_after_forward, which sets the same, in any order.
    let reshard = truth_or(document.get("fsdp_reshard_after_forward"), true)?;
    let strategy = if reshard {
        "full-shard"
    } else {
        "shard-grad-op"
    };
    let mut flags = vec![
        Setting {
            flag: "--fsdp",
            value: Some(strategy.to_string()),
        },
        Setting {
            flag: "--framework",
            value: Some("fsdp2".to_string()),
        },
    ];
    if truth(value)? {
        flags.push(Setting {
            flag: "--offload",
            value: Some("optimizer+params".to_string()),
        });
    }
    Ok(Effect::Set(flags))
}

/// The keys, each with the flags it sets.
pub const KEYS: &[Key] = &[
    Key {
        name: "model._component_",
        rule: Rule::Read(model),
    },
    Key {
        name: "model.lora_attn_modules",
        rule: Rule::Read(with_model),
    },
    Key {
        name: "model.apply_lora_to_mlp",
        rule: Rule::Read(with_model),
    },
    Key {
        name: "model.apply_lora_to_output",
        rule: Rule::Read(with_model),
    },
    Key {
        name: "model.lora_rank",
        rule: Rule::Read(with_model),
    },
    Key {
        name: "model.lora_dropout",
        rule: Rule::Read(with_model),
    },
    Key {
        name: "model.quantize_base",
        rule: Rule::Read(with_model),
    },
    Key {
        name: "model.use_dora",
        rule: Rule::Read(with_model),
    },
    Key {
        name: "model.lora_alpha",
        rule: Rule::NoMemory,
    },
    Key {
        name: "batch_size",
        rule: Rule::Count("--micro-batch"),
    },
    Key {
        name: "gradient_accumulation_steps",
        rule: Rule::Count("--grad-accumulation"),
    },
    Key {
        name: "enable_activation_checkpointing",
        rule: Rule::Read(|v, _| when_on(v, &[("--recompute", "full")])),
    },
    Key {
        name: "enable_activation_offloading",
        rule: Rule::Read(|v, _| when_on(v, &[("--offload-activations", "")])),
    },
    Key {
        name: "activation_offloading_use_streams",
        rule: Rule::NoMemory,
    },
    Key {
        name: "loss._component_",
        rule: Rule::Read(loss),
    },
    Key {
        name: "loss.num_output_chunks",
        rule: Rule::Read(|_, _| Ok(Effect::Nothing("read with loss._component_".to_string()))),
    },
    Key {
        name: "optimizer._component_",
        rule: Rule::Read(|v, _| choose(v, OPTIMIZER)),
    },
    Key {
        name: "optimizer.fused",
        rule: Rule::Read(|v, _| when_on(v, &[("--optimizer-option", "fused=true")])),
    },
    Key {
        name: "optimizer.lr",
        rule: Rule::NoMemory,
    },
    Key {
        name: "optimizer.weight_decay",
        rule: Rule::NoMemory,
    },
    Key {
        name: "optimizer.betas",
        rule: Rule::NoMemory,
    },
    Key {
        name: "optimizer.eps",
        rule: Rule::NoMemory,
    },
    Key {
        name: "optimizer_in_bwd",
        rule: Rule::Read(|v, _| when_on(v, &[("--optimizer-in-backward", "")])),
    },
    Key {
        name: "dtype",
        rule: Rule::Choice(&[
            ("bf16", Choice::Set(&[("--precision", "bf16")])),
            ("fp32", Choice::Set(&[("--precision", "fp32")])),
        ]),
    },
    Key {
        name: "compile",
        rule: Rule::Read(super::training_arguments::compile),
    },
    Key {
        name: "dataset.packed",
        rule: Rule::Read(|v, d| super::key::packing(v, d, &[], "max_seq_len tokens per sequence")),
    },
    Key {
        name: "dataset.*",
        rule: Rule::NoMemory,
    },
    Key {
        name: "tokenizer.max_seq_len",
        rule: Rule::Read(|v, _| {
            match v {
            Value::Null => Ok(Effect::Nothing(
                "null: each batch as long as its longest sample; check answers with the longest that fits".to_string(),
            )),
            _ => Ok(Effect::Set(vec![Setting {
                flag: "--seq-len",
                value: Some(count(v)?.ok_or("expected a whole number")?.to_string()),
            }])),
        }
        }),
    },
    Key {
        name: "tokenizer._component_",
        rule: Rule::NoMemory,
    },
    Key {
        name: "tokenizer.path",
        rule: Rule::NoMemory,
    },
    Key {
        name: "tokenizer.merges_file",
        rule: Rule::NoMemory,
    },
    Key {
        name: "tokenizer.prompt_template",
        rule: Rule::NoMemory,
    },
    Key {
        name: "fsdp_cpu_offload",
        rule: Rule::Read(fsdp_cpu_offload),
    },
    Key {
        name: "fsdp_reshard_after_forward",
        rule: Rule::Choice(&[
            ("true", Choice::Set(&[("--fsdp", "full-shard")])),
            ("false", Choice::Set(&[("--fsdp", "shard-grad-op")])),
        ]),
    },
    Key {
        name: "custom_sharded_layers",
        rule: Rule::NoMemory,
    },
    Key {
        name: "tensor_parallel_dim",
        rule: Rule::Count("--tp"),
    },
    Key {
        name: "device",
        rule: Rule::Choice(&[
            ("cuda", Choice::Nothing("CUDA")),
            ("cpu", Choice::Set(&[("--platform", "cpu")])),
        ]),
    },
    Key {
        name: "checkpointer",
        rule: Rule::NoMemory,
    },
    Key {
        name: "resume_from_checkpoint",
        rule: Rule::NoMemory,
    },
    Key {
        name: "save_adapter_weights_only",
        rule: Rule::NoMemory,
    },
    Key {
        name: "output_dir",
        rule: Rule::NoMemory,
    },
    Key {
        name: "seed",
        rule: Rule::NoMemory,
    },
    Key {
        name: "shuffle",
        rule: Rule::NoMemory,
    },
    Key {
        name: "lr_scheduler",
        rule: Rule::NoMemory,
    },
    Key {
        name: "epochs",
        rule: Rule::NoMemory,
    },
    Key {
        name: "max_steps_per_epoch",
        rule: Rule::NoMemory,
    },
    Key {
        name: "clip_grad_norm",
        rule: Rule::NoMemory,
    },
    Key {
        name: "metric_logger",
        rule: Rule::NoMemory,
    },
    Key {
        name: "log_every_n_steps",
        rule: Rule::NoMemory,
    },
    Key {
        name: "log_peak_memory_stats",
        rule: Rule::NoMemory,
    },
    Key {
        name: "log_level",
        rule: Rule::NoMemory,
    },
    Key {
        name: "profiler",
        rule: Rule::NoMemory,
    },
    Key {
        name: "run_val_every_n_steps",
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
            ("batch_size", micro_batch.to_string()),
            ("gradient_accumulation_steps", accumulation.to_string()),
        ],
        Change::Recompute => vec![("enable_activation_checkpointing", "True".to_string())],
        Change::OffloadActivations => vec![("enable_activation_offloading", "True".to_string())],
        Change::Optimizer8bit => vec![(
            "optimizer._component_",
            "bitsandbytes.optim.PagedAdamW8bit".to_string(),
        )],
        Change::OptimizerInBackward => vec![("optimizer_in_bwd", "True".to_string())],
        _ => return None,
    };
    Some(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}
