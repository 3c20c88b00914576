//! HF `TrainingArguments` and TRL `SFTConfig`, as JSON or YAML (the file
//! `HfArgumentParser.parse_yaml_file` / `parse_json_file` reads), with the
//! keys of TRL's `ModelConfig` that TRL's scripts take from the same file.
//!
//! Key names: transformers `training_args.py`, TRL `sft_config.py` and
//! `model_config.py`. Precision follows the Trainer: `bf16: true` autocasts
//! the weights as loaded (fp32 unless `torch_dtype` says otherwise).

use serde_json::{Map, Value};

use super::Change;
use super::key::{Absent, Choice, Effect, Key, Rule, given, name_of, on, truth};

/// Every optimizer name transformers accepts for `optim`
/// (`OptimizerNames` in `training_args.py`) and the trainmem optimizer it is.
pub const OPTIM: &[(&str, Choice)] = &[
    ("adamw_torch", Choice::Set(&[("--optimizer", "adamw")])),
    (
        "adamw_torch_fused",
        Choice::Set(&[("--optimizer", "adamw")]),
    ),
    ("adamw_apex_fused", Choice::Set(&[("--optimizer", "adamw")])),
    (
        "adamw_torch_npu_fused",
        Choice::Set(&[("--optimizer", "adamw")]),
    ),
    ("adamw_hf", Choice::Set(&[("--optimizer", "adamw")])),
    ("adamw_torch_xla", Choice::NotModelled("XLA's AdamW on TPU")),
    (
        "adamw_anyprecision",
        Choice::NotModelled("torchdistx AnyPrecisionAdamW's Kahan buffers"),
    ),
    (
        "adamw_torch_4bit",
        Choice::Set(&[("--optimizer", "adamw-4bit")]),
    ),
    (
        "adamw_torch_8bit",
        Choice::Set(&[("--optimizer", "adamw-8bit")]),
    ),
    (
        "adamw_bnb_8bit",
        Choice::Set(&[("--optimizer", "adamw-8bit")]),
    ),
    ("adamw_8bit", Choice::Set(&[("--optimizer", "adamw-8bit")])),
    ("adafactor", Choice::Set(&[("--optimizer", "adafactor-hf")])),
    ("sgd", Choice::Set(&[("--optimizer", "sgd")])),
    ("adagrad", Choice::Set(&[("--optimizer", "adagrad")])),
    ("rmsprop", Choice::Set(&[("--optimizer", "rmsprop")])),
    ("rmsprop_bnb", Choice::Set(&[("--optimizer", "rmsprop")])),
    (
        "rmsprop_bnb_32bit",
        Choice::Set(&[("--optimizer", "rmsprop")]),
    ),
    (
        "rmsprop_bnb_8bit",
        Choice::NotModelled("bitsandbytes' 8-bit RMSprop"),
    ),
    ("lion_32bit", Choice::Set(&[("--optimizer", "lion")])),
    ("lion_8bit", Choice::Set(&[("--optimizer", "lion-8bit")])),
    (
        "paged_adamw_32bit",
        Choice::Set(&[("--optimizer", "paged-adamw")]),
    ),
    (
        "paged_adamw_8bit",
        Choice::Set(&[("--optimizer", "paged-adamw-8bit")]),
    ),
    ("paged_lion_32bit", Choice::NotModelled("paged 32-bit Lion")),
    ("paged_lion_8bit", Choice::NotModelled("paged 8-bit Lion")),
    ("ademamix", Choice::NotModelled("AdEMAMix's three states")),
    ("ademamix_8bit", Choice::NotModelled("8-bit AdEMAMix")),
    (
        "paged_ademamix_32bit",
        Choice::NotModelled("paged AdEMAMix"),
    ),
    (
        "paged_ademamix_8bit",
        Choice::NotModelled("paged 8-bit AdEMAMix"),
    ),
    (
        "galore_adamw",
        Choice::Set(&[("--optimizer", "galore-adamw")]),
    ),
    (
        "galore_adamw_8bit",
        Choice::Set(&[("--optimizer", "galore-adamw-8bit")]),
    ),
    ("galore_adafactor", Choice::NotModelled("GaLore Adafactor")),
    (
        "galore_adamw_layerwise",
        Choice::NotModelled("layer-wise GaLore, which steps in backward"),
    ),
    (
        "galore_adamw_8bit_layerwise",
        Choice::NotModelled("layer-wise 8-bit GaLore"),
    ),
    (
        "galore_adafactor_layerwise",
        Choice::NotModelled("layer-wise GaLore Adafactor"),
    ),
    (
        "apollo_adamw",
        Choice::NotModelled("APOLLO's low-rank states"),
    ),
    (
        "apollo_adamw_layerwise",
        Choice::NotModelled("layer-wise APOLLO"),
    ),
    ("lomo", Choice::Set(&[("--optimizer", "lomo")])),
    ("adalomo", Choice::Set(&[("--optimizer", "adalomo")])),
    ("grokadamw", Choice::NotModelled("GrokAdamW's extra state")),
    (
        "schedule_free_adamw",
        Choice::Set(&[("--optimizer", "schedule-free-adamw")]),
    ),
    (
        "schedule_free_radam",
        Choice::NotModelled("schedule-free RAdam"),
    ),
    (
        "schedule_free_sgd",
        Choice::NotModelled("schedule-free SGD"),
    ),
    ("stable_adamw", Choice::NotModelled("optimi's StableAdamW")),
];

