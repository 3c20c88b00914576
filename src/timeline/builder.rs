//! Replaying a [`StepPlan`]: the running total, the phases and the peak.

use super::allocator::{Allocator, Stream};
use super::torchtune_setup::{SetupEvent, TorchtuneSetup};
use super::{ByKind, Event, Kind, Module, Peak, Phase, PhaseSummary, StepPlan, Timeline, UnitInit};
use crate::activation::{LayerActivations, Schedule};
use crate::error::{Error, Result};
use crate::units::Bytes;

const WHAT: &str = "the step timeline";

/// An allocation that can be freed later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Block(usize);

/// What an allocation was, to free it.
#[derive(Debug, Clone, Copy)]
struct Allocation {
    kind: Kind,
    tensor: &'static str,
    bytes: u64,
    live: bool,
}

thread_local! {
    /// The allocation records of this thread's last peak-only replay,
    /// emptied, for the next one to reuse.
    static RECORDS: std::cell::RefCell<Vec<Allocation>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The running state of a replay.
struct Builder {
    keep: bool,
    events: Vec<Event>,
    live: [u64; 7],
    total: u64,
    phase: Phase,
    layer: Option<u64>,
    peak: Peak,
    phases: Vec<PhaseSummary>,
    allocations: Vec<Allocation>,
    /// `None` when only the peak is asked for: the reserved estimate is skipped.
    allocator: Option<Allocator>,
    /// Only the peak's bytes are asked for (no events, no allocator, no
    /// breakdown by kind): runs of identical layers may be skipped.
    bytes_only: bool,
    /// The highest total since the last [`Builder::mark`] of each level
    /// ([`UNIT`] inside [`PASS`]).
    local_max: [u64; 2],
    /// The stream the next allocations are made on.
    stream: Stream,
    /// The next allocations are real tensors, each one block for the
    /// allocator (torchtune's setup), not the timeline's aggregates.
    whole: bool,
    /// FSDP1's rate limiter (`StepPlan::limit_all_gathers`) with the
    /// allocator simulated: a reshard queues its free event.
    limit_all_gathers: bool,
    /// The resharded units' gathered blocks, oldest first, each out of the
    /// allocator's cache until the CPU waits for its free event.
    free_events: std::collections::VecDeque<usize>,
}

impl Builder {
    fn new(keep: bool, allocator: Option<Allocator>) -> Builder {
        Builder {
            keep,
            events: Vec::new(),
            live: [0; 7],
            total: 0,
            phase: Phase::Load,
            layer: None,
            peak: Peak {
                bytes: Bytes::ZERO,
                phase: Phase::Load,
                layer: None,
                by_kind: ByKind::default(),
            },
            phases: vec![PhaseSummary {
                phase: Phase::Load,
                start: Bytes::ZERO,
                peak: Bytes::ZERO,
                end: Bytes::ZERO,
            }],
            bytes_only: !keep && allocator.is_none(),
            // A layout search replays tens of thousands of steps for their
            // peak: each thread reuses one vector of allocation records.
            allocations: if !keep && allocator.is_none() {
                RECORDS.with(|cell| std::mem::take(&mut *cell.borrow_mut()))
            } else {
                Vec::new()
            },
            allocator,
            local_max: [0; 2],
            stream: Stream::Compute,
            whole: false,
            limit_all_gathers: false,
            free_events: std::collections::VecDeque::new(),
        }
    }

    /// Starts measuring an iteration: the total now, from which
    /// [`Builder::repeat`] reads its change and its highest point.
    fn mark(&mut self, level: usize) -> u64 {
        if let Some(max) = self.local_max.get_mut(level) {
            *max = self.total;
        }
        self.total
    }

    /// Accounts for `times` more iterations identical to the one measured
    /// since `start` (the same allocations and frees, byte for byte, each
    /// starting where the one before ended), without replaying them: with
    /// each moving the total by d = end - start and rising e = max - start
    /// above its own start, iteration t (from 0) starts at end + t·d, so
    /// the total becomes end + times·d and their highest point is
    /// end + max(0, (times - 1)·d) + e. Only for the peak's bytes: no event,
    /// no allocator, no breakdown is kept for them.
    fn repeat(&mut self, level: usize, start: u64, times: u64) -> Result<()> {
        if times == 0 {
            return Ok(());
        }
        let overflow = || Error::overflow(WHAT);
        let end = i128::from(self.total);
        let delta = end - i128::from(start);
        let rise =
            i128::from(self.local_max.get(level).copied().unwrap_or(start)) - i128::from(start);
        let times = i128::from(times);
        let last_start = delta
            .checked_mul(times - 1)
            .and_then(|d| d.checked_add(end))
            .ok_or_else(overflow)?;
        let top = end.max(last_start) + rise;
        let top = u64::try_from(top).map_err(|_| overflow())?;
        if top > self.peak.bytes.0 {
            self.peak.bytes = Bytes(top);
        }
        for max in &mut self.local_max {
            *max = (*max).max(top);
        }
        self.total = delta
            .checked_mul(times)
            .and_then(|d| d.checked_add(end))
            .and_then(|t| u64::try_from(t).ok())
            .ok_or_else(overflow)?;
        Ok(())
    }

    /// What skipped iterations leave allocated (their gradients, or the
    /// weight casts autocast's cache holds to the end of the forward): already
    /// in the total ([`Builder::repeat`] put it there), recorded so that a
    /// later free removes it.
    fn skipped(&mut self, kind: Kind, tensor: &'static str, bytes: u64) -> Option<Block> {
        if bytes == 0 {
            return None;
        }
        let block = self.allocations.len();
        self.allocations.push(Allocation {
            kind,
            tensor,
            bytes,
            live: true,
        });
        Some(Block(block))
    }

    /// Starts `phase` at the current total.
    fn enter(&mut self, phase: Phase) {
        self.phase = phase;
        self.layer = None;
        let now = Bytes(self.total);
        self.phases.push(PhaseSummary {
            phase,
            start: now,
            peak: now,
            end: now,
        });
    }

    /// Moves to `layer` (or outside the layers).
    fn at(&mut self, layer: Option<u64>) {
        self.layer = layer;
    }

    fn record(&mut self, kind: Kind, tensor: &'static str, bytes: i64, block: usize) {
        // For the peak alone (no events, no allocator: a layout search) the
        // phase summaries are not read.
        if !self.keep && self.allocator.is_none() {
            return;
        }
        if let Some(summary) = self.phases.last_mut() {
            summary.end = Bytes(self.total);
            summary.peak = summary.peak.max(Bytes(self.total));
        }
        if self.keep {
            self.events.push(Event {
                phase: self.phase,
                layer: self.layer,
                kind,
                tensor,
                bytes,
                total: Bytes(self.total),
                block,
            });
        }
    }

    /// Allocates `bytes` of `kind`; nothing (and no event) for zero bytes.
    fn alloc(&mut self, kind: Kind, tensor: &'static str, bytes: Bytes) -> Result<Option<Block>> {
        if bytes == Bytes::ZERO {
            return Ok(None);
        }
        let signed = i64::try_from(bytes.0).map_err(|_| Error::overflow(WHAT))?;
        self.total = self
            .total
            .checked_add(bytes.0)
            .ok_or_else(|| Error::overflow(WHAT))?;
        if self.bytes_only {
            let block = self.allocations.len();
            self.allocations.push(Allocation {
                kind,
                tensor,
                bytes: bytes.0,
                live: true,
            });
            for max in &mut self.local_max {
                *max = (*max).max(self.total);
            }
            if self.total > self.peak.bytes.0 {
                self.peak.bytes = Bytes(self.total);
            }
            return Ok(Some(Block(block)));
        }
        let slot = &mut self.live[kind.index()];
        *slot = slot
            .checked_add(bytes.0)
            .ok_or_else(|| Error::overflow(WHAT))?;
        let block = self.allocations.len();
        self.allocations.push(Allocation {
            kind,
            tensor,
            bytes: bytes.0,
            live: true,
        });
        if kind != Kind::Overhead
            && let Some(allocator) = self.allocator.as_mut()
        {
            if self.whole {
                allocator.malloc_whole(block, bytes.0, self.stream)?;
            } else {
                allocator.malloc(block, bytes.0, self.stream)?;
            }
        }
        if self.total > self.peak.bytes.0 {
            self.peak = Peak {
                bytes: Bytes(self.total),
                phase: self.phase,
                layer: self.layer,
                by_kind: ByKind(self.live.map(Bytes)),
            };
        }
        self.record(kind, tensor, signed, block);
        Ok(Some(Block(block)))
    }

    /// Frees an allocation made before (nothing for `None` or one already freed).
    fn free(&mut self, block: Option<Block>) -> Result<()> {
        self.release(block, true).map(drop)
    }

    /// Frees a resharded unit's gathered parameters. Under FSDP1's rate
    /// limiter the bytes are freed now (the allocated total drops at once)
    /// but the block stays out of the allocator's cache, its free event
    /// queued until [`Builder::rate_limit`] waits for it.
    fn reshard(&mut self, block: Option<Block>) -> Result<()> {
        let queued = self.limit_all_gathers;
        if let Some(index) = self.release(block, !queued)?
            && queued
        {
            self.free_events.push_back(index);
        }
        Ok(())
    }

    /// FSDP1's rate limiter before an unshard: with two free events
    /// outstanding, the CPU waits for the older one, and the block it
    /// frees goes back to the allocator's cache for this unshard's
    /// `malloc` (nothing when no reshard queued one).
    fn rate_limit(&mut self) {
        if self.free_events.len() >= MOST_INFLIGHT_ALL_GATHERS {
            self.wait_for_oldest_free_event();
        }
    }

    /// Every queued free event waited for: the step has ended.
    fn drain_free_events(&mut self) {
        while self.wait_for_oldest_free_event() {}
    }

    /// The oldest queued free event waited for: its block goes back to the
    /// allocator's cache. False when none is queued.
    fn wait_for_oldest_free_event(&mut self) -> bool {
        let Some(index) = self.free_events.pop_front() else {
            return false;
        };
        if let Some(allocator) = self.allocator.as_mut() {
            allocator.free(index);
        }
        true
    }

    /// Frees an allocation and returns its index (`None` for `None` or one
    /// already freed); its block goes back to the allocator's cache when
    /// `cached`, else the caller queues it.
    fn release(&mut self, block: Option<Block>, cached: bool) -> Result<Option<usize>> {
        let Some(Block(index)) = block else {
            return Ok(None);
        };
        let Some(allocation) = self.allocations.get_mut(index) else {
            return Ok(None);
        };
        if !allocation.live {
            return Ok(None);
        }
        allocation.live = false;
        let Allocation {
            kind,
            tensor,
            bytes,
            ..
        } = *allocation;
        // Every free matches an allocation of the same kind, so neither
        // subtraction can go below zero.
        self.total = self.total.saturating_sub(bytes);
        if self.bytes_only {
            return Ok(Some(index));
        }
        let slot = &mut self.live[kind.index()];
        *slot = slot.saturating_sub(bytes);
        if kind != Kind::Overhead
            && cached
            && let Some(allocator) = self.allocator.as_mut()
        {
            allocator.free(index);
        }
        let signed = i64::try_from(bytes).map_err(|_| Error::overflow(WHAT))?;
        self.record(kind, tensor, -signed, index);
        Ok(Some(index))
    }

    /// Allocates and at once frees: a buffer alive for one operation.
    fn transient(&mut self, kind: Kind, tensor: &'static str, bytes: Bytes) -> Result<()> {
        let block = self.alloc(kind, tensor, bytes)?;
        self.free(block)
    }

    fn finish(mut self) -> Timeline {
        if self.bytes_only {
            // Hand the allocation records back for the next peak-only replay.
            let mut records = std::mem::take(&mut self.allocations);
            records.clear();
            RECORDS.with(|cell| *cell.borrow_mut() = records);
        }
        let load_peak = self
            .phases
            .iter()
            .filter(|p| p.phase == Phase::Load)
            .map(|p| p.peak)
            .max()
            .unwrap_or(Bytes::ZERO);
        Timeline {
            events: self.events,
            peak: self.peak,
            phases: self.phases,
            load_peak,
            reserved: Bytes(self.allocator.as_ref().map_or(0, Allocator::peak_reserved)),
        }
    }
}

/// One unit the step runs: a module, the activations of a layer, or both.
#[derive(Debug, Clone, Copy)]
struct Unit<'a> {
    layer: Option<u64>,
    module: Option<&'a Module>,
    activations: Option<&'a LayerActivations>,
    /// Its share of the gradients that stay when backward ends.
    gradient_share: Bytes,
}

