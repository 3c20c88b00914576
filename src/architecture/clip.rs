//! CLIP, following transformers' `models/clip/configuration_clip.py`
//! (`CLIPConfig`, `CLIPTextConfig`, `CLIPVisionConfig`) and
//! `modeling_clip.py` (`CLIPModel`, `CLIPForImageClassification`,
//! `CLIPTextModel`, `CLIPVisionModel`).
//!
//! Two pre-norm towers of `CLIPEncoderLayer`s (see [`super::tower`]).
//! `CLIPTextModel`: `embeddings.token_embedding`,
//! `embeddings.position_embedding` (`max_position_embeddings` rows),
//! `encoder.layers`, `final_layer_norm`. `CLIPVisionModel`:
//! `embeddings.class_embedding` [hidden], `embeddings.patch_embedding` (a
//! `Conv2d` without bias), `embeddings.position_embedding` (patches + 1
//! rows), `pre_layrnorm`, `encoder.layers`, `post_layernorm`. `CLIPModel`
//! mounts them as `text_model` and `vision_model` beside `logit_scale` (a
//! scalar) and the bias-free `visual_projection` and `text_projection` to
//! `projection_dim`; `CLIPForImageClassification` keeps the vision tower
//! and a `classifier` over its mean patch token.

use super::config::{Config, exact_ratio};
use super::decoder::Decoder;
use super::dimensions::{
    Dimensions, Dropout, EagerSoftmax, EncoderHead, EncoderParts, LayerLayout, Linears, MlpKind,
    NormKind, Positions, QkNormKind, QkvLayout, Softcap,
};
use super::params::{Norm, Params, sum};
use super::task::Task;
use super::tower::{Tower, TowerDefaults, patch_conv, patch_count, read_section, refused, whole};
use crate::error::{Error, Result};
use crate::model::Role;

/// The task CLIP trains for when `--task` is not given: `CLIPModel`, the
/// contrastive pair model (for a sub-config, its bare tower).
pub const DEFAULT_TASK: Task = Task::Embedding;

/// `CLIPTextConfig`'s defaults.
const TEXT: TowerDefaults = TowerDefaults {
    hidden: 512,
    intermediate: 2048,
    layers: 12,
    heads: 8,
};

/// `CLIPVisionConfig`'s defaults.
const VISION: TowerDefaults = TowerDefaults {
    hidden: 768,
    intermediate: 3072,
    layers: 12,
    heads: 12,
};

/// `CLIPTextConfig.vocab_size` and `max_position_embeddings`.
const VOCAB: u64 = 49408;
const TEXT_POSITIONS: u64 = 77;

/// `CLIPVisionConfig.image_size`, `patch_size` and `num_channels`.
const IMAGE_SIZE: u64 = 224;
const PATCH_SIZE: u64 = 32;
const CHANNELS: u64 = 3;

/// `CLIPConfig.projection_dim`.
const PROJECTION: u64 = 512;

/// `CLIPTextModel`, and its hidden size.
fn text_tower(config: &Config) -> Result<(Params, u64)> {
    let tower = Tower::read(config, TEXT)?;
    let mut params = Params::new();
    params.embedding(
        "embeddings.token_embedding",
        config.size("vocab_size", VOCAB)?,
        tower.hidden,
    )?;
    params.embedding(
        "embeddings.position_embedding",
        config.size("max_position_embeddings", TEXT_POSITIONS)?,
        tower.hidden,
    )?;
    tower.stack(&mut params, "encoder.layers")?;
    params.norm("final_layer_norm", vec![tower.hidden], Norm::WeightAndBias)?;
    Ok((params, tower.hidden))
}

/// How many patches (without the class token) a CLIP vision config's image
/// becomes: `(image_size // patch_size) ** 2`.
pub fn vision_patches(config: &Config) -> Result<u64> {
    patch_count(
        config.size("image_size", IMAGE_SIZE)?,
        config.size("patch_size", PATCH_SIZE)?,
    )
}

/// What one image becomes in a CLIP vision config: `a 224 px image -> 257
/// tokens (256 patches of 14 px + the class token)`.
fn vision_tokens(config: &Config) -> Result<String> {
    let patches = vision_patches(config)?;
    Ok(format!(
        "a {} px image -> {} tokens ({patches} patches of {} px + the class token)",
        config.size("image_size", IMAGE_SIZE)?,
        sum(&[patches, 1])?,
        config.size("patch_size", PATCH_SIZE)?,
    ))
}

