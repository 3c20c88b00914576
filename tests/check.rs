//! `trainmem check`: launch configs written from each project's documented
//! schema and examples (tests/fixtures/launch/). Each config's estimate must
//! be `trainmem estimate` with the equivalent flags, written here by hand;
//! the report's `key = value -> set` lines, the exit codes, the suggestions
//! and the refusals of bad files are checked on the real binary.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::run;
use serde_json::Value;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/launch");

fn fixture(name: &str) -> String {
    format!("{FIXTURES}/{name}")
}

/// One config: its files, the flags given beside them, the `estimate`
/// flags it is equivalent to, lines its report must show, and the verdict.
struct Case {
    files: &'static [&'static str],
    /// Flags beside the files, space-separated.
    extra: &'static str,
    /// The equivalent `estimate` flags, space-separated.
    flags: &'static str,
    lines: &'static [&'static str],
    verdict: &'static str,
}

const CASES: &[Case] = &[
    // HF TrainingArguments / TRL SFTConfig
    Case {
        files: &["sft-qwen-full.yaml"],
        extra: "--model qwen2.5-0.5b --device a100-40gb",
        flags: "--model qwen2.5-0.5b --device a100-40gb --precision bf16 --autocast --micro-batch 8 --grad-accumulation 2 --recompute full --seq-len 1024 --optimizer adamw --attention sdpa",
        lines: &[
            "per_device_train_batch_size = 8 -> --micro-batch 8",
            "gradient_accumulation_steps = 2 -> --grad-accumulation 2",
            "gradient_checkpointing = true -> --recompute full",
            "torch_dtype = bfloat16 -> --precision bf16",
            "optim = adamw_torch_fused -> --optimizer adamw",
            "max_length = 1024 -> --seq-len 1024",
            "model_name_or_path = Qwen/Qwen2.5-0.5B -> --model Qwen/Qwen2.5-0.5B",
            "packing = true -> priced at the full sequence length, which packing fills",
        ],
        verdict: "fits",
    },
    Case {
        files: &["sft-llama-qlora.json"],
        extra: "--model llama-3.1-8b --device rtx-4090-24gb",
        flags: "--model llama-3.1-8b --device rtx-4090-24gb --precision bf16 --autocast --attention flash --lora-rank 16 --lora-targets all-linear --lora-dtype bf16 --quantize nf4 --double-quant on --micro-batch 4 --grad-accumulation 4 --recompute full --seq-len 2048 --optimizer paged-adamw-8bit",
        lines: &[
            "use_peft = true -> --lora-rank 16 --lora-targets all-linear --lora-dtype bf16",
            "load_in_4bit = true -> --quantize nf4 --double-quant on",
            "optim = paged_adamw_8bit -> --optimizer paged-adamw-8bit",
            "attn_implementation = flash_attention_2 -> --attention flash",
            "max_seq_length = 2048 -> --seq-len 2048",
            "lora_r = 16 -> read with use_peft",
            "gradient_checkpointing_kwargs = {\"use_reentrant\":false} -> use_reentrant false",
        ],
        // The allocated peak fits 25.76 GB, the allocator's reserve does not.
        verdict: "tight",
    },
    Case {
        files: &["training-args-zero3.json"],
        extra: "--model llama-3.1-8b --gpus 8 --device h100-80gb",
        flags: "--model llama-3.1-8b --gpus 8 --device h100-80gb --precision mixed-bf16 --micro-batch 16 --grad-accumulation 1 --seq-len 4096 --optimizer adamw --zero 3 --reduce-bucket-size 16777216",
        lines: &[
            "bf16 = true -> --precision amp-bf16",
            "deepspeed = ds-zero3-auto.json -> reads",
            "bf16.enabled -> auto: on, as the TrainingArguments ask -> --precision mixed-bf16",
            "fp16.enabled -> auto: off",
            "train_micro_batch_size_per_gpu -> auto: the Trainer fills it in",
            "zero_optimization.stage -> --zero 3",
            "zero_optimization.reduce_bucket_size -> auto: hidden_size² -> --reduce-bucket-size 16777216",
            "zero_optimization.stage3_prefetch_bucket_size -> auto or the default",
            "optimizer.type -> --optimizer adamw",
        ],
        verdict: "does-not-fit",
    },
    Case {
        files: &["sft-liger-lora.yaml"],
        extra: "--model qwen2.5-7b --device a100-80gb",
        flags: "--model qwen2.5-7b --device a100-80gb --precision bf16 --autocast --attention flash --lora-rank 64 --lora-targets q_proj,k_proj,v_proj,o_proj --lora-dropout 0.1 --micro-batch 4 --grad-accumulation 4 --recompute full --seq-len 4096 --loss fused --optimizer paged-adamw",
        lines: &[
            "use_liger_kernel = true -> --loss fused",
            "optim = paged_adamw_32bit -> --optimizer paged-adamw",
            "lora_dropout = 0.1 -> --lora-dropout 0.1",
            "use_peft = true -> --lora-rank 64 --lora-targets q_proj,k_proj,v_proj,o_proj",
        ],
        verdict: "fits",
    },
    // DeepSpeed alone: the command line gives what a DeepSpeed file does not say.
    Case {
        files: &["ds-zero2-offload.json"],
        extra: "--model llama-3.1-8b --gpus 8 --seq-len 2048 --device a100-80gb",
        flags: "--model llama-3.1-8b --gpus 8 --seq-len 2048 --device a100-80gb --micro-batch 4 --grad-accumulation 4 --optimizer adamw --precision mixed-bf16 --zero 2 --offload optimizer --reduce-bucket-size 200000000",
        lines: &[
            "train_micro_batch_size_per_gpu = 4 -> --micro-batch 4",
            "gradient_accumulation_steps = 4 -> --grad-accumulation 4",
            "bf16.enabled = true -> --precision mixed-bf16",
            "zero_optimization.stage = 2 -> --zero 2",
            "zero_optimization.offload_optimizer.device = cpu -> --offload optimizer",
            "zero_optimization.reduce_bucket_size = 200000000.0 -> --reduce-bucket-size 200000000",
            "optimizer.type = Adam -> --optimizer adamw",
        ],
        // The allocated peak fits 80 GB, the allocator's reserve does not.
        verdict: "tight",
    },
    Case {
        files: &["ds-zero3-offload-fp16.json"],
        extra: "--model llama-2-13b --gpus 4 --seq-len 2048 --device a100-40gb",
        flags: "--model llama-2-13b --gpus 4 --seq-len 2048 --device a100-40gb --micro-batch 1 --grad-accumulation 16 --precision mixed-fp16 --optimizer adamw --zero 3 --offload optimizer+params --reduce-bucket-size 16777216",
        lines: &[
            "fp16.enabled = true -> --precision mixed-fp16",
            "zero_optimization.offload_optimizer.device = cpu -> --offload optimizer+params",
            "zero_optimization.offload_param.device = cpu -> read with offload_optimizer",
            "zero_optimization.stage3_prefetch_bucket_size = 50000000 -> auto or the default",
        ],
        verdict: "fits",
    },
    // accelerate, with the TrainingArguments of the script it launches.
    Case {
        files: &["accelerate-multi-gpu.yaml", "sft-qwen-full.yaml"],
        extra: "--model qwen2.5-1.5b --device a100-40gb",
        flags: "--model qwen2.5-1.5b --device a100-40gb --gpus 4 --nodes 1 --precision bf16 --autocast --micro-batch 8 --grad-accumulation 2 --recompute full --seq-len 1024 --optimizer adamw --attention sdpa",
        lines: &[
            "distributed_type = MULTI_GPU -> data parallel",
            "num_processes = 4 -> --gpus 4",
            "num_machines = 1 -> --nodes 1",
            "mixed_precision = bf16 -> autocast over the weights as loaded -> --precision bf16",
        ],
        verdict: "fits",
    },
    Case {
        files: &["accelerate-fsdp.yaml", "training-args-fsdp.json"],
        extra: "--model llama-3.1-8b --device h100-80gb",
        flags: "--model llama-3.1-8b --device h100-80gb --gpus 8 --nodes 1 --fsdp full-shard --framework fsdp1 --init rank0 --precision mixed-bf16 --micro-batch 2 --grad-accumulation 8 --seq-len 4096 --optimizer adamw",
        lines: &[
            "distributed_type = FSDP -> --fsdp full-shard --framework fsdp1",
            "fsdp_config.fsdp_sharding_strategy = FULL_SHARD -> --fsdp full-shard",
            "fsdp_config.fsdp_cpu_ram_efficient_loading = true -> --init rank0",
            "fsdp_config.fsdp_offload_params = false -> off",
            "mixed_precision = bf16 -> autocast over the weights as loaded, FSDP's mixed precision -> --precision mixed-bf16",
            "bf16 = true -> --precision amp-bf16",
        ],
        // The allocated peak fits, the allocator's reserve does not.
        verdict: "tight",
    },
    Case {
        files: &["accelerate-fsdp2.yaml", "training-args-fsdp.json"],
        extra: "--model llama-3.1-8b --device h100-80gb",
        flags: "--model llama-3.1-8b --device h100-80gb --gpus 8 --nodes 1 --fsdp full-shard --framework fsdp2 --init rank0 --recompute full --precision mixed-bf16 --micro-batch 2 --grad-accumulation 8 --seq-len 4096 --optimizer adamw",
        lines: &[
            "distributed_type = FSDP -> --fsdp full-shard --framework fsdp2",
            "fsdp_config.fsdp_version = 2 -> --framework fsdp2",
            "fsdp_config.fsdp_activation_checkpointing = true -> --recompute full",
        ],
        verdict: "fits",
    },
    Case {
        files: &["accelerate-deepspeed.yaml", "sft-qwen-full.yaml"],
        extra: "--model qwen2.5-7b --device a100-80gb",
        flags: "--model qwen2.5-7b --device a100-80gb --gpus 2 --nodes 1 --framework deepspeed --zero 2 --offload optimizer --precision mixed-bf16 --micro-batch 8 --grad-accumulation 1 --recompute full --seq-len 1024 --optimizer adamw --attention sdpa",
        lines: &[
            "distributed_type = DEEPSPEED -> --framework deepspeed",
            "deepspeed_config.zero_stage = 2 -> --zero 2",
            "deepspeed_config.offload_optimizer_device = cpu -> --offload optimizer",
            "deepspeed_config.gradient_accumulation_steps = 1 -> --grad-accumulation 1",
            "deepspeed_config.zero3_init_flag = true -> zero.Init",
        ],
        verdict: "fits",
    },
    // axolotl
    Case {
        files: &["axolotl-llama3-qlora.yaml"],
        extra: "--model llama-3.1-8b --device rtx-4090-24gb",
        flags: "--model llama-3.1-8b --device rtx-4090-24gb --lora-rank 32 --lora-targets all-linear --quantize nf4 --double-quant on --precision bf16 --autocast --attention flash --grad-accumulation 4 --recompute full --micro-batch 2 --optimizer paged-adamw-8bit --seq-len 4096",
        lines: &[
            "adapter = qlora -> --lora-rank 32 --lora-targets all-linear --quantize nf4 --double-quant on",
            "base_model = NousResearch/Meta-Llama-3-8B -> --model NousResearch/Meta-Llama-3-8B",
            "bf16 = auto -> --precision bf16",
            "sequence_len = 4096 -> --seq-len 4096",
            "micro_batch_size = 2 -> --micro-batch 2",
            "optimizer = paged_adamw_8bit -> --optimizer paged-adamw-8bit",
            "flash_attention = true -> --attention flash",
            "fsdp_config = null -> empty",
        ],
        // The allocated peak fits 25.76 GB, the allocator's reserve does not.
        verdict: "tight",
    },
    Case {
        files: &["axolotl-llama3-lora.yaml"],
        extra: "--model llama-3.1-8b --device a100-40gb",
        flags: "--model llama-3.1-8b --device a100-40gb --lora-rank 32 --lora-targets all-linear --quantize int8 --lora-modules-to-save embed_tokens,lm_head --precision bf16 --autocast --attention flash --grad-accumulation 4 --recompute full --micro-batch 2 --optimizer adamw-8bit --seq-len 4096 --lora-dropout 0.05",
        lines: &[
            "adapter = lora -> --lora-rank 32 --lora-targets all-linear --quantize int8 --lora-modules-to-save embed_tokens,lm_head",
            "lora_dropout = 0.05 -> --lora-dropout 0.05",
            "optimizer = adamw_bnb_8bit -> --optimizer adamw-8bit",
        ],
        verdict: "fits",
    },
    Case {
        files: &["axolotl-fft-zero3.yaml"],
        extra: "--model llama-3.1-8b --gpus 8 --device h100-80gb",
        flags: "--model llama-3.1-8b --gpus 8 --device h100-80gb --precision mixed-bf16 --zero 3 --reduce-bucket-size 16777216 --micro-batch 2 --grad-accumulation 8 --seq-len 8192 --optimizer adamw --recompute full --attention flash",
        lines: &[
            "deepspeed = zero3_bf16.json -> reads",
            "bf16.enabled -> auto: on, as the TrainingArguments ask -> --precision mixed-bf16",
            "zero_optimization.sub_group_size -> not modelled",
            "liger_rope",
        ],
        verdict: "unknown",
    },
    Case {
        files: &["axolotl-long-context.yaml"],
        extra: "--model qwen2.5-7b --gpus 2 --device h100-80gb",
        flags: "--model qwen2.5-7b --gpus 2 --device h100-80gb --lora-rank 16 --lora-targets all-linear --lora-dropout 0.05 --precision bf16 --autocast --cp 2 --attention flash --grad-accumulation 8 --recompute full --offload-activations --loss fused --micro-batch 1 --optimizer adamw --seq-len 32768",
        lines: &[
            "gradient_checkpointing = offload -> --recompute full --offload-activations",
            "liger_fused_linear_cross_entropy = true -> --loss fused",
            "context_parallel_size = 2 -> --cp 2",
            "lora_dropout = 0.05 -> --lora-dropout 0.05",
        ],
        verdict: "fits",
    },
    Case {
        files: &["axolotl-fsdp2.yaml"],
        extra: "--model llama-3.2-3b --gpus 4 --device a100-40gb",
        flags: "--model llama-3.2-3b --gpus 4 --device a100-40gb --framework fsdp2 --fsdp full-shard --precision bf16 --micro-batch 4 --grad-accumulation 1 --seq-len 2048 --optimizer adamw --attention flash",
        lines: &[
            "fsdp_version = 2 -> --framework fsdp2 --fsdp full-shard",
            "fsdp_config.reshard_after_forward = true -> read with fsdp_version",
            "gradient_checkpointing = false -> off",
        ],
        verdict: "does-not-fit",
    },
    // torchtune
    Case {
        files: &["torchtune-llama3_1-8b-lora.yaml"],
        extra: "--device rtx-4090-24gb",
        flags: "--device rtx-4090-24gb --model llama-3.1-8b --implementation torchtune --lora-rank 8 --lora-targets q_proj,v_proj,o_proj,gate_proj,down_proj,up_proj --lora-dtype bf16 --precision bf16 --micro-batch 2 --grad-accumulation 8 --recompute full --loss chunked:8 --optimizer adamw --optimizer-option fused=true --seq-len 2048",
        lines: &[
            "model._component_ = torchtune.models.llama3_1.lora_llama3_1_8b -> --model llama-3.1-8b --implementation torchtune --lora-rank 8 --lora-targets q_proj,v_proj,o_proj,gate_proj,down_proj,up_proj --lora-dtype bf16",
            "loss._component_ = torchtune.modules.loss.CEWithChunkedOutputLoss -> --loss chunked:8",
            "enable_activation_checkpointing = true -> --recompute full",
            "enable_activation_offloading = false -> off",
            "tokenizer.max_seq_len = 2048 -> --seq-len 2048",
            "dtype = bf16 -> --precision bf16",
            "optimizer.fused = true -> --optimizer-option fused=true",
            "batch_size = 2 -> --micro-batch 2",
        ],
        // The allocated peak fits 25.76 GB, the allocator's reserve does not.
        verdict: "tight",
    },
    Case {
        files: &["torchtune-llama3_1-8b-full-low-memory.yaml"],
        extra: "--seq-len 2048 --device rtx-4090-24gb",
        flags: "--seq-len 2048 --device rtx-4090-24gb --model llama-3.1-8b --implementation torchtune --precision bf16 --micro-batch 2 --grad-accumulation 1 --recompute full --loss chunked:8 --optimizer paged-adamw-8bit --optimizer-in-backward",
        lines: &[
            "optimizer_in_bwd = true -> --optimizer-in-backward",
            "optimizer._component_ = bitsandbytes.optim.PagedAdamW8bit -> --optimizer paged-adamw-8bit",
            "tokenizer.max_seq_len = null -> null: each batch as long as its longest sample; check answers with the longest that fits",
            "model._component_ = torchtune.models.llama3_1.llama3_1_8b -> --model llama-3.1-8b --implementation torchtune",
        ],
        // The allocated peak fits, the allocator's reserve does not.
        verdict: "tight",
    },
    Case {
        files: &["torchtune-llama3_2-3b-qlora.yaml"],
        extra: "--device rtx-4090-24gb",
        flags: "--device rtx-4090-24gb --model llama-3.2-3b --implementation torchtune --lora-rank 64 --lora-targets q_proj,v_proj,o_proj,gate_proj,down_proj,up_proj --lora-dtype bf16 --quantize nf4-torchao --precision bf16 --micro-batch 4 --grad-accumulation 4 --loss chunked:8 --optimizer adamw --optimizer-option fused=true --seq-len 4096 --attention flash",
        lines: &[
            "model._component_ = torchtune.models.llama3_2.qlora_llama3_2_3b -> --model llama-3.2-3b --implementation torchtune --lora-rank 64",
            "dataset.packed = true -> --attention flash",
            "enable_activation_checkpointing = false -> off",
        ],
        verdict: "does-not-fit",
    },
    // LLaMA-Factory
    Case {
        files: &["llama-factory-llama3-lora.yaml"],
        extra: "--model llama-3.1-8b --device a100-40gb",
        flags: "--model llama-3.1-8b --device a100-40gb --precision bf16 --autocast --lora-rank 8 --lora-targets all-linear --micro-batch 1 --grad-accumulation 8 --seq-len 2048 --recompute full --optimizer adamw",
        lines: &[
            "finetuning_type = lora -> --precision bf16 --autocast --lora-rank 8 --lora-targets all-linear",
            "cutoff_len = 2048 -> --seq-len 2048",
            "disable_gradient_checkpointing = false (the default) -> --recompute full",
            "optim = adamw_torch (the default) -> --optimizer adamw",
            "stage = sft -> supervised fine-tuning",
        ],
        verdict: "fits",
    },
    Case {
        files: &["llama-factory-llama3-qlora.yaml"],
        extra: "--model llama-3.1-8b --device rtx-4090-24gb",
        flags: "--model llama-3.1-8b --device rtx-4090-24gb --precision bf16 --autocast --lora-rank 8 --lora-targets all-linear --quantize nf4 --double-quant on --attention flash --loss fused --micro-batch 4 --grad-accumulation 8 --seq-len 4096 --recompute full --optimizer adamw",
        lines: &[
            "finetuning_type = lora -> --precision bf16 --autocast --lora-rank 8 --lora-targets all-linear --quantize nf4 --double-quant on",
            "quantization_bit = 4 -> read with finetuning_type",
            "enable_liger_kernel = true -> --loss fused",
            "flash_attn = fa2 -> --attention flash",
        ],
        verdict: "fits",
    },
    Case {
        files: &["llama-factory-llama3-full-ds3.yaml"],
        extra: "--model llama-3.1-8b --gpus 8 --device a100-80gb",
        flags: "--model llama-3.1-8b --gpus 8 --device a100-80gb --precision mixed-bf16 --micro-batch 4 --grad-accumulation 2 --seq-len 2048 --recompute full --optimizer adamw --zero 3 --reduce-bucket-size 16777216",
        lines: &[
            "finetuning_type = full -> --precision amp-bf16",
            "deepspeed = ds_z3_config.json -> reads",
            "bf16.enabled -> auto: on, as the TrainingArguments ask -> --precision mixed-bf16",
        ],
        verdict: "fits",
    },
];

