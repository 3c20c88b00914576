//! GPT-2, following transformers' `models/gpt2/configuration_gpt2.py`
//! (`GPT2Config`) and `modeling_gpt2.py` (`GPT2LMHeadModel`).

use super::config::{Config, exact_ratio};
use super::decoder::{Decoder, Layers};
use super::dimensions::{
    Dimensions, Dropout, EagerSoftmax, LayerLayout, Linears, MlpKind, NormKind, Positions,
    QkNormKind, QkvLayout, Softcap,
};
use super::params::{Norm, Params, product};
use crate::error::Result;
use crate::model::Role;

/// The keys `GPT2Config` declares, with its defaults. The generic key names
/// (`hidden_size`, `num_hidden_layers`, ...) are `attribute_map` aliases
/// that override `n_embd`, `n_layer`, ... when present. The MLP is
/// `n_inner` wide, `4 x n_embd` when absent or `null`.
struct Sizes {
    vocab: u64,
    hidden: u64,
    positions: u64,
    heads: u64,
    head_dim: u64,
    inner: u64,
    layers: u64,
    tied: bool,
}

fn sizes(config: &Config) -> Result<Sizes> {
    let hidden = config.size_of_first(&["hidden_size", "n_embd"], 768)?;
    let heads = config.size_of_first(&["num_attention_heads", "n_head"], 12)?;
    let inner = match config.optional_size("n_inner", None)? {
        Some(inner) => inner,
        None => product(&[4, hidden])?,
    };
    Ok(Sizes {
        vocab: config.size("vocab_size", 50257)?,
        hidden,
        positions: config.size_of_first(&["max_position_embeddings", "n_positions"], 1024)?,
        heads,
        head_dim: exact_ratio(hidden, heads, "n_head")?,
        inner,
        layers: config.size_of_first(&["num_hidden_layers", "n_layer"], 12)?,
        tied: config.flag("tie_word_embeddings", true)?,
    })
}

/// `GPT2LMHeadModel`: token and learned position embeddings, layers of
/// `Conv1D` projections (weights stored [in, out]) with biases and
/// LayerNorms, optional cross-attention (`add_cross_attention`), and
/// `lm_head` tied by default.
pub fn describe(config: &Config) -> Result<Decoder> {
    let Sizes {
        vocab,
        hidden,
        positions,
        inner,
        layers,
        tied,
        ..
    } = sizes(config)?;

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
    after_layers.output_head(vocab, hidden, tied, false)?;

    Ok(Decoder {
        before_layers,
        layers: Layers::uniform("transformer.h", layers, "n_layer", layer),
        after_layers,
    })
}

/// The activation dimensions: LayerNorms, one `c_attn` whose q, k and v
/// views together are the size of separate projections, a softmax in the
/// model dtype, `NewGELUActivation` in Python for `activation_function`
/// `gelu_new` (the default; a kernel GELU otherwise), learned positions,
/// and `attn_pdrop`, `resid_pdrop`, `embd_pdrop` (all 0.1 by default). The
/// blocks take the attention mask positionally.
pub fn dimensions(config: &Config) -> Result<Dimensions> {
    let sizes = sizes(config)?;
    let mlp = match config.string("activation_function", Some("gelu_new"))? {
        Some("gelu_new") => MlpKind::NewGelu,
        _ => MlpKind::Gelu,
    };
    Ok(Dimensions {
        model_type: "gpt2".to_string(),
        layers: sizes.layers,
        hidden: sizes.hidden,
        intermediate: sizes.inner,
        heads: sizes.heads,
        kv_heads: sizes.heads,
        head_dim: sizes.head_dim,
        vocab: sizes.vocab,
        tied_embeddings: sizes.tied,
        norm: NormKind::LayerNorm,
        layout: LayerLayout::PreNorm,
        qkv: QkvLayout::Separate,
        qk_norm: QkNormKind::None,
        softmax: EagerSoftmax::ModelDtype,
        mlp,
        experts: None,
        positions: Positions::Learned,
        dropout: Dropout {
            attention: config.fraction("attn_pdrop", 0.1)? > 0.0,
            residual: config.fraction("resid_pdrop", 0.1)? > 0.0,
            embedding: config.fraction("embd_pdrop", 0.1)? > 0.0,
        },
        softcap: Softcap::default(),
        mask_positional: true,
        linears: Linears {
            attention_input: vec!["c_attn"],
            attention_output: "c_proj",
            mlp_input: vec!["c_fc"],
            mlp_output: "c_proj",
            conv1d: true,
        },
        encoder: None,
        images: None,
        encoder_decoder: None,
        state_space: None,
    })
}
