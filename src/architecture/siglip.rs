//! SigLIP, following transformers' `models/siglip/configuration_siglip.py`
//! (`SiglipConfig`, `SiglipTextConfig`, `SiglipVisionConfig`) and
//! `modeling_siglip.py` (`SiglipModel`, `SiglipForImageClassification`,
//! `SiglipVisionModel`).
//!
//! CLIP's two pre-norm towers (see [`super::tower`]) with other ends.
//! `SiglipTextModel`: `embeddings.token_embedding`,
//! `embeddings.position_embedding`, `encoder.layers`, `final_layer_norm`
//! and a biased `head` to `projection_size` (the hidden size by default).
//! `SiglipVisionModel`: `embeddings.patch_embedding` (a `Conv2d` with a
//! bias), `embeddings.position_embedding` (one row per patch, no class
//! token), `encoder.layers`, `post_layernorm` and, with `vision_use_head`,
//! the attention-pooling `head` (`SiglipMultiheadAttentionPoolingHead`: a
//! `probe` [1, 1, hidden], an `nn.MultiheadAttention` with a fused
//! `in_proj_weight` [3 hidden, hidden] and `in_proj_bias`, its `out_proj`,
//! a `layernorm` and an `mlp`). `SiglipModel` mounts them as `text_model`
//! and `vision_model` beside `logit_scale` and `logit_bias` (one element
//! each); `SiglipForImageClassification` keeps the vision tower and a
//! `classifier`.

use super::config::Config;
use super::decoder::Decoder;
use super::params::{Norm, Params, product};
use super::task::Task;
use super::tower::{Tower, TowerDefaults, patch_conv, patch_count, read_section, refused, whole};
use crate::error::Result;
use crate::model::Role;

/// The task SigLIP trains for when `--task` is not given: `SiglipModel`,
/// the contrastive pair model (for a vision sub-config, its bare tower).
pub const DEFAULT_TASK: Task = Task::Embedding;

/// `SiglipTextConfig`'s and `SiglipVisionConfig`'s defaults (the same).
const TOWER: TowerDefaults = TowerDefaults {
    hidden: 768,
    intermediate: 3072,
    layers: 12,
    heads: 12,
};

/// `SiglipTextConfig.vocab_size` and `max_position_embeddings`.
const VOCAB: u64 = 32000;
const TEXT_POSITIONS: u64 = 64;

/// `SiglipVisionConfig.image_size`, `patch_size` and `num_channels`.
const IMAGE_SIZE: u64 = 224;
const PATCH_SIZE: u64 = 16;
const CHANNELS: u64 = 3;

/// The fused query, key and value of `nn.MultiheadAttention`.
const FUSED_PROJECTIONS: u64 = 3;

/// `SiglipTextModel`.
fn text_tower(config: &Config) -> Result<Params> {
    let tower = Tower::read(config, TOWER)?;
    let hidden = tower.hidden;
    let mut params = Params::new();
    params.embedding(
        "embeddings.token_embedding",
        config.size("vocab_size", VOCAB)?,
        hidden,
    )?;
    params.embedding(
        "embeddings.position_embedding",
        config.size("max_position_embeddings", TEXT_POSITIONS)?,
        hidden,
    )?;
    tower.stack(&mut params, "encoder.layers")?;
    params.norm("final_layer_norm", vec![hidden], Norm::WeightAndBias)?;
    let projection = match config.optional_size("projection_size", None)? {
        Some(size) => size,
        None => hidden,
    };
    params.linear("head", hidden, projection, true, Role::OutputHead)?;
    Ok(params)
}

/// How many patches a SigLIP vision config's image becomes: `(image_size
/// // patch_size) ** 2`, every one a token (no class token).
pub fn vision_patches(config: &Config) -> Result<u64> {
    patch_count(
        config.size("image_size", IMAGE_SIZE)?,
        config.size("patch_size", PATCH_SIZE)?,
    )
}

