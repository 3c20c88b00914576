//! The largest model whose training memory fits a capacity.

use super::{Setup, estimate};
use crate::error::Result;
use crate::model::Model;
use crate::units::{Bytes, Count};

/// The largest parameter count P whose flat model's `memory.total` under
/// `setup` is at most `capacity`, found by bisection over the integers (exact:
/// memory never decreases as P grows). 0 when not even one parameter fits.
pub fn max_parameters(setup: &Setup, capacity: Bytes) -> Result<Count> {
    let fits = |parameters: u64| -> Result<bool> {
        match estimate(&Model::flat(Count(parameters)), setup) {
            Ok(e) => Ok(e.memory.total <= capacity),
            Err(crate::Error::Overflow { .. }) => Ok(false),
            Err(other) => Err(other),
        }
    };
    // Every trainable parameter costs at least one byte (its weight), so
    // capacity + 1 parameters never fit.
    let (mut fitting, mut failing) = (0u64, capacity.0.saturating_add(1));
    while failing - fitting > 1 {
        let middle = fitting + (failing - fitting) / 2;
        if fits(middle)? {
            fitting = middle;
        } else {
            failing = middle;
        }
    }
    Ok(Count(fitting))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimizer::Optimizer;
    use crate::precision::Precision;

    fn max(optimizer: &str, precision: &str, capacity: &str) -> u64 {
        let setup = Setup::new(
            Optimizer::find(optimizer).unwrap(),
            *Precision::find(precision).unwrap(),
        );
        max_parameters(&setup, capacity.parse().unwrap()).unwrap().0
    }

    /// Seed 001, Step 3: thresholds at 80 GB in fp32.
    #[test]
    fn textbook_thresholds() {
        assert_eq!(max("adam", "fp32", "80GB"), 5_000_000_000);
        assert_eq!(max("sgd-momentum", "fp32", "80GB"), 6_666_666_666);
        assert_eq!(max("rmsprop", "fp32", "80GB"), 6_666_666_666);
        assert_eq!(max("sgd", "fp32", "80GB"), 10_000_000_000);
    }

    #[test]
    fn tiny_capacity_fits_nothing_or_little() {
        assert_eq!(max("adam", "fp32", "15B"), 0);
        assert_eq!(max("adam", "fp32", "16B"), 1);
    }
}

/// The answer of `trainmem fit`: the largest model whose state fits.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Fit {
    /// The largest parameter count that fits.
    pub max_parameters: Count,
    /// The optimizer.
    pub optimizer: &'static str,
    /// The precision recipe.
    pub precision: crate::precision::Precision,
    /// The capacity fitted into.
    pub capacity: super::Capacity,
    /// The estimate of that largest model (its memory per piece).
    pub estimate: super::Estimate,
}

impl Fit {
    /// Searches the largest model under `setup`, which must have a capacity.
    pub fn new(setup: &Setup, capacity: super::Capacity) -> Result<Fit> {
        let max = max_parameters(setup, capacity.bytes)?;
        let setup = setup.clone().with_capacity(Some(capacity.clone()));
        let estimate = estimate(&Model::flat(Count(max.0.max(1))), &setup)?;
        Ok(Fit {
            max_parameters: max,
            optimizer: setup.optimizer.name,
            precision: setup.precision,
            capacity,
            estimate,
        })
    }
}
