//! The search: sets of changes by size, each set applied alone to the
//! user's request and priced exactly with `estimate`.
//!
//! Sets grow one change at a time (all sets of one change, then of two,
//! ...), and a set that contains a fitting set is never priced: it cannot
//! be minimal. A fitting set is an answer only when dropping any one of its
//! changes makes it not fit (each smaller set looked up among those priced,
//! or priced then). For each kind of answer (what it gives up, and whether
//! it needs more GPUs) only the smallest sets are sought: once a level has
//! answered a kind, larger sets of that kind are not priced, nor larger
//! sets that give up as much as the best answer on the run's own GPUs
//! (they would rank below it). The search ends at the end of the first
//! level with an answer that keeps the maths on the run's own GPUs, at
//! [`MAX_CHANGES`], or when
//! [`MAX_ESTIMATES`] estimates are spent (the level then stops part-way,
//! its most promising sets first; the answers found are still minimal).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use super::space::{MORE_GPUS, SMALLER_BATCH, batch_sizes, candidates, gpu_counts};
use crate::error::Result;
use crate::estimate::Estimate;
use crate::request::change::apply_all;
use crate::request::resolver::Resolver;
use crate::request::{Category, Change, Slot};

/// The most changes in one answer.
pub const MAX_CHANGES: usize = 4;

/// The most estimates one search prices (the size bisections included),
/// counted, not timed: each model is built once per search and a set
/// that cannot fit is priced on its peak alone, so a release build spends
/// 14 to 43 ms of CPU on the 13 setups of `tests/advisor.rs`, up to 194
/// estimates (2026-12-02; `docs/src/commands/techniques.md`). A level cut
/// short by the budget has priced its most promising sets first.
pub const MAX_ESTIMATES: u64 = 192;

/// Every kind of answer, in rank order.
const CATEGORIES: [Category; 3] = [
    Category::SameMaths,
    Category::Numerics,
    Category::WhatIsTrained,
];

/// The most threads one search prices on.
const MAX_THREADS: usize = 16;

/// A set of changes priced.
#[derive(Debug, Clone)]
pub struct Priced {
    /// The changes, as applied (more GPUs with its count).
    pub changes: Vec<Change>,
    /// `estimate` of the request with exactly these changes.
    pub estimate: Estimate,
}

/// What the search found and what it spent.
#[derive(Debug, Clone)]
pub struct Found {
    /// The request as given, priced.
    pub base: Estimate,
    /// The minimal fitting sets, unranked.
    pub fitting: Vec<Priced>,
    /// Each candidate alone, priced (or refused, and why).
    pub singles: Vec<(Change, std::result::Result<Estimate, String>)>,
    /// The estimates priced.
    pub estimates: u64,
    /// Those priced whole ([`Spent::whole`]).
    pub whole: u64,
    /// Whether the search stopped at its budget before its levels ended.
    pub exhausted: bool,
}

/// What a search spent, counted.
#[derive(Debug, Default)]
pub struct Spent {
    /// The sets tried (the size bisections' steps included): what
    /// [`MAX_ESTIMATES`] bounds.
    pub tries: AtomicU64,
    /// Those priced whole (the allocator simulation and the report); the
    /// others were found not to fit from their peak alone.
    pub whole: AtomicU64,
}

/// What a pricing is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wanted {
    /// The estimate, fitting or not: the run as given, and each change
    /// alone (the report lists them and the search orders by their savings).
    Estimate,
    /// Whether it fits, with the estimate when it does: larger sets, the
    /// size bisections and the minimality checks, where a set that does
    /// not fit is only a "no". A set whose allocated peak alone exceeds
    /// the capacity is then not priced whole
    /// ([`crate::estimate::PreparedModel::may_fit`]).
    Fit,
}

/// A set of changes tried: its estimate, unless it was [`Wanted::Fit`]
/// and certainly does not fit.
#[derive(Debug, Clone)]
pub struct Tried {
    /// The changes, as applied (more GPUs with its count).
    pub changes: Vec<Change>,
    /// `estimate` of the request with exactly these changes; `None` for a
    /// set found not to fit without it.
    pub estimate: Option<Estimate>,
}

impl Tried {
    /// Whether it fits.
    pub fn fits(&self) -> bool {
        self.estimate.as_ref().is_some_and(|e| e.fits == Some(true))
    }
}

