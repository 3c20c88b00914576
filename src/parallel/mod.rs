//! Scale-out: data-parallel sharding (ZeRO stages, FSDP), offload to the
//! host, and tensor, pipeline and expert parallelism.
//!
//! A [`Parallelism`] says how many accelerators there are and how the model
//! is split among them; [`placement`] decides which part of each tensor the
//! most loaded accelerator holds, and the estimate shards its pieces;
//! [`check_layout`] refuses a layout the model cannot be split by.

mod constraints;
mod init;
mod layout;
mod placement;

pub use constraints::{
    Splittable, check_context_parallel, check_sequence_parallel, check_sequence_split,
    check_virtual_stages,
};
pub use init::Init;
pub use layout::{Layout, is_token_embedding, layer_of};
pub use placement::{NameFacts, Placement, place, place_named};

use serde::Serialize;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::precision::Precision;

/// The most pipeline stages. A stage holds at least one layer, and a
/// config.json has at most 1,024 (`MAX_LAYERS` in `architecture`); the
/// memory of each stage is tallied apart, so the count is also an allocation.
pub const MAX_PIPELINE_STAGES: u64 = 1024;

/// How training is spread over accelerators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Hash)]
pub struct Parallelism {
    /// Accelerators in all (the world size).
    pub gpus: u64,
    /// Machines they sit in; `gpus` is a multiple of it.
    pub nodes: u64,
    /// What data parallelism shards.
    pub zero: ZeroStage,
    /// FSDP's hybrid sharding: shard within a node, replicate across nodes.
    pub hybrid: bool,
    /// What lives in host memory instead.
    pub offload: Offload,
    /// Tensor-parallel degree.
    pub tensor: u64,
    /// Pipeline stages.
    pub pipeline: u64,
    /// Expert-parallel degree (MoE experts split across ranks).
    pub expert: u64,
    /// Context-parallel degree: ring attention splits each sequence across
    /// this many ranks, which also shard the model states with the
    /// data-parallel ranks (torchtitan's `dp_shard_cp` mesh).
    pub context: u64,
    /// Whose bookkeeping: DeepSpeed, Megatron, FSDP2 or FSDP1.
    pub framework: Framework,
    /// How FSDP runs mixed precision (ignored by the other frameworks).
    pub fsdp_mixed_precision: FsdpMixedPrecision,
}

/// How FSDP computes in half precision over fp32 sharded parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Hash)]
#[serde(rename_all = "lowercase")]
pub enum FsdpMixedPrecision {
    /// `MixedPrecisionPolicy(param_dtype=bf16)` (FSDP2) or `MixedPrecision`
    /// (FSDP1): each layer's parameters are gathered in the compute dtype and
    /// freed after use; gradients come in that dtype and are reduced in fp32.
    /// What torchtitan, torchtune and accelerate configure.
    Policy,
    /// fp32 parameters gathered, `torch.autocast` over them: autocast's
    /// half copies of the linear weights are saved for backward.
    Autocast,
}

impl FsdpMixedPrecision {
    /// Reads `policy` or `autocast`.
    pub fn parse(text: &str) -> Result<FsdpMixedPrecision> {
        match text.trim().to_ascii_lowercase().as_str() {
            "policy" => Ok(FsdpMixedPrecision::Policy),
            "autocast" => Ok(FsdpMixedPrecision::Autocast),
            _ => Err(Error::UnknownName {
                kind: "FSDP mixed precision",
                name: text.to_string(),
                suggestion: None,
                accepted: "policy (MixedPrecisionPolicy: parameters gathered in the compute dtype), autocast (fp32 parameters under torch.autocast)".to_string(),
            }),
        }
    }
}

/// What ZeRO stage (or FSDP strategy) shards across data-parallel ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Hash)]
pub enum ZeroStage {
    /// Plain data parallelism (DDP, FSDP `no-shard`): every rank holds everything.
    #[serde(rename = "0")]
    None,
    /// Optimizer states and master weights sharded (Megatron's distributed optimizer).
    #[serde(rename = "1")]
    OptimizerStates,
    /// + gradients (FSDP `shard-grad-op`).
    #[serde(rename = "2")]
    Gradients,
    /// + weights (FSDP `full-shard`).
    #[serde(rename = "3")]
    Weights,
}

/// What is kept in host memory instead of on the accelerator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum Offload {
    /// Nothing.
    None,
    /// Optimizer states and master weights (ZeRO-Offload), and with ZeRO-2
    /// or 3 the gradient shard the host optimizer steps on.
    Optimizer,
    /// + the weights' shards (ZeRO-Infinity; needs ZeRO-3).
    #[serde(rename = "optimizer+params")]
    OptimizerAndParams,
}

