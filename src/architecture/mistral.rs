//! Mistral, following transformers' `models/mistral/configuration_mistral.py`
//! (`MistralConfig`) and `modeling_mistral.py` (`MistralForCausalLM`).

use super::attention::{Attention, Projections, QkNorm};
use super::blueprint::{Blueprint, PRE_NORMS};
use super::config::Config;
use super::dimensions::{Dimensions, Dropout};
use super::feed_forward::FeedForward;
use super::params::Norm;
use crate::error::Result;

/// `MistralForCausalLM`: Llama without biases; `num_key_value_heads`
/// defaults to 8 (`null` means `num_attention_heads`), `head_dim` to
/// `hidden_size / num_attention_heads` when absent or `null`.
pub fn blueprint(config: &Config) -> Result<Blueprint> {
    let hidden = config.size("hidden_size", 4096)?;
    let heads = config.size("num_attention_heads", 32)?;
    Ok(Blueprint {
        vocab: config.size("vocab_size", 32000)?,
        hidden,
        layers: config.size("num_hidden_layers", 32)?,
        attention: Attention::Separate(Projections {
            heads,
            kv_heads: config
                .optional_size("num_key_value_heads", Some(8))?
                .unwrap_or(heads),
            head_dim: config.head_dim_or_ratio(hidden, heads, "num_attention_heads")?,
            qkv_bias: false,
            output_bias: false,
            output: "o_proj",
            qk_norm: QkNorm::None,
        }),
        feed_forward: FeedForward::Gated {
            intermediate: config.size("intermediate_size", 14336)?,
            bias: false,
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
        ..blueprint(config)?.dimensions("mistral", None)
    })
}
