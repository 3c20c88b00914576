//! Gemma 2, following transformers' `models/gemma2/configuration_gemma2.py`
//! (`Gemma2Config`) and `modeling_gemma2.py` (`Gemma2ForCausalLM`).

use super::attention::{Attention, Projections, QkNorm};
use super::blueprint::{Blueprint, SANDWICH_NORMS};
use super::config::Config;
use super::dimensions::{Dimensions, Dropout, NormKind, Softcap};
use super::feed_forward::FeedForward;
use super::params::Norm;
use crate::error::Result;

/// `Gemma2ForCausalLM`: Gemma with norms before and after both blocks;
/// `head_dim` declared (default 256); `lm_head` tied by default.
pub fn blueprint(config: &Config) -> Result<Blueprint> {
    let attention_bias = config.flag("attention_bias", false)?;
    Ok(Blueprint {
        vocab: config.size("vocab_size", 256000)?,
        hidden: config.size("hidden_size", 2304)?,
        layers: config.size("num_hidden_layers", 26)?,
        attention: Attention::Separate(Projections {
            heads: config.size("num_attention_heads", 8)?,
            kv_heads: config.size("num_key_value_heads", 4)?,
            head_dim: config.size("head_dim", 256)?,
            qkv_bias: attention_bias,
            output_bias: attention_bias,
            output: "o_proj",
            qk_norm: QkNorm::None,
        }),
        feed_forward: FeedForward::Gated {
            intermediate: config.size("intermediate_size", 9216)?,
            bias: false,
        },
        sparse: None,
        layer_norms: SANDWICH_NORMS,
        norm: Norm::Weight,
        final_norm: "model.norm",
        tied: config.flag("tie_word_embeddings", true)?,
        head_bias: false,
    })
}

/// The activation dimensions of [`blueprint`]: `GemmaRMSNorm`,
/// `attention_dropout` (default 0.0), and tanh soft-capping of the
/// attention scores (`attn_logit_softcapping`, default 50.0) and of the
/// logits (`final_logit_softcapping`, default 30.0) unless `null`.
pub fn dimensions(config: &Config) -> Result<Dimensions> {
    Ok(Dimensions {
        norm: NormKind::GemmaRmsNorm,
        dropout: Dropout::attention(config.fraction("attention_dropout", 0.0)?),
        softcap: Softcap {
            attention: config
                .optional_number("attn_logit_softcapping", Some(50.0))?
                .is_some(),
            logits: config
                .optional_number("final_logit_softcapping", Some(30.0))?
                .is_some(),
        },
        ..blueprint(config)?.dimensions("gemma2", None)
    })
}
