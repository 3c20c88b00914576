//! Presets: published config.json files embedded in the binary and read by
//! the same parser as a user's file.

use crate::catalogue::{Named, closest_spelling, edit_distance};
use crate::units::Count;

/// One embedded config.json.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    /// The name used with `--model`: `llama-2-7b`.
    pub name: &'static str,
    /// The Hugging Face hub repository whose config.json this is, spelled
    /// as the hub spells it: `meta-llama/Llama-3.1-8B`.
    pub hub_id: &'static str,
    /// The config.json text, as published.
    pub config: &'static str,
    /// What was left out of the published file, when something was (keys
    /// that change no tensor: label tables, a tower's tokenizer ids).
    pub abridged: Option<&'static str>,
}

impl Named for Preset {
    fn name(&self) -> &'static str {
        self.name
    }
    fn aliases(&self) -> &'static [&'static str] {
        &[]
    }

    /// The preset of the same family and size, nearest in version
    /// (`llama-3-8b` -> `llama-3.1-8b`), else the closest spelling.
    fn suggest(wanted: &str, entries: &[Preset]) -> Option<&'static str> {
        let want = NameParts::read(wanted);
        entries
            .iter()
            .filter_map(|preset| {
                let have = NameParts::read(preset.name);
                let family = have.words.first()?;
                if !want.words.contains(family) {
                    return None;
                }
                let size_unknown = match (&want.size, &have.size) {
                    (Some(a), Some(b)) if !same_size(a, b) => return None,
                    (Some(_), Some(_)) => false,
                    _ => true,
                };
                let rank = (
                    size_unknown,
                    version_distance(want.version.as_deref(), have.version.as_deref()),
                    edit_distance(wanted, preset.name),
                );
                Some((rank, preset.name))
            })
            .min_by_key(|(rank, _)| *rank)
            .map(|(_, name)| name)
            .or_else(|| closest_spelling(wanted, entries.iter().map(|p| p.name)))
    }
}

/// Letters that make a number a parameter count: `135m`, `8b`, `1t`.
const SIZE_UNITS: [&str; 4] = ["k", "m", "b", "t"];

/// A model name read the way people write one: `Meta-Llama-3.1-8B-Instruct`
/// is the words `meta`, `llama`, `instruct`, the version `3.1` and the
/// size `8b`; the family is a preset's first word.
#[derive(Debug, Default, PartialEq, Eq)]
struct NameParts {
    /// Runs of letters, lowercase.
    words: Vec<String>,
    /// The first number that is not a size: `3.1`, `2.5`.
    version: Option<String>,
    /// The first parameter count: `8b`, `135m`, `8x7b` (a mixture of experts).
    size: Option<String>,
}

impl NameParts {
    fn read(name: &str) -> NameParts {
        // Runs of letters and of numbers (digits with inner dots); any
        // other character only separates runs.
        let mut runs: Vec<(bool, String)> = Vec::new();
        let mut previous: Option<bool> = None;
        for c in name.to_lowercase().chars() {
            let numeric = if c.is_ascii_alphabetic() {
                Some(false)
            } else if c.is_ascii_digit() || (c == '.' && previous == Some(true)) {
                Some(true)
            } else {
                None
            };
            match (numeric, runs.last_mut()) {
                (Some(kind), Some((last, text))) if previous == Some(kind) && *last == kind => {
                    text.push(c);
                }
                (Some(kind), _) => runs.push((kind, c.to_string())),
                (None, _) => {}
            }
            previous = numeric;
        }
        let text = |i: usize| runs.get(i).map(|(_, t)| t.trim_end_matches('.'));
        let is_number = |i: usize| runs.get(i).is_some_and(|(numeric, _)| *numeric);
        let is_unit = |i: usize| text(i).is_some_and(|t| SIZE_UNITS.contains(&t));
        let mut parts = NameParts::default();
        let mut i = 0;
        while let Some(run) = text(i) {
            if !is_number(i) {
                parts.words.push(run.to_string());
                i += 1;
            } else if text(i + 1) == Some("x") && is_number(i + 2) && is_unit(i + 3) {
                let experts = format!(
                    "{run}x{}{}",
                    text(i + 2).unwrap_or_default(),
                    text(i + 3).unwrap_or_default()
                );
                parts.size.get_or_insert(experts);
                i += 4;
            } else if is_unit(i + 1) {
                parts
                    .size
                    .get_or_insert(format!("{run}{}", text(i + 1).unwrap_or_default()));
                i += 2;
            } else {
                parts.version.get_or_insert(run.to_string());
                i += 1;
            }
        }
        parts
    }
}

