//! Reading a config.json's [`Dimensions`] with the transformers class
//! defaults. The types themselves are the model layer's
//! ([`crate::model::dimensions`]), re-exported here under their old path.

use serde_json::Value;

use super::config::Config;
use crate::error::{Error, Result};
pub use crate::model::dimensions::*;

/// Reads one architecture's dimensions.
pub type Measure = fn(&Config) -> Result<Dimensions>;

/// The dimensions of the model a config.json describes, trained for its
/// model type's default task.
pub fn dimensions(config: &Value) -> Result<Dimensions> {
    let config = Config::new(config)?;
    let model_type = config.model_type()?.unwrap_or("");
    if let Some((_, read)) = super::ENCODERS
        .iter()
        .find(|(known, _)| *known == model_type)
    {
        return read(&config)?.dimensions(&config, super::encoder::DEFAULT_TASK);
    }
    if model_type == "llava" {
        return super::llava::dimensions(&config);
    }
    let measured = supported_for_activations;
    let measure = super::ARCHITECTURES
        .iter()
        .find(|(known, _, _)| *known == model_type)
        .and_then(|(_, _, measure)| *measure)
        .ok_or_else(|| Error::UnsupportedModelType {
            model_type: model_type.to_string(),
            supported: format!("{} (for activation memory)", measured().join(", ")),
        })?;
    measure(&config)
}

/// The model_types whose activation memory trainmem models, alphabetically.
pub fn supported_for_activations() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = super::ARCHITECTURES
        .iter()
        .filter(|(_, _, measure)| measure.is_some())
        .map(|(name, _, _)| *name)
        .chain(super::ENCODERS.iter().map(|(name, _)| *name))
        .chain(["bart", "clip", "llava", "t5", "vit", "whisper"])
        .collect();
    names.sort_unstable();
    names
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn generic_is_a_llama_and_checks_heads() {
        let dims = Dimensions::generic(32, 4096, 32, 8, 14336, 128256).unwrap();
        assert_eq!(dims.head_dim, 128);
        assert_eq!(dims.qkv, QkvLayout::Separate);
        assert!(Dimensions::generic(32, 4096, 0, 8, 14336, 128256).is_err());
        assert!(Dimensions::generic(32, 4096, 30, 8, 14336, 128256).is_err());
        assert!(Dimensions::generic(32, 4096, 32, 12, 14336, 128256).is_err());
        assert!(Dimensions::generic(32, 4096, 32, 64, 14336, 128256).is_err());
    }

    #[test]
    fn missing_keys_take_the_class_defaults() {
        let llama = dimensions(&json!({"model_type": "llama"})).unwrap();
        assert_eq!(
            (
                llama.layers,
                llama.hidden,
                llama.intermediate,
                llama.heads,
                llama.kv_heads
            ),
            (32, 4096, 11008, 32, 32)
        );
        assert_eq!(
            (llama.head_dim, llama.vocab, llama.tied_embeddings),
            (128, 32000, false)
        );
        let gemma2 = dimensions(&json!({"model_type": "gemma2"})).unwrap();
        assert_eq!(gemma2.head_dim, 256);
        assert_eq!(
            gemma2.softcap,
            Softcap {
                attention: true,
                logits: true
            }
        );
        assert!(gemma2.tied_embeddings);
        let gpt2 = dimensions(&json!({"model_type": "gpt2"})).unwrap();
        assert_eq!(
            (gpt2.hidden, gpt2.intermediate, gpt2.heads),
            (768, 3072, 12)
        );
        assert_eq!(
            gpt2.dropout,
            Dropout {
                attention: true,
                residual: true,
                embedding: true
            }
        );
        assert_eq!(gpt2.mlp, MlpKind::NewGelu);
        let neox = dimensions(
            &json!({"model_type": "gpt_neox", "hidden_size": 64, "num_attention_heads": 4}),
        )
        .unwrap();
        assert_eq!(
            neox.positions,
            Positions::Rotary {
                width: 4,
                fp32_tables: false,
                tables: 1,
                concatenated: true,
            }
        );
        assert_eq!(neox.layout, LayerLayout::ParallelResidual);
    }

    #[test]
    fn experts_are_read_with_their_routing() {
        let qwen = dimensions(
            &json!({"model_type": "qwen3_moe", "num_hidden_layers": 4, "mlp_only_layers": [1]}),
        )
        .unwrap();
        let moe = qwen.experts.as_ref().unwrap();
        assert_eq!((moe.experts, moe.top_k, moe.intermediate), (128, 8, 768));
        assert_eq!(
            moe.router,
            Router::Softmax {
                renormalize: false,
                fp32_weights: false
            }
        );
        assert_eq!(qwen.sparse_layers_below(4), 3);
        assert!(!qwen.is_sparse(1));
        let deepseek =
            dimensions(&json!({"model_type": "deepseek_v3", "num_hidden_layers": 5})).unwrap();
        assert_eq!(deepseek.sparse_layers_below(5), 2);
        assert_eq!(deepseek.head_dim, 64);
        let moe = deepseek.experts.as_ref().unwrap();
        assert_eq!(moe.shared, SharedExpert::Plain { intermediate: 2048 });
        assert_eq!(moe.router, Router::Sigmoid { renormalize: true });
        let mixtral = dimensions(&json!({"model_type": "mixtral"})).unwrap();
        assert_eq!(mixtral.sparse_layers_below(32), 32);
    }

    #[test]
    fn gemma3_counts_its_rotary_tables() {
        let tables = |config: Value| match dimensions(&config).unwrap().positions {
            Positions::Rotary { tables, .. } => tables,
            Positions::Learned => 0,
        };
        assert_eq!(
            tables(json!({"model_type": "gemma3_text", "num_hidden_layers": 5})),
            1
        );
        assert_eq!(
            tables(json!({"model_type": "gemma3_text", "num_hidden_layers": 6})),
            2
        );
        assert_eq!(
            tables(
                json!({"model_type": "gemma3_text", "num_hidden_layers": 2, "layer_types": ["full_attention", "full_attention"]})
            ),
            1
        );
        assert!(
            dimensions(&json!({"model_type": "gemma3_text", "sliding_window_pattern": 0})).is_err()
        );
    }

    #[test]
    fn unmodelled_types_and_bad_values_are_errors() {
        match dimensions(&json!({"model_type": "bloom"})) {
            Err(Error::UnsupportedModelType {
                model_type,
                supported,
            }) => {
                assert_eq!(model_type, "bloom");
                assert!(supported.contains("llama"), "{supported}");
                assert!(!supported.contains("bloom"), "{supported}");
            }
            other => panic!("expected UnsupportedModelType, got {other:?}"),
        }
        assert!(dimensions(&json!({"model_type": "llama", "attention_dropout": 2})).is_err());
        assert!(dimensions(&json!({"model_type": "gpt2", "activation_function": 3})).is_err());
        assert!(dimensions(&json!([1])).is_err());
        assert!(supported_for_activations().contains(&"deepseek_v3"));
    }
}
