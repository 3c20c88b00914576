//! BART, following transformers' `models/bart/configuration_bart.py`
//! (`BartConfig`) and `modeling_bart.py` (`BartModel`,
//! `BartForConditionalGeneration`, `BartForSequenceClassification`,
//! `BartForCausalLM`).
//!
//! `BartModel` registers `shared` [vocab, d_model] and two stacks. Each
//! stack has `embed_tokens` (tied to `shared` unless `tie_word_embeddings`
//! is false), `embed_positions` (`BartLearnedPositionalEmbedding`:
//! `max_position_embeddings + 2` rows, the offset of 2 kept from fairseq),
//! `layers.{i}` and `layernorm_embedding`. An encoder layer is post-norm:
//! `self_attn.{k,v,q,out}_proj` (biased), `self_attn_layer_norm`, `fc1`,
//! `fc2`, `final_layer_norm`; a decoder layer adds `encoder_attn.*` and
//! `encoder_attn_layer_norm` after its self-attention. Every linear has a
//! bias and every LayerNorm a weight and a bias.
//!
//! `BartForConditionalGeneration` mounts the body as `model` and adds
//! `lm_head` (tied to `shared` unless `tie_word_embeddings` is false) and
//! `final_logits_bias` [1, vocab], a buffer, not a parameter.
//! `AutoModelForMaskedLM` builds the same class.
//! `BartForSequenceClassification` adds `classification_head.{dense,
//! out_proj}`; `BartForCausalLM` keeps the decoder alone
//! (`model.decoder`, its own `embed_tokens`) and `lm_head`.

use super::config::{Config, exact_ratio};
use super::decoder::Decoder;
use super::dimensions::{
    Dimensions, Dropout, EagerSoftmax, EncoderDecoder, LayerLayout, Linears, MlpKind, NormKind,
    Positions, QkNormKind, QkvLayout, Seq2SeqFamily, Seq2SeqFeedForward, Softcap,
};
use super::encoder_decoder::{bart_layer, bounded, write_stack};
use super::params::{Norm, Params, sum};
use super::task::Task;
use super::tower::{refused, whole};
use crate::error::{Error, Result};
use crate::model::Role;

/// `BartLearnedPositionalEmbedding.offset`: rows before the first position.
pub const POSITION_OFFSET: u64 = 2;

/// A BART model's sizes, read from its config.json.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bart {
    /// `vocab_size`.
    pub vocab: u64,
    /// `d_model`.
    pub hidden: u64,
    /// `encoder_layers`.
    pub encoder_layers: u64,
    /// `decoder_layers`.
    pub decoder_layers: u64,
    /// `encoder_ffn_dim`.
    pub encoder_ffn: u64,
    /// `decoder_ffn_dim`.
    pub decoder_ffn: u64,
    /// `encoder_attention_heads`.
    pub encoder_heads: u64,
    /// `decoder_attention_heads`.
    pub decoder_heads: u64,
    /// `max_position_embeddings`.
    pub positions: u64,
    /// `tie_word_embeddings`.
    pub tied: bool,
}

impl Bart {
    /// Reads the keys `BartConfig` declares, with their defaults (`d_model`
    /// also as its alias `hidden_size`). Each stack's heads must divide
    /// `d_model`, as `BartAttention` raises otherwise.
    pub fn read(config: &Config) -> Result<Bart> {
        let hidden = config.size_of_first(&["d_model", "hidden_size"], 1024)?;
        let encoder_heads =
            config.size_of_first(&["encoder_attention_heads", "num_attention_heads"], 16)?;
        let decoder_heads = config.size("decoder_attention_heads", 16)?;
        exact_ratio(hidden, encoder_heads, "encoder_attention_heads")?;
        exact_ratio(hidden, decoder_heads, "decoder_attention_heads")?;
        Ok(Bart {
            vocab: config.size("vocab_size", 50265)?,
            hidden,
            encoder_layers: bounded(
                "encoder_layers",
                config.size_of_first(&["encoder_layers", "num_hidden_layers"], 12)?,
            )?,
            decoder_layers: bounded("decoder_layers", config.size("decoder_layers", 12)?)?,
            encoder_ffn: config.size("encoder_ffn_dim", 4096)?,
            decoder_ffn: config.size("decoder_ffn_dim", 4096)?,
            encoder_heads,
            decoder_heads,
            positions: config.size("max_position_embeddings", 1024)?,
            tied: config.flag("tie_word_embeddings", true)?,
        })
    }

    /// `BartEncoderLayer` (`decoder` false) or `BartDecoderLayer`.
    fn layer(&self, decoder: bool) -> Result<Params> {
        let ffn = if decoder {
            self.decoder_ffn
        } else {
            self.encoder_ffn
        };
        bart_layer(self.hidden, ffn, decoder, true)
    }

    /// `BartEncoder` or `BartDecoder`: `embed_tokens` when it is a tensor
    /// of its own (`own_tokens`), the positions, the layers and
    /// `layernorm_embedding`.
    fn stack(&self, decoder: bool, own_tokens: bool) -> Result<Params> {
        let hidden = self.hidden;
        let mut stack = Params::new();
        if own_tokens {
            stack.embedding("embed_tokens", self.vocab, hidden)?;
        }
        stack.embedding(
            "embed_positions",
            sum(&[self.positions, POSITION_OFFSET])?,
            hidden,
        )?;
        let layer = self.layer(decoder)?;
        let count = if decoder {
            self.decoder_layers
        } else {
            self.encoder_layers
        };
        write_stack(&mut stack, "layers", count, |_| Ok(layer.clone()))?;
        stack.norm("layernorm_embedding", vec![hidden], Norm::WeightAndBias)?;
        Ok(stack)
    }

