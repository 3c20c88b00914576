//! "Making it fit": the run as given, then each minimal set of changes
//! that makes it fit (the advisor's answers, `crate::advisor`), each
//! applied alone to the run as given and priced exactly.
//!
//! The rows are assembled where requests are read (`request/techniques.rs`);
//! this module holds what they found.

use serde::Serialize;

use super::{Capacity, Estimate};
use crate::timeline::{ByKind, Phase};
use crate::units::Bytes;

/// One run priced: as given, or with one answer's changes.
#[derive(Debug, Clone, Serialize)]
pub struct Rung {
    /// What was switched on, in words, `+` between changes; `as given` first.
    pub technique: String,
    /// The flags the row adds to the run as given (empty for the first row).
    pub flags: Vec<String>,
    /// The row's peak, `memory.peak` of `trainmem estimate` with its flags.
    pub peak: Bytes,
    /// The peak's change from the run as given, in bytes (negative: saved).
    pub change: i128,
    /// Whether the row fits the capacity (`fits` of its estimate: the
    /// reserved memory), when one is given.
    pub fits: Option<bool>,
    /// When the peak falls: the phase and, within the layers, the layer.
    pub peak_phase: Phase,
    /// The decoder layer of the peak, if it falls in one.
    pub peak_layer: Option<u64>,
    /// What is alive at the peak, by kind.
    pub peak_by_kind: ByKind,
    /// What the caching allocator reserves with the row's flags, the overhead included.
    pub reserved: Bytes,
    /// Whether the allocated peak fits (the strict figure).
    pub fits_allocated: Option<bool>,
    /// What the row gives up: `same maths`, `numerics` or `what is
    /// trained` (null for the run as given).
    pub category: Option<&'static str>,
    /// What each change costs, in words.
    pub costs: Vec<&'static str>,
    /// The seconds of one step, when the device's speed is known.
    pub step_time_s: Option<f64>,
    /// Host memory per node with the row's flags.
    pub host: Bytes,
    /// The row's changes as the web API's JSON keys, to merge into the
    /// request (null for the run as given).
    pub keys: Option<serde_json::Map<String, serde_json::Value>>,
}

impl Rung {
    /// The row priced as `estimate`, `change` from the run as given.
    pub fn new(
        technique: String,
        flags: Vec<String>,
        estimate: &Estimate,
        before: Option<Bytes>,
    ) -> Rung {
        let peak = estimate.memory.peak;
        Rung {
            technique,
            flags,
            peak,
            change: before.map_or(0, |b| i128::from(peak.0) - i128::from(b.0)),
            fits: estimate.fits,
            peak_phase: estimate.timeline.peak.phase,
            peak_layer: estimate.timeline.peak.layer,
            peak_by_kind: estimate.timeline.peak.by_kind,
            reserved: estimate.memory.reserved,
            fits_allocated: estimate.fits_allocated,
            category: None,
            costs: Vec::new(),
            step_time_s: estimate.time.as_ref().map(|t| t.step_time_s),
            host: estimate.host.total,
            keys: None,
        }
    }
}

/// A change the advisor could not price for this run, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    /// The change, in words.
    pub technique: String,
    /// The flags it would have added.
    pub flags: Vec<String>,
    /// Why not: already on, not for this optimizer, or the engine's refusal.
    pub reason: String,
}

/// The run as given, then each answer alone.
#[derive(Debug, Clone, Serialize)]
pub struct Ladder {
    /// The model's name.
    pub model: String,
    /// The accelerator the verdicts are against, when given.
    pub capacity: Option<Capacity>,
    /// The steps, the run as given first.
    pub rungs: Vec<Rung>,
    /// Changes refused for this run, and why.
    pub skipped: Vec<Skipped>,
    /// The estimates the search priced.
    pub estimates: u64,
    /// Whether the search stopped at its budget before its end.
    pub exhausted: bool,
}

impl Ladder {
    /// The best answer (the first row after the run as given), if any.
    pub fn first_fit(&self) -> Option<&Rung> {
        self.rungs.iter().skip(1).find(|r| r.fits == Some(true))
    }
}
