//! What recomputation keeps of a layer, and what it rebuilds in backward.
//!
//! * None: everything the layer saves.
//! * Selective (Korthikanti et al. 2022, section 5): the attention core
//!   (the probabilities, the kernel's own copies of q, k and v, its
//!   log-sum-exp) is recomputed in backward; the core's inputs q, k, v are
//!   kept as its checkpoint, and the layer's other saved tensors stay.
//! * Full (gradient checkpointing, transformers'
//!   `GradientCheckpointingLayer` with non-reentrant `torch.utils.checkpoint`):
//!   each layer keeps only its input (`_NoopSaveInputs`), P·n·h.
//!
//! In backward a recomputed layer's saved tensors exist again, one layer
//! at a time: that is a backward transient.

use super::Recompute;
use super::layer::SavedLayer;
use super::tally::{Tally, plus};
use crate::error::Result;
use crate::units::Bytes;

/// The parts of a layer, by name, in report order.
pub const PARTS: [&str; 8] = [
    "norms",
    "attention",
    "attention core",
    "mlp",
    "experts",
    "dropout masks",
    "lora",
    "layer inputs",
];

/// What a layer keeps until backward, by part (in [`PARTS`] order), and
/// what backward rebuilds of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kept {
    /// Bytes per part.
    pub parts: [Bytes; PARTS.len()],
    /// Bytes recomputed in backward for this layer.
    pub recomputed: Bytes,
}

impl Kept {
    /// The layer's kept bytes.
    pub fn total(&self) -> Result<Bytes> {
        self.parts
            .iter()
            .try_fold(Bytes::ZERO, |sum, part| plus(sum, *part))
    }
}

/// What `recompute` keeps of `layer`.
pub fn kept(recompute: Recompute, layer: &SavedLayer) -> Result<Kept> {
    let everything = |core: Bytes, output_input: Bytes| -> Result<[Bytes; PARTS.len()]> {
        let mut attention = Tally::new();
        attention.add(layer.attention)?;
        attention.add(output_input)?;
        Ok([
            layer.norms,
            attention.bytes(),
            core,
            layer.mlp,
            layer.experts,
            layer.dropout,
            layer.lora,
            Bytes::ZERO,
        ])
    };
    // The output projection's input is the kernel's output when they share a storage.
    let separate_output = if layer.core.output_shared {
        Bytes::ZERO
    } else {
        layer.output_input
    };
    let none = everything(layer.core.saved, separate_output)?;
    match recompute {
        Recompute::None => Ok(Kept {
            parts: none,
            recomputed: Bytes::ZERO,
        }),
        Recompute::Selective => Ok(Kept {
            parts: everything(layer.core_inputs, layer.output_input)?,
            recomputed: Bytes(layer.core.saved.0.saturating_sub(layer.core_inputs.0)),
        }),
        Recompute::Full => {
            let mut parts = [Bytes::ZERO; PARTS.len()];
            parts[PARTS.len() - 1] = layer.input;
            let recomputed = Kept {
                parts: none,
                recomputed: Bytes::ZERO,
            }
            .total()?;
            Ok(Kept { parts, recomputed })
        }
    }
}
