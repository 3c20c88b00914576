//! Optimizers as rules: from one parameter tensor to the state tensors the
//! reference implementation allocates for it.
//!
//! The seed texts count "values per parameter" (V = 1 for SGD, 2 for
//! momentum, 3 for Adam, gradient included); here each optimizer instead
//! lists its state tensors, so shape-aware optimizers are only more rules.
//! `tests/optimizers.rs` checks every rule against one real `step()`
//! measured by `tools/measure_optimizers.py`.
//!
//! `catalogue.rs` lists every optimizer as data; the rules that are more than
//! copies of the parameter live by family: `factored.rs` (Adafactor, CAME,
//! AdaLomo), `quantized.rs` (bitsandbytes, torchao), `preconditioned.rs`
//! (Shampoo, SOAP), `lowrank.rs` (GaLore), `quasi_newton.rs` (L-BFGS),
//! `adam_mini.rs`, `muon.rs` and `layerwise.rs` (LAMB's norms).

mod adam_mini;
mod catalogue;
mod factored;
mod layerwise;
mod lowrank;
mod muon;
mod options;
mod preconditioned;
mod quantized;
mod quasi_newton;
mod state;

pub use catalogue::{OPTIMIZERS, PAGED, TEXTBOOK};
pub use options::{OptionKind, OptionSpec, Options};
pub use state::{Location, StateContext, StateSpec, StateTensor};

use serde::Serialize;

use crate::catalogue::Named;
use crate::dtype::DType;
use crate::error::Result;
use crate::model::Tensor;
use crate::units::{Bytes, Count};

/// One optimizer of the catalogue. Two optimizers are equal when their
/// names are: names are unique in the catalogue.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Optimizer {
    /// The name used on the command line: `sgd-momentum`.
    pub name: &'static str,
    /// Other accepted names: `momentum`.
    pub aliases: &'static [&'static str],
    /// The name in prose: `SGD+momentum`.
    pub title: &'static str,
    /// What it keeps, in one line.
    pub summary: &'static str,
    /// The reference implementation this rule follows (package and file).
    pub source: &'static str,
    /// Options that change the state, with the reference defaults.
    pub options: &'static [OptionSpec],
    /// For a shape-aware optimizer, what a bare `--params N` (one flat
    /// vector, no shapes) assumes; `None` when shapes do not matter.
    pub flat_assumption: Option<&'static str>,
    /// The rule from a parameter tensor to its states.
    #[serde(skip)]
    pub rule: Rule,
    /// State kept once for the whole optimizer, not per tensor.
    #[serde(skip)]
    pub global: Option<GlobalRule>,
    /// Whether the update runs inside backward, one tensor at a time (LOMO,
    /// AdaLomo): gradients are then never all stored, only the largest one
    /// at a time.
    pub fused_backward: bool,
    /// Temporary memory of one `step()`, freed when it returns.
    pub step_temporaries: Temporaries,
}

/// How an optimizer's states follow from a parameter tensor.
#[derive(Debug, Clone, Copy)]
pub enum Rule {
    /// Every state is a copy shaped like the parameter or a scalar counter.
    PerTensor(&'static [StateSpec]),
    /// Anything else: factored statistics, quantized blocks, preconditioners.
    Custom(fn(&StateContext) -> Result<Vec<StateTensor>>),
}

/// State of the whole optimizer, from what all trainable tensors add up to.
pub type GlobalRule = fn(&GlobalContext) -> Result<Vec<StateTensor>>;

/// What a [`GlobalRule`] or [`Temporaries`] sees: the trainable tensors as a whole.
#[derive(Debug, Clone, Copy)]
pub struct GlobalContext<'a> {
    /// Elements of all trainable tensors.
    pub elements: Count,
    /// Elements of the largest trainable tensor.
    pub largest: Count,
    /// How many trainable tensors there are.
    pub tensors: usize,
    /// The dtype states are kept in (the updated copy's, unless overridden).
    pub dtype: DType,
    /// The resolved options.
    pub options: &'a Options,
}

/// The temporary memory one `step()` allocates and frees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Temporaries {
    /// No temporaries beyond a few scalars.
    None,
    /// This many parameter-sized buffers of all trainable tensors at once, in
    /// the state dtype (torch's `foreach` implementations work on whole lists).
    GroupCopies(u64),
    /// This many buffers the size of the largest tensor, in the state dtype
    /// (per-tensor loops free each temporary before the next tensor).
    LargestTensorCopies(u64),
    /// fp32 buffers the size of the largest tensor, for per-tensor loops that
    /// compute in fp32 whatever the parameter dtype (transformers' Adafactor,
    /// CAME, LOMO): `working` buffers always, plus `upcast` copies (the
    /// gradient's or the parameter's `.float()`) when the state dtype is
    /// narrower than fp32, where `.float()` allocates.
    LargestTensorFp32 {
        /// fp32 intermediates of the update.
        working: u64,
        /// `.float()` copies made only for 16-bit and 8-bit states.
        upcast: u64,
    },
    /// Different kernels on the two platforms: bitsandbytes updates its
    /// 8-bit states in place in one CUDA kernel, while its CPU backend
    /// (`bitsandbytes/backends/cpu/ops.py`) dequantizes them to fp32 first.
    ByPlatform {
        /// On CUDA.
        cuda: &'static Temporaries,
        /// On the CPU (`--platform cpu`).
        cpu: &'static Temporaries,
    },
}

impl Temporaries {
    /// The temporaries of the same update run by torch's per-tensor loop
    /// instead of its `foreach` lists: each list temporary becomes one per
    /// tensor, plus the one intermediate the loop's expressions make on the
    /// way (measured: single-tensor AdamW holds `exp_avg_sq.sqrt()` and its
    /// quotient, 2 x the largest tensor, where foreach holds one list).
    pub fn per_tensor(self) -> Temporaries {
        match self {
            Temporaries::GroupCopies(copies) => Temporaries::LargestTensorCopies(copies + 1),
            other => other,
        }
    }

