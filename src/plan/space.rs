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
        self.words()
            .into_iter()
            .flatten()
            .map(str::to_string)
            .collect()
    }

    /// Its flags and their values, without building strings: a search
    /// counts them for every comparison of its sort.
    fn words(self) -> [Option<&'static str>; 4] {
        let zero = self.zero.name();
        let strategy = self.zero.fsdp_name(self.hybrid);
        match self.framework {
            Framework::DeepSpeed => [Some("--zero"), Some(zero), None, None],
            Framework::Megatron => [
                Some("--framework"),
                Some("megatron"),
                Some("--zero"),
                Some(zero),
            ],
            Framework::Fsdp2 => [Some("--fsdp"), Some(strategy), None, None],
            Framework::Fsdp1 => [
                Some("--framework"),
                Some("fsdp1"),
                Some("--fsdp"),
                Some(strategy),
            ],
        }
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
    /// Recomputation modes, each with its `--recompute-every` (1: every layer).
    pub recompute: Vec<(Recompute, u64)>,
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
    /// `--recompute-every`: only every N-th layer checkpointed (1: all).
    pub recompute_every: u64,
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

/// The recomputation modes `framework` offers, among those allowed:
/// checkpointing every N-th layer is torchtitan's and torchtune's option.
pub(super) fn recompute_modes(
    framework: Framework,
    allowed: &[(Recompute, u64)],
) -> Vec<(Recompute, u64)> {
    allowed
        .iter()
        .copied()
        .filter(|&(r, every)| match framework {
            Framework::DeepSpeed | Framework::Fsdp1 => {
                every == 1 && matches!(r, Recompute::None | Recompute::Full)
            }
            Framework::Megatron => every == 1 && !matches!(r, Recompute::Op),
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

/// A layout flag's value, written out only when the flags are.
#[derive(Clone, Copy)]
enum Value {
    /// A switch.
    Bare,
    Number(u64),
    Name(&'static str),
    Loss(Loss),
}

impl Layout {
    /// The flags beyond the sharding's, each with whether it is given: the
    /// one list [`Layout::flags`] writes and [`Layout::flag_count`] counts.
    fn options(&self) -> [(bool, &'static str, Value); 12] {
        [
            (self.tensor > 1, "--tp", Value::Number(self.tensor)),
            (self.pipeline > 1, "--pp", Value::Number(self.pipeline)),
            (self.context > 1, "--cp", Value::Number(self.context)),
            (self.expert > 1, "--ep", Value::Number(self.expert)),
            (self.sequence_parallel, "--sequence-parallel", Value::Bare),
            (
                self.offload != Offload::None,
                "--offload",
                Value::Name(self.offload.name()),
            ),
            (
                self.recompute != Recompute::None,
                "--recompute",
                Value::Name(self.recompute.name()),
            ),
            (
                self.recompute_every > 1,
                "--recompute-every",
                Value::Number(self.recompute_every),
            ),
            (
                self.loss != Loss::Standard,
                "--loss",
                Value::Loss(self.loss),
            ),
            (
                self.offload_activations,
                "--offload-activations",
                Value::Bare,
            ),
            (true, "--micro-batch", Value::Number(self.micro_batch)),
            (
                self.accumulation > 1,
                "--grad-accumulation",
                Value::Number(self.accumulation),
            ),
        ]
    }

    /// The `estimate` flags that choose this layout (beside the user's own).
    pub fn flags(&self) -> Vec<String> {
        let mut flags = self.sharding.flags();
        for (given, flag, value) in self.options() {
            if !given {
                continue;
            }
            flags.push(flag.to_string());
            match value {
                Value::Bare => {}
                Value::Number(n) => flags.push(n.to_string()),
                Value::Name(name) => flags.push(name.to_string()),
                Value::Loss(loss) => flags.push(loss.name()),
            }
        }
        flags
    }

    /// How many flags [`Layout::flags`] gives, without building them.
    pub fn flag_count(&self) -> usize {
        let sharding = self.sharding.words().iter().flatten().count();
        let options: usize = self
            .options()
            .iter()
            .filter(|(given, _, _)| *given)
            .map(|(_, _, value)| if matches!(value, Value::Bare) { 1 } else { 2 })
            .sum();
        sharding + options
    }

    /// Whether `other` differs from this layout only in its loss kernel and
    /// activation offloading: a table shows one of the two.
    pub fn same_but_kernels(&self, other: &Layout) -> bool {
        let plain = |l: &Layout| Layout {
            loss: Loss::Standard,
            offload_activations: false,
            ..*l
        };
        plain(self) == plain(other)
    }

    /// `base` (the user's flags, under this layout's framework) with this
    /// layout on `gpus` GPUs in `nodes` nodes.
    pub fn apply(&self, base: &Setup, gpus: u64, nodes: u64) -> Result<Setup> {
        let mut setup = base.clone();
        self.apply_onto(&mut setup, gpus, nodes)?;
        Ok(setup)
    }

    /// [`Layout::apply`] onto a setup that is `base` or `base` under another
    /// layout: every field a layout sets is set, so a search reuses one
    /// setup for all the layouts of a structure instead of cloning `base`.
    pub fn apply_onto(&self, setup: &mut Setup, gpus: u64, nodes: u64) -> Result<()> {
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
            fsdp_mixed_precision: setup.parallelism.fsdp_mixed_precision,
        }
        .validated()?;
        let workload = setup.workload.as_mut().ok_or_else(|| Error::Missing {
            what: "workload",
            accepted: "plan needs --seq-len S".to_string(),
        })?;
        workload.micro_batch = self.micro_batch;
        workload.recompute = self.recompute;
        workload.recompute_every = self.recompute_every;
        workload.sequence_parallel = self.sequence_parallel;
        workload.loss = self.loss;
        workload.offload_activations = self.offload_activations;
        setup.step.grad_accumulation = self.accumulation;
        Ok(())
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
    fn flag_count_counts_the_flags_written() {
        let plain = Layout {
            sharding: Sharding {
                framework: Framework::DeepSpeed,
                zero: ZeroStage::OptimizerStates,
                hybrid: false,
            },
            tensor: 1,
            pipeline: 1,
            context: 1,
            expert: 1,
            sequence_parallel: false,
            offload: Offload::None,
            recompute: Recompute::None,
            recompute_every: 1,
            loss: Loss::Standard,
            offload_activations: false,
            micro_batch: 1,
            accumulation: 1,
        };
        let every = Layout {
            sharding: Sharding {
                framework: Framework::Fsdp1,
                zero: ZeroStage::Weights,
                hybrid: true,
            },
            tensor: 2,
            pipeline: 4,
            context: 2,
            expert: 8,
            sequence_parallel: true,
            offload: Offload::OptimizerAndParams,
            recompute: Recompute::Full,
            recompute_every: 2,
            loss: Loss::Chunked(8),
            offload_activations: true,
            micro_batch: 3,
            accumulation: 16,
        };
        let megatron = Layout {
            sharding: Sharding {
                framework: Framework::Megatron,
                ..plain.sharding
            },
            ..plain
        };
        for layout in [plain, every, megatron] {
            assert_eq!(
                layout.flag_count(),
                layout.flags().len(),
                "{:?}",
                layout.flags()
            );
        }
        assert_eq!(plain.flags(), ["--zero", "1", "--micro-batch", "1"]);
        assert_eq!(every.flags().len(), 26);
    }

    #[test]
    fn allow_names() {
        assert!(Allow::parse("zero,tp").unwrap().tp);
        assert!(!Allow::parse("zero,tp").unwrap().pp);
        assert!(Allow::parse("all").unwrap().offload);
        assert!(Allow::parse("zero,warp").is_err());
    }
}
