//! The order of the answers: what the user gives up first (issue 23: the
//! same training, then other numerics, then other parameters trained),
//! then (within a kind) without host offload first, since the step-time
//! model does not price host transfers (as `plan` ranks), then the step
//! time (`Estimate.time`, when the device's speed is known), then the peak.
//! An answer on the run's own GPUs comes before one that needs more of
//! them: more GPUs are bought, not set.

use std::cmp::Ordering;

use super::search::Priced;
use crate::request::{Category, Change};

/// Whether a change moves tensors to host memory: the step-time model
/// does not price host transfers, so within a kind an answer without them
/// ranks first (as `plan` ranks its layouts).
fn offloads(change: &Change) -> bool {
    matches!(
        change,
        Change::OffloadActivations
            | Change::OffloadOptimizer
            | Change::OffloadParameters
            | Change::PagedOptimizer8bit
    )
}

/// An answer's rank key, smallest first.
fn key(p: &Priced) -> (bool, Category, bool, f64, u64, usize) {
    let more_gpus = p.changes.iter().any(|c| matches!(c, Change::Gpus { .. }));
    let category = category(&p.changes);
    let host = p.changes.iter().any(offloads);
    let time = p
        .estimate
        .time
        .as_ref()
        .map_or(f64::INFINITY, |t| t.step_time_s);
    (
        more_gpus,
        category,
        host,
        time,
        p.estimate.memory.peak.0,
        p.changes.len(),
    )
}

/// What a set gives up: the most of its changes'.
pub fn category(changes: &[Change]) -> Category {
    changes
        .iter()
        .map(Change::category)
        .max()
        .unwrap_or(Category::SameMaths)
}

/// `a` with its micro-batch change at a larger micro-batch than `b`'s,
/// and otherwise the same changes: `b` gives up more for the same.
fn milder_batch(a: &Priced, b: &Priced) -> bool {
    let batch = |p: &Priced| {
        p.changes.iter().find_map(|c| match c {
            Change::MicroBatch { micro_batch, .. } => Some(*micro_batch),
            _ => None,
        })
    };
    let rest = |p: &Priced| -> Vec<Change> {
        p.changes
            .iter()
            .filter(|c| !matches!(c, Change::MicroBatch { .. }))
            .cloned()
            .collect()
    };
    matches!((batch(a), batch(b)), (Some(x), Some(y)) if x > y) && rest(a) == rest(b)
}

/// The answers in rank order, those a milder micro-batch answers as well left out.
pub fn rank(mut found: Vec<Priced>) -> Vec<Priced> {
    let kept: Vec<bool> = found
        .iter()
        .map(|b| !found.iter().any(|a| milder_batch(a, b)))
        .collect();
    let mut kept_iter = kept.into_iter();
    found.retain(|_| kept_iter.next().unwrap_or(true));
    found.sort_by(|a, b| {
        let (ka, kb) = (key(a), key(b));
        (ka.0, ka.1, ka.2)
            .cmp(&(kb.0, kb.1, kb.2))
            .then(ka.3.partial_cmp(&kb.3).unwrap_or(Ordering::Equal))
            .then((ka.4, ka.5).cmp(&(kb.4, kb.5)))
    });
    found
}
