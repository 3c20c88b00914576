//! An axolotl config YAML (docs.axolotl.ai/docs/config-reference.html and
//! the repository's `examples/`). axolotl loads the model in the dtype of
//! `bf16`/`fp16` and trains it there; `adapter: qlora` is LoRA over an nf4
//! base with double quantization, as axolotl's loader sets it.

use serde_json::{Map, Value};

use super::key::{Absent, Choice, Effect, Key, Rule, choose, count_of, given, on, truth, truth_or};
use super::training_arguments::{FSDP_VERSION, OPTIM, compile, fsdp, liger, lora_dropout};
use super::{Change, Setting};

/// `bf16` / `fp16` / `float16` / `bfloat16`: the dtype axolotl loads the model in.
fn precision(value: &Value, document: &Map<String, Value>) -> Result<Effect, String> {
    if matches!(value, Value::Null | Value::Bool(false)) {
        return Ok(Effect::Nothing("off".to_string()));
    }
    let fp8 = on(document, "fp8")?;
    let switched = |key: &str| switched_on(document, key);
    let recipe = if fp8 {
        // `fp8` decides, whichever key comes first in the file.
        "fp8-tensorwise"
    } else if let Some(half) = half_dtype(document)? {
        half
    } else {
        return Ok(Effect::Nothing("fp32".to_string()));
    };
    let mut settings = vec![Setting {
        flag: "--precision",
        value: Some(recipe.to_string()),
    }];
    // `bf16`/`fp16` also turn on the Trainer's mixed precision, an autocast
    // over the half-precision model (`bfloat16`/`float16` train it pure);
    // DeepSpeed's and FSDP's engines cast the weights themselves.
    let engine = ["deepspeed", "fsdp", "fsdp_config", "fsdp_version"]
        .iter()
        .any(|key| given(document, key));
    let amp = !fp8
        && (switched("bf16")? || switched("fp16")?)
        && !switched("bfloat16")?
        && !switched("float16")?;
    if amp && !engine {
        settings.push(Setting {
            flag: "--autocast",
            value: None,
        });
    }
    Ok(Effect::Set(settings))
}

/// axolotl's default rank when `lora_r` is absent (PEFT's `LoraConfig.r`).
const DEFAULT_LORA_R: u64 = 8;

/// An empty `lora_target_modules`: PEFT would put adapters on no module
/// (axolotl fills its default only when the key is absent).
const NO_TARGETS: &str = "lora_target_modules: an empty list puts LoRA adapters on no module; accepted: module names such as [q_proj, v_proj], or lora_target_linear: true";

/// The half dtype the model is loaded in (axolotl's `torch_dtype`): bf16
/// from `bf16`/`bfloat16` (true or `auto`), fp16 from `fp16`/`float16`,
/// `None` for fp32.
fn half_dtype(document: &Map<String, Value>) -> Result<Option<&'static str>, String> {
    let switched = |key: &str| switched_on(document, key);
    Ok(if switched("bf16")? || switched("bfloat16")? {
        Some("bf16")
    } else if switched("fp16")? || switched("float16")? {
        Some("fp16")
    } else {
        None
    })
}

/// Whether a precision key is on: true, or `auto` (on where the GPU has it).
fn switched_on(document: &Map<String, Value>, key: &str) -> Result<bool, String> {
    match document.get(key) {
        Some(Value::String(s)) if s.eq_ignore_ascii_case("auto") => Ok(true),
        Some(value) => truth(value),
        None => Ok(false),
    }
}

