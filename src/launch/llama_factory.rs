//! A LLaMA-Factory training YAML (`llamafactory-cli train FILE`, the files
//! of its `examples/`): HF TrainingArguments plus LLaMA-Factory's model,
//! data and fine-tuning arguments (`hparams/`). LLaMA-Factory loads the
//! model in the compute dtype (`bf16: true`: bfloat16) and trains LoRA
//! adapters in fp32 over it; full fine-tuning keeps fp32 trainable weights
//! under autocast unless `pure_bf16`. Gradient checkpointing is on unless
//! `disable_gradient_checkpointing`.

use serde_json::{Map, Value};

use super::key::{
    Absent, Choice, Effect, Key, Rule, choose, count_of, given, name_of, on, truth, truth_or,
};
use super::training_arguments::{OPTIM, lora_dropout};
use super::{Change, Setting};

/// `finetuning_type` with `bf16`/`fp16`/`pure_bf16` and the LoRA options.
fn finetuning(value: &Value, document: &Map<String, Value>) -> Result<Effect, String> {
    let kind = name_of(value)
        .ok_or("accepted: full, freeze, lora")?
        .to_ascii_lowercase();
    let half = if on(document, "bf16")? || on(document, "pure_bf16")? {
        Some("bf16")
    } else if on(document, "fp16")? {
        Some("fp16")
    } else {
        None
    };
    let mut flags = Vec::new();
    match kind.as_str() {
        "full" => {
            let recipe = match half {
                Some(_) if on(document, "pure_bf16")? => "bf16".to_string(),
                Some(half) => format!("amp-{half}"),
                None => "fp32".to_string(),
            };
            flags.push(Setting {
                flag: "--precision",
                value: Some(recipe),
            });
        }
        "lora" => {
            if let Some(half) = half {
                flags.push(Setting {
                    flag: "--precision",
                    value: Some(half.to_string()),
                });
                if on(document, "pure_bf16")? {
                    flags.push(Setting {
                        flag: "--lora-dtype",
                        value: Some(half.to_string()),
                    });
                } else if !given(document, "deepspeed") {
                    // The Trainer's mixed precision: autocast over the
                    // half-precision base and the fp32 adapters.
                    flags.push(Setting {
                        flag: "--autocast",
                        value: None,
                    });
                }
            }
            let rank = match document.get("lora_rank") {
                Some(r) => count_of("lora_rank", r)?,
                None => LORA_RANK,
            };
            let targets = match document.get("lora_target").and_then(name_of) {
                None => "all-linear".to_string(),
                Some(t) if t == "all" => "all-linear".to_string(),
                Some(t) => t.split(',').map(str::trim).collect::<Vec<_>>().join(","),
            };
            flags.push(Setting {
                flag: "--lora-rank",
                value: Some(rank.to_string()),
            });
            flags.push(Setting {
                flag: "--lora-targets",
                value: Some(targets),
            });
            match document.get("quantization_bit").map(name_of) {
                None | Some(None) => {}
                Some(Some(bits)) if bits == "4" => {
                    let kind = document
                        .get("quantization_type")
                        .and_then(name_of)
                        .unwrap_or_else(|| "nf4".to_string());
                    flags.push(Setting {
                        flag: "--quantize",
                        value: Some(kind),
                    });
                    let double = truth_or(document.get("double_quantization"), true)?;
                    if double {
                        flags.push(Setting {
                            flag: "--double-quant",
                            value: Some("on".to_string()),
                        });
                    }
                }
                Some(Some(bits)) if bits == "8" => {
                    flags.push(Setting {
                        flag: "--quantize",
                        value: Some("int8".to_string()),
                    });
                }
                Some(Some(_)) => return Err("quantization_bit: accepted 4 or 8".to_string()),
            }
        }
        "freeze" => {
            return Ok(Effect::NotModelled(
                "freeze tuning (the last layers trained): give --freeze".to_string(),
            ));
        }
        _ => return Err("accepted: full, freeze, lora".to_string()),
    }
    Ok(Effect::Set(flags))
}

/// LLaMA-Factory's default `lora_rank`.
const LORA_RANK: u64 = 8;

