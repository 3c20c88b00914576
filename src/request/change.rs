//! The typed change: one what-if (a technique, a suggestion, a plan row's
//! layout) as a value that applies itself to the flags of a request and
//! spells itself for each front door: the command line's flags, the web
//! API's kebab-case JSON keys, and a launch config's own keys
//! ([`crate::launch::Format::spell`]).
//!
//! The advisor (`crate::advisor`) searches sets of these; each set is
//! applied alone to the user's request and priced with `estimate`.

use serde::Serialize;
use serde_json::{Map, Value};

use super::RunFlags;

/// What a change gives up, in the order the advisor ranks its answers:
/// the same training first, then other numerics, then other parameters
/// trained (issue 23's ranking).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Category {
    /// The same updates of the same parameters: recomputation, the loss
    /// kernel, sharding, offloading, accumulation, more GPUs.
    SameMaths,
    /// The same parameters, updated with other numbers: precision, 8-bit
    /// optimizer states, the step in backward (no gradient clipping).
    Numerics,
    /// Other parameters trained: LoRA adapters, a quantized base.
    WhatIsTrained,
}

impl Category {
    /// `same maths`, `numerics`, `what is trained`.
    pub fn name(self) -> &'static str {
        match self {
            Category::SameMaths => "same maths",
            Category::Numerics => "numerics",
            Category::WhatIsTrained => "what is trained",
        }
    }
}

/// The setting a change makes: two changes of one set never make the same
/// one (a run has one recompute mode, one optimizer, one loss).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Slot {
    Batch,
    Loss,
    Recompute,
    ActivationOffload,
    Sharding,
    Offload,
    Optimizer,
    InBackward,
    Precision,
    Trained,
    Gpus,
}

/// A change the advisor tries, spelled by each front door in its own keys.
///
/// The first ten variants are those `check` suggested before the advisor
/// (their launch-config spellings are in `src/launch/`); the others follow.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Change {
    /// A smaller micro-batch and more accumulation: the same global batch.
    MicroBatch { micro_batch: u64, accumulation: u64 },
    /// A loss that never materializes the logits (Liger's fused linear cross-entropy).
    FusedLoss,
    /// Full activation recomputation (gradient checkpointing).
    Recompute,
    /// The saved activations in host memory.
    OffloadActivations,
    /// This ZeRO stage.
    Zero(u8),
    /// FSDP full sharding.
    FullShard,
    /// The optimizer states in host memory.
    OffloadOptimizer,
    /// 8-bit AdamW from bitsandbytes.
    Optimizer8bit,
    /// LoRA adapters of rank 16 on every linear.
    Lora,
    /// QLoRA: the base in nf4, with LoRA adapters added unless the run has them.
    Qlora { with_lora: bool },
    /// Selective recomputation (Megatron: the attention core rebuilt in backward).
    SelectiveRecompute,
    /// torchtune's chunked cross-entropy in 8 chunks.
    ChunkedLoss,
    /// Pure bf16: weights, gradients and states in bf16, no fp32 master copy.
    PureBf16,
    /// bf16 compute over fp32 master weights, from an fp32 run.
    MixedBf16,
    /// bitsandbytes' paged 8-bit AdamW: its states in CUDA unified memory.
    PagedOptimizer8bit,
    /// Parameters and optimizer states in host memory (ZeRO-3 offload).
    OffloadParameters,
    /// Each parameter stepped in backward, its gradient freed at once.
    OptimizerInBackward,
    /// This many GPUs, the model states sharded over them (ZeRO-3 unless
    /// the run shards already).
    Gpus { gpus: u64 },
}

/// The LoRA rank the advisor proposes: peft's examples' and the old ladder's 16.
pub const LORA_RANK: u64 = 16;
/// The chunks of the chunked loss: torchtune's default.
pub const LOSS_CHUNKS: u64 = 8;

