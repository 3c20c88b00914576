//! The centre of trainmem: `estimate(&Model, &Setup) -> Estimate`.
//!
//! Pure arithmetic on the model's inventory: no I/O, no command line.

mod comparison;
mod fit;
mod memory;
mod setup;
mod slice;
mod textbook;

pub use comparison::{Check, Comparison, Swap};
pub use fit::{Fit, max_parameters};
pub use memory::Memory;
pub use setup::{Capacity, Setup};
pub use slice::{Slice, SliceTerm};
pub use textbook::{Textbook, TextbookRequest};

use std::collections::BTreeMap;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::model::Model;
use crate::optimizer::Location;
use crate::precision::Precision;
use crate::units::{Bytes, Count};

/// The training memory of one model under one setup, piece by piece.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Estimate {
    /// The model, as summarized for the report.
    pub model: ModelSummary,
    /// The optimizer's name.
    pub optimizer: &'static str,
    /// The precision recipe: the dtype of each piece.
    pub precision: Precision,
    /// Parameter counts.
    pub parameters: Parameters,
    /// Memory per accelerator.
    pub memory: Memory,
    /// Memory on the host (torch's `step` counters live there).
    pub host: Memory,
    /// Whether `memory.activations` was estimated (not yet: always false).
    pub activations_estimated: bool,
    /// The seed's M = P x V x B.
    pub gradient_optimizer_slice: Slice,
    /// How many parameter-sized values each piece holds per parameter.
    pub copies: Copies,
    /// The accelerator memory checked against, if any.
    pub capacity: Option<Capacity>,
    /// Whether `memory.total` fits the capacity; null without a capacity.
    pub fits: Option<bool>,
    /// Assumptions and approximations the figures rest on.
    pub notes: Vec<String>,
}

/// The model as the report names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelSummary {
    /// `7B parameters`, `llama-2-7b`.
    pub name: String,
    /// Where the inventory came from.
    pub source: String,
    /// Whether tensor shapes are known (false for a bare `--params`).
    pub shapes_known: bool,
    /// How many parameter tensors the inventory holds.
    pub tensors: usize,
}

/// Parameter counts of an estimate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Parameters {
    /// Every parameter.
    pub total: Count,
    /// Those that receive gradients.
    pub trainable: Count,
}

/// Per-parameter copies of the parameter vector held by each piece (the
/// counting of seed 001: Adam in fp32 holds 4, weights and gradient included).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Copies {
    /// Weights: 1.
    pub weights: f64,
    /// Master copy: 1 under mixed precision, else 0.
    pub master_weights: f64,
    /// Gradients: 1 for a fully trainable model.
    pub gradients: f64,
    /// Optimizer states kept on the accelerator: 0 (SGD) to 2 (Adam).
    pub optimizer_states: f64,
    /// The sum.
    pub total: f64,
}

/// Element counts of each piece, summed over tensors.
#[derive(Default)]
struct Elements {
    weights: u64,
    master_weights: u64,
    gradients: u64,
    optimizer_states: u64,
    slice_by_width: BTreeMap<u64, u64>,
}

/// Prices the memory of training `model` under `setup`.
///
/// Per tensor of n elements: weights n x |weight dtype|; if trainable, a master
/// copy n x |master dtype| (mixed precision only), a gradient n x |gradient
/// dtype|, and the states the optimizer's rule gives for the updated copy.
pub fn estimate(model: &Model, setup: &Setup) -> Result<Estimate> {
    let precision = &setup.precision;
    let overflow = || Error::overflow(format!("the training memory of {}", model.name));
    let add = |sum: &mut Bytes, more: Bytes| -> Result<()> {
        *sum = sum.add(more, "the training memory")?;
        Ok(())
    };
    let (mut weights, mut master, mut gradients, mut states, mut host_states) = (
        Bytes::ZERO,
        Bytes::ZERO,
        Bytes::ZERO,
        Bytes::ZERO,
        Bytes::ZERO,
    );
    let mut elements = Elements::default();

    for tensor in &model.tensors {
        let n = tensor.shape.elements();
        add(&mut weights, precision.weights.size_of(n)?)?;
        elements.weights = elements.weights.checked_add(n.0).ok_or_else(overflow)?;
        if !tensor.trainable {
            continue;
        }
        if let Some(master_dtype) = precision.master_weights {
            add(&mut master, master_dtype.size_of(n)?)?;
            elements.master_weights = elements
                .master_weights
                .checked_add(n.0)
                .ok_or_else(overflow)?;
        }
        add(&mut gradients, precision.gradients.size_of(n)?)?;
        elements.gradients = elements.gradients.checked_add(n.0).ok_or_else(overflow)?;
        let width = elements
            .slice_by_width
            .entry(precision.gradients.bytes())
            .or_default();
        *width = width.checked_add(n.0).ok_or_else(overflow)?;

        for state in setup
            .optimizer
            .states(tensor, precision.optimizer_dtype())?
        {
            let state_elements = state.shape.elements();
            let bytes = state.dtype.size_of(state_elements)?;
            match state.location {
                Location::Host => add(&mut host_states, bytes)?,
                Location::Device => {
                    add(&mut states, bytes)?;
                    elements.optimizer_states = elements
                        .optimizer_states
                        .checked_add(state_elements.0)
                        .ok_or_else(overflow)?;
                    let width = elements
                        .slice_by_width
                        .entry(state.dtype.bytes())
                        .or_default();
                    *width = width.checked_add(state_elements.0).ok_or_else(overflow)?;
                }
            }
        }
    }

    let memory = Memory::new(weights, master, gradients, states, Bytes::ZERO)?;
    let host = Memory::new(
        Bytes::ZERO,
        Bytes::ZERO,
        Bytes::ZERO,
        host_states,
        Bytes::ZERO,
    )?;
    let parameters = Parameters {
        total: model.total_parameters()?,
        trainable: model.trainable_parameters()?,
    };
    let slice_bytes = gradients.add(states, "the gradient-and-optimizer slice")?;
    let fits = setup.capacity.as_ref().map(|c| memory.total <= c.bytes);
    Ok(Estimate {
        model: ModelSummary {
            name: model.name.clone(),
            source: model.source.clone(),
            shapes_known: model.shapes_known,
            tensors: model.tensors.len(),
        },
        optimizer: setup.optimizer.name,
        precision: *precision,
        parameters,
        memory,
        host,
        activations_estimated: false,
        gradient_optimizer_slice: Slice::new(
            parameters.trainable,
            slice_bytes,
            &elements.slice_by_width,
        ),
        copies: copies(&elements, parameters.total),
        capacity: setup.capacity.clone(),
        fits,
        notes: notes(setup, host_states),
    })
}

