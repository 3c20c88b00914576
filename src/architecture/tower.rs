//! The pieces vision encoders and contrastive towers share: a config's
//! sub-config (`text_config`, `vision_config`), the patch grid an image
//! becomes, and the pre-norm layer CLIP and SigLIP stack.
//!
//! transformers' `CLIPEncoderLayer` (`models/clip/modeling_clip.py`) and
//! `SiglipEncoderLayer` (`models/siglip/modeling_siglip.py`) register
//! `self_attn.{k,v,q,out}_proj` (every linear with a bias), `layer_norm1`,
//! `mlp.fc1`, `mlp.fc2` and `layer_norm2`; a tower's `encoder.layers` is
//! an `nn.ModuleList` of them.

use serde_json::Value;

use super::config::{Config, exact_ratio};
use super::decoder::{Decoder, Layers, MAX_LAYERS};
use super::params::{Norm, Params};
use super::task::Task;
use crate::error::{Error, Result};
use crate::model::Role;

/// A transformer tower's sizes, read from its (sub-)config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tower {
    /// `hidden_size`.
    pub hidden: u64,
    /// `intermediate_size`.
    pub intermediate: u64,
    /// `num_hidden_layers`.
    pub layers: u64,
}

/// A tower config class's defaults for the keys that shape parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TowerDefaults {
    /// `hidden_size`.
    pub hidden: u64,
    /// `intermediate_size`.
    pub intermediate: u64,
    /// `num_hidden_layers`.
    pub layers: u64,
    /// `num_attention_heads`.
    pub heads: u64,
}

impl Tower {
    /// Reads `hidden_size`, `intermediate_size`, `num_hidden_layers` and
    /// `num_attention_heads` (which must divide the hidden size, as the
    /// attention classes raise otherwise), at most [`MAX_LAYERS`] layers.
    pub fn read(config: &Config, defaults: TowerDefaults) -> Result<Tower> {
        let hidden = config.size("hidden_size", defaults.hidden)?;
        exact_ratio(
            hidden,
            config.size("num_attention_heads", defaults.heads)?,
            "num_attention_heads",
        )?;
        let layers = config.size("num_hidden_layers", defaults.layers)?;
        if layers > MAX_LAYERS {
            return Err(Error::InvalidConfig {
                key: "num_hidden_layers".to_string(),
                problem: format!(
                    "`{layers}` layers is more than trainmem accepts; accepted: at most {MAX_LAYERS} layers"
                ),
            });
        }
        Ok(Tower {
            hidden,
            intermediate: config.size("intermediate_size", defaults.intermediate)?,
            layers,
        })
    }

    /// `CLIPEncoderLayer` / `SiglipEncoderLayer`, relative to the layer.
    pub fn layer(&self) -> Result<Params> {
        let (hidden, intermediate) = (self.hidden, self.intermediate);
        let mut layer = Params::new();
        for projection in ["k_proj", "v_proj", "q_proj", "out_proj"] {
            layer.linear(
                &format!("self_attn.{projection}"),
                hidden,
                hidden,
                true,
                Role::Attention,
            )?;
        }
        layer.norm("layer_norm1", vec![hidden], Norm::WeightAndBias)?;
        layer.linear("mlp.fc1", hidden, intermediate, true, Role::Mlp)?;
        layer.linear("mlp.fc2", intermediate, hidden, true, Role::Mlp)?;
        layer.norm("layer_norm2", vec![hidden], Norm::WeightAndBias)?;
        Ok(layer)
    }

    /// Appends `{prefix}.{i}.{name}` for every layer: the stack written out,
    /// for a model with two towers (the [`Decoder`](super::decoder::Decoder)
    /// holds one stack). [`Tower::read`] bounds the count.
    pub fn stack(&self, params: &mut Params, prefix: &str) -> Result<()> {
        let layer = self.layer()?;
        for index in 0..self.layers {
            params.mount(&format!("{prefix}.{index}"), layer.clone());
        }
        Ok(())
    }
}

