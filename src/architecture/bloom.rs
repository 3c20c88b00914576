//! BLOOM, following transformers' `models/bloom/configuration_bloom.py`
//! (`BloomConfig`) and `modeling_bloom.py` (`BloomForCausalLM`).

use super::config::{Config, exact_ratio};
use super::decoder::{Decoder, Layers};
use super::params::{Norm, Params, product};
use crate::error::Result;
use crate::model::Role;

/// `BloomForCausalLM`: a LayerNorm right after the embedding, a fused
/// `query_key_value` and `dense` with biases, a `4 x hidden` MLP with
/// biases, LayerNorms, and `lm_head` tied by default. The legacy key
/// `n_embed` overrides `hidden_size`; `num_hidden_layers` and
/// `num_attention_heads` are aliases that override `n_layer` and `n_head`.
pub fn describe(config: &Config) -> Result<Decoder> {
    let vocab = config.size("vocab_size", 250880)?;
    let hidden = config.size_of_first(&["n_embed", "hidden_size"], 64)?;
    let heads = config.size_of_first(&["num_attention_heads", "n_head"], 8)?;
    exact_ratio(hidden, heads, "n_head")?;
    let inner = product(&[4, hidden])?;

    let mut before_layers = Params::new();
    before_layers.embedding("transformer.word_embeddings", vocab, hidden)?;
    before_layers.norm(
        "transformer.word_embeddings_layernorm",
        vec![hidden],
        Norm::WeightAndBias,
    )?;

    let mut layer = Params::new();
    layer.norm("input_layernorm", vec![hidden], Norm::WeightAndBias)?;
    let qkv = product(&[3, hidden])?;
    layer.linear(
        "self_attention.query_key_value",
        hidden,
        qkv,
        true,
        Role::Attention,
    )?;
    layer.linear(
        "self_attention.dense",
        hidden,
        hidden,
        true,
        Role::Attention,
    )?;
    layer.norm(
        "post_attention_layernorm",
        vec![hidden],
        Norm::WeightAndBias,
    )?;
    layer.linear("mlp.dense_h_to_4h", hidden, inner, true, Role::Mlp)?;
    layer.linear("mlp.dense_4h_to_h", inner, hidden, true, Role::Mlp)?;

    let mut after_layers = Params::new();
    after_layers.norm("transformer.ln_f", vec![hidden], Norm::WeightAndBias)?;
    after_layers.output_head(
        vocab,
        hidden,
        config.flag("tie_word_embeddings", true)?,
        false,
    )?;

    let layers = config.size_of_first(&["num_hidden_layers", "n_layer"], 2)?;
    Ok(Decoder {
        before_layers,
        layers: Layers::uniform("transformer.h", layers, "n_layer", layer),
        after_layers,
    })
}
