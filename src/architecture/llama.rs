//! Llama, following transformers' `models/llama/configuration_llama.py`
//! (`LlamaConfig`) and `modeling_llama.py` (`LlamaForCausalLM`).

use super::attention::{Attention, Projections, QkNorm};
use super::blueprint::{Blueprint, PRE_NORMS};
use super::config::Config;
use super::dimensions::{Dimensions, Dropout};
use super::feed_forward::FeedForward;
use super::params::Norm;
use crate::error::Result;

/// `LlamaForCausalLM`: `head_dim` and `num_key_value_heads` default to
/// `hidden_size / num_attention_heads` and `num_attention_heads`;
/// `attention_bias` covers q, k, v and o; `mlp_bias` all three MLP
/// projections.
pub fn blueprint(config: &Config) -> Result<Blueprint> {
    let hidden = config.size("hidden_size", 4096)?;
    let heads = config.size("num_attention_heads", 32)?;
    let attention_bias = config.flag("attention_bias", false)?;
    Ok(Blueprint {
        vocab: config.size("vocab_size", 32000)?,
        hidden,
        layers: config.size("num_hidden_layers", 32)?,
        attention: Attention::Separate(Projections {
            heads,
            kv_heads: config
                .optional_size("num_key_value_heads", None)?
                .unwrap_or(heads),
            head_dim: config.head_dim_or_ratio(hidden, heads, "num_attention_heads")?,
            qkv_bias: attention_bias,
            output_bias: attention_bias,
            output: "o_proj",
            qk_norm: QkNorm::None,
        }),
        feed_forward: FeedForward::Gated {
            intermediate: config.size("intermediate_size", 11008)?,
            bias: config.flag("mlp_bias", false)?,
        },
        sparse: None,
        layer_norms: PRE_NORMS,
        norm: Norm::Weight,
        final_norm: "model.norm",
        tied: config.flag("tie_word_embeddings", false)?,
        head_bias: false,
    })
}

/// The activation dimensions of [`blueprint`], with `attention_dropout`
/// (default 0.0).
pub fn dimensions(config: &Config) -> Result<Dimensions> {
    Ok(Dimensions {
        dropout: Dropout::attention(config.fraction("attention_dropout", 0.0)?),
        ..blueprint(config)?.dimensions("llama", None)
    })
}
