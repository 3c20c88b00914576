//! What the vision-language models (`llava`, `qwen2_vl`, `qwen2_5_vl`,
//! `gemma3`, `mllama`) share: sub-configs read as the composite config
//! class builds them, the language model taken from the decoder table and
//! mounted where transformers 5 puts it, and the names of their parts.
//!
//! transformers 5's `*ForConditionalGeneration` classes (the model
//! `AutoModelForImageTextToText` builds) hold a `model` with the vision
//! tower (`model.vision_tower`; Qwen2-VL's `model.visual`, Mllama's
//! `model.vision_model`), the projector (`model.multi_modal_projector`;
//! Qwen2-VL's `model.visual.merger`) and the text model's body
//! (`model.language_model`, the causal LM's `model.` without its head),
//! and `lm_head` at the root.

use serde_json::Value;

use super::config::Config;
use super::decoder::MAX_LAYERS;
use super::params::Params;
use super::task::Task;
use super::tower::within;
use crate::error::{Error, Result};

/// The task a vision-language model trains for: the causal LM head over
/// its text, what `AutoModelForImageTextToText` builds.
pub const DEFAULT_TASK: Task = Task::CausalLm;

/// A part's name and the tensor-name prefixes it stands for.
pub type Part = (&'static str, &'static [&'static str]);

/// The parts of a vision-language model that people freeze or train by
/// name, and the tensor-name prefixes each stands for in a model type
/// (following LLaMA-Factory's `vision_model_keys`, `projector_key` and
/// `language_model_keys` in `model/model_utils/visual.py`; the language
/// model includes `lm_head`).
pub const PARTS: &[(&str, &[Part])] = &[
    (
        "gemma3",
        &[
            ("vision_tower", &["model.vision_tower."]),
            ("multi_modal_projector", &["model.multi_modal_projector."]),
            ("language_model", &["model.language_model.", "lm_head."]),
        ],
    ),
    (
        "llava",
        &[
            ("vision_tower", &["model.vision_tower."]),
            ("multi_modal_projector", &["model.multi_modal_projector."]),
            ("language_model", &["model.language_model.", "lm_head."]),
        ],
    ),
    (
        "mllama",
        &[
            ("vision_tower", &["model.vision_model."]),
            ("multi_modal_projector", &["model.multi_modal_projector."]),
            ("language_model", &["model.language_model.", "lm_head."]),
        ],
    ),
    (
        "qwen2_5_vl",
        &[
            (
                "vision_tower",
                &["model.visual.patch_embed.", "model.visual.blocks."],
            ),
            ("multi_modal_projector", &["model.visual.merger."]),
            ("language_model", &["model.language_model.", "lm_head."]),
        ],
    ),
    (
        "qwen2_vl",
        &[
            (
                "vision_tower",
                &["model.visual.patch_embed.", "model.visual.blocks."],
            ),
            ("multi_modal_projector", &["model.visual.merger."]),
            ("language_model", &["model.language_model.", "lm_head."]),
        ],
    ),
];

/// The tensor-name prefixes a part name (`vision_tower`,
/// `multi_modal_projector`, `language_model`) stands for in `model_type`;
/// `None` for another name or a model type without named parts.
pub fn part_prefixes(model_type: &str, part: &str) -> Option<&'static [&'static str]> {
    PARTS
        .iter()
        .find(|(known, _)| *known == model_type)?
        .1
        .iter()
        .find(|(name, _)| *name == part)
        .map(|(_, prefixes)| *prefixes)
}

/// A sub-config as the composite config class builds it
/// (`SubConfigSpec.create_subconfig`): the file's object when it has one,
/// `{}` included (then the sub-config class's own defaults apply); when
/// the key is absent or `null`, an object of the composite class's
/// `init_kwargs` (LLaVA's CLIP tower at 336 px, for example).
pub fn sub_config(config: &Config, key: &str, init: &[(&str, u64)]) -> Result<Value> {
    match config.raw(key) {
        None | Some(Value::Null) => Ok(Value::Object(
            init.iter()
                .map(|(name, value)| ((*name).to_string(), Value::from(*value)))
                .collect(),
        )),
        Some(Value::Object(keys)) => Ok(Value::Object(keys.clone())),
        Some(_) => Err(Error::InvalidConfig {
            key: key.to_string(),
            problem: "is not an object; accepted: an object of the sub-config's keys, or null for the defaults".to_string(),
        }),
    }
}

/// Reads a sub-config's JSON with `read`, naming the section in its errors.
pub fn read_value<T>(
    value: &Value,
    section: &str,
    read: impl FnOnce(&Config) -> Result<T>,
) -> Result<T> {
    read(&Config::new(value)?).map_err(|error| within(section, error))
}

/// The sub-config's `model_type`, `default` when absent; any other type
/// than `accepted` is refused, naming the composite model.
pub fn tower_type(value: &Value, section: &str, default: &str, model_type: &str) -> Result<()> {
    let found = read_value(value, section, |config| {
        Ok(config.model_type()?.unwrap_or(default).to_string())
    })?;
    if found == default {
        return Ok(());
    }
    Err(Error::InvalidConfig {
        key: format!("{section}.model_type"),
        problem: format!(
            "`{found}` is not modelled as the vision tower of `{model_type}`; accepted: {default}"
        ),
    })
}

/// How a language model's `tie_word_embeddings` is decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tying {
    /// Tied when the composite config or the text config says so
    /// (`LlavaConfig.__post_init__`, `Qwen2VLConfig.__post_init__`: the
    /// outer value is set from the text config's when it is false).
    Either,
    /// The composite config's value alone, default `true` (`Gemma3Config`).
    Outer(bool),
}

