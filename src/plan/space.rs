//! The layouts a search considers: what each framework accepts, and the
//! degrees the model can be split by.
//!
//! Per framework (their documented combinations):
//! * DeepSpeed: ZeRO 0-3, expert parallelism (DeepSpeed-MoE), pipeline
//!   stages with ZeRO 0 or 1 only (`PipelineEngine` refuses ZeRO-2/3), no
//!   tensor or context parallelism of its own; recomputation is
//!   `gradient_checkpointing` (full) or none; optimizer offload with ZeRO
//!   1-3, parameters too with ZeRO-3.
//! * Megatron-LM: tensor (with or without sequence parallelism), pipeline,
//!   context and expert parallelism, the distributed optimizer (`--zero 1`)
//!   or none; recomputation none, selective or full; no offload.
//! * FSDP2 (torchtitan): no-shard, shard-grad-op, full-shard and, across
//!   nodes, hybrid-shard, composed with tensor, pipeline, context and expert
//!   parallelism; recomputation none, op (torchtitan's selective per-op
//!   policy) or full; `CPUOffloadPolicy` (parameters, gradients and
//!   optimizer states on the host) with full sharding.
//! * FSDP1 (only when `--framework fsdp1` is given): its four strategies,
//!   with no other parallelism.
//!
//! Tensor parallelism stays inside a node (it all-reduces every layer's
//! activations over NVLink). Degrees divide what they split: tp the
//! attention heads (checked by the estimate itself), pp the layers (equal
//! stages), ep the experts, cp the sequence into 2·cp chunks.

use crate::activation::{Loss, Recompute};
use crate::error::{Error, Result};
use crate::estimate::Setup;
use crate::parallel::{Framework, Offload, Parallelism, ZeroStage};

/// A framework and what its data parallelism shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sharding {
    pub framework: Framework,
    pub zero: ZeroStage,
    pub hybrid: bool,
}

impl Sharding {
    /// The `estimate` flags that choose it.
    pub fn flags(self) -> Vec<String> {
        let zero = match self.zero {
            ZeroStage::None => "0",
            ZeroStage::OptimizerStates => "1",
            ZeroStage::Gradients => "2",
            ZeroStage::Weights => "3",
        };
        let strategy = match (self.zero, self.hybrid) {
            (ZeroStage::Weights, true) => "hybrid-shard",
            (ZeroStage::Weights, false) => "full-shard",
            (ZeroStage::None, _) => "no-shard",
            _ => "shard-grad-op",
        };
        let words: &[&str] = match self.framework {
            Framework::DeepSpeed => &["--zero", zero],
            Framework::Megatron => &["--framework", "megatron", "--zero", zero],
            Framework::Fsdp2 => &["--fsdp", strategy],
            Framework::Fsdp1 => &["--framework", "fsdp1", "--fsdp", strategy],
        };
        words.iter().map(|w| w.to_string()).collect()
    }

    /// Every sharding `framework` offers on `nodes` nodes.
    pub fn all_of(framework: Framework, nodes: u64) -> Vec<Sharding> {
        let stages: &[ZeroStage] = match framework {
            Framework::Megatron => &[ZeroStage::None, ZeroStage::OptimizerStates],
            Framework::DeepSpeed => &[
                ZeroStage::None,
                ZeroStage::OptimizerStates,
                ZeroStage::Gradients,
                ZeroStage::Weights,
            ],
            Framework::Fsdp2 | Framework::Fsdp1 => {
                &[ZeroStage::None, ZeroStage::Gradients, ZeroStage::Weights]
            }
        };
        let mut out: Vec<Sharding> = stages
            .iter()
            .map(|&zero| Sharding {
                framework,
                zero,
                hybrid: false,
            })
            .collect();
        if framework.is_fsdp() && nodes > 1 {
            out.push(Sharding {
                framework,
                zero: ZeroStage::Weights,
                hybrid: true,
            });
        }
        out
    }
}

