//! Architectures: from a HuggingFace `config.json` and a [`Task`] to the
//! exact parameter tensors that transformers' auto class for that task
//! (`AutoModelForCausalLM` for the decoders, `AutoModelForMaskedLM` and
//! the classification classes for the encoders) creates for it.
//!
//! Each supported `model_type` is one file here. Keys missing from the file
//! take the transformers config class default, as `AutoConfig` would.
//! `tests/architectures.rs` compares every fixture measured by
//! `tools/measure_params.py` tensor by tensor.
//!
//! Most architectures are llama-style decoders and fill in a
//! [`Blueprint`](blueprint::Blueprint): an attention block, a feed-forward
//! block, norms, biases and tying, all as data. The GPT-2 lineage (GPT-2,
//! GPTBigCode, GPT-NeoX, GPT-J, BLOOM, Falcon, MPT, OPT) names its modules
//! differently and lists its layer with the same [`Params`](params::Params)
//! builder. Either way the result is a [`Decoder`](decoder::Decoder), which
//! bounds the tensor count before building the inventory.
//!
//! BERT-style encoders fill in an [`Encoder`](encoder::Encoder), which lays
//! out the body and the head of the task asked for. Vision encoders (ViT,
//! and CLIP's and SigLIP's two towers, whose shared layer is in
//! [`tower`]) lay out their own inventory per task, and so do the
//! encoder-decoders (T5 and its copies mT5 and UMT5, BART), whose two
//! stacks are written out with [`encoder_decoder`]'s helpers.

mod attention;
mod blueprint;
mod config;
mod decoder;
mod dimensions;
mod encoder;
mod encoder_decoder;
mod feed_forward;
mod implementation;
mod params;
mod tower;
mod vision_language;

mod bart;
mod bert;
mod bloom;
mod clip;
mod cohere;
mod deberta_v2;
mod deepseek_v2;
mod deepseek_v3;
mod falcon;
mod gemma;
mod gemma2;
mod gemma3;
mod gemma3_text;
mod gpt2;
mod gpt_bigcode;
mod gpt_neox;
mod gptj;
mod granite;
mod llama;
mod llava;
mod mamba;
mod mistral;
mod mixtral;
mod mllama;
mod modernbert;
mod mpt;
mod olmo;
mod olmo2;
mod opt;
mod phi;
mod phi3;
mod qwen2;
mod qwen2_moe;
mod qwen2_vl;
mod qwen3;
mod qwen3_moe;
mod roberta;
mod siglip;
mod stablelm;
mod starcoder2;
mod t5;
mod vit;
mod whisper;

pub use dimensions::{
    ChunkedScan, Dimensions, Dropout, EagerSoftmax, EncoderDecoder, EncoderHead, EncoderParts,
    ImageInputs, LatentDims, LayerLayout, Linears, MixtureOfExperts, MlpKind, NormKind, Placement,
    Positions, QkNormKind, QkvLayout, Router, Seq2SeqFamily, Seq2SeqFeedForward, SharedExpert,
    Softcap, StateSpace, dimensions, supported_for_activations,
};

pub use self::config::{MAX_EXPERTS, recording_defaults};
pub use self::decoder::{MAX_LAYERS, MAX_TENSORS};
// The task is the model layer's; `super::task` still names it here.
pub use self::implementation::Implementation;
pub use self::vision_language::{PARTS, part_prefixes};
use crate::model::task;
pub use crate::model::task::{MAX_LABELS, TASKS_ACCEPTED, Task};

use serde_json::Value;

use self::config::Config;
use self::decoder::Decoder;
use self::dimensions::Measure;
use self::encoder::Encoder;
use crate::error::{Error, Result};
use crate::model::Tensor;

/// Reads a config into the model's layout.
type Describe = fn(&Config) -> Result<Decoder>;

/// The [`Describe`] of an architecture written as one llama-style blueprint.
macro_rules! from_blueprint {
    ($module:ident) => {
        |config: &Config| $module::blueprint(config)?.decoder()
    };
}

/// Every supported `model_type`, the file that reads its tensors and, where
/// its activations are modelled, its dimensions, alphabetically.
const ARCHITECTURES: &[(&str, Describe, Option<Measure>)] = &[
    ("bloom", bloom::describe, None),
    ("cohere", cohere::describe, None),
    ("deepseek_v2", deepseek_v2::describe, None),
    (
        "deepseek_v3",
        from_blueprint!(deepseek_v3),
        Some(deepseek_v3::dimensions),
    ),
    ("falcon", falcon::describe, None),
    ("gemma", from_blueprint!(gemma), Some(gemma::dimensions)),
    ("gemma2", from_blueprint!(gemma2), Some(gemma2::dimensions)),
    (
        "gemma3_text",
        from_blueprint!(gemma3_text),
        Some(gemma3_text::dimensions),
    ),
    ("gpt2", gpt2::describe, Some(gpt2::dimensions)),
    ("gpt_bigcode", gpt_bigcode::describe, None),
    ("gpt_neox", gpt_neox::describe, Some(gpt_neox::dimensions)),
    ("gptj", gptj::describe, None),
    ("granite", granite::describe, Some(granite::dimensions)),
    ("llama", from_blueprint!(llama), Some(llama::dimensions)),
    ("mamba", mamba::describe, Some(mamba::dimensions)),
    (
        "mamba2",
        mamba::describe_mamba2,
        Some(mamba::dimensions_mamba2),
    ),
    (
        "mistral",
        from_blueprint!(mistral),
        Some(mistral::dimensions),
    ),
    (
        "mixtral",
        from_blueprint!(mixtral),
        Some(mixtral::dimensions),
    ),
    ("mpt", mpt::describe, None),
    ("olmo", olmo::describe, None),
    ("olmo2", from_blueprint!(olmo2), Some(olmo2::dimensions)),
    ("opt", opt::describe, None),
    ("phi", from_blueprint!(phi), Some(phi::dimensions)),
    ("phi3", from_blueprint!(phi3), Some(phi3::dimensions)),
    ("qwen2", from_blueprint!(qwen2), Some(qwen2::dimensions)),
    (
        "qwen2_moe",
        from_blueprint!(qwen2_moe),
        Some(qwen2_moe::dimensions),
    ),
    ("qwen3", from_blueprint!(qwen3), Some(qwen3::dimensions)),
    (
        "qwen3_moe",
        from_blueprint!(qwen3_moe),
        Some(qwen3_moe::dimensions),
    ),
    ("stablelm", stablelm::describe, None),
    (
        "starcoder2",
        from_blueprint!(starcoder2),
        Some(starcoder2::dimensions),
    ),
];