/// The request with `changes` applied, priced. A change whose size is
/// searched (more GPUs, a smaller micro-batch) takes the mildest size that
/// fits with the other changes: the fewest GPUs, the largest micro-batch.
/// Memory only falls along its sizes (more sharded ranks, fewer sequences
/// per micro-batch), so the mildest that fits is found by bisection.
///
/// `resolver` resolves the request's flags with the changes applied: the
/// estimate is `estimate` of what `resolve` gives for them, each distinct
/// model built once per search. Each try counts in `spent`, whole or not.
pub fn price(
    resolver: &Resolver,
    changes: &[Change],
    spent: &Spent,
    wanted: Wanted,
) -> Result<Tried> {
    let request = resolver.request();
    let once = |changes: &[Change], wanted: Wanted| -> Result<Option<Estimate>> {
        spent.tries.fetch_add(1, Ordering::Relaxed);
        let mut flags = request.flags.clone();
        apply_all(changes, &mut flags);
        let (model, setup) = resolver.resolve(&flags)?;
        if wanted == Wanted::Fit && !model.may_fit(&setup) {
            return Ok(None);
        }
        spent.whole.fetch_add(1, Ordering::Relaxed);
        model.estimate(&setup).map(Some)
    };
    let sized = changes
        .iter()
        .position(|c| *c == MORE_GPUS || *c == SMALLER_BATCH);
    // The sizes, mildest first, as changes.
    let sizes: Vec<Change> = match sized.map(|at| &changes[at]) {
        Some(Change::Gpus { .. }) => gpu_counts(&request.flags)
            .into_iter()
            .map(|gpus| Change::Gpus { gpus })
            .collect(),
        Some(_) => batch_sizes(&request.flags),
        None => Vec::new(),
    };
    let (Some(at), Some(strongest)) = (sized, sizes.last()) else {
        return once(changes, wanted).map(|estimate| Tried {
            changes: changes.to_vec(),
            estimate,
        });
    };
    let with = |size: &Change| {
        let mut set = changes.to_vec();
        set[at] = size.clone();
        set
    };
    // The strongest size first: if it does not fit, none does.
    let mut best = Tried {
        changes: with(strongest),
        estimate: once(&with(strongest), wanted)?,
    };
    if !best.fits() {
        return Ok(best);
    }
    let (mut low, mut high) = (0, sizes.len() - 1);
    while low < high {
        let middle = low + (high - low) / 2;
        let set = with(&sizes[middle]);
        let tried = Tried {
            estimate: once(&set, Wanted::Fit).unwrap_or(None),
            changes: set,
        };
        if tried.fits() {
            best = tried;
            high = middle;
        } else {
            low = middle + 1;
        }
    }
    Ok(best)
}

/// A set in one order (by slot: a set has one change per slot).
fn canonical(changes: &[Change]) -> Vec<Change> {
    let mut out = changes.to_vec();
    out.sort_by_key(Change::slot);
    out
}

/// Whether dropping any one change of the fitting set `changes` makes it
/// not fit: each smaller set is looked up among those priced, or priced
/// now (a set of a kind answered earlier was not priced in its level).
fn drops_all_fail(
    resolver: &Resolver,
    changes: &[Change],
    priced: &mut HashMap<Vec<Change>, bool>,
    spent: &Spent,
) -> bool {
    (0..changes.len()).all(|i| {
        let mut dropped = changes.to_vec();
        dropped.remove(i);
        let key = canonical(&dropped);
        let fits = match priced.get(&key) {
            Some(fits) => *fits,
            None => {
                let fits = price(resolver, &dropped, spent, Wanted::Fit).is_ok_and(|t| t.fits());
                priced.insert(key, fits);
                fits
            }
        };
        !fits
    })
}

/// What a set gives up, and whether it needs more GPUs.
fn kind(changes: &[Change]) -> (Category, bool) {
    (
        super::rank::category(changes),
        changes.iter().any(|c| matches!(c, Change::Gpus { .. })),
    )
}

/// Whether `set` holds every change of `smaller` (more GPUs matching any count).
fn contains(set: &[Change], smaller: &[Change]) -> bool {
    let same = |a: &Change, b: &Change| {
        a == b
            || matches!(
                (a, b),
                (Change::Gpus { .. }, Change::Gpus { .. })
                    | (Change::MicroBatch { .. }, Change::MicroBatch { .. })
            )
    };
    smaller.iter().all(|s| set.iter().any(|c| same(c, s)))
}

/// The sets of `size` changes of `options` (indices), at most one per
/// slot, more GPUs only alone or with full recomputation.
fn sets_of(options: &[Change], size: usize) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let mut current = Vec::with_capacity(size);
    fn grow(
        options: &[Change],
        size: usize,
        from: usize,
        current: &mut Vec<usize>,
        out: &mut Vec<Vec<usize>>,
    ) {
        if current.len() == size {
            out.push(current.clone());
            return;
        }
        for i in from..options.len() {
            let slot: Slot = options[i].slot();
            if current.iter().any(|&j| options[j].slot() == slot) {
                continue;
            }
            current.push(i);
            grow(options, size, i + 1, current, out);
            current.pop();
        }
    }
    grow(options, size, 0, &mut current, &mut out);
    out.retain(|set| {
        let gpus = set.iter().any(|&i| options[i] == MORE_GPUS);
        !gpus
            || set.len() == 1
            || (set.len() == 2 && set.iter().any(|&i| options[i] == Change::Recompute))
    });
    out
}

