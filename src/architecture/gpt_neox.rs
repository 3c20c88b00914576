//! GPT-NeoX (Pythia), following transformers'
//! `models/gpt_neox/configuration_gpt_neox.py` (`GPTNeoXConfig`) and
//! `modeling_gpt_neox.py` (`GPTNeoXForCausalLM`).

use super::config::{Config, exact_ratio};
use super::decoder::{Decoder, Layers};
use super::dimensions::{
    Dimensions, Dropout, EagerSoftmax, LayerLayout, Linears, MlpKind, NormKind, Positions,
    QkNormKind, QkvLayout, Softcap,
};
use super::params::{Norm, Params, product};
use super::phi3::partial_width;
use crate::error::Result;
use crate::model::Role;

/// The keys `GPTNeoXConfig` declares, with its defaults.
struct Sizes {
    vocab: u64,
    hidden: u64,
    heads: u64,
    head_dim: u64,
    intermediate: u64,
    attention_bias: bool,
    layers: u64,
    tied: bool,
}

fn sizes(config: &Config) -> Result<Sizes> {
    let hidden = config.size("hidden_size", 6144)?;
    let heads = config.size("num_attention_heads", 64)?;
    Ok(Sizes {
        vocab: config.size("vocab_size", 50432)?,
        hidden,
        heads,
        head_dim: exact_ratio(hidden, heads, "num_attention_heads")?,
        intermediate: config.size("intermediate_size", 24576)?,
        attention_bias: config.flag("attention_bias", true)?,
        layers: config.size("num_hidden_layers", 44)?,
        tied: config.flag("tie_word_embeddings", false)?,
    })
}

/// `GPTNeoXForCausalLM`: a fused `query_key_value` [3 x hidden, hidden] and
/// `dense`, with biases unless `attention_bias` is false (default true); an
/// MLP with biases; LayerNorms; an untied `lm_head` by default. The rotary
/// keys (`rotary_pct`, `rotary_emb_base`) change no shape.
pub fn describe(config: &Config) -> Result<Decoder> {
    let Sizes {
        vocab,
        hidden,
        intermediate,
        attention_bias,
        layers,
        tied,
        ..
    } = sizes(config)?;

    let mut before_layers = Params::new();
    before_layers.embedding("gpt_neox.embed_in", vocab, hidden)?;

    let mut layer = Params::new();
    layer.norm("input_layernorm", vec![hidden], Norm::WeightAndBias)?;
    layer.norm(
        "post_attention_layernorm",
        vec![hidden],
        Norm::WeightAndBias,
    )?;
    let qkv = product(&[3, hidden])?;
    layer.linear(
        "attention.query_key_value",
        hidden,
        qkv,
        attention_bias,
        Role::Attention,
    )?;
    layer.linear(
        "attention.dense",
        hidden,
        hidden,
        attention_bias,
        Role::Attention,
    )?;
    layer.linear("mlp.dense_h_to_4h", hidden, intermediate, true, Role::Mlp)?;
    layer.linear("mlp.dense_4h_to_h", intermediate, hidden, true, Role::Mlp)?;

    let mut after_layers = Params::new();
    after_layers.norm(
        "gpt_neox.final_layer_norm",
        vec![hidden],
        Norm::WeightAndBias,
    )?;
    after_layers.output_head(vocab, hidden, tied, false)?;

    Ok(Decoder {
        before_layers,
        layers: Layers::uniform("gpt_neox.layers", layers, "num_hidden_layers", layer),
        after_layers,
    })
}

/// The activation dimensions: LayerNorms reading one input when
/// `use_parallel_residual` (default true), the fused `query_key_value`,
/// a GELU MLP, rotary tables `head_dim x rotary_pct` (default 0.25;
/// `partial_rotary_factor` overrides it) wide, `attention_dropout` and
/// `hidden_dropout` (defaults 0.0; the latter after attention, after the
/// MLP and on the embeddings).
pub fn dimensions(config: &Config) -> Result<Dimensions> {
    let sizes = sizes(config)?;
    let rotated = match config.optional_number("partial_rotary_factor", None)? {
        Some(_) => config.fraction("partial_rotary_factor", 1.0)?,
        None => config.fraction("rotary_pct", 0.25)?,
    };
    let hidden_dropout = config.fraction("hidden_dropout", 0.0)? > 0.0;
    Ok(Dimensions {
        model_type: "gpt_neox".to_string(),
        layers: sizes.layers,
        hidden: sizes.hidden,
        intermediate: sizes.intermediate,
        heads: sizes.heads,
        kv_heads: sizes.heads,
        head_dim: sizes.head_dim,
        vocab: sizes.vocab,
        tied_embeddings: sizes.tied,
        norm: NormKind::LayerNorm,
        layout: if config.flag("use_parallel_residual", true)? {
            LayerLayout::ParallelResidual
        } else {
            LayerLayout::PreNorm
        },
        qkv: QkvLayout::Fused,
        qk_norm: QkNormKind::None,
        softmax: EagerSoftmax::Fp32WithCast,
        mlp: MlpKind::Gelu,
        experts: None,
        positions: Positions::Rotary {
            width: partial_width(sizes.head_dim, rotated),
            fp32_tables: false,
            tables: 1,
            concatenated: true,
        },
        dropout: Dropout {
            attention: config.fraction("attention_dropout", 0.0)? > 0.0,
            residual: hidden_dropout,
            embedding: hidden_dropout,
        },
        softcap: Softcap::default(),
        mask_positional: false,
        linears: Linears {
            attention_input: vec!["query_key_value"],
            attention_output: "dense",
            mlp_input: vec!["dense_h_to_4h"],
            mlp_output: "dense_4h_to_h",
            conv1d: false,
        },
        encoder: None,
        images: None,
        encoder_decoder: None,
        state_space: None,
    })
}
