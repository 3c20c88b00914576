//! Qwen3-MoE, following transformers'
//! `models/qwen3_moe/configuration_qwen3_moe.py` (`Qwen3MoeConfig`) and
//! `modeling_qwen3_moe.py` (`Qwen3MoeForCausalLM`).

use super::attention::{Attention, Projections, QkNorm};
use super::blueprint::Routing;
use super::blueprint::{Blueprint, PRE_NORMS};
use super::config::Config;
use super::dimensions::{Dimensions, Dropout, Router};
use super::feed_forward::{Experts, FeedForward};
use super::params::Norm;
use super::qwen2_moe::sparse_layers;
use crate::error::Result;

/// `Qwen3MoeForCausalLM`: Qwen3 attention (with `q_norm`/`k_norm`, but
/// `head_dim` defaulting to `hidden_size / num_attention_heads`: the config
/// class does not declare it) and routed experts without shared ones. The
/// expert count is `num_experts` (default 128); its `attribute_map` target
/// `num_local_experts` overrides it when present.
pub fn blueprint(config: &Config) -> Result<Blueprint> {
    let hidden = config.size("hidden_size", 2048)?;
    let heads = config.size("num_attention_heads", 32)?;
    let attention_bias = config.flag("attention_bias", false)?;
    let experts = config.expert_count(&["num_local_experts", "num_experts"], 128)?;
    let moe = FeedForward::Experts(Experts {
        count: experts,
        intermediate: config.size("moe_intermediate_size", 768)?,
        shared: None,
    });
    Ok(Blueprint {
        vocab: config.size("vocab_size", 151936)?,
        hidden,
        layers: config.size("num_hidden_layers", 24)?,
        attention: Attention::Separate(Projections {
            heads,
            kv_heads: config.size("num_key_value_heads", 4)?,
            head_dim: config.head_dim_or_ratio(hidden, heads, "num_attention_heads")?,
            qkv_bias: attention_bias,
            output_bias: attention_bias,
            output: "o_proj",
            qk_norm: QkNorm::HeadDim,
        }),
        feed_forward: FeedForward::Gated {
            intermediate: config.size("intermediate_size", 6144)?,
            bias: false,
        },
        sparse: sparse_layers(config, experts)?.map(|placement| (moe, placement)),
        layer_norms: PRE_NORMS,
        norm: Norm::Weight,
        final_norm: "model.norm",
        tied: config.flag("tie_word_embeddings", false)?,
        head_bias: false,
    })
}

/// The activation dimensions of [`blueprint`]: `num_experts_per_tok`
/// (default 8) experts per token, renormalized when `norm_topk_prob`
/// (default false), weights cast to the model dtype;
/// `attention_dropout` (default 0.0).
pub fn dimensions(config: &Config) -> Result<Dimensions> {
    let routing = Routing {
        top_k: config.size("num_experts_per_tok", 8)?,
        router: Router::Softmax {
            renormalize: config.flag("norm_topk_prob", false)?,
            fp32_weights: false,
        },
    };
    Ok(Dimensions {
        dropout: Dropout::attention(config.fraction("attention_dropout", 0.0)?),
        ..blueprint(config)?.dimensions("qwen3_moe", Some(routing))
    })
}
