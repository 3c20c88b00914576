//! The resolved, validated choices a training run is estimated under.

use serde::Serialize;

use crate::activation::{LoraDropout, Workload};
use crate::optimizer::{Optimizer, Options};
use crate::parallel::Parallelism;
use crate::precision::Precision;
use crate::step_time::Speed;
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
    /// How the step runs around the model: accumulation, initialization,
    /// reduction buckets, the allocator.
    pub step: StepOptions,
    /// peft's `lora_dropout` of the model's adapters (`--lora-dropout`): the
    /// inventory holds the adapters, not what runs before them.
    pub lora_dropout: LoraDropout,
    /// What a step is timed at: the device's peaks, the assumed MFU and
    /// the links, or why the step is not timed.
    pub speed: Speed,
}

/// The choices of the training loop and the framework that shape the step's
/// timeline but not the pieces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StepOptions {
    /// Micro-batches whose gradients accumulate before each optimizer step
    /// (`--grad-accumulation`); 1 when none.
    pub grad_accumulation: u64,
    /// How the weights first reach each rank (`--init`); the framework's default when `None`.
    pub init: Option<crate::parallel::Init>,
    /// DeepSpeed's `reduce_bucket_size` in elements; DeepSpeed's default when `None`.
    pub reduce_bucket_size: Option<u64>,
    /// PyTorch's caching allocator settings, for `memory.reserved`.
    pub allocator: crate::timeline::AllocatorOptions,
    /// The step runs on the CPU (`--platform cpu`): torch's optimizers loop
    /// over tensors there instead of using `foreach` lists.
    pub cpu: bool,
    /// `--optimizer-in-backward`: each parameter is stepped, and its gradient
    /// freed, in a post-accumulate-grad hook as soon as backward produces it
    /// (torchtune's `optimizer_in_bwd`).
    pub optimizer_in_backward: bool,
    /// Virtual pipeline stages per rank (`--virtual-stages`, Megatron's
    /// interleaved schedule); 0 reads as 1. The layers must divide by
    /// pp x v (see `crate::parallel::check_virtual_stages`).
    pub virtual_stages: u64,
    /// Whose model code runs (`--implementation`): the FSDP1 init default.
    pub implementation: crate::architecture::Implementation,
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
            step: StepOptions {
                grad_accumulation: 1,
                virtual_stages: 1,
                ..StepOptions::default()
            },
            lora_dropout: LoraDropout::default(),
            speed: Speed::default(),
        }
    }

    /// Whether the update runs inside backward, one parameter at a time:
    /// `--optimizer-in-backward`, or an optimizer that only works that way
    /// (LOMO, AdaLomo).
    pub fn steps_in_backward(&self) -> bool {
        self.step.optimizer_in_backward || self.optimizer.fused_backward
    }

    /// Whether the forward runs under `torch.autocast` over weights kept
    /// in another dtype (`--precision amp-bf16`), rather than over weights
    /// FSDP's `MixedPrecisionPolicy` gathers in the compute dtype.
    pub fn runs_autocast(&self) -> bool {
        let policy = self.parallelism.framework.is_fsdp()
            && self.parallelism.fsdp_mixed_precision == crate::parallel::FsdpMixedPrecision::Policy;
        self.precision.weights != self.precision.activations && !policy
    }

    /// The same setup checked against `capacity`.
    pub fn with_capacity(mut self, capacity: Option<Capacity>) -> Setup {
        self.capacity = capacity;
        self
    }
}
