//! ViT, following transformers' `models/vit/configuration_vit.py`
//! (`ViTConfig`) and `modeling_vit.py` (`ViTModel`,
//! `ViTForImageClassification`).
//!
//! `ViTEmbeddings` registers a `cls_token` [1, 1, hidden], the
//! `position_embeddings` [1, patches + 1, hidden] (both `nn.Parameter`s)
//! and `patch_embeddings.projection`, a `Conv2d` with a bias whose kernel
//! and stride are the patch. Each `ViTLayer` is pre-norm:
//! `layernorm_before`, `attention.{q,k,v}_proj` (biased by `qkv_bias`),
//! `attention.o_proj`, `layernorm_after`, `mlp.fc1`, `mlp.fc2`. The body
//! ends in `layernorm`; the bare `ViTModel` adds `pooler.dense` (hidden to
//! `pooler_output_size`), `ViTForImageClassification` mounts the body as
//! `vit` without a pooler and reads the CLS token with `classifier`.

use super::config::{Config, exact_ratio};
use super::decoder::{Decoder, Layers};
use super::dimensions::{
    Dimensions, Dropout, EagerSoftmax, EncoderHead, EncoderParts, LayerLayout, Linears, MlpKind,
    NormKind, Positions, QkNormKind, QkvLayout, Softcap,
};
use super::params::{Norm, Params, product, sum};
use super::task::Task;
use super::tower::patch_conv;
use crate::error::{Error, Result};
use crate::model::Role;

/// What ViT accepts for `--task`, for the message refusing another.
const TASKS: &str = "embedding (the default: ViTModel) or seq-cls:N (ViTForImageClassification)";

/// `ViTConfig.image_size` and `patch_size`.
const IMAGE_SIZE: u64 = 224;
const PATCH_SIZE: u64 = 16;

/// The task ViT trains for when `--task` is not given: the bare model.
pub const DEFAULT_TASK: Task = Task::Embedding;

/// An image or patch size that `ViTPatchEmbeddings` reads as one number
/// (a square) or a `[height, width]` pair.
fn sides(config: &Config, key: &str, default: u64) -> Result<(u64, u64)> {
    match config.size_list(key) {
        Ok(list) => match list.as_slice() {
            [] => config.size(key, default).map(|side| (side, side)),
            [height, width] => Ok((*height, *width)),
            _ => Err(Error::InvalidConfig {
                key: key.to_string(),
                problem: format!(
                    "a list of {} sizes; accepted: one number or `[height, width]`",
                    list.len()
                ),
            }),
        },
        Err(_) => config.size(key, default).map(|side| (side, side)),
    }
}

/// How many patches a config's image becomes: `(height // patch_height) *
/// (width // patch_width)`, as `ViTPatchEmbeddings` counts them.
pub fn patches(config: &Config) -> Result<u64> {
    let (height, width) = sides(config, "image_size", IMAGE_SIZE)?;
    let (patch_height, patch_width) = sides(config, "patch_size", PATCH_SIZE)?;
    let zero = || Error::InvalidConfig {
        key: "patch_size".to_string(),
        problem: "`0` cannot cut an image into patches; accepted: a positive whole number"
            .to_string(),
    };
    product(&[
        height.checked_div(patch_height).ok_or_else(zero)?,
        width.checked_div(patch_width).ok_or_else(zero)?,
    ])
}

/// What one image becomes: `a 224 px image -> 197 tokens (196 patches of
/// 16 px + the CLS token)`, from the config's `image_size` and `patch_size`.
pub fn image_tokens(config: &Config) -> Result<String> {
    let pixels = |(height, width): (u64, u64)| {
        if height == width {
            format!("{height} px")
        } else {
            format!("{height}x{width} px")
        }
    };
    let patches = patches(config)?;
    Ok(format!(
        "a {} image -> {} tokens ({patches} patches of {} + the CLS token)",
        pixels(sides(config, "image_size", IMAGE_SIZE)?),
        sum(&[patches, 1])?,
        pixels(sides(config, "patch_size", PATCH_SIZE)?),
    ))
}