/// The modules and layers in forward order: modules before the layers, each
/// layer with its module and activations, modules after the layers.
fn units<'a>(plan: &StepPlan<'a>) -> Result<Vec<Unit<'a>>> {
    let unit = |module: &'a Module| Unit {
        layer: module.layer,
        module: Some(module),
        activations: None,
        gradient_share: Bytes::ZERO,
    };
    let mut layer_modules: Vec<&Module> =
        plan.modules.iter().filter(|m| m.layer.is_some()).collect();
    if !layer_modules.is_sorted_by_key(|m| m.layer) {
        layer_modules.sort_by_key(|m| m.layer);
    }
    let mut units: Vec<Unit> = plan
        .modules
        .iter()
        .filter(|m| m.layer.is_none() && m.before_layers)
        .map(unit)
        .collect();
    let layer_activations: &[LayerActivations] = plan.activations.map_or(&[], |a| &a.layers);
    // Merge the two sorted lists by layer.
    let (mut modules, mut activations) = (
        layer_modules.iter().peekable(),
        layer_activations.iter().peekable(),
    );
    loop {
        let next_module = modules.peek().and_then(|m| m.layer);
        let next_activation = activations.peek().map(|a| a.layer);
        let layer = match (next_module, next_activation) {
            (None, None) => break,
            (Some(m), None) => m,
            (None, Some(a)) => a,
            (Some(m), Some(a)) => m.min(a),
        };
        let module = match next_module {
            Some(m) if m == layer => modules.next().copied(),
            _ => None,
        };
        let activations_of_layer = match next_activation {
            Some(a) if a == layer => activations.next(),
            _ => None,
        };
        units.push(Unit {
            layer: Some(layer),
            module,
            activations: activations_of_layer,
            gradient_share: Bytes::ZERO,
        });
    }
    units.extend(
        plan.modules
            .iter()
            .filter(|m| m.layer.is_none() && !m.before_layers)
            .map(unit),
    );
    share_gradients(&mut units, plan.residents.gradients)?;
    Ok(units)
}

