//! How a rank first materializes the model's weights (`--init`).

use serde::Serialize;

use super::Framework;
use crate::architecture::Implementation;
use crate::error::{Error, Result};

/// How the weights first reach a rank, before the first step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Init {
    /// Built on the meta device (or DeepSpeed's `zero.Init`) and materialized
    /// shard by shard: no rank ever holds the whole model. FSDP1 materializes
    /// each wrapped unit whole before flattening and sharding it
    /// (`_materialize_meta_module` in `torch/distributed/fsdp/_init_utils.py`),
    /// the same sequence as [`Init::PerUnit`] (measured on CPU by
    /// `tools/measure_fsdp.py`).
    Meta,
    /// Rank 0 loads the checkpoint in host memory and broadcasts it module by
    /// module (`sync_module_states`, `cpu_ram_efficient_loading`): each rank
    /// receives one module whole before keeping its shard.
    Rank0,
    /// Every rank builds or loads the whole model on its device, then shards
    /// it: FSDP1 without a meta-device `param_init_fn`, DeepSpeed without
    /// `zero.Init`, a checkpoint loaded onto every rank.
    EveryRank,
    /// FSDP1 given `device_id` around a model left in host memory: each
    /// wrapped unit, innermost first, moves its own parameters to the device
    /// (`_move_module_to_device` in `torch/distributed/fsdp/_init_utils.py`
    /// walks the module breadth-first without entering the FSDP instances
    /// already built), concatenates them into one flat parameter
    /// (`FlatParamHandle`, `torch.cat` in `_flat_param.py`) and keeps its
    /// shard (`FlatParamHandle.shard`: a clone) before the originals and the
    /// flat tensor are freed and the next unit moves: each unit is whole on
    /// the device twice, with its shard, in turn (the decoder layers first,
    /// the root, embedding, final norm and head, last).
    PerUnit,
}

impl Init {
    /// Reads `meta`, `rank0`, `every-rank` or `per-unit`.
    pub fn parse(text: &str) -> Result<Init> {
        match text.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "meta" => Ok(Init::Meta),
            "rank0" | "rank-0" => Ok(Init::Rank0),
            "every-rank" => Ok(Init::EveryRank),
            "per-unit" => Ok(Init::PerUnit),
            _ => Err(Error::UnknownName {
                kind: "init mode",
                name: text.to_string(),
                suggestion: None,
                accepted: "meta, rank0, every-rank, per-unit".to_string(),
            }),
        }
    }

    /// What the framework does by default, with the model code of
    /// `implementation`:
    /// * FSDP1 with transformers (HF Trainer, accelerate without
    ///   `cpu_ram_efficient_loading`): the model is loaded in host memory and
    ///   accelerate skips device placement for FSDP
    ///   (`Accelerator.prepare_model`: `device_placement` off under FSDP),
    ///   passing `device_id`: [`Init::PerUnit`]. Only a model moved to the
    ///   GPU before wrapping is whole on every rank (`--init every-rank`).
    /// * FSDP1 with litgpt (Fabric's `init_module(empty_init=True)` under
    ///   `FSDPStrategy`: the meta device, the checkpoint loaded into the
    ///   shards), torchtune or torchtitan (meta-device construction, then
    ///   `load_from_full_model_state_dict`): [`Init::Meta`].
    /// * FSDP2 (torchtitan, torchtune), DeepSpeed (transformers inside
    ///   `zero.Init`) and Megatron: [`Init::Meta`].
    pub fn default_for(framework: Framework, implementation: Implementation) -> Init {
        match (framework, implementation) {
            (Framework::Fsdp1, Implementation::Transformers) => Init::PerUnit,
            _ => Init::Meta,
        }
    }

    /// The name on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Init::Meta => "meta",
            Init::Rank0 => "rank0",
            Init::EveryRank => "every-rank",
            Init::PerUnit => "per-unit",
        }
    }
}
