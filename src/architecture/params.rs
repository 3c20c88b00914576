//! Named parameters as PyTorch modules register them: `nn.Linear`,
//! `nn.Embedding`, GPT-2's `Conv1D` and the norm layers.
//!
//! A [`Params`] list holds names relative to where it will be mounted (a
//! layer, the model root); [`Params::mount`] adds the prefix.

use crate::error::{Error, Result};
use crate::model::{Role, Shape};

/// One parameter, named relative to the module that holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    pub name: String,
    pub shape: Shape,
    pub role: Role,
}

/// The parameters a norm layer registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Norm {
    /// A scale only: RMSNorm, and LayerNorm built with `bias=False`.
    Weight,
    /// `nn.LayerNorm`'s default scale and shift.
    WeightAndBias,
    /// No parameters: OLMo's LayerNorm, `elementwise_affine=False`.
    Parameterless,
}

/// An ordered list of parameters, in module registration order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params(Vec<Param>);

impl Params {
    /// An empty list.
    pub fn new() -> Params {
        Params(Vec::new())
    }

    /// One tensor with the given dimensions.
    pub fn tensor(&mut self, name: impl Into<String>, dims: Vec<u64>, role: Role) -> Result<()> {
        self.0.push(Param {
            name: name.into(),
            shape: Shape::new(dims)?,
            role,
        });
        Ok(())
    }

    /// `nn.Linear(input, output, bias)`: `weight` [output, input] and
    /// `bias` [output].
    pub fn linear(
        &mut self,
        module: &str,
        input: u64,
        output: u64,
        bias: bool,
        role: Role,
    ) -> Result<()> {
        self.tensor(format!("{module}.weight"), vec![output, input], role)?;
        if bias {
            self.tensor(format!("{module}.bias"), vec![output], role)?;
        }
        Ok(())
    }

    /// GPT-2's `Conv1D(nf=output, nx=input)`, a linear layer stored
    /// transposed: `weight` [input, output] and `bias` [output].
    pub fn conv1d(&mut self, module: &str, input: u64, output: u64, role: Role) -> Result<()> {
        self.tensor(format!("{module}.weight"), vec![input, output], role)?;
        self.tensor(format!("{module}.bias"), vec![output], role)
    }

    /// `nn.Embedding(count, dim)`: `weight` [count, dim].
    pub fn embedding(&mut self, module: &str, count: u64, dim: u64) -> Result<()> {
        self.tensor(
            format!("{module}.weight"),
            vec![count, dim],
            Role::Embedding,
        )
    }

    /// A norm layer over `dims` (usually one dimension, the hidden size).
    pub fn norm(&mut self, module: &str, dims: Vec<u64>, norm: Norm) -> Result<()> {
        match norm {
            Norm::Parameterless => Ok(()),
            Norm::Weight => self.tensor(format!("{module}.weight"), dims, Role::Norm),
            Norm::WeightAndBias => {
                self.tensor(format!("{module}.weight"), dims.clone(), Role::Norm)?;
                self.tensor(format!("{module}.bias"), dims, Role::Norm)
            }
        }
    }

    /// The output projection `lm_head`: its weight [vocab, input] unless it
    /// is tied to the token embedding (then `named_parameters()` lists the
    /// shared tensor once, under the embedding's name), and its bias, which
    /// is never tied.
    pub fn output_head(&mut self, vocab: u64, input: u64, tied: bool, bias: bool) -> Result<()> {
        if !tied {
            self.tensor("lm_head.weight", vec![vocab, input], Role::OutputHead)?;
        }
        if bias {
            self.tensor("lm_head.bias", vec![vocab], Role::OutputHead)?;
        }
        Ok(())
    }

    /// Appends `other` with `prefix.` before each of its names.
    pub fn mount(&mut self, prefix: &str, other: Params) {
        self.0.extend(other.0.into_iter().map(|param| Param {
            name: format!("{prefix}.{}", param.name),
            ..param
        }));
    }