/// The search's axes: every value each may take.
#[derive(Debug, Clone)]
pub struct Axes {
    pub gpus: u64,
    pub nodes: u64,
    pub shardings: Vec<Sharding>,
    pub tensor: Vec<u64>,
    pub pipeline: Vec<u64>,
    pub context: Vec<u64>,
    pub expert: Vec<u64>,
    /// Sequence parallelism values tried with tp > 1 (off only at tp 1).
    pub sequence_parallel: Vec<bool>,
    pub offload: Vec<Offload>,
    pub recompute: Vec<Recompute>,
    /// Loss kernels tried (Megatron keeps its own).
    pub loss: Vec<Loss>,
    /// Activation offloading values tried (not with Megatron).
    pub offload_activations: Vec<bool>,
    /// Micro-batches tried, ascending (without a global batch).
    pub micro_batches: Vec<u64>,
    /// The global batch in sequences: micro-batch × accumulation × dp.
    pub global_batch: Option<u64>,
    /// The accumulation without a global batch.
    pub accumulation: u64,
}

/// One layout: a launch command's parallel and memory choices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub sharding: Sharding,
    pub tensor: u64,
    pub pipeline: u64,
    pub context: u64,
    pub expert: u64,
    pub sequence_parallel: bool,
    pub offload: Offload,
    pub recompute: Recompute,
    pub loss: Loss,
    pub offload_activations: bool,
    pub micro_batch: u64,
    pub accumulation: u64,
}

/// The names `--allow` takes, each opening one axis of the search.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Allow {
    pub zero: bool,
    pub fsdp: bool,
    pub megatron: bool,
    pub tp: bool,
    pub pp: bool,
    pub ep: bool,
    pub cp: bool,
    pub sp: bool,
    pub offload: bool,
    pub recompute: bool,
    pub loss: bool,
}

impl Allow {
    /// What `--allow` gives when not typed.
    pub const DEFAULT: Allow = Allow {
        zero: true,
        fsdp: true,
        megatron: true,
        tp: true,
        pp: true,
        ep: true,
        cp: true,
        sp: true,
        offload: false,
        recompute: true,
        loss: true,
    };

    /// The names accepted, for messages and `--help`.
    pub const NAMES: &'static str =
        "zero, fsdp, megatron, tp, pp, ep, cp, sp, recompute, loss, offload, or all";

    /// Reads a comma-separated list such as `zero,tp,pp,recompute`.
    pub fn parse(list: &str) -> Result<Allow> {
        let mut allow = Allow::default();
        for word in list.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            let slot = match word.to_ascii_lowercase().as_str() {
                "all" => {
                    allow = Allow {
                        offload: true,
                        ..Allow::DEFAULT
                    };
                    continue;
                }
                "zero" | "deepspeed" => &mut allow.zero,
                "fsdp" | "fsdp2" => &mut allow.fsdp,
                "megatron" => &mut allow.megatron,
                "tp" => &mut allow.tp,
                "pp" => &mut allow.pp,
                "ep" => &mut allow.ep,
                "cp" => &mut allow.cp,
                "sp" | "sequence-parallel" => &mut allow.sp,
                "offload" => &mut allow.offload,
                "recompute" => &mut allow.recompute,
                "loss" => &mut allow.loss,
                _ => {
                    return Err(Error::UnknownName {
                        kind: "--allow item",
                        name: word.to_string(),
                        suggestion: None,
                        accepted: Allow::NAMES.to_string(),
                    });
                }
            };
            *slot = true;
        }
        Ok(allow)
    }
}

/// A layout's parallel structure: everything but the workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Structure {
    pub sharding: Sharding,
    pub tensor: u64,
    pub pipeline: u64,
    pub context: u64,
    pub expert: u64,
    pub offload: Offload,
}

impl Structure {
    /// The data-parallel degree on `gpus`.
    pub fn data(&self, gpus: u64) -> u64 {
        gpus / (self.tensor * self.pipeline * self.context)
    }
}

