//! Training memory split into its pieces.

use serde::Serialize;

use crate::error::Result;
use crate::units::Bytes;

/// The pieces of training memory in one place (an accelerator, or the host).
///
/// total = weights + master_weights + gradients + optimizer_states + activations
/// (seed 000: "weights, activations, gradients, optimizer states", read as a sum).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Memory {
    /// The weights the forward pass reads.
    pub weights: Bytes,
    /// A separate higher-precision copy the optimizer updates (mixed precision).
    pub master_weights: Bytes,
    /// One gradient per trainable parameter.
    pub gradients: Bytes,
    /// What the optimizer keeps between steps.
    pub optimizer_states: Bytes,
    /// What autograd saves for backward, the logits included (0 when no
    /// micro-batch is given: the model states alone).
    pub activations: Bytes,
    /// The sum of the pieces above.
    pub total: Bytes,
    /// The step's peak: the maximum of its timeline of allocations and
    /// frees, the overhead included (on the host: the total).
    pub peak: Bytes,
    /// What PyTorch's caching allocator reserves at most over the same step,
    /// simulated, plus the overhead (on the host: the total).
    pub reserved: Bytes,
}

impl Memory {
    /// Pieces with their total computed, checked.
    pub fn new(
        weights: Bytes,
        master_weights: Bytes,
        gradients: Bytes,
        optimizer_states: Bytes,
        activations: Bytes,
    ) -> Result<Memory> {
        let total = Bytes::sum(
            [
                weights,
                master_weights,
                gradients,
                optimizer_states,
                activations,
            ],
            "the total training memory",
        )?;
        Ok(Memory {
            weights,
            master_weights,
            gradients,
            optimizer_states,
            activations,
            total,
            peak: total,
            reserved: total,
        })
    }

    /// The pieces in report order, with their names.
    pub fn pieces(&self) -> [(&'static str, Bytes); 5] {
        [
            ("weights", self.weights),
            ("master weights", self.master_weights),
            ("gradients", self.gradients),
            ("optimizer states", self.optimizer_states),
            ("activations", self.activations),
        ]
    }

    /// The same pieces with `activations` added to the total and the peak.
    pub fn with_activations(self, activations: Bytes) -> Result<Memory> {
        Memory::new(
            self.weights,
            self.master_weights,
            self.gradients,
            self.optimizer_states,
            activations,
        )
    }

    /// The model states alone: everything but activations.
    pub fn model_states(&self) -> Bytes {
        Bytes(self.total.0 - self.activations.0)
    }
}
