//! One model priced under many layouts: the peak `estimate` gives, with
//! what does not change between layouts read once.
//!
//! A layout search (`trainmem plan`) asks for the peak of tens of thousands
//! of setups that differ only in their parallel layout, micro-batch,
//! recomputation and accumulation. `estimate` reads every tensor's name and
//! walks every tensor for each (about 2 ms for a 70B model); here the names
//! are read once ([`ModelIndex`]), each layout's per-stage states are priced
//! once and shared by every workload on it, and the timeline is replayed for
//! its peak only (no allocator simulation, no events). The peak is the same
//! replay of the same step plan, so it equals `estimate`'s to the byte (a
//! property test checks every row `plan` prints).

use std::collections::HashMap;
use std::rc::Rc;

use super::device::{DeviceMemory, ModelIndex, per_stage_indexed};
use super::{
    AdapterFacts, Setup, activation_dimensions, activation_workload, check_setup, step_plan,
};
use crate::activation::{Schedule, Workload};
use crate::error::{Error, Result};
use crate::model::Model;
use crate::parallel::{Parallelism, Splittable};
use crate::timeline;
use crate::units::Bytes;

/// Prices `model` under setups that differ in their layout and workload.
pub struct Pricer<'m> {
    model: &'m Model,
    index: ModelIndex,
    sizes: Splittable,
    adapters: AdapterFacts,
    /// The setup the cached stages were priced under, its layout and
    /// workload aside: another one empties the cache.
    base: Option<Setup>,
    stages: HashMap<Parallelism, Rc<Vec<DeviceMemory>>>,
    /// The step schedules of the stages that can be the most loaded, per
    /// activation workload (the same on every sharding of one split).
    schedules: HashMap<Workload, Rc<Vec<Schedule>>>,
}

/// The most workloads whose schedules are kept: a search visits the
/// shardings of one tensor/pipeline/context split together.
const MOST_SCHEDULES: usize = 1024;

/// What one setup costs on its most loaded rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Priced {
    /// The step's peak: `estimate(model, setup).memory.peak`.
    pub peak: Bytes,
}

const WHAT: &str = "the layout's floor";

