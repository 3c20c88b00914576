//! What placement needs to know of a model as a whole: how many layers and
//! experts its tensor names reveal.

use crate::model::{Model, Role, Tensor};

/// Layers and experts of a model, read from its tensor names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Decoder layers (`layers.N.`, `h.N.`, `blocks.N.`); 0 when the names show none.
    pub layers: u64,
    /// Routed experts per MoE layer for per-expert names (`experts.N.`); 0 when fused or absent.
    pub experts: u64,
    /// Whether linear weights are stored `[in, out]` (GPT-2's Conv1D).
    pub transposed_linears: bool,
    /// Whether the output head is tied to the token embedding (no head tensor of its own).
    pub tied_head: bool,
}

impl Layout {
    /// The layout of `model`.
    pub fn of(model: &Model) -> Layout {
        let max_index = |find: fn(&str) -> Option<u64>| {
            model
                .tensors
                .iter()
                .filter_map(|t| find(&t.name))
                .max()
                .map_or(0, |i| i + 1)
        };
        let has_head = model.tensors.iter().any(|t| t.role == Role::OutputHead);
        let has_embedding = model.tensors.iter().any(is_token_embedding);
        Layout {
            layers: max_index(layer_of),
            experts: max_index(expert_of),
            transposed_linears: model.model_type.as_deref() == Some("gpt2"),
            tied_head: model.shapes_known && has_embedding && !has_head,
        }
    }
}

/// The index after `.layers.`, `.h.`, `.blocks.` or `.layer.` in a name.
pub fn layer_of(name: &str) -> Option<u64> {
    index_after(name, &["layers.", "h.", "blocks.", "layer."])
}

/// The index after `experts.` in a per-expert tensor name.
pub fn expert_of(name: &str) -> Option<u64> {
    index_after(name, &["experts."])
}

fn index_after(name: &str, markers: &[&str]) -> Option<u64> {
    // Allocation-free: placement reads every tensor's name for every layout priced.
    let mut parts = name.split('.');
    let mut word = parts.next()?;
    for index in parts {
        if markers.iter().any(|m| m.trim_end_matches('.') == word)
            && let Ok(index) = index.parse()
        {
            return Some(index);
        }
        word = index;
    }
    None
}

/// Whether a tensor is the token embedding (the one a tied head shares).
pub fn is_token_embedding(tensor: &Tensor) -> bool {
    tensor.role == Role::Embedding
        && [
            "embed_tokens",
            "wte",
            "word_embeddings",
            "embed_in",
            "tok_embeddings",
        ]
        .iter()
        .any(|n| tensor.name.contains(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_from_names() {
        assert_eq!(
            layer_of("model.layers.12.self_attn.q_proj.weight"),
            Some(12)
        );
        assert_eq!(layer_of("transformer.h.3.attn.c_attn.weight"), Some(3));
        assert_eq!(layer_of("model.embed_tokens.weight"), None);
        assert_eq!(
            expert_of("model.layers.0.block_sparse_moe.experts.7.w1.weight"),
            Some(7)
        );
        assert_eq!(expert_of("model.layers.0.mlp.experts.gate_up_proj"), None);
    }
}
