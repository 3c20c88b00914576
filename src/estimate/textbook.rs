//! Everything the textbook report prints: the comparison of seed 001, the
//! M = P x V x B examples of seed 000, and Adam under mixed precision (the
//! seed's loose "pushes it to six" made exact).

use super::{Comparison, Estimate, Setup, estimate};
use crate::error::Result;
use crate::model::Model;
use crate::optimizer::Optimizer;
use crate::precision::Precision;
use crate::units::Count;

/// The figures of the textbook report.
#[derive(Debug, Clone, PartialEq)]
pub struct Textbook {
    /// Seed 001: the optimizers priced at the sizes.
    pub comparison: Comparison,
    /// Seed 000: the slice of the last optimizer at each slice size.
    pub slice_examples: Vec<Estimate>,
    /// Adam at 1B under mixed fp16: the exact tensors behind "six copies".
    pub mixed_adam: Estimate,
}

/// What the textbook report is asked for.
#[derive(Debug, Clone)]
pub struct TextbookRequest {
    /// The methods compared (seed 001: SGD, momentum, RMSProp, Adam).
    pub optimizers: Vec<&'static Optimizer>,
    /// The models priced (seed 001: flat models of 124M, 1.5B, 7B).
    pub models: Vec<Model>,
    /// Precision, capacity, layout and workload of every row (seed 001:
    /// fp32, 80 GB, one accelerator, model states only); its optimizer is
    /// replaced by each compared one.
    pub base: Setup,
    /// The swap priced (seed 001: Adam to SGD+momentum at 1.5B).
    pub swap: Option<(&'static Optimizer, &'static Optimizer, Model)>,
    /// Sizes of the M = P x V x B examples (seed 000: 13B and 1B).
    pub slice_sizes: Vec<Count>,
    /// Precision of those examples (seed 000: B = 2 bytes, pure bf16).
    pub slice_precision: Precision,
}

impl Textbook {
    /// Computes every figure of the report.
    pub fn new(request: &TextbookRequest) -> Result<Textbook> {
        let comparison = Comparison::new(
            &request.optimizers,
            &request.models,
            &request.base,
            request
                .swap
                .as_ref()
                .map(|(from, to, model)| (*from, *to, model)),
        )?;
        let adam = Optimizer::find("adam")?;
        let slice_optimizer = match request.optimizers.iter().find(|o| o.name == adam.name) {
            Some(found) => *found,
            None => request.optimizers.last().copied().unwrap_or(adam),
        };
        let slice_setup = Setup::new(slice_optimizer, request.slice_precision);
        let slice_examples = request
            .slice_sizes
            .iter()
            .map(|size| estimate(&Model::flat(*size), &slice_setup))
            .collect::<Result<Vec<_>>>()?;
        let mixed = Setup::new(Optimizer::find("adam")?, *Precision::find("mixed-fp16")?);
        let mixed_adam = estimate(&Model::flat(Count(1_000_000_000)), &mixed)?;
        Ok(Textbook {
            comparison,
            slice_examples,
            mixed_adam,
        })
    }
}
