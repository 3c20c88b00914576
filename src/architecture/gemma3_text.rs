//! Gemma 3 (text only, `model_type` `gemma3_text`), following transformers'
//! `models/gemma3/configuration_gemma3.py` (`Gemma3TextConfig`) and
//! `modeling_gemma3.py` (`Gemma3ForCausalLM`).

use super::attention::{Attention, Projections, QkNorm};
use super::blueprint::{Blueprint, SANDWICH_NORMS};
use super::config::Config;
use super::decoder::Decoder;
use super::feed_forward::FeedForward;
use super::params::Norm;
use crate::error::Result;

/// `Gemma3ForCausalLM`: Gemma 2's layout plus `q_norm`/`k_norm` over
/// `head_dim` (default 256); `lm_head` tied by default.
pub fn describe(config: &Config) -> Result<Decoder> {
    let attention_bias = config.flag("attention_bias", false)?;
    Blueprint {
        vocab: config.size("vocab_size", 262_208)?,
        hidden: config.size("hidden_size", 2304)?,
        layers: config.size("num_hidden_layers", 26)?,
        attention: Attention::Separate(Projections {
            heads: config.size("num_attention_heads", 8)?,
            kv_heads: config.size("num_key_value_heads", 4)?,
            head_dim: config.size("head_dim", 256)?,
            qkv_bias: attention_bias,
            output_bias: attention_bias,
            output: "o_proj",
            qk_norm: QkNorm::HeadDim,
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
    }
    .decoder()
}
