//! OPT, following transformers' `models/opt/configuration_opt.py`
//! (`OPTConfig`) and `modeling_opt.py` (`OPTForCausalLM`).

use super::config::{Config, exact_ratio};
use super::decoder::{Decoder, Layers};
use super::params::{Norm, Params, sum};
use crate::error::Result;
use crate::model::Role;

/// Rows OPT's learned position embedding keeps beyond
/// `max_position_embeddings` (`OPTLearnedPositionalEmbedding.offset`).
const POSITION_OFFSET: u64 = 2;

/// `OPTForCausalLM`: embeddings `word_embed_proj_dim` wide (default
/// `hidden_size`) with `project_in`/`project_out` when that differs, learned
/// positions, q/k/v/`out_proj` and `fc1`/`fc2` with biases unless
/// `enable_bias` is false, LayerNorms without parameters when
/// `layer_norm_elementwise_affine` is false, a final LayerNorm only with
/// `do_layer_norm_before`, and `lm_head` tied by default.
pub fn describe(config: &Config) -> Result<Decoder> {
    let vocab = config.size("vocab_size", 50272)?;
    let hidden = config.size("hidden_size", 768)?;
    exact_ratio(
        hidden,
        config.size("num_attention_heads", 12)?,
        "num_attention_heads",
    )?;
    let ffn = config.size("ffn_dim", 3072)?;
    let positions = config.size("max_position_embeddings", 2048)?;
    let projected = config
        .optional_size("word_embed_proj_dim", None)?
        .unwrap_or(hidden);
    let bias = config.flag("enable_bias", true)?;
    let norm = if config.flag("layer_norm_elementwise_affine", true)? {
        Norm::WeightAndBias
    } else {
        Norm::Parameterless
    };

    let mut before_layers = Params::new();
    before_layers.embedding("model.decoder.embed_tokens", vocab, projected)?;
    before_layers.embedding(
        "model.decoder.embed_positions",
        sum(&[positions, POSITION_OFFSET])?,
        hidden,
    )?;
    if projected != hidden {
        before_layers.linear(
            "model.decoder.project_out",
            hidden,
            projected,
            false,
            Role::Embedding,
        )?;
        before_layers.linear(
            "model.decoder.project_in",
            projected,
            hidden,
            false,
            Role::Embedding,
        )?;
    }
    if config.flag("do_layer_norm_before", true)?
        && !config.flag("_remove_final_layer_norm", false)?
    {
        before_layers.norm("model.decoder.final_layer_norm", vec![hidden], norm)?;
    }

    let mut layer = Params::new();
    for projection in [
        "self_attn.k_proj",
        "self_attn.v_proj",
        "self_attn.q_proj",
        "self_attn.out_proj",
    ] {
        layer.linear(projection, hidden, hidden, bias, Role::Attention)?;
    }
    layer.norm("self_attn_layer_norm", vec![hidden], norm)?;
    layer.linear("fc1", hidden, ffn, bias, Role::Mlp)?;
    layer.linear("fc2", ffn, hidden, bias, Role::Mlp)?;
    layer.norm("final_layer_norm", vec![hidden], norm)?;

    let mut after_layers = Params::new();
    after_layers.output_head(
        vocab,
        projected,
        config.flag("tie_word_embeddings", true)?,
        false,
    )?;

    let layers = config.size("num_hidden_layers", 12)?;
    Ok(Decoder {
        before_layers,
        layers: Layers::uniform("model.decoder.layers", layers, "num_hidden_layers", layer),
        after_layers,
    })
}
