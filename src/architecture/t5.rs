//! T5, mT5 and UMT5, following transformers' `models/t5/configuration_t5.py`
//! (`T5Config`) and `modeling_t5.py` (`T5Model`, `T5ForConditionalGeneration`,
//! `T5ForSequenceClassification`, `T5ForTokenClassification`), and their
//! copies `models/mt5` (`MT5Config`, `MT5*`) and `models/umt5` (`UMT5Config`,
//! `UMT5*`).
//!
//! `shared` [vocab, d_model] is the token embedding of both stacks. Each
//! `T5Stack` is `block.{i}` and a `final_layer_norm` (an RMS norm: a weight,
//! no bias). An encoder block is `layer.0` (`SelfAttention.{q,k,v}`
//! [heads·d_kv, d_model], `o` [d_model, heads·d_kv], no biases, and
//! `layer_norm`) and `layer.1` (`DenseReluDense.wi` [d_ff, d_model] and
//! `wo`, or `wi_0` and `wi_1` when `feed_forward_proj` is `gated-*`, and
//! `layer_norm`); a decoder block puts `EncDecAttention.{q,k,v,o}` and its
//! `layer_norm` in `layer.1` and the feed-forward in `layer.2`. The relative
//! position bias `SelfAttention.relative_attention_bias` [buckets, heads]
//! sits in the first block of each stack only (`has_relative_attention_bias
//! = bool(i == 0)`); UMT5 gives every self-attention its own.
//!
//! `T5ForConditionalGeneration` adds `lm_head` [vocab, d_model], no bias.
//! transformers 5 forces `tie_word_embeddings = True` in the config class,
//! so `from_config` ties it to `shared`; but published untied checkpoints
//! (T5 v1.1, Flan-T5, mT5, UMT5: `"tie_word_embeddings": false`) hold a
//! `lm_head.weight` of their own, and `from_pretrained` leaves two different
//! tensors untied (`PreTrainedModel.tie_weights`). trainmem prices the
//! checkpoint: its `lm_head` is its own when the file says false
//! (`tools/measure_params.py` measures those configs through
//! `from_pretrained`).

use super::config::Config;
use super::decoder::Decoder;
use super::dimensions::{
    Dimensions, Dropout, EagerSoftmax, EncoderDecoder, LayerLayout, Linears, MlpKind, NormKind,
    Positions, QkNormKind, QkvLayout, Seq2SeqFamily, Seq2SeqFeedForward, Softcap,
};
use super::encoder_decoder::{bounded, write_stack};
use super::params::{Norm, Params, product};
use super::task::Task;
use super::tower::{refused, whole};
use crate::error::{Error, Result};
use crate::model::Role;

/// Which of the three config classes, and so which defaults and where the
/// relative position bias sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// `T5Config`: vocabulary 32128, 6 layers of 8 heads, `d_ff` 2048, `relu`.
    T5,
    /// `MT5Config`: vocabulary 250112, 8 layers of 6 heads, `d_ff` 1024, `gated-gelu`.
    Mt5,
    /// `UMT5Config`: mT5's defaults, a relative position bias in every layer.
    Umt5,
}

impl Family {
    /// The `model_type`, and the class-name prefix of its models.
    fn names(self) -> (&'static str, &'static str) {
        match self {
            Family::T5 => ("t5", "T5"),
            Family::Mt5 => ("mt5", "MT5"),
            Family::Umt5 => ("umt5", "UMT5"),
        }
    }
}

/// A T5-family model's sizes, read from its config.json.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct T5 {
    /// Which config class read it.
    pub family: Family,
    /// `vocab_size`.
    pub vocab: u64,
    /// `d_model`.
    pub hidden: u64,
    /// `num_heads`.
    pub heads: u64,
    /// `d_kv`, the width of one head.
    pub head_dim: u64,
    /// `d_ff`.
    pub intermediate: u64,
    /// Whether `feed_forward_proj` is `gated-*` (`wi_0` and `wi_1`).
    pub gated: bool,
    /// The activation after `wi` (`wi_0`): `feed_forward_proj`'s last part,
    /// `gelu_new` for `gated-gelu`.
    pub activation: &'static str,
    /// `relative_attention_num_buckets`.
    pub buckets: u64,
    /// `num_layers`.
    pub encoder_layers: u64,
    /// `num_decoder_layers` (`num_layers` when absent or null).
    pub decoder_layers: u64,
    /// Whether the checkpoint's `lm_head` is its own (`tie_word_embeddings`
    /// false in the file).
    pub untied_head: bool,
}

