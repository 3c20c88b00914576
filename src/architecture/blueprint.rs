//! The decoder most architectures share, described as data.
//!
//! transformers' llama-style models (`LlamaForCausalLM` and its many
//! copies) differ only in a few choices: the attention block, the
//! feed-forward block (and which layers use experts), which norms a layer
//! has and of what kind, and whether `lm_head` is tied to the embedding.
//! An architecture file reads its config into a [`Blueprint`]; this file
//! lays it out as `model.embed_tokens`, `model.layers.{i}.self_attn`,
//! `model.layers.{i}.mlp`, the layer norms, the final norm and `lm_head`.

use super::attention::{Attention, QkNorm};
use super::decoder::{Decoder, Layers, Placement};
use super::dimensions::{
    Dimensions, Dropout, EagerSoftmax, LatentDims, LayerLayout, Linears, MixtureOfExperts, MlpKind,
    NormKind, Positions, QkNormKind, QkvLayout, Router, SharedExpert, Softcap,
};
use super::feed_forward::{Experts, FeedForward};
use super::params::{Norm, Params};
use crate::error::Result;

/// A llama-style causal LM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blueprint {
    /// Vocabulary size: rows of `embed_tokens` and `lm_head`.
    pub vocab: u64,
    /// Model width.
    pub hidden: u64,
    /// Number of decoder layers.
    pub layers: u64,
    /// The attention block of every layer.
    pub attention: Attention,
    /// The feed-forward block of every layer `sparse` does not claim.
    pub feed_forward: FeedForward,
    /// A mixture-of-experts block and the layers that use it instead.
    pub sparse: Option<(FeedForward, Placement)>,
    /// A layer's norms over the hidden size, in registration order.
    pub layer_norms: &'static [&'static str],
    /// The kind of every norm over the hidden size, final one included.
    pub norm: Norm,
    /// The final norm's module path: `model.norm`.
    pub final_norm: &'static str,
    /// Whether `lm_head.weight` is the embedding's tensor.
    pub tied: bool,
    /// Whether `lm_head` has a bias.
    pub head_bias: bool,
}

/// The norm names of a llama layer.
pub const PRE_NORMS: &[&str] = &["input_layernorm", "post_attention_layernorm"];

/// The norm name of a layer whose attention and MLP read one norm's
/// output in parallel (Phi).
pub const PARALLEL_NORM: &[&str] = &["input_layernorm"];

/// The norm names of a Gemma 2 and Gemma 3 layer: around both blocks.
pub const SANDWICH_NORMS: &[&str] = &[
    "input_layernorm",
    "post_attention_layernorm",
    "pre_feedforward_layernorm",
    "post_feedforward_layernorm",
];

impl Blueprint {
    /// The model's layout.
    pub fn decoder(&self) -> Result<Decoder> {
        let mut before_layers = Params::new();
        before_layers.embedding("model.embed_tokens", self.vocab, self.hidden)?;
        let regular = self.layer(&self.feed_forward)?;
        let alternative = match &self.sparse {
            Some((feed_forward, placement)) => Some((self.layer(feed_forward)?, placement.clone())),
            None => None,
        };
        let mut after_layers = Params::new();
        after_layers.norm(self.final_norm, vec![self.hidden], self.norm)?;
        after_layers.output_head(self.vocab, self.hidden, self.tied, self.head_bias)?;
        Ok(Decoder {
            before_layers,
            layers: Layers {
                alternative,
                ..Layers::uniform("model.layers", self.layers, "num_hidden_layers", regular)
            },
            after_layers,
        })
    }

