//! What the report says of the LoRA adapters in the inventory: their rank,
//! how many modules carry them, the dtype they are kept in (`--lora-dtype`)
//! and the dropout before them (`--lora-dropout`).

use serde::Serialize;

use super::setup::Setup;
use crate::activation::LoraDropout;
use crate::model::Model;

/// The LoRA adapters of an estimate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoraSummary {
    /// The smallest rank r among the adapters (peft gives every target the same).
    pub rank: u64,
    /// Modules (or fused expert parameters) carrying an adapter: one `lora_A` each.
    pub modules: usize,
    /// The dtype the adapters' weights, gradients and optimizer states are kept in.
    pub dtype: String,
    /// peft's `lora_dropout` before each adapter.
    pub dropout: LoraDropout,
}

impl LoraSummary {
    /// The adapters of `model` (`None` without any).
    pub fn of(model: &Model, setup: &Setup) -> Option<LoraSummary> {
        let adapters: Vec<_> = model
            .tensors
            .iter()
            .filter(|t| t.name.contains(".lora_A."))
            .collect();
        let first = adapters.first()?;
        Some(LoraSummary {
            rank: adapters
                .iter()
                .filter_map(|t| t.shape.dims().first().copied())
                .min()
                .unwrap_or(0),
            modules: adapters.len(),
            dtype: first
                .training_dtype
                .unwrap_or(setup.precision.weights)
                .to_string(),
            dropout: setup.lora_dropout,
        })
    }
}
