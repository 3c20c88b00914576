//! Qwen2-VL and Qwen2.5-VL, following transformers'
//! `models/qwen2_vl/configuration_qwen2_vl.py` (`Qwen2VLConfig`,
//! `Qwen2VLVisionConfig`, `Qwen2VLTextConfig`), `modeling_qwen2_vl.py`
//! (`Qwen2VLForConditionalGeneration`,
//! `Qwen2VisionTransformerPretrainedModel`, `PatchMerger`) and their
//! `qwen2_5_vl` counterparts (`Qwen2_5_VLForConditionalGeneration`,
//! `Qwen2_5_VisionTransformerPretrainedModel`, `Qwen2_5_VLPatchMerger`).
//!
//! `model.visual`: `patch_embed.proj`, a bias-free `Conv3d` over
//! `temporal_patch_size` frames of `patch_size` pixels square; `blocks`,
//! pre-norm layers with a fused biased `attn.qkv` and `attn.proj`; the
//! `merger` (the projector): a norm `ln_q`, then `mlp.0` over the
//! `spatial_merge_size`² neighbouring patches concatenated and `mlp.2` to
//! the language model's width. Qwen2-VL's blocks use LayerNorms and a
//! `fc1`/`fc2` MLP of `mlp_ratio` times `embed_dim`; Qwen2.5-VL's use
//! RMSNorms (a weight only) and a gated `gate_proj`/`up_proj`/`down_proj`
//! MLP with biases, and its merger ends at `out_hidden_size`.
//! `model.language_model`: Qwen2's decoder body, read from `text_config`
//! or, in published files without one, from the top-level keys.

use serde_json::Value;

use super::config::Config;
use super::decoder::Decoder;
use super::params::{Norm, Params, product};
use super::task::Task;
use super::tower::whole;
use super::vision_language::{
    TextModel, Tying, causal_lm_only, language_model, layer_count, read_value, sub_config,
};
use crate::error::Result;
use crate::model::Role;

/// `Qwen2VLTextConfig`'s and `Qwen2_5_VLTextConfig`'s defaults (Qwen2-VL
/// 72B's language model) over Qwen2's layout.
const TEXT: TextModel = TextModel {
    model_type: "qwen2",
    forced: true,
    defaults: &[
        ("vocab_size", 152_064),
        ("hidden_size", 8192),
        ("intermediate_size", 29_568),
        ("num_hidden_layers", 80),
        ("num_attention_heads", 64),
        ("num_key_value_heads", 8),
    ],
};

/// The vision config defaults both versions share: `in_channels`,
/// `patch_size`, `spatial_merge_size`, `temporal_patch_size`, `depth`.
const CHANNELS: u64 = 3;
const PATCH_SIZE: u64 = 14;
const MERGE: u64 = 2;
const TEMPORAL_PATCH: u64 = 2;
const DEPTH: u64 = 32;

/// `Qwen2VLVisionConfig`'s `embed_dim`, `hidden_size` (the merger's
/// output) and `mlp_ratio`.
const EMBED_DIM: u64 = 1280;
const MERGER_OUTPUT: u64 = 3584;
const MLP_RATIO: u64 = 4;

/// `Qwen2_5_VLVisionConfig`'s `hidden_size`, `intermediate_size` and
/// `out_hidden_size`.
const HIDDEN_2_5: u64 = 3584;
const INTERMEDIATE_2_5: u64 = 3420;
const OUT_HIDDEN_2_5: u64 = 3584;

/// Which of the two vision towers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    Qwen2,
    Qwen2_5,
}

/// The patch grid both versions read from the vision config.
struct Patches {
    channels: u64,
    patch: u64,
    temporal: u64,
    merge: u64,
}

impl Patches {
    fn read(config: &Config) -> Result<Patches> {
        Ok(Patches {
            channels: config.size("in_channels", CHANNELS)?,
            patch: config.size("patch_size", PATCH_SIZE)?,
            temporal: config.size("temporal_patch_size", TEMPORAL_PATCH)?,
            merge: config.size("spatial_merge_size", MERGE)?,
        })
    }
}

