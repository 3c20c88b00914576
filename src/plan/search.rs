//! Pricing the layouts: pruned (or exhaustive), on one thread or many,
//! ranked by tokens per second, then by the memory left.

use super::Request;
use super::budget::{self, Work};
use super::space::{Layout, Structure, batches, kernels, recompute_modes, structures};
use crate::error::{Error, Result};
use crate::estimate::{Pricer, Setup, step_time};
use crate::parallel::{Framework, Offload};
use crate::step_time::{Speed, StepTime, Work as Flops};
use crate::units::Bytes;

/// One layout that fits.
#[derive(Debug, Clone)]
pub struct Row {
    pub layout: Layout,
    /// The step's peak on the most loaded rank: `estimate`'s `memory.peak`.
    pub peak: Bytes,
    /// The step's time, when the device's peak is known.
    pub time: Option<StepTime>,
    /// What PyTorch's caching allocator reserves on that rank, the overhead
    /// included (`estimate`'s `memory.reserved`): simulated only for the
    /// rows ranked high enough to be shown.
    pub reserved: Option<Bytes>,
    /// Its place in the enumeration: the last tie-break, so that any number
    /// of workers gives the same order.
    order: (usize, usize),
}

impl Row {
    /// The flags that choose it (beside the user's own).
    pub fn flags(&self) -> Vec<String> {
        self.layout.flags()
    }
}

/// What a search found.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Layouts the search covered: every accepted combination of the axes.
    pub candidates: u64,
    /// Layouts whose peak was computed (the rest were pruned).
    pub priced: u64,
    /// Layouts `estimate` refuses (a head count tp does not divide, a
    /// recomputation mode the architecture lacks), not counted as candidates.
    pub refused: u64,
    /// Parallel structures skipped because their data-parallel degree does
    /// not divide `--global-batch`.
    pub batch_mismatch: u64,
    /// The layouts that fit, best first: their allocated peak within the
    /// capacity less the headroom, and the first shown also their reserve.
    pub kept: Vec<Row>,
    /// Indices into `kept` of the rows to show, at most `Request::top`: the
    /// best that fit on reserved memory (`estimate`'s `fits`), leaving out
    /// a row that differs from one shown only by a loss kernel or
    /// activation offloading that does not lower its peak.
    pub shown: Vec<usize>,
    /// Layouts whose allocated peak fits with the headroom but whose
    /// reserved memory does not fit the capacity, met on the way to the
    /// shown rows and dropped from `kept`.
    pub tight: u64,
    /// Caching-allocator simulations run: one per shown row and per tight
    /// layout met, at most [`MOST_RESERVE_SIMULATIONS`].
    pub reserve_simulations: u64,
    /// Whether the simulations ran out before `top` rows were confirmed
    /// (the rows shown are then fewer).
    pub reserve_exhausted: bool,
    /// Why the layouts are not timed (then they are ranked by peak alone).
    pub time_unavailable: Option<String>,
    /// The first refusal met, to explain a search that finds no candidate.
    pub refusal: Option<String>,
    /// The structures and layouts priced, and the model's layers: the
    /// work done, never more than [`budget::WORK_BUDGET`] layer-pricings.
    pub work: Work,
}

