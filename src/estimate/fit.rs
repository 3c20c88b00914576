//! The largest model whose training memory fits a capacity.

use super::{Setup, estimate};
use crate::error::Result;
use crate::model::Model;
use crate::units::{Bytes, Count};

/// The largest parameter count P whose flat model's `memory.total` under
/// `setup` is at most `capacity`, up to [`MAX_PARAMETERS`]. 0 when not even
/// one parameter fits.
///
/// The search is bracketed, then bisected over the integers. Without
/// sharding every parameter costs at least one byte on the device (its
/// weight), so capacity + 1 parameters do not fit and bracket the search
/// (the thresholds reported so far come from bisecting [0, capacity + 1]).
/// Sharding (ZeRO, FSDP) and offload put less than a byte per parameter on
/// the device, so capacity + 1 may fit: then the bracket doubles from there
/// until a count does not fit, or stops at [`MAX_PARAMETERS`]. Bisection
/// keeps `fitting` fitting and `failing` failing, so the answer fits and
/// one more does not, even for the shape-aware rules whose flat vectors are
/// not monotone in their length (torchao quantizes only lengths divisible
/// by its block); only an answer at [`MAX_PARAMETERS`] is a bound, not a
/// boundary.
pub fn max_parameters(setup: &Setup, capacity: Bytes) -> Result<Count> {
    let fits = |parameters: u64| -> Result<bool> {
        match estimate(&Model::flat(Count(parameters)), setup) {
            Ok(e) => Ok(e.memory.total <= capacity),
            Err(crate::Error::Overflow { .. }) => Ok(false),
            Err(other) => Err(other),
        }
    };
    let (mut fitting, mut failing) = (0u64, capacity.0.saturating_add(1).min(MAX_PARAMETERS));
    while fits(failing)? {
        if failing == MAX_PARAMETERS {
            return Ok(Count(MAX_PARAMETERS));
        }
        fitting = failing;
        failing = failing.saturating_mul(2).min(MAX_PARAMETERS);
    }
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

/// The largest parameter count [`max_parameters`] searches: 10^15, six
/// hundred times the largest model released (Switch-C, 1.6 trillion), and
/// far below where a flat model's bytes overflow 64 bits (16 bytes per
/// parameter reach 1.6 x 10^16). ZeRO-3 over 100,000 GPUs of 80 GB holds
/// 5 x 10^14 parameters of Adam in fp32; an answer of 10^15 is reported as
/// the search's limit.
pub const MAX_PARAMETERS: u64 = 1_000_000_000_000_000;

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
    fn largest_fitting_is_exact() {
        for limit in [1u64, 2, 3, 7, 8, 1000, 123_456] {
            let found = largest_fitting(1, 1 << 20, |x| Ok(x <= limit)).unwrap();
            assert_eq!(found, Some(limit));
        }
        assert_eq!(largest_fitting(1, 1 << 20, |_| Ok(false)).unwrap(), None);
        assert_eq!(largest_fitting(1, 10, |_| Ok(true)).unwrap(), Some(10));
    }

    #[test]
    fn tiny_capacity_fits_nothing_or_little() {
        assert_eq!(max("adam", "fp32", "15B"), 0);
        assert_eq!(max("adam", "fp32", "16B"), 1);
    }
}

/// The largest value in `low..=high` for which `fits` holds, when `fits` is
/// true up to some value and false after it (memory never decreases as the
/// micro-batch, the sequence or the model grows): doubling, then bisection
/// over the integers. `None` when even `low` does not fit.
pub fn largest_fitting(
    low: u64,
    high: u64,
    mut fits: impl FnMut(u64) -> Result<bool>,
) -> Result<Option<u64>> {
    if low > high || !fits(low)? {
        return Ok(None);
    }
    let (mut fitting, mut step) = (low, 1u64);
    let failing = loop {
        let next = fitting.saturating_add(step).min(high);
        if next == fitting {
            return Ok(Some(fitting));
        }
        if fits(next)? {
            fitting = next;
            step = step.saturating_mul(2);
        } else {
            break next;
        }
    };
    let mut failing = failing;
    while failing - fitting > 1 {
        let middle = fitting + (failing - fitting) / 2;
        if fits(middle)? {
            fitting = middle;
        } else {
            failing = middle;
        }
    }
    Ok(Some(fitting))
}

/// The most work fit's searches may do for one answer, in tensor
/// evaluations: each estimate walks the model's inventory, so an estimate
/// of a model of T tensors costs T + 1. A fit asks up to a few hundred
/// estimates (four recompute modes x doubling and bisection up to 2^20,
/// then two GPU searches). The presets spend at most about 140,000
/// (llama-3.1-405b's 1,137 tensors, `--micro-batch 1` against 10 TB);
/// 2^18 leaves 1.9 times that and keeps the worst case, a config.json at
/// the layer cap, to a few tenths of a second in a release build before it
/// is refused. A larger inventory (a checkpoint of unfused experts) is
/// refused past the budget rather than searched for seconds.
const FIT_BUDGET: u64 = 1 << 18;

