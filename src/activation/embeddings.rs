//! What is saved outside the decoder layers before them: the embedding's
//! indices and dropout, the position tables the layers share.

use super::attention::Kernel;
use super::kernels::Kernels;
use super::norms::FP32;
use super::parallel::Rank;
use super::tally::Tally;
use crate::architecture::{Dimensions, ImageInputs, Positions};
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

/// Bytes of a bool mask element.
const BOOL: u64 = 1;

/// LLaVA's images, outside the language model's layers, with its vision
/// tower frozen ([`ImageInputs`]), for n = B x images-per-sample images of
/// T tokens: with the projector training, `linear_1`'s input P·rows·h_v
/// (`MmBackward0.self`: the selected hidden state flattened, a copy of
/// its n·T rows, or, for one image, a view of the whole [1, T + 1, h_v]
/// state), GELU's input and `linear_2`'s input P·n·T·h (`GeluBackward0.self`,
/// `AddmmBackward0.mat1`); and `masked_scatter`'s bool mask [B, S, 1]
/// (`MaskedScatterBackward0.mask`) when the merged embeddings need a
/// gradient (the projector or the token embedding trains).
pub fn images(rank: &Rank, images: &ImageInputs) -> Result<Bytes> {
    let mut saved = Tally::new();
    let count = rank
        .batch
        .checked_mul(images.per_sample)
        .ok_or_else(|| crate::error::Error::overflow("the micro-batch's images"))?;
    if images.projector_trains {
        let rows = if count == 1 {
            images.tower_tokens
        } else {
            count
                .checked_mul(images.tokens)
                .ok_or_else(|| crate::error::Error::overflow("the images' tokens"))?
        };
        saved.tensor(&[rank.element, rows, images.vision_hidden])?;
        for _ in 0..2 {
            saved.tensor(&[rank.element, count, images.tokens, images.projector_hidden])?;
        }
    }
    saved.tensor_if(
        images.projector_trains || images.embeddings_train,
        &[BOOL, rank.batch, rank.seq],
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
