//! LLaVA, following transformers' `models/llava/configuration_llava.py`
//! (`LlavaConfig`) and `modeling_llava.py` (`LlavaForConditionalGeneration`,
//! `LlavaModel`, `LlavaMultiModalProjector`).
//!
//! `model.vision_tower`: a `CLIPVisionModel`'s tower (see
//! [`super::clip::vision_tower`]), every layer kept although
//! `vision_feature_layer` (default -2) reads an earlier one;
//! `model.multi_modal_projector`: `linear_1` from the vision width times
//! the number of feature layers to the text width, GELU, `linear_2`
//! (both biased unless `multimodal_projector_bias` is false);
//! `model.language_model`: the body of the causal LM `text_config`
//! describes (llama unless it says otherwise), `lm_head` beside `model`.

use serde_json::Value;

use super::clip;
use super::config::Config;
use super::decoder::Decoder;
use super::dimensions::{Dimensions, ImageInputs};
use super::params::{Params, product, sum};
use super::task::Task;
use super::tower::{patch_count, whole};
use super::vision_language::{
    TextModel, Tying, causal_lm_only, language_model, read_value, sub_config, text_value,
    tower_type,
};
use crate::error::{Error, Result};
use crate::model::Role;

/// `LlavaConfig`'s `init_kwargs` for an absent `vision_config`: CLIP
/// ViT-L/14 at 336 px.
const VISION_INIT: &[(&str, u64)] = &[
    ("intermediate_size", 4096),
    ("hidden_size", 1024),
    ("patch_size", 14),
    ("image_size", 336),
    ("num_hidden_layers", 24),
    ("num_attention_heads", 16),
    ("vocab_size", 32000),
    ("projection_dim", 768),
];

/// `CLIPVisionConfig`'s `image_size` and `patch_size` (for a
/// `vision_config` that leaves them out).
const CLIP_IMAGE_SIZE: u64 = 224;
const CLIP_PATCH_SIZE: u64 = 32;

/// `CLIPVisionConfig.hidden_size`.
const CLIP_HIDDEN: u64 = 768;

/// The text config's `model_type` when it has none.
const TEXT: TextModel = TextModel {
    model_type: "llama",
    forced: false,
    defaults: &[],
};

/// The vision sub-config as `LlavaConfig` builds it.
pub fn vision_config(config: &Config) -> Result<Value> {
    let vision = sub_config(config, "vision_config", VISION_INIT)?;
    tower_type(&vision, "vision_config", "clip_vision_model", "llava")?;
    Ok(vision)
}

/// How many vision layers `linear_1` reads: one for an index, the list's
/// length for a list of them.
fn feature_layers(config: &Config) -> Result<u64> {
    match config.raw("vision_feature_layer") {
        None | Some(Value::Number(_)) => Ok(1),
        Some(Value::Array(layers)) if !layers.is_empty() => Ok(layers.len() as u64),
        Some(_) => Err(Error::InvalidConfig {
            key: "vision_feature_layer".to_string(),
            problem:
                "is neither a layer index nor a list of them; accepted: such as `-2` or `[-2, -5]`"
                    .to_string(),
        }),
    }
}

/// `LlavaForConditionalGeneration`.
pub fn describe(config: &Config, task: Task) -> Result<Decoder> {
    causal_lm_only("llava", task, "LlavaForConditionalGeneration")?;
    let vision = vision_config(config)?;
    let (vision_params, vision_hidden) = read_value(&vision, "vision_config", clip::vision_tower)?;
    let text = sub_config(config, "text_config", &[])?;
    let (language, text_hidden) =
        language_model(config, text, "text_config", &TEXT, Tying::Either)?;
    let bias = config.flag("multimodal_projector_bias", true)?;
    let mut projector = Params::new();
    projector.linear(
        "linear_1",
        product(&[vision_hidden, feature_layers(config)?])?,
        text_hidden,
        bias,
        Role::Mlp,
    )?;
    projector.linear("linear_2", text_hidden, text_hidden, bias, Role::Mlp)?;
    let mut params = Params::new();
    params.mount("model.vision_tower", vision_params);
    params.mount("model.multi_modal_projector", projector);
    params.append(language);
    Ok(whole(params))
}

/// How many tokens one image becomes in the language model, and a
/// sentence saying so: the vision tower's patches (the class token
/// dropped by `vision_feature_select_strategy` `default`, kept by `full`).
pub fn image_tokens(config: &Config) -> Result<(u64, String)> {
    let vision = vision_config(config)?;
    let (image, patch) = read_value(&vision, "vision_config", |vision| {
        Ok((
            vision.size("image_size", CLIP_IMAGE_SIZE)?,
            vision.size("patch_size", CLIP_PATCH_SIZE)?,
        ))
    })?;
    let patches = patch_count(image, patch)?;
    let full = match config.string("vision_feature_select_strategy", Some("default"))? {
        Some("full") => true,
        Some("default") | None => false,
        Some(other) => {
            return Err(Error::InvalidConfig {
                key: "vision_feature_select_strategy".to_string(),
                problem: format!("`{other}` is not a strategy; accepted: default, full"),
            });
        }
    };
    let tokens = if full { sum(&[patches, 1])? } else { patches };
    Ok((
        tokens,
        format!(
            "a {image} px image -> {tokens} image tokens in the language model's sequence ({patches} patches of {patch} px{}; the vision tower reads {} tokens with the class token)",
            if full { " + the class token" } else { "" },
            sum(&[patches, 1])?
        ),
    ))
}

/// The activation dimensions of `LlavaForConditionalGeneration` trained
/// with its vision tower frozen: the language model's own (its text
/// config's decoder, run over the merged sequence of text and image
/// tokens), and what the projector and the merge save for the images
/// ([`ImageInputs`]; one image per sample until `--images` says
/// otherwise, the projector and embeddings training until the inventory
/// says otherwise). Several feature layers (`vision_feature_layer` a list,
/// concatenated) are not measured, and refused.
pub fn dimensions(config: &Config) -> Result<Dimensions> {
    if feature_layers(config)? != 1 {
        return Err(Error::InvalidConfig {
            key: "vision_feature_layer".to_string(),
            problem: "several feature layers (concatenated) are not measured for activation memory; accepted: one layer index such as -2".to_string(),
        });
    }
    let text = text_value(
        config,
        sub_config(config, "text_config", &[])?,
        "text_config",
        &TEXT,
        Tying::Either,
    )?;
    let dims = super::causal_lm_dimensions(&text)?;
    let vision = vision_config(config)?;
    let vision_hidden = read_value(&vision, "vision_config", |vision| {
        vision.size("hidden_size", CLIP_HIDDEN)
    })?;
    let (tokens, _) = image_tokens(config)?;
    let (image, patch) = read_value(&vision, "vision_config", |vision| {
        Ok((
            vision.size("image_size", CLIP_IMAGE_SIZE)?,
            vision.size("patch_size", CLIP_PATCH_SIZE)?,
        ))
    })?;
    let tower_tokens = sum(&[patch_count(image, patch)?, 1])?;
    Ok(Dimensions {
        images: Some(ImageInputs {
            per_sample: 1,
            tokens,
            tower_tokens,
            sliced: tokens != tower_tokens,
            vision_hidden,
            projector_hidden: dims.hidden,
            projector_trains: true,
            embeddings_train: true,
        }),
        ..dims
    })
}
