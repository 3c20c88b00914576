//! Phi (Phi-1, Phi-1.5, Phi-2), following transformers'
//! `models/phi/configuration_phi.py` (`PhiConfig`) and `modeling_phi.py`
//! (`PhiForCausalLM`).

use super::attention::{Attention, Projections, QkNorm};
use super::blueprint::Blueprint;
use super::config::{Config, ratio};
use super::decoder::Decoder;
use super::feed_forward::FeedForward;
use super::params::Norm;
use crate::error::Result;

/// `PhiForCausalLM`: biases everywhere (q, k, v, `dense`, `fc1`, `fc2`,
/// `lm_head`), one LayerNorm per layer (attention and MLP in parallel),
/// `model.final_layernorm`, and optional `q_layernorm`/`k_layernorm` over
/// `hidden_size / num_attention_heads`.
pub fn describe(config: &Config) -> Result<Decoder> {
    let hidden = config.size("hidden_size", 2048)?;
    let heads = config.size("num_attention_heads", 32)?;
    let qk_norm = if config.flag("qk_layernorm", false)? {
        QkNorm::LayerNorm {
            dim: ratio(hidden, heads, "num_attention_heads")?,
        }
    } else {
        QkNorm::None
    };
    Blueprint {
        vocab: config.size("vocab_size", 51200)?,
        hidden,
        layers: config.size("num_hidden_layers", 24)?,
        attention: Attention::Separate(Projections {
            heads,
            kv_heads: config
                .optional_size("num_key_value_heads", None)?
                .unwrap_or(heads),
            head_dim: config.head_dim_or_ratio(hidden, heads, "num_attention_heads")?,
            qkv_bias: true,
            output_bias: true,
            output: "dense",
            qk_norm,
        }),
        feed_forward: FeedForward::Plain {
            intermediate: config.size("intermediate_size", 8192)?,
            bias: true,
            up: "fc1",
            down: "fc2",
        },
        sparse: None,
        layer_norms: &["input_layernorm"],
        norm: Norm::WeightAndBias,
        final_norm: "model.final_layernorm",
        tied: config.flag("tie_word_embeddings", false)?,
        head_bias: true,
    }
    .decoder()
}
