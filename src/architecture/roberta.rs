//! RoBERTa, following transformers' `models/roberta/configuration_roberta.py`
//! (`RobertaConfig`) and `modeling_roberta.py` (`RobertaModel`,
//! `RobertaForMaskedLM`, `RobertaForSequenceClassification`,
//! `RobertaForTokenClassification`).

use super::config::Config;
use super::encoder::{Encoder, MaskedLmHead, Naming, SequenceHead};
use crate::error::Result;

/// `RobertaConfig.vocab_size`: GPT-2's byte-level BPE plus RoBERTa's specials.
const VOCAB: u64 = 50265;

/// RoBERTa's module names: the body as `roberta`, `position_embeddings`
/// registered after the embedding LayerNorm (`RobertaEmbeddings`),
/// `lm_head` (`RobertaLMHead`: `dense`, `layer_norm`, `decoder`, `bias`)
/// for masked-LM, and `RobertaClassificationHead` (`classifier.dense`,
/// `classifier.out_proj`, no pooler) for sequence classification.
const NAMING: Naming = Naming {
    model_type: "roberta",
    base: "roberta",
    task_layers: "roberta.encoder.layer",
    positions_after_norm: true,
    masked_lm: MaskedLmHead {
        prefix: "lm_head",
        dense: "dense",
        norm: "layer_norm",
    },
    head_follows_hidden_act: false,
    sequence_head: SequenceHead::DenseOnFirstToken,
};

/// A RoBERTa encoder read from its config.json.
pub fn encoder(config: &Config) -> Result<Encoder> {
    Encoder::read(config, NAMING, VOCAB)
}
