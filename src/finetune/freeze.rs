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
}
