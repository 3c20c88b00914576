//! Phi (Phi-1, Phi-1.5, Phi-2), following transformers'
//! `models/phi/configuration_phi.py` (`PhiConfig`) and `modeling_phi.py`
//! (`PhiForCausalLM`).

use super::attention::{Attention, Projections, QkNorm};
use super::blueprint::{Blueprint, PARALLEL_NORM};
use super::config::{Config, ratio};
use super::dimensions::{Dimensions, Dropout, LayerLayout, MlpKind, Positions};
use super::feed_forward::FeedForward;
use super::params::Norm;
use super::phi3::partial_width;
use crate::error::Result;

/// `PhiConfig.__post_init__`: `kwargs.setdefault("partial_rotary_factor", 0.5)`.
const DEFAULT_PARTIAL_ROTARY_FACTOR: f64 = 0.5;

/// `PhiConfig.hidden_act`'s default: `NewGELUActivation`, in Python.
const DEFAULT_HIDDEN_ACT: &str = "gelu_new";

/// `PhiForCausalLM`: biases everywhere (q, k, v, `dense`, `fc1`, `fc2`,
/// `lm_head`), one LayerNorm per layer (attention and MLP in parallel),
/// `model.final_layernorm`, and optional `q_layernorm`/`k_layernorm` over
/// `hidden_size / num_attention_heads`.
pub fn blueprint(config: &Config) -> Result<Blueprint> {
    let hidden = config.size("hidden_size", 2048)?;
    let heads = config.size("num_attention_heads", 32)?;
    let qk_norm = if config.flag("qk_layernorm", false)? {
        QkNorm::LayerNorm {
            dim: ratio(hidden, heads, "num_attention_heads")?,
        }
    } else {
        QkNorm::None
    };
    Ok(Blueprint {
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
        layer_norms: PARALLEL_NORM,
        norm: Norm::WeightAndBias,
        final_norm: "model.final_layernorm",
        tied: config.flag("tie_word_embeddings", false)?,
        head_bias: true,
    })
}

/// The activation dimensions of [`blueprint`] (`PhiDecoderLayer`):
///
/// * one `input_layernorm` whose output q, k, v and `fc1` all read
///   (`attn_outputs + mlp(hidden_states) + residual`): its input, mean,
///   rstd and that output are saved once per layer;
/// * `q_layernorm`/`k_layernorm` over each head when `qk_layernorm`;
/// * rotary over `int(head_dim x partial_rotary_factor)` of each head,
///   rejoined by `torch.cat` even when the factor is 1. The factor is read
///   as `PhiConfig` resolves it: `rope_scaling` or `rope_parameters` first,
///   then the top-level key, then 0.5;
/// * `fc1 -> hidden_act -> fc2`: `gelu_new` (the default) is
///   `NewGELUActivation` in Python; any other name is taken for a kernel
///   activation saving its input (measured: `gelu`, `gelu_pytorch_tanh`);
/// * `attention_dropout` on the probabilities, `resid_pdrop` after attention
///   and after the MLP, `embd_pdrop` on the embeddings (all 0.0 by default).
pub fn dimensions(config: &Config) -> Result<Dimensions> {
    let dims = blueprint(config)?.dimensions("phi", None);
    let mlp = match config.string("hidden_act", Some(DEFAULT_HIDDEN_ACT))? {
        Some(DEFAULT_HIDDEN_ACT) => MlpKind::NewGelu,
        _ => MlpKind::Gelu,
    };
    Ok(Dimensions {
        layout: LayerLayout::ParallelSharedNorm,
        mlp,
        positions: Positions::Rotary {
            width: partial_width(dims.head_dim, partial_rotary_factor(config)?),
            fp32_tables: false,
            tables: 1,
            concatenated: true,
        },
        dropout: Dropout {
            attention: config.fraction("attention_dropout", 0.0)? > 0.0,
            residual: config.fraction("resid_pdrop", 0.0)? > 0.0,
            embedding: config.fraction("embd_pdrop", 0.0)? > 0.0,
        },
        ..dims
    })
}