/// How to read a text sub-config as one of the decoder table's model
/// types.
pub struct TextModel<'a> {
    /// The decoder `model_type` whose blueprint reads it: forced when the
    /// composite class fixes the text config class (`Qwen2VLTextConfig`
    /// is Qwen2's layout), else the default for a text config without one.
    pub model_type: &'a str,
    /// Whether [`TextModel::model_type`] replaces the file's.
    pub forced: bool,
    /// The text config class's defaults where they differ from the decoder's
    /// (`Qwen2VLTextConfig`'s 80 layers of 8192), put in where the file
    /// has no such key.
    pub defaults: &'a [(&'a str, u64)],
}

/// The text config as its decoder reads it: `model_type` set as `reading`
/// says, the text config class's defaults put in, and
/// `tie_word_embeddings` decided as `tying` says.
pub fn text_value(
    config: &Config,
    mut text: Value,
    section: &str,
    reading: &TextModel,
    tying: Tying,
) -> Result<Value> {
    let Value::Object(keys) = &mut text else {
        return Err(Error::InvalidConfig {
            key: section.to_string(),
            problem: "is not an object; accepted: an object of the text model's keys".to_string(),
        });
    };
    if reading.forced || !keys.contains_key("model_type") {
        keys.insert(
            "model_type".to_string(),
            Value::from(reading.model_type.to_string()),
        );
    }
    for (key, value) in reading.defaults {
        keys.entry((*key).to_string())
            .or_insert_with(|| Value::from(*value));
    }
    match tying {
        Tying::Either => {
            if config.flag("tie_word_embeddings", false)? {
                keys.insert("tie_word_embeddings".to_string(), Value::Bool(true));
            }
        }
        Tying::Outer(default) => {
            let tied = config.flag("tie_word_embeddings", default)?;
            keys.insert("tie_word_embeddings".to_string(), Value::Bool(tied));
        }
    }
    Ok(text)
}

/// The language model that `text` (a text config's JSON) describes,
/// mounted as transformers 5 mounts it in a vision-language model: the
/// causal LM's `model.*` under `model.language_model.*`, `lm_head` at the
/// root; and its hidden size (the token embedding's width). `section`
/// names the text config in errors (empty: the top-level keys).
pub fn language_model(
    config: &Config,
    text: Value,
    section: &str,
    reading: &TextModel,
    tying: Tying,
) -> Result<(Params, u64)> {
    let text = text_value(config, text, section, reading, tying)?;
    let model_type = text
        .get("model_type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let tensors = super::causal_lm(&text).map_err(|error| {
        if section.is_empty() {
            error
        } else {
            within(section, error)
        }
    })?;
    let type_key = if section.is_empty() {
        "model_type".to_string()
    } else {
        format!("{section}.model_type")
    };
    let mut params = Params::new();
    let mut hidden = None;
    for tensor in tensors {
        let name = if tensor.name.starts_with("lm_head.") {
            tensor.name
        } else if let Some(rest) = tensor.name.strip_prefix("model.") {
            if rest == "embed_tokens.weight" {
                hidden = tensor.shape.dims().get(1).copied();
            }
            format!("model.language_model.{rest}")
        } else {
            return Err(Error::InvalidConfig {
                key: type_key,
                problem: format!(
                    "`{model_type}` names its modules outside `model.` (`{}`), which is not modelled as a language model here; accepted: a llama-style decoder such as llama, mistral or qwen2",
                    tensor.name
                ),
            });
        };
        params.tensor(name, tensor.shape.dims().to_vec(), tensor.role)?;
    }
    let hidden = hidden.ok_or_else(|| Error::InvalidConfig {
        key: type_key,
        problem: format!(
            "`{model_type}` has no `model.embed_tokens`; accepted: a llama-style decoder such as llama, mistral or qwen2"
        ),
    })?;
    Ok((params, hidden))
}

