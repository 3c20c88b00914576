//! Mixtral, following transformers' `models/mixtral/configuration_mixtral.py`
//! (`MixtralConfig`) and `modeling_mixtral.py` (`MixtralForCausalLM`).

use super::attention::{Attention, Projections, QkNorm};
use super::blueprint::Routing;
use super::blueprint::{Blueprint, PRE_NORMS};
use super::config::Config;
use super::dimensions::{Dimensions, Dropout, Router};
use super::feed_forward::{Experts, FeedForward};
use super::params::Norm;
use crate::error::Result;

/// `MixtralForCausalLM`: Mistral attention and a mixture of experts in
/// every layer, each expert `intermediate_size` wide. The expert count is
/// `num_local_experts` (default 8), overridden by its `attribute_map` alias
/// `num_experts`, which transformers sets after the declared fields.
pub fn blueprint(config: &Config) -> Result<Blueprint> {
    let hidden = config.size("hidden_size", 4096)?;
    let heads = config.size("num_attention_heads", 32)?;
    Ok(Blueprint {
        vocab: config.size("vocab_size", 32000)?,
        hidden,
        layers: config.size("num_hidden_layers", 32)?,
        attention: Attention::Separate(Projections {
            heads,
            kv_heads: config
                .optional_size("num_key_value_heads", Some(8))?
                .unwrap_or(heads),
            head_dim: config.head_dim_or_ratio(hidden, heads, "num_attention_heads")?,
            qkv_bias: false,
            output_bias: false,
            output: "o_proj",
            qk_norm: QkNorm::None,
        }),
        feed_forward: FeedForward::Experts(Experts {
            count: config.expert_count(&["num_experts", "num_local_experts"], 8)?,
            intermediate: config.size("intermediate_size", 14336)?,
            shared: None,
        }),
        sparse: None,
        layer_norms: PRE_NORMS,
        norm: Norm::Weight,
        final_norm: "model.norm",
        tied: config.flag("tie_word_embeddings", false)?,
        head_bias: false,
    })
}

/// The activation dimensions of [`blueprint`]: `num_experts_per_tok`
/// (default 2) experts per token, weights renormalized and kept in fp32
/// (`MixtralTopKRouter`), `attention_dropout` (default 0.0).
pub fn dimensions(config: &Config) -> Result<Dimensions> {
    let routing = Routing {
        top_k: config.size("num_experts_per_tok", 2)?,
        router: Router::Softmax {
            renormalize: true,
            fp32_weights: true,
        },
    };
    Ok(Dimensions {
        dropout: Dropout::attention(config.fraction("attention_dropout", 0.0)?),
        ..blueprint(config)?.dimensions("mixtral", Some(routing))
    })
}
