//! DeepSeek-V3, following transformers'
//! `models/deepseek_v3/configuration_deepseek_v3.py` (`DeepseekV3Config`)
//! and `modeling_deepseek_v3.py` (`DeepseekV3ForCausalLM`).

use super::attention::{Attention, LatentAttention};
use super::blueprint::Routing;
use super::blueprint::{Blueprint, PRE_NORMS};
use super::config::Config;
use super::decoder::Placement;
use super::dimensions::{Dimensions, Dropout, Router};
use super::feed_forward::{Experts, FeedForward, SharedExperts};
use super::params::{Norm, product};
use crate::error::Result;

/// `DeepseekV3ForCausalLM`: multi-head latent attention in every layer; a
/// dense MLP in the first `first_k_dense_replace` layers and a mixture of
/// experts after (`moe_layer_freq` is not read). Each MoE layer holds
/// `n_routed_experts` experts (its alias `num_local_experts` overrides it),
/// a router, and `shared_experts`: one MLP `n_shared_experts x
/// moe_intermediate_size` wide, present even when that is 0. The router's
/// `e_score_correction_bias` is a buffer, not a parameter; the multi-token
/// prediction layers (`num_nextn_predict_layers`) are not built.
pub fn blueprint(config: &Config) -> Result<Blueprint> {
    let moe_intermediate = config.size("moe_intermediate_size", 2048)?;
    let attention_bias = config.flag("attention_bias", false)?;
    let moe = FeedForward::Experts(Experts {
        count: config.expert_count(&["num_local_experts", "n_routed_experts"], 256)?,
        intermediate: moe_intermediate,
        shared: Some(SharedExperts {
            module: "shared_experts",
            intermediate: product(&[moe_intermediate, config.size("n_shared_experts", 1)?])?,
            bias: false,
            gate: false,
        }),
    });
    Ok(Blueprint {
        vocab: config.size("vocab_size", 129280)?,
        hidden: config.size("hidden_size", 7168)?,
        layers: config.size("num_hidden_layers", 61)?,
        attention: Attention::Latent(LatentAttention {
            heads: config.size("num_attention_heads", 128)?,
            q_lora_rank: config.optional_size("q_lora_rank", Some(1536))?,
            kv_lora_rank: config.size("kv_lora_rank", 512)?,
            qk_nope_head_dim: config.size("qk_nope_head_dim", 128)?,
            qk_rope_head_dim: config.size("qk_rope_head_dim", 64)?,
            v_head_dim: config.size("v_head_dim", 128)?,
            bias: attention_bias,
        }),
        feed_forward: FeedForward::Gated {
            intermediate: config.size("intermediate_size", 18432)?,
            bias: false,
        },
        sparse: Some((
            moe,
            Placement::From(config.size("first_k_dense_replace", 3)?),
        )),
        layer_norms: PRE_NORMS,
        norm: Norm::Weight,
        final_norm: "model.norm",
        tied: config.flag("tie_word_embeddings", false)?,
        head_bias: false,
    })
}

/// The activation dimensions of [`blueprint`]: `num_experts_per_tok`
/// (default 8) experts per token scored by an fp32 sigmoid router,
/// renormalized when `norm_topk_prob` (default true);
/// `num_key_value_heads` (default 128, `null` for the head count), which
/// latent attention does not use; `attention_dropout` (default 0.0).
pub fn dimensions(config: &Config) -> Result<Dimensions> {
    let routing = Routing {
        top_k: config.size("num_experts_per_tok", 8)?,
        router: Router::Sigmoid {
            renormalize: config.flag("norm_topk_prob", true)?,
        },
    };
    let dims = blueprint(config)?.dimensions("deepseek_v3", Some(routing));
    Ok(Dimensions {
        kv_heads: config
            .optional_size("num_key_value_heads", Some(128))?
            .unwrap_or(dims.heads),
        dropout: Dropout::attention(config.fraction("attention_dropout", 0.0)?),
        ..dims
    })
}
