//! Fine-tuning: LoRA adapters on a frozen base, frozen tensors in full
//! fine-tuning, and quantized base weights (QLoRA).
//!
//! Each turns a model's inventory into another inventory: adapters are new
//! trainable tensors, frozen tensors keep their weights but lose gradients
//! and optimizer states, quantized weights change how their bytes count.

mod experts;
mod freeze;
mod linear;
mod lora;

pub use crate::model::Quantization;
pub use freeze::freeze;
pub use linear::{Linear, linears};
pub use lora::{ADAPTER_DTYPES, Bias, Lora, Targets, adapter_dtype};

use crate::error::{Error, Result};
use crate::model::Model;

/// What fine-tuning does to a model.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FineTune {
    /// LoRA adapters, if any.
    pub lora: Option<Lora>,
    /// Name patterns of tensors to freeze (full fine-tuning).
    pub freeze: Vec<String>,
    /// How the frozen base's linear weights are stored.
    pub quantize: Option<Quantization>,
}

impl FineTune {
    /// Whether it changes anything.
    pub fn is_none(&self) -> bool {
        self.lora.is_none() && self.freeze.is_empty() && self.quantize.is_none()
    }

    /// The model as fine-tuning trains it.
    pub fn apply(&self, model: Model) -> Result<Model> {
        if self.is_none() {
            return Ok(model);
        }
        if !model.shapes_known {
            return Err(Error::InvalidValue {
                what: "fine-tuning",
                value: model.name.clone(),
                reason: "LoRA, --freeze and --quantize need the model's tensors: give --model (a preset, config.json or safetensors) instead of --params".to_string(),
            });
        }
        if self.quantize.is_some() && self.lora.is_none() {
            return Err(Error::InvalidValue {
                what: "quantization",
                value: "--quantize".to_string(),
                reason: "a quantized base is frozen and trains only through adapters: add --lora-rank and --lora-targets".to_string(),
            });
        }
        let mut model = freeze(model, &self.freeze)?;
        if let Some(lora) = &self.lora {
            model = lora.apply(model, self.quantize)?;
        }
        Ok(model)
    }
}
