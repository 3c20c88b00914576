//! What one traced forward saved, by block: the data of a
//! `trainmem.trace_activations` trace (python/trainmem/trace.py), carried in
//! a model's `*.inventory.json` (`"activations_trace"`, read by
//! `crate::input::inventory`). Plain data of the model layer; how the
//! timeline prices it is `crate::activation::traced`.

use crate::error::Result;
use crate::units::Bytes;

const WHAT: &str = "the traced activations";

/// One top-level block's saved bytes, as traced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TracedBlock {
    /// The block's module path (`model.layers.0`, `stage1`).
    pub name: String,
    /// The bytes autograd saved while it ran (each storage once).
    pub bytes: Bytes,
}

/// What one traced forward saved, by block, in run order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActivationTrace {
    /// The micro-batch of the traced input (its leading dimension).
    pub micro_batch: u64,
    /// The sequence length of the traced token ids, when the input was a
    /// batch of sequences.
    pub seq_len: Option<u64>,
    /// The top-level blocks, in the order their forwards began.
    pub blocks: Vec<TracedBlock>,
    /// Saved before the first block began (embeddings, stems).
    pub before_blocks: Bytes,
    /// Saved after the last block began, outside it (final norm, head, loss).
    pub after_blocks: Bytes,
    /// The forward's outputs autograd did not save (the logits).
    pub outputs: Bytes,
    /// The largest single storage saved (the caching allocator's
    /// granularity in the reserved-memory simulation); 0 when not given.
    pub largest_storage: Bytes,
}

impl ActivationTrace {
    /// Everything the forward leaves in memory until backward.
    pub fn total(&self) -> Result<Bytes> {
        self.blocks
            .iter()
            .try_fold(
                self.before_blocks.add(self.after_blocks, WHAT)?,
                |sum, b| sum.add(b.bytes, WHAT),
            )?
            .add(self.outputs, WHAT)
    }
}
