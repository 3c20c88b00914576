//! BERT, following transformers' `models/bert/configuration_bert.py`
//! (`BertConfig`) and `modeling_bert.py` (`BertModel`, `BertForMaskedLM`,
//! `BertForSequenceClassification`, `BertForTokenClassification`).

use super::config::Config;
use super::encoder::{Encoder, MaskedLmHead, Naming, SequenceHead};
use crate::error::Result;

/// `BertConfig.vocab_size`: the uncased WordPiece vocabulary.
const VOCAB: u64 = 30522;

/// BERT's module names: the body as `bert`, positions right after the word
/// embeddings, `cls.predictions` (`BertOnlyMLMHead`) for masked-LM, and the
/// pooler with a `classifier` for sequence classification.
const NAMING: Naming = Naming {
    model_type: "bert",
    base: "bert",
    task_layers: "bert.encoder.layer",
    positions_after_norm: false,
    masked_lm: MaskedLmHead {
        prefix: "cls.predictions",
        dense: "transform.dense",
        norm: "transform.LayerNorm",
    },
    head_follows_hidden_act: true,
    sequence_head: SequenceHead::Pooled,
};

/// A BERT encoder read from its config.json.
pub fn encoder(config: &Config) -> Result<Encoder> {
    Encoder::read(config, NAMING, VOCAB)
}