/// Splits the gradients that stay after backward over the units in
/// proportion to the gradient each produces, so that they add up exactly
/// (the remainder goes to the largest).
fn share_gradients(units: &mut [Unit], resident: Bytes) -> Result<()> {
    let produced: u128 = units
        .iter()
        .map(|u| u128::from(u.module.map_or(0, optimized_gradient)))
        .sum();
    let largest = units
        .iter()
        .enumerate()
        .max_by_key(|(i, u)| {
            (
                u.module.map_or(0, optimized_gradient),
                std::cmp::Reverse(*i),
            )
        })
        .map(|(i, _)| i);
    let Some(largest) = largest else {
        return Ok(());
    };
    let mut given = 0u64;
    if produced > 0 {
        for unit in units.iter_mut() {
            let gradient = u128::from(unit.module.map_or(0, optimized_gradient));
            let share = (u128::from(resident.0) * gradient)
                .checked_div(produced)
                .unwrap_or(0);
            let share = u64::try_from(share).map_err(|_| Error::overflow(WHAT))?;
            unit.gradient_share = Bytes(share);
            given = given
                .checked_add(share)
                .ok_or_else(|| Error::overflow(WHAT))?;
        }
    }
    if let Some(unit) = units.get_mut(largest) {
        unit.gradient_share = Bytes(unit.gradient_share.0 + resident.0.saturating_sub(given));
    }
    Ok(())
}

/// The part of a module's gradient the optimizer holds: what stays after
/// backward and is zeroed after the step.
fn optimized_gradient(module: &Module) -> u64 {
    module.gradient.0.saturating_sub(module.kept_gradient.0)
}

