//! Presets: published config.json files embedded in the binary and read by
//! the same parser as a user's file.

use crate::catalogue::Named;

/// One embedded config.json.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    /// The name used with `--model`: `llama-2-7b`.
    pub name: &'static str,
    /// The config.json text, as published.
    pub config: &'static str,
}

impl Named for Preset {
    fn name(&self) -> &'static str {
        self.name
    }
    fn aliases(&self) -> &'static [&'static str] {
        &[]
    }
}

macro_rules! preset {
    ($name:literal) => {
        Preset {
            name: $name,
            config: include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/presets/",
                $name,
                ".json"
            )),
        }
    };
}

/// Every preset, by family, smallest first.
pub const PRESETS: &[Preset] = &[
    preset!("gpt2"),
    preset!("gpt2-medium"),
    preset!("gpt2-large"),
    preset!("gpt2-xl"),
    preset!("pythia-160m"),
    preset!("pythia-1b"),
    preset!("pythia-6.9b"),
    preset!("pythia-12b"),
    preset!("llama-2-7b"),
    preset!("llama-2-13b"),
    preset!("llama-2-70b"),
    preset!("llama-3.1-8b"),
    preset!("llama-3.1-70b"),
    preset!("llama-3.1-405b"),
    preset!("llama-3.2-1b"),
    preset!("llama-3.2-3b"),
    preset!("tinyllama-1.1b"),
    preset!("smollm2-135m"),
    preset!("mistral-7b"),
    preset!("mistral-nemo-12b"),
    preset!("mixtral-8x7b"),
    preset!("mixtral-8x22b"),
    preset!("qwen2.5-0.5b"),
    preset!("qwen2.5-1.5b"),
    preset!("qwen2.5-3b"),
    preset!("qwen2.5-7b"),
    preset!("qwen2.5-14b"),
    preset!("qwen2.5-32b"),
    preset!("qwen2.5-72b"),
    preset!("qwen1.5-moe-a2.7b"),
    preset!("qwen3-0.6b"),
    preset!("qwen3-1.7b"),
    preset!("qwen3-4b"),
    preset!("qwen3-8b"),
    preset!("qwen3-14b"),
    preset!("qwen3-32b"),
    preset!("qwen3-30b-a3b"),
    preset!("qwen3-235b-a22b"),
    preset!("gemma-2b"),
    preset!("gemma-7b"),
    preset!("gemma-2-2b"),
    preset!("gemma-2-9b"),
    preset!("gemma-2-27b"),
    preset!("gemma-3-270m"),
    preset!("gemma-3-1b"),
    preset!("phi-2"),
    preset!("phi-3-mini"),
    preset!("phi-3-medium"),
    preset!("olmo-2-7b"),
    preset!("olmo-2-13b"),
    preset!("starcoder2-3b"),
    preset!("starcoder2-7b"),
    preset!("starcoder2-15b"),
    preset!("deepseek-v3"),
];

#[cfg(test)]
mod tests {
    use super::*;

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