/// `0.5b` and `500m` are one size; `8x7b` only equals itself.
fn same_size(a: &str, b: &str) -> bool {
    match (a.parse::<Count>(), b.parse::<Count>()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// How far apart two versions are: 0 the same, 1 one refines the other
/// (`3` and `3.1`), 2 one is not given, 3 different.
fn version_distance(wanted: Option<&str>, have: Option<&str>) -> u8 {
    match (wanted, have) {
        (None, None) => 0,
        (Some(a), Some(b)) if a == b => 0,
        (Some(a), Some(b))
            if a.strip_prefix(b).is_some_and(|rest| rest.starts_with('.'))
                || b.strip_prefix(a).is_some_and(|rest| rest.starts_with('.')) =>
        {
            1
        }
        (None, Some(_)) | (Some(_), None) => 2,
        (Some(_), Some(_)) => 3,
    }
}

/// The preset published as hub repository `id`, matched without regard to
/// case as the hub does (`meta-llama/llama-3.1-8b` is `meta-llama/Llama-3.1-8B`).
pub fn preset_with_hub_id(id: &str) -> Option<&'static Preset> {
    let id = FORMER_HUB_IDS
        .iter()
        .find(|(former, _)| former.eq_ignore_ascii_case(id))
        .map_or(id, |(_, current)| current);
    PRESETS
        .iter()
        .find(|preset| preset.hub_id.eq_ignore_ascii_case(id))
}

/// Hub repositories renamed after their config was published, as
/// `(former id, current id)`: the hub redirects the former to the current,
/// and users, launch configs and tutorials still write the former. Meta
/// renamed its Llama 3.1 repositories when Llama 3.2 came out
/// (`meta-llama/Meta-Llama-3.1-8B` -> `meta-llama/Llama-3.1-8B`).
pub const FORMER_HUB_IDS: &[(&str, &str)] = &[
    ("meta-llama/Meta-Llama-3.1-8B", "meta-llama/Llama-3.1-8B"),
    ("meta-llama/Meta-Llama-3.1-70B", "meta-llama/Llama-3.1-70B"),
    (
        "meta-llama/Meta-Llama-3.1-405B",
        "meta-llama/Llama-3.1-405B",
    ),
];

macro_rules! preset {
    ($name:literal, $hub_id:literal) => {
        preset!($name, $hub_id, None)
    };
    ($name:literal, $hub_id:literal, $abridged:expr) => {
        Preset {
            name: $name,
            hub_id: $hub_id,
            config: include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/presets/",
                $name,
                ".json"
            )),
            abridged: $abridged,
        }
    };
}