/// Whose distributed bookkeeping the figures follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Framework {
    /// DeepSpeed ZeRO: half-precision copies, fp32 master and states in flat
    /// partitions of ceil(N / d) elements (`deepspeed/runtime/zero/stage_1_and_2.py`).
    DeepSpeed,
    /// Megatron-LM: gradients accumulate in fp32 `main_grad` buffers under
    /// bf16/fp16 (18 bytes/param with Adam, 6 + 12/d with the distributed
    /// optimizer: `docs/source/api-guide/dist_optimizer.md`).
    Megatron,
    /// PyTorch FSDP2 (`fully_shard`): parameters sharded in their original
    /// dtype, dim 0 padded to ceil(dim0 / d) rows; no separate master copy.
    Fsdp2,
    /// PyTorch FSDP1 (`FullyShardedDataParallel`): each wrapped module's
    /// parameters flattened into one `FlatParameter` sharded as ceil(N / d);
    /// fp32 shards serve as the master copy, as in FSDP2. Without a meta-device
    /// `param_init_fn`, it moves the whole module to the device before sharding.
    Fsdp1,
}

impl ZeroStage {
    /// Reads `0`, `1`, `2` or `3`.
    pub fn parse(text: &str) -> Result<ZeroStage> {
        match text.trim() {
            "0" => Ok(ZeroStage::None),
            "1" => Ok(ZeroStage::OptimizerStates),
            "2" => Ok(ZeroStage::Gradients),
            "3" => Ok(ZeroStage::Weights),
            _ => Err(Error::UnknownName {
                kind: "ZeRO stage",
                name: text.to_string(),
                suggestion: None,
                accepted:
                    "0 (plain data parallel), 1 (optimizer states), 2 (+ gradients), 3 (+ weights)"
                        .to_string(),
            }),
        }
    }

    /// The stage as `--zero` writes it: `"0"` to `"3"` ([`ZeroStage::parse`] reads it).
    pub fn name(self) -> &'static str {
        match self {
            ZeroStage::None => "0",
            ZeroStage::OptimizerStates => "1",
            ZeroStage::Gradients => "2",
            ZeroStage::Weights => "3",
        }
    }

    /// The FSDP sharding strategy of this stage, hybrid or not, as `--fsdp`
    /// writes it ([`ZeroStage::from_fsdp`] reads it). FSDP has no stage 1:
    /// it is written as shard-grad-op, the next stage up.
    pub fn fsdp_name(self, hybrid: bool) -> &'static str {
        match (self, hybrid) {
            (ZeroStage::Weights, true) => "hybrid-shard",
            (ZeroStage::Weights, false) => "full-shard",
            (ZeroStage::None, _) => "no-shard",
            _ => "shard-grad-op",
        }
    }

    /// The ZeRO stage of an FSDP sharding strategy, and whether it is hybrid.
    pub fn from_fsdp(name: &str) -> Result<(ZeroStage, bool)> {
        match name.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "no-shard" => Ok((ZeroStage::None, false)),
            "shard-grad-op" => Ok((ZeroStage::Gradients, false)),
            "full-shard" => Ok((ZeroStage::Weights, false)),
            "hybrid-shard" => Ok((ZeroStage::Weights, true)),
            _ => Err(Error::UnknownName {
                kind: "FSDP sharding strategy",
                name: name.to_string(),
                suggestion: None,
                accepted: "no-shard, shard-grad-op, full-shard, hybrid-shard".to_string(),
            }),
        }
    }

    /// Whether optimizer states and master weights are sharded.
    pub fn shards_optimizer(self) -> bool {
        self >= ZeroStage::OptimizerStates
    }

    /// Whether gradients are sharded.
    pub fn shards_gradients(self) -> bool {
        self >= ZeroStage::Gradients
    }

    /// Whether weights are sharded.
    pub fn shards_weights(self) -> bool {
        self >= ZeroStage::Weights
    }
}

impl Offload {
    /// As `--offload` writes it ([`Offload::parse`] reads it).
    pub fn name(self) -> &'static str {
        match self {
            Offload::None => "none",
            Offload::Optimizer => "optimizer",
            Offload::OptimizerAndParams => "optimizer+params",
        }
    }

    /// Reads `none`, `optimizer` or `optimizer+params`.
    pub fn parse(text: &str) -> Result<Offload> {
        match text.trim().to_ascii_lowercase().as_str() {
            "none" => Ok(Offload::None),
            "optimizer" | "cpu" => Ok(Offload::Optimizer),
            "optimizer+params" | "params" | "all" => Ok(Offload::OptimizerAndParams),
            _ => Err(Error::UnknownName {
                kind: "offload",
                name: text.to_string(),
                suggestion: None,
                accepted: "none, optimizer, optimizer+params".to_string(),
            }),
        }
    }
}

