//! ModernBERT, following transformers' `models/modernbert/configuration_modernbert.py`
//! (`ModernBertConfig`) and `modeling_modernbert.py` (`ModernBertModel`,
//! `ModernBertForMaskedLM`, `ModernBertForSequenceClassification`,
//! `ModernBertForTokenClassification`).
//!
//! A pre-norm encoder with rotary positions: one fused `Wqkv` and `Wo`, a
//! GLU MLP whose `Wi` is twice `intermediate_size`, LayerNorms without bias
//! by default (`norm_bias`), no attention norm in the first layer (an
//! `nn.Identity`), a final norm, and every task model's
//! `ModernBertPredictionHead` (`head.dense`, `head.norm`). Only the
//! parameter inventory is modelled; activation memory is not.

use super::config::{Config, exact_ratio};
use super::decoder::{Decoder, Layers, Placement};
use super::params::{Norm, Params, product};
use super::task::Task;
use crate::error::Result;
use crate::model::Role;

/// The model `task`'s auto class builds for a ModernBERT config: the body
/// as `model` (bare for `embedding`), `head` and `decoder` (tied to the
/// token embeddings unless `tie_word_embeddings` is false; its bias with
/// `decoder_bias`, default true) for masked-LM, `head` and `classifier` for
/// the classifiers. `attention_bias`, `mlp_bias` (default false) put biases
/// on the attention and MLP linears, `classifier_bias` (default false) on
/// `head.dense`.
pub fn describe(config: &Config, task: Task) -> Result<Decoder> {
    let bare = super::encoder::is_bare_body(task, "modernbert")?;
    let within = |name: &str| {
        if bare {
            name.to_string()
        } else {
            format!("model.{name}")
        }
    };
    let vocab = config.size("vocab_size", 50_368)?;
    let hidden = config.size("hidden_size", 768)?;
    exact_ratio(
        hidden,
        config.size("num_attention_heads", 12)?,
        "num_attention_heads",
    )?;
    let intermediate = config.size("intermediate_size", 1152)?;
    let norm = if config.flag("norm_bias", false)? {
        Norm::WeightAndBias
    } else {
        Norm::Weight
    };
    let attention_bias = config.flag("attention_bias", false)?;
    let mlp_bias = config.flag("mlp_bias", false)?;

    let mut before_layers = Params::new();
    before_layers.embedding(&within("embeddings.tok_embeddings"), vocab, hidden)?;
    before_layers.norm(&within("embeddings.norm"), vec![hidden], norm)?;

    // The first layer's attention norm is an `nn.Identity`; the others'
    // a LayerNorm registered before the attention.
    let layer = |attention_norm: bool| -> Result<Params> {
        let mut layer = Params::new();
        if attention_norm {
            layer.norm("attn_norm", vec![hidden], norm)?;
        }
        layer.linear(
            "attn.Wqkv",
            hidden,
            product(&[3, hidden])?,
            attention_bias,
            Role::Attention,
        )?;
        layer.linear("attn.Wo", hidden, hidden, attention_bias, Role::Attention)?;
        layer.norm("mlp_norm", vec![hidden], norm)?;
        layer.linear(
            "mlp.Wi",
            hidden,
            product(&[2, intermediate])?,
            mlp_bias,
            Role::Mlp,
        )?;
        layer.linear("mlp.Wo", intermediate, hidden, mlp_bias, Role::Mlp)?;
        Ok(layer)
    };

    let mut after_layers = Params::new();
    after_layers.norm(&within("final_norm"), vec![hidden], norm)?;
    if !bare {
        after_layers.linear(
            "head.dense",
            hidden,
            hidden,
            config.flag("classifier_bias", false)?,
            Role::OutputHead,
        )?;
        after_layers.norm("head.norm", vec![hidden], norm)?;
    }
    match task {
        Task::MaskedLm => {
            if !config.flag("tie_word_embeddings", true)? {
                after_layers.tensor("decoder.weight", vec![vocab, hidden], Role::OutputHead)?;
            }
            if config.flag("decoder_bias", true)? {
                after_layers.tensor("decoder.bias", vec![vocab], Role::OutputHead)?;
            }
        }
        Task::SequenceClassification { labels } | Task::TokenClassification { labels } => {
            after_layers.linear("classifier", hidden, labels, true, Role::OutputHead)?;
        }
        Task::Embedding | Task::CausalLm | Task::Seq2Seq => {}
    }

    Ok(Decoder {
        before_layers,
        layers: Layers {
            alternative: Some((layer(true)?, Placement::From(1))),
            ..Layers::uniform(
                if bare { "layers" } else { "model.layers" },
                config.size("num_hidden_layers", 22)?,
                "num_hidden_layers",
                layer(false)?,
            )
        },
        after_layers,
    })
}