/// Replays `plan`; keeps the events when `keep`, simulates the caching
/// allocator for the reserved estimate when `reserved`.
pub(super) fn replay(plan: &StepPlan, keep: bool, reserved: bool) -> Result<Timeline> {
    let allocator = reserved.then(|| Allocator::new(plan.allocator, plan.granularity.0));
    let mut b = Builder::new(keep, allocator);
    b.limit_all_gathers = plan.limit_all_gathers && b.allocator.is_some();
    let residents = plan.residents;
    let units = units(plan)?;
    let activations = plan.activations;
    let has_head = activations.is_some_and(|a| a.has_head);
    let in_flight = activations.map_or(1, |a| a.in_flight.max(1));
    // About a dozen allocations per unit and micro-batch: reserved once (a
    // peak-only replay replays at most four of the passes in flight).
    let (replayed_units, replayed_passes) = if b.bytes_only {
        (units.len(), 2 * SKIPPED_RUN)
    } else {
        (units.len(), 1 << 16)
    };
    b.allocations.reserve(
        replayed_units
            .saturating_add(4)
            .saturating_mul(usize::try_from(in_flight).unwrap_or(1).min(replayed_passes))
            .saturating_mul(12),
    );

    // Load: what exists before the step starts.
    b.alloc(
        Kind::Overhead,
        "CUDA context and allocator reserve (--overhead)",
        plan.overhead,
    )?;
    if let Some(mode) = plan.load.units {
        wrap_units(&mut b, plan, mode)?;
    } else if let Some(setup) = plan.load.torchtune {
        torchtune_setup(&mut b, &setup, residents.weights)?;
    } else if plan.load.whole_model > Bytes::ZERO {
        let whole = b.alloc(
            Kind::Weights,
            "the whole model, before sharding",
            plan.load.whole_model,
        )?;
        b.alloc(Kind::Weights, "weights", residents.weights)?;
        b.free(whole)?;
    } else {
        b.alloc(Kind::Weights, "weights", residents.weights)?;
        b.transient(
            Kind::Weights,
            "a module broadcast whole from rank 0",
            plan.load.broadcast_module,
        )?;
        b.transient(
            Kind::Weights,
            "a wrapped unit moved whole to the device and flattened (FSDP1 device_id)",
            plan.load.unit_flattened,
        )?;
    }
    b.alloc(
        Kind::MasterWeights,
        "master weights",
        residents.master_weights,
    )?;
    b.alloc(
        Kind::OptimizerStates,
        "optimizer states",
        residents.optimizer_states,
    )?;
    b.alloc(
        Kind::Weights,
        "fp8 weight caches and scaling state (Transformer Engine)",
        activations.map_or(Bytes::ZERO, |a| a.resident),
    )?;
    b.alloc(
        Kind::Gradients,
        "gradients no optimizer zeroes (kept across steps)",
        residents.kept_gradients,
    )?;
    // `--carry-outputs`: the step before's outputs and what its graph
    // holds, alive until this step's forward returns.
    let carried = match activations {
        Some(a) if a.outputs_carried > Bytes::ZERO || a.held_carried > Bytes::ZERO => [
            b.alloc(
                Kind::Activations,
                "the step before's outputs (the loop's variable, until this forward returns)",
                a.outputs_carried,
            )?,
            b.alloc(
                Kind::Activations,
                "the step before's 4-bit linears' inputs (its graph's ctx.tensors)",
                a.held_carried,
            )?,
        ],
        _ => [None, None],
    };
    let mut gradient_blocks = Vec::with_capacity(units.len() + 1);
    if plan.gradients.resident_from_start {
        gradient_blocks.push(b.alloc(
            Kind::Gradients,
            "gradient buffers (kept across micro-batches)",
            residents.gradients,
        )?);
    }

    // Runs of identical layers whose middle a peak-only replay skips.
    let skips = if b.bytes_only {
        skippable(&units)
    } else {
        Vec::new()
    };

    // Forward.
    b.enter(Phase::Forward);
    let count = units.len();
    // FSDP1's root unit: gathered by the root's pre-forward, whole until
    // backward ends (`StepPlan::root_kept`).
    let root = if plan.root_kept && plan.gathers {
        let bytes = units
            .iter()
            .filter(|u| u.layer.is_none())
            .filter_map(|u| u.module)
            .try_fold(Bytes::ZERO, |sum, m| {
                let kept_shard = if m.host_shard_kept {
                    m.host_shard
                } else {
                    Bytes::ZERO
                };
                sum.add(m.gathered, WHAT)?.add(kept_shard, WHAT)
            })?;
        b.at(None);
        b.stream = Stream::Gather;
        let root = b.alloc(
            Kind::Weights,
            "the root unit's parameters, gathered until backward ends (FSDP1)",
            bytes,
        )?;
        b.stream = Stream::Compute;
        root
    } else {
        None
    };
    let mut kept = vec![
        vec![(None, None); count];
        usize::try_from(in_flight).map_err(|_| Error::overflow(WHAT))?
    ];
    let mut outside = Vec::with_capacity(kept.len());
    // Per pass: the inputs bitsandbytes < 0.43.2 holds until the graph dies
    // (`LayerActivations::held`).
    let mut held: Vec<Vec<Option<Block>>> = vec![Vec::new(); kept.len()];
    let (mut head, mut logits, mut last_hidden) = (None, None, None);
    // Autocast's cache of fully checkpointed layers' weight casts, held
    // until the forward returns (`LayerActivations::recast`).
    let mut cached_casts: Vec<Option<Block>> = Vec::new();
    // Micro-batches in flight run the same pass: a peak-only replay skips
    // the middle ones as it skips identical units.
    let passes = kept.len();
    let graph_kept = activations.is_some_and(|a| a.logits_kept);
    let skipped_passes = (b.bytes_only && passes >= SKIPPED_RUN).then(|| 2..=passes - 3);
    let mut pass_start = b.mark(PASS);
    for (pass, saved) in kept.iter_mut().enumerate() {
        if let Some(skipped) = &skipped_passes
            && skipped.contains(&pass)
        {
            if pass == *skipped.start() {
                let times = (skipped.end() - skipped.start() + 1) as u64;
                b.repeat(PASS, pass_start, times)?;
                // Each skipped pass cached its checkpointed layers' casts.
                let recast = cached_casts_of(&units)?.times(times, WHAT)?;
                cached_casts.push(b.skipped(
                    Kind::Activations,
                    "autocast's cached weight casts of skipped identical passes",
                    recast.0,
                ));
            }
            outside.push(None);
            continue;
        }
        pass_start = b.mark(PASS);
        b.at(None);
        outside.push(match activations {
            Some(a) => b.alloc(
                Kind::Activations,
                if a.batch_inputs > Bytes::ZERO {
                    "embeddings (saved) and the batch's fp32 pixels"
                } else {
                    "embeddings and rotary tables (saved)"
                },
                a.embeddings
                    .add(a.shared, WHAT)?
                    .add(a.batch_inputs, WHAT)?,
            )?,
            None => None,
        });
        let mut gathered = vec![None; count];
        let mut skips_ahead = skips.iter().peekable();
        let mut index = 0;
        let mut start = b.mark(UNIT);
        while let Some(unit) = units.get(index) {
            if let Some(&&Skip {
                first,
                last,
                period,
            }) = skips_ahead.peek()
            {
                if index + period == first {
                    // The group replayed next is measured.
                    start = b.mark(UNIT);
                }
                if first == index {
                    // Units first..=last are the group just replayed again,
                    // between identical neighbours: the same events.
                    skips_ahead.next();
                    b.repeat(UNIT, start, ((last - first + 1) / period) as u64)?;
                    let skipped = units.get(first..=last).unwrap_or_default();
                    let recast = cached_casts_of(skipped)?;
                    cached_casts.push(b.skipped(
                        Kind::Activations,
                        "autocast's cached weight casts of skipped identical layers",
                        recast.0,
                    ));
                    if let Some(blocks) = held.get_mut(pass) {
                        blocks.push(b.skipped(
                            Kind::Activations,
                            "4-bit linears' inputs of skipped identical layers (ctx.tensors)",
                            held_of(skipped)?.0,
                        ));
                    }
                    // The prefetched parameters move along to the next unit.
                    let prefetched = gathered.get_mut(first).and_then(Option::take);
                    if let Some(slot) = gathered.get_mut(last + 1) {
                        *slot = prefetched;
                    }
                    index = last + 1;
                    continue;
                }
            }
            b.at(unit.layer);
            gather(
                &mut b,
                plan,
                &units,
                &mut gathered,
                index,
                index.checked_add(1),
            )?;
            if let Some(module) = unit.module {
                b.transient(Kind::Temporaries, "dequantized weight", module.dequantized)?;
            }
            if activations.is_some() {
                let layer = match unit.activations {
                    Some(layer) => {
                        let kept = b.alloc(
                            Kind::Activations,
                            "saved activations",
                            Bytes(layer.kept.0.saturating_sub(layer.held.0)),
                        )?;
                        let inputs = b.alloc(
                            Kind::Activations,
                            "4-bit linears' inputs (bitsandbytes < 0.43.2 ctx.tensors, until the graph dies)",
                            layer.held,
                        )?;
                        if let Some(blocks) = held.get_mut(pass) {
                            blocks.push(inputs);
                        }
                        // Context parallelism: the ring's key/value buffers,
                        // counted with the layer's saved tensors all present.
                        b.transient(
                            Kind::Temporaries,
                            "ring attention key/value buffers",
                            layer.ring,
                        )?;
                        b.transient(Kind::Temporaries, "fp8 casts of a linear", layer.fp8_casts)?;
                        kept
                    }
                    None => None,
                };
                let recast = unit.activations.is_some_and(|l| l.recast);
                let autocast = match unit.module {
                    Some(module) => b.alloc(
                        Kind::Activations,
                        if recast {
                            "autocast weight copies (its cache, until the forward returns)"
                        } else {
                            "autocast weight copies"
                        },
                        module.autocast,
                    )?,
                    None => None,
                };
                let autocast = if recast {
                    cached_casts.push(autocast);
                    None
                } else {
                    autocast
                };
                if let Some(slot) = saved.get_mut(index) {
                    *slot = (layer, autocast);
                }
            }
            if index + 1 == count
                && has_head
                && let Some(a) = activations
            {
                (head, logits, last_hidden) = output_head(&mut b, a)?;
                let input = b.alloc(Kind::Activations, HEAD_HELD, a.head_held)?;
                if let Some(blocks) = held.get_mut(pass) {
                    blocks.push(input);
                }
            }
            if let Some(slot) = gathered.get_mut(index) {
                b.reshard(slot.take())?;
            }
            index += 1;
        }
        // Offloading: every use of the rotary tables was copied to the host,
        // so the device's tables die with the forward.
        if activations.is_some_and(|a| a.outside_forward_only)
            && let Some(block) = outside.last_mut()
        {
            b.at(None);
            b.free(block.take())?;
        }
    }
    if count == 0
        && has_head
        && let Some(a) = activations
    {
        (head, logits, last_hidden) = output_head(&mut b, a)?;
        let input = b.alloc(Kind::Activations, HEAD_HELD, a.head_held)?;
        if let Some(blocks) = held.last_mut() {
            blocks.push(input);
        }
    }

    // The loss.
    b.enter(Phase::Loss);
    let mut loss = None;
    let mut kept_outputs = None;
    if let (true, Some(a)) = (has_head, activations) {
        // litgpt's Fabric casts the model's outputs as its forward returns:
        // the loss runs on the fp32 copy, and the model's logits die.
        let cast = b.alloc(
            Kind::Activations,
            "fp32 logits (Fabric's convert_output copy the loss runs on)",
            a.outputs_cast,
        )?;
        if cast.is_some() {
            b.free(logits.take())?;
        }
        // litgpt's forward returns before its loss: the loop's variable is
        // rebound, the step before's outputs and graph die.
        if a.loss_outside_model {
            for block in carried {
                b.free(block)?;
            }
        }
        let upcast = b.alloc(
            Kind::Temporaries,
            "fp32 upcast of the logits",
            a.logits_upcast,
        )?;
        loss = b.alloc(Kind::Activations, "log-softmax and targets (saved)", a.loss)?;
        b.free(upcast)?;
        // The model's forward returns: its last hidden state dies, and
        // autocast's cache is cleared as its context exits.
        b.free(last_hidden.take())?;
        for casts in cached_casts.drain(..) {
            b.free(casts)?;
        }
        if !a.loss_outside_model {
            for block in carried {
                b.free(block)?;
            }
        }
        // The Trainer's compute_loss returns the loss alone: the model's
        // outputs, the logits with them, are dropped before backward; a
        // loop that keeps them (`--keep-outputs`) holds them to the end.
        if cast.is_some() {
            if a.logits_kept {
                kept_outputs = cast;
            } else {
                b.free(cast)?;
            }
        } else if a.logits_kept && a.outputs_upcast > Bytes::ZERO {
            // The model's output is the fp32 upcast: it stays, the
            // half-precision logits go.
            kept_outputs = b.alloc(
                Kind::Activations,
                "fp32 logits (the model's output, kept by the loop)",
                a.outputs_upcast,
            )?;
            b.free(logits)?;
        } else if a.logits_kept {
            kept_outputs = logits.take();
        } else {
            b.free(logits)?;
        }
    }

    // Backward.
    b.enter(Phase::Backward);
    let bucket = b.alloc(
        Kind::Temporaries,
        "gradient reduction bucket",
        plan.gradients.reduce_bucket,
    )?;
    let mut first_backward = true;
    let mut pass_start = b.mark(PASS);
    let mut pass_gradients = 0..0;
    for (micro_batch, saved) in kept.iter().enumerate().rev() {
        if let Some(skipped) = &skipped_passes
            && skipped.contains(&micro_batch)
        {
            if micro_batch == *skipped.end() {
                let times = (skipped.end() - skipped.start() + 1) as u64;
                let kept_gradients = kept_bytes(&b, &gradient_blocks, pass_gradients.clone())?;
                b.repeat(PASS, pass_start, times)?;
                let kept_gradients = kept_gradients
                    .checked_mul(times)
                    .ok_or_else(|| Error::overflow(WHAT))?;
                gradient_blocks.push(b.skipped(
                    Kind::Gradients,
                    "gradients of skipped identical layers",
                    kept_gradients,
                ));
            }
            continue;
        }
        pass_start = b.mark(PASS);
        let pass_gradients_before = gradient_blocks.len();
        b.at(None);
        let mut gathered = vec![None; count];
        // FSDP1: the root's pre-backward hook, on the loss, prefetches the
        // last layer before the loss's gradients are computed.
        if root.is_some()
            && let Some(last) = units
                .iter()
                .rposition(|u| u.layer.is_some() && u.module.is_some())
        {
            gather(&mut b, plan, &units, &mut gathered, last, None)?;
        }
        let mut root_gradients: Vec<(Option<Block>, &Unit)> = Vec::new();
        let mut logits_gradient = None;
        if let (true, Some(a)) = (has_head, activations) {
            let loss_gradients =
                b.alloc(Kind::Temporaries, "loss gradients (fp32)", a.loss_backward)?;
            b.free(loss.take())?;
            b.free(loss_gradients)?;
            logits_gradient = b.alloc(
                Kind::Temporaries,
                "gradient of the logits",
                a.logits_gradient,
            )?;
            b.transient(
                Kind::Temporaries,
                "the output head's adapter in backward (the sum's, the term's and the scaled gradients)",
                a.head_backward,
            )?;
        }
        // The output head's backward is the first after the loss, while
        // the logits' gradient is alive: a quantized head (litgpt's QLoRA,
        // Lightning's `BitsandbytesPrecision` converts `lm_head` too)
        // dequantizes its weight then (`MatMul4BitBackward`), not after the
        // final norm's unit as the unit order would have it.
        let head_dequantized = units.iter().rposition(|u| {
            u.layer.is_none()
                && u.module
                    .is_some_and(|m| !m.before_layers && m.dequantized > Bytes::ZERO)
        });
        if logits_gradient.is_some()
            && let Some(module) = head_dequantized
                .and_then(|i| units.get(i))
                .and_then(|u| u.module)
        {
            b.transient(Kind::Temporaries, "dequantized weight", module.dequantized)?;
        }
        let head_dequantized = head_dequantized.filter(|_| logits_gradient.is_some());
        let mut skips_behind = skips.iter().rev().peekable();
        let mut next = count;
        let mut start = b.mark(UNIT);
        let mut gradients_before = gradient_blocks.len();
        let mut gradients_after = gradient_blocks.len();
        while let Some(index) = next.checked_sub(1) {
            let Some(unit) = units.get(index) else {
                break;
            };
            if let Some(&&Skip { last, period, .. }) = skips_behind.peek()
                && index == last + period
            {
                // The group replayed next is measured.
                start = b.mark(UNIT);
                gradients_before = gradient_blocks.len();
            }
            if let Some(&&Skip {
                first,
                last,
                period,
            }) = skips_behind.peek()
                && last == index
            {
                // Units last..=first (backward) are the group just replayed
                // again: its gradients kept, times their count.
                skips_behind.next();
                let times = ((last - first + 1) / period) as u64;
                let kept_gradients =
                    kept_bytes(&b, &gradient_blocks, gradients_before..gradients_after)?;
                b.repeat(UNIT, start, times)?;
                let kept_gradients = kept_gradients
                    .checked_mul(times)
                    .ok_or_else(|| Error::overflow(WHAT))?;
                gradient_blocks.push(b.skipped(
                    Kind::Gradients,
                    "gradients of skipped identical layers",
                    kept_gradients,
                ));
                let prefetched = gathered.get_mut(last).and_then(Option::take);
                if let Some(slot) = first.checked_sub(1).and_then(|i| gathered.get_mut(i)) {
                    *slot = prefetched;
                }
                next = first;
                continue;
            }
            next = index;
            b.at(unit.layer);
            let late_prefetch = plan.late_layer_prefetch && unit.layer.is_some();
            gather(
                &mut b,
                plan,
                &units,
                &mut gathered,
                index,
                index.checked_sub(1).filter(|_| !late_prefetch),
            )?;
            let (unpacked, recomputed, flow) = match unit.activations {
                Some(layer) if activations.is_some() => (
                    b.alloc(
                        Kind::Activations,
                        "activations brought back from the host",
                        layer.unpacked,
                    )?,
                    b.alloc(
                        Kind::Activations,
                        "recomputed activations",
                        layer.recomputed,
                    )?,
                    b.alloc(Kind::Temporaries, "activation gradients", layer.backward)?,
                ),
                _ => (None, None, None),
            };
            // Autocast in the recompute casts the layer's weights again.
            let recast = match (unit.activations, unit.module) {
                (Some(layer), Some(module)) if layer.recast && activations.is_some() => b.alloc(
                    Kind::Activations,
                    "autocast weight copies (recast by the recompute)",
                    module.autocast,
                )?,
                _ => None,
            };
            // Offloading without recomputation: the tensors brought back die
            // with their node, and the widest node (the MLP's product) runs
            // before the layer's other linears produce their weight gradients.
            // Under recomputation the input brought back stays in the rebuilt
            // layer until its backward ends.
            let mut unpacked = unpacked;
            if unit
                .activations
                .is_some_and(|layer| layer.recomputed == Bytes::ZERO)
            {
                b.free(unpacked.take())?;
            }
            if let Some(module) = unit.module {
                if head_dequantized != Some(index) {
                    b.transient(Kind::Temporaries, "dequantized weight", module.dequantized)?;
                }
                if root.is_some()
                    && unit.layer.is_none()
                    && first_backward
                    && plan.gradients.sharded
                    && !plan.gradients.fused_update
                    && !plan.gradients.resident_from_start
                {
                    root_gradients.push((
                        b.alloc(
                            Kind::Gradients,
                            "the root's gradient, held until its backward ends (FSDP1)",
                            module.gradient,
                        )?,
                        unit,
                    ));
                } else {
                    gradients(
                        &mut b,
                        plan,
                        unit,
                        module,
                        first_backward,
                        &mut gradient_blocks,
                    )?;
                }
            } else if !plan.gradients.sharded
                && !plan.gradients.resident_from_start
                && first_backward
            {
                gradient_blocks.push(b.alloc(Kind::Gradients, "gradients", unit.gradient_share)?);
            }
            b.free(recomputed)?;
            b.free(recast)?;
            b.free(unpacked)?;
            b.free(flow)?;
            if late_prefetch {
                gather(
                    &mut b,
                    plan,
                    &units,
                    &mut gathered,
                    index,
                    index.checked_sub(1),
                )?;
            }
            if let Some(layer) = unit.activations {
                b.transient(
                    Kind::Temporaries,
                    "the layer's first norm brought back and its gradients",
                    layer.closing,
                )?;
            }
            if let Some((layer, autocast)) = saved.get(index) {
                b.free(*layer)?;
                b.free(*autocast)?;
            }
            if index + 1 == count {
                b.free(head.take())?;
                b.free(logits_gradient.take())?;
            }
            if index == 0 {
                b.free(outside.get(micro_batch).copied().flatten())?;
            }
            if let Some(slot) = gathered.get_mut(index) {
                b.reshard(slot.take())?;
            }
            gradients_after = gradient_blocks.len();
        }
        b.at(None);
        // The root's post-backward: its flat gradient reduce-scattered to a shard.
        for (held, unit) in root_gradients {
            if let Some(module) = unit.module {
                gradient_blocks.push(b.alloc(
                    Kind::Gradients,
                    "gradient shard",
                    unit.gradient_share,
                )?);
                b.transient(
                    Kind::Temporaries,
                    "reduce-scatter buffer",
                    module.reduce_buffer,
                )?;
            }
            b.free(held)?;
        }
        b.free(head.take())?;
        b.free(logits_gradient)?;
        b.free(outside.get(micro_batch).copied().flatten())?;
        // The graph dies as the loss does, after backward, unless the loop
        // keeps the outputs (one pass: the loop's variable holds the last).
        if !(graph_kept && passes == 1)
            && let Some(blocks) = held.get_mut(micro_batch)
        {
            for block in blocks.drain(..) {
                b.free(block)?;
            }
        }
        first_backward = false;
        pass_gradients = pass_gradients_before..gradient_blocks.len();
    }
    b.reshard(root)?;
    b.drain_free_events();
    b.free(bucket)?;

    // The optimizer step, then zero_grad(set_to_none=True).
    b.enter(Phase::Optimizer);
    let partition = b.alloc(
        Kind::Temporaries,
        "fp32 gradient partition",
        plan.optimizer.gradient_partition,
    )?;
    b.transient(
        Kind::Temporaries,
        "optimizer step temporaries",
        plan.optimizer.temporaries,
    )?;
    b.free(partition)?;
    if plan.gradients.freed_after_step {
        for block in gradient_blocks {
            b.free(block)?;
        }
    }
    // `--keep-outputs`: the loop's `outputs` dies when its step returns.
    b.at(None);
    b.free(kept_outputs)?;
    for block in held.into_iter().flatten() {
        b.free(block)?;
    }
    Ok(b.finish())
}

