//! The resolved, validated choices a training run is estimated under.

use serde::Serialize;

use crate::activation::Workload;
use crate::optimizer::{Optimizer, Options};
use crate::parallel::Parallelism;
use crate::precision::Precision;
use crate::units::Bytes;

/// Everything besides the model that decides its training memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setup {
    /// The optimizer and its state rule.
    pub optimizer: &'static Optimizer,
    /// The optimizer's resolved options (`--optimizer-option`).
    pub options: Options,
    /// The dtypes of weights, gradients, master copy and states.
    pub precision: Precision,
    /// The memory of one accelerator, if the question is "does it fit".
    pub capacity: Option<Capacity>,
    /// How training is spread over accelerators.
    pub parallelism: Parallelism,
    /// The micro-batch and sequence, when activations are asked for.
    pub workload: Option<Workload>,
    /// Memory the accelerator loses beyond the tensors (CUDA context,
    /// allocator fragmentation), added to the peak.
    pub overhead: Bytes,
}

/// The memory of one accelerator, and what the user called it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Capacity {
    /// Bytes available.
    pub bytes: Bytes,
    /// `80 GB` (from `--capacity`) or `h100-80gb` (from `--device`).
    pub label: String,
}

impl Setup {
    /// A setup with the optimizer's default options and no capacity to check against.
    pub fn new(optimizer: &'static Optimizer, precision: Precision) -> Setup {
        Setup {
            optimizer,
            options: optimizer.default_options(),
            precision,
            capacity: None,
            parallelism: Parallelism::SINGLE,
            workload: None,
            overhead: Bytes::ZERO,
        }
    }

    /// The same setup checked against `capacity`.
    pub fn with_capacity(mut self, capacity: Option<Capacity>) -> Setup {
        self.capacity = capacity;
        self
    }
}