/// Reads a config into a BERT-style encoder, whose head depends on the task.
type ReadEncoder = fn(&Config) -> Result<Encoder>;

/// Every supported encoder `model_type` and the file that reads it,
/// alphabetically. Their default task is [`encoder::DEFAULT_TASK`].
const ENCODERS: &[(&str, ReadEncoder)] = &[("bert", bert::encoder), ("roberta", roberta::encoder)];

/// Lays out an encoder of its own file for a task.
type LayOut = fn(&Config, Task) -> Result<Decoder>;

/// Encoders whose file lays out the inventory of each task itself, without
/// an activation model yet, and the task each trains for by default.
const INVENTORY_ENCODERS: &[(&str, LayOut, Task)] = &[
    ("clip", clip::describe, clip::DEFAULT_TASK),
    ("clip_text_model", clip::describe_text, clip::DEFAULT_TASK),
    (
        "clip_vision_model",
        clip::describe_vision,
        clip::DEFAULT_TASK,
    ),
    ("deberta-v2", deberta_v2::describe, encoder::DEFAULT_TASK),
    ("modernbert", modernbert::describe, encoder::DEFAULT_TASK),
    ("siglip", siglip::describe, siglip::DEFAULT_TASK),
    (
        "siglip_vision_model",
        siglip::describe_vision,
        siglip::DEFAULT_TASK,
    ),
    ("vit", vit::describe, vit::DEFAULT_TASK),
];

/// The vision-language models (`AutoModelForImageTextToText`), each
/// laying out its vision tower, projector and language model; their
/// default task is [`vision_language::DEFAULT_TASK`], and their
/// activations are not modelled.
const VISION_LANGUAGE: &[(&str, LayOut)] = &[
    ("gemma3", gemma3::describe),
    ("llava", llava::describe),
    ("mllama", mllama::describe),
    ("qwen2_5_vl", qwen2_vl::describe_2_5),
    ("qwen2_vl", qwen2_vl::describe),
];

/// The names of the vision-language model types.
pub fn vision_language() -> Vec<&'static str> {
    VISION_LANGUAGE.iter().map(|(name, _)| *name).collect()
}

/// The activation dimensions of the causal LM `text` (a text config with
/// its `model_type`) describes, for a vision-language model's language
/// model.
fn causal_lm_dimensions(text: &Value) -> Result<Dimensions> {
    let config = Config::new(text)?;
    let model_type = config.model_type()?.unwrap_or("");
    let measure = ARCHITECTURES
        .iter()
        .find(|(known, _, _)| *known == model_type)
        .and_then(|(_, _, measure)| *measure)
        .ok_or_else(|| Error::InvalidConfig {
            key: "text_config.model_type".to_string(),
            problem: format!(
                "the activations of a `{model_type}` language model are not modelled; accepted: {}",
                supported_for_activations().join(", ")
            ),
        })?;
    measure(&config)
}

/// The tensors of the causal LM `text` (a text config with its
/// `model_type`) describes, for a vision-language model's language model.
fn causal_lm(text: &Value) -> Result<Vec<Tensor>> {
    let config = Config::new(text)?;
    let model_type = config.model_type()?.unwrap_or("");
    let describe = ARCHITECTURES
        .iter()
        .find(|(known, _, _)| *known == model_type)
        .map(|(_, describe, _)| describe)
        .ok_or_else(|| Error::InvalidConfig {
            key: "model_type".to_string(),
            problem: format!(
                "`{model_type}` is not a decoder trainmem reads as a language model; accepted: a llama-style decoder (its modules under `model.`) such as llama, mistral, qwen2 or gemma3_text"
            ),
        })?;
    describe(&config)?.into_tensors()
}
/// Every supported encoder-decoder `model_type` and the file that lays out
/// each task's inventory; each trains for [`encoder_decoder::DEFAULT_TASK`]
/// (seq2seq) by default.
const ENCODER_DECODERS: &[(&str, LayOut, Frozen)] = &[
    ("bart", bart::describe, &[]),
    ("mt5", t5::describe_mt5, &[]),
    ("t5", t5::describe, &[]),
    ("umt5", t5::describe_umt5, &[]),
    ("whisper", whisper::describe, whisper::FROZEN),
];

/// The parameters (by name suffix) a model creates with
/// `requires_grad_(False)`: counted, never trained.
type Frozen = &'static [&'static str];

/// The model_types trainmem can read from a config.json, alphabetically.
pub fn supported() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = ARCHITECTURES
        .iter()
        .map(|(model_type, _, _)| *model_type)
        .chain(ENCODERS.iter().map(|(model_type, _)| *model_type))
        .chain(
            INVENTORY_ENCODERS
                .iter()
                .map(|(model_type, _, _)| *model_type),
        )
        .chain(VISION_LANGUAGE.iter().map(|(model_type, _)| *model_type))
        .chain(
            ENCODER_DECODERS
                .iter()
                .map(|(model_type, _, _)| *model_type),
        )
        .collect();
    names.sort_unstable();
    names
}

/// The parameter tensors (names, shapes, roles; tied weights once) that
/// transformers creates for the model described by `config`, the parsed
/// content of a config.json, built for its default task (see
/// [`tensors_for_task`]).
pub fn tensors_from_config(config: &Value) -> Result<Vec<Tensor>> {
    tensors_for_task(config, None).map(|(_, tensors)| tensors)
}

