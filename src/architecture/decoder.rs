//! A causal LM as transformers lays it out: some modules before a stack of
//! numbered layers (embeddings), the layers, and some after (final norm,
//! output head). Turning it into tensors is where the work is bounded.

use super::params::{Param, Params};
use crate::error::{Error, Result};
use crate::model::Tensor;
pub use crate::model::dimensions::Placement;

/// The most tensors one config.json may describe. The largest real configs
/// describe about two thousand (StableLM 2 12B, with a norm module per
/// head; DeepSeek-V3 fuses its experts into about a thousand); 2^16 leaves
/// thirty times that. Every command walks the inventory at least once per
/// estimate, and `fit` a few hundred times, so this bound, with
/// [`MAX_LAYERS`], is what keeps a 150-byte config from costing gigabytes
/// and minutes.
pub const MAX_TENSORS: u64 = 1 << 16;

/// The most decoder layers a config.json may have. The deepest released
/// causal LMs have 126 (Llama 3.1 405B) and 118 (PaLM 540B); 1,024 leaves
/// eight times that, and keeps the layer walks here and in the estimate
/// (ZeRO-3 gathers and pipeline stages go layer by layer) small.
pub const MAX_LAYERS: u64 = 1024;

/// A whole model: full names before and after the layers, and the layers.
#[derive(Debug, Clone)]
pub struct Decoder {
    /// Modules registered before the layer stack, with full names.
    pub before_layers: Params,
    /// The numbered layers.
    pub layers: Layers,
    /// Modules registered after the layer stack, with full names.
    pub after_layers: Params,
}

/// `count` layers named `{prefix}.{index}.{parameter}`, each built from one
/// of at most two templates.
#[derive(Debug, Clone)]
pub struct Layers {
    /// The `nn.ModuleList`'s path: `model.layers`, `transformer.h`.
    pub prefix: &'static str,
    /// How many layers.
    pub count: u64,
    /// The config key the count came from, for error messages.
    pub count_key: &'static str,
    /// The parameters of a layer, relative to the layer.
    pub regular: Params,
    /// A second kind of layer (mixture of experts) and where it is used.
    pub alternative: Option<(Params, Placement)>,
}

impl Layers {
    /// `count` identical layers.
    pub fn uniform(
        prefix: &'static str,
        count: u64,
        count_key: &'static str,
        layer: Params,
    ) -> Layers {
        Layers {
            prefix,
            count,
            count_key,
            regular: layer,
            alternative: None,
        }
    }

    fn template(&self, index: u64) -> &Params {
        match &self.alternative {
            Some((alternative, placement)) if placement.claims(index) => alternative,
            _ => &self.regular,
        }
    }
}

impl Decoder {
    /// Every tensor, in registration order, after checking that there are
    /// at most [`MAX_TENSORS`] of them.
    pub fn into_tensors(self) -> Result<Vec<Tensor>> {
        let total = self.tensor_count()?;
        let mut tensors = Vec::with_capacity(total);
        let full = |param: &Param, name: String| Tensor::new(name, param.shape.clone(), param.role);
        tensors.extend(self.before_layers.iter().map(|p| full(p, p.name.clone())));
        let prefix = self.layers.prefix;
        for index in 0..self.layers.count {
            let layer = self.layers.template(index);
            tensors.extend(
                layer
                    .iter()
                    .map(|p| full(p, format!("{prefix}.{index}.{}", p.name))),
            );
        }
        tensors.extend(self.after_layers.iter().map(|p| full(p, p.name.clone())));
        Ok(tensors)
    }