/// `Qwen2VisionTransformerPretrainedModel` or its 2.5 counterpart.
fn vision_tower(config: &Config, version: Version) -> Result<Params> {
    let patches = Patches::read(config)?;
    let depth = layer_count(config, "depth", DEPTH)?;
    let (width, norm) = match version {
        Version::Qwen2 => (config.size("embed_dim", EMBED_DIM)?, Norm::WeightAndBias),
        Version::Qwen2_5 => (config.size("hidden_size", HIDDEN_2_5)?, Norm::Weight),
    };
    let mut params = Params::new();
    params.tensor(
        "patch_embed.proj.weight",
        vec![
            width,
            patches.channels,
            patches.temporal,
            patches.patch,
            patches.patch,
        ],
        Role::Embedding,
    )?;
    let mut block = Params::new();
    block.norm("norm1", vec![width], norm)?;
    block.norm("norm2", vec![width], norm)?;
    block.linear(
        "attn.qkv",
        width,
        product(&[3, width])?,
        true,
        Role::Attention,
    )?;
    block.linear("attn.proj", width, width, true, Role::Attention)?;
    match version {
        Version::Qwen2 => {
            let inner = product(&[width, config.size("mlp_ratio", MLP_RATIO)?])?;
            block.linear("mlp.fc1", width, inner, true, Role::Mlp)?;
            block.linear("mlp.fc2", inner, width, true, Role::Mlp)?;
        }
        Version::Qwen2_5 => {
            let inner = config.size("intermediate_size", INTERMEDIATE_2_5)?;
            block.linear("mlp.gate_proj", width, inner, true, Role::Mlp)?;
            block.linear("mlp.up_proj", width, inner, true, Role::Mlp)?;
            block.linear("mlp.down_proj", inner, width, true, Role::Mlp)?;
        }
    }
    for index in 0..depth {
        params.mount(&format!("blocks.{index}"), block.clone());
    }
    let output = match version {
        Version::Qwen2 => config.size("hidden_size", MERGER_OUTPUT)?,
        Version::Qwen2_5 => config.size("out_hidden_size", OUT_HIDDEN_2_5)?,
    };
    let merged = product(&[width, patches.merge, patches.merge])?;
    params.norm("merger.ln_q", vec![width], norm)?;
    params.linear("merger.mlp.0", merged, merged, true, Role::Mlp)?;
    params.linear("merger.mlp.2", merged, output, true, Role::Mlp)?;
    Ok(params)
}

/// The text config: `text_config` when the file has one, else the
/// top-level keys (`Qwen2VLConfig.__post_init__` builds it from them).
fn text_config(config: &Config) -> Result<Value> {
    match config.raw("text_config") {
        None | Some(Value::Null) => Ok(config.to_value()),
        Some(_) => sub_config(config, "text_config", &[]),
    }
}

/// The whole model of either version.
fn describe_version(config: &Config, version: Version) -> Result<Decoder> {
    let vision = sub_config(config, "vision_config", &[])?;
    let visual = read_value(&vision, "vision_config", |vision| {
        vision_tower(vision, version)
    })?;
    let section = match config.raw("text_config") {
        None | Some(Value::Null) => "",
        Some(_) => "text_config",
    };
    let (language, _) =
        language_model(config, text_config(config)?, section, &TEXT, Tying::Either)?;
    let mut params = Params::new();
    params.mount("model.visual", visual);
    params.append(language);
    Ok(whole(params))
}

/// `Qwen2VLForConditionalGeneration`.
pub fn describe(config: &Config, task: Task) -> Result<Decoder> {
    causal_lm_only("qwen2_vl", task, "Qwen2VLForConditionalGeneration")?;
    describe_version(config, Version::Qwen2)
}

/// `Qwen2_5_VLForConditionalGeneration`.
pub fn describe_2_5(config: &Config, task: Task) -> Result<Decoder> {
    causal_lm_only("qwen2_5_vl", task, "Qwen2_5_VLForConditionalGeneration")?;
    describe_version(config, Version::Qwen2_5)
}

/// The vision config's patch side and merge size.
fn patch_grid(config: &Config) -> Result<(u64, u64)> {
    let vision = sub_config(config, "vision_config", &[])?;
    read_value(&vision, "vision_config", |vision| {
        let patches = Patches::read(vision)?;
        Ok((patches.patch, patches.merge))
    })
}

/// What an image becomes without `--image-tokens`: as many tokens as its
/// resolution gives.
pub fn dynamic_tokens(config: &Config) -> Result<String> {
    let (patch, merge) = patch_grid(config)?;
    let side = product(&[patch, merge])?;
    Ok(format!(
        "an image -> one token per {side} x {side} px ({merge}x{merge} merged patches of {patch} px) at its own resolution; give --image-tokens N"
    ))
}

/// What an image of `tokens` tokens (after the merge) is: `tokens × merge²`
/// patches of `patch` pixels square, and their pixels.
pub fn image_tokens(config: &Config, tokens: u64) -> Result<(u64, String)> {
    let (patch, merge) = patch_grid(config)?;
    let patches = product(&[tokens, merge, merge])?;
    let pixels = product(&[patches, patch, patch])?;
    let side = product(&[patch, merge])?;
    let root = tokens.isqrt();
    let square = if root * root == tokens {
        let px = product(&[root, side])?;
        format!(", such as {px} x {px} px")
    } else {
        String::new()
    };
    Ok((
        tokens,
        format!(
            "an image of {tokens} tokens (--image-tokens) = {patches} patches of {patch} px merged {merge}x{merge} = {pixels} pixels{square}"
        ),
    ))
}
