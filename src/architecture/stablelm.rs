//! StableLM, following transformers' `models/stablelm/configuration_stablelm.py`
//! (`StableLmConfig`) and `modeling_stablelm.py` (`StableLmForCausalLM`).

use super::attention::{Attention, Projections, QkNorm};
use super::blueprint::{Blueprint, PRE_NORMS};
use super::config::{Config, exact_ratio};
use super::decoder::Decoder;
use super::feed_forward::FeedForward;
use super::params::Norm;
use crate::error::Result;

/// `StableLmForCausalLM`: LayerNorms with bias; q, k, v biases from
/// `use_qkv_bias`; `qk_layernorm` adds one norm module per head;
/// `use_parallel_residual` drops `post_attention_layernorm`. `head_dim` is
/// always `hidden_size / num_attention_heads`, which must divide exactly.
pub fn describe(config: &Config) -> Result<Decoder> {
    let hidden = config.size("hidden_size", 2560)?;
    let heads = config.size("num_attention_heads", 32)?;
    let qk_norm = if config.flag("qk_layernorm", false)? {
        QkNorm::PerHeadModules
    } else {
        QkNorm::None
    };
    let layer_norms: &[&str] = if config.flag("use_parallel_residual", false)? {
        &["input_layernorm"]
    } else {
        PRE_NORMS
    };
    Blueprint {
        vocab: config.size("vocab_size", 50304)?,
        hidden,
        layers: config.size("num_hidden_layers", 32)?,
        attention: Attention::Separate(Projections {
            heads,
            kv_heads: config.size("num_key_value_heads", 32)?,
            head_dim: exact_ratio(hidden, heads, "num_attention_heads")?,
            qkv_bias: config.flag("use_qkv_bias", false)?,
            output_bias: false,
            output: "o_proj",
            qk_norm,
        }),
        feed_forward: FeedForward::Gated {
            intermediate: config.size("intermediate_size", 6912)?,
            bias: false,
        },
        sparse: None,
        layer_norms,
        norm: Norm::WeightAndBias,
        final_norm: "model.norm",
        tied: config.flag("tie_word_embeddings", false)?,
        head_bias: false,
    }
    .decoder()
}