fn args_of(case: &Case, extra: &[&str]) -> Vec<String> {
    let mut args = vec!["check".to_string()];
    args.extend(case.files.iter().map(|f| fixture(f)));
    args.extend(case.extra.split_whitespace().map(str::to_string));
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

fn run_strings(args: &[String]) -> (i32, String, String) {
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    run(&refs)
}

/// The lines of a report with runs of spaces made one.
fn squeezed(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

#[test]
fn each_config_is_estimate_with_its_equivalent_flags() {
    for case in CASES {
        let args = args_of(case, &["--format", "json"]);
        let (code, stdout, stderr) = run_strings(&args);
        let mut checked: Value =
            serde_json::from_str(&stdout).unwrap_or_else(|_| panic!("{args:?}: {code} {stderr}"));
        assert_eq!(checked["verdict"], case.verdict, "{args:?}: {stderr}");
        let expected_code = match case.verdict {
            "does-not-fit" | "tight" => 1,
            _ => 0,
        };
        assert_eq!(code, expected_code, "{args:?}: {stderr}");
        assert!(checked["keys"].as_array().is_some_and(|k| !k.is_empty()));
        for extra in ["verdict", "keys", "suggestions"] {
            checked.as_object_mut().unwrap().remove(extra);
        }
        let mut estimate = vec!["estimate"];
        estimate.extend(case.flags.split_whitespace());
        estimate.extend(["--format", "json"]);
        let (code, stdout, stderr) = run(&estimate);
        assert_eq!(code, 0, "{estimate:?}: {stderr}");
        let estimated: Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(checked, estimated, "{args:?} against {estimate:?}");
    }
}

#[test]
fn the_report_shows_each_key_and_what_it_set() {
    for case in CASES {
        let args = args_of(case, &[]);
        let (_, stdout, stderr) = run_strings(&args);
        let lines = squeezed(&stdout);
        for wanted in case.lines {
            assert!(
                lines.iter().any(|l| l.contains(wanted)),
                "{args:?}: no line with `{wanted}` in\n{stdout}\n{stderr}"
            );
        }
        let verdict = case.verdict.replace('-', " ");
        assert!(stdout.contains(&format!("verdict: {verdict}")), "{stdout}");
        assert!(stdout.contains("as flags: trainmem estimate "), "{stdout}");
    }
}

#[test]
fn adapters_in_the_base_dtype_are_read_where_the_frameworks_cast_them() {
    // TRL's SFTTrainer casts a quantized model's adapters to bf16; without
    // quantization they stay in peft's fp32. axolotl's
    // peft_autocast_adapter_dtype: false keeps them in the base's dtype.
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &str, &str)] = &[
        (
            "trl.yaml",
            "model_name_or_path: gpt2\nper_device_train_batch_size: 1\nuse_peft: true\nload_in_4bit: true\nbf16: true\n",
            "bf16",
        ),
        (
            "trl.yaml",
            "model_name_or_path: gpt2\nper_device_train_batch_size: 1\nuse_peft: true\nbf16: true\n",
            "fp32",
        ),
        (
            "axolotl.yaml",
            "base_model: gpt2\nmicro_batch_size: 1\nsequence_len: 512\nlora_target_linear: true\nadapter: qlora\nbf16: true\npeft_autocast_adapter_dtype: false\n",
            "bf16",
        ),
        (
            "axolotl.yaml",
            "base_model: gpt2\nmicro_batch_size: 1\nsequence_len: 512\nlora_target_linear: true\nadapter: lora\nfp16: true\npeft_autocast_adapter_dtype: false\n",
            "fp16",
        ),
        (
            "axolotl.yaml",
            "base_model: gpt2\nmicro_batch_size: 1\nsequence_len: 512\nlora_target_linear: true\nadapter: qlora\nbf16: true\n",
            "fp32",
        ),
    ];
    for (name, text, dtype) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let json = common::json_of(&[
            "check",
            path.to_str().unwrap(),
            "--capacity",
            "80GB",
            "--format",
            "json",
        ]);
        assert_eq!(json["lora"]["dtype"], *dtype, "{text}");
    }
}

