//! Phi-3, following transformers' `models/phi3/configuration_phi3.py`
//! (`Phi3Config`) and `modeling_phi3.py` (`Phi3ForCausalLM`).

use super::attention::Attention;
use super::blueprint::{Blueprint, PRE_NORMS};
use super::config::Config;
use super::dimensions::{Dimensions, Dropout, Positions};
use super::feed_forward::FeedForward;
use super::params::Norm;
use crate::error::Result;

/// `Phi3ForCausalLM`: Llama with the query, key and value projections
/// fused into `qkv_proj` and the gate and up projections into
/// `gate_up_proj`; no biases.
pub fn blueprint(config: &Config) -> Result<Blueprint> {
    let hidden = config.size("hidden_size", 3072)?;
    let heads = config.size("num_attention_heads", 32)?;
    Ok(Blueprint {
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
    })
}

/// The activation dimensions of [`blueprint`]: `attention_dropout` and
/// `resid_pdrop` (defaults 0.0; `embd_pdrop` is not applied by
/// `Phi3Model`), and rotary tables `head_dim x partial_rotary_factor`
/// (default 1.0) wide.
pub fn dimensions(config: &Config) -> Result<Dimensions> {
    let dims = blueprint(config)?.dimensions("phi3", None);
    let rotated = config.fraction("partial_rotary_factor", 1.0)?;
    Ok(Dimensions {
        dropout: Dropout {
            attention: config.fraction("attention_dropout", 0.0)? > 0.0,
            residual: config.fraction("resid_pdrop", 0.0)? > 0.0,
            embedding: false,
        },
        positions: Positions::Rotary {
            width: partial_width(dims.head_dim, rotated),
            fp32_tables: false,
            tables: 1,
            concatenated: true,
        },
        ..dims
    })
}

/// `int(head_dim * fraction)`, as the rotary embeddings compute it.
pub fn partial_width(head_dim: u64, fraction: f64) -> u64 {
    // A fraction in 0..=1 of a size below 2^32 is exact in f64 and fits back.
    (head_dim as f64 * fraction).floor() as u64
}
