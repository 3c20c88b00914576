//! litgpt's separate output head: a model whose config ties `lm_head` to
//! the token embedding is, in litgpt, two tensors.
//!
//! litgpt's `GPT.__init__` always builds `self.lm_head = nn.Linear(
//! config.n_embd, config.padded_vocab_size, ...)` next to
//! `transformer.wte` (`litgpt/model.py` 0.5.13, line 28) and ties nothing;
//! `convert_hf_checkpoint` fills a checkpoint without `lm_head.weight` (a
//! tied Llama 3.2, Gemma) with a copy of the embedding
//! (`litgpt/scripts/convert_hf_checkpoint.py`, lines 205-206 and 273-274:
//! `state_dict["lm_head.weight"] = state_dict["transformer.wte.weight"]`).
//! So under `--implementation litgpt` the inventory gains a `V x h` head.

use crate::error::Result;
use crate::model::{Model, Role, Tensor};

/// The name litgpt's head is priced under (transformers' spelling, which
/// LoRA targets and the quantization rules read).
const HEAD: &str = "lm_head.weight";

/// The note the report carries when the head was added.
const NOTE: &str = "implementation litgpt: the tied output head is its own V x h tensor (litgpt's GPT always builds lm_head; convert_hf_checkpoint copies the embedding into it)";

/// `model` with its tied head made a tensor of its own, as litgpt builds
/// it; a model without a tied head (or without shapes) is returned as is.
pub fn with_separate_head(mut model: Model) -> Result<Model> {
    let Some(dims) = model.dimensions.as_mut() else {
        return Ok(model);
    };
    if !dims.tied_embeddings || model.tensors.iter().any(|t| t.role == Role::OutputHead) {
        return Ok(model);
    }
    // The token embedding is the embedding tensor with V rows.
    let vocab = dims.vocab;
    let Some(embedding) = model
        .tensors
        .iter()
        .find(|t| t.role == Role::Embedding && t.shape.dims().first() == Some(&vocab))
    else {
        return Ok(model);
    };
    let mut head = Tensor::new(HEAD, embedding.shape.clone(), Role::OutputHead);
    head.trainable = embedding.trainable;
    dims.tied_embeddings = false;
    model.tensors.push(head);
    model.notes.push(NOTE.to_string());
    Ok(model)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::load_model;

    #[test]
    fn a_tied_head_becomes_a_tensor_and_an_untied_one_stays() {
        let tied = load_model("llama-3.2-1b").unwrap();
        let before = tied.total_parameters().unwrap().0;
        let separate = with_separate_head(tied).unwrap();
        let head = separate.tensors.iter().find(|t| t.name == HEAD).unwrap();
        assert_eq!(head.shape.dims(), &[128_256, 2048]);
        assert_eq!(
            separate.total_parameters().unwrap().0,
            before + 128_256 * 2048
        );
        let untied = load_model("llama-3.1-8b").unwrap();
        let count = untied.tensors.len();
        assert_eq!(with_separate_head(untied).unwrap().tensors.len(), count);
    }
}