fn copies(elements: &Elements, parameters: Count) -> Copies {
    let per_parameter = |n: u64| {
        if parameters.0 == 0 {
            0.0
        } else {
            n as f64 / parameters.0 as f64
        }
    };
    Copies {
        weights: per_parameter(elements.weights),
        master_weights: per_parameter(elements.master_weights),
        gradients: per_parameter(elements.gradients),
        optimizer_states: per_parameter(elements.optimizer_states),
        total: per_parameter(
            elements.weights
                + elements.master_weights
                + elements.gradients
                + elements.optimizer_states,
        ),
    }
}

fn notes(setup: &Setup, host_states: Bytes) -> Vec<String> {
    let mut notes = vec!["activations are not estimated yet: memory.activations is 0".to_string()];
    if host_states > Bytes::ZERO {
        notes.push(format!(
            "{}'s `step` counters ({}) are 0-d fp32 tensors that torch keeps on the host unless the optimizer is fused or capturable",
            setup.optimizer.name,
            host_states.display(crate::units::UnitSystem::Decimal)
        ));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimizer::Optimizer;

    fn run(params: &str, optimizer: &str, precision: &str) -> Estimate {
        let setup = Setup::new(
            Optimizer::find(optimizer).unwrap(),
            *Precision::find(precision).unwrap(),
        );
        estimate(&Model::flat(params.parse().unwrap()), &setup).unwrap()
    }

    /// Seed 000: 13B x 3 x 2 bytes = 78 GB; 1B gives 6 GB; the ratio is 13.
    #[test]
    fn seed_000_slice() {
        let big = run("13B", "adam", "bf16").gradient_optimizer_slice;
        let small = run("1B", "adam", "bf16").gradient_optimizer_slice;
        assert_eq!(big.bytes, Bytes(78_000_000_000));
        assert_eq!(small.bytes, Bytes(6_000_000_000));
        assert_eq!(big.bytes.0 / small.bytes.0, 13);
        assert_eq!(big.values_per_parameter, 3.0);
        assert_eq!(big.bytes_per_value, Some(2));
        assert_eq!(big.equation(), "13B × 3 × 2 B");
        for (optimizer, v) in [("sgd", 1.0), ("sgd-momentum", 2.0), ("adam", 3.0)] {
            assert_eq!(
                run("1B", optimizer, "bf16")
                    .gradient_optimizer_slice
                    .values_per_parameter,
                v
            );
        }
    }

    /// Seed 001, Step 2: totals in fp32 at 124M, 1.5B and 7B.
    #[test]
    fn seed_001_priced() {
        let table = [
            ("sgd", [992_000_000, 12_000_000_000, 56_000_000_000], 2.0),
            (
                "sgd-momentum",
                [1_488_000_000, 18_000_000_000, 84_000_000_000],
                3.0,
            ),
            (
                "rmsprop",
                [1_488_000_000, 18_000_000_000, 84_000_000_000],
                3.0,
            ),
            (
                "adam",
                [1_984_000_000, 24_000_000_000, 112_000_000_000],
                4.0,
            ),
        ];
        for (optimizer, totals, copies) in table {
            for (size, total) in ["124M", "1.5B", "7B"].iter().zip(totals) {
                let e = run(size, optimizer, "fp32");
                assert_eq!(e.memory.total, Bytes(total), "{optimizer} at {size}");
                assert_eq!(e.copies.total, copies);
            }
        }
    }

    /// Issue 2: mixed precision with Adam is 16 bytes per parameter (K = 12).
    #[test]
    fn mixed_precision_is_sixteen_bytes_per_parameter() {
        let e = run("1B", "adam", "mixed-fp16");
        assert_eq!(e.memory.total, Bytes(16_000_000_000));
        assert_eq!(e.memory.master_weights, Bytes(4_000_000_000));
        assert_eq!(e.copies.total, 5.0);
        assert_eq!(e.gradient_optimizer_slice.bytes_per_value, None);
        assert_eq!(
            e.gradient_optimizer_slice.equation(),
            "1B × (1 × 2 B + 2 × 4 B)"
        );
    }

    #[test]
    fn step_counters_live_on_the_host() {
        let e = run("7B", "adam", "fp32");
        assert_eq!(e.host.optimizer_states, Bytes(4));
        assert_eq!(e.memory.optimizer_states, Bytes(56_000_000_000));
    }

    #[test]
    fn overflow_is_an_error_not_a_wrap() {
        let setup = Setup::new(
            Optimizer::find("adam").unwrap(),
            *Precision::find("fp32").unwrap(),
        );
        let huge = Model::flat(Count(u64::MAX / 2));
        assert!(matches!(
            estimate(&huge, &setup),
            Err(Error::Overflow { .. })
        ));
    }
}