/// What one image becomes in a SigLIP vision config: `a 224 px image -> 196
/// tokens (patches of 16 px, no class token)`.
fn vision_tokens(config: &Config) -> Result<String> {
    Ok(format!(
        "a {} px image -> {} tokens (patches of {} px, no class token)",
        config.size("image_size", IMAGE_SIZE)?,
        vision_patches(config)?,
        config.size("patch_size", PATCH_SIZE)?,
    ))
}

/// What each input of a `siglip` config's towers becomes.
pub fn input_tokens(config: &Config) -> Result<String> {
    let vision = read_section(config, "vision_config", vision_tokens)?;
    let text = read_section(config, "text_config", |text| {
        Ok(format!(
            "a text -> at most {} tokens (max_position_embeddings)",
            text.size("max_position_embeddings", TEXT_POSITIONS)?
        ))
    })?;
    Ok(format!("vision tower: {vision}; text tower: {text}"))
}

/// What one image becomes in a `siglip_vision_model` config.
pub fn input_tokens_vision(config: &Config) -> Result<String> {
    vision_tokens(config)
}

/// `SiglipVisionModel`, and its hidden size.
pub fn vision_tower(config: &Config) -> Result<(Params, u64)> {
    let tower = Tower::read(config, TOWER)?;
    let hidden = tower.hidden;
    let patch = config.size("patch_size", PATCH_SIZE)?;
    let mut params = Params::new();
    patch_conv(
        &mut params,
        "embeddings.patch_embedding",
        config.size("num_channels", CHANNELS)?,
        hidden,
        (patch, patch),
        true,
    )?;
    params.embedding(
        "embeddings.position_embedding",
        vision_patches(config)?,
        hidden,
    )?;
    tower.stack(&mut params, "encoder.layers")?;
    params.norm("post_layernorm", vec![hidden], Norm::WeightAndBias)?;
    if config.flag("vision_use_head", true)? {
        let fused = product(&[FUSED_PROJECTIONS, hidden])?;
        params.tensor("head.probe", vec![1, 1, hidden], Role::Embedding)?;
        params.tensor(
            "head.attention.in_proj_weight",
            vec![fused, hidden],
            Role::Attention,
        )?;
        params.tensor("head.attention.in_proj_bias", vec![fused], Role::Attention)?;
        params.linear(
            "head.attention.out_proj",
            hidden,
            hidden,
            true,
            Role::Attention,
        )?;
        params.norm("head.layernorm", vec![hidden], Norm::WeightAndBias)?;
        params.linear("head.mlp.fc1", hidden, tower.intermediate, true, Role::Mlp)?;
        params.linear("head.mlp.fc2", tower.intermediate, hidden, true, Role::Mlp)?;
    }
    Ok((params, hidden))
}

/// The model `task`'s auto class builds for a `siglip` config:
/// `SiglipModel` for `embedding`, `SiglipForImageClassification` for
/// `seq-cls:N`.
pub fn describe(config: &Config, task: Task) -> Result<Decoder> {
    let mut params = Params::new();
    match task {
        Task::Embedding => {
            params.tensor("logit_scale", vec![1], Role::Other)?;
            params.tensor("logit_bias", vec![1], Role::Other)?;
            params.mount(
                "text_model",
                read_section(config, "text_config", text_tower)?,
            );
            let (vision, _) = read_section(config, "vision_config", vision_tower)?;
            params.mount("vision_model", vision);
        }
        Task::SequenceClassification { labels } => {
            let (vision, hidden) = read_section(config, "vision_config", vision_tower)?;
            params.mount("vision_model", vision);
            params.linear("classifier", hidden, labels, true, Role::OutputHead)?;
        }
        other => {
            return Err(refused(
                "siglip",
                other,
                "embedding (the default: SiglipModel) or seq-cls:N (SiglipForImageClassification)",
            ));
        }
    }
    Ok(whole(params))
}

/// `SiglipVisionModel`, the bare model of a `siglip_vision_model` config.
pub fn describe_vision(config: &Config, task: Task) -> Result<Decoder> {
    if task != Task::Embedding {
        return Err(refused(
            "siglip_vision_model",
            task,
            "embedding (the default: SiglipVisionModel)",
        ));
    }
    Ok(whole(vision_tower(config)?.0))
}