impl<'m> Pricer<'m> {
    /// A pricer of `model`, its names read once.
    pub fn new(model: &'m Model) -> Pricer<'m> {
        let index = ModelIndex::of(model);
        Pricer {
            model,
            sizes: index.splittable(model),
            index,
            adapters: AdapterFacts::of(model),
            base: None,
            stages: HashMap::new(),
            schedules: HashMap::new(),
        }
    }

    /// What `model` reveals of its heads, layers and experts.
    pub fn sizes(&self) -> &Splittable {
        &self.sizes
    }

    /// Refuses `setup` as `estimate` would.
    pub fn check(&self, setup: &Setup) -> Result<()> {
        check_setup(self.model, &self.sizes, setup)
    }

    /// Refuses `setup` as `estimate` would, its activations included (an
    /// architecture that refuses a parallel degree or a kernel does so
    /// there); what passes is kept for pricing.
    pub fn accepts(&mut self, setup: &Setup) -> Result<()> {
        self.check(setup)?;
        self.stages(setup)?;
        self.schedules(setup)?;
        Ok(())
    }

    /// The per-stage states of `setup`'s layout, priced once per layout.
    fn stages(&mut self, setup: &Setup) -> Result<Rc<Vec<DeviceMemory>>> {
        if !self
            .base
            .as_ref()
            .is_some_and(|base| same_base(base, setup))
        {
            self.stages.clear();
            self.schedules.clear();
            self.base = Some(Setup {
                parallelism: Parallelism::SINGLE,
                workload: None,
                step: super::StepOptions {
                    grad_accumulation: 1,
                    ..setup.step
                },
                ..setup.clone()
            });
        }
        if let Some(stages) = self.stages.get(&setup.parallelism) {
            return Ok(Rc::clone(stages));
        }
        // One accelerator without sharding is priced as `estimate` prices
        // it: the single-device layout, whatever the framework.
        let parallelism = setup.parallelism;
        let single =
            parallelism.is_single() && parallelism.tensor == 1 && parallelism.pipeline == 1;
        let stages = Rc::new(if single {
            per_stage_indexed(
                self.model,
                &self.index,
                &Setup {
                    parallelism: Parallelism::SINGLE,
                    ..setup.clone()
                },
            )?
        } else {
            per_stage_indexed(self.model, &self.index, setup)?
        });
        self.stages.insert(setup.parallelism, Rc::clone(&stages));
        Ok(stages)
    }

    /// A floor under the peak of every workload on `setup`'s layout: the
    /// overhead and what the first stage holds from loading to the end of
    /// the step (weights, master weights, optimizer states, and gradient
    /// buffers that exist from the start). Every micro-batch and
    /// recomputation on the layout peaks at least this high.
    pub fn floor(&mut self, setup: &Setup) -> Result<Bytes> {
        self.check(setup)?;
        let stages = self.stages(setup)?;
        let Some(first) = stages.first() else {
            return Err(Error::overflow("the pipeline stages"));
        };
        let plan = step_plan::plan(self.model, setup, first, None)?;
        let residents = plan.residents;
        let mut floor = plan
            .overhead
            .add(residents.weights, WHAT)?
            .add(residents.master_weights, WHAT)?
            .add(residents.optimizer_states, WHAT)?
            .add(residents.kept_gradients, WHAT)?;
        if plan.gradients.resident_from_start {
            floor = floor.add(residents.gradients, WHAT)?;
        }
        Ok(floor)
    }

    /// The schedules of `setup`'s activations, computed once per workload.
    fn schedules(&mut self, setup: &Setup) -> Result<Option<Rc<Vec<Schedule>>>> {
        let Some(workload) = activation_workload(self.model, &self.adapters, setup)? else {
            return Ok(None);
        };
        if let Some(found) = self.schedules.get(&workload) {
            return Ok(Some(Rc::clone(found)));
        }
        let schedules: Rc<Vec<Schedule>> = Rc::new(
            crate::activation::stages(&*activation_dimensions(self.model)?, &workload)?
                .into_iter()
                .map(|a| a.schedule)
                .collect(),
        );
        if self.schedules.len() >= MOST_SCHEDULES {
            self.schedules.clear();
        }
        self.schedules.insert(workload, Rc::clone(&schedules));
        Ok(Some(schedules))
    }

    /// The peak `estimate(model, setup)` gives, priced without its report:
    /// the same stages (`estimate`'s `heaviest_step`), each replayed for its
    /// peak alone. The step plan reads only the activations' schedule, so
    /// autocast's copies (in the stage's modules) need no second pass.
    pub fn price(&mut self, setup: &Setup) -> Result<Priced> {
        Ok(self.heaviest(setup, false)?.0)
    }

    /// The reserved memory `estimate(model, setup)` gives (`memory.reserved`:
    /// the caching allocator simulated over the heaviest stage's step, plus
    /// the overhead), with the peak. One allocator simulation: a search
    /// asks for it only for the layouts it shows.
    pub fn reserved(&mut self, setup: &Setup) -> Result<(Priced, Bytes)> {
        let (priced, reserved) = self.heaviest(setup, true)?;
        let reserved = reserved.ok_or_else(|| Error::overflow("the pipeline stages"))?;
        Ok((priced, reserved.add(setup.overhead, "the reserved memory")?))
    }

    /// The peak of the stage whose step peaks highest (the first of equals,
    /// as `estimate`'s `heaviest_step` picks it), and when `simulate`, the
    /// allocator's reserve over that stage's step (the overhead excluded).
    fn heaviest(&mut self, setup: &Setup, simulate: bool) -> Result<(Priced, Option<Bytes>)> {
        self.check(setup)?;
        let stages = self.stages(setup)?;
        // The base is settled by `stages`: the schedules cache follows it.
        let schedules = self.schedules(setup)?;
        let pairs: Vec<(&DeviceMemory, Option<&Schedule>)> = match &schedules {
            None => stages.iter().map(|device| (device, None)).collect(),
            Some(schedules) => schedules
                .iter()
                .filter_map(|schedule| {
                    let stage = usize::try_from(schedule.stage).unwrap_or(usize::MAX);
                    stages.get(stage).map(|device| (device, Some(schedule)))
                })
                .collect(),
        };
        let mut heaviest: Option<(Bytes, usize)> = None;
        for (index, (device, schedule)) in pairs.iter().enumerate() {
            let step =
                timeline::peak_only(&step_plan::plan(self.model, setup, device, *schedule)?)?;
            if heaviest.is_none_or(|(peak, _)| step > peak) {
                heaviest = Some((step, index));
            }
        }
        let (peak, index) = heaviest.ok_or_else(|| Error::overflow("the pipeline stages"))?;
        let reserved = match (simulate, pairs.get(index)) {
            (true, Some((device, schedule))) => Some(
                timeline::peak_of(&step_plan::plan(self.model, setup, device, *schedule)?)?
                    .reserved,
            ),
            _ => None,
        };
        Ok((Priced { peak }, reserved))
    }
}

/// Whether `setup` is `base` but for its layout and workload (and the
/// accumulation): compared field by field, without cloning a setup for
/// every layout priced.
fn same_base(base: &Setup, setup: &Setup) -> bool {
    let Setup {
        optimizer,
        options,
        precision,
        capacity,
        parallelism: _,
        workload: _,
        overhead,
        step,
        lora_dropout,
        speed,
    } = setup;
    (std::ptr::eq(base.optimizer, *optimizer) || base.optimizer == *optimizer)
        && base.options == *options
        && base.precision == *precision
        && base.capacity == *capacity
        && base.overhead == *overhead
        && base.step
            == super::StepOptions {
                grad_accumulation: 1,
                ..*step
            }
        && base.lora_dropout == *lora_dropout
        && base.speed == *speed
}