fn read_with(what: &'static str) -> Effect {
    Effect::Nothing(format!("read with {what}"))
}

/// `use_galore`: GaLore AdamW of `galore_rank` (LLaMA-Factory's default 16).
fn galore(value: &Value, document: &Map<String, Value>) -> Result<Effect, String> {
    if !truth(value)? {
        return Ok(Effect::Nothing("off".to_string()));
    }
    if on(document, "galore_layerwise")? {
        return Ok(Effect::NotModelled("layer-wise GaLore".to_string()));
    }
    let rank = match document.get("galore_rank") {
        Some(r) => count_of("galore_rank", r)?,
        None => GALORE_RANK,
    };
    Ok(Effect::Set(vec![
        Setting {
            flag: "--optimizer",
            value: Some("galore-adamw".to_string()),
        },
        Setting {
            flag: "--optimizer-option",
            value: Some(format!("rank={rank}")),
        },
    ]))
}

/// LLaMA-Factory's default `galore_rank`.
const GALORE_RANK: u64 = 16;

/// A switch that changes memory in a way not modelled when on.
fn not_modelled_on(value: &Value, why: &str) -> Result<Effect, String> {
    Ok(if truth(value)? {
        Effect::NotModelled(why.to_string())
    } else {
        Effect::Nothing("off".to_string())
    })
}

