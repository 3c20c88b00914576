//! Qwen2-MoE (Qwen1.5-MoE), following transformers'
//! `models/qwen2_moe/configuration_qwen2_moe.py` (`Qwen2MoeConfig`) and
//! `modeling_qwen2_moe.py` (`Qwen2MoeForCausalLM`).

use super::attention::{Attention, Projections, QkNorm};
use super::blueprint::Routing;
use super::blueprint::{Blueprint, PRE_NORMS};
use super::config::Config;
use super::decoder::Placement;
use super::dimensions::{Dimensions, Dropout, Router};
use super::feed_forward::{Experts, FeedForward, SharedExperts};
use super::params::Norm;
use crate::error::{Error, Result};

/// `Qwen2MoeForCausalLM`: q, k, v biases from `qkv_bias` (default true),
/// none on o; MoE layers hold `num_experts` routed experts of
/// `moe_intermediate_size`, a `shared_expert` MLP of
/// `shared_expert_intermediate_size` and its `shared_expert_gate`; the other
/// layers a dense MLP of `intermediate_size`.
pub fn blueprint(config: &Config) -> Result<Blueprint> {
    let hidden = config.size("hidden_size", 2048)?;
    let heads = config.size("num_attention_heads", 16)?;
    let qkv_bias = config.flag("qkv_bias", true)?;
    let experts = config.expert_count(&["num_experts"], 60)?;
    let moe = FeedForward::Experts(Experts {
        count: experts,
        intermediate: config.size("moe_intermediate_size", 1408)?,
        shared: Some(SharedExperts {
            module: "shared_expert",
            intermediate: config.size("shared_expert_intermediate_size", 5632)?,
            bias: false,
            gate: true,
        }),
    });
    Ok(Blueprint {
        vocab: config.size("vocab_size", 151936)?,
        hidden,
        layers: config.size("num_hidden_layers", 24)?,
        attention: Attention::Separate(Projections {
            heads,
            kv_heads: config.size("num_key_value_heads", 16)?,
            head_dim: config.head_dim_or_ratio(hidden, heads, "num_attention_heads")?,
            qkv_bias,
            output_bias: false,
            output: "o_proj",
            qk_norm: QkNorm::None,
        }),
        feed_forward: FeedForward::Gated {
            intermediate: config.size("intermediate_size", 5632)?,
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

/// The Qwen MoE rule for which layers hold experts: layer `i` does when
/// `num_experts > 0`, `(i + 1) % decoder_sparse_step == 0` and `i` is not in
/// `mlp_only_layers`. `None` when no layer does.
pub fn sparse_layers(config: &Config, experts: u64) -> Result<Option<Placement>> {
    if experts == 0 {
        return Ok(None);
    }
    let step = config.size("decoder_sparse_step", 1)?;
    if step == 0 {
        return Err(Error::InvalidConfig {
            key: "decoder_sparse_step".to_string(),
            problem: "`0` cannot space the expert layers; accepted: a positive whole number such as `1` (every layer)"
                .to_string(),
        });
    }
    let except = config.size_list("mlp_only_layers")?.into_iter().collect();
    Ok(Some(Placement::Every { step, except }))
}

/// The activation dimensions of [`blueprint`]: `num_experts_per_tok`
/// (default 4) experts per token, renormalized when `norm_topk_prob`
/// (default false), weights cast to the model dtype;
/// `attention_dropout` (default 0.0).
pub fn dimensions(config: &Config) -> Result<Dimensions> {
    let routing = Routing {
        top_k: config.size("num_experts_per_tok", 4)?,
        router: Router::Softmax {
            renormalize: config.flag("norm_topk_prob", false)?,
            fp32_weights: false,
        },
    };
    Ok(Dimensions {
        dropout: Dropout::attention(config.fraction("attention_dropout", 0.0)?),
        ..blueprint(config)?.dimensions("qwen2_moe", Some(routing))
    })
}
