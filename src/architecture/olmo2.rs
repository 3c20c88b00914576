//! OLMo 2, following transformers' `models/olmo2/configuration_olmo2.py`
//! (`Olmo2Config`) and `modeling_olmo2.py` (`Olmo2ForCausalLM`).

use super::attention::{Attention, Projections, QkNorm};
use super::blueprint::Blueprint;
use super::config::Config;
use super::dimensions::{Dimensions, Dropout, NormKind, Positions};
use super::feed_forward::FeedForward;
use super::params::Norm;
use crate::error::Result;

/// `Olmo2ForCausalLM`: Llama with norms after each block instead of before,
/// and `q_norm`/`k_norm` over the whole query and key projections.
pub fn blueprint(config: &Config) -> Result<Blueprint> {
    let hidden = config.size("hidden_size", 4096)?;
    let heads = config.size("num_attention_heads", 32)?;
    let attention_bias = config.flag("attention_bias", false)?;
    Ok(Blueprint {
        vocab: config.size("vocab_size", 50304)?,
        hidden,
        layers: config.size("num_hidden_layers", 32)?,
        attention: Attention::Separate(Projections {
            heads,
            kv_heads: config
                .optional_size("num_key_value_heads", None)?
                .unwrap_or(heads),
            head_dim: config.head_dim_or_ratio(hidden, heads, "num_attention_heads")?,
            qkv_bias: attention_bias,
            output_bias: attention_bias,
            output: "o_proj",
            qk_norm: QkNorm::Projection,
        }),
        feed_forward: FeedForward::Gated {
            intermediate: config.size("intermediate_size", 11008)?,
            bias: false,
        },
        sparse: None,
        layer_norms: &["post_attention_layernorm", "post_feedforward_layernorm"],
        norm: Norm::Weight,
        final_norm: "model.norm",
        tied: config.flag("tie_word_embeddings", false)?,
        head_bias: false,
    })
}

/// The activation dimensions of [`blueprint`]: `Olmo2RMSNorm` (the weight
/// multiplies in fp32), `attention_dropout` (default 0.0), and fp32 rotary
/// tables (`Olmo2RotaryEmbedding` does not cast cos and sin back).
pub fn dimensions(config: &Config) -> Result<Dimensions> {
    let dims = blueprint(config)?.dimensions("olmo2", None);
    Ok(Dimensions {
        norm: NormKind::Olmo2RmsNorm,
        dropout: Dropout::attention(config.fraction("attention_dropout", 0.0)?),
        positions: Positions::Rotary {
            width: dims.head_dim,
            fp32_tables: true,
            tables: 1,
            concatenated: false,
        },
        ..dims
    })
}