/// What is left of [`FIT_BUDGET`] while one fit searches.
#[derive(Debug)]
struct Budget {
    left: std::cell::Cell<u64>,
}

impl Budget {
    /// A full budget.
    fn new() -> Budget {
        Budget {
            left: std::cell::Cell::new(FIT_BUDGET),
        }
    }

    /// Spends one estimate of `model`, or refuses once the budget is gone.
    fn spend(&self, model: &Model) -> Result<()> {
        let cost = (model.tensors.len() as u64).saturating_add(1);
        match self.left.get().checked_sub(cost) {
            Some(left) => {
                self.left.set(left);
                Ok(())
            }
            None => Err(crate::Error::InvalidValue {
                what: "model for fit",
                value: format!("{} tensors", model.tensors.len()),
                reason: format!(
                    "fit's searches would evaluate more than their budget of {FIT_BUDGET} tensors (estimates x tensors per estimate); accepted: a model whose searches fit it (every preset does; a config.json describes fused experts in a few tensors), or check one layout with `trainmem estimate`"
                ),
            }),
        }
    }
}

/// Whether `model` under `setup` peaks within `capacity`, spending one
/// estimate of `budget`; an overflow does not fit.
fn peak_fits_within(
    model: &Model,
    setup: &Setup,
    capacity: Bytes,
    budget: &Budget,
) -> Result<bool> {
    budget.spend(model)?;
    match estimate(model, setup) {
        // `estimate`'s verdict: the allocator's reserve, the overhead included.
        Ok(e) => Ok(e.memory.reserved.0.saturating_add(super::RESERVED_MARGIN.0) <= capacity.0),
        Err(crate::Error::Overflow { .. }) => Ok(false),
        Err(other) => Err(other),
    }
}

/// The most sequences per micro-batch whose step peaks within `capacity`,
/// at the workload's sequence length (up to 2^20).
pub fn max_micro_batch(model: &Model, setup: &Setup, capacity: Bytes) -> Result<Option<u64>> {
    max_micro_batch_within(model, setup, capacity, &Budget::new())
}

fn max_micro_batch_within(
    model: &Model,
    setup: &Setup,
    capacity: Bytes,
    budget: &Budget,
) -> Result<Option<u64>> {
    largest_fitting(1, MAX_SEARCH, |micro_batch| {
        let mut setup = setup.clone();
        if let Some(workload) = setup.workload.as_mut() {
            workload.micro_batch = micro_batch;
        }
        peak_fits_within(model, &setup, capacity, budget)
    })
}

/// The longest sequence whose step peaks within `capacity`, at the
/// workload's micro-batch (up to 2^20 tokens).
pub fn max_seq_len(model: &Model, setup: &Setup, capacity: Bytes) -> Result<Option<u64>> {
    max_seq_len_within(model, setup, capacity, &Budget::new())
}

fn max_seq_len_within(
    model: &Model,
    setup: &Setup,
    capacity: Bytes,
    budget: &Budget,
) -> Result<Option<u64>> {
    largest_fitting(1, MAX_SEARCH, |seq_len| {
        let mut setup = setup.clone();
        if let Some(workload) = setup.workload.as_mut() {
            workload.seq_len = seq_len;
        }
        peak_fits_within(model, &setup, capacity, budget)
    })
}

/// The fewest accelerators, keeping the layout's tensor, pipeline and context degrees
/// and varying data parallelism, whose most loaded one peaks within
/// `capacity`; `None` beyond 65,536 data-parallel ranks. The search is exact
/// when memory does not grow with more ranks (sharded pieces shrink, the rest stay).
pub fn min_gpus(model: &Model, setup: &Setup, capacity: Bytes) -> Result<Option<u64>> {
    min_gpus_within(model, setup, capacity, &Budget::new())
}

fn min_gpus_within(
    model: &Model,
    setup: &Setup,
    capacity: Bytes,
    budget: &Budget,
) -> Result<Option<u64>> {
    // Context-parallel ranks hold the same layers on other positions: they
    // stay with the layout like tp and pp.
    let model_parallel =
        setup.parallelism.tensor * setup.parallelism.pipeline * setup.parallelism.context;
    let expert = setup.parallelism.expert;
    let fits = |data: u64| -> Result<bool> {
        let mut layout = setup.parallelism;
        layout.gpus = data * model_parallel;
        layout.nodes = 1;
        let Ok(layout) = layout.validated() else {
            return Ok(false);
        };
        let setup = Setup {
            parallelism: layout,
            ..setup.clone()
        };
        peak_fits_within(model, &setup, capacity, budget)
    };
    if fits(expert)? {
        return Ok(Some(expert * model_parallel));
    }
    if setup.parallelism.zero == crate::parallel::ZeroStage::None {
        // Without sharding every data-parallel rank holds everything.
        return Ok(None);
    }
    // Data parallelism moves in multiples of ep. The fewest ranks that fit
    // are one step past the most that do not.
    let steps = MAX_DATA_PARALLEL / expert;
    match largest_fitting(1, steps, |k| Ok(!fits(k * expert)?))? {
        Some(failing) if failing < steps => Ok(Some((failing + 1) * expert * model_parallel)),
        _ => Ok(None),
    }
}

