//! One parameter tensor of a model's inventory.

use std::fmt;

use serde::Serialize;

use super::Quantization;
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

impl Role {
    /// Every role, in the order reports list them.
    pub const ALL: [Role; 8] = [
        Role::Embedding,
        Role::Attention,
        Role::Mlp,
        Role::Experts,
        Role::Router,
        Role::Norm,
        Role::OutputHead,
        Role::Other,
    ];

    /// The role a checkpoint tensor plays, guessed from its name the way
    /// HuggingFace models name their modules (`model.embed_tokens.weight`,
    /// `model.layers.0.mlp.experts.3.w1.weight`, `lm_head.weight`, ...).
    pub fn from_name(name: &str) -> Role {
        let name = name.to_ascii_lowercase();
        let has = |parts: &[&str]| parts.iter().any(|p| name.contains(p));
        if has(&["lm_head", "embed_out", "output.weight"]) && !has(&["layers.", ".h."]) {
            Role::OutputHead
        } else if has(&["embed", "wte", "wpe", "word_embeddings", "tok_embeddings"]) {
            Role::Embedding
        } else if has(&["norm", "ln_", "layernorm", "ln_f"]) {
            Role::Norm
        } else if has(&["experts"]) {
            Role::Experts
        } else if has(&[
            "router",
            "mlp.gate.",
            "block_sparse_moe.gate",
            "shared_expert_gate",
        ]) {
            Role::Router
        } else if has(&[
            "attn",
            "attention",
            "q_proj",
            "k_proj",
            "v_proj",
            "o_proj",
            "qkv",
        ]) {
            Role::Attention
        } else if has(&[
            "mlp",
            "ffn",
            "feed_forward",
            "fc1",
            "fc2",
            "c_fc",
            "gate_proj",
            "up_proj",
            "down_proj",
        ]) {
            Role::Mlp
        } else {
            Role::Other
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
    /// The dtype training keeps it in when not the recipe's (peft keeps LoRA
    /// adapters in fp32 under a half-precision base).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub training_dtype: Option<DType>,
    /// How a frozen base weight is stored when quantized (QLoRA).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quantization: Option<Quantization>,
    /// Whether the optimizer holds it, when trainable. A trainable tensor no
    /// optimizer holds (litgpt's `StableEmbedding`, swapped in after the
    /// optimizer is built) has a gradient but no states, and its gradient
    /// is never zeroed: it stays on the device across steps.
    #[serde(skip_serializing_if = "is_true")]
    pub optimized: bool,
}

fn is_true(value: &bool) -> bool {
    *value
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
            training_dtype: None,
            quantization: None,
            optimized: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_from_huggingface_names() {
        let cases = [
            ("model.embed_tokens.weight", Role::Embedding),
            ("transformer.wte.weight", Role::Embedding),
            ("lm_head.weight", Role::OutputHead),
            ("model.layers.0.self_attn.q_proj.weight", Role::Attention),
            ("transformer.h.0.attn.c_attn.weight", Role::Attention),
            ("model.layers.0.mlp.gate_proj.weight", Role::Mlp),
            ("transformer.h.0.mlp.c_fc.bias", Role::Mlp),
            (
                "model.layers.0.block_sparse_moe.experts.3.w1.weight",
                Role::Experts,
            ),
            ("model.layers.0.block_sparse_moe.gate.weight", Role::Router),
            ("model.layers.0.mlp.gate.weight", Role::Router),
            ("model.layers.0.input_layernorm.weight", Role::Norm),
            ("model.norm.weight", Role::Norm),
            ("transformer.ln_f.weight", Role::Norm),
            ("something.else", Role::Other),
        ];
        for (name, role) in cases {
            assert_eq!(Role::from_name(name), role, "{name}");
        }
    }
}