    /// The temporaries on CUDA, or on the CPU when `cpu`.
    pub fn on(self, cpu: bool) -> Temporaries {
        match self {
            Temporaries::ByPlatform { cpu: on_cpu, .. } if cpu => *on_cpu,
            Temporaries::ByPlatform { cuda, .. } => *cuda,
            other => other,
        }
    }

    /// The bytes of these temporaries (CUDA's, for a rule by platform).
    pub fn bytes(self, context: &GlobalContext) -> Result<Bytes> {
        let (copies, elements, dtype) = match self {
            Temporaries::None => return Ok(Bytes::ZERO),
            Temporaries::ByPlatform { cuda, .. } => return cuda.bytes(context),
            Temporaries::GroupCopies(copies) => (copies, context.elements, context.dtype),
            Temporaries::LargestTensorCopies(copies) => (copies, context.largest, context.dtype),
            Temporaries::LargestTensorFp32 { working, upcast } => {
                let narrow = context.dtype.bits() < DType::Fp32.bits();
                let copies = if narrow {
                    working.saturating_add(upcast)
                } else {
                    working
                };
                (copies, context.largest, DType::Fp32)
            }
        };
        dtype
            .size_of(elements)?
            .times(copies, "the optimizer step's temporaries")
    }
}

/// The fewest values a parameter has for bitsandbytes to page its states
/// (`get_state_buffer`: `A.numel() < 1e5` gets an ordinary tensor).
const PAGED_FROM_VALUES: u64 = 100_000;

impl Optimizer {
    /// The temporaries of one `step()` as it runs: none for a fused kernel
    /// (`fused=true`, measured at a few bytes), the catalogued foreach
    /// temporaries, or the per-tensor loop's when `foreach=false` or, unset,
    /// on the CPU, where torch defaults to the loop.
    pub fn step_temporaries_on(&self, options: &Options, cpu: bool) -> Temporaries {
        if options.flag("fused") {
            return Temporaries::None;
        }
        let temporaries = self.step_temporaries.on(cpu);
        match options.choice("foreach") {
            Some(true) => temporaries,
            Some(false) => temporaries.per_tensor(),
            None if cpu => temporaries.per_tensor(),
            None => temporaries,
        }
    }

    /// The state tensors kept for `tensor` when its states are kept in `dtype`
    /// (the dtype of the copy the optimizer updates, unless overridden).
    pub fn states(
        &self,
        tensor: &Tensor,
        dtype: DType,
        options: &Options,
    ) -> Result<Vec<StateTensor>> {
        let context = StateContext {
            tensor,
            dtype,
            options,
        };
        match self.rule {
            Rule::PerTensor(specs) => specs
                .iter()
                .filter_map(|spec| spec.state_for(&context).transpose())
                .collect(),
            Rule::Custom(rule) => rule(&context),
        }
    }

    /// [`Optimizer::states`] on CUDA or on the CPU: bitsandbytes' paged
    /// optimizers allocate the states of the parameter's shape through
    /// `get_state_buffer`, in unified memory (`F.get_paged`) on CUDA when the
    /// parameter has at least 1e5 values, an ordinary tensor otherwise
    /// (bitsandbytes 0.50 `bitsandbytes/optim/optimizer.py`).
    pub fn states_on(
        &self,
        tensor: &Tensor,
        dtype: DType,
        options: &Options,
        cuda: bool,
    ) -> Result<Vec<StateTensor>> {
        let mut states = self.states(tensor, dtype, options)?;
        if cuda
            && catalogue::PAGED.contains(&self.name)
            && tensor.shape.elements().0 >= PAGED_FROM_VALUES
        {
            for state in &mut states {
                if state.location == Location::Device && state.shape == tensor.shape {
                    state.location = Location::Paged;
                }
            }
        }
        Ok(states)
    }

    /// The state kept once for the whole optimizer.
    pub fn global_states(&self, context: &GlobalContext) -> Result<Vec<StateTensor>> {
        self.global.map_or(Ok(Vec::new()), |rule| rule(context))
    }

    /// All the state (per tensor and global, wherever it lives) kept when
    /// `tensor` is the only trainable tensor, in `dtype`, with default options.
    pub fn state_bytes(&self, tensor: &Tensor, dtype: DType) -> Result<Bytes> {
        let options = self.default_options();
        let elements = tensor.shape.elements();
        let context = GlobalContext {
            elements,
            largest: elements,
            tensors: 1,
            dtype,
            options: &options,
        };
        let states = self.states(tensor, dtype, &options)?;
        let global = self.global_states(&context)?;
        Bytes::sum(
            states
                .iter()
                .chain(&global)
                .map(|s| s.dtype.size_of(s.shape.elements()))
                .collect::<Result<Vec<_>>>()?,
            "the optimizer's state",
        )
    }

    /// The options at their reference defaults.
    pub fn default_options(&self) -> Options {
        // Defaults are the catalogue's own text and always resolve.
        Options::resolve(self, &[]).unwrap_or_default()
    }

    /// Looks an optimizer up by name or alias.
    pub fn find(name: &str) -> Result<&'static Optimizer> {
        crate::catalogue::find("optimizer", name, OPTIMIZERS)
    }
}

impl PartialEq for Optimizer {
    fn eq(&self, other: &Optimizer) -> bool {
        self.name == other.name
    }
}

impl Eq for Optimizer {}

impl Named for Optimizer {
    fn name(&self) -> &'static str {
        self.name
    }
    fn aliases(&self) -> &'static [&'static str] {
        self.aliases
    }
}