/// A whole-model inventory with no numbered stack of its own: a model of
/// two towers writes both stacks out with [`Tower::stack`].
pub fn whole(params: Params) -> Decoder {
    Decoder {
        before_layers: params,
        layers: Layers::uniform("encoder.layers", 0, "num_hidden_layers", Params::new()),
        after_layers: Params::new(),
    }
}

/// The refusal of a task that `model_type` has no class for, naming what
/// it accepts.
pub fn refused(model_type: &str, task: Task, accepted: &str) -> Error {
    Error::InvalidValue {
        what: "--task",
        value: task.to_string(),
        reason: format!(
            "transformers has no {} class for `{model_type}`; accepted for `{model_type}`: {accepted}",
            task.auto_class()
        ),
    }
}

/// `key.`-prefixed: an error inside a sub-config names where it is.
pub fn within(section: &str, error: Error) -> Error {
    match error {
        Error::InvalidConfig { key, problem } => Error::InvalidConfig {
            key: format!("{section}.{key}"),
            problem,
        },
        other => other,
    }
}

/// Reads a sub-config with `read`, naming the section in its errors.
pub fn read_section<T>(
    config: &Config,
    section: &str,
    read: impl FnOnce(&Config) -> Result<T>,
) -> Result<T> {
    let empty = Value::Object(Default::default());
    let fallback = Config::new(&empty)?;
    let sub = config.object(section)?;
    read(sub.as_ref().unwrap_or(&fallback)).map_err(|error| within(section, error))
}

/// How many patches an `image`-pixel square image becomes with `patch`-pixel
/// patches: `(image // patch) ** 2`, as `CLIPVisionEmbeddings` and
/// `SiglipVisionEmbeddings` count them. A zero patch is refused by name.
pub fn patch_count(image: u64, patch: u64) -> Result<u64> {
    let per_side = image
        .checked_div(patch)
        .ok_or_else(|| Error::InvalidConfig {
            key: "patch_size".to_string(),
            problem: "`0` cannot cut an image into patches; accepted: a positive whole number"
                .to_string(),
        })?;
    per_side
        .checked_mul(per_side)
        .ok_or_else(|| Error::InvalidConfig {
            key: "image_size".to_string(),
            problem: format!("`{image}` makes too many patches; accepted: a real image size"),
        })
}

/// `nn.Conv2d(channels, hidden, kernel_size=patch, stride=patch, bias)`:
/// `weight` [hidden, channels, patch, patch] and `bias` [hidden].
pub fn patch_conv(
    params: &mut Params,
    module: &str,
    channels: u64,
    hidden: u64,
    patch: (u64, u64),
    bias: bool,
) -> Result<()> {
    params.tensor(
        format!("{module}.weight"),
        vec![hidden, channels, patch.0, patch.1],
        Role::Embedding,
    )?;
    if bias {
        params.tensor(format!("{module}.bias"), vec![hidden], Role::Embedding)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn patches_are_counted_and_a_zero_patch_is_refused() {
        assert_eq!(patch_count(224, 16).unwrap(), 196);
        assert_eq!(patch_count(224, 14).unwrap(), 256);
        assert_eq!(patch_count(30, 8).unwrap(), 9);
        assert!(matches!(
            patch_count(224, 0),
            Err(Error::InvalidConfig { key, .. }) if key == "patch_size"
        ));
    }

    #[test]
    fn an_error_inside_a_section_names_it() {
        let value = json!({"vision_config": {"hidden_size": "big"}});
        let config = Config::new(&value).unwrap();
        let defaults = TowerDefaults {
            hidden: 768,
            intermediate: 3072,
            layers: 12,
            heads: 12,
        };
        match read_section(&config, "vision_config", |sub| Tower::read(sub, defaults)) {
            Err(Error::InvalidConfig { key, .. }) => assert_eq!(key, "vision_config.hidden_size"),
            other => panic!("expected an error, got {other:?}"),
        }
        let absent = read_section(&config, "text_config", |sub| Tower::read(sub, defaults));
        assert_eq!(absent.unwrap().hidden, 768);
    }
}
