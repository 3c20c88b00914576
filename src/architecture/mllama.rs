//! Llama 3.2 Vision (`model_type` `mllama`), following transformers'
//! `models/mllama/configuration_mllama.py` (`MllamaConfig`,
//! `MllamaVisionConfig`, `MllamaTextConfig`) and `modeling_mllama.py`
//! (`MllamaForConditionalGeneration`, `MllamaVisionModel`,
//! `MllamaTextModel`, `MllamaCrossAttentionDecoderLayer`).
//!
//! `model.vision_model`: a bias-free patch `Conv2d`, a `class_embedding`,
//! gated position embeddings (`gated_positional_embedding`: a gate, one
//! row per patch and the class token, and a `tile_embedding` of every
//! tile's positions per aspect ratio; `pre_`/`post_tile_positional_embedding`:
//! a gate and one row of `max_num_tiles` widths per aspect ratio, the
//! aspect ratios counted from `supported_aspect_ratios` plus one),
//! `layernorm_pre`/`_post`, a `transformer` of `num_hidden_layers` layers
//! and a `global_transformer` of `num_global_layers` layers with
//! `gate_attn` and `gate_ffn` (bias-free q/k/v/o, a biased `fc1`/`fc2` MLP,
//! LayerNorms). `model.multi_modal_projector`: one biased linear from
//! `vision_output_dim` to the text width. `model.language_model`: the
//! token embedding has 8 more rows than `vocab_size`; the layers listed
//! in `cross_attention_layers` are gated cross-attention layers
//! (`cross_attn` with `q_norm`/`k_norm`, `cross_attn_attn_gate`,
//! `cross_attn_mlp_gate`), the others llama self-attention layers.
//! `lm_head` has `vocab_size` rows.

use std::collections::BTreeSet;

use super::config::{Config, ratio};
use super::decoder::Decoder;
use super::params::{Norm, Params, product, sum};
use super::task::Task;
use super::tower::{patch_count, whole};
use super::vision_language::{causal_lm_only, layer_count, list_length, read_value, sub_config};
use crate::error::{Error, Result};
use crate::model::Role;

/// `MllamaVisionConfig`'s defaults.
const VISION_HIDDEN: u64 = 1280;
const VISION_INTERMEDIATE: u64 = 5120;
const VISION_LAYERS: u64 = 32;
const GLOBAL_LAYERS: u64 = 8;
const VISION_HEADS: u64 = 16;
const CHANNELS: u64 = 3;
const VISION_OUTPUT: u64 = 7680;
const IMAGE_SIZE: u64 = 448;
const PATCH_SIZE: u64 = 14;
const MAX_TILES: u64 = 4;
/// The eight `supported_aspect_ratios` filled in when absent.
const ASPECT_RATIOS: u64 = 8;

/// `MllamaTextConfig`'s defaults.
const VOCAB: u64 = 128_256;
const HIDDEN: u64 = 4096;
const LAYERS: u64 = 40;
const HEADS: u64 = 32;
const KV_HEADS: u64 = 8;
const INTERMEDIATE: u64 = 14_336;
/// `cross_attention_layers` filled in when absent.
const CROSS_LAYERS: [u64; 8] = [3, 8, 13, 18, 23, 28, 33, 38];

/// `MllamaTextModel.embed_tokens` has `vocab_size + 8` rows.
const EXTRA_EMBEDDINGS: u64 = 8;

/// `MllamaVisionEncoderLayer`, relative to the layer.
fn vision_layer(hidden: u64, inner: u64, intermediate: u64, gated: bool) -> Result<Params> {
    let mut layer = Params::new();
    if gated {
        layer.tensor("gate_attn", vec![1], Role::Other)?;
        layer.tensor("gate_ffn", vec![1], Role::Other)?;
    }
    for projection in ["q_proj", "k_proj", "v_proj"] {
        layer.linear(
            &format!("self_attn.{projection}"),
            hidden,
            inner,
            false,
            Role::Attention,
        )?;
    }
    layer.linear("self_attn.o_proj", inner, hidden, false, Role::Attention)?;
    layer.linear("mlp.fc1", hidden, intermediate, true, Role::Mlp)?;
    layer.linear("mlp.fc2", intermediate, hidden, true, Role::Mlp)?;
    layer.norm("input_layernorm", vec![hidden], Norm::WeightAndBias)?;
    layer.norm(
        "post_attention_layernorm",
        vec![hidden],
        Norm::WeightAndBias,
    )?;
    Ok(layer)
}

