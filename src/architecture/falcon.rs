//! Falcon, following transformers' `models/falcon/configuration_falcon.py`
//! (`FalconConfig`) and `modeling_falcon.py` (`FalconForCausalLM`).

use super::config::{Config, exact_ratio};
use super::decoder::{Decoder, Layers};
use super::params::{Norm, Params, product, sum};
use crate::error::Result;
use crate::model::Role;

/// Norms a Falcon layer has when its attention and MLP run in parallel
/// with one norm each.
const TWO_PARALLEL_NORMS: u64 = 2;

/// `FalconForCausalLM`: a fused `query_key_value` whose width depends on
/// the attention variant (`new_decoder_architecture`: `num_kv_heads` key
/// and value heads; `multi_query`, the default: one; otherwise one per
/// query head), biases only with `bias`, an MLP `ffn_hidden_size` wide
/// (`4 x hidden` by default), and one or two LayerNorms per layer
/// (`parallel_attn`, `num_ln_in_parallel_attn`). The legacy key `n_embed`
/// overrides `hidden_size`; `lm_head` is tied by default.
pub fn describe(config: &Config) -> Result<Decoder> {
    let vocab = config.size("vocab_size", 65024)?;
    let hidden = config.size_of_first(&["n_embed", "hidden_size"], 4544)?;
    let heads = config.size("num_attention_heads", 71)?;
    let head_dim = exact_ratio(hidden, heads, "num_attention_heads")?;
    let new_architecture = config.flag("new_decoder_architecture", false)?;
    let qkv = if new_architecture {
        let kv_heads = config.optional_size("num_kv_heads", None)?.unwrap_or(heads);
        product(&[sum(&[kv_heads, kv_heads, heads])?, head_dim])?
    } else if config.flag("multi_query", true)? {
        sum(&[hidden, head_dim, head_dim])?
    } else {
        product(&[3, hidden])?
    };
    let bias = config.flag("bias", false)?;
    let ffn = match config.optional_size("ffn_hidden_size", None)? {
        Some(ffn) => ffn,
        None => product(&[4, hidden])?,
    };
    let parallel_norms = match config.optional_size("num_ln_in_parallel_attn", None)? {
        Some(count) => Some(count),
        None if new_architecture => Some(TWO_PARALLEL_NORMS),
        None => None,
    };
    let norms: &[&str] = if !config.flag("parallel_attn", true)? {
        &["post_attention_layernorm", "input_layernorm"]
    } else if parallel_norms == Some(TWO_PARALLEL_NORMS) {
        &["ln_attn", "ln_mlp"]
    } else {
        &["input_layernorm"]
    };

    let mut before_layers = Params::new();
    before_layers.embedding("transformer.word_embeddings", vocab, hidden)?;

    let mut layer = Params::new();
    layer.linear(
        "self_attention.query_key_value",
        hidden,
        qkv,
        bias,
        Role::Attention,
    )?;
    layer.linear(
        "self_attention.dense",
        hidden,
        hidden,
        bias,
        Role::Attention,
    )?;
    layer.linear("mlp.dense_h_to_4h", hidden, ffn, bias, Role::Mlp)?;
    layer.linear("mlp.dense_4h_to_h", ffn, hidden, bias, Role::Mlp)?;
    for norm in norms {
        layer.norm(norm, vec![hidden], Norm::WeightAndBias)?;
    }

    let mut after_layers = Params::new();
    after_layers.norm("transformer.ln_f", vec![hidden], Norm::WeightAndBias)?;
    after_layers.output_head(
        vocab,
        hidden,
        config.flag("tie_word_embeddings", true)?,
        false,
    )?;

    let layers = config.size("num_hidden_layers", 32)?;
    Ok(Decoder {
        before_layers,
        layers: Layers::uniform("transformer.h", layers, "num_hidden_layers", layer),
        after_layers,
    })
}