/// `bf16`/`fp16` with `torch_dtype` (`dtype` in newer TRL): weights loaded in
/// half precision train in half precision; fp32 weights with `bf16: true`
/// train under autocast (amp).
fn precision(value: &Value, document: &Map<String, Value>) -> Result<Effect, String> {
    if matches!(value, Value::Null | Value::Bool(false)) {
        return Ok(Effect::Nothing("off".to_string()));
    }
    let half = if on(document, "bf16")? {
        Some("bf16")
    } else if on(document, "fp16")? {
        Some("fp16")
    } else {
        None
    };
    let dtype = document
        .get("torch_dtype")
        .or_else(|| document.get("dtype"))
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase);
    let weights = match dtype.as_deref() {
        None | Some("float32" | "fp32" | "auto") => None,
        Some("bfloat16" | "bf16") => Some("bf16"),
        Some("float16" | "fp16" | "half") => Some("fp16"),
        Some(_) => return Err("expected bfloat16, float16, float32 or auto".to_string()),
    };
    // FSDP keeps fp32 weights as the master copy of half-precision compute
    // weights (its MixedPrecision policy); the Trainer autocasts otherwise.
    let sharded = match document.get("fsdp") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => false,
        Some(Value::String(s)) => !s.trim().is_empty(),
        Some(_) => true,
    };
    let recipe = match (weights, half) {
        (Some(weights), _) => weights.to_string(),
        (None, Some(half)) if sharded => format!("mixed-{half}"),
        (None, Some(half)) => format!("amp-{half}"),
        (None, None) => return Ok(Effect::Nothing("fp32, the default".to_string())),
    };
    let mut settings = vec![super::Setting {
        flag: "--precision",
        value: Some(recipe),
    }];
    // Half-precision weights with bf16/fp16 on: the Trainer still runs the
    // forward under autocast (accelerate's mixed precision), which changes
    // what peft's fp32 adapters save; DeepSpeed's engine does not autocast.
    if weights.is_some() && half.is_some() && !sharded && !given(document, "deepspeed") {
        settings.push(super::Setting {
            flag: "--autocast",
            value: None,
        });
    }
    Ok(Effect::Set(settings))
}

/// Whether TRL's `use_peft` is on.
fn peft(document: &Map<String, Value>) -> Result<bool, String> {
    on(document, "use_peft")
}