/// `MllamaVisionModel`, and `vision_output_dim`.
fn vision_model(config: &Config) -> Result<(Params, u64)> {
    let hidden = config.size("hidden_size", VISION_HIDDEN)?;
    let heads = config.size("attention_heads", VISION_HEADS)?;
    let inner = product(&[heads, ratio(hidden, heads, "attention_heads")?])?;
    let intermediate = config.size("intermediate_size", VISION_INTERMEDIATE)?;
    let patch = config.size("patch_size", PATCH_SIZE)?;
    let positions = sum(&[
        patch_count(config.size("image_size", IMAGE_SIZE)?, patch)?,
        1,
    ])?;
    let tiles = config.size("max_num_tiles", MAX_TILES)?;
    let ratios = sum(&[
        list_length(config, "supported_aspect_ratios", ASPECT_RATIOS)?,
        1,
    ])?;
    let mut params = Params::new();
    params.tensor("class_embedding", vec![hidden], Role::Embedding)?;
    params.tensor(
        "patch_embedding.weight",
        vec![hidden, config.size("num_channels", CHANNELS)?, patch, patch],
        Role::Embedding,
    )?;
    params.tensor("gated_positional_embedding.gate", vec![1], Role::Embedding)?;
    params.tensor(
        "gated_positional_embedding.embedding",
        vec![positions, hidden],
        Role::Embedding,
    )?;
    params.tensor(
        "gated_positional_embedding.tile_embedding.weight",
        vec![ratios, product(&[tiles, positions, hidden])?],
        Role::Embedding,
    )?;
    for tile in [
        "pre_tile_positional_embedding",
        "post_tile_positional_embedding",
    ] {
        params.tensor(format!("{tile}.gate"), vec![1], Role::Embedding)?;
        params.tensor(
            format!("{tile}.embedding.weight"),
            vec![ratios, product(&[tiles, hidden])?],
            Role::Embedding,
        )?;
    }
    params.norm("layernorm_pre", vec![hidden], Norm::WeightAndBias)?;
    params.norm("layernorm_post", vec![hidden], Norm::WeightAndBias)?;
    for (stack, key, default, gated) in [
        ("transformer", "num_hidden_layers", VISION_LAYERS, false),
        (
            "global_transformer",
            "num_global_layers",
            GLOBAL_LAYERS,
            true,
        ),
    ] {
        let layer = vision_layer(hidden, inner, intermediate, gated)?;
        for index in 0..layer_count(config, key, default)? {
            params.mount(&format!("{stack}.layers.{index}"), layer.clone());
        }
    }
    Ok((params, config.size("vision_output_dim", VISION_OUTPUT)?))
}

/// The cross-attention layer indices: `cross_attention_layers`, or the
/// class's eight when absent or `null`.
fn cross_layers(config: &Config) -> Result<BTreeSet<u64>> {
    Ok(match config.raw("cross_attention_layers") {
        None | Some(serde_json::Value::Null) => CROSS_LAYERS.into_iter().collect(),
        Some(_) => config
            .size_list("cross_attention_layers")?
            .into_iter()
            .collect(),
    })
}

