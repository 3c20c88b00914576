//! `--model meta-llama/Llama-3.1-8B`: a Hugging Face hub id where a path or
//! a preset was expected. trainmem reads only local files, so the message
//! names the preset that answers the same question, when one does.

use super::PRESETS;
use crate::error::Error;

/// The error for `spec` when it looks like a hub id (`owner/name`) that is
/// not a local path; `None` when it does not look like one.
pub fn not_downloaded(spec: &str) -> Option<Error> {
    let (_, name) = hub_id(spec)?;
    let reason = match matching_preset(name) {
        Some(preset) => format!(
            "it looks like a hugging face hub id, and trainmem does not download anything; the preset `{preset}` has that architecture, from its published config.json (`--model {preset}`), or point --model at a local config.json or model folder"
        ),
        None => "it looks like a hugging face hub id, and trainmem does not download anything; point --model at a local config.json or model folder (such as the hub cache's `snapshots/<revision>` folder), or give a preset from `trainmem models`".to_string(),
    };
    Some(Error::InvalidValue {
        what: "model",
        value: spec.to_string(),
        reason,
    })
}

/// `(owner, name)` when `spec` has the shape of a hub repository id: two
/// parts of letters, digits, `-`, `_` and `.`, neither starting with a dot,
/// and not a file name trainmem reads.
fn hub_id(spec: &str) -> Option<(&str, &str)> {
    let (owner, name) = spec.split_once('/')?;
    let part = |text: &str| {
        !text.is_empty()
            && !text.starts_with('.')
            && text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    let file_like = name.ends_with(".json") || name.ends_with(".safetensors");
    (part(owner) && part(name) && !file_like).then_some((owner, name))
}

/// The preset whose name's words all appear, in order, among the words of
/// the hub name (`Meta-Llama-3.1-8B-Instruct` holds `llama`, `3.1`, `8b`);
/// the one with the most words when several do (`gpt2-xl` over `gpt2`).
fn matching_preset(name: &str) -> Option<&'static str> {
    let lower = name.to_ascii_lowercase();
    let words: Vec<&str> = lower.split(['-', '_']).collect();
    PRESETS
        .iter()
        .map(|preset| preset.name)
        .filter(|preset| is_subsequence(preset.split('-'), &words))
        .max_by_key(|preset| (preset.split('-').count(), std::cmp::Reverse(preset.len())))
}

/// Whether every item of `wanted` appears in `words`, in order.
fn is_subsequence<'a>(wanted: impl IntoIterator<Item = &'a str>, words: &[&str]) -> bool {
    let mut rest = words.iter();
    wanted
        .into_iter()
        .all(|word| rest.by_ref().any(|candidate| *candidate == word))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hub_names_match_presets_by_family_and_size() {
        for (name, preset) in [
            ("Llama-3.1-8B", Some("llama-3.1-8b")),
            ("Meta-Llama-3.1-8B-Instruct", Some("llama-3.1-8b")),
            ("Llama-2-7b-hf", Some("llama-2-7b")),
            ("Qwen2.5-7B-Instruct", Some("qwen2.5-7b")),
            ("Mixtral-8x7B-Instruct-v0.1", Some("mixtral-8x7b")),
            ("gemma-2-9b-it", Some("gemma-2-9b")),
            ("Phi-3-mini-4k-instruct", Some("phi-3-mini")),
            ("gpt2-xl", Some("gpt2-xl")),
            ("gpt2", Some("gpt2")),
            ("DeepSeek-V3", Some("deepseek-v3")),
            ("Qwen3-30B-A3B", Some("qwen3-30b-a3b")),
            ("OLMo-2-1124-7B", Some("olmo-2-7b")),
            ("Mistral-Nemo-Base-2407", None),
            ("Meta-Llama-3-8B", None),
            ("bert-base-uncased", None),
        ] {
            assert_eq!(matching_preset(name), preset, "{name}");
        }
    }

    #[test]
    fn only_owner_slash_name_is_a_hub_id() {
        assert_eq!(
            hub_id("meta-llama/Llama-3.1-8B"),
            Some(("meta-llama", "Llama-3.1-8B"))
        );
        for not_hub in [
            "llama-3.1-8b",
            "./x",
            "a/b/c",
            "/abs",
            "dir/config.json",
            "dir/model.safetensors",
            "../x",
            "a/",
            "a b/c",
        ] {
            assert_eq!(hub_id(not_hub), None, "{not_hub}");
        }
    }
}