/// `use_peft`: LoRA of `lora_r` (TRL's default 16) on `lora_target_modules`.
fn use_peft(value: &Value, document: &Map<String, Value>) -> Result<Effect, String> {
    if !truth(value)? {
        return Ok(Effect::Nothing("off: full fine-tuning".to_string()));
    }
    let rank = match document.get("lora_r") {
        Some(r) => super::key::count_of("lora_r", r)?,
        None => TRL_LORA_R,
    };
    let targets = match document.get("lora_target_modules") {
        None | Some(Value::Null) => "all-linear".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) if items.is_empty() => {
            return Err("lora_target_modules: an empty list puts LoRA adapters on no module; accepted: module names such as [q_proj, v_proj], or all-linear".to_string());
        }
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| i.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or("lora_target_modules: expected names")?
            .join(","),
        Some(_) => return Err("lora_target_modules: expected names".to_string()),
    };
    let mut flags = vec![
        super::Setting {
            flag: "--lora-rank",
            value: Some(rank.to_string()),
        },
        super::Setting {
            flag: "--lora-targets",
            value: Some(targets),
        },
    ];
    if quantized(document)? {
        // TRL's SFTTrainer on a quantized model casts every trainable
        // parameter to bf16 after `get_peft_model` (`sft_trainer.py` 1.16:
        // "When using QLoRA, the PEFT adapter weights are converted to bf16").
        flags.push(super::Setting {
            flag: "--lora-dtype",
            value: Some("bf16".to_string()),
        });
    }
    Ok(Effect::Set(flags))
}