/// Every preset, by family, smallest first, with the hub repository its
/// config.json was published in. Base models where the family has one; the
/// repository was matched on the file's own `torch_dtype`,
/// `transformers_version` and context length (`Qwen/Qwen3-8B`, not
/// `Qwen3-8B-Base`, has `max_position_embeddings` 40960).
pub const PRESETS: &[Preset] = &[
    preset!("gpt2", "openai-community/gpt2"),
    preset!("gpt2-medium", "openai-community/gpt2-medium"),
    preset!("gpt2-large", "openai-community/gpt2-large"),
    preset!("gpt2-xl", "openai-community/gpt2-xl"),
    preset!("pythia-160m", "EleutherAI/pythia-160m"),
    preset!("pythia-1b", "EleutherAI/pythia-1b"),
    preset!("pythia-6.9b", "EleutherAI/pythia-6.9b"),
    preset!("pythia-12b", "EleutherAI/pythia-12b"),
    preset!("llama-2-7b", "meta-llama/Llama-2-7b-hf"),
    preset!("llama-2-13b", "meta-llama/Llama-2-13b-hf"),
    preset!("llama-2-70b", "meta-llama/Llama-2-70b-hf"),
    preset!("llama-3.1-8b", "meta-llama/Llama-3.1-8B"),
    preset!("llama-3.1-70b", "meta-llama/Llama-3.1-70B"),
    preset!("llama-3.1-405b", "meta-llama/Llama-3.1-405B"),
    preset!("llama-3.2-1b", "meta-llama/Llama-3.2-1B"),
    preset!("llama-3.2-3b", "meta-llama/Llama-3.2-3B"),
    preset!(
        "tinyllama-1.1b",
        "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T"
    ),
    preset!("smollm2-135m", "HuggingFaceTB/SmolLM2-135M"),
    preset!("mistral-7b", "mistralai/Mistral-7B-v0.1"),
    preset!("mistral-nemo-12b", "mistralai/Mistral-Nemo-Base-2407"),
    preset!("mixtral-8x7b", "mistralai/Mixtral-8x7B-v0.1"),
    preset!("mixtral-8x22b", "mistralai/Mixtral-8x22B-v0.1"),
    preset!("qwen2.5-0.5b", "Qwen/Qwen2.5-0.5B"),
    preset!("qwen2.5-1.5b", "Qwen/Qwen2.5-1.5B"),
    preset!("qwen2.5-3b", "Qwen/Qwen2.5-3B"),
    preset!("qwen2.5-7b", "Qwen/Qwen2.5-7B"),
    preset!("qwen2.5-14b", "Qwen/Qwen2.5-14B"),
    preset!("qwen2.5-32b", "Qwen/Qwen2.5-32B"),
    preset!("qwen2.5-72b", "Qwen/Qwen2.5-72B"),
    preset!("qwen1.5-moe-a2.7b", "Qwen/Qwen1.5-MoE-A2.7B"),
    preset!("qwen3-0.6b", "Qwen/Qwen3-0.6B"),
    preset!("qwen3-1.7b", "Qwen/Qwen3-1.7B"),
    preset!("qwen3-4b", "Qwen/Qwen3-4B"),
    preset!("qwen3-8b", "Qwen/Qwen3-8B"),
    preset!("qwen3-14b", "Qwen/Qwen3-14B"),
    preset!("qwen3-32b", "Qwen/Qwen3-32B"),
    preset!("qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B"),
    preset!("qwen3-235b-a22b", "Qwen/Qwen3-235B-A22B"),
    preset!("gemma-2b", "google/gemma-2b"),
    preset!("gemma-7b", "google/gemma-7b"),
    preset!("gemma-2-2b", "google/gemma-2-2b"),
    preset!("gemma-2-9b", "google/gemma-2-9b"),
    preset!("gemma-2-27b", "google/gemma-2-27b"),
    preset!("gemma-3-270m", "google/gemma-3-270m"),
    preset!("gemma-3-1b", "google/gemma-3-1b-pt"),
    preset!("phi-2", "microsoft/phi-2"),
    preset!("phi-3-mini", "microsoft/Phi-3-mini-4k-instruct"),
    preset!("phi-3-medium", "microsoft/Phi-3-medium-4k-instruct"),
    preset!("olmo-2-7b", "allenai/OLMo-2-1124-7B"),
    preset!("olmo-2-13b", "allenai/OLMo-2-1124-13B"),
    preset!("starcoder2-3b", "bigcode/starcoder2-3b"),
    preset!("starcoder2-7b", "bigcode/starcoder2-7b"),
    preset!("starcoder2-15b", "bigcode/starcoder2-15b"),
    preset!("deepseek-v3", "deepseek-ai/DeepSeek-V3"),
    preset!("bert-base-uncased", "google-bert/bert-base-uncased"),
    preset!("roberta-large", "FacebookAI/roberta-large"),
    preset!(
        "vit-base-patch16-224",
        "google/vit-base-patch16-224",
        Some("its 1,000-entry id2label and label2id tables")
    ),
    preset!(
        "clip-vit-large-patch14",
        "openai/clip-vit-large-patch14",
        Some("the keys of its sub-configs that shape no tensor")
    ),
    preset!(
        "llava-1.5-7b",
        "llava-hf/llava-1.5-7b-hf",
        Some(VISION_LANGUAGE_ABRIDGED)
    ),
    preset!(
        "qwen2.5-vl-7b",
        "Qwen/Qwen2.5-VL-7B-Instruct",
        Some(VISION_LANGUAGE_ABRIDGED)
    ),
    preset!(
        "gemma-3-4b",
        "google/gemma-3-4b-pt",
        Some(VISION_LANGUAGE_ABRIDGED)
    ),
    preset!(
        "llama-3.2-11b-vision",
        "meta-llama/Llama-3.2-11B-Vision",
        Some(VISION_LANGUAGE_ABRIDGED)
    ),
    preset!(
        "t5-base",
        "google-t5/t5-base",
        Some("its task_specific_params (generation prompts)")
    ),
    preset!("flan-t5-xl", "google/flan-t5-xl"),
    preset!(
        "whisper-large-v3",
        "openai/whisper-large-v3",
        Some("its generation keys (suppress tokens, alignment heads) and SpecAugment settings")
    ),
    preset!("mamba-2.8b", "state-spaces/mamba-2.8b-hf"),
];

/// What the vision-language presets leave out: they were written from
/// the published files' keys without the hub at hand, and checked by their
/// parameter totals, which transformers builds to the hub's count.
const VISION_LANGUAGE_ABRIDGED: &str = "some keys that shape no tensor (its tensor-shaping keys were copied from the published file, and transformers builds it to the hub's parameter count)";

#[cfg(test)]
mod tests {
    use super::*;

