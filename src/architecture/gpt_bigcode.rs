//! GPTBigCode (StarCoder, SantaCoder), following transformers'
//! `models/gpt_bigcode/configuration_gpt_bigcode.py` (`GPTBigCodeConfig`)
//! and `modeling_gpt_bigcode.py` (`GPTBigCodeForCausalLM`).

use super::config::{Config, exact_ratio};
use super::decoder::{Decoder, Layers};
use super::params::{Norm, Params, product, sum};
use crate::error::{Error, Result};
use crate::model::Role;

/// `GPTBigCodeForCausalLM`: GPT-2's layout with `nn.Linear` instead of
/// `Conv1D` (weights [out, in]) and, with `multi_query` (default true), one
/// key/value head: `c_attn` is `n_embd + 2 x head_dim` wide. Same key
/// aliases as GPT-2; `lm_head` tied by default.
pub fn describe(config: &Config) -> Result<Decoder> {
    let vocab = config.size("vocab_size", 50257)?;
    let hidden = config.size_of_first(&["hidden_size", "n_embd"], 768)?;
    let positions = config.size_of_first(&["max_position_embeddings", "n_positions"], 1024)?;
    let heads = config.size_of_first(&["num_attention_heads", "n_head"], 12)?;
    let head_dim = exact_ratio(hidden, heads, "n_head")?;
    let multi_query = config.flag("multi_query", true)?;
    let key_value_width = if multi_query { head_dim } else { hidden };
    let inner = match config.optional_size("n_inner", None)? {
        Some(inner) => inner,
        None => product(&[4, hidden])?,
    };

    let mut before_layers = Params::new();
    before_layers.embedding("transformer.wte", vocab, hidden)?;
    before_layers.embedding("transformer.wpe", positions, hidden)?;

    let mut layer = Params::new();
    layer.norm("ln_1", vec![hidden], Norm::WeightAndBias)?;
    let qkv = sum(&[hidden, key_value_width, key_value_width])?;
    layer.linear("attn.c_attn", hidden, qkv, true, Role::Attention)?;
    layer.linear("attn.c_proj", hidden, hidden, true, Role::Attention)?;
    layer.norm("ln_2", vec![hidden], Norm::WeightAndBias)?;
    if config.flag("add_cross_attention", false)? {
        if multi_query {
            return Err(Error::InvalidConfig {
                key: "add_cross_attention".to_string(),
                problem: "`true` together with `multi_query` is not built by transformers (cross-attention is not implemented for multi-query attention); accepted: `false`, or `multi_query: false`".to_string(),
            });
        }
        let key_value = product(&[2, hidden])?;
        layer.linear(
            "crossattention.c_attn",
            hidden,
            key_value,
            true,
            Role::Attention,
        )?;
        layer.linear(
            "crossattention.q_attn",
            hidden,
            hidden,
            true,
            Role::Attention,
        )?;
        layer.linear(
            "crossattention.c_proj",
            hidden,
            hidden,
            true,
            Role::Attention,
        )?;
        layer.norm("ln_cross_attn", vec![hidden], Norm::WeightAndBias)?;
    }
    layer.linear("mlp.c_fc", hidden, inner, true, Role::Mlp)?;
    layer.linear("mlp.c_proj", inner, hidden, true, Role::Mlp)?;

    let mut after_layers = Params::new();
    after_layers.norm("transformer.ln_f", vec![hidden], Norm::WeightAndBias)?;
    after_layers.output_head(
        vocab,
        hidden,
        config.flag("tie_word_embeddings", true)?,
        false,
    )?;

    let layers = config.size_of_first(&["num_hidden_layers", "n_layer"], 12)?;
    Ok(Decoder {
        before_layers,
        layers: Layers::uniform("transformer.h", layers, "n_layer", layer),
        after_layers,
    })
}