/// Searches `request`, or refuses one whose axes open more work than
/// [`budget::WORK_BUDGET`] before pricing anything.
pub fn search(request: &Request) -> Result<Outcome> {
    let structures = structures(&request.axes);
    let layers = crate::parallel::Splittable::of(request.model)
        .layers
        .unwrap_or(1);
    budget::check(
        &request.axes,
        &budget::bound(&request.axes, &structures, layers),
    )?;
    let flops = Flops::of(request.model);
    let jobs = request.jobs.max(1).min(structures.len().max(1));
    let mut parts: Vec<Result<Outcome>> = if jobs == 1 {
        vec![search_part(
            request,
            &flops,
            layers,
            structures.iter().enumerate(),
        )]
    } else {
        // Contiguous shares: neighbouring structures share their activations.
        let share = structures.len().div_ceil(jobs);
        std::thread::scope(|scope| {
            let handles: Vec<_> = structures
                .chunks(share)
                .enumerate()
                .map(|(chunk, part)| {
                    let flops = &flops;
                    scope.spawn(move || {
                        search_part(
                            request,
                            flops,
                            layers,
                            part.iter()
                                .enumerate()
                                .map(move |(i, s)| (chunk * share + i, s)),
                        )
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(Error::overflow("a plan worker")))
                })
                .collect()
        })
    };
    let mut outcome = Outcome::default();
    outcome.work.layers = layers.max(1);
    for part in parts.drain(..) {
        let part = part?;
        outcome.candidates += part.candidates;
        outcome.priced += part.priced;
        outcome.refused += part.refused;
        outcome.batch_mismatch += part.batch_mismatch;
        outcome.work.structures += part.work.structures;
        outcome.work.layouts += part.work.layouts;
        outcome.kept.extend(part.kept);
        outcome.time_unavailable = outcome.time_unavailable.or(part.time_unavailable);
        outcome.refusal = outcome.refusal.or(part.refusal);
    }
    // Throughputs within one RESOLUTION step of each other are one bucket:
    // closer than any published comparison resolves, so among them the
    // layout with fewer model-parallel dimensions comes first (a practitioner
    // adds context or pipeline parallelism only where it pays).
    let speed = |row: &Row| {
        row.time.as_ref().map_or(i64::MIN, |t| {
            (t.tokens_per_s.max(f64::MIN_POSITIVE).ln() / RESOLUTION.ln_1p()).floor() as i64
        })
    };
    let dimensions = |row: &Row| {
        let l = &row.layout;
        [l.tensor, l.pipeline, l.context, l.expert]
            .iter()
            .filter(|d| **d > 1)
            .count()
    };
    outcome.kept.sort_unstable_by(|a, b| {
        speed(b)
            .cmp(&speed(a))
            .then_with(|| dimensions(a).cmp(&dimensions(b)))
            .then_with(|| {
                (a.layout.offload != Offload::None).cmp(&(b.layout.offload != Offload::None))
            })
            .then_with(|| a.peak.cmp(&b.peak))
            .then_with(|| a.layout.flag_count().cmp(&b.layout.flag_count()))
            .then_with(|| a.order.cmp(&b.order))
    });
    confirm_reserved(request, &mut outcome)?;
    Ok(outcome)
}

/// The most caching-allocator simulations a plan runs to confirm its shown
/// rows: each costs about one layout's replay, kept far below the search.
pub const MOST_RESERVE_SIMULATIONS: u64 = 1024;

/// Walks the kept rows best first and simulates the caching allocator for
/// each row worth showing until `request.top` of them fit on reserved
/// memory plus [`crate::estimate::RESERVED_MARGIN`] (what `estimate` calls
/// `fits`). The allocated peak is a lower bound of the reserve, so a row
/// the search dropped could not fit on reserved either: only the ranked
/// rows need the simulation. A row whose reserve does not fit ("tight") is
/// dropped from `kept` and counted.
fn confirm_reserved(request: &Request, outcome: &mut Outcome) -> Result<()> {
    let mut pricer = Pricer::new(request.model);
    let rows = std::mem::take(&mut outcome.kept);
    let mut kept = Vec::with_capacity(rows.len());
    let mut rows = rows.into_iter();
    while outcome.shown.len() < request.top {
        let Some(mut row) = rows.next() else {
            break;
        };
        let redundant = outcome.shown.iter().any(|&index| {
            kept.get(index).is_some_and(|seen: &Row| {
                seen.layout.same_but_kernels(&row.layout) && seen.peak <= row.peak
            })
        });
        if redundant {
            kept.push(row);
            continue;
        }
        if outcome.reserve_simulations >= MOST_RESERVE_SIMULATIONS {
            outcome.reserve_exhausted = true;
            kept.push(row);
            break;
        }
        let base = base(request, row.layout.sharding.framework)?;
        let setup = row
            .layout
            .apply(base, request.axes.gpus, request.axes.nodes)?;
        let (_, reserved) = pricer.reserved(&setup)?;
        outcome.reserve_simulations += 1;
        row.reserved = Some(reserved);
        if reserved
            .0
            .saturating_add(crate::estimate::RESERVED_MARGIN.0)
            <= request.capacity.0
        {
            outcome.shown.push(kept.len());
            kept.push(row);
        } else {
            outcome.tight += 1;
        }
    }
    kept.extend(rows);
    outcome.kept = kept;
    Ok(())
}

/// The step-time resolution of the ranking: throughputs that differ by less
/// than 1% rank as equal (then by fewer parallel dimensions, no offload,
/// lower peak, fewer flags).
const RESOLUTION: f64 = 0.01;

/// The base setup of `framework`.
fn base<'r>(request: &'r Request, framework: Framework) -> Result<&'r Setup> {
    request
        .bases
        .iter()
        .find(|(f, _)| *f == framework)
        .map(|(_, s)| s)
        .ok_or_else(|| Error::Missing {
            what: "framework",
            accepted: format!("no base setup for {framework:?}"),
        })
}