/// Whether `framework` composes `structure` (the rules in the module docs).
fn accepted(s: &Structure) -> bool {
    let framework = s.sharding.framework;
    let parallel_ok = match framework {
        Framework::DeepSpeed => {
            s.tensor == 1
                && s.context == 1
                && (s.pipeline == 1 || s.sharding.zero <= ZeroStage::OptimizerStates)
        }
        Framework::Megatron => s.sharding.zero <= ZeroStage::OptimizerStates,
        Framework::Fsdp2 => true,
        Framework::Fsdp1 => s.tensor == 1 && s.pipeline == 1 && s.context == 1 && s.expert == 1,
    };
    let offload_ok = match (s.offload, framework) {
        (Offload::None, _) => true,
        (Offload::Optimizer, Framework::DeepSpeed) => s.sharding.zero >= ZeroStage::OptimizerStates,
        (Offload::OptimizerAndParams, Framework::DeepSpeed | Framework::Fsdp2) => {
            s.sharding.zero == ZeroStage::Weights && !s.sharding.hybrid
        }
        _ => false,
    };
    parallel_ok && offload_ok
}

/// The recomputation modes `framework` offers, among those allowed.
pub(super) fn recompute_modes(framework: Framework, allowed: &[Recompute]) -> Vec<Recompute> {
    allowed
        .iter()
        .copied()
        .filter(|r| match framework {
            Framework::DeepSpeed | Framework::Fsdp1 => {
                matches!(r, Recompute::None | Recompute::Full)
            }
            Framework::Megatron => !matches!(r, Recompute::Op),
            Framework::Fsdp2 => !matches!(r, Recompute::Selective),
        })
        .collect()
}

/// The loss kernels and activation offloading `framework` offers, among
/// those allowed: Megatron-core computes its own vocabulary-parallel
/// cross-entropy and has no saved-tensor offloading of this kind.
pub(super) fn kernels(framework: Framework, axes: &Axes) -> Vec<(Loss, bool)> {
    let mut out = Vec::new();
    for &loss in &axes.loss {
        for &offload in &axes.offload_activations {
            if framework == Framework::Megatron && (loss != Loss::Standard || offload) {
                continue;
            }
            out.push((loss, offload));
        }
    }
    out
}

