//! What is saved outside the decoder layers before them: the embedding's
//! indices and dropout, the position tables the layers share.

use super::attention::Kernel;
use super::kernels::Kernels;
use super::norms::FP32;
use super::parallel::Rank;
use super::tally::Tally;
use crate::architecture::{Dimensions, Positions};
use crate::error::Result;
use crate::units::Bytes;

/// Bytes of an int64 index.
const INT64: u64 = 8;

/// The embeddings' saved tensors: the int64 input ids
/// (`EmbeddingBackward0.indices`) 8·T; GPT-2's position ids [1, S] 8·S;
/// the embedding dropout mask mask·n·h.
pub fn saved(rank: &Rank, dims: &Dimensions, kernels: &Kernels) -> Result<Bytes> {
    let mut saved = Tally::new();
    saved.tensor(&[INT64, rank.tokens])?;
    saved.tensor_if(dims.positions == Positions::Learned, &[INT64, rank.seq])?;
    saved.tensor_if(
        dims.dropout.embedding,
        &[
            kernels.dropout_mask.bytes(rank.element),
            rank.sequence_tokens,
            rank.hidden,
        ],
    )?;
    Ok(saved.bytes())
}

/// What every stage with layers keeps once per micro-batch, shared by its
/// layers: rotary cos and sin [1, S, width] (`MulBackward0.other` of
/// `apply_rotary_pos_emb`), one pair per rotary table, in fp32 or the
/// model dtype. When every layer is checkpointed (`checkpointed`: full or
/// per-op recomputation of each layer) the checkpoints hold them outside
/// autograd instead (not counted), except that GPT-2's
/// blocks receive the eager 4-D mask [B, 1, S, S] positionally, which the
/// checkpoint saves: P·B·S².
pub fn shared_by_layers(
    rank: &Rank,
    dims: &Dimensions,
    checkpointed: bool,
    kernel: Kernel,
) -> Result<Bytes> {
    let mut saved = Tally::new();
    if checkpointed {
        saved.tensor_if(
            dims.mask_positional && kernel == Kernel::Eager,
            &[rank.element, rank.batch, rank.seq, rank.seq],
        )?;
    } else if let Positions::Rotary {
        width,
        fp32_tables,
        tables,
        ..
    } = dims.positions
    {
        let element = if fp32_tables { FP32 } else { rank.element };
        saved.tensor(&[tables, 2, element, rank.seq, width])?;
    }
    Ok(saved.bytes())
}