/// The activations `feed_forward_proj` may name that the activation model
/// tells apart; any other `ACT2FN` name shapes the same tensors and is
/// kept as `other`.
fn activation_name(name: &str) -> &'static str {
    match name {
        "relu" => "relu",
        "gelu" => "gelu",
        "gelu_new" => "gelu_new",
        "silu" => "silu",
        _ => "other",
    }
}

impl T5 {
    /// Reads the keys `T5Config` declares (and `MT5Config`, `UMT5Config`
    /// copy), with the family's defaults. `d_model`, `num_heads`,
    /// `num_layers` and `d_kv` are also read under their `attribute_map`
    /// aliases `hidden_size`, `num_attention_heads`, `num_hidden_layers`
    /// and `head_dim`. `feed_forward_proj` must be `ACT` or `gated-ACT`, as
    /// `T5Config.validate_architecture` requires.
    pub fn read(config: &Config, family: Family) -> Result<T5> {
        let (vocab, intermediate, layers, heads, feed_forward) = match family {
            Family::T5 => (32128, 2048, 6, 8, "relu"),
            Family::Mt5 | Family::Umt5 => (250112, 1024, 8, 6, "gated-gelu"),
        };
        let feed_forward = config
            .string("feed_forward_proj", Some(feed_forward))?
            .unwrap_or(feed_forward);
        let parts: Vec<&str> = feed_forward.split('-').collect();
        let (gated, activation) = match parts.as_slice() {
            [activation] if !activation.is_empty() && *activation != "gated" => {
                (false, *activation)
            }
            ["gated", activation] if !activation.is_empty() => (true, *activation),
            _ => {
                return Err(Error::InvalidConfig {
                    key: "feed_forward_proj".to_string(),
                    problem: format!(
                        "`{feed_forward}` is not an activation of the dense layer; accepted: `ACT` or `gated-ACT`, such as `relu` or `gated-gelu`"
                    ),
                });
            }
        };
        let activation = if feed_forward == "gated-gelu" {
            "gelu_new"
        } else {
            activation_name(activation)
        };
        let encoder_key = if config.optional_size("num_layers", None)?.is_some() {
            "num_layers"
        } else {
            "num_hidden_layers"
        };
        let encoder_layers = bounded(
            encoder_key,
            config.size_of_first(&["num_layers", "num_hidden_layers"], layers)?,
        )?;
        // `T5Config.__post_init__` copies `num_layers` before the
        // `attribute_map` applies `num_hidden_layers`: a file giving only
        // the alias gets a decoder of the class default's depth.
        let decoder_layers = bounded(
            "num_decoder_layers",
            match config.optional_size("num_decoder_layers", None)? {
                Some(count) => count,
                None => config.size("num_layers", layers)?,
            },
        )?;
        let heads = config.size_of_first(&["num_heads", "num_attention_heads"], heads)?;
        if heads == 0 {
            return Err(Error::InvalidConfig {
                key: "num_heads".to_string(),
                problem: "`0` heads cannot attend; accepted: a positive whole number".to_string(),
            });
        }
        Ok(T5 {
            family,
            vocab: config.size("vocab_size", vocab)?,
            hidden: config.size_of_first(&["d_model", "hidden_size"], 512)?,
            heads,
            head_dim: config.size_of_first(&["d_kv", "head_dim"], 64)?,
            intermediate: config.size("d_ff", intermediate)?,
            gated,
            activation,
            buckets: config.size("relative_attention_num_buckets", 32)?,
            encoder_layers,
            decoder_layers,
            untied_head: !config.flag("tie_word_embeddings", true)?,
        })
    }