/// Every structure of `axes` its framework accepts, in a fixed order: the
/// shardings of one tensor/pipeline/context/expert split together, since
/// they share its activations.
pub(super) fn structures(axes: &Axes) -> Vec<Structure> {
    let mut out = Vec::new();
    for &tensor in &axes.tensor {
        for &pipeline in &axes.pipeline {
            for &context in &axes.context {
                let Some(model_parallel) = tensor
                    .checked_mul(pipeline)
                    .and_then(|m| m.checked_mul(context))
                else {
                    continue;
                };
                if !axes.gpus.is_multiple_of(model_parallel) {
                    continue;
                }
                let data_and_context = axes.gpus / model_parallel * context;
                for &expert in &axes.expert {
                    if !data_and_context.is_multiple_of(expert) {
                        continue;
                    }
                    for &sharding in &axes.shardings {
                        for &offload in &axes.offload {
                            let structure = Structure {
                                sharding,
                                tensor,
                                pipeline,
                                context,
                                expert,
                                offload,
                            };
                            if accepted(&structure) {
                                out.push(structure);
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// The (micro-batch, accumulation) pairs of a structure, micro-batch
/// ascending; empty when the global batch does not divide by its
/// data-parallel degree.
pub(super) fn batches(axes: &Axes, data: u64) -> Vec<(u64, u64)> {
    match axes.global_batch {
        Some(global) => {
            if data == 0 || !global.is_multiple_of(data) {
                return Vec::new();
            }
            let per_rank = global / data;
            divisors(per_rank)
                .into_iter()
                .map(|micro| (micro, per_rank / micro))
                .collect()
        }
        None => axes
            .micro_batches
            .iter()
            .map(|&micro| (micro, axes.accumulation))
            .collect(),
    }
}

/// The divisors of `n`, ascending.
pub fn divisors(n: u64) -> Vec<u64> {
    let mut small = Vec::new();
    let mut large = Vec::new();
    let mut d = 1u64;
    while d.saturating_mul(d) <= n {
        if n.is_multiple_of(d) {
            small.push(d);
            if d != n / d {
                large.push(n / d);
            }
        }
        d += 1;
    }
    small.extend(large.into_iter().rev());
    small
}

impl Layout {
    /// The `estimate` flags that choose this layout (beside the user's own).
    pub fn flags(&self) -> Vec<String> {
        let mut flags = self.sharding.flags();
        let mut push = |flag: &str, value: String| {
            flags.push(flag.to_string());
            if !value.is_empty() {
                flags.push(value);
            }
        };
        for (flag, degree) in [
            ("--tp", self.tensor),
            ("--pp", self.pipeline),
            ("--cp", self.context),
            ("--ep", self.expert),
        ] {
            if degree > 1 {
                push(flag, degree.to_string());
            }
        }
        if self.sequence_parallel {
            push("--sequence-parallel", String::new());
        }
        match self.offload {
            Offload::None => {}
            Offload::Optimizer => push("--offload", "optimizer".to_string()),
            Offload::OptimizerAndParams => push("--offload", "optimizer+params".to_string()),
        }
        if self.recompute != Recompute::None {
            push("--recompute", self.recompute.name().to_string());
        }
        if self.loss != Loss::Standard {
            push("--loss", self.loss.name());
        }
        if self.offload_activations {
            push("--offload-activations", String::new());
        }
        push("--micro-batch", self.micro_batch.to_string());
        if self.accumulation > 1 {
            push("--grad-accumulation", self.accumulation.to_string());
        }
        flags
    }

    /// How many flags [`Layout::flags`] gives, without building them.
    pub fn flag_count(&self) -> usize {
        let words = |present: bool, n: usize| if present { n } else { 0 };
        let sharding = match self.sharding.framework {
            Framework::DeepSpeed | Framework::Fsdp2 => 2,
            Framework::Megatron | Framework::Fsdp1 => 4,
        };
        sharding
            + words(self.tensor > 1, 2)
            + words(self.pipeline > 1, 2)
            + words(self.context > 1, 2)
            + words(self.expert > 1, 2)
            + words(self.sequence_parallel, 1)
            + words(self.offload != Offload::None, 2)
            + words(self.recompute != Recompute::None, 2)
            + words(self.loss != Loss::Standard, 2)
            + words(self.offload_activations, 1)
            + 2
            + words(self.accumulation > 1, 2)
    }

    /// `base` (the user's flags, under this layout's framework) with this
    /// layout on `gpus` GPUs in `nodes` nodes.
    pub fn apply(&self, base: &Setup, gpus: u64, nodes: u64) -> Result<Setup> {
        let mut setup = base.clone();
        setup.parallelism = Parallelism {
            gpus,
            nodes,
            zero: self.sharding.zero,
            hybrid: self.sharding.hybrid,
            offload: self.offload,
            tensor: self.tensor,
            pipeline: self.pipeline,
            expert: self.expert,
            context: self.context,
            framework: self.sharding.framework,
            fsdp_mixed_precision: base.parallelism.fsdp_mixed_precision,
        }
        .validated()?;
        let workload = setup.workload.as_mut().ok_or_else(|| Error::Missing {
            what: "workload",
            accepted: "plan needs --seq-len S".to_string(),
        })?;
        workload.micro_batch = self.micro_batch;
        workload.recompute = self.recompute;
        workload.sequence_parallel = self.sequence_parallel;
        workload.loss = self.loss;
        workload.offload_activations = self.offload_activations;
        setup.step.grad_accumulation = self.accumulation;
        Ok(setup)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn divisors_ascend() {
        assert_eq!(divisors(12), vec![1, 2, 3, 4, 6, 12]);
        assert_eq!(divisors(1), vec![1]);
        assert_eq!(divisors(16), vec![1, 2, 4, 8, 16]);
    }

    #[test]
    fn allow_names() {
        assert!(Allow::parse("zero,tp").unwrap().tp);
        assert!(!Allow::parse("zero,tp").unwrap().pp);
        assert!(Allow::parse("all").unwrap().offload);
        assert!(Allow::parse("zero,warp").is_err());
    }
}
