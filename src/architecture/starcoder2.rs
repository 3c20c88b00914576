//! StarCoder2, following transformers'
//! `models/starcoder2/configuration_starcoder2.py` (`Starcoder2Config`) and
//! `modeling_starcoder2.py` (`Starcoder2ForCausalLM`).

use super::attention::{Attention, Projections, QkNorm};
use super::blueprint::{Blueprint, PRE_NORMS};
use super::config::Config;
use super::dimensions::{Dimensions, Dropout};
use super::feed_forward::FeedForward;
use super::params::Norm;
use crate::error::Result;

/// `Starcoder2ForCausalLM`: `use_bias` (default true) puts biases on every
/// attention and MLP projection; the MLP is a plain `c_fc`/`c_proj` pair;
/// norms are LayerNorms with bias; `lm_head` is tied by default.
pub fn blueprint(config: &Config) -> Result<Blueprint> {
    let hidden = config.size("hidden_size", 3072)?;
    let heads = config.size("num_attention_heads", 24)?;
    let bias = config.flag("use_bias", true)?;
    Ok(Blueprint {
        vocab: config.size("vocab_size", 49152)?,
        hidden,
        layers: config.size("num_hidden_layers", 30)?,
        attention: Attention::Separate(Projections {
            heads,
            kv_heads: config.size("num_key_value_heads", 2)?,
            head_dim: config.head_dim_or_ratio(hidden, heads, "num_attention_heads")?,
            qkv_bias: bias,
            output_bias: bias,
            output: "o_proj",
            qk_norm: QkNorm::None,
        }),
        feed_forward: FeedForward::Plain {
            intermediate: config.size("intermediate_size", 12288)?,
            bias,
            up: "c_fc",
            down: "c_proj",
        },
        sparse: None,
        layer_norms: PRE_NORMS,
        norm: Norm::WeightAndBias,
        final_norm: "model.norm",
        tied: config.flag("tie_word_embeddings", true)?,
        head_bias: false,
    })
}

/// The activation dimensions of [`blueprint`]: `attention_dropout`,
/// `residual_dropout` and `embedding_dropout` (defaults 0.0).
pub fn dimensions(config: &Config) -> Result<Dimensions> {
    Ok(Dimensions {
        dropout: Dropout {
            attention: config.fraction("attention_dropout", 0.0)? > 0.0,
            residual: config.fraction("residual_dropout", 0.0)? > 0.0,
            embedding: config.fraction("embedding_dropout", 0.0)? > 0.0,
        },
        ..blueprint(config)?.dimensions("starcoder2", None)
    })
}