impl Framework {
    /// Reads `deepspeed`, `megatron` or `fsdp2` (`fsdp`).
    pub fn parse(text: &str) -> Result<Framework> {
        match text.trim().to_ascii_lowercase().as_str() {
            "deepspeed" | "zero" => Ok(Framework::DeepSpeed),
            "megatron" | "megatron-lm" => Ok(Framework::Megatron),
            "fsdp2" | "fsdp" => Ok(Framework::Fsdp2),
            "fsdp1" => Ok(Framework::Fsdp1),
            _ => Err(Error::UnknownName {
                kind: "framework",
                name: text.to_string(),
                suggestion: None,
                accepted: "deepspeed, megatron, fsdp2, fsdp1".to_string(),
            }),
        }
    }

    /// The framework as `--framework` writes it ([`Framework::parse`] reads it).
    pub fn name(self) -> &'static str {
        match self {
            Framework::DeepSpeed => "deepspeed",
            Framework::Megatron => "megatron",
            Framework::Fsdp2 => "fsdp2",
            Framework::Fsdp1 => "fsdp1",
        }
    }

    /// Whether this is PyTorch FSDP (1 or 2).
    pub fn is_fsdp(self) -> bool {
        matches!(self, Framework::Fsdp1 | Framework::Fsdp2)
    }

    /// The recipe as this framework keeps it. Megatron accumulates
    /// gradients in fp32 under half precision; FSDP2 keeps the sharded
    /// parameters in their original dtype (the master copy's, under mixed
    /// precision) with gradients of the same dtype and no separate master.
    pub fn adjust(self, precision: Precision) -> Precision {
        match self {
            Framework::DeepSpeed => precision,
            Framework::Megatron => Precision {
                gradients: match precision.master_weights {
                    Some(_) => DType::Fp32,
                    None => precision.gradients,
                },
                ..precision
            },
            Framework::Fsdp2 | Framework::Fsdp1 => match precision.master_weights {
                Some(master) => Precision {
                    weights: master,
                    gradients: master,
                    master_weights: None,
                    ..precision
                },
                None => precision,
            },
        }
    }
}

/// Refuses a layout that `model` cannot be split by (tp not dividing the
/// heads, more stages than layers, ep not dividing the experts, sequence
/// parallelism without tp); see [`constraints`].
pub fn check_layout(
    model: &crate::model::Model,
    layout: &Parallelism,
    sequence_parallel: bool,
) -> Result<()> {
    constraints::check(model, layout, sequence_parallel)
}

/// [`check_layout`] with the model's sizes read once (`name` for the messages).
pub fn check_layout_sizes(
    name: &str,
    sizes: &Splittable,
    layout: &Parallelism,
    sequence_parallel: bool,
) -> Result<()> {
    constraints::check_sizes(name, sizes, layout, sequence_parallel)
}

/// Notes on layouts frameworks accept that trainmem prices approximately.
pub fn layout_notes(model: &crate::model::Model, layout: &Parallelism) -> Vec<String> {
    constraints::notes(model, layout)
}

impl Parallelism {
    /// One accelerator, nothing split.
    pub const SINGLE: Parallelism = Parallelism {
        gpus: 1,
        nodes: 1,
        zero: ZeroStage::None,
        hybrid: false,
        offload: Offload::None,
        tensor: 1,
        pipeline: 1,
        expert: 1,
        context: 1,
        framework: Framework::DeepSpeed,
        fsdp_mixed_precision: FsdpMixedPrecision::Policy,
    };

