//! "Making it fit": the same run priced again with one more memory
//! technique switched on at each step, each step keeping the ones before.
//!
//! The steps themselves are command-line flags (`--recompute full`,
//! `--quantize nf4`), so the ladder is assembled where flags are read
//! (`cli/techniques.rs`); this module holds what it found.

use serde::Serialize;

use super::{Capacity, Estimate};
use crate::timeline::{ByKind, Phase};
use crate::units::Bytes;

/// One run priced with one more technique than the step before.
#[derive(Debug, Clone, Serialize)]
pub struct Rung {
    /// What was switched on: `activation checkpointing`; `as given` first.
    pub technique: &'static str,
    /// The flags it adds to the ones before (empty for the first step).
    pub flags: Vec<String>,
    /// The step's peak, `memory.peak` of `trainmem estimate` with every flag so far.
    pub peak: Bytes,
    /// The peak's change from the step before, in bytes (negative: saved).
    pub change: i128,
    /// Whether the peak fits the capacity, when one is given.
    pub fits: Option<bool>,
    /// When the peak falls: the phase and, within the layers, the layer.
    pub peak_phase: Phase,
    /// The decoder layer of the peak, if it falls in one.
    pub peak_layer: Option<u64>,
    /// What is alive at the peak, by kind.
    pub peak_by_kind: ByKind,
}

impl Rung {
    /// The step priced as `estimate`, `change` from the step before.
    pub fn new(
        technique: &'static str,
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
            fits: estimate.capacity.as_ref().map(|c| peak <= c.bytes),
            peak_phase: estimate.timeline.peak.phase,
            peak_layer: estimate.timeline.peak.layer,
            peak_by_kind: estimate.timeline.peak.by_kind,
        }
    }
}

/// A technique the ladder could not add, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    /// The technique.
    pub technique: &'static str,
    /// The flags it would have added.
    pub flags: Vec<String>,
    /// Why not: already on, not for this optimizer, or the engine's refusal.
    pub reason: String,
}

/// The run as given, then one technique more at each step.
#[derive(Debug, Clone, Serialize)]
pub struct Ladder {
    /// The model's name.
    pub model: String,
    /// The accelerator the verdicts are against, when given.
    pub capacity: Option<Capacity>,
    /// The steps, the run as given first.
    pub rungs: Vec<Rung>,
    /// Techniques left out, and why.
    pub skipped: Vec<Skipped>,
}

impl Ladder {
    /// The first step whose peak fits, if any.
    pub fn first_fit(&self) -> Option<&Rung> {
        self.rungs.iter().find(|r| r.fits == Some(true))
    }
}
