//! Gemma, following transformers' `models/gemma/configuration_gemma.py`
//! (`GemmaConfig`) and `modeling_gemma.py` (`GemmaForCausalLM`).

use super::attention::{Attention, Projections, QkNorm};
use super::blueprint::{Blueprint, PRE_NORMS};
use super::config::Config;
use super::dimensions::{Dimensions, Dropout, NormKind};
use super::feed_forward::FeedForward;
use super::params::Norm;
use crate::error::Result;

/// `GemmaForCausalLM`: Llama's layout with `head_dim` declared (default
/// 256) and `lm_head` tied to the embedding by default.
pub fn blueprint(config: &Config) -> Result<Blueprint> {
    let attention_bias = config.flag("attention_bias", false)?;
    Ok(Blueprint {
        vocab: config.size("vocab_size", 256000)?,
        hidden: config.size("hidden_size", 3072)?,
        layers: config.size("num_hidden_layers", 28)?,
        attention: Attention::Separate(Projections {
            heads: config.size("num_attention_heads", 16)?,
            kv_heads: config.size("num_key_value_heads", 16)?,
            head_dim: config.size("head_dim", 256)?,
            qkv_bias: attention_bias,
            output_bias: attention_bias,
            output: "o_proj",
            qk_norm: QkNorm::None,
        }),
        feed_forward: FeedForward::Gated {
            intermediate: config.size("intermediate_size", 24576)?,
            bias: false,
        },
        sparse: None,
        layer_norms: PRE_NORMS,
        norm: Norm::Weight,
        final_norm: "model.norm",
        tied: config.flag("tie_word_embeddings", true)?,
        head_bias: false,
    })
}

/// The activation dimensions of [`blueprint`]: `GemmaRMSNorm` (fp32,
/// scaled by `1 + weight`), `attention_dropout` (default 0.0).
pub fn dimensions(config: &Config) -> Result<Dimensions> {
    Ok(Dimensions {
        norm: NormKind::GemmaRmsNorm,
        dropout: Dropout::attention(config.fraction("attention_dropout", 0.0)?),
        ..blueprint(config)?.dimensions("gemma", None)
    })
}
