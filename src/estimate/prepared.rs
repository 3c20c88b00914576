//! One model priced under many setups by `estimate` itself, with what
//! depends on the model alone read once.
//!
//! The advisor (`crate::advisor`) prices tens to hundreds of sets of
//! changes of one request, and most of them keep its model: only LoRA and
//! quantization change the inventory. A profile of one 70B estimate spent
//! about a third of its time reading the tensor names and the layout
//! ([`ModelIndex`]), a tenth walking the tensors for the work per token
//! ([`Work`]) and a fifth in the per-stage memory pass, which under a
//! parallel layout runs twice (the single-device method and the layout).
//! Here the names, the layout's sizes, the adapters and the work are read
//! once per model, and each per-stage pass is kept for the setups that
//! share it. The estimate is the same function of the same values:
//! [`PreparedModel::estimate`] equals [`super::estimate`] field for field
//! (`request::resolver`'s tests and `tests/advisor.rs` check it).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use super::device::{DeviceMemory, ModelIndex, per_stage_indexed};
use super::{AdapterFacts, Estimate, Setup};
use crate::error::Result;
use crate::model::Model;
use crate::optimizer::{Optimizer, Options};
use crate::parallel::{Parallelism, Splittable};
use crate::precision::Precision;
use crate::step_time::Work;

/// The most per-stage passes kept per model: a search over changes meets
/// a few dozen distinct layouts and recipes; past this the oldest go.
const MOST_STAGE_PASSES: usize = 256;

/// What `estimate` reads of a model alone.
#[derive(Debug)]
pub(super) struct ModelFacts {
    pub(super) index: ModelIndex,
    pub(super) sizes: Splittable,
    pub(super) adapters: AdapterFacts,
    work: OnceLock<Work>,
    /// The per-stage passes priced, by what of the setup decides them.
    stages: Mutex<Vec<(StageKey, Arc<Vec<DeviceMemory>>)>>,
    /// The per-stage passes run (not found kept).
    passes: AtomicU64,
}

impl ModelFacts {
    /// The facts of `model`, read now (the work per token when first asked).
    pub(super) fn of(model: &Model) -> ModelFacts {
        let index = ModelIndex::of(model);
        ModelFacts {
            sizes: index.splittable(model),
            index,
            adapters: AdapterFacts::of(model),
            work: OnceLock::new(),
            stages: Mutex::new(Vec::new()),
            passes: AtomicU64::new(0),
        }
    }

    /// The work per token of `model` (the model these facts were read of).
    pub(super) fn work(&self, model: &Model) -> &Work {
        self.work.get_or_init(|| Work::of(model))
    }

    /// `per_stage_indexed(model, &self.index, setup)`, priced once per
    /// [`StageKey`] of `setup`.
    pub(super) fn per_stage(&self, model: &Model, setup: &Setup) -> Result<Vec<DeviceMemory>> {
        let key = StageKey::of(setup);
        let found = self.stages.lock().ok().and_then(|kept| {
            kept.iter()
                .find(|(k, _)| *k == key)
                .map(|(_, stages)| Arc::clone(stages))
        });
        if let Some(stages) = found {
            return Ok(stages.as_ref().clone());
        }
        self.passes.fetch_add(1, Ordering::Relaxed);
        let stages = per_stage_indexed(model, &self.index, setup)?;
        if let Ok(mut kept) = self.stages.lock() {
            if kept.len() >= MOST_STAGE_PASSES {
                kept.remove(0);
            }
            kept.push((key, Arc::new(stages.clone())));
        }
        Ok(stages)
    }
}

/// What of a setup the per-stage pass reads (`per_stage_indexed`: the
/// layout, the precision, the optimizer and its options, the step's
/// platform and its update in backward); not the workload, the
/// accumulation, the capacity or the speed.
#[derive(Debug, PartialEq)]
struct StageKey {
    parallelism: Parallelism,
    precision: Precision,
    optimizer: &'static Optimizer,
    options: Options,
    cpu: bool,
    optimizer_in_backward: bool,
}

impl StageKey {
    fn of(setup: &Setup) -> StageKey {
        StageKey {
            parallelism: setup.parallelism,
            precision: setup.precision,
            optimizer: setup.optimizer,
            options: setup.options.clone(),
            cpu: setup.step.cpu,
            optimizer_in_backward: setup.step.optimizer_in_backward,
        }
    }
}

/// A model with what `estimate` reads of it alone, for pricing it under
/// many setups.
#[derive(Debug)]
pub struct PreparedModel {
    model: Model,
    facts: ModelFacts,
}

impl PreparedModel {
    /// `model`, its tensor names and layout read once.
    pub fn new(model: Model) -> PreparedModel {
        let facts = ModelFacts::of(&model);
        PreparedModel { model, facts }
    }

    /// The model.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The per-stage memory passes run so far: one per distinct layout,
    /// precision and optimizer priced, however many estimates share it.
    pub fn stage_passes(&self) -> u64 {
        self.facts.passes.load(Ordering::Relaxed)
    }

    /// `estimate(self.model(), setup)`, from the facts read once.
    pub fn estimate(&self, setup: &Setup) -> Result<Estimate> {
        Ok(super::estimate_with_facts(&self.model, &self.facts, setup, false)?.0)
    }

    /// Whether `self.estimate(setup)` may fit: `false` only when it
    /// certainly does not, found from the allocated peak replayed alone
    /// (about half the work of an estimate for a small model).
    ///
    /// The verdict is `reserved + RESERVED_MARGIN <= capacity`, and the
    /// reserved memory is never below the allocated peak: the overhead is
    /// in both, and the simulated caching allocator holds every other
    /// allocation in a block at least its size (rounded up to 512 bytes)
    /// inside a segment it reserved (`timeline/allocator.rs`). So a peak
    /// above the capacity less the margin cannot fit. A setup the peak
    /// pass refuses may fit for all it knows: `estimate` says.
    pub fn may_fit(&self, setup: &Setup) -> bool {
        let Some(capacity) = &setup.capacity else {
            // No capacity: `fits` is `None`, never `Some(true)`.
            return false;
        };
        match super::heaviest_peak(&self.model, &self.facts, setup) {
            Ok(peak) => peak.0.saturating_add(super::RESERVED_MARGIN.0) <= capacity.bytes.0,
            Err(_) => true,
        }
    }
}