    /// The number of tensors, counted without building them, or an error
    /// when it passes [`MAX_TENSORS`].
    fn tensor_count(&self) -> Result<usize> {
        let too_many = || Error::InvalidConfig {
            key: self.layers.count_key.to_string(),
            problem: format!(
                "`{}` layers would make more than {MAX_TENSORS} parameter tensors; accepted: a model of at most {MAX_TENSORS} tensors",
                self.layers.count
            ),
        };
        if self.layers.count > MAX_LAYERS {
            return Err(Error::InvalidConfig {
                key: self.layers.count_key.to_string(),
                problem: format!(
                    "`{}` layers is more than trainmem accepts; accepted: at most {MAX_LAYERS} layers (the deepest released models have about 126)",
                    self.layers.count
                ),
            });
        }
        let mut total = (self.before_layers.len() + self.after_layers.len()) as u64;
        for index in 0..self.layers.count {
            if total > MAX_TENSORS {
                return Err(too_many());
            }
            total += self.layers.template(index).len() as u64;
        }
        if total > MAX_TENSORS {
            return Err(too_many());
        }
        usize::try_from(total).map_err(|_| too_many())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::model::Role;

    fn one_tensor(name: &str) -> Params {
        let mut params = Params::new();
        params.tensor(name, vec![2], Role::Mlp).unwrap();
        params
    }

    fn names(decoder: Decoder) -> Vec<String> {
        decoder
            .into_tensors()
            .unwrap()
            .into_iter()
            .map(|t| t.name)
            .collect()
    }

    #[test]
    fn layers_are_numbered_between_before_and_after() {
        let decoder = Decoder {
            before_layers: one_tensor("embed.weight"),
            layers: Layers::uniform("model.layers", 2, "num_hidden_layers", one_tensor("w")),
            after_layers: one_tensor("norm.weight"),
        };
        assert_eq!(
            names(decoder),
            [
                "embed.weight",
                "model.layers.0.w",
                "model.layers.1.w",
                "norm.weight"
            ]
        );
    }

    #[test]
    fn placements_pick_the_alternative_layers() {
        let with = |placement| Decoder {
            before_layers: Params::new(),
            layers: Layers {
                alternative: Some((one_tensor("moe"), placement)),
                ..Layers::uniform("l", 4, "n", one_tensor("dense"))
            },
            after_layers: Params::new(),
        };
        assert_eq!(
            names(with(Placement::From(1))),
            ["l.0.dense", "l.1.moe", "l.2.moe", "l.3.moe"]
        );
        let every = Placement::Every {
            step: 2,
            except: BTreeSet::from([3]),
        };
        assert_eq!(
            names(with(every)),
            ["l.0.dense", "l.1.moe", "l.2.dense", "l.3.dense"]
        );
        let never = Placement::Every {
            step: 0,
            except: BTreeSet::new(),
        };
        assert_eq!(
            names(with(never)),
            ["l.0.dense", "l.1.dense", "l.2.dense", "l.3.dense"]
        );
    }

    #[test]
    fn placements_count_their_layers_in_closed_form() {
        let every = Placement::Every {
            step: 2,
            except: BTreeSet::from([3, 4, 99]),
        };
        for count in 0..12 {
            let walked = (0..count).filter(|&i| every.claims(i)).count() as u64;
            assert_eq!(every.count_below(count), walked, "{count}");
            let from = Placement::From(3);
            let walked = (0..count).filter(|&i| from.claims(i)).count() as u64;
            assert_eq!(from.count_below(count), walked, "{count}");
        }
        assert_eq!(Placement::From(0).count_below(u64::MAX), u64::MAX);
        let never = Placement::Every {
            step: 0,
            except: BTreeSet::new(),
        };
        assert_eq!(never.count_below(10), 0);
    }

    #[test]
    fn too_many_tensors_are_refused_before_allocating() {
        let huge = |count| Decoder {
            before_layers: Params::new(),
            layers: Layers::uniform("model.layers", count, "num_hidden_layers", one_tensor("w")),
            after_layers: Params::new(),
        };
        assert_eq!(huge(MAX_LAYERS).tensor_count().unwrap(), 1024);
        for count in [MAX_LAYERS + 1, MAX_TENSORS + 1, 4_000_000_000, u64::MAX] {
            match huge(count).into_tensors() {
                Err(Error::InvalidConfig { key, problem }) => {
                    assert_eq!(key, "num_hidden_layers");
                    assert!(problem.contains("at most 1024 layers"), "{problem}");
                }
                other => panic!("expected InvalidConfig, got {other:?}"),
            }
        }
    }

    #[test]
    fn too_many_tensors_within_the_layer_cap_are_refused() {
        let mut wide = Params::new();
        for index in 0..64 {
            wide.tensor(format!("w{index}"), vec![2], Role::Mlp)
                .unwrap();
        }
        let decoder = |count| Decoder {
            before_layers: Params::new(),
            layers: Layers::uniform("model.layers", count, "num_hidden_layers", wide.clone()),
            after_layers: Params::new(),
        };
        assert_eq!(decoder(1024).tensor_count().unwrap(), 65_536);
        match decoder(1024).into_tensors().map(|_| ()) {
            Ok(()) => {}
            other => panic!("expected the cap itself to be accepted, got {other:?}"),
        }
        let mut over = decoder(1024);
        over.after_layers
            .tensor("norm.weight", vec![2], Role::Norm)
            .unwrap();
        match over.into_tensors() {
            Err(Error::InvalidConfig { key, problem }) => {
                assert_eq!(key, "num_hidden_layers");
                assert!(problem.contains("more than 65536"), "{problem}");
            }
            other => panic!("expected InvalidConfig, got {other:?}"),
        }
    }
}
