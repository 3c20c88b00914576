//! The saved tensors of model code other than transformers
//! (`--implementation`, issue 24), one file per implementation whose rules
//! differ, each citing its source.
//!
//! An implementation's modules are priced as the transformers modules whose
//! autograd saves the same tensors: its rules rewrite the architecture's
//! kinds (the MLP's activation, the norm) and replace the loss where its
//! training loop computes the loss differently. What an implementation ships
//! no different rule for is priced as transformers' module.

mod litgpt;
mod litgpt_lora;
mod torchtitan;
mod torchtune;

use std::borrow::Cow;

use super::lora::FusedQkv;
use super::loss::LossPhase;
use super::parallel::Rank;
use super::{Platform, Workload};
use crate::architecture::{Dimensions, Implementation};
use crate::error::Result;
use crate::units::Bytes;

/// The architecture as `implementation`'s modules save it on `platform`.
pub fn dimensions(
    dims: &Dimensions,
    implementation: Implementation,
    platform: Platform,
) -> Cow<'_, Dimensions> {
    match implementation {
        Implementation::Litgpt => Cow::Owned(litgpt::dimensions(dims)),
        Implementation::Torchtune => Cow::Owned(torchtune::dimensions(dims)),
        Implementation::Torchtitan => Cow::Owned(torchtitan::dimensions(dims, platform)),
        Implementation::Transformers => Cow::Borrowed(dims),
    }
}

/// Whether the per-op checkpointing policy (`--recompute op`, torchtitan's)
/// saves the attention kernel `platform` runs: torchtitan's own list names
/// only the CUDA kernels; with other model code the policy is priced as
/// listing the kernel that runs.
pub fn op_policy_saves_attention(implementation: Implementation, platform: Platform) -> bool {
    match implementation {
        Implementation::Torchtitan => torchtitan::op_policy_saves_attention(platform),
        Implementation::Transformers | Implementation::Litgpt | Implementation::Torchtune => true,
    }
}

/// The fused q/k/v adapter of `workload`'s implementation, when its LoRA
/// module has one (litgpt's `LoRAQKVLinear`) and the base is frozen.
pub fn fused_qkv(dims: &Dimensions, workload: &Workload) -> Option<FusedQkv> {
    match workload.implementation {
        Implementation::Litgpt if workload.frozen_base && !workload.adapted.is_empty() => {
            Some(litgpt_lora::fused_qkv(dims, workload))
        }
        _ => None,
    }
}

/// The loss of `implementation`'s training loop in place of transformers'
/// `ForCausalLMLoss`, when it has its own.
pub fn standard_loss(
    rank: &Rank,
    implementation: Implementation,
    frozen_base: bool,
) -> Result<Option<LossPhase>> {
    match implementation {
        Implementation::Litgpt if frozen_base => litgpt::chunked_head_loss(rank).map(Some),
        Implementation::Litgpt => litgpt::loss(rank).map(Some),
        Implementation::Transformers | Implementation::Torchtune | Implementation::Torchtitan => {
            Ok(None)
        }
    }
}

/// The tokens one call of the output head computes when `implementation`'s
/// loop runs the head in chunks (litgpt's fine-tuning of a frozen base:
/// `lm_head_chunk_size=128`); `None` when it runs once.
pub fn head_chunk(rank: &Rank, implementation: Implementation, frozen_base: bool) -> Option<u64> {
    match implementation {
        Implementation::Litgpt if frozen_base => Some(litgpt::head_chunk_tokens(rank)),
        _ => None,
    }
}

/// The copy of the logits the training loop computes its loss on, when the
/// loop's wrapper casts the model's outputs (litgpt's Fabric: an fp32 copy
/// of half-precision logits, which then die); zero otherwise.
pub fn outputs_cast(rank: &Rank, implementation: Implementation) -> Result<Bytes> {
    match implementation {
        Implementation::Litgpt => litgpt::outputs_cast(rank),
        Implementation::Transformers | Implementation::Torchtune | Implementation::Torchtitan => {
            Ok(Bytes::ZERO)
        }
    }
}

/// The notes of `implementation`'s rules on `platform`.
pub fn notes(implementation: Implementation, platform: Platform) -> Vec<String> {
    match implementation {
        Implementation::Litgpt => {
            let mut notes = litgpt::notes();
            notes.push(litgpt_lora::notes());
            notes
        }
        Implementation::Torchtune => torchtune::notes(),
        Implementation::Transformers => Vec::new(),
        Implementation::Torchtitan => torchtitan::notes(platform),
    }
}
