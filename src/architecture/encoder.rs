//! The BERT-style encoder most encoders share, described as data, and the
//! heads transformers puts on it for each task.
//!
//! transformers' `BertModel` (`models/bert/modeling_bert.py`) and its copies
//! (`RobertaModel`, ...) register `embeddings` (word, position and token-type
//! embeddings and a LayerNorm), `encoder.layer.{i}` (post-norm layers:
//! `attention.self.{query,key,value}`, `attention.output.{dense,LayerNorm}`,
//! `intermediate.dense`, `output.{dense,LayerNorm}`, every linear with a
//! bias) and, in the bare `AutoModel`, a `pooler.dense`. A task model
//! mounts that body under its own attribute (`bert`, `roberta`) and adds its
//! head. An architecture file reads its config into an [`Encoder`] and
//! names its heads with a [`Naming`]; this file lays them out.

use super::config::{Config, exact_ratio};
use super::decoder::{Decoder, Layers};
use super::dimensions::{
    Dimensions, Dropout, EagerSoftmax, EncoderHead, EncoderParts, LayerLayout, Linears, MlpKind,
    NormKind, Positions, QkNormKind, QkvLayout, Softcap,
};
use super::params::{Norm, Params};
use super::task::Task;
use crate::error::{Error, Result};
use crate::model::Role;

/// How one encoder family names its modules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Naming {
    /// The `model_type`, for messages.
    pub model_type: &'static str,
    /// The body's attribute in a task model: `bert`, `roberta`.
    pub base: &'static str,
    /// The layer list inside a task model: `bert.encoder.layer`.
    pub task_layers: &'static str,
    /// Whether `position_embeddings` is registered after the embedding
    /// LayerNorm (RoBERTa) rather than after the word embeddings (BERT).
    pub positions_after_norm: bool,
    /// The masked-LM head.
    pub masked_lm: MaskedLmHead,
    /// The sequence-classification head.
    pub sequence_head: SequenceHead,
    /// Whether the masked-LM transform's activation is `hidden_act`
    /// (`BertPredictionHeadTransform`) rather than always `gelu`
    /// (`RobertaLMHead`).
    pub head_follows_hidden_act: bool,
}

/// The masked-LM head's names: BERT's `cls.predictions` with
/// `transform.dense` and `transform.LayerNorm`; RoBERTa's `lm_head` with
/// `dense` and `layer_norm`. Both have an output-only `bias` [vocab] and a
/// `decoder` linear tied to the word embeddings (and its bias to `bias`)
/// unless `tie_word_embeddings` is false.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaskedLmHead {
    /// The head module.
    pub prefix: &'static str,
    /// Its hidden-to-hidden linear, relative to the head.
    pub dense: &'static str,
    /// Its LayerNorm, relative to the head.
    pub norm: &'static str,
}

/// How a sequence classifier reads the sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceHead {
    /// BERT: the body keeps its `pooler.dense` (tanh over the first
    /// token) and `classifier` maps it to the labels.
    Pooled,
    /// RoBERTa: no pooler; `classifier.dense` then `classifier.out_proj`
    /// over the first token (`RobertaClassificationHead`).
    DenseOnFirstToken,
}

/// A BERT-style encoder's sizes, read from its config.json.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Encoder {
    /// The family's module names.
    pub naming: Naming,
    /// `vocab_size`.
    pub vocab: u64,
    /// `hidden_size`.
    pub hidden: u64,
    /// `num_hidden_layers`.
    pub layers: u64,
    /// `intermediate_size`.
    pub intermediate: u64,
    /// `max_position_embeddings`.
    pub positions: u64,
    /// `type_vocab_size`.
    pub token_types: u64,
    /// `tie_word_embeddings`.
    pub tied: bool,
}

/// The `hidden_act` values whose saved tensors are modelled, and how:
/// `gelu` is `GELUActivation` (one kernel, `GeluBackward0` saves its
/// input), `gelu_new` GPT-2's `NewGELUActivation` in Python.
const ACTIVATIONS: &[(&str, MlpKind)] = &[("gelu", MlpKind::Gelu), ("gelu_new", MlpKind::NewGelu)];