/// The bytes still held by `blocks[range]`: the gradients an iteration kept.
fn kept_bytes(b: &Builder, blocks: &[Option<Block>], range: std::ops::Range<usize>) -> Result<u64> {
    let mut bytes = 0u64;
    for block in blocks.get(range).unwrap_or_default().iter().flatten() {
        if let Some(allocation) = b.allocations.get(block.0).filter(|a| a.live) {
            bytes = bytes
                .checked_add(allocation.bytes)
                .ok_or_else(|| Error::overflow(WHAT))?;
        }
    }
    Ok(bytes)
}

/// The measuring levels of [`Builder::mark`]: one unit's iteration, and
/// one micro-batch's pass over the units.
const UNIT: usize = 0;
const PASS: usize = 1;

/// The fewest identical groups in a row worth skipping: the first two and
/// the last two are replayed (the second measures one group between
/// identical neighbours), the rest skipped.
const SKIPPED_RUN: usize = 5;

/// `_FreeEventQueue._max_num_inflight_all_gathers` in
/// `torch/distributed/fsdp/_limiter_utils.py` ("empirically chosen").
const MOST_INFLIGHT_ALL_GATHERS: usize = 2;

/// The longest repeating group of units looked for: recomputation of
/// every 2nd or 4th layer only (`--recompute-every`) alternates layers.
const MOST_PERIOD: usize = 4;

