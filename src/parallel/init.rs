//! How a rank first materializes the model's weights (`--init`).

use serde::Serialize;

use super::Framework;
use crate::error::{Error, Result};

/// How the weights first reach a rank, before the first step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Init {
    /// Built on the meta device (or DeepSpeed's `zero.Init`) and materialized
    /// shard by shard: no rank ever holds the whole model.
    Meta,
    /// Rank 0 loads the checkpoint in host memory and broadcasts it module by
    /// module (`sync_module_states`, `cpu_ram_efficient_loading`): each rank
    /// receives one module whole before keeping its shard.
    Rank0,
    /// Every rank builds or loads the whole model on its device, then shards
    /// it: FSDP1 without a meta-device `param_init_fn`, DeepSpeed without
    /// `zero.Init`, a checkpoint loaded onto every rank.
    EveryRank,
}

impl Init {
    /// Reads `meta`, `rank0` or `every-rank`.
    pub fn parse(text: &str) -> Result<Init> {
        match text.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "meta" => Ok(Init::Meta),
            "rank0" | "rank-0" => Ok(Init::Rank0),
            "every-rank" => Ok(Init::EveryRank),
            _ => Err(Error::UnknownName {
                kind: "init mode",
                name: text.to_string(),
                suggestion: None,
                accepted: "meta, rank0, every-rank".to_string(),
            }),
        }
    }

    /// What the framework does by default: FSDP1 moves the module it wraps to
    /// the device whole before flattening and sharding it (`_move_module_to_device`
    /// in `torch/distributed/fsdp/_init_utils.py`); torchtitan builds FSDP2
    /// models on the meta device; transformers loads under DeepSpeed ZeRO-3
    /// inside `zero.Init`.
    pub fn default_for(framework: Framework) -> Init {
        match framework {
            Framework::Fsdp1 => Init::EveryRank,
            Framework::Fsdp2 | Framework::DeepSpeed | Framework::Megatron => Init::Meta,
        }
    }

    /// The name on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Init::Meta => "meta",
            Init::Rank0 => "rank0",
            Init::EveryRank => "every-rank",
        }
    }
}
