//! Cohere (Command R), following transformers'
//! `models/cohere/configuration_cohere.py` (`CohereConfig`) and
//! `modeling_cohere.py` (`CohereForCausalLM`).

use super::attention::{Attention, Projections, QkNorm};
use super::blueprint::Blueprint;
use super::config::Config;
use super::decoder::Decoder;
use super::feed_forward::FeedForward;
use super::params::Norm;
use crate::error::Result;

/// `CohereForCausalLM`: one bias-free LayerNorm per layer (attention and
/// MLP run in parallel), optional per-head `q_norm`/`k_norm`
/// (`use_qk_norm`), and `lm_head` tied by default.
pub fn describe(config: &Config) -> Result<Decoder> {
    let hidden = config.size("hidden_size", 8192)?;
    let heads = config.size("num_attention_heads", 64)?;
    let attention_bias = config.flag("attention_bias", false)?;
    let qk_norm = if config.flag("use_qk_norm", false)? {
        QkNorm::PerHead
    } else {
        QkNorm::None
    };
    Blueprint {
        vocab: config.size("vocab_size", 256000)?,
        hidden,
        layers: config.size("num_hidden_layers", 40)?,
        attention: Attention::Separate(Projections {
            heads,
            kv_heads: config
                .optional_size("num_key_value_heads", None)?
                .unwrap_or(heads),
            head_dim: config.head_dim_or_ratio(hidden, heads, "num_attention_heads")?,
            qkv_bias: attention_bias,
            output_bias: attention_bias,
            output: "o_proj",
            qk_norm,
        }),
        feed_forward: FeedForward::Gated {
            intermediate: config.size("intermediate_size", 22528)?,
            bias: false,
        },
        sparse: None,
        layer_norms: &["input_layernorm"],
        norm: Norm::Weight,
        final_norm: "model.norm",
        tied: config.flag("tie_word_embeddings", true)?,
        head_bias: false,
    }
    .decoder()
}