/// The activation dimensions of `config` trained for `task` (the model
/// type's default when `None`). Decoders are modelled as causal LMs only.
pub fn dimensions_for_task(config: &Value, task: Option<Task>) -> Result<Dimensions> {
    let parsed = Config::new(config)?;
    let model_type = parsed.model_type()?.unwrap_or("");
    if model_type == "vit" {
        return vit::dimensions(&parsed, task.unwrap_or(vit::DEFAULT_TASK));
    }
    if model_type == "clip" {
        return clip::dimensions(&parsed, task.unwrap_or(clip::DEFAULT_TASK));
    }
    if model_type == "llava" {
        vision_language::causal_lm_only(
            "llava",
            task.unwrap_or(vision_language::DEFAULT_TASK),
            "LlavaForConditionalGeneration",
        )?;
        return llava::dimensions(&parsed);
    }
    if model_type == "t5" {
        return t5::dimensions(&parsed, task.unwrap_or(encoder_decoder::DEFAULT_TASK));
    }
    if model_type == "bart" {
        return bart::dimensions(&parsed, task.unwrap_or(encoder_decoder::DEFAULT_TASK));
    }
    if model_type == "whisper" {
        return whisper::dimensions(&parsed, task.unwrap_or(encoder_decoder::DEFAULT_TASK));
    }
    match ENCODERS.iter().find(|(known, _)| *known == model_type) {
        Some((_, read)) => {
            read(&parsed)?.dimensions(&parsed, task.unwrap_or(encoder::DEFAULT_TASK))
        }
        None => dimensions(config),
    }
}

/// Whether `config`'s model_type is an encoder-decoder (T5 and its
/// copies, BART), whose decoder reads `--target-len` tokens.
pub fn is_encoder_decoder(config: &Value) -> bool {
    Config::new(config)
        .and_then(|config| config.model_type())
        .ok()
        .flatten()
        .is_some_and(|model_type| {
            ENCODER_DECODERS
                .iter()
                .any(|(known, _, _)| *known == model_type)
        })
}

/// What `seconds` of audio become in a Whisper config (`audio: 30 s ->
/// 3000 log-mel frames (128 mel bins) -> 1500 encoder positions`); a
/// length `WhisperEncoder` refuses is an error naming the one it takes.
pub fn audio_tokens(config: &Value, seconds: u64) -> Result<String> {
    whisper::audio_tokens(&Config::new(config)?, seconds)
}

/// Describes what an input of the model becomes.
type InputTokens = fn(&Config) -> Result<String>;

/// The vision encoders and what each of their inputs becomes.
const INPUT_TOKENS: &[(&str, InputTokens)] = &[
    ("clip", clip::input_tokens),
    ("clip_text_model", clip::input_tokens_text),
    ("clip_vision_model", clip::input_tokens_vision),
    ("siglip", siglip::input_tokens),
    ("siglip_vision_model", siglip::input_tokens_vision),
    ("vit", vit::image_tokens),
    ("llava", |config| Ok(llava::image_tokens(config)?.1)),
    ("gemma3", |config| Ok(gemma3::image_tokens(config)?.1)),
    ("mllama", |config| Ok(mllama::image_tokens(config)?.1)),
    ("qwen2_vl", qwen2_vl::dynamic_tokens),
    ("qwen2_5_vl", qwen2_vl::dynamic_tokens),
];

/// The largest `--image-tokens`: Qwen2-VL's image processor's default
/// `max_pixels` (12,845,056) over 28 x 28 pixels per merged token.
pub const MAX_IMAGE_TOKENS: u64 = 16_384;

/// What one image becomes in a vision-language model's language sequence:
/// how many tokens it adds to each sample's `--seq-len`, and a sentence
/// saying so; `None` for a model that is not a vision-language model.
/// `images` is `--images`, for messages; `image_tokens` (`--image-tokens`)
/// is the token count of a Qwen2-VL
/// image, whose resolution is dynamic; the other models fix it in their
/// config and refuse it.
pub fn vision_language_image(
    config: &Value,
    images: u64,
    image_tokens: Option<u64>,
) -> Result<Option<(u64, String)>> {
    let parsed = Config::new(config)?;
    let model_type = parsed.model_type()?.unwrap_or("");
    let fixed = match model_type {
        "llava" => llava::image_tokens(&parsed)?,
        "gemma3" => gemma3::image_tokens(&parsed)?,
        "mllama" => mllama::image_tokens(&parsed)?,
        "qwen2_vl" | "qwen2_5_vl" => {
            let Some(tokens) = image_tokens else {
                return Err(Error::InvalidValue {
                    what: "--images",
                    value: images.to_string(),
                    reason: format!(
                        "`{model_type}` reads each image at its own resolution, so its tokens are not fixed; give --image-tokens N (tokens per image after the 2x2 merge, such as 256 for a 448 x 448 px image)"
                    ),
                });
            };
            if tokens == 0 || tokens > MAX_IMAGE_TOKENS {
                return Err(Error::InvalidValue {
                    what: "--image-tokens",
                    value: tokens.to_string(),
                    reason: format!(
                        "accepted: from 1 to {MAX_IMAGE_TOKENS} tokens per image (Qwen2-VL's image processor caps an image at 12,845,056 pixels)"
                    ),
                });
            }
            return qwen2_vl::image_tokens(&parsed, tokens).map(Some);
        }
        _ => return Ok(None),
    };
    if let Some(tokens) = image_tokens {
        return Err(Error::InvalidValue {
            what: "--image-tokens",
            value: tokens.to_string(),
            reason: format!(
                "`{model_type}` fixes what an image becomes ({}); --image-tokens is for qwen2_vl and qwen2_5_vl, whose resolution is dynamic",
                fixed.1
            ),
        });
    }
    Ok(Some(fixed))
}

/// The sequence one image becomes in a model whose activations are priced
/// from images (ViT and CLIP's vision tower: its patches and the class
/// token), at the config's
/// `image_size`; `None` for a model priced from `--seq-len`.
pub fn image_sequence(config: &Value) -> Result<Option<u64>> {
    let config = Config::new(config)?;
    match config.model_type()? {
        Some("vit") => vit::sequence(&config).map(Some),
        Some("clip") => clip::image_sequence(&config).map(Some),
        _ => Ok(None),
    }
}

/// How many tokens each input of a vision encoder's config becomes, at
/// the config's `image_size` (`a 224 px image -> 197 tokens (196 patches
/// of 16 px + the CLS token)`); `None` for a text-only model.
pub fn input_tokens(config: &Value) -> Result<Option<String>> {
    let config = Config::new(config)?;
    let model_type = config.model_type()?.unwrap_or("");
    INPUT_TOKENS
        .iter()
        .find(|(known, _)| *known == model_type)
        .map(|(_, describe)| describe(&config))
        .transpose()
}

