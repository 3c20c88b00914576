//! DeepSeek-V2, following transformers'
//! `models/deepseek_v2/configuration_deepseek_v2.py` (`DeepseekV2Config`)
//! and `modeling_deepseek_v2.py` (`DeepseekV2ForCausalLM`).

use super::attention::{Attention, LatentAttention};
use super::blueprint::{Blueprint, PRE_NORMS};
use super::config::Config;
use super::decoder::{Decoder, Placement};
use super::feed_forward::{Experts, FeedForward, SharedExperts};
use super::params::{Norm, product};
use crate::error::Result;

/// `DeepseekV2ForCausalLM`: DeepSeek-V3's layout with V2's defaults (every
/// layer MoE, `first_k_dense_replace` 0; 64 routed experts, alias
/// `num_experts`; 2 shared) and `mlp_bias` on the dense and shared MLPs.
pub fn describe(config: &Config) -> Result<Decoder> {
    let moe_intermediate = config.size("moe_intermediate_size", 1407)?;
    let attention_bias = config.flag("attention_bias", false)?;
    let mlp_bias = config.flag("mlp_bias", false)?;
    let moe = FeedForward::Experts(Experts {
        count: config.expert_count(&["num_experts", "n_routed_experts"], 64)?,
        intermediate: moe_intermediate,
        shared: Some(SharedExperts {
            module: "shared_experts",
            intermediate: product(&[moe_intermediate, config.size("n_shared_experts", 2)?])?,
            bias: mlp_bias,
            gate: false,
        }),
    });
    Blueprint {
        vocab: config.size("vocab_size", 102400)?,
        hidden: config.size("hidden_size", 4096)?,
        layers: config.size("num_hidden_layers", 32)?,
        attention: Attention::Latent(LatentAttention {
            heads: config.size("num_attention_heads", 32)?,
            q_lora_rank: config.optional_size("q_lora_rank", Some(1536))?,
            kv_lora_rank: config.size("kv_lora_rank", 512)?,
            qk_nope_head_dim: config.size("qk_nope_head_dim", 128)?,
            qk_rope_head_dim: config.size("qk_rope_head_dim", 64)?,
            v_head_dim: config.size("v_head_dim", 128)?,
            bias: attention_bias,
        }),
        feed_forward: FeedForward::Gated {
            intermediate: config.size("intermediate_size", 11008)?,
            bias: mlp_bias,
        },
        sparse: Some((
            moe,
            Placement::From(config.size("first_k_dense_replace", 0)?),
        )),
        layer_norms: PRE_NORMS,
        norm: Norm::Weight,
        final_norm: "model.norm",
        tied: config.flag("tie_word_embeddings", false)?,
        head_bias: false,
    }
    .decoder()
}