/// The task an encoder trains for when `--task` is not given.
pub const DEFAULT_TASK: Task = Task::MaskedLm;

/// What an encoder accepts, for the message refusing another task.
pub(super) const ENCODER_TASKS: &str =
    "masked-lm (the default), seq-cls:N, token-cls:N or embedding";

impl Encoder {
    /// Reads the keys `BertConfig` declares (and `RobertaConfig` copies),
    /// with their defaults; `vocab` is the family's default `vocab_size`.
    /// `hidden_size` must be a multiple of `num_attention_heads`, as
    /// `BertSelfAttention` requires. A config that makes the encoder a
    /// decoder (`is_decoder`, `add_cross_attention`) is refused: its causal
    /// mask and cross-attention are not modelled.
    pub fn read(config: &Config, naming: Naming, vocab: u64) -> Result<Encoder> {
        for key in ["is_decoder", "add_cross_attention"] {
            if config.flag(key, false)? {
                return Err(Error::InvalidConfig {
                    key: key.to_string(),
                    problem: format!(
                        "`true` makes `{}` a decoder, which trainmem does not model; accepted: false (a bidirectional encoder)",
                        naming.model_type
                    ),
                });
            }
        }
        let hidden = config.size("hidden_size", 768)?;
        exact_ratio(
            hidden,
            config.size("num_attention_heads", 12)?,
            "num_attention_heads",
        )?;
        Ok(Encoder {
            naming,
            vocab: config.size("vocab_size", vocab)?,
            hidden,
            layers: config.size("num_hidden_layers", 12)?,
            intermediate: config.size("intermediate_size", 3072)?,
            positions: config.size("max_position_embeddings", 512)?,
            token_types: config.size("type_vocab_size", 2)?,
            tied: config.flag("tie_word_embeddings", true)?,
        })
    }

    /// The sizes and kinds activation memory needs for `task`: post-norm
    /// layers (`BertSelfOutput` and `BertOutput` apply their LayerNorm to
    /// the residual sum), separate q/k/v, eager attention's softmax in the
    /// model dtype, the `hidden_act` MLP, and the dropouts of
    /// `attention_probs_dropout_prob` (on the probabilities) and
    /// `hidden_dropout_prob` (embeddings, both block outputs; the
    /// classifiers' too unless `classifier_dropout` is set), all 0.1 by
    /// default. The bare `embedding` task has no loss of transformers'
    /// own, and so no activation model.
    pub fn dimensions(&self, config: &Config, task: Task) -> Result<Dimensions> {
        let naming = &self.naming;
        let heads = config.size("num_attention_heads", 12)?;
        let head_dim = exact_ratio(self.hidden, heads, "num_attention_heads")?;
        let activation = config.string("hidden_act", Some("gelu"))?.unwrap_or("gelu");
        let mlp = ACTIVATIONS
            .iter()
            .find(|(name, _)| *name == activation)
            .map(|(_, kind)| *kind)
            .ok_or_else(|| Error::InvalidConfig {
                key: "hidden_act".to_string(),
                problem: format!(
                    "`{activation}` is not modelled for activation memory; accepted: gelu, gelu_new"
                ),
            })?;
        let hidden_dropout = config.fraction("hidden_dropout_prob", 0.1)? > 0.0;
        let classifier_dropout = match config.optional_number("classifier_dropout", None)? {
            Some(probability) => probability > 0.0,
            None => hidden_dropout,
        };
        let head = match task {
            Task::MaskedLm => EncoderHead::MaskedLm,
            Task::SequenceClassification { labels } => match naming.sequence_head {
                SequenceHead::Pooled => EncoderHead::PooledClassifier {
                    labels,
                    dropout: classifier_dropout,
                },
                SequenceHead::DenseOnFirstToken => EncoderHead::DenseClassifier {
                    labels,
                    dropout: classifier_dropout,
                },
            },
            Task::TokenClassification { labels } => EncoderHead::TokenClassifier {
                labels,
                dropout: classifier_dropout,
            },
            Task::Embedding | Task::CausalLm | Task::Seq2Seq => {
                return Err(Error::InvalidValue {
                    what: "--task",
                    value: task.to_string(),
                    reason: format!(
                        "activations of `{}` are modelled for masked-lm, seq-cls:N and token-cls:N, whose loss transformers computes",
                        naming.model_type
                    ),
                });
            }
        };
        Ok(Dimensions {
            model_type: naming.model_type.to_string(),
            layers: self.layers,
            hidden: self.hidden,
            intermediate: self.intermediate,
            heads,
            kv_heads: heads,
            head_dim,
            vocab: self.vocab,
            tied_embeddings: self.tied,
            norm: NormKind::LayerNorm,
            layout: LayerLayout::PostNorm,
            qkv: QkvLayout::Separate,
            qk_norm: QkNormKind::None,
            softmax: EagerSoftmax::ModelDtype,
            mlp,
            experts: None,
            positions: Positions::Learned,
            dropout: Dropout {
                attention: config.fraction("attention_probs_dropout_prob", 0.1)? > 0.0,
                residual: hidden_dropout,
                embedding: hidden_dropout,
            },
            softcap: Softcap::default(),
            mask_positional: false,
            linears: Linears {
                attention_input: vec!["query", "key", "value"],
                attention_output: "attention.output.dense",
                mlp_input: vec!["intermediate.dense"],
                mlp_output: "output.dense",
                conv1d: false,
            },
            encoder: Some(EncoderParts {
                token_types_per_token: naming.positions_after_norm,
                positions_from_ids: naming.positions_after_norm,
                head_activation: if naming.head_follows_hidden_act {
                    mlp
                } else {
                    MlpKind::Gelu
                },
                head,
                pixels: 0,
                pixels_norm: false,
            }),
            images: None,
            encoder_decoder: None,
            state_space: None,
        })
    }