/// A layer count read from `key`, at most [`MAX_LAYERS`].
pub fn layer_count(config: &Config, key: &str, default: u64) -> Result<u64> {
    let layers = config.size(key, default)?;
    if layers > MAX_LAYERS {
        return Err(Error::InvalidConfig {
            key: key.to_string(),
            problem: format!(
                "`{layers}` layers is more than trainmem accepts; accepted: at most {MAX_LAYERS} layers"
            ),
        });
    }
    Ok(layers)
}

/// The length of a list (`supported_aspect_ratios`): `default` when absent
/// or `null`, as the config class fills it in.
pub fn list_length(config: &Config, key: &str, default: u64) -> Result<u64> {
    match config.raw(key) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Array(items)) => Ok(items.len() as u64),
        Some(_) => Err(Error::InvalidConfig {
            key: key.to_string(),
            problem: "is not a list; accepted: a list such as `[[1, 1], [1, 2]]`".to_string(),
        }),
    }
}

/// The refusal of any task but the causal LM for a vision-language model.
pub fn causal_lm_only(model_type: &str, task: Task, class: &str) -> Result<()> {
    if task == DEFAULT_TASK {
        return Ok(());
    }
    Err(Error::InvalidValue {
        what: "--task",
        value: task.to_string(),
        reason: format!(
            "trainmem prices the vision-language model `{model_type}` as {class} (what AutoModelForImageTextToText builds) only; accepted for it: causal-lm (the default)"
        ),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::architecture::tensors_for_task;

    fn refusal(config: Value, task: Option<Task>) -> String {
        match tensors_for_task(&config, task) {
            Err(error) => error.to_string(),
            Ok(_) => panic!("expected {config} to be refused"),
        }
    }

    #[test]
    fn only_the_causal_lm_and_modelled_towers_are_accepted() {
        for model_type in ["llava", "qwen2_vl", "qwen2_5_vl", "gemma3", "mllama"] {
            let message = refusal(
                json!({"model_type": model_type}),
                Some(Task::SequenceClassification { labels: 3 }),
            );
            assert!(message.contains("accepted for it: causal-lm"), "{message}");
        }
        let gpt2 = refusal(
            json!({"model_type": "llava", "text_config": {"model_type": "gpt2"}}),
            None,
        );
        assert!(gpt2.contains("text_config.model_type"), "{gpt2}");
        assert!(gpt2.contains("outside `model.`"), "{gpt2}");
        let bert = refusal(
            json!({"model_type": "llava", "text_config": {"model_type": "bert"}}),
            None,
        );
        assert!(bert.contains("llama-style decoder"), "{bert}");
        let siglip = refusal(
            json!({"model_type": "llava", "vision_config": {"model_type": "siglip_vision_model"}}),
            None,
        );
        assert!(siglip.contains("accepted: clip_vision_model"), "{siglip}");
        let tied = refusal(
            json!({"model_type": "mllama", "text_config": {"tie_word_embeddings": true}}),
            None,
        );
        assert!(tied.contains("vocab_size + 8"), "{tied}");
        let text = refusal(json!({"model_type": "gemma3", "text_config": 3}), None);
        assert!(text.contains("is not an object"), "{text}");
    }

    #[test]
    fn part_names_map_to_each_models_prefixes() {
        assert_eq!(
            part_prefixes("qwen2_vl", "multi_modal_projector"),
            Some(&["model.visual.merger."][..])
        );
        assert_eq!(
            part_prefixes("mllama", "vision_tower"),
            Some(&["model.vision_model."][..])
        );
        assert_eq!(part_prefixes("llama", "vision_tower"), None);
        assert_eq!(part_prefixes("llava", "visual"), None);
        for (model_type, parts) in PARTS {
            assert_eq!(parts.len(), 3, "{model_type}");
            assert!(super::super::vision_language().contains(model_type));
        }
    }
}
