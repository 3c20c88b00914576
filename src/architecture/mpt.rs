//! MPT, following transformers' `models/mpt/configuration_mpt.py`
//! (`MptConfig`) and `modeling_mpt.py` (`MptForCausalLM`).

use super::config::Config;
use super::decoder::{Decoder, Layers};
use super::params::{Norm, Params, product};
use crate::error::Result;
use crate::model::Role;

/// The width of transformers' MPT MLP in units of `d_model`; the
/// config's `expansion_ratio` is not read.
const MLP_EXPANSION: u64 = 4;

/// `MptForCausalLM`: no biases anywhere (`no_bias` is not read), bias-free
/// LayerNorms, no position embedding (ALiBi), a fused `Wqkv`, and `lm_head`
/// tied by default. `hidden_size`, `num_hidden_layers` are `attribute_map`
/// aliases that override `d_model`, `n_layers`.
pub fn describe(config: &Config) -> Result<Decoder> {
    let vocab = config.size("vocab_size", 50368)?;
    let hidden = config.size_of_first(&["hidden_size", "d_model"], 2048)?;
    let inner = product(&[MLP_EXPANSION, hidden])?;

    let mut before_layers = Params::new();
    before_layers.embedding("transformer.wte", vocab, hidden)?;

    let mut layer = Params::new();
    layer.norm("norm_1", vec![hidden], Norm::Weight)?;
    layer.linear(
        "attn.Wqkv",
        hidden,
        product(&[3, hidden])?,
        false,
        Role::Attention,
    )?;
    layer.linear("attn.out_proj", hidden, hidden, false, Role::Attention)?;
    layer.norm("norm_2", vec![hidden], Norm::Weight)?;
    layer.linear("ffn.up_proj", hidden, inner, false, Role::Mlp)?;
    layer.linear("ffn.down_proj", inner, hidden, false, Role::Mlp)?;

    let mut after_layers = Params::new();
    after_layers.norm("transformer.norm_f", vec![hidden], Norm::Weight)?;
    after_layers.output_head(
        vocab,
        hidden,
        config.flag("tie_word_embeddings", true)?,
        false,
    )?;

    let layers = config.size_of_first(&["num_hidden_layers", "n_layers"], 24)?;
    Ok(Decoder {
        before_layers,
        layers: Layers::uniform("transformer.blocks", layers, "n_layers", layer),
        after_layers,
    })
}