    /// The model transformers' auto class for `task` builds.
    pub fn decoder(&self, task: Task) -> Result<Decoder> {
        let naming = &self.naming;
        let refused = |why: &str| Error::InvalidValue {
            what: "--task",
            value: task.to_string(),
            reason: format!(
                "{why}; accepted for `{}`: {ENCODER_TASKS}",
                naming.model_type
            ),
        };
        let bare = match task {
            Task::Embedding => true,
            Task::MaskedLm
            | Task::SequenceClassification { .. }
            | Task::TokenClassification { .. } => false,
            Task::CausalLm => {
                return Err(refused(&format!(
                    "`{}` is a bidirectional encoder; its causal use (`is_decoder`) is not modelled",
                    naming.model_type
                )));
            }
            Task::Seq2Seq => {
                return Err(refused(&format!(
                    "`{}` is an encoder without a decoder; AutoModelForSeq2SeqLM has no class for it",
                    naming.model_type
                )));
            }
        };
        let within = |name: &str| {
            if bare {
                name.to_string()
            } else {
                format!("{}.{name}", naming.base)
            }
        };
        let hidden = self.hidden;

        let mut before_layers = Params::new();
        before_layers.embedding(&within("embeddings.word_embeddings"), self.vocab, hidden)?;
        if !naming.positions_after_norm {
            before_layers.embedding(
                &within("embeddings.position_embeddings"),
                self.positions,
                hidden,
            )?;
        }
        before_layers.embedding(
            &within("embeddings.token_type_embeddings"),
            self.token_types,
            hidden,
        )?;
        before_layers.norm(
            &within("embeddings.LayerNorm"),
            vec![hidden],
            Norm::WeightAndBias,
        )?;
        if naming.positions_after_norm {
            before_layers.embedding(
                &within("embeddings.position_embeddings"),
                self.positions,
                hidden,
            )?;
        }

        let mut after_layers = Params::new();
        let pooler = match task {
            Task::Embedding => true,
            Task::SequenceClassification { .. } => naming.sequence_head == SequenceHead::Pooled,
            _ => false,
        };
        if pooler {
            after_layers.linear(
                &within("pooler.dense"),
                hidden,
                hidden,
                true,
                Role::OutputHead,
            )?;
        }
        match task {
            Task::MaskedLm => self.masked_lm_head(&mut after_layers)?,
            Task::SequenceClassification { labels } => match naming.sequence_head {
                SequenceHead::Pooled => {
                    after_layers.linear("classifier", hidden, labels, true, Role::OutputHead)?;
                }
                SequenceHead::DenseOnFirstToken => {
                    after_layers.linear(
                        "classifier.dense",
                        hidden,
                        hidden,
                        true,
                        Role::OutputHead,
                    )?;
                    after_layers.linear(
                        "classifier.out_proj",
                        hidden,
                        labels,
                        true,
                        Role::OutputHead,
                    )?;
                }
            },
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
                    naming.task_layers
                },
                self.layers,
                "num_hidden_layers",
                self.layer()?,
            ),
            after_layers,
        })
    }

    /// `BertLayer`: self-attention with its output projection and
    /// LayerNorm, then the intermediate and output linears and LayerNorm.
    fn layer(&self) -> Result<Params> {
        let (hidden, intermediate) = (self.hidden, self.intermediate);
        let mut layer = Params::new();
        for projection in ["query", "key", "value"] {
            layer.linear(
                &format!("attention.self.{projection}"),
                hidden,
                hidden,
                true,
                Role::Attention,
            )?;
        }
        output_blocks(&mut layer, hidden, intermediate)?;
        Ok(layer)
    }

    /// The masked-LM head: the output-only bias, the transform's dense and
    /// LayerNorm, and the decoder unless it is tied to the word embeddings.
    fn masked_lm_head(&self, params: &mut Params) -> Result<()> {
        let head = self.naming.masked_lm;
        let name = |part: &str| format!("{}.{part}", head.prefix);
        params.tensor(name("bias"), vec![self.vocab], Role::OutputHead)?;
        params.linear(
            &name(head.dense),
            self.hidden,
            self.hidden,
            true,
            Role::OutputHead,
        )?;
        params.norm(&name(head.norm), vec![self.hidden], Norm::WeightAndBias)?;
        if !self.tied {
            params.linear(
                &name("decoder"),
                self.hidden,
                self.vocab,
                true,
                Role::OutputHead,
            )?;
        }
        Ok(())
    }
}