/// The keys, each with the flags it sets.
pub const KEYS: &[Key] = &[
    Key {
        name: "model_name_or_path",
        rule: Rule::Text("--model"),
    },
    Key {
        name: "finetuning_type",
        rule: Rule::Read(finetuning),
    },
    Key {
        name: "lora_rank",
        rule: Rule::Read(|_, _| Ok(read_with("finetuning_type"))),
    },
    Key {
        name: "lora_target",
        rule: Rule::Read(|_, _| Ok(read_with("finetuning_type"))),
    },
    Key {
        name: "quantization_bit",
        rule: Rule::Read(|_, _| Ok(read_with("finetuning_type"))),
    },
    Key {
        name: "quantization_type",
        rule: Rule::Read(|_, _| Ok(read_with("finetuning_type"))),
    },
    Key {
        name: "double_quantization",
        rule: Rule::Read(|_, _| Ok(read_with("finetuning_type"))),
    },
    Key {
        name: "quantization_method",
        rule: Rule::Choice(&[
            ("bitsandbytes", Choice::Nothing("bitsandbytes, as priced")),
            ("bnb", Choice::Nothing("bitsandbytes, as priced")),
            ("hqq", Choice::NotModelled("HQQ quantization")),
            ("eetq", Choice::NotModelled("EETQ quantization")),
        ]),
    },
    Key {
        name: "bf16",
        rule: Rule::Read(|_, _| Ok(read_with("finetuning_type"))),
    },
    Key {
        name: "fp16",
        rule: Rule::Read(|_, _| Ok(read_with("finetuning_type"))),
    },
    Key {
        name: "pure_bf16",
        rule: Rule::Read(|_, _| Ok(read_with("finetuning_type"))),
    },
    Key {
        name: "lora_dropout",
        rule: Rule::Read(|v, d| {
            let lora = d
                .get("finetuning_type")
                .and_then(name_of)
                .is_some_and(|k| k == "lora");
            if lora {
                let mut with_adapter = d.clone();
                with_adapter.insert("adapter".to_string(), Value::String("lora".to_string()));
                lora_dropout(v, &with_adapter)
            } else {
                Ok(Effect::Nothing("unused without LoRA".to_string()))
            }
        }),
    },
    Key {
        name: "lora_alpha",
        rule: Rule::NoMemory,
    },
    Key {
        name: "use_dora",
        rule: Rule::Switch(&[("--lora-dora", "")]),
    },
    Key {
        name: "use_rslora",
        rule: Rule::NoMemory,
    },
    Key {
        name: "per_device_train_batch_size",
        rule: Rule::Count("--micro-batch"),
    },
    Key {
        name: "gradient_accumulation_steps",
        rule: Rule::Count("--grad-accumulation"),
    },
    Key {
        name: "cutoff_len",
        rule: Rule::Count("--seq-len"),
    },
    Key {
        name: "disable_gradient_checkpointing",
        rule: Rule::Read(|v, _| {
            Ok(if truth(v)? {
                Effect::Nothing("off: no recomputation".to_string())
            } else {
                Effect::Set(vec![Setting {
                    flag: "--recompute",
                    value: Some("full".to_string()),
                }])
            })
        }),
    },
    Key {
        name: "flash_attn",
        rule: Rule::Choice(&[
            ("fa2", Choice::Set(&[("--attention", "flash")])),
            ("fa3", Choice::Set(&[("--attention", "flash")])),
            ("sdpa", Choice::Set(&[("--attention", "sdpa")])),
            ("auto", Choice::Set(&[("--attention", "sdpa")])),
            ("disabled", Choice::Set(&[("--attention", "eager")])),
        ]),
    },
    Key {
        name: "enable_liger_kernel",
        rule: Rule::Read(super::training_arguments::liger),
    },
    Key {
        name: "use_unsloth",
        rule: Rule::Read(|v, _| not_modelled_on(v, "Unsloth's kernels and offloaded checkpoints")),
    },
    Key {
        name: "use_unsloth_gc",
        rule: Rule::Read(|v, _| not_modelled_on(v, "Unsloth's offloaded checkpoints")),
    },
    Key {
        name: "use_galore",
        rule: Rule::Read(galore),
    },
    Key {
        name: "galore_rank",
        rule: Rule::Read(|_, _| Ok(read_with("use_galore"))),
    },
    Key {
        name: "galore_layerwise",
        rule: Rule::Read(|_, _| Ok(read_with("use_galore"))),
    },
    Key {
        name: "galore_target",
        rule: Rule::NotModelled("GaLore on some modules only"),
    },
    Key {
        name: "galore_update_interval",
        rule: Rule::NoMemory,
    },
    Key {
        name: "galore_scale",
        rule: Rule::NoMemory,
    },
    Key {
        name: "use_apollo",
        rule: Rule::Read(|v, _| not_modelled_on(v, "APOLLO's low-rank states")),
    },
    Key {
        name: "use_badam",
        rule: Rule::Read(|v, _| not_modelled_on(v, "BAdam's block-wise updates")),
    },
    Key {
        name: "optim",
        rule: Rule::Read(|v, _| choose(v, OPTIM)),
    },
    Key {
        name: "packing",
        rule: Rule::Read(|v, d| {
            super::key::packing(v, d, &["flash_attn"], "cutoff_len tokens per sequence")
        }),
    },
    Key {
        name: "neat_packing",
        rule: Rule::Read(|v, d| {
            super::key::packing(v, d, &["flash_attn"], "cutoff_len tokens per sequence")
        }),
    },
    Key {
        name: "deepspeed",
        rule: Rule::Include,
    },
    Key {
        name: "stage",
        rule: Rule::Choice(&[
            ("sft", Choice::Nothing("supervised fine-tuning")),
            ("pt", Choice::Nothing("pre-training")),
            (
                "rm",
                Choice::NotModelled("a reward model's value head and pairs"),
            ),
            (
                "ppo",
                Choice::NotModelled("PPO's reference, reward and value models"),
            ),
            (
                "dpo",
                Choice::NotModelled("DPO's reference model and pairs"),
            ),
            ("kto", Choice::NotModelled("KTO's reference model")),
        ]),
    },
    Key {
        name: "torch_compile",
        rule: Rule::Read(super::training_arguments::compile),
    },
    // Keys that do not change the training step's memory.
    Key {
        name: "trust_remote_code",
        rule: Rule::NoMemory,
    },
    Key {
        name: "do_train",
        rule: Rule::NoMemory,
    },
    Key {
        name: "dataset",
        rule: Rule::NoMemory,
    },
    Key {
        name: "dataset_dir",
        rule: Rule::NoMemory,
    },
    Key {
        name: "eval_dataset",
        rule: Rule::NoMemory,
    },
    Key {
        name: "template",
        rule: Rule::NoMemory,
    },
    Key {
        name: "max_samples",
        rule: Rule::NoMemory,
    },
    Key {
        name: "overwrite_cache",
        rule: Rule::NoMemory,
    },
    Key {
        name: "preprocessing_num_workers",
        rule: Rule::NoMemory,
    },
    Key {
        name: "dataloader_num_workers",
        rule: Rule::NoMemory,
    },
    Key {
        name: "output_dir",
        rule: Rule::NoMemory,
    },
    Key {
        name: "logging_steps",
        rule: Rule::NoMemory,
    },
    Key {
        name: "save_steps",
        rule: Rule::NoMemory,
    },
    Key {
        name: "plot_loss",
        rule: Rule::NoMemory,
    },
    Key {
        name: "overwrite_output_dir",
        rule: Rule::NoMemory,
    },
    Key {
        name: "save_only_model",
        rule: Rule::NoMemory,
    },
    Key {
        name: "report_to",
        rule: Rule::NoMemory,
    },
    Key {
        name: "learning_rate",
        rule: Rule::NoMemory,
    },
    Key {
        name: "num_train_epochs",
        rule: Rule::NoMemory,
    },
    Key {
        name: "lr_scheduler_type",
        rule: Rule::NoMemory,
    },
    Key {
        name: "warmup_ratio",
        rule: Rule::NoMemory,
    },
    Key {
        name: "ddp_timeout",
        rule: Rule::NoMemory,
    },
    Key {
        name: "resume_from_checkpoint",
        rule: Rule::NoMemory,
    },
    Key {
        name: "val_size",
        rule: Rule::NoMemory,
    },
    Key {
        name: "per_device_eval_batch_size",
        rule: Rule::NoMemory,
    },
    Key {
        name: "eval_strategy",
        rule: Rule::NoMemory,
    },
    Key {
        name: "eval_steps",
        rule: Rule::NoMemory,
    },
    Key {
        name: "pref_beta",
        rule: Rule::NoMemory,
    },
    Key {
        name: "pref_loss",
        rule: Rule::NoMemory,
    },
    Key {
        name: "image_max_pixels",
        rule: Rule::NoMemory,
    },
    Key {
        name: "video_max_pixels",
        rule: Rule::NoMemory,
    },
    Key {
        name: "media_dir",
        rule: Rule::NoMemory,
    },
    Key {
        name: "tokenized_path",
        rule: Rule::NoMemory,
    },
    Key {
        name: "seed",
        rule: Rule::NoMemory,
    },
];