    /// Checks that the degrees multiply up and the options combine, and
    /// that there are at most [`MAX_PIPELINE_STAGES`] stages.
    pub fn validated(self) -> Result<Parallelism> {
        let invalid = |value: String, reason: &str| Error::InvalidValue {
            what: "parallel layout",
            value,
            reason: reason.to_string(),
        };
        for (name, degree) in [
            ("--gpus", self.gpus),
            ("--nodes", self.nodes),
            ("--tp", self.tensor),
            ("--pp", self.pipeline),
            ("--ep", self.expert),
            ("--cp", self.context),
        ] {
            if degree == 0 {
                return Err(invalid(format!("{name} 0"), "must be at least 1"));
            }
        }
        if self.pipeline > MAX_PIPELINE_STAGES {
            return Err(invalid(
                format!("--pp {}", self.pipeline),
                &format!(
                    "at most {MAX_PIPELINE_STAGES} pipeline stages: a stage holds at least one layer"
                ),
            ));
        }
        let model_parallel = self
            .tensor
            .saturating_mul(self.pipeline)
            .saturating_mul(self.context);
        if !self.gpus.is_multiple_of(model_parallel) {
            return Err(invalid(
                format!(
                    "--gpus {} with --tp {} --pp {} --cp {}",
                    self.gpus, self.tensor, self.pipeline, self.context
                ),
                "the GPU count must be a multiple of tp × pp × cp (data parallelism takes the rest)",
            ));
        }
        if !self.gpus.is_multiple_of(self.nodes) {
            return Err(invalid(
                format!("--gpus {} on --nodes {}", self.gpus, self.nodes),
                "the GPU count must be a multiple of the node count",
            ));
        }
        if !self.data_and_context().is_multiple_of(self.expert) {
            return Err(invalid(
                format!(
                    "--ep {} with {} data- and context-parallel ranks",
                    self.expert,
                    self.data_and_context()
                ),
                "experts are split across the data- and context-parallel ranks (torchtitan borrows ep from dp_shard × cp): their product must be a multiple of ep",
            ));
        }
        if self.offload == Offload::OptimizerAndParams && self.zero != ZeroStage::Weights {
            return Err(invalid(
                "--offload optimizer+params".to_string(),
                "offloading parameters needs --zero 3 (or --fsdp full-shard)",
            ));
        }
        Ok(self)
    }

    /// Data-parallel degree: gpus / (tp × pp × cp).
    pub fn data(&self) -> u64 {
        self.gpus / (self.tensor * self.pipeline * self.context).max(1)
    }

    /// The data- and context-parallel ranks together, dp × cp: the ranks
    /// that hold the same layers and so shard their states.
    pub fn data_and_context(&self) -> u64 {
        self.data().saturating_mul(self.context)
    }

    /// Ranks a piece is sharded over: the data- and context-parallel ranks
    /// (torchtitan shards with FSDP over the flattened `dp_shard_cp` mesh,
    /// `parallelize_llama`: `dp_mesh_dim_names = ("dp_shard_cp",)`;
    /// Megatron's distributed optimizer over the data-parallel group with
    /// context parallelism, `get_data_parallel_group(with_context_parallel=True)`),
    /// within one node for hybrid sharding, divided by ep for expert
    /// weights, which are already split across the expert-parallel ranks.
    pub fn shard_degree(&self, experts: bool) -> u64 {
        let data = if self.hybrid {
            (self.gpus / self.nodes / (self.tensor * self.pipeline)).max(1)
        } else {
            self.data_and_context()
        };
        if experts {
            (data / self.expert).max(1)
        } else {
            data
        }
    }

    /// Whether anything is split or moved.
    pub fn is_single(&self) -> bool {
        self.gpus == 1 && self.zero == ZeroStage::None && self.offload == Offload::None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(gpus: u64, tp: u64, pp: u64, ep: u64) -> Result<Parallelism> {
        Parallelism {
            gpus,
            tensor: tp,
            pipeline: pp,
            expert: ep,
            ..Parallelism::SINGLE
        }
        .validated()
    }

    #[test]
    fn degrees_must_multiply_up() {
        assert_eq!(layout(64, 8, 2, 1).unwrap().data(), 4);
        assert!(layout(12, 8, 1, 1).is_err());
        assert!(layout(8, 1, 1, 3).is_err());
        assert!(layout(0, 1, 1, 1).is_err());
        assert_eq!(layout(16, 2, 1, 4).unwrap().shard_degree(true), 2);
    }

    #[test]
    fn context_parallel_ranks_shard_with_the_data_parallel_ones() {
        let cp = Parallelism {
            gpus: 16,
            tensor: 2,
            context: 4,
            ..Parallelism::SINGLE
        }
        .validated()
        .unwrap();
        assert_eq!(cp.data(), 2);
        assert_eq!(cp.shard_degree(false), 8);
        let bad = Parallelism {
            gpus: 12,
            context: 8,
            ..Parallelism::SINGLE
        };
        assert!(bad.validated().is_err());
    }

    #[test]
    fn fsdp_names_map_to_stages() {
        assert_eq!(
            ZeroStage::from_fsdp("full_shard").unwrap(),
            (ZeroStage::Weights, false)
        );
        assert_eq!(
            ZeroStage::from_fsdp("hybrid-shard").unwrap(),
            (ZeroStage::Weights, true)
        );
        assert!(ZeroStage::from_fsdp("half-shard").is_err());
    }

    #[test]
    fn frameworks_adjust_the_recipe() {
        let mixed = *Precision::find("mixed-bf16").unwrap();
        let megatron = Framework::Megatron.adjust(mixed);
        assert_eq!(megatron.gradients, DType::Fp32);
        let fsdp = Framework::Fsdp2.adjust(mixed);
        assert_eq!((fsdp.weights, fsdp.master_weights), (DType::Fp32, None));
    }
}
