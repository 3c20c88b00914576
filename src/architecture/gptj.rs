//! GPT-J, following transformers' `models/gptj/configuration_gptj.py`
//! (`GPTJConfig`) and `modeling_gptj.py` (`GPTJForCausalLM`).

use super::config::{Config, exact_ratio};
use super::decoder::{Decoder, Layers};
use super::params::{Norm, Params, product};
use crate::error::Result;
use crate::model::Role;

/// `GPTJForCausalLM`: bias-free q, k, v and `out_proj`, one LayerNorm per
/// layer (attention and MLP in parallel), an MLP `n_inner` wide (`4 x
/// n_embd` when absent) with biases, and an `lm_head` with a bias that
/// stays when the weight is tied. Same key aliases as GPT-2.
pub fn describe(config: &Config) -> Result<Decoder> {
    let vocab = config.size("vocab_size", 50400)?;
    let hidden = config.size_of_first(&["hidden_size", "n_embd"], 4096)?;
    let heads = config.size_of_first(&["num_attention_heads", "n_head"], 16)?;
    exact_ratio(hidden, heads, "n_head")?;
    let inner = match config.optional_size("n_inner", None)? {
        Some(inner) => inner,
        None => product(&[4, hidden])?,
    };

    let mut before_layers = Params::new();
    before_layers.embedding("transformer.wte", vocab, hidden)?;

    let mut layer = Params::new();
    layer.norm("ln_1", vec![hidden], Norm::WeightAndBias)?;
    for projection in ["attn.k_proj", "attn.v_proj", "attn.q_proj", "attn.out_proj"] {
        layer.linear(projection, hidden, hidden, false, Role::Attention)?;
    }
    layer.linear("mlp.fc_in", hidden, inner, true, Role::Mlp)?;
    layer.linear("mlp.fc_out", inner, hidden, true, Role::Mlp)?;

    let mut after_layers = Params::new();
    after_layers.norm("transformer.ln_f", vec![hidden], Norm::WeightAndBias)?;
    after_layers.output_head(
        vocab,
        hidden,
        config.flag("tie_word_embeddings", false)?,
        true,
    )?;

    let layers = config.size_of_first(&["num_hidden_layers", "n_layer"], 28)?;
    Ok(Decoder {
        before_layers,
        layers: Layers::uniform("transformer.h", layers, "n_layer", layer),
        after_layers,
    })
}