    /// `BartModel`.
    fn body(&self) -> Result<Params> {
        let mut body = Params::new();
        body.embedding("shared", self.vocab, self.hidden)?;
        body.mount("encoder", self.stack(false, !self.tied)?);
        body.mount("decoder", self.stack(true, !self.tied)?);
        Ok(body)
    }

    /// The model transformers' auto class for `task` builds: seq2seq
    /// (the default) and masked-lm (`BartForConditionalGeneration` both),
    /// embedding (`BartModel`), seq-cls:N (`BartForSequenceClassification`)
    /// and causal-lm (`BartForCausalLM`).
    pub fn describe(&self, task: Task) -> Result<Decoder> {
        let hidden = self.hidden;
        let mut params = Params::new();
        match task {
            Task::Seq2Seq | Task::MaskedLm => {
                params.mount("model", self.body()?);
                params.output_head(self.vocab, hidden, self.tied, false)?;
            }
            Task::Embedding => params = self.body()?,
            Task::SequenceClassification { labels } => {
                params.mount("model", self.body()?);
                params.linear(
                    "classification_head.dense",
                    hidden,
                    hidden,
                    true,
                    Role::OutputHead,
                )?;
                params.linear(
                    "classification_head.out_proj",
                    hidden,
                    labels,
                    true,
                    Role::OutputHead,
                )?;
            }
            Task::CausalLm => {
                params.mount("model.decoder", self.stack(true, true)?);
                params.output_head(self.vocab, hidden, self.tied, false)?;
            }
            Task::TokenClassification { .. } => {
                return Err(refused(
                    "bart",
                    task,
                    "seq2seq (the default: BartForConditionalGeneration), masked-lm (the same class), embedding (BartModel), seq-cls:N or causal-lm (BartForCausalLM)",
                ));
            }
        }
        Ok(whole(params))
    }
}

/// The model a `bart` config's task builds.
pub fn describe(config: &Config, task: Task) -> Result<Decoder> {
    Bart::read(config)?.describe(task)
}

/// The sizes and kinds the seq2seq activation model needs for
/// `BartForConditionalGeneration` (`seq2seq`): post-norm layers with
/// `nn.LayerNorm`, `gelu` (the only `activation_function` measured), and
/// the dropouts `dropout` (embeddings, block outputs), `attention_dropout`
/// (probabilities) and `activation_dropout` (inside the feed-forward).
pub fn dimensions(config: &Config, task: Task) -> Result<Dimensions> {
    if task != Task::Seq2Seq {
        return Err(Error::InvalidValue {
            what: "--task",
            value: task.to_string(),
            reason: "activations of `bart` are modelled for seq2seq (BartForConditionalGeneration)"
                .to_string(),
        });
    }
    let bart = Bart::read(config)?;
    let activation = config
        .string("activation_function", Some("gelu"))?
        .unwrap_or("gelu");
    if activation != "gelu" {
        return Err(Error::InvalidConfig {
            key: "activation_function".to_string(),
            problem: format!(
                "`{activation}` is not measured for BART's activation memory; accepted: gelu"
            ),
        });
    }
    let dropout = config.fraction("dropout", 0.1)? > 0.0;
    let attention_dropout = config.fraction("attention_dropout", 0.0)? > 0.0;
    let heads = bart.encoder_heads;
    let head_dim = exact_ratio(bart.hidden, heads, "encoder_attention_heads")?;
    if bart.decoder_heads != heads {
        return Err(Error::InvalidConfig {
            key: "decoder_attention_heads".to_string(),
            problem: format!(
                "`{}` differs from encoder_attention_heads `{heads}`, which is not measured for activation memory; accepted: the same head count in both stacks",
                bart.decoder_heads
            ),
        });
    }
    Ok(Dimensions {
        model_type: "bart".to_string(),
        layers: bart.encoder_layers.saturating_add(bart.decoder_layers),
        hidden: bart.hidden,
        intermediate: bart.encoder_ffn.max(bart.decoder_ffn),
        heads,
        kv_heads: heads,
        head_dim,
        vocab: bart.vocab,
        tied_embeddings: bart.tied,
        norm: NormKind::LayerNorm,
        layout: LayerLayout::PostNorm,
        qkv: QkvLayout::Separate,
        qk_norm: QkNormKind::None,
        softmax: EagerSoftmax::ModelDtype,
        mlp: MlpKind::Gelu,
        experts: None,
        positions: Positions::Learned,
        dropout: Dropout {
            attention: attention_dropout,
            residual: dropout,
            embedding: dropout,
        },
        softcap: Softcap::default(),
        mask_positional: false,
        linears: Linears {
            attention_input: vec!["q_proj", "k_proj", "v_proj"],
            attention_output: "out_proj",
            mlp_input: vec!["fc1"],
            mlp_output: "fc2",
            conv1d: false,
        },
        encoder: None,
        images: None,
        encoder_decoder: Some(EncoderDecoder {
            family: Seq2SeqFamily::Bart,
            encoder_layers: bart.encoder_layers,
            decoder_layers: bart.decoder_layers,
            encoder_heads: heads,
            decoder_heads: heads,
            head_dim,
            encoder_intermediate: bart.encoder_ffn,
            decoder_intermediate: bart.decoder_ffn,
            feed_forward: Seq2SeqFeedForward::Gelu,
            dropout,
            attention_dropout,
            activation_dropout: config.fraction("activation_dropout", 0.0)? > 0.0,
            mel_bins: 0,
            source_positions: None,
            target_positions: None,
        }),
        state_space: None,
    })
}