/// Searches some of the structures with a pricer of its own.
fn search_part<'s>(
    request: &Request,
    flops: &Flops,
    layers: u64,
    structures: impl Iterator<Item = (usize, &'s Structure)>,
) -> Result<Outcome> {
    let axes = &request.axes;
    let mut pricer = Pricer::new(request.model);
    let mut out = Outcome {
        work: Work {
            layers: layers.max(1),
            ..Work::default()
        },
        ..Outcome::default()
    };
    for (position, structure) in structures {
        let base = base(request, structure.sharding.framework)?;
        if let Speed::Unknown(why) = &base.speed {
            out.time_unavailable.get_or_insert_with(|| why.clone());
        }
        let batches = batches(axes, structure.data(axes.gpus));
        if batches.is_empty() {
            out.batch_mismatch += 1;
            continue;
        }
        let modes = recompute_modes(structure.sharding.framework, &axes.recompute);
        let sequence_parallel: Vec<bool> = if structure.tensor > 1 {
            axes.sequence_parallel.clone()
        } else {
            vec![false]
        };
        let kernels = kernels(structure.sharding.framework, axes);
        let layout =
            |(sequence_parallel, (recompute, recompute_every), (loss, offload_activations)),
             (micro_batch, accumulation)| Layout {
                sharding: structure.sharding,
                tensor: structure.tensor,
                pipeline: structure.pipeline,
                context: structure.context,
                expert: structure.expert,
                sequence_parallel,
                offload: structure.offload,
                recompute,
                recompute_every,
                loss,
                offload_activations,
                micro_batch,
                accumulation,
            };
        // The structure as `estimate` checks it: refused layouts are no candidates.
        out.work.structures += 1;
        let mut accepted = Vec::new();
        for &sp in &sequence_parallel {
            for &recompute in &modes {
                for &kernel in &kernels {
                    let choice = (sp, recompute, kernel);
                    let checked = layout(choice, batches[0])
                        .apply(base, axes.gpus, axes.nodes)
                        .and_then(|setup| pricer.accepts(&setup));
                    match checked {
                        Ok(()) => accepted.push(choice),
                        Err(error) => {
                            out.refused += batches.len() as u64;
                            out.refusal.get_or_insert_with(|| error.to_string());
                        }
                    }
                }
            }
        }
        if accepted.is_empty() {
            continue;
        }
        out.candidates += (accepted.len() * batches.len()) as u64;
        if request.prune {
            let setup = layout(accepted[0], batches[0]).apply(base, axes.gpus, axes.nodes)?;
            // Every workload on the structure holds its states: one floor for all.
            if pricer.floor(&setup)? > request.usable {
                continue;
            }
        }
        // One setup for every layout of the structure, each applied onto it.
        let mut setup = base.clone();
        for (slot, &choice) in accepted.iter().enumerate() {
            // Larger micro-batches never peak lower within one accumulation
            // regime (gradients kept across micro-batches, or not).
            let mut too_big_while_accumulating = false;
            for (index, &batch) in batches.iter().enumerate() {
                let accumulating = batch.1 > 1;
                if request.prune && accumulating && too_big_while_accumulating {
                    continue;
                }
                let candidate = layout(choice, batch);
                candidate.apply_onto(&mut setup, axes.gpus, axes.nodes)?;
                out.priced += 1;
                out.work.layouts += 1;
                let peak = match pricer.price(&setup) {
                    Ok(priced) => priced.peak,
                    Err(_) => {
                        out.refused += 1;
                        continue;
                    }
                };
                if peak > request.usable {
                    if accumulating {
                        too_big_while_accumulating = true;
                        continue;
                    }
                    if request.prune {
                        break;
                    }
                    continue;
                }
                let (time, _) = step_time(&setup, || flops);
                out.kept.push(Row {
                    layout: candidate,
                    peak,
                    time,
                    reserved: None,
                    order: (position, slot * batches.len() + index),
                });
            }
        }
    }
    Ok(out)
}