/// Units a peak-only replay skips: `first..=last`, whole groups of `period`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Skip {
    first: usize,
    last: usize,
    period: usize,
}

/// The units a peak-only replay skips, ascending: the middle of each run
/// of at least [`SKIPPED_RUN`] identical groups of 1 to [`MOST_PERIOD`]
/// units (the same modules and activations byte for byte, the same shares
/// of the gradients), two groups in from each end. A unit's events depend
/// on it and on its neighbour (the parameters it prefetches), so each
/// skipped group's events in forward and in backward are those of the
/// group replayed just before it, shifted by the total; the first and last
/// units of a stage (the head, the embeddings) are never skipped.
///
/// Only decoder layers form runs: a module outside them, even one equal to
/// a layer byte for byte (several identical heads, a multi-token-prediction
/// layer), is not one of their iterations. Under FSDP1 it belongs to the
/// root unit, which is never gathered on its own and whose gradient is held
/// until the root's post-backward (`StepPlan::root_kept`), so a run through
/// it would repeat events it does not have. Within a run the other FSDP1
/// events stay in its first and last two groups, which are replayed: the
/// root's pre-backward prefetches the last decoder layer, and the root's
/// pre-forward is one allocation before the first.
fn skippable(units: &[Unit]) -> Vec<Skip> {
    let same = |a: Option<&Unit>, b: Option<&Unit>| match (a, b) {
        (Some(a), Some(b)) => {
            a.layer.is_some()
                && b.layer.is_some()
                && a.gradient_share == b.gradient_share
                && a.module.map(|m| Module { layer: None, ..*m })
                    == b.module.map(|m| Module { layer: None, ..*m })
                && a.activations.map(|l| LayerActivations { layer: 0, ..*l })
                    == b.activations.map(|l| LayerActivations { layer: 0, ..*l })
        }
        _ => false,
    };
    let mut out = Vec::new();
    let mut start = 0;
    while start < units.len() {
        // The period whose run from `start` skips the most units.
        let mut best: Option<(Skip, usize)> = None;
        for period in 1..=MOST_PERIOD {
            let mut end = start + period;
            while same(units.get(end - period), units.get(end)) {
                end += 1;
            }
            // units[start..end] repeat with `period`.
            let groups = (end - start) / period;
            if groups < SKIPPED_RUN {
                continue;
            }
            let first = start + 2 * period;
            let skipped = (groups - 4) * period;
            if best.is_none_or(|(b, _)| skipped > b.last + 1 - b.first) {
                best = Some((
                    Skip {
                        first,
                        last: first + skipped - 1,
                        period,
                    },
                    end,
                ));
            }
        }
        match best {
            Some((skip, end)) => {
                out.push(skip);
                start = end;
            }
            None => start += 1,
        }
    }
    out
}