    /// Appends `other`'s parameters under their own names (a model mounted
    /// at the root, as a vision-language model holds its language model).
    pub fn append(&mut self, other: Params) {
        self.0.extend(other.0);
    }

    /// How many parameters the list holds.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The parameters in registration order.
    pub fn iter(&self) -> impl Iterator<Item = &Param> {
        self.0.iter()
    }
}

/// The product of dimensions computed from config values; an overflow is an
/// error, not a wrap.
pub fn product(factors: &[u64]) -> Result<u64> {
    factors
        .iter()
        .try_fold(1u64, |product, factor| product.checked_mul(*factor))
        .ok_or_else(|| Error::overflow(format!("the dimension {}", factors_text(factors, " x "))))
}

/// The sum of dimensions computed from config values, checked.
pub fn sum(terms: &[u64]) -> Result<u64> {
    terms
        .iter()
        .try_fold(0u64, |sum, term| sum.checked_add(*term))
        .ok_or_else(|| Error::overflow(format!("the dimension {}", factors_text(terms, " + "))))
}

fn factors_text(numbers: &[u64], separator: &str) -> String {
    numbers
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(separator)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(params: &Params) -> Vec<(String, Vec<u64>, Role)> {
        params
            .iter()
            .map(|p| (p.name.clone(), p.shape.dims().to_vec(), p.role))
            .collect()
    }

    #[test]
    fn linear_and_conv1d_store_weights_the_way_pytorch_does() {
        let mut params = Params::new();
        params
            .linear("q_proj", 64, 128, true, Role::Attention)
            .unwrap();
        params.conv1d("c_attn", 64, 192, Role::Attention).unwrap();
        assert_eq!(
            listed(&params),
            vec![
                ("q_proj.weight".into(), vec![128, 64], Role::Attention),
                ("q_proj.bias".into(), vec![128], Role::Attention),
                ("c_attn.weight".into(), vec![64, 192], Role::Attention),
                ("c_attn.bias".into(), vec![192], Role::Attention),
            ]
        );
    }

    #[test]
    fn norms_register_what_their_kind_holds() {
        let mut params = Params::new();
        params.norm("rms", vec![8], Norm::Weight).unwrap();
        params.norm("ln", vec![8], Norm::WeightAndBias).unwrap();
        params.norm("olmo", vec![8], Norm::Parameterless).unwrap();
        let names: Vec<_> = params.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["rms.weight", "ln.weight", "ln.bias"]);
        assert!(params.iter().all(|p| p.role == Role::Norm));
    }

    #[test]
    fn a_tied_head_keeps_only_its_bias() {
        let mut tied = Params::new();
        tied.output_head(1000, 64, true, true).unwrap();
        assert_eq!(
            listed(&tied),
            vec![("lm_head.bias".into(), vec![1000], Role::OutputHead)]
        );
        let mut untied = Params::new();
        untied.output_head(1000, 64, false, false).unwrap();
        assert_eq!(
            listed(&untied),
            vec![("lm_head.weight".into(), vec![1000, 64], Role::OutputHead)]
        );
    }

    #[test]
    fn mounting_prefixes_names_and_arithmetic_is_checked() {
        let mut layer = Params::new();
        layer.embedding("wte", 10, 4).unwrap();
        let mut model = Params::new();
        model.mount("transformer", layer);
        assert_eq!(model.iter().next().unwrap().name, "transformer.wte.weight");
        assert_eq!(product(&[2, 3, 4]).unwrap(), 24);
        assert_eq!(sum(&[2, 3]).unwrap(), 5);
        assert!(product(&[u64::MAX, 2]).is_err());
        assert!(sum(&[u64::MAX, 1]).is_err());
        assert!(
            Params::new()
                .tensor("w", vec![u64::MAX, 2], Role::Other)
                .is_err()
        );
    }
}