/// The most pixels an image side may have: 2^16, beyond any published
/// vision encoder's resolution (896 px for SigLIP's largest, 1,024 for
/// some ViTs) many times over.
pub const MAX_IMAGE_SIZE: u64 = 1 << 16;

/// `config` with its images `image_size` pixels square: ViT's own
/// `image_size`, a CLIP or SigLIP model's `vision_config` (and an old CLIP
/// file's `vision_config_dict`, which replaces it), a vision tower's own.
/// transformers builds the position embeddings for that size, as it does
/// for a checkpoint fine-tuned at a new resolution. A text-only model is
/// refused.
pub fn with_image_size(config: &Value, image_size: u64) -> Result<Value> {
    let invalid = |reason: String| Error::InvalidValue {
        what: "--image-size",
        value: image_size.to_string(),
        reason,
    };
    if image_size == 0 || image_size > MAX_IMAGE_SIZE {
        return Err(invalid(format!(
            "accepted: an image side from 1 to {MAX_IMAGE_SIZE} pixels"
        )));
    }
    let model_type = Config::new(config)?.model_type()?.unwrap_or("");
    let sections: &[&str] = match model_type {
        "vit" | "clip_vision_model" | "siglip_vision_model" => &[""],
        "clip" => &["vision_config", "vision_config_dict"],
        "siglip" | "gemma3" | "mllama" => &["vision_config"],
        "llava" => &["vision_config"],
        "qwen2_vl" | "qwen2_5_vl" => {
            return Err(invalid(format!(
                "`{model_type}` reads each image at its own resolution; give --image-tokens N (tokens per image after the 2x2 merge) instead"
            )));
        }
        _ => {
            return Err(invalid(format!(
                "`{model_type}` takes no images; accepted for: clip, clip_vision_model, gemma3, llava, mllama, siglip, siglip_vision_model, vit"
            )));
        }
    };
    let mut config = config.clone();
    if model_type == "llava" {
        // An absent vision_config is LlavaConfig's CLIP at 336 px: written
        // out before its image size changes.
        let parsed = Config::new(&config)?;
        let vision = llava::vision_config(&parsed)?;
        config["vision_config"] = vision;
    }
    for section in sections {
        let target = if section.is_empty() {
            Some(&mut config)
        } else {
            match config.get_mut(*section) {
                Some(Value::Null) | None if *section == "vision_config" => {
                    config[*section] = Value::Object(Default::default());
                    config.get_mut(*section)
                }
                other => other,
            }
        };
        if let Some(Value::Object(keys)) = target {
            keys.insert("image_size".to_string(), Value::from(image_size));
        }
    }
    Ok(config)
}

/// The task a `model_type` trains for when none is asked: causal-lm for the
/// decoders, masked-lm for the text encoders, embedding (the bare or
/// contrastive model) for the vision encoders, seq2seq for the
/// encoder-decoders; `None` for an unknown type.
pub fn default_task(model_type: &str) -> Option<Task> {
    if ENCODERS.iter().any(|(known, _)| *known == model_type) {
        Some(encoder::DEFAULT_TASK)
    } else if let Some((_, _, task)) = INVENTORY_ENCODERS
        .iter()
        .find(|(known, _, _)| *known == model_type)
    {
        Some(*task)
    } else if ENCODER_DECODERS
        .iter()
        .any(|(known, _, _)| *known == model_type)
    {
        Some(encoder_decoder::DEFAULT_TASK)
    } else if ARCHITECTURES
        .iter()
        .any(|(known, _, _)| *known == model_type)
    {
        Some(Task::CausalLm)
    } else if VISION_LANGUAGE
        .iter()
        .any(|(known, _)| *known == model_type)
    {
        Some(vision_language::DEFAULT_TASK)
    } else {
        None
    }
}