#[test]
fn unknown_keys_are_listed_as_ignored_and_not_modelled_ones_warn() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("axolotl.yaml");
    std::fs::write(
        &path,
        "base_model: llama-3.2-1b\nmicro_batch_size: 1\nsequence_len: 1024\nmy_own_key: 3\ntorch_compile: true\n",
    )
    .unwrap();
    let path = path.to_str().unwrap();
    let (code, stdout, stderr) = run(&["check", path, "--device", "h100-80gb"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("ignored (not keys trainmem knows): my_own_key"),
        "{stdout}"
    );
    assert!(stdout.contains("verdict: unknown"), "{stdout}");
    assert!(
        stderr.contains("warning:") && stderr.contains("torch_compile"),
        "{stderr}"
    );
    let (code, _, _) = run(&["check", path, "--device", "h100-80gb", "--strict"]);
    assert_eq!(code, 1, "--strict: unknown is a failure");
    let json = common::json_of(&["check", path, "--device", "h100-80gb", "--format", "json"]);
    let ignored = json["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["key"] == "my_own_key")
        .unwrap();
    assert_eq!(ignored["file"], path);
    assert_eq!(ignored["value"], "3");
    assert!(ignored["set"].as_str().unwrap().starts_with("ignored"));
}

#[test]
fn command_line_flags_override_the_files_and_defaults_do_not() {
    // --micro-batch typed overrides the file; --optimizer's default (adam) does not.
    let file = fixture("axolotl-llama3-qlora.yaml");
    let json = common::json_of(&[
        "check",
        &file,
        "--model",
        "llama-3.1-8b",
        "--device",
        "h100-80gb",
        "--micro-batch",
        "1",
        "--format",
        "json",
    ]);
    assert_eq!(json["optimizer"], "paged-adamw-8bit");
    let (_, table, _) = run(&[
        "check",
        &file,
        "--model",
        "llama-3.1-8b",
        "--device",
        "h100-80gb",
        "--micro-batch",
        "1",
    ]);
    assert!(
        table.contains("--micro-batch on the command line overrides"),
        "{table}"
    );
    assert!(table.contains("--micro-batch 1"), "{table}");
}

/// Sets `key: value` pairs (dotted for nested keys) in a JSON or YAML config.
fn apply(path: &Path, change: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    let pairs: Vec<(String, String)> = change
        .split(", ")
        .map(|pair| {
            let (key, value) = pair.split_once(": ").unwrap();
            (key.to_string(), value.to_string())
        })
        .collect();
    let json = path.extension().is_some_and(|e| e == "json");
    let text = if json {
        let mut value: Value = serde_json::from_str(&text).unwrap();
        for (key, new) in &pairs {
            let mut node = &mut value;
            let parts: Vec<&str> = key.split('.').collect();
            for part in &parts[..parts.len() - 1] {
                node = &mut node[*part];
            }
            let typed = serde_json::from_str(new).unwrap_or(Value::String(new.clone()));
            node[parts[parts.len() - 1]] = typed;
        }
        serde_json::to_string_pretty(&value).unwrap()
    } else {
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        for (key, new) in &pairs {
            assert!(
                !key.contains('.'),
                "nested YAML keys are not edited by this test"
            );
            let line = format!("{key}: {new}");
            match lines.iter_mut().find(|l| l.starts_with(&format!("{key}:"))) {
                Some(existing) => *existing = line,
                None => lines.push(line),
            }
        }
        lines.join("\n") + "\n"
    };
    std::fs::write(path, text).unwrap();
}

#[test]
fn applying_the_first_suggestion_makes_it_fit() {
    for case in CASES.iter().filter(|c| c.verdict == "does-not-fit") {
        let dir = tempfile::tempdir().unwrap();
        let copies: Vec<PathBuf> = case
            .files
            .iter()
            .map(|f| {
                let to = dir.path().join(f);
                std::fs::copy(fixture(f), &to).unwrap();
                to
            })
            .collect();
        // Companions named inside the files travel too.
        for companion in ["ds-zero3-auto.json", "zero3_bf16.json", "ds_z3_config.json"] {
            std::fs::copy(fixture(companion), dir.path().join(companion)).unwrap();
        }
        let mut args: Vec<String> = vec!["check".to_string()];
        args.extend(copies.iter().map(|p| p.display().to_string()));
        args.extend(case.extra.split_whitespace().map(str::to_string));
        let mut json_args = args.clone();
        json_args.extend(["--format".to_string(), "json".to_string()]);
        let (code, stdout, stderr) = run_strings(&json_args);
        assert_eq!(code, 1, "{stderr}");
        let json: Value = serde_json::from_str(&stdout).unwrap();
        let suggestions = json["suggestions"].as_array().unwrap();
        assert!(!suggestions.is_empty(), "{args:?}: no suggestion");
        let peaks: Vec<u64> = suggestions
            .iter()
            .map(|s| s["peak"].as_u64().unwrap())
            .collect();
        let capacity = json["capacity"]["bytes"].as_u64().unwrap();
        assert!(peaks.iter().all(|p| *p <= capacity), "each suggestion fits");
        let first = &suggestions[0];
        let file = PathBuf::from(first["file"].as_str().unwrap());
        assert!(copies.contains(&file), "{first}");
        apply(&file, first["key"].as_str().unwrap());
        let (code, stdout, stderr) = run_strings(&args);
        assert_eq!(code, 0, "after `{}`:\n{stdout}\n{stderr}", first["key"]);
        assert!(stdout.contains("verdict: fits"));
    }
}

#[test]
fn suggestions_name_the_keys_of_the_users_own_format() {
    let case = CASES
        .iter()
        .find(|c| c.files == ["axolotl-fsdp2.yaml"])
        .unwrap();
    let (_, stdout, _) = run_strings(&args_of(case, &[]));
    assert!(
        stdout.contains("changes that fit, each alone, what they give up least first:"),
        "{stdout}"
    );
    assert!(
        stdout.contains("micro_batch_size: 2, gradient_accumulation_steps: 2"),
        "{stdout}"
    );
    let case = CASES
        .iter()
        .find(|c| c.files == ["training-args-zero3.json"])
        .unwrap();
    let (_, stdout, _) = run_strings(&args_of(case, &[]));
    // The micro-batch the reserve allows, in the TrainingArguments' own keys.
    assert!(
        stdout.contains("per_device_train_batch_size: ")
            && stdout.contains(", gradient_accumulation_steps: "),
        "{stdout}"
    );
}

/// Runs `check` on a file with `contents` and expects exit 2 with one line
/// on stderr naming the file and containing `wanted`.
fn refused(name: &str, contents: &[u8], wanted: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, contents).unwrap();
    let path = path.to_str().unwrap();
    let (code, stdout, stderr) = run(&["check", path, "--device", "h100-80gb", "--model", "gpt2"]);
    assert_eq!(code, 2, "{name}: {stdout}{stderr}");
    assert!(stdout.is_empty());
    assert_eq!(stderr.lines().count(), 1, "{name}: one line: {stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(stderr.contains(name), "{name}: the file is named: {stderr}");
    assert!(stderr.contains(wanted), "{name}: `{wanted}` in {stderr}");
}

#[test]
fn bad_files_are_refused_with_one_line() {
    refused("broken.yaml", b"micro_batch_size: [1, 2\n", "invalid YAML");
    refused(
        "broken.json",
        b"{\"train_micro_batch_size_per_gpu\": 4,",
        "invalid JSON",
    );
    refused("list.yaml", b"- a\n- b\n", "not a mapping");
    refused(
        "other.yaml",
        b"name: my-app\nversion: 2\n",
        "not a launch config trainmem reads",
    );
    refused(
        "zero.yaml",
        b"base_model: gpt2\nmicro_batch_size: 0\n",
        "key `micro_batch_size` = `0`: expected a whole number",
    );
    refused(
        "optim.json",
        b"{\"optim\": \"adamw_typo\"}",
        "adamw_torch_fused",
    );
    refused(
        "stage.json",
        b"{\"zero_optimization\": {\"stage\": 4}}",
        "accepted: 0, 1, 2, 3",
    );
    refused("binary.yaml", &[0xff, 0xfe, 0x00, 0x41], "not UTF-8");
    let mut laughs = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for level in 1..12 {
        let p = level - 1;
        laughs += &format!(
            "a{level}: &a{level} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        );
    }
    refused("laughs.yaml", laughs.as_bytes(), "invalid YAML");
    refused(
        "deep.yaml",
        format!("base_model: {}1{}\n", "[".repeat(100), "]".repeat(100)).as_bytes(),
        "",
    );
    let huge = format!("base_model: gpt2\nnote: \"{}\"\n", "x".repeat(2 << 20));
    refused("huge.yaml", huge.as_bytes(), "more than the 1048576");
}

#[cfg(unix)]
#[test]
fn a_fifo_is_refused_without_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    // The deadline is a hang guard only: opening the FIFO for reading would
    // block for ever, so a regression is killed there and fails the test.
    let (code, _, stderr, _) = common::run_within(
        &["check", path.to_str().unwrap(), "--device", "h100-80gb"],
        Duration::from_secs(60),
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("a fifo"), "{stderr}");
}

#[test]
fn missing_pieces_are_bad_input() {
    let file = fixture("axolotl-llama3-qlora.yaml");
    let (code, _, stderr) = run(&["check", &file, "--model", "llama-3.1-8b"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("--device NAME"), "{stderr}");
    let file = fixture("ds-zero2-offload.json");
    let (code, _, stderr) = run(&[
        "check",
        &file,
        "--model",
        "llama-3.1-8b",
        "--device",
        "h100",
    ]);
    // No file names the sequence length: the longest that fits is the
    // answer (issue 25), no longer a refusal.
    assert_eq!(code, 0, "{stderr}");
    let (_, stdout, _) = run(&[
        "check",
        &file,
        "--model",
        "llama-3.1-8b",
        "--device",
        "h100",
    ]);
    assert!(stdout.contains("fits for sequences up to"), "{stdout}");
    let (code, _, _) = run(&["check"]);
    assert_eq!(code, 2, "no file");
    let file = fixture("axolotl-llama3-qlora.yaml");
    let (code, _, stderr) = run(&[
        "check",
        &file,
        "--model",
        "llama-3.1-8b",
        "--device",
        "h100",
        "--format",
        "csv",
    ]);
    assert_eq!(code, 2);
    assert!(stderr.contains("check writes table or json"), "{stderr}");
    let (code, _, stderr) = run(&["check", "/no/such/file.yaml", "--device", "h100"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("does not exist"), "{stderr}");
}

#[test]
fn other_commands_keep_their_exit_codes() {
    // estimate says "does not fit" in its report but exits 0, as before.
    let (code, stdout, _) = run(&["estimate", "--params", "70B", "--capacity", "1GB"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("does not fit"));
}

#[test]
fn help_names_the_formats_and_defines_cheapest() {
    let (code, stdout, _) = run(&["check", "--help"]);
    assert_eq!(code, 0);
    for wanted in [
        "TrainingArguments",
        "DeepSpeed",
        "accelerate",
        "axolotl",
        "cheapest",
        "Exit status",
        "--strict",
        "Examples:",
    ] {
        assert!(stdout.contains(wanted), "{wanted}");
    }
    assert!(
        stdout.lines().all(|l| l.chars().count() <= 100),
        "help within 100 columns"
    );
}

/// `check` with the Hugging Face cache pointed at an empty folder.
fn run_without_cache(args: &[&str]) -> (i32, String, String) {
    let cache = tempfile::tempdir().unwrap();
    let output = assert_cmd::Command::cargo_bin("trainmem")
        .unwrap()
        .env("HF_HUB_CACHE", cache.path())
        .env("HF_HOME", cache.path())
        .env("HF_HUB_OFFLINE", "1")
        .args(args)
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

#[test]
fn hub_ids_in_the_files_resolve_as_model_does() {
    // meta-llama/Llama-3.1-8B is a preset's published config: the same model as --model.
    let file = fixture("sft-llama-qlora.json");
    let (code, stdout, stderr) = run_without_cache(&[
        "check",
        &file,
        "--device",
        "rtx-4090-24gb",
        "--format",
        "json",
    ]);
    // Tight on 24 GB: the allocated peak fits, the reserve does not.
    assert_eq!(code, 1, "{stderr}");
    let checked: Value = serde_json::from_str(&stdout).unwrap();
    let (_, stdout, _) = run_without_cache(&[
        "estimate",
        "--model",
        "meta-llama/Llama-3.1-8B",
        "--micro-batch",
        "1",
        "--seq-len",
        "8",
        "--format",
        "json",
    ]);
    let estimated: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(checked["model"]["source"], estimated["model"]["source"]);
    assert_eq!(checked["model"]["name"], estimated["model"]["name"]);
    // An id neither cached nor a preset: bad input, said with the file and the key.
    let file = fixture("axolotl-llama3-qlora.yaml");
    let (code, _, stderr) = run_without_cache(&["check", &file, "--device", "rtx-4090-24gb"]);
    assert_eq!(code, 2);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("axolotl-llama3-qlora.yaml"), "{stderr}");
    assert!(
        stderr.contains("key `base_model` = `NousResearch/Meta-Llama-3-8B`"),
        "{stderr}"
    );
    assert!(stderr.contains("huggingface-cli download"), "{stderr}");
}

#[test]
fn lora_flags_on_the_command_line_take_the_rank_from_the_files() {
    let file = fixture("axolotl-llama3-qlora.yaml");
    let json = common::json_of(&[
        "check",
        &file,
        "--model",
        "llama-3.1-8b",
        "--device",
        "h100-80gb",
        "--lora-dtype",
        "bf16",
        "--format",
        "json",
    ]);
    assert_eq!(json["verdict"], "fits");
    let file = fixture("sft-qwen-full.yaml");
    let (code, _, stderr) = run(&[
        "check",
        &file,
        "--model",
        "qwen2.5-0.5b",
        "--device",
        "h100-80gb",
        "--lora-dtype",
        "bf16",
    ]);
    assert_eq!(code, 2);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--lora-rank"), "{stderr}");
}

#[test]
fn the_order_of_keys_in_a_file_does_not_change_the_estimate() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("first.yaml");
    let last = dir.path().join("last.yaml");
    let body = "fsdp_config:\n  fsdp_sharding_strategy: SHARD_GRAD_OP\n  fsdp_version: 1\n";
    let top = "distributed_type: FSDP\nmixed_precision: bf16\nnum_processes: 4\n";
    std::fs::write(&first, format!("{top}{body}")).unwrap();
    std::fs::write(&last, format!("{body}{top}")).unwrap();
    let run_one = |path: &Path| {
        common::json_of(&[
            "check",
            path.to_str().unwrap(),
            "--model",
            "llama-3.2-1b",
            "--micro-batch",
            "1",
            "--seq-len",
            "1024",
            "--device",
            "h100-80gb",
            "--format",
            "json",
        ])
    };
    let (a, b) = (run_one(&first), run_one(&last));
    assert_eq!(a["memory"], b["memory"]);
    assert_eq!(a["parallelism"], b["parallelism"]);
    let (_, table, _) = run(&[
        "check",
        last.to_str().unwrap(),
        "--model",
        "llama-3.2-1b",
        "--micro-batch",
        "1",
        "--seq-len",
        "1024",
        "--device",
        "h100-80gb",
    ]);
    assert!(table.contains("--fsdp shard-grad-op"), "{table}");
    // The report lists the keys in the file's order.
    let sharding = table.find("fsdp_config.fsdp_sharding_strategy").unwrap();
    let distributed = table.find("distributed_type").unwrap();
    assert!(sharding < distributed, "{table}");
}

/// The whole report, reviewed as a snapshot: run from the fixtures folder
/// so that the files are named as a user would name them.
#[test]
fn the_report_reads_as_reviewed() {
    for (name, args) in [
        (
            "check_deepspeed_does_not_fit",
            vec![
                "check",
                "training-args-zero3.json",
                "--model",
                "llama-3.1-8b",
                "--gpus",
                "8",
                "--device",
                "h100-80gb",
            ],
        ),
        (
            "check_axolotl_qlora_fits",
            vec![
                "check",
                "axolotl-llama3-qlora.yaml",
                "--model",
                "llama-3.1-8b",
                "--device",
                "rtx-4090-24gb",
            ],
        ),
    ] {
        let output = assert_cmd::Command::cargo_bin("trainmem")
            .unwrap()
            .current_dir(FIXTURES)
            .env("HF_HUB_OFFLINE", "1")
            .args(&args)
            .output()
            .unwrap();
        insta::assert_snapshot!(name, String::from_utf8(output.stdout).unwrap());
    }
}

#[test]
fn each_suggestion_applied_alone_makes_it_fit() {
    // DeepSpeed alone: ZeRO stage and offload are changed in the JSON (nested
    // keys), what DeepSpeed has no key for on the command line.
    let extra = [
        "--model",
        "llama-3.1-8b",
        "--gpus",
        "8",
        "--seq-len",
        "4096",
        "--capacity",
        "70GB",
    ];
    let source = fixture("ds-zero1.json");
    let mut args = vec!["check", source.as_str()];
    args.extend(extra);
    let (code, stdout, stderr) = run(&[&args[..], &["--format", "json"]].concat());
    assert_eq!(code, 1, "{stderr}");
    let json: Value = serde_json::from_str(&stdout).unwrap();
    let suggestions = json["suggestions"].as_array().unwrap().clone();
    let files: Vec<&str> = suggestions
        .iter()
        .map(|s| s["file"].as_str().unwrap())
        .collect();
    assert!(
        files.contains(&source.as_str()) && files.contains(&"command line"),
        "{files:?}"
    );
    for suggestion in &suggestions {
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("ds-zero1.json");
        std::fs::copy(&source, &copy).unwrap();
        let key = suggestion["key"].as_str().unwrap();
        let mut args: Vec<String> = vec!["check".into(), copy.display().to_string()];
        args.extend(extra.iter().map(|s| s.to_string()));
        if suggestion["file"] == "command line" {
            // A flag the command line already gives (--gpus) takes the new value.
            let words: Vec<String> = key.split_whitespace().map(str::to_string).collect();
            for flag in words.iter().filter(|w| w.starts_with("--")) {
                if let Some(at) = args.iter().position(|a| a == flag) {
                    let valued = args.get(at + 1).is_some_and(|v| !v.starts_with("--"));
                    args.drain(at..at + 1 + usize::from(valued));
                }
            }
            args.extend(words);
        } else {
            apply(&copy, key);
        }
        let (code, stdout, stderr) = run_strings(&args);
        assert_eq!(code, 0, "after `{key}`:\n{stdout}\n{stderr}");
        let peak = suggestion["peak"].as_u64().unwrap();
        let rerun = common::json_of(
            &[
                args.iter().map(String::as_str).collect::<Vec<_>>(),
                vec!["--format", "json"],
            ]
            .concat(),
        );
        assert_eq!(
            rerun["memory"]["peak"].as_u64().unwrap(),
            peak,
            "the peak said is the peak"
        );
    }
}

#[test]
fn a_deepspeed_config_given_inline_is_read_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("args.json");
    std::fs::write(
        &path,
        r#"{"per_device_train_batch_size": 2, "max_seq_length": 1024, "bf16": true,
            "deepspeed": {"zero_optimization": {"stage": 2}, "bf16": {"enabled": "auto"},
                          "train_micro_batch_size_per_gpu": "auto"}}"#,
    )
    .unwrap();
    let path = path.to_str().unwrap();
    let args = [
        "check",
        path,
        "--model",
        "llama-3.2-1b",
        "--gpus",
        "2",
        "--device",
        "h100",
    ];
    let (code, stdout, stderr) = run(&args);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains(&format!("{path}#deepspeed (DeepSpeed)")),
        "{stdout}"
    );
    let lines = squeezed(&stdout);
    for wanted in [
        "zero_optimization.stage = 2 -> --zero 2",
        "bf16.enabled = auto -> auto: on, as the TrainingArguments ask -> --precision mixed-bf16",
    ] {
        assert!(
            lines.iter().any(|l| l.contains(wanted)),
            "{wanted}: {stdout}"
        );
    }
}

#[test]
fn a_reentrant_checkpoint_is_priced_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("axolotl.yaml");
    std::fs::write(
        &path,
        "base_model: llama-3.2-1b\nmicro_batch_size: 2\nsequence_len: 1024\ngradient_checkpointing: true\ngradient_checkpointing_kwargs:\n  use_reentrant: true\n",
    )
    .unwrap();
    let mut checked = common::json_of(&[
        "check",
        path.to_str().unwrap(),
        "--device",
        "h100",
        "--format",
        "json",
    ]);
    for extra in ["verdict", "keys", "suggestions"] {
        checked.as_object_mut().unwrap().remove(extra);
    }
    let estimated = common::json_of(&[
        "estimate",
        "--model",
        "llama-3.2-1b",
        "--micro-batch",
        "2",
        "--seq-len",
        "1024",
        "--recompute",
        "full",
        "--recompute-reentrant",
        "--optimizer",
        "adamw",
        "--device",
        "h100",
        "--format",
        "json",
    ]);
    assert_eq!(checked, estimated);
}