/// The largest micro-batch or sequence length searched.
const MAX_SEARCH: u64 = 1 << 20;
/// The most data-parallel ranks searched for `min_gpus`.
const MAX_DATA_PARALLEL: u64 = 1 << 16;

/// The answer of `trainmem fit`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Fit {
    /// What was searched: `parameters`, `micro_batch`, `seq_len` or `gpus`.
    pub searched: &'static str,
    /// The largest parameter count whose model states fit (the question
    /// without a model).
    pub max_parameters: Option<Count>,
    /// The largest micro-batch at `--seq-len` under the chosen recompute mode.
    pub max_micro_batch: Option<u64>,
    /// The longest sequence at `--micro-batch` under the chosen recompute mode.
    pub max_seq_len: Option<u64>,
    /// The same answer under every recompute mode.
    pub recompute_modes: Vec<RecomputeFit>,
    /// Whether the answer under the chosen mode is the search's upper bound
    /// (2^20, or [`MAX_PARAMETERS`] parameters): at least that much fits,
    /// and more may.
    pub at_search_limit: bool,
    /// The fewest accelerators for the layout's sharding strategy.
    pub min_gpus: Option<u64>,
    /// The fewest accelerators with ZeRO-3 when the layout does not shard.
    pub min_gpus_zero3: Option<u64>,
    /// The micro-batch and sequence length the GPU counts are for (none:
    /// model states only).
    pub min_gpus_workload: Option<[u64; 2]>,
    /// The optimizer.
    pub optimizer: &'static str,
    /// The precision recipe.
    pub precision: crate::precision::Precision,
    /// The capacity fitted into.
    pub capacity: super::Capacity,
    /// The estimate at the answer (its memory per piece): under the chosen
    /// recompute mode, or the first mode that fits when the chosen one
    /// fits nothing; at the fewest GPUs for `gpus`.
    pub estimate: super::Estimate,
    /// The recompute mode `estimate` is for, when it differs from the
    /// chosen one (which fits nothing).
    pub estimate_recompute: Option<crate::activation::Recompute>,
    /// Whether `estimate` fits: false when nothing searched fits (its
    /// figures are then the run as given, not an answer).
    pub found: bool,
    /// The advisor's best change when nothing searched fits (set by the
    /// front door, which holds the request).
    pub hint: Option<Hint>,
}

/// The advisor's best answer, as `fit` says it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Hint {
    /// The changes, in words, `+` between them.
    pub changes: String,
    /// The same changes as `estimate` flags.
    pub flags: Vec<String>,
    /// The peak with them.
    pub peak: Bytes,
    /// What the allocator reserves with them.
    pub reserved: Bytes,
}

/// The largest micro-batch or sequence under one recompute mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct RecomputeFit {
    /// The mode.
    pub recompute: crate::activation::Recompute,
    /// Its answer (none when nothing fits).
    pub largest: Option<u64>,
    /// Whether the answer is the search's upper bound (2^20): at least that
    /// much fits, and more may.
    pub at_search_limit: bool,
}

/// What `trainmem fit` searches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Question {
    /// The largest flat model whose model states fit.
    Parameters,
    /// The largest micro-batch at the workload's sequence length.
    MicroBatch,
    /// The longest sequence at the workload's micro-batch.
    SeqLen,
    /// Only the fewest accelerators (the workload, if any, fully given).
    Gpus,
}