/// Finds the minimal fitting sets of changes for `request`, asking `stop`
/// between batches whether the answer is still wanted (`None` once not).
pub fn search(resolver: &Resolver, stop: &dyn Fn() -> bool) -> Result<Option<Found>> {
    let request = resolver.request();
    let options = candidates(request);
    let spent = Spent::default();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, MAX_THREADS);
    let base = price(resolver, &[], &spent, Wanted::Estimate)?
        .estimate
        .ok_or_else(|| crate::error::Error::Missing {
            what: "the run's estimate",
            accepted: "internal error: the run as given was not priced".to_string(),
        })?;
    let base_reserved = base.memory.reserved.0;
    let mut fitting: Vec<Priced> = Vec::new();
    // Whether each set priced fits, the run as given included.
    let mut priced: HashMap<Vec<Change>, bool> = HashMap::new();
    priced.insert(Vec::new(), base.fits == Some(true));
    let mut singles = Vec::new();
    let mut saving: Vec<u64> = vec![0; options.len()];
    let mut exhausted = false;
    'levels: for size in 1..=MAX_CHANGES.min(options.len()) {
        // The kinds answered by smaller sets: for each kind (what it gives
        // up, and whether it needs more GPUs) the smallest sets are the
        // answers; a larger set of an answered kind only gives up more.
        let answered: Vec<(Category, bool)> = fitting.iter().map(|f| kind(&f.changes)).collect();
        // The best category answered on the run's own GPUs: a larger set
        // that gives up as much or more ranks below that answer, so only
        // sets of better categories are worth a deeper level.
        let best_answered = fitting
            .iter()
            .map(|f| kind(&f.changes))
            .filter(|(_, more_gpus)| !more_gpus)
            .map(|(category, _)| category)
            .min();
        // Every set priced that fits, answer or not: a set holding one is
        // not minimal.
        let fit: Vec<&Vec<Change>> = priced
            .iter()
            .filter_map(|(set, fits)| (*fits && !set.is_empty()).then_some(set))
            .collect();
        let mut sets: Vec<Vec<usize>> = sets_of(&options, size)
            .into_iter()
            .filter(|set| {
                let changes: Vec<Change> = set.iter().map(|&i| options[i].clone()).collect();
                let (category, more_gpus) = kind(&changes);
                let ranks_above = best_answered.is_none_or(|best| more_gpus || category < best);
                ranks_above
                    && !answered.contains(&(category, more_gpus))
                    && !fit.iter().any(|f| contains(&changes, f))
            })
            .collect();
        // Same maths first, then the sets whose changes save most alone.
        sets.sort_by_key(|set| {
            let category = set.iter().map(|&i| options[i].category()).max();
            let saved: u64 = set.iter().map(|&i| saving[i]).fold(0, u64::saturating_add);
            (category, std::cmp::Reverse(saved))
        });
        for batch in sets.chunks(threads) {
            if stop() {
                return Ok(None);
            }
            if spent.tries.load(Ordering::Relaxed) >= MAX_ESTIMATES {
                exhausted = true;
                break 'levels;
            }
            let results: Vec<(Vec<Change>, Result<Tried>)> = std::thread::scope(|scope| {
                let handles: Vec<_> = batch
                    .iter()
                    .map(|set| {
                        let changes: Vec<Change> =
                            set.iter().map(|&i| options[i].clone()).collect();
                        let spent = &spent;
                        // Each change alone is reported, fitting or not.
                        let wanted = if size == 1 {
                            Wanted::Estimate
                        } else {
                            Wanted::Fit
                        };
                        scope.spawn(move || {
                            let result = price(resolver, &changes, spent, wanted);
                            (changes, result)
                        })
                    })
                    .collect();
                handles.into_iter().filter_map(|h| h.join().ok()).collect()
            });
            for (set, (changes, result)) in batch.iter().zip(results) {
                if size == 1 {
                    let index = set[0];
                    if let Ok(Tried {
                        estimate: Some(e), ..
                    }) = &result
                    {
                        saving[index] = base_reserved.saturating_sub(e.memory.reserved.0);
                    }
                    singles.push(match &result {
                        Ok(Tried {
                            changes,
                            estimate: Some(e),
                        }) => (changes.clone(), Ok(e.clone())),
                        Ok(Tried { changes, .. }) => (
                            changes.clone(),
                            Err("internal error: not priced whole".to_string()),
                        ),
                        Err(e) => (changes.clone(), Err(e.to_string())),
                    });
                }
                let fits = result.as_ref().is_ok_and(Tried::fits);
                if let Ok(t) = &result {
                    priced.insert(canonical(&t.changes), fits);
                }
                priced.insert(canonical(&changes), fits);
                if let Ok(Tried {
                    changes,
                    estimate: Some(estimate),
                }) = result
                    && fits
                    && drops_all_fail(resolver, &changes, &mut priced, &spent)
                {
                    fitting.push(Priced { changes, estimate });
                }
            }
        }
        // An answer that keeps the maths on the run's own GPUs: larger sets
        // would only give up more, and no category ranks above it.
        if fitting
            .iter()
            .any(|f| kind(&f.changes) == (CATEGORIES[0], false))
        {
            break;
        }
    }
    let singles = singles
        .into_iter()
        .map(|(changes, result): (Vec<Change>, _)| (changes[0].clone(), result))
        .collect();
    Ok(Some(Found {
        base,
        fitting,
        singles,
        estimates: spent.tries.load(Ordering::Relaxed),
        whole: spent.whole.load(Ordering::Relaxed),
        exhausted,
    }))
}
