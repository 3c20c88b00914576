//! Phi-3, following transformers' `models/phi3/configuration_phi3.py`
//! (`Phi3Config`) and `modeling_phi3.py` (`Phi3ForCausalLM`).

use super::attention::Attention;
use super::blueprint::{Blueprint, PRE_NORMS};
use super::config::Config;
use super::decoder::Decoder;
use super::feed_forward::FeedForward;
use super::params::Norm;
use crate::error::Result;

/// `Phi3ForCausalLM`: Llama with the query, key and value projections
/// fused into `qkv_proj` and the gate and up projections into
/// `gate_up_proj`; no biases.
pub fn describe(config: &Config) -> Result<Decoder> {
    let hidden = config.size("hidden_size", 3072)?;
    let heads = config.size("num_attention_heads", 32)?;
    Blueprint {
        vocab: config.size("vocab_size", 32064)?,
        hidden,
        layers: config.size("num_hidden_layers", 32)?,
        attention: Attention::Fused {
            heads,
            kv_heads: config
                .optional_size("num_key_value_heads", None)?
                .unwrap_or(heads),
            head_dim: config.head_dim_or_ratio(hidden, heads, "num_attention_heads")?,
        },
        feed_forward: FeedForward::FusedGated {
            intermediate: config.size("intermediate_size", 8192)?,
        },
        sparse: None,
        layer_norms: PRE_NORMS,
        norm: Norm::Weight,
        final_norm: "model.norm",
        tied: config.flag("tie_word_embeddings", false)?,
        head_bias: false,
    }
    .decoder()
}
