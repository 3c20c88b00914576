//! Qwen3, following transformers' `models/qwen3/configuration_qwen3.py`
//! (`Qwen3Config`) and `modeling_qwen3.py` (`Qwen3ForCausalLM`).

use super::attention::{Attention, Projections, QkNorm};
use super::blueprint::{Blueprint, PRE_NORMS};
use super::config::Config;
use super::dimensions::{Dimensions, Dropout};
use super::feed_forward::FeedForward;
use super::params::Norm;
use crate::error::Result;

/// `Qwen3ForCausalLM`: Llama with `q_norm`/`k_norm` over `head_dim`, which
/// the config class declares with default 128 (not `hidden_size /
/// num_attention_heads`); `num_key_value_heads` defaults to 32 when absent
/// and to `num_attention_heads` when `null`.
pub fn blueprint(config: &Config) -> Result<Blueprint> {
    let heads = config.size("num_attention_heads", 32)?;
    let attention_bias = config.flag("attention_bias", false)?;
    Ok(Blueprint {
        vocab: config.size("vocab_size", 151936)?,
        hidden: config.size("hidden_size", 4096)?,
        layers: config.size("num_hidden_layers", 32)?,
        attention: Attention::Separate(Projections {
            heads,
            kv_heads: config
                .optional_size("num_key_value_heads", Some(32))?
                .unwrap_or(heads),
            head_dim: config.size("head_dim", 128)?,
            qkv_bias: attention_bias,
            output_bias: attention_bias,
            output: "o_proj",
            qk_norm: QkNorm::HeadDim,
        }),
        feed_forward: FeedForward::Gated {
            intermediate: config.size("intermediate_size", 22016)?,
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
        ..blueprint(config)?.dimensions("qwen3", None)
    })
}
