//! What the encoder-decoder files (T5 and its copies, BART) share: a
//! stack's layer count read and bounded, and a stack written out layer by
//! layer (a [`Decoder`](super::decoder::Decoder) holds one numbered stack;
//! these models have two, so both are written out before the layers, as
//! CLIP's two towers are, see [`super::tower::whole`]).

use super::decoder::MAX_LAYERS;
use super::params::{Norm, Params};
use crate::error::{Error, Result};
use crate::model::Role;

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

/// BART's layer (`BartEncoderLayer`, or `BartDecoderLayer` when `decoder`),
/// which Whisper's layers copy: self-attention, cross-attention
/// (`encoder_attn`) in the decoder, `fc1`, `fc2` and `final_layer_norm`.
/// `key_bias`: whether `k_proj` has a bias (BART's does, Whisper's not).
pub fn bart_layer(hidden: u64, ffn: u64, decoder: bool, key_bias: bool) -> Result<Params> {
    let mut layer = Params::new();
    bart_attention(&mut layer, "self_attn", hidden, key_bias)?;
    if decoder {
        bart_attention(&mut layer, "encoder_attn", hidden, key_bias)?;
    }
    layer.linear("fc1", hidden, ffn, true, Role::Mlp)?;
    layer.linear("fc2", ffn, hidden, true, Role::Mlp)?;
    layer.norm("final_layer_norm", vec![hidden], Norm::WeightAndBias)?;
    Ok(layer)
}

/// `BartAttention` (and `WhisperAttention`) under `prefix`: `k_proj`,
/// `v_proj`, `q_proj`, `out_proj`, and the block's LayerNorm
/// `{prefix}_layer_norm`.
fn bart_attention(params: &mut Params, prefix: &str, hidden: u64, key_bias: bool) -> Result<()> {
    for projection in ["k_proj", "v_proj", "q_proj", "out_proj"] {
        params.linear(
            &format!("{prefix}.{projection}"),
            hidden,
            hidden,
            key_bias || projection != "k_proj",
            Role::Attention,
        )?;
    }
    params.norm(
        &format!("{prefix}_layer_norm"),
        vec![hidden],
        Norm::WeightAndBias,
    )
}
