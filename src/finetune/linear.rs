//! The linear layers of an inventory: what LoRA targets and bitsandbytes
//! quantizes.

use std::collections::BTreeMap;

use crate::model::{Model, Role, Tensor};

/// Names of `nn.Embedding` modules, which hold 2-D weights but are not linear.
const EMBEDDINGS: &[&str] = &[
    "embed_tokens",
    "embed_positions",
    "wte",
    "wpe",
    "word_embeddings",
    "position_embeddings",
    "embed_in",
    "tok_embeddings",
    // CLIP's and SigLIP's towers, and Mllama's tiled position embeddings.
    "position_embedding",
    "token_embedding",
    "tile_embedding",
    "embedding",
];

/// One linear module: `model.layers.0.self_attn.q_proj`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Linear {
    /// The module's name, without `.weight`.
    pub module: String,
    /// Index of its weight in the inventory.
    pub weight: usize,
    /// Index of its bias, if it has one.
    pub bias: Option<usize>,
    /// Input features.
    pub in_features: u64,
    /// Output features.
    pub out_features: u64,
    /// Whether it is the output head (`lm_head`), which `all-linear` skips.
    pub output_head: bool,
}

/// The module a parameter belongs to: its name without the last component.
pub fn module_of(name: &str) -> &str {
    name.rsplit_once('.').map_or(name, |(module, _)| module)
}

/// Whether a module name matches a peft target: equal, or ending in `.target`.
pub fn matches(module: &str, target: &str) -> bool {
    module == target || module.ends_with(&format!(".{target}"))
}

/// Every linear module: a 2-D `.weight` that is not an embedding or a norm.
/// GPT-2's Conv1D stores weights `[in, out]`, every other linear `[out, in]`.
pub fn linears(model: &Model) -> Vec<Linear> {
    let transposed = model.model_type.as_deref() == Some("gpt2");
    let biases: BTreeMap<&str, usize> = model
        .tensors
        .iter()
        .enumerate()
        .filter(|(_, t)| t.name.ends_with(".bias"))
        .map(|(i, t)| (module_of(&t.name), i))
        .collect();
    model
        .tensors
        .iter()
        .enumerate()
        .filter(|(_, t)| is_linear_weight(t))
        .map(|(i, t)| {
            let module = module_of(&t.name).to_string();
            let (rows, columns) = (t.shape.dims()[0], t.shape.dims()[1]);
            let (out_features, in_features) = if transposed {
                (columns, rows)
            } else {
                (rows, columns)
            };
            Linear {
                bias: biases.get(module.as_str()).copied(),
                weight: i,
                in_features,
                out_features,
                output_head: t.role == Role::OutputHead,
                module,
            }
        })
        .collect()
}

/// Whether a tensor is the weight of an `nn.Linear` (or Conv1D). MoE routers
/// are their own modules in transformers 5 (`MixtralTopKRouter`), not linears;
/// qwen2_moe's `shared_expert_gate` is a linear.
fn is_linear_weight(tensor: &Tensor) -> bool {
    let module = module_of(&tensor.name);
    tensor.name.ends_with(".weight")
        && tensor.shape.dims().len() == 2
        && tensor.role != Role::Norm
        && (tensor.role != Role::Router || module.ends_with("shared_expert_gate"))
        && !EMBEDDINGS
            .iter()
            .any(|e| module.rsplit('.').next() == Some(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_names_and_matching() {
        assert_eq!(
            module_of("model.layers.0.self_attn.q_proj.weight"),
            "model.layers.0.self_attn.q_proj"
        );
        assert!(matches("model.layers.0.self_attn.q_proj", "q_proj"));
        assert!(matches(
            "model.layers.0.self_attn.q_proj",
            "self_attn.q_proj"
        ));
        assert!(!matches("model.layers.0.self_attn.q_proj", "_proj"));
    }
}
