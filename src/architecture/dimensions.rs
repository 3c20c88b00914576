//! The sizes of a decoder that activation memory depends on, read from a
//! config.json with the transformers class defaults.

use serde::Serialize;
use serde_json::Value;

use crate::error::{Error, Result};

/// What activation memory needs to know of an architecture.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Dimensions {
    /// The HuggingFace `model_type` (`llama` for a generic decoder).
    pub model_type: String,
    /// Decoder layers.
    pub layers: u64,
    /// Hidden size h.
    pub hidden: u64,
    /// Dense MLP intermediate size f.
    pub intermediate: u64,
    /// Attention heads a.
    pub heads: u64,
    /// Key/value heads.
    pub kv_heads: u64,
    /// Head dimension d.
    pub head_dim: u64,
    /// Vocabulary V.
    pub vocab: u64,
    /// Whether the output head shares the token embedding.
    pub tied_embeddings: bool,
}

impl Dimensions {
    /// A llama-style decoder (RMSNorm, rotary, SwiGLU) of these sizes, for a
    /// bare parameter count given with architecture flags.
    pub fn generic(
        layers: u64,
        hidden: u64,
        heads: u64,
        kv_heads: u64,
        intermediate: u64,
        vocab: u64,
    ) -> Result<Dimensions> {
        if heads == 0 || !hidden.is_multiple_of(heads) {
            return Err(Error::InvalidValue {
                what: "--heads",
                value: heads.to_string(),
                reason: format!("must divide --hidden {hidden}"),
            });
        }
        Ok(Dimensions {
            model_type: "llama".to_string(),
            layers,
            hidden,
            intermediate,
            heads,
            kv_heads,
            head_dim: hidden / heads,
            vocab,
            tied_embeddings: false,
        })
    }
}

/// The dimensions of the model a config.json describes.
pub fn dimensions(config: &Value) -> Result<Dimensions> {
    let model_type = config
        .get("model_type")
        .and_then(Value::as_str)
        .unwrap_or("");
    Err(Error::UnsupportedModelType {
        model_type: model_type.to_string(),
        supported: "(activation dimensions are not built yet)".to_string(),
    })
}
