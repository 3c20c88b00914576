//! Whose model code runs the architecture (`--implementation`): the
//! modules that autograd saves tensors for, and how the framework around
//! them first places the weights.

use serde::Serialize;

use crate::error::{Error, Result};

/// The library whose modules build the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Implementation {
    /// transformers' `modeling_*.py` (HF Trainer, accelerate, peft, TRL).
    #[default]
    Transformers,
    /// Lightning's litgpt (`litgpt/model.py` `GPT`, `Block`, `MLP`s).
    Litgpt,
    /// torchtune's `TransformerDecoder` (`torchtune/modules/`).
    Torchtune,
    /// torchtitan's `Transformer` (`torchtitan/models/llama3/model/model.py`).
    Torchtitan,
}

impl Implementation {
    /// Every implementation, in the order `--help` lists them.
    pub const ALL: [Implementation; 4] = [
        Implementation::Transformers,
        Implementation::Litgpt,
        Implementation::Torchtune,
        Implementation::Torchtitan,
    ];

    /// Reads `transformers`, `litgpt`, `torchtune` or `torchtitan`.
    pub fn parse(text: &str) -> Result<Implementation> {
        let name = text.trim().to_ascii_lowercase();
        Implementation::ALL
            .into_iter()
            .find(|implementation| implementation.name() == name)
            .ok_or_else(|| Error::UnknownName {
                kind: "implementation",
                name: text.to_string(),
                suggestion: match name.as_str() {
                    "hf" | "huggingface" | "trl" | "peft" | "accelerate" => {
                        Some("transformers".to_string())
                    }
                    "lit-gpt" | "lightning" => Some("litgpt".to_string()),
                    _ => None,
                },
                accepted: "transformers, litgpt, torchtune, torchtitan".to_string(),
            })
    }

    /// The name on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Implementation::Transformers => "transformers",
            Implementation::Litgpt => "litgpt",
            Implementation::Torchtune => "torchtune",
            Implementation::Torchtitan => "torchtitan",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_reads_back() {
        for implementation in Implementation::ALL {
            assert_eq!(
                Implementation::parse(implementation.name()).unwrap(),
                implementation
            );
        }
        assert!(Implementation::parse("lit-gpt").is_err());
    }
}