/// How many units a peak-only replay of `plan` skips in each pass: what
/// the exactness tests check is not zero.
#[cfg(test)]
pub(super) fn skipped_units(plan: &StepPlan) -> Result<usize> {
    Ok(skippable(&units(plan)?)
        .iter()
        .map(|skip| skip.last + 1 - skip.first)
        .sum())
}

/// The 4-bit output head's input bitsandbytes < 0.43.2 holds.
const HEAD_HELD: &str =
    "the 4-bit output head's input (bitsandbytes < 0.43.2 ctx.tensors, until the graph dies)";

/// The inputs bitsandbytes < 0.43.2 holds for `units` until the graph dies
/// (`LayerActivations::held`).
fn held_of(units: &[Unit]) -> Result<Bytes> {
    units
        .iter()
        .filter_map(|u| u.activations)
        .try_fold(Bytes::ZERO, |sum, l| sum.add(l.held, WHAT))
}

/// The weight casts autocast's cache holds for `units` until the forward
/// returns: those of the fully checkpointed layers (`LayerActivations::recast`).
fn cached_casts_of(units: &[Unit]) -> Result<Bytes> {
    units
        .iter()
        .filter(|u| u.activations.is_some_and(|l| l.recast))
        .filter_map(|u| u.module)
        .try_fold(Bytes::ZERO, |sum, m| sum.add(m.autocast, WHAT))
}

/// The final norm's and output head's saved tensors, then the logits;
/// under autocast, also the final norm's output the head casts, alive
/// until the model's forward returns (`Schedule::last_hidden_state`).
fn output_head(
    b: &mut Builder,
    a: &Schedule,
) -> Result<(Option<Block>, Option<Block>, Option<Block>)> {
    let head = b.alloc(
        Kind::Activations,
        "final norm and output head (saved)",
        a.head,
    )?;
    let last_hidden = b.alloc(
        Kind::Activations,
        "the final norm's output (last_hidden_state, until the forward returns)",
        a.last_hidden_state,
    )?;
    let name = if a.logits_kept {
        "logits (kept by the loop through backward)"
    } else {
        "logits"
    };
    let logits = b.alloc(Kind::Activations, name, a.logits)?;
    b.transient(
        Kind::Temporaries,
        "the output head's adapter in forward (lora_B's output, its scaled copy, the sum)",
        a.head_forward,
    )?;
    Ok((head, logits, last_hidden))
}

/// FSDP1's wrap, unit by unit ([`UnitInit`]): the decoder layers in order,
/// then the root (every module outside the layers, one flat parameter).
/// Each unit's shard is its share of the resident weights, so that the
/// shards add up to them exactly.
fn wrap_units(b: &mut Builder, plan: &StepPlan, mode: UnitInit) -> Result<()> {
    let mut layers: Vec<&Module> = plan.modules.iter().filter(|m| m.layer.is_some()).collect();
    layers.sort_by_key(|m| m.layer);
    let root = plan
        .modules
        .iter()
        .filter(|m| m.layer.is_none())
        .try_fold(Bytes::ZERO, |sum, m| sum.add(m.weights, WHAT))?;
    let mut units: Vec<(Option<u64>, Bytes)> =
        layers.iter().map(|m| (m.layer, m.weights)).collect();
    units.push((None, root));
    let whole = units
        .iter()
        .try_fold(0u128, |sum, (_, w)| sum.checked_add(u128::from(w.0)))
        .ok_or_else(|| Error::overflow(WHAT))?;
    let resident = plan.residents.weights;
    let mut shares: Vec<Bytes> = Vec::with_capacity(units.len());
    let mut given = 0u64;
    for (_, weights) in &units {
        let share = (u128::from(resident.0) * u128::from(weights.0))
            .checked_div(whole)
            .unwrap_or(0);
        let share = u64::try_from(share).map_err(|_| Error::overflow(WHAT))?;
        given = given
            .checked_add(share)
            .ok_or_else(|| Error::overflow(WHAT))?;
        shares.push(Bytes(share));
    }
    // The rounding remainder (or everything, when no unit has weights) stays with the root.
    if let Some(last) = shares.last_mut() {
        *last = Bytes(last.0.saturating_add(resident.0.saturating_sub(given)));
    }
    let mut originals: Vec<Option<Block>> = Vec::with_capacity(units.len());
    if mode == UnitInit::Resident {
        for (layer, weights) in &units {
            b.at(*layer);
            originals.push(b.alloc(Kind::Weights, "the whole model, before sharding", *weights)?);
        }
    }
    for (index, ((layer, weights), share)) in units.iter().zip(&shares).enumerate() {
        b.at(*layer);
        let original = match mode {
            UnitInit::Resident => originals.get_mut(index).and_then(Option::take),
            UnitInit::Materialized | UnitInit::Broadcast => b.alloc(
                Kind::Weights,
                "a wrapped unit materialized on the device (FSDP1)",
                *weights,
            )?,
        };
        if mode == UnitInit::Broadcast {
            b.transient(
                Kind::Temporaries,
                "its broadcast buckets from rank 0 (sync_module_states)",
                Bytes(weights.0.min(super::BROADCAST_IN_FLIGHT)),
            )?;
        }
        let flat = b.alloc(
            Kind::Weights,
            "its flat concatenation (FlatParamHandle)",
            *weights,
        )?;
        b.alloc(Kind::Weights, "weights", *share)?;
        b.free(flat)?;
        b.free(original)?;
    }
    b.at(None);
    Ok(())
}