    /// `T5Attention`: `q`, `k`, `v` and `o`, no biases, and the relative
    /// position bias when `relative` (`has_relative_attention_bias`).
    fn attention(&self, relative: bool) -> Result<Params> {
        let inner = product(&[self.heads, self.head_dim])?;
        let mut attention = Params::new();
        for projection in ["q", "k", "v"] {
            attention.linear(projection, self.hidden, inner, false, Role::Attention)?;
        }
        attention.linear("o", inner, self.hidden, false, Role::Attention)?;
        if relative {
            attention.embedding("relative_attention_bias", self.buckets, self.heads)?;
        }
        Ok(attention)
    }

    /// `T5LayerFF`: `DenseReluDense` (`T5DenseActDense` or
    /// `T5DenseGatedActDense`) and its `layer_norm`.
    fn feed_forward(&self) -> Result<Params> {
        let (hidden, intermediate) = (self.hidden, self.intermediate);
        let mut layer = Params::new();
        let inputs: &[&str] = if self.gated {
            &["wi_0", "wi_1"]
        } else {
            &["wi"]
        };
        for input in inputs {
            layer.linear(
                &format!("DenseReluDense.{input}"),
                hidden,
                intermediate,
                false,
                Role::Mlp,
            )?;
        }
        layer.linear("DenseReluDense.wo", intermediate, hidden, false, Role::Mlp)?;
        layer.norm("layer_norm", vec![hidden], Norm::Weight)?;
        Ok(layer)
    }

    /// `T5Block` number `index` of the encoder (`decoder` false) or decoder.
    fn block(&self, index: u64, decoder: bool) -> Result<Params> {
        let relative = index == 0 || self.family == Family::Umt5;
        let mut block = Params::new();
        let mut self_attention = Params::new();
        self_attention.mount("SelfAttention", self.attention(relative)?);
        self_attention.norm("layer_norm", vec![self.hidden], Norm::Weight)?;
        block.mount("layer.0", self_attention);
        if decoder {
            let mut cross = Params::new();
            cross.mount("EncDecAttention", self.attention(false)?);
            cross.norm("layer_norm", vec![self.hidden], Norm::Weight)?;
            block.mount("layer.1", cross);
            block.mount("layer.2", self.feed_forward()?);
        } else {
            block.mount("layer.1", self.feed_forward()?);
        }
        Ok(block)
    }

    /// A `T5Stack` without its (shared) token embedding.
    fn stack(&self, decoder: bool) -> Result<Params> {
        let count = if decoder {
            self.decoder_layers
        } else {
            self.encoder_layers
        };
        let mut stack = Params::new();
        write_stack(&mut stack, "block", count, |index| {
            self.block(index, decoder)
        })?;
        stack.norm("final_layer_norm", vec![self.hidden], Norm::Weight)?;
        Ok(stack)
    }

    /// `shared`, the encoder and, unless `encoder_only`, the decoder.
    fn body(&self, encoder_only: bool) -> Result<Params> {
        let mut body = Params::new();
        body.embedding("shared", self.vocab, self.hidden)?;
        body.mount("encoder", self.stack(false)?);
        if !encoder_only {
            body.mount("decoder", self.stack(true)?);
        }
        Ok(body)
    }

