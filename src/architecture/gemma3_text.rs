//! Gemma 3 (text only, `model_type` `gemma3_text`), following transformers'
//! `models/gemma3/configuration_gemma3.py` (`Gemma3TextConfig`) and
//! `modeling_gemma3.py` (`Gemma3ForCausalLM`).

use super::attention::{Attention, Projections, QkNorm};
use super::blueprint::{Blueprint, SANDWICH_NORMS};
use super::config::Config;
use super::dimensions::{Dimensions, Dropout, NormKind, Positions, Softcap};
use super::feed_forward::FeedForward;
use super::params::Norm;
use crate::error::{Error, Result};

/// `Gemma3ForCausalLM`: Gemma 2's layout plus `q_norm`/`k_norm` over
/// `head_dim` (default 256); `lm_head` tied by default.
pub fn blueprint(config: &Config) -> Result<Blueprint> {
    let attention_bias = config.flag("attention_bias", false)?;
    Ok(Blueprint {
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
    })
}

/// The activation dimensions of [`blueprint`]: `GemmaRMSNorm`,
/// `attention_dropout` (default 0.0), soft-capping only when
/// `attn_logit_softcapping` or `final_logit_softcapping` is set (default
/// `null`), and one rotary table per kind of layer present: sliding-window
/// layers use a local base, full-attention layers the global one.
pub fn dimensions(config: &Config) -> Result<Dimensions> {
    let dims = blueprint(config)?.dimensions("gemma3_text", None);
    let tables = rotary_tables(config, dims.layers)?;
    Ok(Dimensions {
        norm: NormKind::GemmaRmsNorm,
        dropout: Dropout::attention(config.fraction("attention_dropout", 0.0)?),
        softcap: Softcap {
            attention: config
                .optional_number("attn_logit_softcapping", None)?
                .is_some(),
            logits: config
                .optional_number("final_logit_softcapping", None)?
                .is_some(),
        },
        positions: Positions::Rotary {
            width: dims.head_dim,
            fp32_tables: false,
            tables,
            concatenated: false,
        },
        ..dims
    })
}

/// How many kinds of layer (`sliding_attention`, `full_attention`) the
/// first `layers` layers use: `layer_types` when given, else
/// `Gemma3TextConfig`'s pattern, where layer `i` is full when `(i + 1) %
/// sliding_window_pattern == 0` (default 6).
fn rotary_tables(config: &Config, layers: u64) -> Result<u64> {
    if let Some(types) = config.string_list("layer_types")? {
        let used: std::collections::BTreeSet<&str> = types
            .into_iter()
            .take(usize::try_from(layers).unwrap_or(usize::MAX))
            .collect();
        return Ok(used.len().max(1) as u64);
    }
    let pattern = config.size("sliding_window_pattern", 6)?;
    if pattern == 0 {
        return Err(Error::InvalidConfig {
            key: "sliding_window_pattern".to_string(),
            problem: "`0` cannot space the full-attention layers; accepted: a positive whole number such as `6`".to_string(),
        });
    }
    let full = layers >= pattern;
    let sliding = pattern > 1 && layers > 0;
    Ok((u64::from(full) + u64::from(sliding)).max(1))
}