impl Fit {
    /// Answers `question` for `model` under `setup`, whose capacity is `capacity`.
    pub fn new(
        model: &Model,
        setup: &Setup,
        capacity: super::Capacity,
        question: Question,
    ) -> Result<Fit> {
        use crate::activation::Recompute;
        let setup = setup.clone().with_capacity(Some(capacity.clone()));
        let bytes = capacity.bytes;
        // One budget for every search of this answer.
        let budget = Budget::new();
        let search = |setup: &Setup| -> Result<Option<u64>> {
            match question {
                Question::MicroBatch => max_micro_batch_within(model, setup, bytes, &budget),
                Question::SeqLen => max_seq_len_within(model, setup, bytes, &budget),
                Question::Parameters | Question::Gpus => Ok(None),
            }
        };
        let mut recompute_modes = Vec::new();
        if matches!(question, Question::MicroBatch | Question::SeqLen) {
            let chosen = setup.workload.as_ref().map(|w| w.recompute);
            for recompute in Recompute::ALL {
                let mut mode = setup.clone();
                if let Some(workload) = mode.workload.as_mut() {
                    workload.recompute = recompute;
                    // Every N-th layer and reentrant checkpointing are
                    // choices of full checkpointing.
                    if recompute != Recompute::Full {
                        workload.recompute_every = 1;
                        workload.recompute_reentrant = false;
                    }
                }
                let largest = match search(&mode) {
                    // A mode this model's layers cannot run (per-op
                    // recomputation outside Llama-style layers) is left out.
                    Err(crate::error::Error::InvalidValue {
                        what: "--recompute",
                        ..
                    }) if Some(recompute) != chosen => continue,
                    other => other?,
                };
                recompute_modes.push(RecomputeFit {
                    recompute,
                    largest,
                    at_search_limit: largest == Some(MAX_SEARCH),
                });
            }
        }
        let chosen = setup.workload.as_ref().map(|w| w.recompute);
        let answer = recompute_modes
            .iter()
            .find(|m| Some(m.recompute) == chosen)
            .and_then(|m| m.largest);
        // The chosen mode fits nothing: the estimate is of the first mode
        // (the cheapest) that fits, never of one that does not.
        let fallback = match answer {
            Some(_) => None,
            None => recompute_modes
                .iter()
                .find(|m| m.largest.is_some())
                .map(|m| (m.recompute, m.largest)),
        };
        let max_parameters = match question {
            Question::Parameters => Some(max_parameters(&setup, bytes)?),
            _ => None,
        };
        // The estimate at the answer (or as given when nothing fits).
        let mut at = setup.clone();
        let value = answer.or(fallback.and_then(|(_, largest)| largest));
        if let (Some(workload), Some(value)) = (at.workload.as_mut(), value) {
            match question {
                Question::MicroBatch => workload.micro_batch = value,
                Question::SeqLen => workload.seq_len = value,
                _ => {}
            }
            if let Some((recompute, _)) = fallback {
                workload.recompute = recompute;
                if recompute != Recompute::Full {
                    workload.recompute_every = 1;
                    workload.recompute_reentrant = false;
                }
            }
        }
        let fewest = match question {
            Question::Parameters => None,
            _ => min_gpus_within(model, &setup, bytes, &budget)?,
        };
        if question == Question::Gpus
            && let Some(gpus) = fewest
        {
            at.parallelism.gpus = gpus;
            at.parallelism.nodes = 1;
            if let Ok(layout) = at.parallelism.validated() {
                at.parallelism = layout;
            }
        }
        let estimate = match max_parameters {
            Some(max) => estimate(&Model::flat(Count(max.0.max(1))), &at)?,
            None => estimate(model, &at)?,
        };
        let found = match question {
            Question::Parameters => true,
            Question::Gpus => fewest.is_some(),
            Question::MicroBatch | Question::SeqLen => value.is_some(),
        };
        let min_gpus_zero3 = match (question, setup.parallelism.zero) {
            (Question::Parameters, _) | (_, crate::parallel::ZeroStage::Weights) => None,
            _ => {
                let mut sharded = setup.clone();
                sharded.parallelism.zero = crate::parallel::ZeroStage::Weights;
                if setup.step.optimizer_in_backward {
                    // Stepped in backward, full sharding is FSDP2's
                    // (torchtune's full_finetune_distributed); DeepSpeed has none.
                    sharded.parallelism.framework = crate::parallel::Framework::Fsdp2;
                }
                min_gpus_within(model, &sharded, bytes, &budget)?
            }
        };
        Ok(Fit {
            searched: match question {
                Question::Parameters => "parameters",
                Question::MicroBatch => "micro_batch",
                Question::SeqLen => "seq_len",
                Question::Gpus => "gpus",
            },
            max_parameters,
            max_micro_batch: if question == Question::MicroBatch {
                answer
            } else {
                None
            },
            max_seq_len: if question == Question::SeqLen {
                answer
            } else {
                None
            },
            at_search_limit: answer == Some(MAX_SEARCH)
                || max_parameters == Some(Count(MAX_PARAMETERS)),
            recompute_modes,
            min_gpus: fewest,
            min_gpus_zero3,
            min_gpus_workload: setup.workload.as_ref().map(|w| [w.micro_batch, w.seq_len]),
            optimizer: setup.optimizer.name,
            precision: setup.precision,
            capacity,
            estimate,
            estimate_recompute: fallback.map(|(recompute, _)| recompute),
            found,
            hint: None,
        })
    }
}