/// What a text becomes in a CLIP text config: at most
/// `max_position_embeddings` tokens.
fn text_tokens(config: &Config) -> Result<String> {
    Ok(format!(
        "a text -> at most {} tokens (max_position_embeddings)",
        config.size("max_position_embeddings", TEXT_POSITIONS)?
    ))
}

/// What each input of a `clip` config's towers becomes.
pub fn input_tokens(config: &Config) -> Result<String> {
    let vision = read_section(config, section(config, "vision")?, vision_tokens)?;
    let text = read_section(config, section(config, "text")?, text_tokens)?;
    Ok(format!("vision tower: {vision}; text tower: {text}"))
}

/// What one image becomes in a `clip_vision_model` config.
pub fn input_tokens_vision(config: &Config) -> Result<String> {
    vision_tokens(config)
}

/// What a text becomes in a `clip_text_model` config.
pub fn input_tokens_text(config: &Config) -> Result<String> {
    text_tokens(config)
}

/// The `hidden_act` values whose saved tensors are modelled, and how.
const ACTIVATIONS: &[(&str, MlpKind)] =
    &[("quick_gelu", MlpKind::QuickGelu), ("gelu", MlpKind::Gelu)];

/// The sizes and kinds activation memory needs for
/// `CLIPForImageClassification` (`seq-cls:N`), the vision tower alone:
/// the pixels the patch convolution saves, `pre_layrnorm`, pre-norm
/// `CLIPEncoderLayer`s (one LayerNorm kernel each, separate biased q/k/v,
/// eager attention's softmax in fp32 and its cast copy, the
/// `hidden_act` MLP: `quick_gelu` in Python or `gelu`), bidirectional
/// attention, and the classifier over the mean of the patch tokens. The
/// contrastive `CLIPModel` (both towers and their loss) is not modelled.
pub fn dimensions(config: &Config, task: Task) -> Result<Dimensions> {
    let Task::SequenceClassification { labels } = task else {
        return Err(Error::InvalidValue {
            what: "--task",
            value: task.to_string(),
            reason: "activations of `clip` are modelled for seq-cls:N (CLIPForImageClassification); CLIPModel's contrastive training of both towers is not modelled yet".to_string(),
        });
    };
    read_section(config, section(config, "vision")?, |vision| {
        vision_dimensions(vision, labels)
    })
}

/// [`dimensions`] read from the vision sub-config.
fn vision_dimensions(config: &Config, labels: u64) -> Result<Dimensions> {
    let tower = Tower::read(config, VISION)?;
    let heads = config.size("num_attention_heads", VISION.heads)?;
    let head_dim = exact_ratio(tower.hidden, heads, "num_attention_heads")?;
    let activation = config
        .string("hidden_act", Some("quick_gelu"))?
        .unwrap_or("quick_gelu");
    let mlp = ACTIVATIONS
        .iter()
        .find(|(name, _)| *name == activation)
        .map(|(_, kind)| *kind)
        .ok_or_else(|| Error::InvalidConfig {
            key: "hidden_act".to_string(),
            problem: format!(
                "`{activation}` is not modelled for CLIP's activation memory; accepted: quick_gelu, gelu"
            ),
        })?;
    if config.fraction("attention_dropout", 0.0)? > 0.0 {
        return Err(Error::InvalidConfig {
            key: "attention_dropout".to_string(),
            problem: "CLIP's attention dropout is not measured for activation memory; accepted: 0 (CLIPVisionConfig's default)".to_string(),
        });
    }
    let side = config.size("image_size", IMAGE_SIZE)?;
    let pixels = config
        .size("num_channels", CHANNELS)?
        .checked_mul(side)
        .and_then(|pixels| pixels.checked_mul(side))
        .ok_or_else(|| Error::InvalidConfig {
            key: "image_size".to_string(),
            problem: format!("`{side}` makes too many pixels; accepted: a real image size"),
        })?;
    Ok(Dimensions {
        model_type: "clip".to_string(),
        layers: tower.layers,
        hidden: tower.hidden,
        intermediate: tower.intermediate,
        heads,
        kv_heads: heads,
        head_dim,
        vocab: labels,
        tied_embeddings: false,
        norm: NormKind::LayerNorm,
        layout: LayerLayout::PreNorm,
        qkv: QkvLayout::Separate,
        qk_norm: QkNormKind::None,
        softmax: EagerSoftmax::Fp32WithCast,
        mlp,
        experts: None,
        positions: Positions::Learned,
        dropout: Dropout {
            attention: false,
            residual: false,
            embedding: false,
        },
        softcap: Softcap::default(),
        mask_positional: false,
        linears: Linears {
            attention_input: vec!["q_proj", "k_proj", "v_proj"],
            attention_output: "out_proj",
            mlp_input: vec!["fc1"],
            mlp_output: "fc2",
            conv1d: false,
        },
        encoder: Some(EncoderParts {
            token_types_per_token: false,
            positions_from_ids: false,
            head_activation: mlp,
            head: EncoderHead::MeanPooledClassifier { labels },
            pixels,
            pixels_norm: true,
        }),
        images: None,
        encoder_decoder: None,
        state_space: None,
    })
}