/// The sizes and kinds activation memory needs for `ViTForImageClassification`
/// (`seq-cls:N`): pre-norm layers (`layernorm_before`, `layernorm_after`,
/// one LayerNorm kernel each), separate biased q/k/v, eager attention's
/// softmax in fp32 and its cast copy (`eager_attention_forward`), the
/// `gelu` MLP, bidirectional attention, the pixels the patch convolution
/// saves, and the final LayerNorm and classifier over the CLS token. The
/// bare model has no loss of transformers' own; dropout (0 by default) and
/// activations other than `gelu` are not measured, and refused.
pub fn dimensions(config: &Config, task: Task) -> Result<Dimensions> {
    let Task::SequenceClassification { labels } = task else {
        return Err(Error::InvalidValue {
            what: "--task",
            value: task.to_string(),
            reason: "activations of `vit` are modelled for seq-cls:N (ViTForImageClassification), whose loss transformers computes".to_string(),
        });
    };
    let hidden = config.size("hidden_size", 768)?;
    let heads = config.size("num_attention_heads", 12)?;
    let head_dim = exact_ratio(hidden, heads, "num_attention_heads")?;
    if config
        .optional_size("head_dim", None)?
        .is_some_and(|dim| dim != head_dim)
    {
        return Err(Error::InvalidConfig {
            key: "head_dim".to_string(),
            problem: "an attention width other than the hidden size is not measured for activation memory; accepted: no head_dim".to_string(),
        });
    }
    let activation = config.string("hidden_act", Some("gelu"))?.unwrap_or("gelu");
    if activation != "gelu" {
        return Err(Error::InvalidConfig {
            key: "hidden_act".to_string(),
            problem: format!(
                "`{activation}` is not modelled for ViT's activation memory; accepted: gelu"
            ),
        });
    }
    for key in ["hidden_dropout_prob", "attention_probs_dropout_prob"] {
        if config.fraction(key, 0.0)? > 0.0 {
            return Err(Error::InvalidConfig {
                key: key.to_string(),
                problem: "ViT's dropouts are not measured for activation memory; accepted: 0 (ViTConfig's default)".to_string(),
            });
        }
    }
    let (height, width) = sides(config, "image_size", IMAGE_SIZE)?;
    let pixels = product(&[config.size("num_channels", 3)?, height, width])?;
    Ok(Dimensions {
        model_type: "vit".to_string(),
        layers: config.size("num_hidden_layers", 12)?,
        hidden,
        intermediate: config.size("intermediate_size", 3072)?,
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
        mlp: MlpKind::Gelu,
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
            attention_output: "o_proj",
            mlp_input: vec!["fc1"],
            mlp_output: "fc2",
            conv1d: false,
        },
        encoder: Some(EncoderParts {
            token_types_per_token: false,
            positions_from_ids: false,
            head_activation: MlpKind::Gelu,
            head: EncoderHead::ImageClassifier { labels },
            pixels,
            pixels_norm: false,
        }),
        images: None,
        encoder_decoder: None,
        state_space: None,
    })
}

/// The sequence one image becomes for activation memory: its patches and
/// the CLS token.
pub fn sequence(config: &Config) -> Result<u64> {
    sum(&[patches(config)?, 1])
}

/// The model `task`'s auto class builds for a ViT config.
pub fn describe(config: &Config, task: Task) -> Result<Decoder> {
    let bare = match task {
        Task::Embedding => true,
        Task::SequenceClassification { .. } => false,
        Task::MaskedLm | Task::TokenClassification { .. } | Task::CausalLm | Task::Seq2Seq => {
            return Err(Error::InvalidValue {
                what: "--task",
                value: task.to_string(),
                reason: format!(
                    "transformers has no {} class for `vit`; accepted for `vit`: {TASKS}",
                    task.auto_class()
                ),
            });
        }
    };
    let within = |name: &str| {
        if bare {
            name.to_string()
        } else {
            format!("vit.{name}")
        }
    };
    let hidden = config.size("hidden_size", 768)?;
    let heads = config.size("num_attention_heads", 12)?;
    let head_dim = config.head_dim_or_ratio(hidden, heads, "num_attention_heads")?;
    let attention = product(&[heads, head_dim])?;
    let intermediate = config.size("intermediate_size", 3072)?;
    let qkv_bias = config.flag("qkv_bias", true)?;

    let mut before_layers = Params::new();
    before_layers.tensor(
        within("embeddings.cls_token"),
        vec![1, 1, hidden],
        Role::Embedding,
    )?;
    before_layers.tensor(
        within("embeddings.position_embeddings"),
        vec![1, sum(&[patches(config)?, 1])?, hidden],
        Role::Embedding,
    )?;
    patch_conv(
        &mut before_layers,
        &within("embeddings.patch_embeddings.projection"),
        config.size("num_channels", 3)?,
        hidden,
        sides(config, "patch_size", PATCH_SIZE)?,
        true,
    )?;

    let mut layer = Params::new();
    for projection in ["q_proj", "k_proj", "v_proj"] {
        layer.linear(
            &format!("attention.{projection}"),
            hidden,
            attention,
            qkv_bias,
            Role::Attention,
        )?;
    }
    layer.linear("attention.o_proj", attention, hidden, true, Role::Attention)?;
    layer.norm("layernorm_before", vec![hidden], Norm::WeightAndBias)?;
    layer.norm("layernorm_after", vec![hidden], Norm::WeightAndBias)?;
    layer.linear("mlp.fc1", hidden, intermediate, true, Role::Mlp)?;
    layer.linear("mlp.fc2", intermediate, hidden, true, Role::Mlp)?;

    let mut after_layers = Params::new();
    after_layers.norm(&within("layernorm"), vec![hidden], Norm::WeightAndBias)?;
    match task {
        Task::SequenceClassification { labels } => {
            after_layers.linear("classifier", hidden, labels, true, Role::OutputHead)?;
        }
        _ => {
            // `pooler_output_size` falls back to the hidden size when unset
            // or zero (`ViTConfig.__post_init__`).
            let pooled = match config.optional_size("pooler_output_size", None)? {
                Some(size) if size > 0 => size,
                _ => hidden,
            };
            after_layers.linear("pooler.dense", hidden, pooled, true, Role::OutputHead)?;
        }
    }

    Ok(Decoder {
        before_layers,
        layers: Layers::uniform(
            if bare { "layers" } else { "vit.layers" },
            config.size("num_hidden_layers", 12)?,
            "num_hidden_layers",
            layer,
        ),
        after_layers,
    })
}
