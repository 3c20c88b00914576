//! One parameter tensor of a model's inventory.

use std::fmt;

use serde::Serialize;

use super::Shape;
use crate::dtype::DType;

/// What part of the network a tensor belongs to; reports group by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Token and position embeddings.
    Embedding,
    /// Attention projections.
    Attention,
    /// Dense MLP (feed-forward) weights.
    Mlp,
    /// Mixture-of-experts expert weights.
    Experts,
    /// MoE router (gate) weights.
    Router,
    /// Normalization scales and biases.
    Norm,
    /// The output head (`lm_head`), when not tied to the embedding.
    OutputHead,
    /// Anything else, including the flat vector of a bare `--params`.
    Other,
}

impl Role {
    /// The lowercase name used in tables and JSON.
    pub const fn name(self) -> &'static str {
        match self {
            Role::Embedding => "embedding",
            Role::Attention => "attention",
            Role::Mlp => "mlp",
            Role::Experts => "experts",
            Role::Router => "router",
            Role::Norm => "norm",
            Role::OutputHead => "output_head",
            Role::Other => "other",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A named parameter tensor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Tensor {
    /// The name as the framework spells it: `model.layers.0.self_attn.q_proj.weight`.
    pub name: String,
    /// Its dimensions.
    pub shape: Shape,
    /// The part of the network it belongs to.
    pub role: Role,
    /// Whether training computes a gradient for it.
    pub trainable: bool,
    /// The dtype a checkpoint stores it in, when read from one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stored_dtype: Option<DType>,
}

impl Tensor {
    /// A trainable tensor with no stored dtype.
    pub fn new(name: impl Into<String>, shape: Shape, role: Role) -> Tensor {
        Tensor {
            name: name.into(),
            shape,
            role,
            trainable: true,
            stored_dtype: None,
        }
    }
}