/// The task and the parameter tensors transformers' auto class for `task`
/// (the model type's default when `None`) creates for `config`. A task the
/// model type has no class for, or that trainmem does not model for it, is
/// an error naming the tasks accepted.
pub fn tensors_for_task(config: &Value, task: Option<Task>) -> Result<(Task, Vec<Tensor>)> {
    let config = Config::new(config)?;
    let model_type = config.model_type()?.unwrap_or("");
    if let Some((_, read)) = ENCODERS.iter().find(|(known, _)| *known == model_type) {
        let task = task.unwrap_or(encoder::DEFAULT_TASK);
        return Ok((task, read(&config)?.decoder(task)?.into_tensors()?));
    }
    if let Some((_, lay_out, default)) = INVENTORY_ENCODERS
        .iter()
        .find(|(known, _, _)| *known == model_type)
    {
        let task = task.unwrap_or(*default);
        return Ok((task, lay_out(&config, task)?.into_tensors()?));
    }
    if let Some((_, lay_out)) = VISION_LANGUAGE
        .iter()
        .find(|(known, _)| *known == model_type)
    {
        let task = task.unwrap_or(vision_language::DEFAULT_TASK);
        return Ok((task, lay_out(&config, task)?.into_tensors()?));
    }
    if let Some((_, lay_out, frozen)) = ENCODER_DECODERS
        .iter()
        .find(|(known, _, _)| *known == model_type)
    {
        let task = task.unwrap_or(encoder_decoder::DEFAULT_TASK);
        let mut tensors = lay_out(&config, task)?.into_tensors()?;
        for tensor in &mut tensors {
            if frozen.iter().any(|name| tensor.name.ends_with(name)) {
                tensor.trainable = false;
            }
        }
        return Ok((task, tensors));
    }
    let describe = ARCHITECTURES
        .iter()
        .find(|(known, _, _)| *known == model_type)
        .map(|(_, describe, _)| describe)
        .ok_or_else(|| Error::UnsupportedModelType {
            model_type: model_type.to_string(),
            supported: supported().join(", "),
        })?;
    match task {
        None | Some(Task::CausalLm) => Ok((Task::CausalLm, describe(&config)?.into_tensors()?)),
        Some(other) => Err(Error::InvalidValue {
            what: "--task",
            value: other.to_string(),
            reason: format!(
                "trainmem prices the decoder `{model_type}` as {} only; accepted for it: causal-lm (the default)",
                Task::CausalLm.auto_class()
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::Role;

    fn invalid(config: Value) -> (String, String) {
        match tensors_from_config(&config) {
            Err(Error::InvalidConfig { key, problem }) => (key, problem),
            other => panic!("expected InvalidConfig for {config}, got {other:?}"),
        }
    }

    fn role_of(tensors: &[Tensor], name: &str) -> Role {
        tensors
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("no tensor `{name}`"))
            .role
    }

    #[test]
    fn supported_is_sorted_and_unique() {
        let names = supported();
        assert_eq!(names.len(), 50);
        assert!(names.windows(2).all(|pair| pair[0] < pair[1]));
    }

    #[test]
    fn tasks_a_model_type_has_no_class_for_are_refused() {
        let refused = |config: Value, task: &str| {
            let task = Task::parse(task).unwrap();
            match tensors_for_task(&config, Some(task)) {
                Err(error @ Error::InvalidValue { what: "--task", .. }) => error.to_string(),
                other => panic!("expected --task refused for {config}, got {other:?}"),
            }
        };
        let message = refused(json!({"model_type": "bert"}), "seq2seq");
        assert!(
            message.contains("AutoModelForSeq2SeqLM has no class for it"),
            "{message}"
        );
        assert!(
            message.contains("accepted for `bert`: masked-lm (the default), seq-cls:N"),
            "{message}"
        );
        let message = refused(json!({"model_type": "roberta"}), "causal-lm");
        assert!(message.contains("bidirectional encoder"), "{message}");
        for task in [
            "seq2seq",
            "seq-cls:2",
            "token-cls:2",
            "masked-lm",
            "embedding",
        ] {
            let message = refused(json!({"model_type": "llama"}), task);
            assert!(
                message.contains("accepted for it: causal-lm (the default)"),
                "{message}"
            );
        }
        let (task, _) =
            tensors_for_task(&json!({"model_type": "gpt2", "n_layer": 1}), None).unwrap();
        assert_eq!(task, Task::CausalLm);
        let (task, _) =
            tensors_for_task(&json!({"model_type": "bert", "num_hidden_layers": 1}), None).unwrap();
        assert_eq!(task, Task::MaskedLm);
    }

    #[test]
    fn an_encoder_made_a_decoder_is_refused_with_its_key() {
        for key in ["is_decoder", "add_cross_attention"] {
            let (found, problem) = invalid(json!({"model_type": "bert", key: true}));
            assert_eq!(found, key);
            assert!(problem.contains("accepted: false"), "{problem}");
        }
        let (key, _) = invalid(
            json!({"model_type": "roberta", "hidden_size": 100, "num_attention_heads": 12}),
        );
        assert_eq!(key, "num_attention_heads");
        let (key, _) = invalid(json!({"model_type": "bert", "type_vocab_size": -1}));
        assert_eq!(key, "type_vocab_size");
    }

    #[test]
    fn deberta_relative_sizes_are_read_signed_and_checked() {
        let relative = |key: &str, value: Value| json!({"model_type": "deberta-v2", "num_hidden_layers": 1, "relative_attention": true, key: value});
        let rows = |config: Value| {
            let (_, tensors) = tensors_for_task(&config, None).unwrap();
            tensors
                .iter()
                .find(|t| t.name == "deberta.encoder.rel_embeddings.weight")
                .map(|t| t.shape.dims()[0])
        };
        assert_eq!(rows(relative("position_buckets", json!(-1))), Some(1024));
        assert_eq!(rows(relative("position_buckets", json!(16))), Some(32));
        assert_eq!(rows(relative("max_relative_positions", json!(7))), Some(14));
        let (key, problem) = invalid(relative("max_relative_positions", json!(1.5)));
        assert_eq!(key, "max_relative_positions");
        assert!(problem.contains("not a whole number"), "{problem}");
        let (key, _) = invalid(relative("pos_att_type", json!(7)));
        assert_eq!(key, "pos_att_type");
        let (key, _) =
            invalid(json!({"model_type": "deberta-v2", "conv_kernel_size": 3, "conv_groups": 5}));
        assert_eq!(key, "conv_groups");
        let (_, tensors) = tensors_for_task(
            &json!({"model_type": "deberta-v2", "num_hidden_layers": 1}),
            Some(Task::Embedding),
        )
        .unwrap();
        assert!(tensors.iter().all(|t| !t.name.starts_with("deberta.")));
        let refused = tensors_for_task(&json!({"model_type": "deberta-v2"}), Some(Task::Seq2Seq));
        assert!(matches!(
            refused,
            Err(Error::InvalidValue { what: "--task", .. })
        ));
    }

    #[test]
    fn vision_encoders_refuse_tasks_without_a_class_and_bad_image_sizes() {
        for (model_type, task, expected) in [
            (
                "vit",
                "masked-lm",
                "no AutoModelForMaskedLM class for `vit`",
            ),
            (
                "vit",
                "token-cls:2",
                "accepted for `vit`: embedding (the default",
            ),
            ("clip", "causal-lm", "accepted for `clip`: embedding"),
            ("siglip", "seq2seq", "SiglipForImageClassification"),
            ("clip_vision_model", "seq-cls:2", "CLIPVisionModel"),
            ("clip_text_model", "masked-lm", "CLIPTextModel"),
            ("siglip_vision_model", "token-cls:2", "SiglipVisionModel"),
        ] {
            let config = json!({"model_type": model_type});
            match tensors_for_task(&config, Some(Task::parse(task).unwrap())) {
                Err(error @ Error::InvalidValue { what: "--task", .. }) => {
                    let message = error.to_string();
                    assert!(message.contains(expected), "{model_type}: {message}");
                }
                other => panic!("expected {task} refused for {model_type}, got {other:?}"),
            }
        }
        let (key, _) = invalid(json!({"model_type": "vit", "patch_size": 0}));
        assert_eq!(key, "patch_size");
        let (key, problem) = invalid(json!({"model_type": "vit", "image_size": [1, 2, 3]}));
        assert_eq!(key, "image_size");
        assert!(problem.contains("`[height, width]`"), "{problem}");
        let (key, _) = invalid(json!({"model_type": "clip", "vision_config": {"patch_size": 0}}));
        assert_eq!(key, "vision_config.patch_size");
        let (key, _) =
            invalid(json!({"model_type": "siglip", "text_config": {"num_hidden_layers": 1025}}));
        assert_eq!(key, "text_config.num_hidden_layers");
        let (key, _) = invalid(json!({"model_type": "clip", "text_config": 7}));
        assert_eq!(key, "text_config");
    }

    #[test]
    fn an_image_size_rebuilds_the_position_embeddings_of_vision_models_only() {
        let rows = |config: Value, name: &str| {
            let (_, tensors) = tensors_for_task(&config, None).unwrap();
            tensors
                .iter()
                .find(|t| t.name == name)
                .map(|t| t.shape.dims().to_vec())
                .unwrap()
        };
        let vit = with_image_size(&json!({"model_type": "vit"}), 384).unwrap();
        assert_eq!(rows(vit, "embeddings.position_embeddings"), [1, 577, 768]);
        let clip = with_image_size(
            &json!({"model_type": "clip", "vision_config_dict": {"patch_size": 14}}),
            336,
        )
        .unwrap();
        assert_eq!(
            rows(clip, "vision_model.embeddings.position_embedding.weight"),
            [577, 768]
        );
        let siglip =
            with_image_size(&json!({"model_type": "siglip", "vision_config": null}), 384).unwrap();
        assert_eq!(
            rows(siglip, "vision_model.embeddings.position_embedding.weight"),
            [576, 768]
        );
        for (config, size, expected) in [
            (
                json!({"model_type": "llama"}),
                224,
                "`llama` takes no images",
            ),
            (
                json!({"model_type": "clip_text_model"}),
                224,
                "takes no images",
            ),
            (json!({"model_type": "vit"}), 0, "from 1 to 65536 pixels"),
            (
                json!({"model_type": "vit"}),
                65537,
                "from 1 to 65536 pixels",
            ),
        ] {
            let message = with_image_size(&config, size).unwrap_err().to_string();
            assert!(message.starts_with("invalid --image-size"), "{message}");
            assert!(message.contains(expected), "{message}");
        }
    }

    #[test]
    fn vision_inputs_say_how_many_tokens_they_become() {
        let tokens = |config: Value| input_tokens(&config).unwrap().unwrap();
        assert_eq!(
            tokens(json!({"model_type": "vit"})),
            "a 224 px image -> 197 tokens (196 patches of 16 px + the CLS token)"
        );
        assert_eq!(
            tokens(json!({"model_type": "vit", "image_size": [32, 48], "patch_size": [8, 16]})),
            "a 32x48 px image -> 13 tokens (12 patches of 8x16 px + the CLS token)"
        );
        assert_eq!(
            tokens(json!({"model_type": "clip", "vision_config": {"patch_size": 14}})),
            "vision tower: a 224 px image -> 257 tokens (256 patches of 14 px + the class token); \
             text tower: a text -> at most 77 tokens (max_position_embeddings)"
        );
        assert_eq!(
            tokens(json!({"model_type": "siglip_vision_model"})),
            "a 224 px image -> 196 tokens (patches of 16 px, no class token)"
        );
        assert_eq!(input_tokens(&json!({"model_type": "llama"})).unwrap(), None);
    }

    #[test]
    fn encoder_decoders_refuse_tasks_without_a_class_and_bad_feed_forwards() {
        for (model_type, task, expected) in [
            (
                "t5",
                "causal-lm",
                "no AutoModelForCausalLM class for `t5`; accepted for `t5`: seq2seq (the default: T5ForConditionalGeneration)",
            ),
            ("mt5", "masked-lm", "MT5ForConditionalGeneration"),
            ("umt5", "causal-lm", "UMT5Model"),
            (
                "bart",
                "token-cls:2",
                "no AutoModelForTokenClassification class for `bart`",
            ),
        ] {
            let config = json!({"model_type": model_type, "num_layers": 1});
            match tensors_for_task(&config, Some(Task::parse(task).unwrap())) {
                Err(error @ Error::InvalidValue { what: "--task", .. }) => {
                    let message = error.to_string();
                    assert!(message.contains(expected), "{model_type}: {message}");
                }
                other => panic!("expected {task} refused for {model_type}, got {other:?}"),
            }
        }
        for proj in ["gated", "gated-", "gated-gelu-x", "relu-gated", ""] {
            let (key, problem) = invalid(json!({"model_type": "t5", "feed_forward_proj": proj}));
            assert_eq!(key, "feed_forward_proj");
            assert!(problem.contains("`ACT` or `gated-ACT`"), "{problem}");
        }
        let (key, _) = invalid(json!({"model_type": "t5", "num_decoder_layers": 1025}));
        assert_eq!(key, "num_decoder_layers");
        let (key, _) = invalid(json!({"model_type": "bart", "decoder_attention_heads": 5}));
        assert_eq!(key, "decoder_attention_heads");
        let (key, _) = invalid(json!({"model_type": "t5", "num_heads": 0}));
        assert_eq!(key, "num_heads");
    }

    #[test]
    fn whisper_takes_thirty_seconds_and_never_trains_its_encoder_positions() {
        let config = json!({"model_type": "whisper"});
        assert_eq!(
            audio_tokens(&config, 30).unwrap(),
            "audio: 30 s -> 3000 log-mel frames (80 mel bins) -> 1500 encoder positions (conv2's stride 2)"
        );
        for seconds in [10, 31, u64::MAX] {
            let message = audio_tokens(&config, seconds).unwrap_err().to_string();
            assert!(message.contains("accepted: 30 (seconds)"), "{message}");
        }
        let short = json!({"model_type": "whisper", "max_source_positions": 25});
        let message = audio_tokens(&short, 1).unwrap_err().to_string();
        assert!(message.contains("none in whole seconds"), "{message}");
        let (_, tensors) = tensors_for_task(&config, None).unwrap();
        let frozen: Vec<_> = tensors
            .iter()
            .filter(|t| !t.trainable)
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(frozen, ["model.encoder.embed_positions.weight"]);
        assert!(audio_tokens(&json!({"model_type": "whisper", "d_model": 10}), 30).is_err());
    }

    #[test]
    fn mamba_reads_its_rank_and_mamba2_checks_its_heads_and_groups() {
        let (key, problem) = invalid(json!({"model_type": "mamba", "time_step_rank": "big"}));
        assert_eq!(key, "time_step_rank");
        assert!(problem.contains("\"auto\""), "{problem}");
        let mamba = tensors_from_config(&json!({"model_type": "mamba", "hidden_size": 72,
            "num_hidden_layers": 1}))
        .unwrap();
        let dt = mamba
            .iter()
            .find(|t| t.name == "backbone.layers.0.mixer.dt_proj.weight")
            .unwrap();
        assert_eq!(dt.shape.dims(), [144, 5], "auto rank: ceil(72 / 16)");
        let (key, problem) = invalid(json!({"model_type": "mamba2", "num_heads": 7}));
        assert_eq!(key, "num_heads");
        assert!(problem.contains("hidden_size x expand = 8192"), "{problem}");
        for groups in [0, 3] {
            let (key, _) = invalid(json!({"model_type": "mamba2", "n_groups": groups}));
            assert_eq!(key, "n_groups");
        }
    }

    #[test]
    fn encoder_decoder_tensors_get_their_roles() {
        let t5 = tensors_from_config(&json!({"model_type": "t5", "num_layers": 1})).unwrap();
        assert_eq!(role_of(&t5, "shared.weight"), Role::Embedding);
        assert_eq!(
            role_of(&t5, "decoder.block.0.layer.1.EncDecAttention.q.weight"),
            Role::Attention
        );
        assert_eq!(
            role_of(
                &t5,
                "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"
            ),
            Role::Embedding
        );
        assert_eq!(
            role_of(&t5, "decoder.block.0.layer.2.DenseReluDense.wo.weight"),
            Role::Mlp
        );
        assert_eq!(role_of(&t5, "encoder.final_layer_norm.weight"), Role::Norm);
        let bart = tensors_from_config(&json!({"model_type": "bart", "tie_word_embeddings": false,
            "encoder_layers": 1, "decoder_layers": 1}))
        .unwrap();
        assert_eq!(role_of(&bart, "lm_head.weight"), Role::OutputHead);
        assert_eq!(
            role_of(&bart, "model.decoder.layers.0.encoder_attn_layer_norm.bias"),
            Role::Norm
        );
        assert_eq!(
            role_of(&bart, "model.encoder.embed_positions.weight"),
            Role::Embedding
        );
    }

    #[test]
    fn modernbert_s_first_layer_has_no_attention_norm() {
        let config = json!({"model_type": "modernbert", "num_hidden_layers": 3});
        let (_, tensors) = tensors_for_task(&config, Some(Task::Embedding)).unwrap();
        let norms: Vec<_> = tensors
            .iter()
            .filter(|t| t.name.ends_with("attn_norm.weight"))
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(
            norms,
            ["layers.1.attn_norm.weight", "layers.2.attn_norm.weight"]
        );
        let refused = tensors_for_task(&config, Some(Task::CausalLm));
        assert!(matches!(
            refused,
            Err(Error::InvalidValue { what: "--task", .. })
        ));
    }

    #[test]
    fn encoder_heads_get_output_head_roles() {
        let config = json!({"model_type": "bert", "num_hidden_layers": 1});
        let (_, tensors) =
            tensors_for_task(&config, Some(Task::SequenceClassification { labels: 4 })).unwrap();
        assert_eq!(role_of(&tensors, "classifier.weight"), Role::OutputHead);
        assert_eq!(
            role_of(&tensors, "bert.pooler.dense.weight"),
            Role::OutputHead
        );
        assert_eq!(
            role_of(&tensors, "bert.embeddings.token_type_embeddings.weight"),
            Role::Embedding
        );
        assert_eq!(
            role_of(
                &tensors,
                "bert.encoder.layer.0.attention.output.LayerNorm.bias"
            ),
            Role::Norm
        );
        assert_eq!(
            role_of(&tensors, "bert.encoder.layer.0.intermediate.dense.weight"),
            Role::Mlp
        );
        let (_, tensors) = tensors_for_task(&config, None).unwrap();
        assert_eq!(role_of(&tensors, "cls.predictions.bias"), Role::OutputHead);
        assert_eq!(
            role_of(&tensors, "cls.predictions.transform.LayerNorm.weight"),
            Role::Norm
        );
    }

    #[test]
    fn a_size_given_as_a_string_is_refused_with_its_key() {
        let (key, problem) = invalid(json!({"model_type": "llama", "hidden_size": "4096"}));
        assert_eq!(key, "hidden_size");
        assert_eq!(
            problem,
            "`\"4096\"` is a string; accepted: a whole number from 0 to 4294967295"
        );
    }

    #[test]
    fn negative_float_and_too_large_sizes_are_refused() {
        let (key, problem) = invalid(json!({"model_type": "mistral", "num_attention_heads": -8}));
        assert_eq!(key, "num_attention_heads");
        assert!(problem.starts_with("`-8` is negative"), "{problem}");
        let (key, problem) = invalid(json!({"model_type": "gpt2", "n_embd": 768.5}));
        assert_eq!(key, "n_embd");
        assert!(
            problem.starts_with("`768.5` is not a whole number"),
            "{problem}"
        );
        let (key, problem) = invalid(json!({"model_type": "qwen3", "num_hidden_layers": 1e12}));
        assert_eq!(key, "num_hidden_layers");
        assert!(problem.contains("not a whole number"), "{problem}");
        let (key, problem) =
            invalid(json!({"model_type": "llama", "vocab_size": 1_000_000_000_000u64}));
        assert_eq!(key, "vocab_size");
        assert!(problem.contains("too large"), "{problem}");
    }

    #[test]
    fn a_huge_layer_count_is_refused_before_allocating() {
        for layers in [1025u64, 500_000, 1_000_000, 4_000_000_000] {
            let (key, problem) =
                invalid(json!({"model_type": "llama", "num_hidden_layers": layers}));
            assert_eq!(key, "num_hidden_layers");
            assert!(problem.contains("at most 1024 layers"), "{problem}");
        }
        let (key, _) = invalid(json!({"model_type": "gpt2", "n_layer": 4_000_000_000u64}));
        assert_eq!(key, "n_layer");
    }

    #[test]
    fn too_many_experts_are_refused_with_their_key() {
        for (model_type, key) in [
            ("mixtral", "num_local_experts"),
            ("qwen2_moe", "num_experts"),
            ("qwen3_moe", "num_experts"),
            ("deepseek_v2", "n_routed_experts"),
            ("deepseek_v3", "n_routed_experts"),
        ] {
            let (found, problem) = invalid(json!({"model_type": model_type, key: 16_385}));
            assert_eq!(found, key, "{model_type}");
            assert!(problem.contains("at most 16384 experts"), "{problem}");
            let config = json!({"model_type": model_type, key: 16_384, "num_hidden_layers": 1});
            assert!(tensors_from_config(&config).is_ok(), "{model_type}");
        }
    }

    #[test]
    fn zero_heads_and_bad_flags_are_errors_not_panics() {
        let (key, _) = invalid(json!({"model_type": "llama", "num_attention_heads": 0}));
        assert_eq!(key, "num_attention_heads");
        let (key, _) = invalid(json!({"model_type": "gpt2", "n_head": 0}));
        assert_eq!(key, "n_head");
        let (key, _) = invalid(json!({"model_type": "qwen2_moe", "decoder_sparse_step": 0}));
        assert_eq!(key, "decoder_sparse_step");
        let (key, _) = invalid(json!({"model_type": "llama", "tie_word_embeddings": "yes"}));
        assert_eq!(key, "tie_word_embeddings");
        let (key, _) = invalid(json!({"model_type": "qwen3_moe", "mlp_only_layers": "0"}));
        assert_eq!(key, "mlp_only_layers");
        assert!(tensors_from_config(&json!(["llama"])).is_err());
    }

    #[test]
    fn unknown_or_missing_model_type_is_unsupported() {
        for (config, expected) in [
            (json!({"model_type": "llama4_unknown"}), "llama4_unknown"),
            (json!({"hidden_size": 64}), ""),
        ] {
            match tensors_from_config(&config) {
                Err(Error::UnsupportedModelType {
                    model_type,
                    supported,
                }) => {
                    assert_eq!(model_type, expected);
                    assert!(supported.contains("deepseek_v3"), "{supported}");
                }
                other => panic!("expected UnsupportedModelType, got {other:?}"),
            }
        }
    }

    #[test]
    fn a_model_type_that_is_not_a_string_is_named() {
        let (key, problem) = invalid(json!({"model_type": 7}));
        assert_eq!(key, "model_type");
        assert_eq!(
            problem,
            "must be a string, got `7` (a number); accepted: a model_type such as `\"llama\"`"
        );
        let (key, _) = invalid(json!({"model_type": ["llama"]}));
        assert_eq!(key, "model_type");
        assert!(dimensions(&json!({"model_type": null})).is_err());
    }

    #[test]
    fn zero_key_value_heads_are_refused() {
        for model_type in ["llama", "mistral", "phi3", "qwen2"] {
            let (key, problem) = invalid(json!({
                "model_type": model_type, "num_attention_heads": 32,
                "num_key_value_heads": 0,
            }));
            assert_eq!(key, "num_key_value_heads", "{model_type}");
            assert!(
                problem.contains("accepted: a divisor of num_attention_heads (32)"),
                "{problem}"
            );
        }
    }

    #[test]
    fn moe_tensors_get_expert_router_and_mlp_roles() {
        let config = json!({
            "model_type": "qwen2_moe", "hidden_size": 64, "intermediate_size": 128,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4,
            "vocab_size": 1000, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 96,
            "num_experts": 4, "decoder_sparse_step": 2,
        });
        let tensors = tensors_from_config(&config).unwrap();
        let layer = "model.layers.1.mlp";
        assert_eq!(
            role_of(&tensors, &format!("{layer}.experts.gate_up_proj")),
            Role::Experts
        );
        assert_eq!(
            role_of(&tensors, &format!("{layer}.experts.down_proj")),
            Role::Experts
        );
        assert_eq!(
            role_of(&tensors, &format!("{layer}.gate.weight")),
            Role::Router
        );
        assert_eq!(
            role_of(&tensors, &format!("{layer}.shared_expert_gate.weight")),
            Role::Router
        );
        assert_eq!(
            role_of(&tensors, &format!("{layer}.shared_expert.up_proj.weight")),
            Role::Mlp
        );
        assert_eq!(
            role_of(&tensors, "model.layers.0.mlp.up_proj.weight"),
            Role::Mlp
        );
        assert_eq!(
            role_of(&tensors, "model.layers.0.self_attn.q_proj.bias"),
            Role::Attention
        );
        assert_eq!(
            role_of(&tensors, "model.embed_tokens.weight"),
            Role::Embedding
        );
        assert_eq!(role_of(&tensors, "lm_head.weight"), Role::OutputHead);
    }

    #[test]
    fn norms_inside_attention_and_position_embeddings_get_their_roles() {
        let qwen3 =
            tensors_from_config(&json!({"model_type": "qwen3", "num_hidden_layers": 1})).unwrap();
        assert_eq!(
            role_of(&qwen3, "model.layers.0.self_attn.q_norm.weight"),
            Role::Norm
        );
        assert_eq!(
            role_of(&qwen3, "model.layers.0.input_layernorm.weight"),
            Role::Norm
        );
        let deepseek =
            tensors_from_config(&json!({"model_type": "deepseek_v3", "num_hidden_layers": 1}))
                .unwrap();
        assert_eq!(
            role_of(&deepseek, "model.layers.0.self_attn.kv_a_layernorm.weight"),
            Role::Norm
        );
        assert_eq!(
            role_of(&deepseek, "model.layers.0.self_attn.kv_b_proj.weight"),
            Role::Attention
        );
        let gpt2 = tensors_from_config(&json!({"model_type": "gpt2", "n_layer": 1})).unwrap();
        assert_eq!(role_of(&gpt2, "transformer.wpe.weight"), Role::Embedding);
        assert_eq!(role_of(&gpt2, "transformer.h.0.mlp.c_fc.weight"), Role::Mlp);
        assert!(
            gpt2.iter().all(|t| t.role != Role::OutputHead),
            "gpt2 ties lm_head by default"
        );
        assert!(gpt2.iter().all(|t| t.trainable && t.stored_dtype.is_none()));
    }
}