/// Whether `task` builds the bare body of the masked-LM encoder
/// `model_type` (`embedding`) rather than the body under a head (masked-LM,
/// the classifiers); causal-lm and seq2seq are refused, as transformers has
/// no class for them (DeBERTa-v2, ModernBERT).
pub(super) fn is_bare_body(task: Task, model_type: &str) -> Result<bool> {
    match task {
        Task::Embedding => Ok(true),
        Task::MaskedLm | Task::SequenceClassification { .. } | Task::TokenClassification { .. } => {
            Ok(false)
        }
        Task::CausalLm | Task::Seq2Seq => Err(Error::InvalidValue {
            what: "--task",
            value: task.to_string(),
            reason: format!(
                "`{model_type}` is a bidirectional encoder; transformers has no {} class for it; accepted for `{model_type}`: {ENCODER_TASKS}",
                task.auto_class()
            ),
        }),
    }
}

/// What BERT and DeBERTa-v2 build after the self-attention's projections:
/// the attention output projection and LayerNorm (`BertSelfOutput`,
/// `DebertaV2SelfOutput`), the intermediate linear (`BertIntermediate`) and
/// the output linear and LayerNorm (`BertOutput`).
pub(super) fn output_blocks(layer: &mut Params, hidden: u64, intermediate: u64) -> Result<()> {
    layer.linear(
        "attention.output.dense",
        hidden,
        hidden,
        true,
        Role::Attention,
    )?;
    layer.norm(
        "attention.output.LayerNorm",
        vec![hidden],
        Norm::WeightAndBias,
    )?;
    layer.linear("intermediate.dense", hidden, intermediate, true, Role::Mlp)?;
    layer.linear("output.dense", intermediate, hidden, true, Role::Mlp)?;
    layer.norm("output.LayerNorm", vec![hidden], Norm::WeightAndBias)
}
