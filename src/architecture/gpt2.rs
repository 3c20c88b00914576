//! GPT-2, following transformers' `models/gpt2/configuration_gpt2.py`
//! (`GPT2Config`) and `modeling_gpt2.py` (`GPT2LMHeadModel`).

use super::config::{Config, exact_ratio};
use super::decoder::{Decoder, Layers};
use super::params::{Norm, Params, product};
use crate::error::Result;
use crate::model::Role;

/// `GPT2LMHeadModel`: token and learned position embeddings, layers of
/// `Conv1D` projections (weights stored [in, out]) with biases and
/// LayerNorms, optional cross-attention (`add_cross_attention`), and
/// `lm_head` tied by default. The generic key names (`hidden_size`,
/// `num_hidden_layers`, ...) are `attribute_map` aliases that override
/// `n_embd`, `n_layer`, ... when present. The MLP is `n_inner` wide,
/// `4 x n_embd` when absent or `null`.
pub fn describe(config: &Config) -> Result<Decoder> {
    let vocab = config.size("vocab_size", 50257)?;
    let hidden = config.size_of_first(&["hidden_size", "n_embd"], 768)?;
    let positions = config.size_of_first(&["max_position_embeddings", "n_positions"], 1024)?;
    let heads = config.size_of_first(&["num_attention_heads", "n_head"], 12)?;
    exact_ratio(hidden, heads, "n_head")?;
    let inner = match config.optional_size("n_inner", None)? {
        Some(inner) => inner,
        None => product(&[4, hidden])?,
    };

    let mut before_layers = Params::new();
    before_layers.embedding("transformer.wte", vocab, hidden)?;
    before_layers.embedding("transformer.wpe", positions, hidden)?;

    let mut layer = Params::new();
    layer.norm("ln_1", vec![hidden], Norm::WeightAndBias)?;
    layer.conv1d(
        "attn.c_attn",
        hidden,
        product(&[3, hidden])?,
        Role::Attention,
    )?;
    layer.conv1d("attn.c_proj", hidden, hidden, Role::Attention)?;
    layer.norm("ln_2", vec![hidden], Norm::WeightAndBias)?;
    if config.flag("add_cross_attention", false)? {
        layer.conv1d(
            "crossattention.c_attn",
            hidden,
            product(&[2, hidden])?,
            Role::Attention,
        )?;
        layer.conv1d("crossattention.q_attn", hidden, hidden, Role::Attention)?;
        layer.conv1d("crossattention.c_proj", hidden, hidden, Role::Attention)?;
        layer.norm("ln_cross_attn", vec![hidden], Norm::WeightAndBias)?;
    }
    layer.conv1d("mlp.c_fc", hidden, inner, Role::Mlp)?;
    layer.conv1d("mlp.c_proj", inner, hidden, Role::Mlp)?;

    let mut after_layers = Params::new();
    after_layers.norm("transformer.ln_f", vec![hidden], Norm::WeightAndBias)?;
    after_layers.output_head(
        vocab,
        hidden,
        config.flag("tie_word_embeddings", true)?,
        false,
    )?;

    let layers = config.size_of_first(&["num_hidden_layers", "n_layer"], 12)?;
    Ok(Decoder {
        before_layers,
        layers: Layers::uniform("transformer.h", layers, "n_layer", layer),
        after_layers,
    })
}