/// LLaMA-Factory's defaults: the Trainer's `per_device_train_batch_size` 8,
/// `cutoff_len` 2048, gradient checkpointing on, the Trainer's adamw_torch.
pub const DEFAULTS: &[Absent] = &[
    Absent {
        key: "per_device_train_batch_size",
        value: "8",
        flags: &[("--micro-batch", "8")],
    },
    Absent {
        key: "cutoff_len",
        value: "2048",
        flags: &[("--seq-len", "2048")],
    },
    Absent {
        key: "disable_gradient_checkpointing",
        value: "false",
        flags: &[("--recompute", "full")],
    },
    Absent {
        key: "optim",
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
            ("per_device_train_batch_size", micro_batch.to_string()),
            ("gradient_accumulation_steps", accumulation.to_string()),
        ],
        Change::FusedLoss => vec![("enable_liger_kernel", "true".to_string())],
        Change::Recompute => vec![("disable_gradient_checkpointing", "false".to_string())],
        Change::Zero(stage) => vec![(
            "deepspeed",
            format!("examples/deepspeed/ds_z{stage}_config.json"),
        )],
        Change::Optimizer8bit => vec![("optim", "adamw_bnb_8bit".to_string())],
        Change::Lora => vec![
            ("finetuning_type", "lora".to_string()),
            ("lora_rank", "16".to_string()),
            ("lora_target", "all".to_string()),
        ],
        Change::Qlora { with_lora } => {
            let mut pairs = vec![("quantization_bit", "4".to_string())];
            if !with_lora {
                pairs.splice(
                    0..0,
                    [
                        ("finetuning_type", "lora".to_string()),
                        ("lora_rank", "16".to_string()),
                        ("lora_target", "all".to_string()),
                    ],
                );
            }
            pairs
        }
        _ => return None,
    };
    Some(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}