    fn suggestion(name: &str) -> Option<&'static str> {
        Preset::suggest(name, PRESETS)
    }

    /// Issue 11: a near-miss finds the preset of the same family and size,
    /// not the one a letter or two away.
    #[test]
    fn suggests_the_same_family_and_size() {
        let cases = [
            ("llama-3-8b", "llama-3.1-8b"),
            ("llama3-70b", "llama-3.1-70b"),
            ("llama-3-405b", "llama-3.1-405b"),
            ("llama2-7b", "llama-2-7b"),
            ("llama-2-7b-chat-hf", "llama-2-7b"),
            ("meta-llama-3.1-8b-instruct", "llama-3.1-8b"),
            ("llama-3.2-1b-instruct", "llama-3.2-1b"),
            ("qwen-7b", "qwen2.5-7b"),
            ("qwen2.5-7b-instruct", "qwen2.5-7b"),
            ("qwen-8b", "qwen3-8b"),
            ("qwen3-30b", "qwen3-30b-a3b"),
            ("qwen2-0.5b", "qwen2.5-0.5b"),
            ("qwen2.5-500m", "qwen2.5-0.5b"),
            ("mistral7b", "mistral-7b"),
            ("mistral-7b-v0.1", "mistral-7b"),
            ("mistral-12b", "mistral-nemo-12b"),
            ("mixtral-8x7b-instruct", "mixtral-8x7b"),
            ("gemma2-9b", "gemma-2-9b"),
            ("gemma-27b", "gemma-2-27b"),
            ("phi3-mini", "phi-3-mini"),
            ("deepseek-v3-671b", "deepseek-v3"),
            ("olmo2-7b", "olmo-2-7b"),
            ("smollm-135m", "smollm2-135m"),
        ];
        for (wanted, expected) in cases {
            assert_eq!(suggestion(wanted), Some(expected), "{wanted}");
        }
    }

    /// Without a family match, the closest spelling; far from everything, nothing.
    #[test]
    fn falls_back_to_spelling() {
        assert_eq!(suggestion("gtp2"), Some("gpt2"));
        assert_eq!(suggestion("lama-3.1-8b"), Some("llama-3.1-8b"));
        assert_eq!(suggestion("bert-base-cased"), Some("bert-base-uncased"));
        assert_eq!(suggestion("electra-small-discriminator"), None);
    }

    #[test]
    fn reads_names_into_words_version_and_size() {
        let parts = NameParts::read("Meta-Llama-3.1-8B-Instruct");
        assert_eq!(parts.words, ["meta", "llama", "instruct"]);
        assert_eq!(parts.version.as_deref(), Some("3.1"));
        assert_eq!(parts.size.as_deref(), Some("8b"));
        let parts = NameParts::read("mixtral-8x22b");
        assert_eq!(parts.size.as_deref(), Some("8x22b"));
        assert_eq!(parts.version, None);
        let parts = NameParts::read("qwen3-235b-a22b");
        assert_eq!(parts.size.as_deref(), Some("235b"));
        assert_eq!(parts.version.as_deref(), Some("3"));
    }

    /// Each preset names its own hub repository, `owner/name`, once.
    #[test]
    fn hub_ids_are_owner_slash_name_and_distinct() {
        let mut seen = std::collections::HashSet::new();
        for preset in PRESETS {
            let (owner, name) = preset.hub_id.split_once('/').unwrap();
            assert!(!owner.is_empty() && !name.is_empty() && !name.contains('/'));
            assert!(
                seen.insert(preset.hub_id.to_ascii_lowercase()),
                "{}",
                preset.hub_id
            );
            assert_eq!(preset_with_hub_id(preset.hub_id), Some(preset));
        }
        assert_eq!(
            preset_with_hub_id("META-LLAMA/llama-3.1-8b").map(|p| p.name),
            Some("llama-3.1-8b")
        );
        assert_eq!(preset_with_hub_id("meta-llama/Llama-3.1-8B-Instruct"), None);
    }

    /// A former name of a preset's repository is that preset; each names a
    /// repository a preset has.
    #[test]
    fn former_hub_ids_are_their_presets() {
        for (former, current) in FORMER_HUB_IDS {
            let preset = preset_with_hub_id(current).expect(current);
            assert_eq!(preset_with_hub_id(former), Some(preset), "{former}");
        }
        assert_eq!(
            preset_with_hub_id("META-LLAMA/meta-llama-3.1-8b").map(|p| p.name),
            Some("llama-3.1-8b")
        );
    }

    /// Every file in presets/ is listed, and every listed name has a file.
    #[test]
    fn the_list_matches_the_folder() {
        let folder = concat!(env!("CARGO_MANIFEST_DIR"), "/presets");
        let mut files: Vec<String> = std::fs::read_dir(folder)
            .unwrap()
            .map(|entry| {
                entry
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .trim_end_matches(".json")
                    .to_string()
            })
            .collect();
        files.sort();
        let mut listed: Vec<String> = PRESETS.iter().map(|p| p.name.to_string()).collect();
        listed.sort();
        assert_eq!(files, listed);
    }
}
