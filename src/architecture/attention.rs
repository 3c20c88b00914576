//! The attention blocks of the llama-style decoders, described as data:
//! which projections exist, their sizes and biases, and the norms inside.
//!
//! Names are relative to the attention module (`self_attn`).

use super::decoder::MAX_TENSORS;
use super::params::{Norm, Params, product, sum};
use crate::error::{Error, Result};
use crate::model::Role;

/// An attention block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attention {
    /// Separate `q_proj`, `k_proj`, `v_proj` and an output projection.
    Separate(Projections),
    /// One fused `qkv_proj` [(heads + 2 kv_heads) x head_dim, hidden] and
    /// `o_proj`, without biases (Phi-3, `modeling_phi3.py`).
    Fused {
        heads: u64,
        kv_heads: u64,
        head_dim: u64,
    },
    /// DeepSeek's multi-head latent attention.
    Latent(LatentAttention),
}

/// Separate query, key, value and output projections (`LlamaAttention`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Projections {
    /// Query heads.
    pub heads: u64,
    /// Key/value heads (fewer than `heads` for grouped-query attention).
    pub kv_heads: u64,
    /// Width of one head.
    pub head_dim: u64,
    /// Whether `q_proj`, `k_proj` and `v_proj` have biases.
    pub qkv_bias: bool,
    /// Whether the output projection has a bias.
    pub output_bias: bool,
    /// The output projection's name: `o_proj`, or `dense` in Phi.
    pub output: &'static str,
    /// Norms applied to queries and keys.
    pub qk_norm: QkNorm,
}

/// The query/key norms inside an attention block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QkNorm {
    /// None.
    None,
    /// `q_norm` and `k_norm`: one RMS scale of `head_dim` shared by all
    /// heads (Qwen3, Gemma 3).
    HeadDim,
    /// `q_norm` [heads x head_dim] and `k_norm` [kv_heads x head_dim] over
    /// the whole projection (OLMo 2).
    Projection,
    /// `q_norm` [heads, head_dim] and `k_norm` [kv_heads, head_dim]: a
    /// scale per head (Cohere's `use_qk_norm`).
    PerHead,
    /// `q_layernorm.norms.{h}` and `k_layernorm.norms.{h}`: one bias-free
    /// LayerNorm module of `head_dim` per head (StableLM's `qk_layernorm`).
    PerHeadModules,
    /// `q_layernorm` and `k_layernorm`: LayerNorms with bias over `dim`
    /// (Phi's `qk_layernorm`, sized `hidden_size / num_attention_heads`).
    LayerNorm { dim: u64 },
}

/// Multi-head latent attention (`DeepseekV3Attention`): queries through an
/// optional low-rank bottleneck, keys and values through a shared one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatentAttention {
    /// Attention heads.
    pub heads: u64,
    /// The query bottleneck; `None` gives a plain `q_proj`.
    pub q_lora_rank: Option<u64>,
    /// The key/value bottleneck.
    pub kv_lora_rank: u64,
    /// Per-head query/key width without rotary embedding.
    pub qk_nope_head_dim: u64,
    /// Per-head query/key width with rotary embedding.
    pub qk_rope_head_dim: u64,
    /// Per-head value width.
    pub v_head_dim: u64,
    /// `attention_bias`: biases on `q_a_proj`, `kv_a_proj_with_mqa`, `o_proj`.
    pub bias: bool,
}

impl Attention {
    /// The block's parameters for a model of width `hidden`.
    pub fn params(&self, hidden: u64) -> Result<Params> {
        match self {
            Attention::Separate(projections) => projections.params(hidden),
            Attention::Fused {
                heads,
                kv_heads,
                head_dim,
            } => {
                check_key_value_heads(*heads, *kv_heads)?;
                let queries = product(&[*heads, *head_dim])?;
                let keys = product(&[*kv_heads, *head_dim])?;
                let mut params = Params::new();
                params.linear("o_proj", queries, hidden, false, Role::Attention)?;
                params.linear(
                    "qkv_proj",
                    hidden,
                    sum(&[queries, keys, keys])?,
                    false,
                    Role::Attention,
                )?;
                Ok(params)
            }
            Attention::Latent(latent) => latent.params(hidden),
        }
    }
}