/// Whether `load_in_4bit` or `load_in_8bit` is on.
fn quantized(document: &Map<String, Value>) -> Result<bool, String> {
    for key in ["load_in_4bit", "load_in_8bit"] {
        if on(document, key)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// TRL's `ModelConfig.lora_r` default.
const TRL_LORA_R: u64 = 16;

/// A LoRA key: read with `use_peft`.
fn with_peft(_: &Value, document: &Map<String, Value>) -> Result<Effect, String> {
    Ok(Effect::Nothing(if peft(document)? {
        "read with use_peft".to_string()
    } else {
        "unused: use_peft is off".to_string()
    }))
}

/// `load_in_4bit`: the base in `bnb_4bit_quant_type` (nf4 by default).
fn load_in_4bit(value: &Value, document: &Map<String, Value>) -> Result<Effect, String> {
    if !truth(value)? {
        return Ok(Effect::Nothing("off".to_string()));
    }
    let kind = match document.get("bnb_4bit_quant_type").and_then(Value::as_str) {
        None => "nf4",
        Some(kind) if kind.eq_ignore_ascii_case("nf4") => "nf4",
        Some(kind) if kind.eq_ignore_ascii_case("fp4") => "fp4",
        Some(_) => return Err("bnb_4bit_quant_type: expected nf4 or fp4".to_string()),
    };
    let mut flags = vec![super::Setting {
        flag: "--quantize",
        value: Some(kind.to_string()),
    }];
    if on(document, "use_bnb_nested_quant")? {
        flags.push(super::Setting {
            flag: "--double-quant",
            value: Some("on".to_string()),
        });
    }
    Ok(Effect::Set(flags))
}

/// `fsdp`: `"full_shard auto_wrap"`, a list of the same options, or false.
/// The framework is FSDP1, transformers' default, unless the version keys
/// say 2 (read here too, so that their order in the file does not matter).
pub fn fsdp(value: &Value, document: &Map<String, Value>) -> Result<Effect, String> {
    let words: Vec<String> = match value {
        Value::Bool(false) | Value::Null => Vec::new(),
        Value::String(text) => text
            .split_whitespace()
            .map(str::to_ascii_lowercase)
            .collect(),
        Value::Array(items) => items
            .iter()
            .map(|i| i.as_str().map(str::to_ascii_lowercase))
            .collect::<Option<Vec<_>>>()
            .ok_or("expected FSDP options")?,
        _ => return Err("expected FSDP options such as `full_shard auto_wrap`".to_string()),
    };
    let mut flags = Vec::new();
    for word in &words {
        let strategy = match word.as_str() {
            "full_shard" => "full-shard",
            "shard_grad_op" => "shard-grad-op",
            "hybrid_shard" => "hybrid-shard",
            "no_shard" => "no-shard",
            "offload" => {
                flags.push(super::Setting { flag: "--offload", value: Some("optimizer+params".to_string()) });
                continue;
            }
            "auto_wrap" => continue,
            "hybrid_shard_zero2" => return Ok(Effect::NotModelled("hybrid_shard_zero2".to_string())),
            _ => return Err("accepted options: full_shard, shard_grad_op, hybrid_shard, hybrid_shard_zero2, no_shard, offload, auto_wrap".to_string()),
        };
        flags.push(super::Setting {
            flag: "--fsdp",
            value: Some(strategy.to_string()),
        });
    }
    if flags.is_empty() {
        return Ok(Effect::Nothing("no FSDP".to_string()));
    }
    let config = document.get("fsdp_config");
    let version = document
        .get("fsdp_version")
        .or_else(|| config.and_then(|c| c.get("fsdp_version")))
        .or_else(|| config.and_then(|c| c.get("version")))
        .and_then(name_of);
    flags.push(super::Setting {
        flag: "--framework",
        value: Some(
            if version.as_deref() == Some("2") {
                "fsdp2"
            } else {
                "fsdp1"
            }
            .to_string(),
        ),
    });
    Ok(Effect::Set(flags))
}

/// `fsdp_config.version`, with or without the `fsdp_` prefix transformers strips.
pub const FSDP_VERSION: &[(&str, Choice)] = &[
    ("1", Choice::Set(&[("--framework", "fsdp1")])),
    ("2", Choice::Set(&[("--framework", "fsdp2")])),
];

/// The keys, each with the flags it sets.
pub const KEYS: &[Key] = &[
    Key {
        name: "per_device_train_batch_size",
        rule: Rule::Count("--micro-batch"),
    },
    Key {
        name: "gradient_accumulation_steps",
        rule: Rule::Count("--grad-accumulation"),
    },
    Key {
        name: "gradient_checkpointing",
        rule: Rule::Switch(&[("--recompute", "full")]),
    },
    Key {
        name: "gradient_checkpointing_kwargs",
        rule: Rule::Read(reentrant),
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
        name: "torch_dtype",
        rule: Rule::Read(precision),
    },
    Key {
        name: "dtype",
        rule: Rule::Read(precision),
    },
    Key {
        name: "optim",
        rule: Rule::Choice(OPTIM),
    },
    Key {
        name: "optim_args",
        rule: Rule::NotModelled(
            "optimizer arguments (a GaLore rank, betas) are not read; give --optimizer-option",
        ),
    },
    Key {
        name: "optim_target_modules",
        rule: Rule::NotModelled("GaLore on some modules only"),
    },
    Key {
        name: "max_seq_length",
        rule: Rule::Count("--seq-len"),
    },
    Key {
        name: "max_length",
        rule: Rule::Count("--seq-len"),
    },
    Key {
        name: "packing",
        rule: Rule::Read(|v, d| {
            super::key::packing(v, d, &["attn_implementation"], "the full sequence length")
        }),
    },
    Key {
        name: "padding_free",
        rule: Rule::Read(|v, d| {
            super::key::packing(v, d, &["attn_implementation"], "the full sequence length")
        }),
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
        name: "fsdp_config.version",
        rule: Rule::Choice(FSDP_VERSION),
    },
    Key {
        name: "fsdp_config.fsdp_version",
        rule: Rule::Choice(FSDP_VERSION),
    },
    Key {
        name: "fsdp_config.activation_checkpointing",
        rule: Rule::Switch(&[("--recompute", "full")]),
    },
    Key {
        name: "fsdp_config.fsdp_activation_checkpointing",
        rule: Rule::Switch(&[("--recompute", "full")]),
    },
    Key {
        name: "fsdp_config.cpu_ram_efficient_loading",
        rule: Rule::Switch(&[("--init", "rank0")]),
    },
    Key {
        name: "fsdp_config.fsdp_cpu_ram_efficient_loading",
        rule: Rule::Switch(&[("--init", "rank0")]),
    },
    Key {
        name: "fsdp_config.backward_prefetch",
        rule: Rule::NoMemory,
    },
    Key {
        name: "fsdp_config.forward_prefetch",
        rule: Rule::NoMemory,
    },
    Key {
        name: "fsdp_config.limit_all_gathers",
        rule: Rule::NoMemory,
    },
    Key {
        name: "fsdp_config.use_orig_params",
        rule: Rule::NoMemory,
    },
    Key {
        name: "fsdp_config.sync_module_states",
        rule: Rule::NoMemory,
    },
    Key {
        name: "fsdp_config.transformer_layer_cls_to_wrap",
        rule: Rule::NoMemory,
    },
    Key {
        name: "fsdp_config.fsdp_transformer_layer_cls_to_wrap",
        rule: Rule::NoMemory,
    },
    Key {
        name: "fsdp_config.auto_wrap_policy",
        rule: Rule::NoMemory,
    },
    Key {
        name: "fsdp_config.min_num_params",
        rule: Rule::NoMemory,
    },
    Key {
        name: "fsdp_config.state_dict_type",
        rule: Rule::NoMemory,
    },
    Key {
        name: "fsdp_config.reshard_after_forward",
        rule: Rule::Choice(&[
            ("true", Choice::Set(&[("--fsdp", "full-shard")])),
            ("false", Choice::Set(&[("--fsdp", "shard-grad-op")])),
        ]),
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
        name: "torch_compile_mode",
        rule: Rule::NoMemory,
    },
    Key {
        name: "activation_offloading",
        rule: Rule::Switch(&[("--offload-activations", "")]),
    },
    Key {
        name: "use_liger_kernel",
        rule: Rule::Read(liger),
    },
    Key {
        name: "liger_kernel_config",
        rule: Rule::NotModelled("Liger's per-kernel choices"),
    },
    Key {
        name: "auto_find_batch_size",
        rule: Rule::Read(|v, _| {
            Ok(if truth(v)? {
                Effect::NotModelled(
                    "the Trainer halves the batch after each out-of-memory error".to_string(),
                )
            } else {
                Effect::Nothing("off".to_string())
            })
        }),
    },
    // TRL's ModelConfig, read from the same file by TRL's scripts.
    Key {
        name: "model_name_or_path",
        rule: Rule::Text("--model"),
    },
    Key {
        name: "attn_implementation",
        rule: Rule::Choice(&[
            ("eager", Choice::Set(&[("--attention", "eager")])),
            ("sdpa", Choice::Set(&[("--attention", "sdpa")])),
            (
                "flash_attention_2",
                Choice::Set(&[("--attention", "flash")]),
            ),
            (
                "flash_attention_3",
                Choice::Set(&[("--attention", "flash")]),
            ),
            (
                "flex_attention",
                Choice::NotModelled("flex attention's saved tensors"),
            ),
        ]),
    },
    Key {
        name: "use_peft",
        rule: Rule::Read(use_peft),
    },
    Key {
        name: "lora_r",
        rule: Rule::Read(with_peft),
    },
    Key {
        name: "lora_target_modules",
        rule: Rule::Read(with_peft),
    },
    Key {
        name: "lora_alpha",
        rule: Rule::NoMemory,
    },
    Key {
        name: "lora_dropout",
        rule: Rule::Read(lora_dropout),
    },
    Key {
        name: "lora_task_type",
        rule: Rule::NoMemory,
    },
    Key {
        name: "use_rslora",
        rule: Rule::NoMemory,
    },
    Key {
        name: "use_dora",
        rule: Rule::Switch(&[("--lora-dora", "")]),
    },
    Key {
        name: "lora_modules_to_save",
        rule: Rule::Text("--lora-modules-to-save"),
    },
    Key {
        name: "load_in_4bit",
        rule: Rule::Read(load_in_4bit),
    },
    Key {
        name: "load_in_8bit",
        rule: Rule::Switch(&[("--quantize", "int8")]),
    },
    Key {
        name: "bnb_4bit_quant_type",
        rule: Rule::Read(|_, _| Ok(Effect::Nothing("read with load_in_4bit".to_string()))),
    },
    Key {
        name: "use_bnb_nested_quant",
        rule: Rule::Read(|_, _| Ok(Effect::Nothing("read with load_in_4bit".to_string()))),
    },
    // Keys that do not change the training step's memory.
    Key {
        name: "output_dir",
        rule: Rule::NoMemory,
    },
    Key {
        name: "overwrite_output_dir",
        rule: Rule::NoMemory,
    },
    Key {
        name: "do_train",
        rule: Rule::NoMemory,
    },
    Key {
        name: "do_eval",
        rule: Rule::NoMemory,
    },
    Key {
        name: "eval_strategy",
        rule: Rule::NoMemory,
    },
    Key {
        name: "evaluation_strategy",
        rule: Rule::NoMemory,
    },
    Key {
        name: "eval_steps",
        rule: Rule::NoMemory,
    },
    Key {
        name: "per_device_eval_batch_size",
        rule: Rule::NoMemory,
    },
    Key {
        name: "learning_rate",
        rule: Rule::NoMemory,
    },
    Key {
        name: "weight_decay",
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
        name: "max_grad_norm",
        rule: Rule::NoMemory,
    },
    Key {
        name: "num_train_epochs",
        rule: Rule::NoMemory,
    },
    Key {
        name: "max_steps",
        rule: Rule::NoMemory,
    },
    Key {
        name: "lr_scheduler_type",
        rule: Rule::NoMemory,
    },
    Key {
        name: "lr_scheduler_kwargs",
        rule: Rule::NoMemory,
    },
    Key {
        name: "warmup_ratio",
        rule: Rule::NoMemory,
    },
    Key {
        name: "warmup_steps",
        rule: Rule::NoMemory,
    },
    Key {
        name: "logging_dir",
        rule: Rule::NoMemory,
    },
    Key {
        name: "logging_strategy",
        rule: Rule::NoMemory,
    },
    Key {
        name: "logging_steps",
        rule: Rule::NoMemory,
    },
    Key {
        name: "logging_first_step",
        rule: Rule::NoMemory,
    },
    Key {
        name: "save_strategy",
        rule: Rule::NoMemory,
    },
    Key {
        name: "save_steps",
        rule: Rule::NoMemory,
    },
    Key {
        name: "save_total_limit",
        rule: Rule::NoMemory,
    },
    Key {
        name: "save_only_model",
        rule: Rule::NoMemory,
    },
    Key {
        name: "save_safetensors",
        rule: Rule::NoMemory,
    },
    Key {
        name: "seed",
        rule: Rule::NoMemory,
    },
    Key {
        name: "data_seed",
        rule: Rule::NoMemory,
    },
    Key {
        name: "tf32",
        rule: Rule::NoMemory,
    },
    Key {
        name: "bf16_full_eval",
        rule: Rule::NoMemory,
    },
    Key {
        name: "fp16_full_eval",
        rule: Rule::NoMemory,
    },
    Key {
        name: "dataloader_num_workers",
        rule: Rule::NoMemory,
    },
    Key {
        name: "dataloader_pin_memory",
        rule: Rule::NoMemory,
    },
    Key {
        name: "run_name",
        rule: Rule::NoMemory,
    },
    Key {
        name: "remove_unused_columns",
        rule: Rule::NoMemory,
    },
    Key {
        name: "load_best_model_at_end",
        rule: Rule::NoMemory,
    },
    Key {
        name: "metric_for_best_model",
        rule: Rule::NoMemory,
    },
    Key {
        name: "report_to",
        rule: Rule::NoMemory,
    },
    Key {
        name: "push_to_hub",
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
        name: "hub_private_repo",
        rule: Rule::NoMemory,
    },
    Key {
        name: "resume_from_checkpoint",
        rule: Rule::NoMemory,
    },
    Key {
        name: "ddp_find_unused_parameters",
        rule: Rule::NoMemory,
    },
    Key {
        name: "ddp_timeout",
        rule: Rule::NoMemory,
    },
    Key {
        name: "group_by_length",
        rule: Rule::NoMemory,
    },
    Key {
        name: "log_level",
        rule: Rule::NoMemory,
    },
    Key {
        name: "disable_tqdm",
        rule: Rule::NoMemory,
    },
    Key {
        name: "include_tokens_per_second",
        rule: Rule::NoMemory,
    },
    Key {
        name: "average_tokens_across_devices",
        rule: Rule::NoMemory,
    },
    Key {
        name: "neftune_noise_alpha",
        rule: Rule::NoMemory,
    },
    Key {
        name: "dataset_text_field",
        rule: Rule::NoMemory,
    },
    Key {
        name: "dataset_num_proc",
        rule: Rule::NoMemory,
    },
    Key {
        name: "dataset_kwargs",
        rule: Rule::NoMemory,
    },
    Key {
        name: "dataset_name",
        rule: Rule::NoMemory,
    },
    Key {
        name: "dataset_config",
        rule: Rule::NoMemory,
    },
    Key {
        name: "dataset_train_split",
        rule: Rule::NoMemory,
    },
    Key {
        name: "dataset_test_split",
        rule: Rule::NoMemory,
    },
    Key {
        name: "completion_only_loss",
        rule: Rule::NoMemory,
    },
    Key {
        name: "assistant_only_loss",
        rule: Rule::NoMemory,
    },
    Key {
        name: "chat_template_path",
        rule: Rule::NoMemory,
    },
    Key {
        name: "eos_token",
        rule: Rule::NoMemory,
    },
    Key {
        name: "pad_token",
        rule: Rule::NoMemory,
    },
    Key {
        name: "model_revision",
        rule: Rule::NoMemory,
    },
    Key {
        name: "trust_remote_code",
        rule: Rule::NoMemory,
    },
    Key {
        name: "model_init_kwargs",
        rule: Rule::NoMemory,
    },
];

/// What the Trainer does when a key is absent: `per_device_train_batch_size`
/// is 8, `optim` is adamw_torch, and TRL's `SFTConfig.max_length` is 1024.
pub const DEFAULTS: &[Absent] = &[
    Absent {
        key: "per_device_train_batch_size",
        value: "8",
        flags: &[("--micro-batch", "8")],
    },
    Absent {
        key: "max_length",
        value: "1024",
        flags: &[("--seq-len", "1024")],
    },
    Absent {
        key: "optim",
        value: "adamw_torch",
        flags: &[("--optimizer", "adamw")],
    },
];

/// `gradient_checkpointing_kwargs.use_reentrant`: true re-runs each whole
/// layer in backward (`--recompute-reentrant`); read only with
/// `gradient_checkpointing` on. Without the key transformers' default
/// depends on its version; trainmem prices the non-reentrant one.
pub fn reentrant(value: &Value, document: &Map<String, Value>) -> Result<Effect, String> {
    let checkpointing = document
        .get("gradient_checkpointing")
        .and_then(|v| truth(v).ok())
        .unwrap_or(false);
    let reentrant = match value.get("use_reentrant") {
        Some(flag) => truth(flag)?,
        None => {
            return Ok(Effect::Nothing(
                "use_reentrant not given: the non-reentrant checkpoint is priced".to_string(),
            ));
        }
    };
    Ok(match (checkpointing, reentrant) {
        (true, true) => Effect::Set(vec![super::Setting {
            flag: "--recompute-reentrant",
            value: None,
        }]),
        (true, false) => {
            Effect::Nothing("use_reentrant false: the non-reentrant checkpoint".to_string())
        }
        (false, _) => Effect::Nothing("unused without gradient_checkpointing".to_string()),
    })
}

/// `torch_compile: true`: not modelled.
pub fn compile(value: &Value, _: &Map<String, Value>) -> Result<Effect, String> {
    Ok(if truth(value)? {
        Effect::NotModelled(
            "torch.compile changes which activations are saved; trainmem prices eager PyTorch"
                .to_string(),
        )
    } else {
        Effect::Nothing("off".to_string())
    })
}

/// `use_liger_kernel: true`: Liger's fused linear cross-entropy, which
/// never materializes the logits (`--loss fused`); its RMSNorm, SwiGLU and
/// RoPE kernels are priced as PyTorch's.
pub fn liger(value: &Value, _: &Map<String, Value>) -> Result<Effect, String> {
    Ok(if truth(value)? {
        Effect::Set(vec![super::Setting {
            flag: "--loss",
            value: Some("fused".to_string()),
        }])
    } else {
        Effect::Nothing("off".to_string())
    })
}

/// `lora_dropout`: each adapter keeps its own dropped input above 0. Read
/// only where LoRA is on (`adapter` in axolotl, `use_peft` in TRL).
pub fn lora_dropout(value: &Value, document: &Map<String, Value>) -> Result<Effect, String> {
    let p = value
        .as_f64()
        .filter(|p| (0.0..1.0).contains(p))
        .ok_or("expected a probability such as 0.05")?;
    let adapter = document
        .get("adapter")
        .and_then(Value::as_str)
        .is_some_and(|a| !a.trim().is_empty());
    if !adapter && !peft(document)? {
        return Ok(Effect::Nothing("unused without LoRA".to_string()));
    }
    Ok(Effect::Set(vec![super::Setting {
        flag: "--lora-dropout",
        value: Some(name_of(value).unwrap_or_else(|| p.to_string())),
    }]))
}

/// A change in these keys.
pub fn spell(change: &Change) -> Option<Vec<(String, String)>> {
    let pairs: Vec<(&str, String)> = match change {
        Change::MicroBatch {
            micro_batch,
            accumulation,
        } => vec![
            ("per_device_train_batch_size", micro_batch.to_string()),
            ("gradient_accumulation_steps", accumulation.to_string()),
        ],
        Change::FusedLoss => vec![("use_liger_kernel", "true".to_string())],
        Change::Recompute => vec![("gradient_checkpointing", "true".to_string())],
        Change::OffloadActivations => vec![("activation_offloading", "true".to_string())],
        Change::FullShard => vec![("fsdp", "full_shard auto_wrap".to_string())],
        Change::Optimizer8bit => vec![("optim", "adamw_bnb_8bit".to_string())],
        Change::Lora => vec![
            ("use_peft", "true".to_string()),
            ("lora_r", "16".to_string()),
            ("lora_target_modules", "all-linear".to_string()),
        ],
        Change::Qlora { with_lora } => {
            let mut pairs = vec![("load_in_4bit", "true".to_string())];
            if !with_lora {
                pairs.splice(
                    0..0,
                    [
                        ("use_peft", "true".to_string()),
                        ("lora_r", "16".to_string()),
                        ("lora_target_modules", "all-linear".to_string()),
                    ],
                );
            }
            pairs
        }
        Change::PagedOptimizer8bit => vec![("optim", "paged_adamw_8bit".to_string())],
        _ => return None,
    };
    Some(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}