/// One key a change sets: a switch or a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Setting {
    /// A switch turned on (`--offload-activations`, `"offload-activations": true`).
    On(&'static str),
    /// A flag with its value (`--recompute full`, `"recompute": "full"`).
    Value(&'static str, String),
}

impl Change {
    /// What it does, in words.
    pub fn words(&self) -> String {
        match self {
            Change::MicroBatch {
                micro_batch,
                accumulation,
            } => format!(
                "micro-batch {micro_batch} with gradient accumulation {accumulation} (the same global batch)"
            ),
            Change::FusedLoss => "Liger's fused linear cross-entropy (no whole logits)".to_string(),
            Change::Recompute => "activation checkpointing (full recomputation)".to_string(),
            Change::OffloadActivations => "activations offloaded to host memory".to_string(),
            Change::Zero(stage) => format!("ZeRO stage {stage}"),
            Change::FullShard => "FSDP full sharding".to_string(),
            Change::OffloadOptimizer => "optimizer states in host memory".to_string(),
            Change::Optimizer8bit => "8-bit AdamW (bitsandbytes)".to_string(),
            Change::Lora => format!("LoRA r{LORA_RANK} on every linear"),
            Change::Qlora { .. } => "QLoRA: the base in nf4".to_string(),
            Change::SelectiveRecompute => "selective recomputation (attention core)".to_string(),
            Change::ChunkedLoss => format!("chunked cross-entropy ({LOSS_CHUNKS} chunks)"),
            Change::PureBf16 => "pure bf16 (no fp32 master weights)".to_string(),
            Change::MixedBf16 => "mixed bf16 (bf16 compute, fp32 master weights)".to_string(),
            Change::PagedOptimizer8bit => "paged 8-bit AdamW (bitsandbytes)".to_string(),
            Change::OffloadParameters => {
                "parameters and optimizer states in host memory (ZeRO-3 offload)".to_string()
            }
            Change::OptimizerInBackward => "optimizer step in backward".to_string(),
            Change::Gpus { gpus } => format!("{gpus} GPUs, the model states sharded"),
        }
    }

    /// What it costs, in words: time, host memory, what is given up.
    pub fn cost(&self) -> &'static str {
        match self {
            Change::MicroBatch { .. } => "more, smaller micro-steps: lower GPU utilization",
            Change::FusedLoss => "none in maths; needs the Liger kernels",
            Change::Recompute => {
                "each layer's forward runs again in backward: about a third more compute"
            }
            Change::OffloadActivations => "host memory and PCIe copies of the saved activations",
            Change::Zero(_) | Change::FullShard => "more communication between the GPUs",
            Change::OffloadOptimizer => "host memory; the optimizer step runs on the CPU",
            Change::Optimizer8bit => "8-bit block-wise quantized optimizer states",
            Change::Lora => "trains low-rank adapters, not the weights",
            Change::Qlora { .. } => "trains adapters over a base quantized to 4 bits",
            Change::SelectiveRecompute => {
                "the attention core runs again in backward: a few percent more compute"
            }
            Change::ChunkedLoss => "the output head in chunks: a little slower",
            Change::PureBf16 => "bf16 updates without an fp32 master copy lose small steps",
            Change::MixedBf16 => "bf16 activations and matmuls instead of fp32",
            Change::PagedOptimizer8bit => "8-bit states, paged to host memory under pressure",
            Change::OffloadParameters => {
                "host memory for the weights and states; a much slower step"
            }
            Change::OptimizerInBackward => "no gradient clipping, no gradient accumulation",
            Change::Gpus { .. } => "more GPUs; more communication between them",
        }
    }

    /// What it gives up, for the ranking.
    pub fn category(&self) -> Category {
        match self {
            Change::MicroBatch { .. }
            | Change::FusedLoss
            | Change::Recompute
            | Change::OffloadActivations
            | Change::Zero(_)
            | Change::FullShard
            | Change::OffloadOptimizer
            | Change::SelectiveRecompute
            | Change::ChunkedLoss
            | Change::OffloadParameters
            | Change::Gpus { .. } => Category::SameMaths,
            Change::Optimizer8bit
            | Change::PagedOptimizer8bit
            | Change::PureBf16
            | Change::MixedBf16
            | Change::OptimizerInBackward => Category::Numerics,
            Change::Lora | Change::Qlora { .. } => Category::WhatIsTrained,
        }
    }

    /// The setting it makes.
    pub fn slot(&self) -> Slot {
        match self {
            Change::MicroBatch { .. } => Slot::Batch,
            Change::FusedLoss | Change::ChunkedLoss => Slot::Loss,
            Change::Recompute | Change::SelectiveRecompute => Slot::Recompute,
            Change::OffloadActivations => Slot::ActivationOffload,
            Change::Zero(_) | Change::FullShard => Slot::Sharding,
            Change::OffloadOptimizer | Change::OffloadParameters => Slot::Offload,
            Change::Optimizer8bit | Change::PagedOptimizer8bit => Slot::Optimizer,
            Change::OptimizerInBackward => Slot::InBackward,
            Change::PureBf16 | Change::MixedBf16 => Slot::Precision,
            Change::Lora | Change::Qlora { .. } => Slot::Trained,
            Change::Gpus { .. } => Slot::Gpus,
        }
    }

    /// The flags a change touches, to find the file that set them.
    pub fn flags(&self) -> &'static [&'static str] {
        match self {
            Change::MicroBatch { .. } => &["--micro-batch", "--grad-accumulation"],
            Change::FusedLoss | Change::ChunkedLoss => &["--loss"],
            Change::Recompute | Change::SelectiveRecompute => &["--recompute"],
            Change::OffloadActivations => &["--offload-activations"],
            Change::Zero(_) => &["--zero"],
            Change::FullShard => &["--fsdp"],
            Change::OffloadOptimizer => &["--offload"],
            Change::OffloadParameters => &["--offload", "--zero", "--fsdp"],
            Change::Optimizer8bit | Change::PagedOptimizer8bit => &["--optimizer"],
            Change::Lora => &["--lora-rank"],
            Change::Qlora { .. } => &["--quantize", "--lora-rank"],
            Change::PureBf16 | Change::MixedBf16 => &["--precision"],
            Change::OptimizerInBackward => &["--optimizer-in-backward"],
            Change::Gpus { .. } => &["--gpus", "--zero", "--fsdp"],
        }
    }

    /// The keys it sets on `flags` (the flags before it: whether the run
    /// already shards decides what more GPUs and parameter offload set).
    pub fn settings(&self, flags: &RunFlags) -> Vec<Setting> {
        use Setting::{On, Value as V};
        let value = |key, text: &str| V(key, text.to_string());
        let sharded = flags.parallel.fsdp.is_some()
            || flags
                .parallel
                .zero
                .as_deref()
                .is_some_and(|z| z.trim() != "0");
        match self {
            Change::MicroBatch {
                micro_batch,
                accumulation,
            } => vec![
                value("micro-batch", &micro_batch.to_string()),
                value("grad-accumulation", &accumulation.to_string()),
            ],
            Change::FusedLoss => vec![value("loss", "fused")],
            Change::ChunkedLoss => vec![value("loss", &format!("chunked:{LOSS_CHUNKS}"))],
            Change::Recompute => vec![value("recompute", "full")],
            Change::SelectiveRecompute => vec![value("recompute", "selective")],
            Change::OffloadActivations => vec![On("offload-activations")],
            Change::Zero(stage) => vec![value("zero", &stage.to_string())],
            Change::FullShard => vec![value("fsdp", "full-shard")],
            Change::OffloadOptimizer => vec![value("offload", "optimizer")],
            Change::OffloadParameters => {
                let mut out = vec![value("offload", "optimizer+params")];
                match flags.parallel.fsdp.as_deref() {
                    Some("full-shard" | "hybrid-shard") => {}
                    Some(_) => out.push(value("fsdp", "full-shard")),
                    None if flags.parallel.zero.as_deref().map(str::trim) == Some("3") => {}
                    None => out.push(value("zero", "3")),
                }
                out
            }
            Change::Optimizer8bit => vec![value("optimizer", "adamw-8bit")],
            Change::PagedOptimizer8bit => vec![value("optimizer", "paged-adamw-8bit")],
            Change::Lora => vec![
                value("lora-rank", &LORA_RANK.to_string()),
                value("lora-targets", "all-linear"),
            ],
            Change::Qlora { .. } => {
                let mut out = Vec::new();
                if flags.finetune.lora_rank.is_none() {
                    out.push(value("lora-rank", &LORA_RANK.to_string()));
                    out.push(value("lora-targets", "all-linear"));
                }
                out.push(value("quantize", "nf4"));
                out
            }
            Change::PureBf16 => vec![value("precision", "bf16")],
            Change::MixedBf16 => vec![value("precision", "mixed-bf16")],
            Change::OptimizerInBackward => vec![On("optimizer-in-backward")],
            Change::Gpus { gpus } => {
                let mut out = vec![value("gpus", &gpus.to_string())];
                if !sharded {
                    // FSDP2 steps in backward; DeepSpeed has no such step.
                    if flags.workload.optimizer_in_backward {
                        out.push(value("fsdp", "full-shard"));
                    } else {
                        out.push(value("zero", "3"));
                    }
                }
                out
            }
        }
    }

    /// The command line's spelling: `--recompute full --offload-activations`.
    pub fn cli_flags(&self, flags: &RunFlags) -> Vec<String> {
        let mut out = Vec::new();
        for setting in self.settings(flags) {
            match setting {
                Setting::On(key) => out.push(format!("--{key}")),
                Setting::Value(key, value) => {
                    out.push(format!("--{key}"));
                    out.push(value);
                }
            }
        }
        out
    }

    /// The web API's spelling: `{"recompute": "full", "offload-activations": true}`.
    pub fn json(&self, flags: &RunFlags) -> Map<String, Value> {
        let mut out = Map::new();
        for setting in self.settings(flags) {
            match setting {
                Setting::On(key) => out.insert(key.to_string(), Value::Bool(true)),
                Setting::Value(key, value) => out.insert(key.to_string(), Value::String(value)),
            };
        }
        out
    }

    /// The change made to `flags`, as its [`Change::settings`] say.
    pub fn apply(&self, flags: &mut RunFlags) {
        for setting in self.settings(flags) {
            match setting {
                Setting::On(key) => set_switch(flags, key),
                Setting::Value(key, value) => set_value(flags, key, value),
            }
        }
    }
}