/// At least one key/value head: transformers' attention classes divide by
/// it (`num_attention_heads // num_key_value_heads`) when they are built.
/// A count that does not divide the heads still builds (and is counted
/// here as transformers counts it) but cannot run attention, so the
/// estimate of training refuses it (`parallel::constraints`).
fn check_key_value_heads(heads: u64, kv_heads: u64) -> Result<()> {
    if kv_heads == 0 {
        return Err(Error::InvalidConfig {
            key: "num_key_value_heads".to_string(),
            problem: format!(
                "`0`: attention needs at least one key/value head; accepted: a divisor of num_attention_heads ({heads}), such as `{heads}` or `1`"
            ),
        });
    }
    Ok(())
}

impl Projections {
    fn params(&self, hidden: u64) -> Result<Params> {
        check_key_value_heads(self.heads, self.kv_heads)?;
        let queries = product(&[self.heads, self.head_dim])?;
        let keys = product(&[self.kv_heads, self.head_dim])?;
        let mut params = Params::new();
        params.linear("q_proj", hidden, queries, self.qkv_bias, Role::Attention)?;
        params.linear("k_proj", hidden, keys, self.qkv_bias, Role::Attention)?;
        params.linear("v_proj", hidden, keys, self.qkv_bias, Role::Attention)?;
        params.linear(
            self.output,
            queries,
            hidden,
            self.output_bias,
            Role::Attention,
        )?;
        match self.qk_norm {
            QkNorm::None => {}
            QkNorm::HeadDim => {
                params.norm("q_norm", vec![self.head_dim], Norm::Weight)?;
                params.norm("k_norm", vec![self.head_dim], Norm::Weight)?;
            }
            QkNorm::Projection => {
                params.norm("q_norm", vec![queries], Norm::Weight)?;
                params.norm("k_norm", vec![keys], Norm::Weight)?;
            }
            QkNorm::PerHead => {
                params.norm("q_norm", vec![self.heads, self.head_dim], Norm::Weight)?;
                params.norm("k_norm", vec![self.kv_heads, self.head_dim], Norm::Weight)?;
            }
            QkNorm::PerHeadModules => {
                // One module per head: bound the count before building them.
                if sum(&[self.heads, self.kv_heads])? > MAX_TENSORS {
                    return Err(Error::InvalidConfig {
                        key: "num_attention_heads".to_string(),
                        problem: format!(
                            "`{}` heads with one norm module each would make more than {MAX_TENSORS} parameter tensors; accepted: a model of at most {MAX_TENSORS} tensors",
                            self.heads
                        ),
                    });
                }
                for (module, heads) in [("q_layernorm", self.heads), ("k_layernorm", self.kv_heads)]
                {
                    for head in 0..heads {
                        params.norm(
                            &format!("{module}.norms.{head}"),
                            vec![self.head_dim],
                            Norm::Weight,
                        )?;
                    }
                }
            }
            QkNorm::LayerNorm { dim } => {
                params.norm("q_layernorm", vec![dim], Norm::WeightAndBias)?;
                params.norm("k_layernorm", vec![dim], Norm::WeightAndBias)?;
            }
        }
        Ok(params)
    }
}

