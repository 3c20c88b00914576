//! What the encoder-decoder files (T5 and its copies, BART) share: a
//! stack's layer count read and bounded, and a stack written out layer by
//! layer (a [`Decoder`](super::decoder::Decoder) holds one numbered stack;
//! these models have two, so both are written out before the layers, as
//! CLIP's two towers are, see [`super::tower::whole`]).

use super::decoder::MAX_LAYERS;
use super::params::Params;
use crate::error::{Error, Result};

/// The task an encoder-decoder trains for when `--task` is not given:
/// `AutoModelForSeq2SeqLM`.
pub const DEFAULT_TASK: super::task::Task = super::task::Task::Seq2Seq;

/// A stack's layer count `count`, read from `key`, at most [`MAX_LAYERS`].
pub fn bounded(key: &str, count: u64) -> Result<u64> {
    if count > MAX_LAYERS {
        return Err(Error::InvalidConfig {
            key: key.to_string(),
            problem: format!(
                "`{count}` layers is more than trainmem accepts; accepted: at most {MAX_LAYERS} layers"
            ),
        });
    }
    Ok(count)
}

/// Appends `{prefix}.{index}.{name}` for the layers `0..count`, each laid
/// out by `layer(index)`; `count` is bounded by [`bounded`].
pub fn write_stack(
    params: &mut Params,
    prefix: &str,
    count: u64,
    layer: impl Fn(u64) -> Result<Params>,
) -> Result<()> {
    for index in 0..count {
        params.mount(&format!("{prefix}.{index}"), layer(index)?);
    }
    Ok(())
}