/// The sequence one image becomes in a `clip` config's vision tower: its
/// patches and the class token.
pub fn image_sequence(config: &Config) -> Result<u64> {
    read_section(config, section(config, "vision")?, |vision| {
        sum(&[vision_patches(vision)?, 1])
    })
}

/// `CLIPVisionModel`, and its hidden size.
pub fn vision_tower(config: &Config) -> Result<(Params, u64)> {
    let tower = Tower::read(config, VISION)?;
    let hidden = tower.hidden;
    let patch = config.size("patch_size", PATCH_SIZE)?;
    let mut params = Params::new();
    params.tensor("embeddings.class_embedding", vec![hidden], Role::Embedding)?;
    patch_conv(
        &mut params,
        "embeddings.patch_embedding",
        config.size("num_channels", CHANNELS)?,
        hidden,
        (patch, patch),
        false,
    )?;
    params.embedding(
        "embeddings.position_embedding",
        sum(&[vision_patches(config)?, 1])?,
        hidden,
    )?;
    params.norm("pre_layrnorm", vec![hidden], Norm::WeightAndBias)?;
    tower.stack(&mut params, "encoder.layers")?;
    params.norm("post_layernorm", vec![hidden], Norm::WeightAndBias)?;
    Ok((params, hidden))
}

/// The sub-config a `CLIPConfig` reads a tower from: `{tower}_config_dict`
/// (old published files) replaces `{tower}_config` when present, as
/// `CLIPConfig.__post_init__` builds the whole tower config from it.
fn section(config: &Config, tower: &'static str) -> Result<&'static str> {
    let (legacy, current) = match tower {
        "text" => ("text_config_dict", "text_config"),
        _ => ("vision_config_dict", "vision_config"),
    };
    Ok(if config.object(legacy)?.is_some() {
        legacy
    } else {
        current
    })
}

/// The model `task`'s auto class builds for a `clip` config: `CLIPModel`
/// for `embedding`, `CLIPForImageClassification` for `seq-cls:N`.
pub fn describe(config: &Config, task: Task) -> Result<Decoder> {
    let vision = section(config, "vision")?;
    let mut params = Params::new();
    match task {
        Task::Embedding => {
            let text = section(config, "text")?;
            let projection = config.size("projection_dim", PROJECTION)?;
            params.tensor("logit_scale", vec![], Role::Other)?;
            let (text_params, text_hidden) = read_section(config, text, text_tower)?;
            let (vision_params, vision_hidden) = read_section(config, vision, vision_tower)?;
            params.mount("text_model", text_params);
            params.mount("vision_model", vision_params);
            params.linear(
                "visual_projection",
                vision_hidden,
                projection,
                false,
                Role::OutputHead,
            )?;
            params.linear(
                "text_projection",
                text_hidden,
                projection,
                false,
                Role::OutputHead,
            )?;
        }
        Task::SequenceClassification { labels } => {
            let (vision_params, vision_hidden) = read_section(config, vision, vision_tower)?;
            params.mount("vision_model", vision_params);
            params.linear("classifier", vision_hidden, labels, true, Role::OutputHead)?;
        }
        other => {
            return Err(refused(
                "clip",
                other,
                "embedding (the default: CLIPModel) or seq-cls:N (CLIPForImageClassification)",
            ));
        }
    }
    Ok(whole(params))
}

/// `CLIPVisionModel`, the bare model of a `clip_vision_model` config.
pub fn describe_vision(config: &Config, task: Task) -> Result<Decoder> {
    if task != Task::Embedding {
        return Err(refused(
            "clip_vision_model",
            task,
            "embedding (the default: CLIPVisionModel)",
        ));
    }
    Ok(whole(vision_tower(config)?.0))
}

/// `CLIPTextModel`, the bare model of a `clip_text_model` config.
pub fn describe_text(config: &Config, task: Task) -> Result<Decoder> {
    if task != Task::Embedding {
        return Err(refused(
            "clip_text_model",
            task,
            "embedding (the default: CLIPTextModel)",
        ));
    }
    Ok(whole(text_tower(config)?.0))
}
