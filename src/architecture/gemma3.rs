//! Gemma 3 with vision (`model_type` `gemma3`), following transformers'
//! `models/gemma3/configuration_gemma3.py` (`Gemma3Config`) and
//! `modeling_gemma3.py` (`Gemma3ForConditionalGeneration`, `Gemma3Model`,
//! `Gemma3MultiModalProjector`).
//!
//! `model.vision_tower`: a `SiglipVisionModel`'s tower (see
//! [`super::siglip::vision_tower`]; its attention-pooling head too unless
//! `vision_use_head` is false, as in the published checkpoints);
//! `model.multi_modal_projector`: `mm_input_projection_weight` [vision
//! width, text width] (a bare parameter, not a linear module) and the
//! RMSNorm `mm_soft_emb_norm` over the vision width, around an average
//! pool to `mm_tokens_per_image` tokens that has no parameters;
//! `model.language_model`: the `gemma3_text` body of `text_config`.
//! `lm_head` is tied to the token embedding unless the outer
//! `tie_word_embeddings` is false (the text config's own is not read).

use serde_json::Value;

use super::config::Config;
use super::decoder::Decoder;
use super::params::{Norm, Params};
use super::siglip;
use super::task::Task;
use super::tower::{patch_count, whole};
use super::vision_language::{
    TextModel, Tying, causal_lm_only, language_model, read_value, sub_config, tower_type,
};
use crate::error::{Error, Result};
use crate::model::Role;

/// The text config class is `Gemma3TextConfig` whatever the file says.
const TEXT: TextModel = TextModel {
    model_type: "gemma3_text",
    forced: true,
    defaults: &[],
};

/// `Gemma3Config.tie_word_embeddings`.
const TIED: bool = true;

/// `Gemma3Config.mm_tokens_per_image`.
const TOKENS_PER_IMAGE: u64 = 256;

/// `SiglipVisionConfig`'s `image_size` and `patch_size`.
const SIGLIP_IMAGE_SIZE: u64 = 224;
const SIGLIP_PATCH_SIZE: u64 = 16;

/// The vision sub-config as `Gemma3Config` builds it.
pub fn vision_config(config: &Config) -> Result<Value> {
    let vision = sub_config(config, "vision_config", &[])?;
    tower_type(&vision, "vision_config", "siglip_vision_model", "gemma3")?;
    Ok(vision)
}

/// `Gemma3ForConditionalGeneration`.
pub fn describe(config: &Config, task: Task) -> Result<Decoder> {
    causal_lm_only("gemma3", task, "Gemma3ForConditionalGeneration")?;
    let vision = vision_config(config)?;
    let (vision_params, vision_hidden) =
        read_value(&vision, "vision_config", siglip::vision_tower)?;
    let text = sub_config(config, "text_config", &[])?;
    let (language, text_hidden) =
        language_model(config, text, "text_config", &TEXT, Tying::Outer(TIED))?;
    let mut params = Params::new();
    params.mount("model.vision_tower", vision_params);
    params.tensor(
        "model.multi_modal_projector.mm_input_projection_weight",
        vec![vision_hidden, text_hidden],
        Role::Mlp,
    )?;
    params.norm(
        "model.multi_modal_projector.mm_soft_emb_norm",
        vec![vision_hidden],
        Norm::Weight,
    )?;
    params.append(language);
    Ok(whole(params))
}

/// How many tokens one image becomes in the language model
/// (`mm_tokens_per_image`, after the average pool), and a sentence saying so.
pub fn image_tokens(config: &Config) -> Result<(u64, String)> {
    let vision = vision_config(config)?;
    let (image, patch) = read_value(&vision, "vision_config", |vision| {
        Ok((
            vision.size("image_size", SIGLIP_IMAGE_SIZE)?,
            vision.size("patch_size", SIGLIP_PATCH_SIZE)?,
        ))
    })?;
    let patches = patch_count(image, patch)?;
    let tokens = config.size("mm_tokens_per_image", TOKENS_PER_IMAGE)?;
    if tokens == 0 {
        return Err(Error::InvalidConfig {
            key: "mm_tokens_per_image".to_string(),
            problem: "`0` leaves an image no tokens; accepted: a positive square such as 256"
                .to_string(),
        });
    }
    Ok((
        tokens,
        format!(
            "a {image} px image -> {tokens} image tokens in the language model's sequence (the vision tower reads {patches} patches of {patch} px, average-pooled to mm_tokens_per_image)"
        ),
    ))
}