/// `adapter`: LoRA or QLoRA, with `lora_r`, the targets and the base's quantization.
fn adapter(value: &Value, document: &Map<String, Value>) -> Result<Effect, String> {
    let kind = match value {
        Value::Null => return Ok(Effect::Nothing("full fine-tuning".to_string())),
        Value::String(s) => s.trim().to_ascii_lowercase(),
        _ => return Err("accepted: lora, qlora".to_string()),
    };
    if kind.is_empty() {
        return Ok(Effect::Nothing("full fine-tuning".to_string()));
    }
    if kind != "lora" && kind != "qlora" {
        return Err("accepted: lora, qlora".to_string());
    }
    let rank = match document.get("lora_r") {
        Some(r) => count_of("lora_r", r)?,
        None => DEFAULT_LORA_R,
    };
    let linear = on(document, "lora_target_linear")?;
    let targets = match document.get("lora_target_modules") {
        _ if linear => "all-linear".to_string(),
        Some(Value::Array(items)) if items.is_empty() => return Err(NO_TARGETS.to_string()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| i.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or("lora_target_modules: expected module names")?
            .join(","),
        Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
        // PEFT's default for Llama-style models.
        _ => "q_proj,v_proj".to_string(),
    };
    let mut flags = vec![
        Setting {
            flag: "--lora-rank",
            value: Some(rank.to_string()),
        },
        Setting {
            flag: "--lora-targets",
            value: Some(targets),
        },
    ];
    if kind == "qlora" || on(document, "load_in_4bit")? {
        flags.push(Setting {
            flag: "--quantize",
            value: Some("nf4".to_string()),
        });
        flags.push(Setting {
            flag: "--double-quant",
            value: Some("on".to_string()),
        });
    } else if on(document, "load_in_8bit")? {
        flags.push(Setting {
            flag: "--quantize",
            value: Some("int8".to_string()),
        });
    }
    if let Some(save) = document
        .get("lora_modules_to_save")
        .filter(|v| !v.is_null())
    {
        let names = match save {
            Value::Array(items) => items
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(","),
            Value::String(s) => s.clone(),
            _ => return Err("lora_modules_to_save: expected module names".to_string()),
        };
        if !names.is_empty() {
            flags.push(Setting {
                flag: "--lora-modules-to-save",
                value: Some(names),
            });
        }
    }
    if on(document, "peft_use_dora")? {
        flags.push(Setting {
            flag: "--lora-dora",
            value: None,
        });
    }
    // `peft_autocast_adapter_dtype: false` is peft's
    // `get_peft_model(autocast_adapter_dtype=False)`: the adapters in the
    // base's dtype instead of fp32 (`loaders/adapter.py`).
    let autocast_adapters = document
        .get("peft_autocast_adapter_dtype")
        .filter(|v| !v.is_null())
        .map(truth)
        .transpose()?;
    if let (Some(false), Some(half)) = (autocast_adapters, half_dtype(document)?) {
        flags.push(Setting {
            flag: "--lora-dtype",
            value: Some(half.to_string()),
        });
    }
    Ok(Effect::Set(flags))
}

/// A key read with `adapter`.
fn with_adapter(_: &Value, document: &Map<String, Value>) -> Result<Effect, String> {
    let on = document
        .get("adapter")
        .and_then(Value::as_str)
        .is_some_and(|a| !a.trim().is_empty());
    Ok(Effect::Nothing(
        if on {
            "read with adapter"
        } else {
            "unused without adapter"
        }
        .to_string(),
    ))
}

/// `gradient_checkpointing`: true, or axolotl's offloading variants, which
/// keep each checkpointed layer input in host memory.
fn checkpointing(value: &Value, _: &Map<String, Value>) -> Result<Effect, String> {
    if let Value::String(mode) = value {
        let mode = mode.trim().to_ascii_lowercase();
        if mode == "offload" || mode == "unsloth" {
            return Ok(Effect::Set(vec![
                Setting {
                    flag: "--recompute",
                    value: Some("full".to_string()),
                },
                Setting {
                    flag: "--offload-activations",
                    value: None,
                },
            ]));
        }
        if mode == "offload_disk" {
            return Ok(Effect::NotModelled(
                "checkpoints offloaded to disk".to_string(),
            ));
        }
    }
    Ok(if truth(value)? {
        Effect::Set(vec![Setting {
            flag: "--recompute",
            value: Some("full".to_string()),
        }])
    } else {
        Effect::Nothing("off".to_string())
    })
}

/// A switch that sets flags when on.
fn when_on(value: &Value, flags: &[(&'static str, &'static str)]) -> Result<Effect, String> {
    Ok(if truth(value)? {
        Effect::flags(flags)
    } else {
        Effect::Nothing("off".to_string())
    })
}

/// axolotl's optimizer names beyond transformers' own.
const MORE_OPTIMIZERS: &[(&str, Choice)] = &[
    ("optimi_adamw", Choice::Set(&[("--optimizer", "adamw")])),
    (
        "ao_adamw_4bit",
        Choice::Set(&[("--optimizer", "adamw-4bit")]),
    ),
    (
        "ao_adamw_8bit",
        Choice::Set(&[("--optimizer", "adamw-8bit")]),
    ),
    ("ao_adamw_fp8", Choice::Set(&[("--optimizer", "adamw-fp8")])),
    ("came_pytorch", Choice::Set(&[("--optimizer", "came")])),
    ("muon", Choice::Set(&[("--optimizer", "muon")])),
    ("adopt_adamw", Choice::NotModelled("ADOPT")),
    ("dion", Choice::NotModelled("Dion")),
];

fn optimizer(value: &Value, _: &Map<String, Value>) -> Result<Effect, String> {
    choose(value, MORE_OPTIMIZERS).or_else(|_| choose(value, OPTIM))
}

/// `fsdp_version` at the top level (newer axolotl): 2 is FSDP2, full
/// sharding unless `fsdp_config.reshard_after_forward` is false.
fn fsdp_version(value: &Value, document: &Map<String, Value>) -> Result<Effect, String> {
    let version = choose(value, FSDP_VERSION)?;
    let reshard = truth_or(
        document.get("fsdp_config").and_then(|c| {
            c.get("reshard_after_forward")
                .or_else(|| c.get("fsdp_reshard_after_forward"))
        }),
        true,
    )?;
    let Effect::Set(mut flags) = version else {
        return Ok(version);
    };
    flags.push(Setting {
        flag: "--fsdp",
        value: Some(
            if reshard {
                "full-shard"
            } else {
                "shard-grad-op"
            }
            .to_string(),
        ),
    });
    Ok(Effect::Set(flags))
}

/// A switch that changes memory in a way not modelled when on.
fn not_modelled_on(value: &Value, why: &str) -> Result<Effect, String> {
    Ok(if truth(value)? {
        Effect::NotModelled(why.to_string())
    } else {
        Effect::Nothing("off".to_string())
    })
}

/// What axolotl prices at the full sequence length.
const PACKED: &str = "priced at sequence_len tokens per sequence, which packing fills";

/// axolotl's attention switches: one of them on names the kernel.
const AXOLOTL_ATTENTION: &[&str] = &[
    "flash_attention",
    "sdp_attention",
    "xformers_attention",
    "flex_attention",
    "s2_attention",
    "eager_attention",
];

/// The keys, each with the flags it sets.
pub const KEYS: &[Key] = &[
    Key {
        name: "base_model",
        rule: Rule::Text("--model"),
    },
    Key {
        name: "adapter",
        rule: Rule::Read(adapter),
    },
    Key {
        name: "lora_r",
        rule: Rule::Read(with_adapter),
    },
    Key {
        name: "lora_target_modules",
        rule: Rule::Read(with_adapter),
    },
    Key {
        name: "lora_target_linear",
        rule: Rule::Read(with_adapter),
    },
    Key {
        name: "lora_modules_to_save",
        rule: Rule::Read(with_adapter),
    },
    Key {
        name: "load_in_4bit",
        rule: Rule::Read(with_adapter),
    },
    Key {
        name: "load_in_8bit",
        rule: Rule::Read(with_adapter),
    },
    Key {
        name: "peft_use_dora",
        rule: Rule::Read(with_adapter),
    },
    Key {
        name: "peft_autocast_adapter_dtype",
        rule: Rule::Read(with_adapter),
    },
    Key {
        name: "lora_dropout",
        rule: Rule::Read(lora_dropout),
    },
    Key {
        name: "lora_alpha",
        rule: Rule::NoMemory,
    },
    Key {
        name: "lora_fan_in_fan_out",
        rule: Rule::NoMemory,
    },
    Key {
        name: "peft_use_rslora",
        rule: Rule::NoMemory,
    },
    Key {
        name: "lora_model_dir",
        rule: Rule::NoMemory,
    },
    Key {
        name: "sequence_len",
        rule: Rule::Count("--seq-len"),
    },
    Key {
        name: "micro_batch_size",
        rule: Rule::Count("--micro-batch"),
    },
    Key {
        name: "gradient_accumulation_steps",
        rule: Rule::Count("--grad-accumulation"),
    },
    Key {
        name: "gradient_checkpointing",
        rule: Rule::Read(checkpointing),
    },
    Key {
        name: "gradient_checkpointing_kwargs",
        rule: Rule::Read(super::training_arguments::reentrant),
    },
    Key {
        name: "activation_offloading",
        rule: Rule::Read(|v, _| when_on(v, &[("--offload-activations", "")])),
    },
    Key {
        name: "optimizer",
        rule: Rule::Read(optimizer),
    },
    Key {
        name: "bf16",
        rule: Rule::Read(precision),
    },
    Key {
        name: "fp16",
        rule: Rule::Read(precision),
    },
    Key {
        name: "bfloat16",
        rule: Rule::Read(precision),
    },
    Key {
        name: "float16",
        rule: Rule::Read(precision),
    },
    Key {
        name: "tf32",
        rule: Rule::NoMemory,
    },
    Key {
        name: "fp8",
        rule: Rule::Read(|v, _| when_on(v, &[("--precision", "fp8-tensorwise")])),
    },
    Key {
        name: "flash_attention",
        rule: Rule::Switch(&[("--attention", "flash")]),
    },
    Key {
        name: "sdp_attention",
        rule: Rule::Switch(&[("--attention", "sdpa")]),
    },
    Key {
        name: "eager_attention",
        rule: Rule::Switch(&[("--attention", "eager")]),
    },
    Key {
        name: "xformers_attention",
        rule: Rule::Read(|v, _| not_modelled_on(v, "xformers' memory-efficient attention")),
    },
    Key {
        name: "flex_attention",
        rule: Rule::Read(|v, _| not_modelled_on(v, "flex attention's saved tensors")),
    },
    Key {
        name: "s2_attention",
        rule: Rule::Read(|v, _| not_modelled_on(v, "shifted sparse attention")),
    },
    Key {
        name: "sample_packing",
        rule: Rule::Read(|v, d| {
            super::key::packing(v, d, AXOLOTL_ATTENTION, "sequence_len tokens per sequence")
        }),
    },
    Key {
        name: "pad_to_sequence_len",
        rule: Rule::Read(|_, _| Ok(Effect::Nothing(PACKED.to_string()))),
    },
    Key {
        name: "eval_sample_packing",
        rule: Rule::NoMemory,
    },
    Key {
        name: "deepspeed",
        rule: Rule::Include,
    },
    Key {
        name: "fsdp",
        rule: Rule::Read(fsdp),
    },
    Key {
        name: "fsdp_version",
        rule: Rule::Read(fsdp_version),
    },
    Key {
        name: "fsdp_config.fsdp_version",
        rule: Rule::Choice(FSDP_VERSION),
    },
    Key {
        name: "fsdp_config.fsdp_offload_params",
        rule: Rule::Switch(&[("--offload", "optimizer+params")]),
    },
    Key {
        name: "fsdp_config.offload_params",
        rule: Rule::Switch(&[("--offload", "optimizer+params")]),
    },
    Key {
        name: "fsdp_config.fsdp_activation_checkpointing",
        rule: Rule::Switch(&[("--recompute", "full")]),
    },
    Key {
        name: "fsdp_config.activation_checkpointing",
        rule: Rule::Switch(&[("--recompute", "full")]),
    },
    Key {
        name: "fsdp_config.fsdp_cpu_ram_efficient_loading",
        rule: Rule::Switch(&[("--init", "rank0")]),
    },
    Key {
        name: "fsdp_config.cpu_ram_efficient_loading",
        rule: Rule::Switch(&[("--init", "rank0")]),
    },
    Key {
        name: "fsdp_config.reshard_after_forward",
        rule: Rule::Read(|_, _| Ok(Effect::Nothing("read with fsdp_version".to_string()))),
    },
    Key {
        name: "fsdp_config.fsdp_reshard_after_forward",
        rule: Rule::Read(|_, _| Ok(Effect::Nothing("read with fsdp_version".to_string()))),
    },
    Key {
        name: "fsdp_config.fsdp_state_dict_type",
        rule: Rule::NoMemory,
    },
    Key {
        name: "fsdp_config.state_dict_type",
        rule: Rule::NoMemory,
    },
    Key {
        name: "fsdp_config.fsdp_transformer_layer_cls_to_wrap",
        rule: Rule::NoMemory,
    },
    Key {
        name: "fsdp_config.transformer_layer_cls_to_wrap",
        rule: Rule::NoMemory,
    },
    Key {
        name: "fsdp_config.fsdp_auto_wrap_policy",
        rule: Rule::NoMemory,
    },
    Key {
        name: "fsdp_config.auto_wrap_policy",
        rule: Rule::NoMemory,
    },
    Key {
        name: "fsdp_config.fsdp_sync_module_states",
        rule: Rule::NoMemory,
    },
    Key {
        name: "fsdp_config.fsdp_use_orig_params",
        rule: Rule::NoMemory,
    },
    Key {
        name: "torch_compile",
        rule: Rule::Read(compile),
    },
    Key {
        name: "torch_compile_backend",
        rule: Rule::NoMemory,
    },
    Key {
        name: "liger_fused_linear_cross_entropy",
        rule: Rule::Read(liger),
    },
    Key {
        name: "liger_cross_entropy",
        rule: Rule::Read(|v, _| not_modelled_on(v, "Liger's cross-entropy kernel")),
    },
    Key {
        name: "liger_rms_norm",
        rule: Rule::Read(|v, _| not_modelled_on(v, "Liger's RMSNorm, which saves fewer tensors")),
    },
    Key {
        name: "liger_glu_activation",
        rule: Rule::Read(|v, _| {
            not_modelled_on(v, "Liger's SwiGLU, which recomputes its activation")
        }),
    },
    Key {
        name: "liger_layer_norm",
        rule: Rule::Read(|v, _| not_modelled_on(v, "Liger's LayerNorm")),
    },
    Key {
        name: "liger_rope",
        rule: Rule::NoMemory,
    },
    Key {
        name: "cut_cross_entropy",
        rule: Rule::Read(|v, _| when_on(v, &[("--loss", "fused")])),
    },
    Key {
        name: "plugins",
        rule: Rule::NoMemory,
    },
    Key {
        name: "rl",
        rule: Rule::NotModelled("preference training keeps a reference model or a second forward"),
    },
    Key {
        name: "gptq",
        rule: Rule::Read(|v, _| not_modelled_on(v, "a GPTQ-quantized base")),
    },
    Key {
        name: "unfrozen_parameters",
        rule: Rule::NotModelled("training only some parameters: give --freeze"),
    },
    Key {
        name: "lora_on_cpu",
        rule: Rule::Read(|v, _| not_modelled_on(v, "LoRA weights kept on the CPU")),
    },
    Key {
        name: "context_parallel_size",
        rule: Rule::Count("--cp"),
    },
    Key {
        name: "sequence_parallel_degree",
        rule: Rule::Count("--cp"),
    },
    // Keys that do not change the training step's memory.
    Key {
        name: "base_model_config",
        rule: Rule::NoMemory,
    },
    Key {
        name: "model_type",
        rule: Rule::NoMemory,
    },
    Key {
        name: "tokenizer_type",
        rule: Rule::NoMemory,
    },
    Key {
        name: "tokenizer_config",
        rule: Rule::NoMemory,
    },
    Key {
        name: "trust_remote_code",
        rule: Rule::NoMemory,
    },
    Key {
        name: "is_llama_derived_model",
        rule: Rule::NoMemory,
    },
    Key {
        name: "is_mistral_derived_model",
        rule: Rule::NoMemory,
    },
    Key {
        name: "is_qwen_derived_model",
        rule: Rule::NoMemory,
    },
    Key {
        name: "strict",
        rule: Rule::NoMemory,
    },
    Key {
        name: "datasets",
        rule: Rule::NoMemory,
    },
    Key {
        name: "test_datasets",
        rule: Rule::NoMemory,
    },
    Key {
        name: "dataset_prepared_path",
        rule: Rule::NoMemory,
    },
    Key {
        name: "dataset_processes",
        rule: Rule::NoMemory,
    },
    Key {
        name: "shuffle_merged_datasets",
        rule: Rule::NoMemory,
    },
    Key {
        name: "val_set_size",
        rule: Rule::NoMemory,
    },
    Key {
        name: "output_dir",
        rule: Rule::NoMemory,
    },
    Key {
        name: "chat_template",
        rule: Rule::NoMemory,
    },
    Key {
        name: "train_on_inputs",
        rule: Rule::NoMemory,
    },
    Key {
        name: "group_by_length",
        rule: Rule::NoMemory,
    },
    Key {
        name: "num_epochs",
        rule: Rule::NoMemory,
    },
    Key {
        name: "max_steps",
        rule: Rule::NoMemory,
    },
    Key {
        name: "learning_rate",
        rule: Rule::NoMemory,
    },
    Key {
        name: "lr_scheduler",
        rule: Rule::NoMemory,
    },
    Key {
        name: "cosine_min_lr_ratio",
        rule: Rule::NoMemory,
    },
    Key {
        name: "warmup_steps",
        rule: Rule::NoMemory,
    },
    Key {
        name: "warmup_ratio",
        rule: Rule::NoMemory,
    },
    Key {
        name: "weight_decay",
        rule: Rule::NoMemory,
    },
    Key {
        name: "max_grad_norm",
        rule: Rule::NoMemory,
    },
    Key {
        name: "adam_beta1",
        rule: Rule::NoMemory,
    },
    Key {
        name: "adam_beta2",
        rule: Rule::NoMemory,
    },
    Key {
        name: "adam_epsilon",
        rule: Rule::NoMemory,
    },
    Key {
        name: "logging_steps",
        rule: Rule::NoMemory,
    },
    Key {
        name: "saves_per_epoch",
        rule: Rule::NoMemory,
    },
    Key {
        name: "save_steps",
        rule: Rule::NoMemory,
    },
    Key {
        name: "save_strategy",
        rule: Rule::NoMemory,
    },
    Key {
        name: "save_total_limit",
        rule: Rule::NoMemory,
    },
    Key {
        name: "save_safetensors",
        rule: Rule::NoMemory,
    },
    Key {
        name: "save_first_step",
        rule: Rule::NoMemory,
    },
    Key {
        name: "evals_per_epoch",
        rule: Rule::NoMemory,
    },
    Key {
        name: "eval_steps",
        rule: Rule::NoMemory,
    },
    Key {
        name: "eval_table_size",
        rule: Rule::NoMemory,
    },
    Key {
        name: "eval_max_new_tokens",
        rule: Rule::NoMemory,
    },
    Key {
        name: "eval_batch_size",
        rule: Rule::NoMemory,
    },
    Key {
        name: "early_stopping_patience",
        rule: Rule::NoMemory,
    },
    Key {
        name: "resume_from_checkpoint",
        rule: Rule::NoMemory,
    },
    Key {
        name: "auto_resume_from_checkpoints",
        rule: Rule::NoMemory,
    },
    Key {
        name: "local_rank",
        rule: Rule::NoMemory,
    },
    Key {
        name: "debug",
        rule: Rule::NoMemory,
    },
    Key {
        name: "seed",
        rule: Rule::NoMemory,
    },
    Key {
        name: "special_tokens",
        rule: Rule::NoMemory,
    },
    Key {
        name: "tokens",
        rule: Rule::NoMemory,
    },
    Key {
        name: "wandb_project",
        rule: Rule::NoMemory,
    },
    Key {
        name: "wandb_entity",
        rule: Rule::NoMemory,
    },
    Key {
        name: "wandb_watch",
        rule: Rule::NoMemory,
    },
    Key {
        name: "wandb_name",
        rule: Rule::NoMemory,
    },
    Key {
        name: "wandb_log_model",
        rule: Rule::NoMemory,
    },
    Key {
        name: "hub_model_id",
        rule: Rule::NoMemory,
    },
    Key {
        name: "hub_strategy",
        rule: Rule::NoMemory,
    },
    Key {
        name: "neftune_noise_alpha",
        rule: Rule::NoMemory,
    },
    Key {
        name: "ddp_timeout",
        rule: Rule::NoMemory,
    },
    Key {
        name: "use_tensorboard",
        rule: Rule::NoMemory,
    },
    Key {
        name: "remove_unused_columns",
        rule: Rule::NoMemory,
    },
];

/// axolotl's defaults: `micro_batch_size` 1 and `sequence_len` 512
/// (`utils/schemas/config.py`), and the Trainer's adamw_torch.
pub const DEFAULTS: &[Absent] = &[
    Absent {
        key: "micro_batch_size",
        value: "1",
        flags: &[("--micro-batch", "1")],
    },
    Absent {
        key: "sequence_len",
        value: "512",
        flags: &[("--seq-len", "512")],
    },
    Absent {
        key: "optimizer",
        value: "adamw_torch",
        flags: &[("--optimizer", "adamw")],
    },
];

/// A change in these keys.
pub fn spell(change: &Change) -> Option<Vec<(String, String)>> {
    let pairs: Vec<(&str, String)> = match change {
        Change::MicroBatch {
            micro_batch,
            accumulation,
        } => vec![
            ("micro_batch_size", micro_batch.to_string()),
            ("gradient_accumulation_steps", accumulation.to_string()),
        ],
        Change::FusedLoss => vec![("liger_fused_linear_cross_entropy", "true".to_string())],
        Change::Recompute => vec![("gradient_checkpointing", "true".to_string())],
        Change::OffloadActivations => vec![("activation_offloading", "true".to_string())],
        Change::Zero(stage) => vec![("deepspeed", format!("deepspeed_configs/zero{stage}.json"))],
        Change::FullShard => vec![
            ("fsdp_version", "2".to_string()),
            ("fsdp_config.reshard_after_forward", "true".to_string()),
        ],
        Change::Optimizer8bit => vec![("optimizer", "adamw_bnb_8bit".to_string())],
        Change::Lora => vec![
            ("adapter", "lora".to_string()),
            ("lora_r", "16".to_string()),
            ("lora_target_linear", "true".to_string()),
        ],
        Change::Qlora { with_lora } => {
            let mut pairs = vec![
                ("adapter", "qlora".to_string()),
                ("load_in_4bit", "true".to_string()),
            ];
            if !with_lora {
                pairs.push(("lora_r", "16".to_string()));
                pairs.push(("lora_target_linear", "true".to_string()));
            }
            pairs
        }
        Change::PagedOptimizer8bit => vec![("optimizer", "paged_adamw_8bit".to_string())],
        _ => return None,
    };
    Some(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}
