//! An accelerate config YAML, as `accelerate config` writes it (the
//! templates of accelerate's `examples/config_yaml_templates`). accelerate's
//! FSDP is FSDP1 unless `fsdp_version: 2`; its `mixed_precision` autocasts
//! fp32 weights, except under DeepSpeed and FSDP, whose engines keep the
//! fp32 copy beside half-precision compute weights.

use serde_json::{Map, Value};

use super::key::{Choice, Effect, Key, Rule, count, name_of, truth};
use super::{Change, Deferred, Engine, Setting};

/// The value of `distributed_type`, upper case.
fn distributed(document: &Map<String, Value>) -> String {
    document
        .get("distributed_type")
        .and_then(name_of)
        .map(|d| d.to_ascii_uppercase())
        .unwrap_or_else(|| "NO".to_string())
}

fn set(flags: &[(&'static str, &str)]) -> Effect {
    Effect::Set(
        flags
            .iter()
            .map(|(flag, value)| Setting {
                flag,
                value: (!value.is_empty()).then(|| value.to_string()),
            })
            .collect(),
    )
}

/// `distributed_type`: FSDP is full sharding with FSDP1 until `fsdp_config` says otherwise.
fn distributed_type(value: &Value, document: &Map<String, Value>) -> Result<Effect, String> {
    let name = name_of(value)
        .ok_or("expected a name such as MULTI_GPU")?
        .to_ascii_uppercase();
    Ok(match name.as_str() {
        "NO" => Effect::Nothing("one process".to_string()),
        "MULTI_GPU" => Effect::Nothing("data parallel: a whole replica on each GPU".to_string()),
        "DEEPSPEED" => set(&[("--framework", "deepspeed")]),
        "FSDP" => {
            let config = document.get("fsdp_config");
            let version = config
                .and_then(|c| c.get("fsdp_version"))
                .and_then(name_of)
                .unwrap_or_else(|| "1".to_string());
            let framework = if version == "2" { "fsdp2" } else { "fsdp1" };
            // The strategy key itself when given (it sets the same), so the
            // order of the keys in the file does not matter.
            if let Some(strategy) = config.and_then(|c| c.get("fsdp_sharding_strategy")) {
                let Effect::Set(mut flags) = super::key::choose(strategy, SHARDING)? else {
                    return Ok(Effect::NotModelled(
                        "hybrid sharding with ZeRO-2 inside a node".to_string(),
                    ));
                };
                flags.push(Setting {
                    flag: "--framework",
                    value: Some(framework.to_string()),
                });
                return Ok(Effect::Set(flags));
            }
            let strategy = match config.and_then(|c| c.get("fsdp_reshard_after_forward")) {
                Some(reshard) if version == "2" => {
                    if truth(reshard)? {
                        "full-shard"
                    } else {
                        "shard-grad-op"
                    }
                }
                _ => "full-shard",
            };
            set(&[("--fsdp", strategy), ("--framework", framework)])
        }
        "MULTI_CPU" | "MULTI_NPU" | "MULTI_XPU" | "MULTI_MLU" | "MULTI_SDAA" | "MULTI_MUSA"
        | "MULTI_HPU" | "XLA" | "TPU" => {
            Effect::NotModelled(format!("{name}: trainmem prices CUDA GPUs"))
        }
        "MEGATRON_LM" => Effect::NotModelled("accelerate's Megatron-LM plugin".to_string()),
        _ => {
            return Err(
                "accepted: NO, MULTI_GPU, DEEPSPEED, FSDP (and accelerate's other backends)"
                    .to_string(),
            );
        }
    })
}

/// `mixed_precision`: autocast alone, or the engine's mixed precision.
fn mixed_precision(value: &Value, document: &Map<String, Value>) -> Result<Effect, String> {
    let name = name_of(value)
        .ok_or("expected no, bf16, fp16 or fp8")?
        .to_ascii_lowercase();
    let engine = match distributed(document).as_str() {
        "DEEPSPEED" => Engine::DeepSpeed,
        "FSDP" => Engine::Fsdp,
        _ => Engine::None,
    };
    let why = "autocast over the weights as the script loads them";
    Ok(match name.as_str() {
        "no" => Effect::Nothing("fp32".to_string()),
        "bf16" => Effect::Defer(
            Deferred::Autocast {
                dtype: "bf16",
                engine,
            },
            why,
        ),
        "fp16" => Effect::Defer(
            Deferred::Autocast {
                dtype: "fp16",
                engine,
            },
            why,
        ),
        "fp8" => fp8(document),
        _ => return Err("accepted: no, bf16, fp16, fp8".to_string()),
    })
}

/// `mixed_precision: fp8`, by `fp8_config.backend`: Transformer Engine's
/// recipe or torchao's tensorwise float8.
fn fp8(document: &Map<String, Value>) -> Effect {
    let backend = document
        .get("fp8_config")
        .and_then(|c| c.get("backend"))
        .and_then(name_of)
        .map(|b| b.to_ascii_uppercase());
    match backend.as_deref() {
        Some("TE") => set(&[("--precision", "te-fp8")]),
        Some("AO") => set(&[("--precision", "fp8-tensorwise")]),
        Some(other) => Effect::NotModelled(format!("the fp8 backend {other}")),
        None => Effect::NotModelled(
            "fp8 without fp8_config.backend (TE or AO): the recipe is unknown".to_string(),
        ),
    }
}

/// `deepspeed_config.offload_optimizer_device`, with `offload_param_device`.
fn offload_optimizer(value: &Value, document: &Map<String, Value>) -> Result<Effect, String> {
    let params = document
        .get("deepspeed_config")
        .and_then(|d| d.get("offload_param_device"))
        .and_then(name_of)
        .unwrap_or_default()
        .to_ascii_lowercase();
    match name_of(value).map(|v| v.to_ascii_lowercase()).as_deref() {
        Some("cpu") if params == "cpu" => Ok(set(&[("--offload", "optimizer+params")])),
        Some("cpu") => Ok(set(&[("--offload", "optimizer")])),
        Some("nvme") => Ok(Effect::NotModelled(
            "ZeRO-Infinity's NVMe offload".to_string(),
        )),
        Some("none") | None => Ok(Effect::Nothing("none".to_string())),
        Some(_) => Err("accepted: none, cpu, nvme".to_string()),
    }
}

fn offload_param(value: &Value, document: &Map<String, Value>) -> Result<Effect, String> {
    let optimizer = document
        .get("deepspeed_config")
        .and_then(|d| d.get("offload_optimizer_device"))
        .and_then(name_of)
        .unwrap_or_default()
        .to_ascii_lowercase();
    match name_of(value).map(|v| v.to_ascii_lowercase()).as_deref() {
        Some("cpu") if optimizer == "cpu" => Ok(Effect::Nothing(
            "read with offload_optimizer_device: --offload optimizer+params".to_string(),
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

/// FSDP1's `fsdp_sharding_strategy`, by name or number.
const SHARDING: &[(&str, Choice)] = &[
    ("FULL_SHARD", Choice::Set(&[("--fsdp", "full-shard")])),
    ("1", Choice::Set(&[("--fsdp", "full-shard")])),
    ("SHARD_GRAD_OP", Choice::Set(&[("--fsdp", "shard-grad-op")])),
    ("2", Choice::Set(&[("--fsdp", "shard-grad-op")])),
    ("NO_SHARD", Choice::Set(&[("--fsdp", "no-shard")])),
    ("3", Choice::Set(&[("--fsdp", "no-shard")])),
    ("HYBRID_SHARD", Choice::Set(&[("--fsdp", "hybrid-shard")])),
    ("4", Choice::Set(&[("--fsdp", "hybrid-shard")])),
    (
        "HYBRID_SHARD_ZERO2",
        Choice::NotModelled("hybrid sharding with ZeRO-2 inside a node"),
    ),
    (
        "5",
        Choice::NotModelled("hybrid sharding with ZeRO-2 inside a node"),
    ),
];

/// The most processes accepted on one machine. The densest real hosts run
/// 8 or 16 accelerators, and at most 128 processes (one per NeuronCore of
/// an AWS trn2.48xlarge); eight times that leaves room for any host to come
/// while a count like 10^9, which would be priced as a node holding a
/// billion GPUs' host memory, is refused.
const MAX_PROCESSES_PER_MACHINE: u64 = 1024;

/// `num_processes`: the processes of all machines together
/// (`accelerate launch --num_processes`), each one GPU; at most
/// [`MAX_PROCESSES_PER_MACHINE`] on each of the `num_machines`.
fn num_processes(value: &Value, document: &Map<String, Value>) -> Result<Effect, String> {
    let Some(processes) = count(value)? else {
        return Ok(Effect::Nothing("auto: the launcher decides".to_string()));
    };
    // num_machines' own rule refuses a bad value; one machine meanwhile.
    let machines = document
        .get("num_machines")
        .and_then(|m| count(m).ok().flatten())
        .unwrap_or(1);
    let per_machine = processes.div_ceil(machines);
    if per_machine > MAX_PROCESSES_PER_MACHINE {
        return Err(format!(
            "{per_machine} processes on each of {machines} machine(s); accepted: at most {MAX_PROCESSES_PER_MACHINE} per machine (num_processes counts the processes of all num_machines together, one per GPU)"
        ));
    }
    Ok(Effect::Set(vec![Setting {
        flag: "--gpus",
        value: Some(processes.to_string()),
    }]))
}

/// The keys, each with the flags it sets.
pub const KEYS: &[Key] = &[
    Key {
        name: "distributed_type",
        rule: Rule::Read(distributed_type),
    },
    Key {
        name: "num_processes",
        rule: Rule::Read(num_processes),
    },
    Key {
        name: "num_machines",
        rule: Rule::Count("--nodes"),
    },
    Key {
        name: "mixed_precision",
        rule: Rule::Read(mixed_precision),
    },
    Key {
        name: "deepspeed_config.zero_stage",
        rule: Rule::Choice(&[
            ("0", Choice::Set(&[("--zero", "0")])),
            ("1", Choice::Set(&[("--zero", "1")])),
            ("2", Choice::Set(&[("--zero", "2")])),
            ("3", Choice::Set(&[("--zero", "3")])),
        ]),
    },
    Key {
        name: "deepspeed_config.offload_optimizer_device",
        rule: Rule::Read(offload_optimizer),
    },
    Key {
        name: "deepspeed_config.offload_param_device",
        rule: Rule::Read(offload_param),
    },
    Key {
        name: "deepspeed_config.gradient_accumulation_steps",
        rule: Rule::Count("--grad-accumulation"),
    },
    Key {
        name: "deepspeed_config.zero3_init_flag",
        rule: Rule::Read(|v, _| {
            Ok(if truth(v)? {
                Effect::Nothing("zero.Init: each rank builds only its shard".to_string())
            } else {
                Effect::NotModelled(
                    "the whole model built on each rank before DeepSpeed partitions it".to_string(),
                )
            })
        }),
    },
    Key {
        name: "deepspeed_config.deepspeed_config_file",
        rule: Rule::Include,
    },
    Key {
        name: "deepspeed_config.gradient_clipping",
        rule: Rule::NoMemory,
    },
    Key {
        name: "deepspeed_config.zero3_save_16bit_model",
        rule: Rule::NoMemory,
    },
    Key {
        name: "deepspeed_config.deepspeed_multinode_launcher",
        rule: Rule::NoMemory,
    },
    Key {
        name: "deepspeed_config.deepspeed_hostfile",
        rule: Rule::NoMemory,
    },
    Key {
        name: "fsdp_config.fsdp_sharding_strategy",
        rule: Rule::Choice(SHARDING),
    },
    Key {
        name: "fsdp_config.fsdp_version",
        rule: Rule::Choice(super::training_arguments::FSDP_VERSION),
    },
    Key {
        name: "fsdp_config.fsdp_reshard_after_forward",
        rule: Rule::Read(|_, _| {
            Ok(Effect::Nothing(
                "read with distributed_type: true is full sharding, false shard-grad-op"
                    .to_string(),
            ))
        }),
    },
    Key {
        name: "fsdp_config.fsdp_offload_params",
        rule: Rule::Switch(&[("--offload", "optimizer+params")]),
    },
    Key {
        name: "fsdp_config.fsdp_activation_checkpointing",
        rule: Rule::Switch(&[("--recompute", "full")]),
    },
    Key {
        name: "fsdp_config.fsdp_cpu_ram_efficient_loading",
        rule: Rule::Switch(&[("--init", "rank0")]),
    },
    Key {
        name: "fsdp_config.fsdp_auto_wrap_policy",
        rule: Rule::NoMemory,
    },
    Key {
        name: "fsdp_config.fsdp_backward_prefetch",
        rule: Rule::NoMemory,
    },
    Key {
        name: "fsdp_config.fsdp_backward_prefetch_policy",
        rule: Rule::NoMemory,
    },
    Key {
        name: "fsdp_config.fsdp_forward_prefetch",
        rule: Rule::NoMemory,
    },
    Key {
        name: "fsdp_config.fsdp_state_dict_type",
        rule: Rule::NoMemory,
    },
    Key {
        name: "fsdp_config.fsdp_sync_module_states",
        rule: Rule::NoMemory,
    },
    Key {
        name: "fsdp_config.fsdp_transformer_layer_cls_to_wrap",
        rule: Rule::NoMemory,
    },
    Key {
        name: "fsdp_config.fsdp_use_orig_params",
        rule: Rule::NoMemory,
    },
    Key {
        name: "fsdp_config.fsdp_min_num_params",
        rule: Rule::NoMemory,
    },
    Key {
        name: "dynamo_config.dynamo_backend",
        rule: Rule::Read(|v, _| {
            Ok(
                if name_of(v).is_some_and(|b| b.eq_ignore_ascii_case("no")) {
                    Effect::Nothing("no torch.compile".to_string())
                } else {
                    Effect::NotModelled("torch.compile changes which activations are saved; trainmem prices eager PyTorch".to_string())
                },
            )
        }),
    },
    Key {
        name: "dynamo_config.dynamo_mode",
        rule: Rule::NoMemory,
    },
    Key {
        name: "dynamo_config.dynamo_use_fullgraph",
        rule: Rule::NoMemory,
    },
    Key {
        name: "dynamo_config.dynamo_use_dynamic",
        rule: Rule::NoMemory,
    },
    Key {
        name: "megatron_lm_config",
        rule: Rule::NotModelled("accelerate's Megatron-LM plugin"),
    },
    Key {
        name: "compute_environment",
        rule: Rule::NoMemory,
    },
    Key {
        name: "machine_rank",
        rule: Rule::NoMemory,
    },
    Key {
        name: "main_process_ip",
        rule: Rule::NoMemory,
    },
    Key {
        name: "main_process_port",
        rule: Rule::NoMemory,
    },
    Key {
        name: "main_training_function",
        rule: Rule::NoMemory,
    },
    Key {
        name: "rdzv_backend",
        rule: Rule::NoMemory,
    },
    Key {
        name: "same_network",
        rule: Rule::NoMemory,
    },
    Key {
        name: "downcast_bf16",
        rule: Rule::NoMemory,
    },
    Key {
        name: "use_cpu",
        rule: Rule::Read(|v, _| {
            Ok(if truth(v)? {
                Effect::NotModelled("training on the CPU".to_string())
            } else {
                Effect::Nothing("off".to_string())
            })
        }),
    },
    Key {
        name: "debug",
        rule: Rule::NoMemory,
    },
    Key {
        name: "enable_cpu_affinity",
        rule: Rule::NoMemory,
    },
    Key {
        name: "gpu_ids",
        rule: Rule::NoMemory,
    },
    Key {
        name: "tpu_env",
        rule: Rule::NoMemory,
    },
    Key {
        name: "tpu_use_cluster",
        rule: Rule::NoMemory,
    },
    Key {
        name: "tpu_use_sudo",
        rule: Rule::NoMemory,
    },
];

/// A change in these keys.
pub fn spell(change: &Change) -> Option<Vec<(String, String)>> {
    let pairs: Vec<(&str, String)> = match change {
        Change::Zero(stage) => vec![
            ("distributed_type", "DEEPSPEED".to_string()),
            ("deepspeed_config.zero_stage", stage.to_string()),
        ],
        Change::FullShard => vec![
            ("distributed_type", "FSDP".to_string()),
            (
                "fsdp_config.fsdp_sharding_strategy",
                "FULL_SHARD".to_string(),
            ),
        ],
        Change::OffloadOptimizer => {
            vec![(
                "deepspeed_config.offload_optimizer_device",
                "cpu".to_string(),
            )]
        }
        _ => return None,
    };
    Some(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}
