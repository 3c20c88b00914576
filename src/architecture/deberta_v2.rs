//! DeBERTa-v2 and v3, following transformers'
//! `models/deberta_v2/configuration_deberta_v2.py` (`DebertaV2Config`) and
//! `modeling_deberta_v2.py` (`DebertaV2Model`, `DebertaV2ForMaskedLM`,
//! `DebertaV2ForSequenceClassification`, `DebertaV2ForTokenClassification`).
//!
//! A BERT-style body (`query_proj`, `key_proj`, `value_proj` and the same
//! output, intermediate and LayerNorm modules) with disentangled relative
//! attention: the encoder holds the relative position embeddings (and
//! their LayerNorm), each layer separate position projections unless
//! `share_att_key`, and an optional convolution beside the first layer.
//! Only the parameter inventory is modelled; activation memory is not.

use super::config::{Config, exact_ratio};
use super::decoder::{Decoder, Layers};
use super::params::{Norm, Params, product};
use super::task::Task;
use crate::error::Result;
use crate::model::Role;

/// The model `task`'s auto class builds for a DeBERTa-v2 config:
///
/// * embeddings `embedding_size` wide (default `hidden_size`, then
///   `embed_proj` without bias), positions only with
///   `position_biased_input` (default true), token types only when
///   `type_vocab_size` is above 0 (default 0), a LayerNorm;
/// * with `relative_attention`, `encoder.rel_embeddings` of
///   2 x `position_buckets` rows (else 2 x `max_relative_positions`, which
///   below 1 is `max_position_embeddings`), `pos_key_proj` (for `c2p`) and
///   `pos_query_proj` (for `p2c`) in each layer unless `share_att_key`;
///   `encoder.LayerNorm` when `norm_rel_ebd` holds `layer_norm`;
///   `encoder.conv` (a `Conv1d` of `conv_kernel_size` and `conv_groups`,
///   and a LayerNorm) when `conv_kernel_size` is above 0;
/// * masked-LM: `cls.predictions` (the transform to `embedding_size`, the
///   decoder tied to the word embeddings unless `tie_word_embeddings` is
///   false, the bias) when `legacy` (the default), else
///   `lm_predictions.lm_head` (dense, LayerNorm, bias; the word embeddings
///   are the decoder);
/// * sequence classification: `ContextPooler`'s `pooler.dense`
///   (`pooler_hidden_size`, default `hidden_size`) and `classifier`;
///   token classification: `classifier`; `embedding`: the bare model.
pub fn describe(config: &Config, task: Task) -> Result<Decoder> {
    let bare = super::encoder::is_bare_body(task, "deberta-v2")?;
    let within = |name: &str| {
        if bare {
            name.to_string()
        } else {
            format!("deberta.{name}")
        }
    };
    let vocab = config.size("vocab_size", 128_100)?;
    let hidden = config.size("hidden_size", 1536)?;
    exact_ratio(
        hidden,
        config.size("num_attention_heads", 24)?,
        "num_attention_heads",
    )?;
    let intermediate = config.size("intermediate_size", 6144)?;
    let positions = config.size("max_position_embeddings", 512)?;
    let embedding = config.size("embedding_size", hidden)?;

    let mut before_layers = Params::new();
    before_layers.embedding(&within("embeddings.word_embeddings"), vocab, embedding)?;
    if config.flag("position_biased_input", true)? {
        before_layers.embedding(
            &within("embeddings.position_embeddings"),
            positions,
            embedding,
        )?;
    }
    let token_types = config.size("type_vocab_size", 0)?;
    if token_types > 0 {
        before_layers.embedding(
            &within("embeddings.token_type_embeddings"),
            token_types,
            embedding,
        )?;
    }
    if embedding != hidden {
        before_layers.linear(
            &within("embeddings.embed_proj"),
            embedding,
            hidden,
            false,
            Role::Embedding,
        )?;
    }
    before_layers.norm(
        &within("embeddings.LayerNorm"),
        vec![hidden],
        Norm::WeightAndBias,
    )?;

    let relative = config.flag("relative_attention", false)?;
    let shared_key = config.flag("share_att_key", false)?;
    let position_attention = config.separated_list("pos_att_type")?;
    let mut layer = Params::new();
    for projection in ["query_proj", "key_proj", "value_proj"] {
        layer.linear(
            &format!("attention.self.{projection}"),
            hidden,
            hidden,
            true,
            Role::Attention,
        )?;
    }
    if relative && !shared_key {
        for (kind, projection) in [("c2p", "pos_key_proj"), ("p2c", "pos_query_proj")] {
            if position_attention.iter().any(|item| item == kind) {
                layer.linear(
                    &format!("attention.self.{projection}"),
                    hidden,
                    hidden,
                    true,
                    Role::Attention,
                )?;
            }
        }
    }
    super::encoder::output_blocks(&mut layer, hidden, intermediate)?;

    let mut after_layers = Params::new();
    if relative {
        let buckets = config.positive_or_unset("position_buckets", -1)?;
        let farthest = config
            .positive_or_unset("max_relative_positions", -1)?
            .unwrap_or(positions);
        after_layers.embedding(
            &within("encoder.rel_embeddings"),
            product(&[2, buckets.unwrap_or(farthest)])?,
            hidden,
        )?;
    }
    let relative_norms = config
        .string("norm_rel_ebd", Some("none"))?
        .unwrap_or("none")
        .to_lowercase();
    if relative_norms
        .split('|')
        .any(|item| item.trim() == "layer_norm")
    {
        after_layers.norm(
            &within("encoder.LayerNorm"),
            vec![hidden],
            Norm::WeightAndBias,
        )?;
    }
    let kernel = config.size("conv_kernel_size", 0)?;
    if kernel > 0 {
        let groups = config.size("conv_groups", 1)?;
        let per_group = exact_ratio(hidden, groups, "conv_groups")?;
        after_layers.tensor(
            within("encoder.conv.conv.weight"),
            vec![hidden, per_group, kernel],
            Role::Other,
        )?;
        after_layers.tensor(within("encoder.conv.conv.bias"), vec![hidden], Role::Other)?;
        after_layers.norm(
            &within("encoder.conv.LayerNorm"),
            vec![hidden],
            Norm::WeightAndBias,
        )?;
    }
    match task {
        Task::MaskedLm if config.flag("legacy", true)? => {
            after_layers.linear(
                "cls.predictions.transform.dense",
                hidden,
                embedding,
                true,
                Role::OutputHead,
            )?;
            after_layers.norm(
                "cls.predictions.transform.LayerNorm",
                vec![embedding],
                Norm::WeightAndBias,
            )?;
            if !config.flag("tie_word_embeddings", true)? {
                after_layers.linear(
                    "cls.predictions.decoder",
                    embedding,
                    vocab,
                    true,
                    Role::OutputHead,
                )?;
            }
            after_layers.tensor("cls.predictions.bias", vec![vocab], Role::OutputHead)?;
        }
        Task::MaskedLm => {
            after_layers.linear(
                "lm_predictions.lm_head.dense",
                hidden,
                hidden,
                true,
                Role::OutputHead,
            )?;
            after_layers.norm(
                "lm_predictions.lm_head.LayerNorm",
                vec![hidden],
                Norm::WeightAndBias,
            )?;
            after_layers.tensor("lm_predictions.lm_head.bias", vec![vocab], Role::OutputHead)?;
        }
        Task::SequenceClassification { labels } => {
            let pooled = config.size("pooler_hidden_size", hidden)?;
            after_layers.linear("pooler.dense", pooled, pooled, true, Role::OutputHead)?;
            after_layers.linear("classifier", hidden, labels, true, Role::OutputHead)?;
        }
        Task::TokenClassification { labels } => {
            after_layers.linear("classifier", hidden, labels, true, Role::OutputHead)?;
        }
        Task::Embedding | Task::CausalLm | Task::Seq2Seq => {}
    }

    Ok(Decoder {
        before_layers,
        layers: Layers::uniform(
            if bare {
                "encoder.layer"
            } else {
                "deberta.encoder.layer"
            },
            config.size("num_hidden_layers", 24)?,
            "num_hidden_layers",
            layer,
        ),
        after_layers,
    })
}
