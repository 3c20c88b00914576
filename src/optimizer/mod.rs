//! Optimizers as rules: from one parameter tensor to the state tensors the
//! reference implementation allocates for it.
//!
//! The seed texts count "values per parameter" (V = 1 for SGD, 2 for
//! momentum, 3 for Adam, gradient included); here each optimizer instead
//! lists its state tensors, so shape-aware optimizers are only more rules.

mod catalogue;
mod state;

pub use catalogue::{OPTIMIZERS, TEXTBOOK};
pub use state::{Location, StateSpec, StateTensor};

use serde::Serialize;

use crate::catalogue::Named;
use crate::dtype::DType;
use crate::error::Result;
use crate::model::Tensor;

/// One optimizer of the catalogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Optimizer {
    /// The name used on the command line: `sgd-momentum`.
    pub name: &'static str,
    /// Other accepted names: `momentum`.
    pub aliases: &'static [&'static str],
    /// The name in prose: `SGD+momentum`.
    pub title: &'static str,
    /// What it keeps, in one line.
    pub summary: &'static str,
    /// The reference implementation this rule follows.
    pub source: &'static str,
    /// The rule from a parameter tensor to its states.
    #[serde(skip)]
    pub rule: Rule,
}

/// How an optimizer's states follow from a parameter tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Every state is either a copy shaped like the parameter or a scalar.
    PerTensor(&'static [StateSpec]),
}

impl Optimizer {
    /// The state tensors kept for `tensor` when the optimizer updates a copy
    /// of it in `dtype` (the master copy under mixed precision).
    pub fn states(&self, tensor: &Tensor, dtype: DType) -> Result<Vec<StateTensor>> {
        match self.rule {
            Rule::PerTensor(specs) => Ok(specs
                .iter()
                .map(|spec| spec.state_for(tensor, dtype))
                .collect()),
        }
    }

    /// Looks an optimizer up by name or alias.
    pub fn find(name: &str) -> Result<&'static Optimizer> {
        crate::catalogue::find("optimizer", name, OPTIMIZERS)
    }
}

impl Named for Optimizer {
    fn name(&self) -> &'static str {
        self.name
    }
    fn aliases(&self) -> &'static [&'static str] {
        self.aliases
    }
}
