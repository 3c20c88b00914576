//! `--freeze PATTERN`: tensors that full fine-tuning leaves untouched.

use crate::architecture::part_prefixes;
use crate::error::{Error, Result};
use crate::model::Model;

/// The model with every tensor whose name matches a pattern frozen. A
/// pattern with `*` is a glob over the whole name (`*.embed_tokens.*`,
/// `model.layers.[0-9].*` is not supported); without, a substring
/// (`embed_tokens`). On a vision-language model the part names
/// `vision_tower`, `multi_modal_projector` and `language_model` stand for
/// that model's own prefixes (Qwen2-VL's `model.visual.blocks`, Mllama's
/// `model.vision_model`; see [`crate::architecture::PARTS`]). A pattern
/// matching nothing is an error, and so is an empty one, which would
/// freeze everything; a repeated pattern freezes nothing more.
pub fn freeze(mut model: Model, patterns: &[String]) -> Result<Model> {
    for pattern in patterns {
        if pattern.trim().is_empty() {
            return Err(Error::InvalidValue {
                what: "--freeze pattern",
                value: pattern.clone(),
                reason: "an empty pattern would match every tensor; give a name such as `embed_tokens` or a glob such as `*.layers.0.*`".to_string(),
            });
        }
        let part = model
            .model_type
            .as_deref()
            .and_then(|model_type| part_prefixes(model_type, pattern));
        let mut matched = 0usize;
        for tensor in &mut model.tensors {
            let hit = match part {
                Some(prefixes) => prefixes
                    .iter()
                    .any(|prefix| tensor.name.starts_with(prefix)),
                None => matches(&tensor.name, pattern),
            };
            if hit {
                tensor.trainable = false;
                matched += 1;
            }
        }
        if matched == 0 {
            return Err(Error::InvalidValue {
                what: "--freeze pattern",
                value: pattern.clone(),
                reason: format!(
                    "matches no tensor of {} (see `trainmem params MODEL --tensors`)",
                    model.name
                ),
            });
        }
    }
    Ok(model)
}

/// Whether `name` matches `pattern`: a glob when it holds `*`, else a substring.
fn matches(name: &str, pattern: &str) -> bool {
    if !pattern.contains('*') {
        return name.contains(pattern);
    }
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || name.len() < first.len() + last.len() || !name.ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_and_substrings() {
        assert!(matches("model.embed_tokens.weight", "embed_tokens"));
        assert!(matches(
            "model.layers.3.mlp.up_proj.weight",
            "model.layers.*.mlp.*"
        ));
        assert!(matches("model.layers.3.mlp.up_proj.weight", "*up_proj*"));
        assert!(!matches(
            "model.layers.3.self_attn.q_proj.weight",
            "model.layers.*.mlp.*"
        ));
        assert!(!matches("ab", "a*b*c"));
    }

    /// Qwen2-VL's vision tower is `model.visual` without its `merger`,
    /// which is the projector; the language model includes `lm_head`.
    #[test]
    fn part_names_stand_for_each_models_prefixes() {
        let config = serde_json::json!({
            "model_type": "qwen2_vl",
            "text_config": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
                            "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100},
            "vision_config": {"depth": 1, "embed_dim": 32, "hidden_size": 64, "num_heads": 4},
        });
        let tensors = crate::architecture::tensors_from_config(&config).unwrap();
        let mut model = Model::from_tensors("tiny", "tiny", tensors);
        model.model_type = Some("qwen2_vl".to_string());
        let frozen = |parts: &[&str]| -> Vec<String> {
            let parts: Vec<String> = parts.iter().map(|p| p.to_string()).collect();
            freeze(model.clone(), &parts)
                .unwrap()
                .tensors
                .into_iter()
                .filter(|t| !t.trainable)
                .map(|t| t.name)
                .collect()
        };
        let tower = frozen(&["vision_tower"]);
        assert!(tower.contains(&"model.visual.patch_embed.proj.weight".to_string()));
        assert!(tower.contains(&"model.visual.blocks.0.attn.qkv.weight".to_string()));
        assert!(
            tower.iter().all(|name| !name.contains("merger")),
            "{tower:?}"
        );
        let projector = frozen(&["multi_modal_projector"]);
        assert!(
            projector
                .iter()
                .all(|name| name.starts_with("model.visual.merger."))
        );
        assert_eq!(projector.len(), 6);
        let language = frozen(&["language_model"]);
        assert!(language.contains(&"lm_head.weight".to_string()));
        assert!(
            language
                .iter()
                .all(|name| !name.starts_with("model.visual"))
        );
        // A substring that is no part name still matches as a substring.
        assert_eq!(frozen(&["merger"]), projector);
    }
}