/// torchtune's setup ([`super::torchtune_setup`]), event by event; what it
/// keeps is part of the resident weights, and the rest of them (what the
/// setup does not build: none when the inventory and the setup agree) is
/// allocated after it.
fn torchtune_setup(b: &mut Builder, setup: &TorchtuneSetup, weights: Bytes) -> Result<()> {
    let events = super::torchtune_setup::setup_events(setup)?;
    b.whole = true;
    let mut blocks: Vec<Option<Block>> = Vec::with_capacity(events.len());
    let mut kept = Vec::new();
    for event in events {
        match event {
            SetupEvent::Alloc { bytes, kept: true } => {
                let block = b.alloc(
                    Kind::Weights,
                    "weights built by torchtune's setup (NF4Tensor pieces, other parameters)",
                    Bytes(bytes),
                )?;
                kept.push((blocks.len(), bytes));
                blocks.push(block);
            }
            SetupEvent::Alloc { bytes, kept: false } => blocks.push(b.alloc(
                Kind::Temporaries,
                "to_nf4, clone and load temporaries of torchtune's setup (torchao 0.1)",
                Bytes(bytes),
            )?),
            SetupEvent::Free(index) => {
                b.free(blocks.get_mut(index).and_then(Option::take))?;
            }
        }
    }
    let built = kept
        .iter()
        .filter(|(index, _)| blocks.get(*index).is_some_and(Option::is_some))
        .try_fold(0u64, |sum, (_, bytes)| sum.checked_add(*bytes))
        .ok_or_else(|| Error::overflow(WHAT))?;
    b.whole = false;
    b.alloc(
        Kind::Weights,
        "weights",
        Bytes(weights.0.saturating_sub(built)),
    )?;
    Ok(())
}

/// Under ZeRO-3/FSDP, gathers unit `index` unless it is already gathered,
/// and the unit at `next` when prefetching.
fn gather(
    b: &mut Builder,
    plan: &StepPlan,
    units: &[Unit],
    gathered: &mut [Option<Block>],
    index: usize,
    next: Option<usize>,
) -> Result<()> {
    if !plan.gathers {
        return Ok(());
    }
    // The unit itself, then the next one when prefetching (no allocation:
    // a layout search replays this for every unit of thousands of steps).
    let prefetched = next.filter(|_| plan.prefetch);
    for target in std::iter::once(index).chain(prefetched) {
        let (Some(unit), Some(slot)) = (units.get(target), gathered.get(target)) else {
            continue;
        };
        // FSDP1's root unit is gathered once for the whole step.
        if plan.root_kept && unit.layer.is_none() {
            continue;
        }
        if slot.is_none() {
            let module = unit.module.copied().unwrap_or_default();
            // Parameters offloaded to the host: the rank's shard comes to
            // the device first. FSDP1 without parameter mixed precision keeps
            // it as the flat parameter's data until the unit is resharded
            // (`pre_unshard`, `_use_sharded_flat_param` in
            // `torch/distributed/fsdp/_flat_param.py`): one block with the
            // gathered unit.
            let kept_shard = if module.host_shard_kept {
                module.host_shard
            } else {
                Bytes::ZERO
            };
            let bytes = module.gathered.add(kept_shard, "the gathered parameters")?;
            let tensor = match (target == index, kept_shard > Bytes::ZERO) {
                (true, false) => "gathered parameters",
                (false, false) => "gathered parameters (prefetched)",
                (true, true) => "gathered parameters and their shard from the host",
                (false, true) => "gathered parameters and their shard from the host (prefetched)",
            };
            b.rate_limit();
            // On the all-gather stream, whose cached blocks the compute
            // stream does not reuse.
            b.stream = Stream::Gather;
            let block = b.alloc(Kind::Weights, tensor, bytes)?;
            // FSDP2 (`FSDPParam.all_gather_inputs`: `.to(self.device)` then
            // the cast to `param_dtype`, `_fsdp_param.py` lines 1141-1147)
            // and FSDP1's low-precision shard (`_use_low_precision_shard`,
            // freed in `post_unshard`): the copies die once the all-gather
            // output holds them.
            if !module.host_shard_kept {
                b.transient(
                    Kind::Temporaries,
                    "shard copied from the host for the all-gather",
                    module.host_shard,
                )?;
            }
            b.stream = Stream::Compute;
            if let Some(slot) = gathered.get_mut(target) {
                *slot = block;
            }
        }
    }
    Ok(())
}

/// FSDP2 with parameters offloaded: the reduce-scatter output, cast to the
/// sharded parameter's dtype, lives on the device until
/// `new_sharded_grad.to(torch.device("cpu"))` (`foreach_reduce` in
/// `torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py`, lines
/// 776-809, torch 2.15): nothing of it stays.
fn gradient_to_host(b: &mut Builder, module: &Module) -> Result<()> {
    b.transient(
        Kind::Temporaries,
        "gradient shard before its copy to the host",
        module.gradient_to_host,
    )
}

/// The gradient one module's backward produces, and what stays of it.
fn gradients(
    b: &mut Builder,
    plan: &StepPlan,
    unit: &Unit,
    module: &Module,
    first_backward: bool,
    kept: &mut Vec<Option<Block>>,
) -> Result<()> {
    let policy = plan.gradients;
    if module.kept_gradient > Bytes::ZERO {
        // Accumulated into the gradient kept across steps: the new one is a
        // temporary. (A module's trained tensors are either all held by
        // the optimizer or none: litgpt's StableEmbedding alone.)
        b.transient(
            Kind::Temporaries,
            "gradient before accumulation (kept across steps)",
            module.kept_gradient,
        )?;
        if module.kept_gradient >= module.gradient {
            return Ok(());
        }
    }
    if policy.fused_update {
        if policy.sharded {
            // FSDP2 reduce-scatters the module's gradients first and runs the
            // post-accumulate-grad hooks on the sharded parameters.
            let whole = b.alloc(Kind::Gradients, "unsharded gradient", module.gradient)?;
            b.transient(
                Kind::Temporaries,
                "reduce-scatter buffer",
                module.reduce_buffer,
            )?;
            b.free(whole)?;
        }
        // The update is applied as each gradient is produced: one tensor's
        // gradient at a time, with its own step's temporaries.
        let gradient = b.alloc(
            Kind::Gradients,
            "gradient (applied at once)",
            module.largest_gradient,
        )?;
        b.transient(
            Kind::Temporaries,
            "optimizer step temporaries (in backward)",
            module.step_temporaries,
        )?;
        return b.free(gradient);
    }
    if policy.resident_from_start || !first_backward {
        // Accumulated into buffers that already exist: the new gradient is a temporary.
        let fresh = b.alloc(
            Kind::Temporaries,
            "gradient before accumulation",
            module.gradient,
        )?;
        if policy.sharded {
            let buffer = b.alloc(
                Kind::Temporaries,
                "reduce-scatter buffer",
                module.reduce_buffer,
            )?;
            gradient_to_host(b, module)?;
            b.free(buffer)?;
        }
        return b.free(fresh);
    }
    if policy.sharded {
        let whole = b.alloc(Kind::Gradients, "unsharded gradient", module.gradient)?;
        let buffer = b.alloc(
            Kind::Temporaries,
            "reduce-scatter buffer",
            module.reduce_buffer,
        )?;
        kept.push(b.alloc(Kind::Gradients, "gradient shard", unit.gradient_share)?);
        gradient_to_host(b, module)?;
        b.free(buffer)?;
        return b.free(whole);
    }
    kept.push(b.alloc(Kind::Gradients, "gradients", unit.gradient_share)?);
    Ok(())
}
