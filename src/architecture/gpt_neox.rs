//! GPT-NeoX (Pythia), following transformers'
//! `models/gpt_neox/configuration_gpt_neox.py` (`GPTNeoXConfig`) and
//! `modeling_gpt_neox.py` (`GPTNeoXForCausalLM`).

use super::config::{Config, exact_ratio};
use super::decoder::{Decoder, Layers};
use super::params::{Norm, Params, product};
use crate::error::Result;
use crate::model::Role;

/// `GPTNeoXForCausalLM`: a fused `query_key_value` [3 x hidden, hidden] and
/// `dense`, with biases unless `attention_bias` is false (default true); an
/// MLP with biases; LayerNorms; an untied `lm_head` by default. The rotary
/// keys (`rotary_pct`, `rotary_emb_base`) change no shape.
pub fn describe(config: &Config) -> Result<Decoder> {
    let vocab = config.size("vocab_size", 50432)?;
    let hidden = config.size("hidden_size", 6144)?;
    exact_ratio(
        hidden,
        config.size("num_attention_heads", 64)?,
        "num_attention_heads",
    )?;
    let intermediate = config.size("intermediate_size", 24576)?;
    let attention_bias = config.flag("attention_bias", true)?;

    let mut before_layers = Params::new();
    before_layers.embedding("gpt_neox.embed_in", vocab, hidden)?;

    let mut layer = Params::new();
    layer.norm("input_layernorm", vec![hidden], Norm::WeightAndBias)?;
    layer.norm(
        "post_attention_layernorm",
        vec![hidden],
        Norm::WeightAndBias,
    )?;
    let qkv = product(&[3, hidden])?;
    layer.linear(
        "attention.query_key_value",
        hidden,
        qkv,
        attention_bias,
        Role::Attention,
    )?;
    layer.linear(
        "attention.dense",
        hidden,
        hidden,
        attention_bias,
        Role::Attention,
    )?;
    layer.linear("mlp.dense_h_to_4h", hidden, intermediate, true, Role::Mlp)?;
    layer.linear("mlp.dense_4h_to_h", intermediate, hidden, true, Role::Mlp)?;

    let mut after_layers = Params::new();
    after_layers.norm(
        "gpt_neox.final_layer_norm",
        vec![hidden],
        Norm::WeightAndBias,
    )?;
    after_layers.output_head(
        vocab,
        hidden,
        config.flag("tie_word_embeddings", false)?,
        false,
    )?;

    let layers = config.size("num_hidden_layers", 44)?;
    Ok(Decoder {
        before_layers,
        layers: Layers::uniform("gpt_neox.layers", layers, "num_hidden_layers", layer),
        after_layers,
    })
}