/// Turns on the switch `key` (one of those [`Change::settings`] names).
fn set_switch(flags: &mut RunFlags, key: &str) {
    match key {
        "offload-activations" => flags.workload.offload_activations = true,
        "optimizer-in-backward" => flags.workload.optimizer_in_backward = true,
        _ => {}
    }
}

/// Sets `key` to `value` (one of those [`Change::settings`] names), as the
/// command line's parser would: `--zero` and `--fsdp` exclude each other.
fn set_value(flags: &mut RunFlags, key: &str, value: String) {
    let number = |text: &str, fallback: u64| text.parse::<u64>().unwrap_or(fallback);
    match key {
        "micro-batch" => flags.workload.micro_batch = value.parse().ok(),
        "grad-accumulation" => {
            flags.workload.grad_accumulation = number(&value, flags.workload.grad_accumulation)
        }
        "loss" => flags.workload.loss = value,
        "recompute" => flags.workload.recompute = value,
        "zero" => {
            flags.parallel.zero = Some(value);
            flags.parallel.fsdp = None;
        }
        "fsdp" => {
            flags.parallel.fsdp = Some(value);
            flags.parallel.zero = None;
        }
        "offload" => flags.parallel.offload = value,
        "optimizer" => flags.training.optimizer = value,
        "lora-rank" => flags.finetune.lora_rank = value.parse().ok(),
        "lora-targets" => flags.finetune.lora_targets = value,
        "quantize" => flags.finetune.quantize = Some(value),
        "precision" => flags.training.precision = value,
        "gpus" => flags.parallel.gpus = number(&value, flags.parallel.gpus),
        _ => {}
    }
}