/// `MllamaTextModel` (relative to `model.language_model`), its `lm_head`
/// and its hidden size.
fn text_model(config: &Config) -> Result<(Params, Params, u64)> {
    let hidden = config.size("hidden_size", HIDDEN)?;
    let vocab = config.size("vocab_size", VOCAB)?;
    let heads = config.size("num_attention_heads", HEADS)?;
    let kv_heads = config.size("num_key_value_heads", KV_HEADS)?;
    let head_dim = ratio(hidden, heads, "num_attention_heads")?;
    let (query, key_value) = (
        product(&[heads, head_dim])?,
        product(&[kv_heads, head_dim])?,
    );
    let intermediate = config.size("intermediate_size", INTERMEDIATE)?;
    if config.flag("tie_word_embeddings", false)? {
        return Err(Error::InvalidConfig {
            key: "tie_word_embeddings".to_string(),
            problem: "`true` would tie lm_head's vocab_size rows to the embedding's vocab_size + 8; accepted: false (MllamaTextConfig's default)".to_string(),
        });
    }
    let mlp = |layer: &mut Params| -> Result<()> {
        layer.linear("mlp.gate_proj", hidden, intermediate, false, Role::Mlp)?;
        layer.linear("mlp.up_proj", hidden, intermediate, false, Role::Mlp)?;
        layer.linear("mlp.down_proj", intermediate, hidden, false, Role::Mlp)
    };
    let attention = |layer: &mut Params, module: &str| -> Result<()> {
        layer.linear(
            &format!("{module}.q_proj"),
            hidden,
            query,
            false,
            Role::Attention,
        )?;
        layer.linear(
            &format!("{module}.k_proj"),
            hidden,
            key_value,
            false,
            Role::Attention,
        )?;
        layer.linear(
            &format!("{module}.v_proj"),
            hidden,
            key_value,
            false,
            Role::Attention,
        )?;
        layer.linear(
            &format!("{module}.o_proj"),
            query,
            hidden,
            false,
            Role::Attention,
        )
    };
    let mut self_layer = Params::new();
    attention(&mut self_layer, "self_attn")?;
    mlp(&mut self_layer)?;
    self_layer.norm("input_layernorm", vec![hidden], Norm::Weight)?;
    self_layer.norm("post_attention_layernorm", vec![hidden], Norm::Weight)?;
    let mut cross_layer = Params::new();
    cross_layer.tensor("cross_attn_attn_gate", vec![1], Role::Other)?;
    cross_layer.tensor("cross_attn_mlp_gate", vec![1], Role::Other)?;
    attention(&mut cross_layer, "cross_attn")?;
    cross_layer.norm("cross_attn.q_norm", vec![head_dim], Norm::Weight)?;
    cross_layer.norm("cross_attn.k_norm", vec![head_dim], Norm::Weight)?;
    cross_layer.norm("input_layernorm", vec![hidden], Norm::Weight)?;
    mlp(&mut cross_layer)?;
    cross_layer.norm("post_attention_layernorm", vec![hidden], Norm::Weight)?;

    let cross = cross_layers(config)?;
    let mut body = Params::new();
    body.embedding("embed_tokens", sum(&[vocab, EXTRA_EMBEDDINGS])?, hidden)?;
    for index in 0..layer_count(config, "num_hidden_layers", LAYERS)? {
        let layer = if cross.contains(&index) {
            cross_layer.clone()
        } else {
            self_layer.clone()
        };
        body.mount(&format!("layers.{index}"), layer);
    }
    body.norm("norm", vec![hidden], Norm::Weight)?;
    let mut head = Params::new();
    head.output_head(vocab, hidden, false, false)?;
    Ok((body, head, hidden))
}

/// `MllamaForConditionalGeneration`.
pub fn describe(config: &Config, task: Task) -> Result<Decoder> {
    causal_lm_only("mllama", task, "MllamaForConditionalGeneration")?;
    let vision = sub_config(config, "vision_config", &[])?;
    let (vision_params, vision_output) = read_value(&vision, "vision_config", vision_model)?;
    let text = sub_config(config, "text_config", &[])?;
    let (body, head, hidden) = read_value(&text, "text_config", text_model)?;
    let mut params = Params::new();
    params.mount("model.vision_model", vision_params);
    params.mount("model.language_model", body);
    params.linear(
        "model.multi_modal_projector",
        vision_output,
        hidden,
        true,
        Role::Mlp,
    )?;
    for param in head.iter() {
        params.tensor(param.name.clone(), param.shape.dims().to_vec(), param.role)?;
    }
    Ok(whole(params))
}

/// What one image becomes: up to `max_num_tiles` tiles of the vision
/// tower's patches and class token, which the cross-attention layers
/// read; the text sequence holds one image token.
pub fn image_tokens(config: &Config) -> Result<(u64, String)> {
    let vision = sub_config(config, "vision_config", &[])?;
    read_value(&vision, "vision_config", |vision| {
        let image = vision.size("image_size", IMAGE_SIZE)?;
        let patch = vision.size("patch_size", PATCH_SIZE)?;
        let patches = patch_count(image, patch)?;
        let tiles = vision.size("max_num_tiles", MAX_TILES)?;
        let per_tile = sum(&[patches, 1])?;
        Ok((
            1,
            format!(
                "an image -> up to {tiles} tiles of {image} px, each {per_tile} vision tokens ({patches} patches of {patch} px + the class token), up to {} cross-attention states; 1 image token in the language model's sequence",
                product(&[tiles, per_tile])?
            ),
        ))
    })
}