    /// The sizes and kinds activation memory needs, with the defaults of a
    /// llama decoder (rotary over the whole head, no dropout, no
    /// soft-capping) for the architecture file to override. `routing`
    /// says how the experts, if any, pick tokens; without it the experts
    /// are left out.
    pub fn dimensions(&self, model_type: &str, routing: Option<Routing>) -> Dimensions {
        let (heads, kv_heads, head_dim, qkv, qk_norm, attention_input, attention_output) =
            match &self.attention {
                Attention::Separate(p) => (
                    p.heads,
                    p.kv_heads,
                    p.head_dim,
                    QkvLayout::Separate,
                    match p.qk_norm {
                        QkNorm::None => QkNormKind::None,
                        QkNorm::Projection => QkNormKind::WholeProjection,
                        QkNorm::HeadDim
                        | QkNorm::PerHead
                        | QkNorm::PerHeadModules
                        | QkNorm::LayerNorm { .. } => QkNormKind::PerHead,
                    },
                    vec!["q_proj", "k_proj", "v_proj"],
                    p.output,
                ),
                Attention::Fused {
                    heads,
                    kv_heads,
                    head_dim,
                } => (
                    *heads,
                    *kv_heads,
                    *head_dim,
                    QkvLayout::Fused,
                    QkNormKind::None,
                    vec!["qkv_proj"],
                    "o_proj",
                ),
                Attention::Latent(latent) => (
                    latent.heads,
                    latent.heads,
                    latent.qk_rope_head_dim,
                    QkvLayout::Latent(LatentDims {
                        q_lora_rank: latent.q_lora_rank,
                        kv_lora_rank: latent.kv_lora_rank,
                        qk_nope_head_dim: latent.qk_nope_head_dim,
                        qk_rope_head_dim: latent.qk_rope_head_dim,
                        v_head_dim: latent.v_head_dim,
                    }),
                    QkNormKind::None,
                    vec!["q_proj", "q_a_proj", "kv_a_proj_with_mqa"],
                    "o_proj",
                ),
            };
        let (intermediate, mlp, mlp_input, mlp_output) = match &self.feed_forward {
            FeedForward::Gated { intermediate, .. } => (
                *intermediate,
                MlpKind::Gated,
                vec!["gate_proj", "up_proj"],
                "down_proj",
            ),
            FeedForward::FusedGated { intermediate } => (
                *intermediate,
                MlpKind::Gated,
                vec!["gate_up_proj"],
                "down_proj",
            ),
            FeedForward::Plain {
                intermediate,
                up,
                down,
                ..
            } => (*intermediate, MlpKind::Gelu, vec![*up], *down),
            FeedForward::Experts(experts) => (
                experts.intermediate,
                MlpKind::Gated,
                vec!["gate_proj", "up_proj"],
                "down_proj",
            ),
        };
        let sparse = match (&self.feed_forward, &self.sparse) {
            (FeedForward::Experts(experts), _) => Some((experts, Placement::From(0))),
            (_, Some((FeedForward::Experts(experts), placement))) => {
                Some((experts, placement.clone()))
            }
            _ => None,
        };
        let experts = sparse
            .zip(routing)
            .map(|((experts, layers), routing)| mixture(experts, layers, routing));
        Dimensions {
            model_type: model_type.to_string(),
            layers: self.layers,
            hidden: self.hidden,
            intermediate,
            heads,
            kv_heads,
            head_dim,
            vocab: self.vocab,
            tied_embeddings: self.tied,
            norm: match self.norm {
                Norm::Weight => NormKind::RmsNorm,
                Norm::WeightAndBias | Norm::Parameterless => NormKind::LayerNorm,
            },
            layout: if self.layer_norms == SANDWICH_NORMS {
                LayerLayout::Sandwich
            } else if self.layer_norms == PRE_NORMS {
                LayerLayout::PreNorm
            } else if self.layer_norms == PARALLEL_NORM {
                LayerLayout::ParallelSharedNorm
            } else {
                LayerLayout::PostNorm
            },
            qkv,
            qk_norm,
            softmax: EagerSoftmax::Fp32WithCast,
            mlp,
            experts,
            positions: Positions::Rotary {
                width: head_dim,
                fp32_tables: false,
                tables: 1,
                concatenated: false,
            },
            dropout: Dropout::default(),
            softcap: Softcap::default(),
            mask_positional: false,
            linears: Linears {
                attention_input,
                attention_output,
                mlp_input,
                mlp_output,
                conv1d: false,
            },
            encoder: None,
            images: None,
            encoder_decoder: None,
            state_space: None,
        }
    }

    fn layer(&self, feed_forward: &FeedForward) -> Result<Params> {
        let mut layer = Params::new();
        layer.mount("self_attn", self.attention.params(self.hidden)?);
        layer.mount("mlp", feed_forward.params(self.hidden)?);
        for name in self.layer_norms {
            layer.norm(name, vec![self.hidden], self.norm)?;
        }
        Ok(layer)
    }
}

/// How a mixture of experts routes tokens, which its tensors do not show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Routing {
    /// Experts per token (`num_experts_per_tok`).
    pub top_k: u64,
    /// How the router scores and weights them.
    pub router: Router,
}

fn mixture(experts: &Experts, layers: Placement, routing: Routing) -> MixtureOfExperts {
    MixtureOfExperts {
        experts: experts.count,
        top_k: routing.top_k,
        intermediate: experts.intermediate,
        shared: match &experts.shared {
            None => SharedExpert::None,
            Some(shared) if shared.gate => SharedExpert::Gated {
                intermediate: shared.intermediate,
            },
            Some(shared) => SharedExpert::Plain {
                intermediate: shared.intermediate,
            },
        },
        router: routing.router,
        layers,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::architecture::attention::{Projections, QkNorm};
    use crate::model::Role;

    #[test]
    fn a_tiny_llama_is_laid_out_with_roles() {
        let blueprint = Blueprint {
            vocab: 10,
            hidden: 4,
            layers: 1,
            attention: Attention::Separate(Projections {
                heads: 2,
                kv_heads: 2,
                head_dim: 2,
                qkv_bias: false,
                output_bias: false,
                output: "o_proj",
                qk_norm: QkNorm::None,
            }),
            feed_forward: FeedForward::Gated {
                intermediate: 8,
                bias: false,
            },
            sparse: None,
            layer_norms: PRE_NORMS,
            norm: Norm::Weight,
            final_norm: "model.norm",
            tied: false,
            head_bias: false,
        };
        let tensors = blueprint.decoder().unwrap().into_tensors().unwrap();
        let listed: Vec<_> = tensors.iter().map(|t| (t.name.as_str(), t.role)).collect();
        assert_eq!(
            listed,
            [
                ("model.embed_tokens.weight", Role::Embedding),
                ("model.layers.0.self_attn.q_proj.weight", Role::Attention),
                ("model.layers.0.self_attn.k_proj.weight", Role::Attention),
                ("model.layers.0.self_attn.v_proj.weight", Role::Attention),
                ("model.layers.0.self_attn.o_proj.weight", Role::Attention),
                ("model.layers.0.mlp.gate_proj.weight", Role::Mlp),
                ("model.layers.0.mlp.up_proj.weight", Role::Mlp),
                ("model.layers.0.mlp.down_proj.weight", Role::Mlp),
                ("model.layers.0.input_layernorm.weight", Role::Norm),
                ("model.layers.0.post_attention_layernorm.weight", Role::Norm),
                ("model.norm.weight", Role::Norm),
                ("lm_head.weight", Role::OutputHead),
            ]
        );
        assert!(
            tensors
                .iter()
                .all(|t| t.trainable && t.stored_dtype.is_none())
        );
    }
}
