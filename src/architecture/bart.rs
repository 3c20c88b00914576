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
use super::encoder_decoder::{bounded, write_stack};
use super::params::{Norm, Params, sum};
use super::task::Task;
use super::tower::{refused, whole};
use crate::error::Result;
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

    /// `BartAttention`: `k_proj`, `v_proj`, `q_proj`, `out_proj`, biased.
    fn attention(&self, params: &mut Params, prefix: &str) -> Result<()> {
        for projection in ["k_proj", "v_proj", "q_proj", "out_proj"] {
            params.linear(
                &format!("{prefix}.{projection}"),
                self.hidden,
                self.hidden,
                true,
                Role::Attention,
            )?;
        }
        params.norm(
            &format!("{prefix}_layer_norm"),
            vec![self.hidden],
            Norm::WeightAndBias,
        )
    }

    /// `BartEncoderLayer` (`decoder` false) or `BartDecoderLayer`.
    fn layer(&self, decoder: bool) -> Result<Params> {
        let hidden = self.hidden;
        let ffn = if decoder {
            self.decoder_ffn
        } else {
            self.encoder_ffn
        };
        let mut layer = Params::new();
        self.attention(&mut layer, "self_attn")?;
        if decoder {
            self.attention(&mut layer, "encoder_attn")?;
        }
        layer.linear("fc1", hidden, ffn, true, Role::Mlp)?;
        layer.linear("fc2", ffn, hidden, true, Role::Mlp)?;
        layer.norm("final_layer_norm", vec![hidden], Norm::WeightAndBias)?;
        Ok(layer)
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