/// The share of each head that is rotated, by transformers'
/// `convert_rope_params_to_dict` priority: a non-empty `rope_scaling`
/// replaces `rope_parameters`, whose own `partial_rotary_factor` wins over
/// the top-level key, whose absence gives Phi's 0.5.
fn partial_rotary_factor(config: &Config) -> Result<f64> {
    let top_level = config.fraction("partial_rotary_factor", DEFAULT_PARTIAL_ROTARY_FACTOR)?;
    let rope = match config.object("rope_scaling")? {
        Some(scaling) => Some(scaling),
        None => config.object("rope_parameters")?,
    };
    match rope {
        Some(rope) => rope.fraction("partial_rotary_factor", top_level),
        None => Ok(top_level),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::architecture::{QkNormKind, QkvLayout};

    fn dims(config: Value) -> Dimensions {
        dimensions(&Config::new(&config).unwrap()).unwrap()
    }

    fn rotary_width(config: Value) -> u64 {
        match dims(config).positions {
            Positions::Rotary { width, .. } => width,
            Positions::Learned => 0,
        }
    }

    #[test]
    fn phi_2_is_a_parallel_block_with_new_gelu_and_residual_dropout() {
        let phi2: Value = serde_json::from_str(include_str!("../../presets/phi-2.json")).unwrap();
        let dims = dims(phi2);
        assert_eq!(
            (dims.layers, dims.hidden, dims.heads, dims.head_dim),
            (32, 2560, 32, 80)
        );
        assert_eq!((dims.intermediate, dims.vocab), (10240, 51200));
        assert_eq!(dims.layout, LayerLayout::ParallelSharedNorm);
        assert_eq!(dims.qkv, QkvLayout::Separate);
        assert_eq!(dims.qk_norm, QkNormKind::None);
        assert_eq!(dims.mlp, MlpKind::NewGelu);
        // partial_rotary_factor 0.4 of 80.
        assert_eq!(
            dims.positions,
            Positions::Rotary {
                width: 32,
                fp32_tables: false,
                tables: 1,
                concatenated: true
            }
        );
        assert_eq!(
            dims.dropout,
            Dropout {
                attention: false,
                residual: true,
                embedding: false
            }
        );
        assert_eq!(dims.linears.attention_output, "dense");
        assert_eq!(dims.linears.mlp_input, ["fc1"]);
    }

    #[test]
    fn the_rotary_share_follows_phi_configs_priority() {
        let base = json!({"model_type": "phi", "hidden_size": 64, "num_attention_heads": 4});
        let with = |extra: Value| {
            let mut config = base.clone();
            config
                .as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            rotary_width(config)
        };
        assert_eq!(with(json!({})), 8, "0.5 by default");
        assert_eq!(with(json!({"partial_rotary_factor": 0.4})), 6);
        assert_eq!(
            with(
                json!({"partial_rotary_factor": 1.0, "rope_parameters": {"partial_rotary_factor": 0.25}})
            ),
            4
        );
        assert_eq!(
            with(json!({"partial_rotary_factor": 1.0, "rope_parameters": {"rope_theta": 10000.0}})),
            16
        );
        assert_eq!(
            with(
                json!({"rope_scaling": {"partial_rotary_factor": 0.25}, "rope_parameters": {"partial_rotary_factor": 1.0}})
            ),
            4
        );
        assert_eq!(with(json!({"rope_scaling": null})), 8);
        assert!(
            dimensions(&Config::new(&json!({"model_type": "phi", "rope_parameters": 3})).unwrap())
                .is_err()
        );
    }

    #[test]
    fn qk_layernorm_and_kernel_activations() {
        let dims = dims(json!({
            "model_type": "phi", "qk_layernorm": true, "hidden_act": "gelu",
            "attention_dropout": 0.1, "embd_pdrop": 0.1,
        }));
        assert_eq!(dims.qk_norm, QkNormKind::PerHead);
        assert_eq!(dims.mlp, MlpKind::Gelu);
        assert_eq!(
            dims.dropout,
            Dropout {
                attention: true,
                residual: false,
                embedding: true
            }
        );
    }
}