/// The set of changes applied in turn, in slot order (so that more GPUs
/// see whether the others shard).
pub fn apply_all(changes: &[Change], flags: &mut RunFlags) {
    let mut ordered: Vec<&Change> = changes.iter().collect();
    ordered.sort_by_key(|c| c.slot());
    for change in ordered {
        change.apply(flags);
    }
}

/// The command line's spelling of a set of changes applied to `flags`.
pub fn cli_flags_all(changes: &[Change], flags: &RunFlags) -> Vec<String> {
    let mut ordered: Vec<&Change> = changes.iter().collect();
    ordered.sort_by_key(|c| c.slot());
    let mut current = flags.clone();
    let mut out = Vec::new();
    for change in ordered {
        out.extend(change.cli_flags(&current));
        change.apply(&mut current);
    }
    out
}

/// The web API's spelling of a set of changes applied to `flags`.
pub fn json_all(changes: &[Change], flags: &RunFlags) -> Map<String, Value> {
    let mut ordered: Vec<&Change> = changes.iter().collect();
    ordered.sort_by_key(|c| c.slot());
    let mut current = flags.clone();
    let mut out = Map::new();
    for change in ordered {
        out.extend(change.json(&current));
        change.apply(&mut current);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::EstimateRequest;
    use clap::{Args, FromArgMatches};

    /// Every change, as the advisor may propose it.
    fn every() -> Vec<Change> {
        vec![
            Change::MicroBatch {
                micro_batch: 2,
                accumulation: 4,
            },
            Change::FusedLoss,
            Change::Recompute,
            Change::OffloadActivations,
            Change::Zero(2),
            Change::FullShard,
            Change::OffloadOptimizer,
            Change::Optimizer8bit,
            Change::Lora,
            Change::Qlora { with_lora: false },
            Change::SelectiveRecompute,
            Change::ChunkedLoss,
            Change::PureBf16,
            Change::MixedBf16,
            Change::PagedOptimizer8bit,
            Change::OffloadParameters,
            Change::OptimizerInBackward,
            Change::Gpus { gpus: 4 },
        ]
    }

    /// The flags the command line's parser makes of `argv`.
    fn parsed(argv: &[String]) -> RunFlags {
        let command = RunFlags::augment_args(clap::Command::new("estimate"));
        let matches = command
            .try_get_matches_from(
                std::iter::once("estimate".to_string()).chain(argv.iter().cloned()),
            )
            .unwrap();
        RunFlags::from_arg_matches(&matches).unwrap()
    }

    #[test]
    fn applying_a_change_is_parsing_its_flags() {
        let base_argv: Vec<String> = ["--micro-batch", "8", "--seq-len", "512", "--gpus", "2"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        for change in every() {
            let mut applied = parsed(&base_argv);
            let flags = change.cli_flags(&applied);
            change.apply(&mut applied);
            // The command line gives each flag once: a flag the change
            // sets replaces the base's.
            let mut argv = base_argv.clone();
            for flag in flags.iter().filter(|f| f.starts_with("--")) {
                if let Some(at) = argv.iter().position(|a| a == flag) {
                    argv.drain(at..at + 2);
                }
            }
            argv.extend(flags);
            let typed = parsed(&argv);
            assert_eq!(
                serde_json::to_value(&applied).unwrap(),
                serde_json::to_value(&typed).unwrap(),
                "{change:?}"
            );
        }
    }

    #[test]
    fn json_spelling_is_a_request() {
        for change in every() {
            let base = EstimateRequest::with_model(None, None).unwrap();
            let mut object = change.json(&base.flags);
            object.insert("params".into(), Value::String("1B".into()));
            let request = EstimateRequest::from_json(&object).unwrap();
            let mut applied = base.flags.clone();
            change.apply(&mut applied);
            assert_eq!(
                serde_json::to_value(&applied).unwrap(),
                serde_json::to_value(&request.flags).unwrap(),
                "{change:?}"
            );
        }
    }
}
