//! What a model is trained to do, and so which head transformers puts on
//! top of its body: `--task causal-lm|masked-lm|seq-cls:N|token-cls:N|seq2seq|embedding`.
//!
//! Each task is one of transformers' auto classes:
//! `AutoModelForCausalLM`, `AutoModelForMaskedLM`,
//! `AutoModelForSequenceClassification` (with `num_labels = N`),
//! `AutoModelForTokenClassification` (likewise), `AutoModelForSeq2SeqLM` and
//! the bare `AutoModel`.

use std::fmt;

use serde::{Serialize, Serializer};

use crate::error::{Error, Result};

/// The most labels a classification head may have. Real classifiers have a
/// few to a few thousand (ImageNet-21k's 21,841 classes); a head wider than
/// a large vocabulary is a typo.
pub const MAX_LABELS: u64 = 1 << 20;

/// The spellings `--task` accepts, for messages.
pub const TASKS_ACCEPTED: &str =
    "causal-lm, masked-lm, seq-cls:N, token-cls:N, seq2seq or embedding (N: the number of labels)";

/// A training task: the auto class whose head the model gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Task {
    /// `AutoModelForCausalLM`: next-token prediction over the vocabulary.
    CausalLm,
    /// `AutoModelForMaskedLM`: masked-token prediction over the vocabulary.
    MaskedLm,
    /// `AutoModelForSequenceClassification`: one of `labels` classes per sequence.
    SequenceClassification {
        /// `num_labels`.
        labels: u64,
    },
    /// `AutoModelForTokenClassification`: one of `labels` classes per token.
    TokenClassification {
        /// `num_labels`.
        labels: u64,
    },
    /// `AutoModelForSeq2SeqLM`: an encoder-decoder's generation head.
    Seq2Seq,
    /// `AutoModel`: the bare model, its hidden states (and pooler, where
    /// the architecture has one) as the output.
    Embedding,
}

impl Task {
    /// Reads a `--task` value.
    pub fn parse(text: &str) -> Result<Task> {
        let invalid = |reason: String| Error::InvalidValue {
            what: "--task",
            value: text.to_string(),
            reason,
        };
        let labels = |count: &str| -> Result<u64> {
            let labels: u64 = count.parse().map_err(|_| {
                invalid(format!(
                    "`{count}` is not a number of labels; accepted: {TASKS_ACCEPTED}"
                ))
            })?;
            if labels == 0 || labels > MAX_LABELS {
                return Err(invalid(format!(
                    "a classifier needs from 1 to {MAX_LABELS} labels"
                )));
            }
            Ok(labels)
        };
        match text.split_once(':') {
            None => match text {
                "causal-lm" => Ok(Task::CausalLm),
                "masked-lm" => Ok(Task::MaskedLm),
                "seq2seq" => Ok(Task::Seq2Seq),
                "embedding" => Ok(Task::Embedding),
                "seq-cls" | "token-cls" => Err(invalid(format!(
                    "a classifier needs its number of labels, such as `{text}:2`"
                ))),
                _ => Err(invalid(format!("accepted: {TASKS_ACCEPTED}"))),
            },
            Some(("seq-cls", count)) => Ok(Task::SequenceClassification {
                labels: labels(count)?,
            }),
            Some(("token-cls", count)) => Ok(Task::TokenClassification {
                labels: labels(count)?,
            }),
            Some(_) => Err(invalid(format!("accepted: {TASKS_ACCEPTED}"))),
        }
    }

    /// The transformers auto class that builds the model for this task.
    pub fn auto_class(self) -> &'static str {
        match self {
            Task::CausalLm => "AutoModelForCausalLM",
            Task::MaskedLm => "AutoModelForMaskedLM",
            Task::SequenceClassification { .. } => "AutoModelForSequenceClassification",
            Task::TokenClassification { .. } => "AutoModelForTokenClassification",
            Task::Seq2Seq => "AutoModelForSeq2SeqLM",
            Task::Embedding => "AutoModel",
        }
    }
}

impl fmt::Display for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Task::CausalLm => f.write_str("causal-lm"),
            Task::MaskedLm => f.write_str("masked-lm"),
            Task::SequenceClassification { labels } => write!(f, "seq-cls:{labels}"),
            Task::TokenClassification { labels } => write!(f, "token-cls:{labels}"),
            Task::Seq2Seq => f.write_str("seq2seq"),
            Task::Embedding => f.write_str("embedding"),
        }
    }
}

/// As its `--task` spelling.
impl Serialize for Task {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_reads_back_as_written() {
        for text in [
            "causal-lm",
            "masked-lm",
            "seq-cls:3",
            "token-cls:9",
            "seq2seq",
            "embedding",
        ] {
            assert_eq!(Task::parse(text).unwrap().to_string(), text);
        }
        assert_eq!(
            Task::parse("seq-cls:2").unwrap(),
            Task::SequenceClassification { labels: 2 }
        );
    }

    #[test]
    fn bad_tasks_are_refused_with_what_is_accepted() {
        for (text, expected) in [
            ("seq-cls", "needs its number of labels, such as `seq-cls:2`"),
            ("token-cls:0", "from 1 to 1048576 labels"),
            ("seq-cls:1048577", "from 1 to 1048576 labels"),
            ("seq-cls:-1", "`-1` is not a number of labels"),
            ("seq-cls:two", "`two` is not a number of labels"),
            ("mlm", "accepted: causal-lm, masked-lm"),
            ("causal-lm:2", "accepted: causal-lm, masked-lm"),
            ("", "accepted: causal-lm"),
        ] {
            let message = Task::parse(text).unwrap_err().to_string();
            assert!(message.starts_with("invalid --task"), "{message}");
            assert!(message.contains(expected), "{text}: {message}");
        }
    }
}