    /// The model transformers' auto class for `task` builds: seq2seq
    /// (`*ForConditionalGeneration`, the default), embedding (`*Model`),
    /// seq-cls:N (`*ForSequenceClassification`: the model as `transformer`
    /// and `classification_head.{dense,out_proj}`, biased) and token-cls:N
    /// (`*ForTokenClassification`: the encoder alone as `transformer` and a
    /// biased `classifier`).
    pub fn describe(&self, task: Task) -> Result<Decoder> {
        let (model_type, class) = self.family.names();
        let hidden = self.hidden;
        let mut params = Params::new();
        match task {
            Task::Seq2Seq => {
                params = self.body(false)?;
                if self.untied_head {
                    params.output_head(self.vocab, hidden, false, false)?;
                }
            }
            Task::Embedding => params = self.body(false)?,
            Task::SequenceClassification { labels } => {
                params.mount("transformer", self.body(false)?);
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
            Task::TokenClassification { labels } => {
                params.mount("transformer", self.body(true)?);
                params.linear("classifier", hidden, labels, true, Role::OutputHead)?;
            }
            Task::CausalLm | Task::MaskedLm => {
                return Err(refused(
                    model_type,
                    task,
                    &format!(
                        "seq2seq (the default: {class}ForConditionalGeneration), embedding ({class}Model), seq-cls:N or token-cls:N"
                    ),
                ));
            }
        }
        Ok(whole(params))
    }
}

/// The model a `t5` config's task builds.
pub fn describe(config: &Config, task: Task) -> Result<Decoder> {
    T5::read(config, Family::T5)?.describe(task)
}

/// The model an `mt5` config's task builds.
pub fn describe_mt5(config: &Config, task: Task) -> Result<Decoder> {
    T5::read(config, Family::Mt5)?.describe(task)
}

/// The model a `umt5` config's task builds.
pub fn describe_umt5(config: &Config, task: Task) -> Result<Decoder> {
    T5::read(config, Family::Umt5)?.describe(task)
}

/// The sizes and kinds the seq2seq activation model needs for
/// `T5ForConditionalGeneration` (`seq2seq`, the only task whose loss
/// transformers computes for T5 and whose saved tensors are measured):
/// `relu`, `gated-gelu` and `gated-silu` feed-forwards, and
/// `dropout_rate` on the embeddings, every block's output, the attention
/// probabilities and inside the feed-forward.
pub fn dimensions(config: &Config, task: Task) -> Result<Dimensions> {
    if task != Task::Seq2Seq {
        return Err(Error::InvalidValue {
            what: "--task",
            value: task.to_string(),
            reason: "activations of `t5` are modelled for seq2seq (T5ForConditionalGeneration)"
                .to_string(),
        });
    }
    let t5 = T5::read(config, Family::T5)?;
    let feed_forward = match (t5.gated, t5.activation) {
        (false, "relu") => Seq2SeqFeedForward::Relu,
        (true, "gelu_new") => Seq2SeqFeedForward::GatedNewGelu,
        (true, "silu") => Seq2SeqFeedForward::GatedSilu,
        _ => {
            return Err(Error::InvalidConfig {
                key: "feed_forward_proj".to_string(),
                problem: "this feed-forward's saved tensors are not measured; accepted for activation memory: relu, gated-gelu, gated-silu".to_string(),
            });
        }
    };
    let dropout = config.fraction("dropout_rate", 0.1)? > 0.0;
    product(&[t5.heads, t5.head_dim])?;
    Ok(Dimensions {
        model_type: "t5".to_string(),
        layers: t5.encoder_layers.saturating_add(t5.decoder_layers),
        hidden: t5.hidden,
        intermediate: t5.intermediate,
        heads: t5.heads,
        kv_heads: t5.heads,
        head_dim: t5.head_dim,
        vocab: t5.vocab,
        tied_embeddings: !t5.untied_head,
        norm: NormKind::RmsNorm,
        layout: LayerLayout::PreNorm,
        qkv: QkvLayout::Separate,
        qk_norm: QkNormKind::None,
        softmax: EagerSoftmax::ModelDtype,
        mlp: if t5.gated {
            MlpKind::Gated
        } else {
            MlpKind::Gelu
        },
        experts: None,
        positions: Positions::Learned,
        dropout: Dropout {
            attention: dropout,
            residual: dropout,
            embedding: dropout,
        },
        softcap: Softcap::default(),
        mask_positional: false,
        linears: Linears {
            attention_input: vec!["q", "k", "v"],
            attention_output: "o",
            mlp_input: if t5.gated {
                vec!["wi_0", "wi_1"]
            } else {
                vec!["wi"]
            },
            mlp_output: "wo",
            conv1d: false,
        },
        encoder: None,
        images: None,
        encoder_decoder: Some(EncoderDecoder {
            family: Seq2SeqFamily::T5,
            encoder_layers: t5.encoder_layers,
            decoder_layers: t5.decoder_layers,
            encoder_heads: t5.heads,
            decoder_heads: t5.heads,
            head_dim: t5.head_dim,
            encoder_intermediate: t5.intermediate,
            decoder_intermediate: t5.intermediate,
            feed_forward,
            dropout,
            attention_dropout: dropout,
            activation_dropout: dropout,
            mel_bins: 0,
            source_positions: None,
            target_positions: None,
        }),
        state_space: None,
    })
}