impl LatentAttention {
    fn params(&self, hidden: u64) -> Result<Params> {
        let query_width = product(&[
            self.heads,
            sum(&[self.qk_nope_head_dim, self.qk_rope_head_dim])?,
        ])?;
        let mut params = Params::new();
        match self.q_lora_rank {
            None => params.linear("q_proj", hidden, query_width, false, Role::Attention)?,
            Some(rank) => {
                params.linear("q_a_proj", hidden, rank, self.bias, Role::Attention)?;
                params.norm("q_a_layernorm", vec![rank], Norm::Weight)?;
                params.linear("q_b_proj", rank, query_width, false, Role::Attention)?;
            }
        }
        let compressed = sum(&[self.kv_lora_rank, self.qk_rope_head_dim])?;
        params.linear(
            "kv_a_proj_with_mqa",
            hidden,
            compressed,
            self.bias,
            Role::Attention,
        )?;
        params.norm("kv_a_layernorm", vec![self.kv_lora_rank], Norm::Weight)?;
        let key_value_width =
            product(&[self.heads, sum(&[self.qk_nope_head_dim, self.v_head_dim])?])?;
        params.linear(
            "kv_b_proj",
            self.kv_lora_rank,
            key_value_width,
            false,
            Role::Attention,
        )?;
        let values = product(&[self.heads, self.v_head_dim])?;
        params.linear("o_proj", values, hidden, self.bias, Role::Attention)?;
        Ok(params)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(attention: &Attention, hidden: u64) -> Vec<(String, Vec<u64>, Role)> {
        attention
            .params(hidden)
            .unwrap()
            .iter()
            .map(|p| (p.name.clone(), p.shape.dims().to_vec(), p.role))
            .collect()
    }

    fn projections(qk_norm: QkNorm) -> Projections {
        Projections {
            heads: 8,
            kv_heads: 2,
            head_dim: 16,
            qkv_bias: true,
            output_bias: false,
            output: "o_proj",
            qk_norm,
        }
    }

    #[test]
    fn grouped_query_projections_with_head_norms() {
        let listed = listed(&Attention::Separate(projections(QkNorm::HeadDim)), 64);
        let expected: Vec<(String, Vec<u64>, Role)> = vec![
            ("q_proj.weight".into(), vec![128, 64], Role::Attention),
            ("q_proj.bias".into(), vec![128], Role::Attention),
            ("k_proj.weight".into(), vec![32, 64], Role::Attention),
            ("k_proj.bias".into(), vec![32], Role::Attention),
            ("v_proj.weight".into(), vec![32, 64], Role::Attention),
            ("v_proj.bias".into(), vec![32], Role::Attention),
            ("o_proj.weight".into(), vec![64, 128], Role::Attention),
            ("q_norm.weight".into(), vec![16], Role::Norm),
            ("k_norm.weight".into(), vec![16], Role::Norm),
        ];
        assert_eq!(listed, expected);
    }

    #[test]
    fn per_head_norm_variants() {
        let shapes = |qk_norm| {
            listed(&Attention::Separate(projections(qk_norm)), 64)
                .into_iter()
                .filter(|(_, _, role)| *role == Role::Norm)
                .map(|(name, dims, _)| (name, dims))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            shapes(QkNorm::Projection)[1],
            ("k_norm.weight".into(), vec![32])
        );
        assert_eq!(
            shapes(QkNorm::PerHead)[0],
            ("q_norm.weight".into(), vec![8, 16])
        );
        let modules = shapes(QkNorm::PerHeadModules);
        assert_eq!(modules.len(), 8 + 2);
        assert_eq!(modules[9], ("k_layernorm.norms.1.weight".into(), vec![16]));
        assert_eq!(shapes(QkNorm::LayerNorm { dim: 8 }).len(), 4);
        let huge = Projections {
            heads: 4_000_000_000,
            ..projections(QkNorm::PerHeadModules)
        };
        assert!(matches!(
            Attention::Separate(huge).params(64),
            Err(Error::InvalidConfig { key, .. }) if key == "num_attention_heads"
        ));
    }

    #[test]
    fn fused_and_latent_attention() {
        let fused = Attention::Fused {
            heads: 4,
            kv_heads: 2,
            head_dim: 16,
        };
        assert_eq!(
            listed(&fused, 64)[1],
            ("qkv_proj.weight".into(), vec![128, 64], Role::Attention)
        );
        let latent = Attention::Latent(LatentAttention {
            heads: 4,
            q_lora_rank: Some(32),
            kv_lora_rank: 16,
            qk_nope_head_dim: 16,
            qk_rope_head_dim: 8,
            v_head_dim: 16,
            bias: false,
        });
        let names: Vec<_> = listed(&latent, 64)
            .into_iter()
            .map(|(n, d, _)| (n, d))
            .collect();
        assert_eq!(
            names,
            vec![
                ("q_a_proj.weight".into(), vec![32, 64]),
                ("q_a_layernorm.weight".into(), vec![32]),
                ("q_b_proj.weight".into(), vec![96, 32]),
                ("kv_a_proj_with_mqa.weight".into(), vec![24, 64]),
                ("kv_a_layernorm.weight".into(), vec![16]),
                ("kv_b_proj.weight".into(), vec![128, 16]),
                ("o_proj.weight".into(), vec![64, 64]),
            ]
        );
    }
}
