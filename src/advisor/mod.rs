//! The advisor: every "what would make it fit" answer (`trainmem
//! techniques`, `check`'s suggestions, `fit`'s hints, `POST
//! /api/techniques` and the page that reads it) from one search over sets
//! of typed changes ([`crate::request::Change`]).
//!
//! Each answer is a minimal set of changes (no proper subset of it fits;
//! the search prices every smaller set first), applied alone to the
//! user's request, not on top of another answer, and priced exactly with
//! `estimate`. Answers are ranked by what they give up ([`rank`]).
//!
//! - [`space`]: the candidate changes for a request.
//! - [`search`]: the sets, by size, pruned exactly.
//! - [`rank`]: the order of the answers.

pub mod rank;
pub mod search;
pub mod space;

pub use search::{MAX_CHANGES, MAX_ESTIMATES, Priced};

use crate::error::{Error, Result};
use crate::estimate::Estimate;
use crate::request::resolver::Resolver;
use crate::request::{Category, Change, EstimateRequest};

/// The most answers given: the best of them, in rank order.
pub const MAX_ANSWERS: usize = 10;

/// What the advisor found for one request.
#[derive(Debug, Clone)]
pub struct Advice {
    /// The request as given, priced.
    pub base: Estimate,
    /// The minimal fitting sets, best first (empty when the run fits as
    /// given: nothing needs changing).
    pub answers: Vec<Priced>,
    /// Each candidate change alone: its estimate, or why it was refused.
    pub singles: Vec<(Change, std::result::Result<Estimate, String>)>,
    /// The estimates the search priced.
    pub estimates: u64,
    /// Those priced whole: the others were found not to fit from their
    /// allocated peak alone, without the allocator simulation and the
    /// report ([`crate::estimate::PreparedModel::may_fit`]).
    pub whole: u64,
    /// The models it built for them: one per distinct fine-tuning of the
    /// request's model (its LoRA and quantization), however many sets
    /// share it.
    pub models: u64,
    /// Whether the search stopped at [`MAX_ESTIMATES`] before its end.
    pub exhausted: bool,
}

impl Advice {
    /// The best answer, if any.
    pub fn first(&self) -> Option<&Priced> {
        self.answers.first()
    }
}

/// The ranked answers for `request`.
pub fn advise(request: &EstimateRequest) -> Result<Advice> {
    advise_until(request, &|| false)?.ok_or_else(|| Error::Missing {
        what: "advice",
        accepted: "internal error: the search stopped unasked".to_string(),
    })
}

/// [`advise`], asking `stop` between batches of estimates whether the
/// answer is still wanted (the web server's deadline passed, its client
/// left): `None` once it says no.
pub fn advise_until(request: &EstimateRequest, stop: &dyn Fn() -> bool) -> Result<Option<Advice>> {
    if request.flags.workload.micro_batch.is_none() || request.flags.workload.seq_len.is_none() {
        return Err(Error::Missing {
            what: "--micro-batch and --seq-len",
            accepted: "the techniques change activations and the step: give the run's --micro-batch and --seq-len, such as --micro-batch 1 --seq-len 2048".to_string(),
        });
    }
    let resolver = Resolver::new(request);
    let (model, setup) = resolver.resolve(&request.flags)?;
    let first = model.estimate(&setup)?;
    if !first.activations_estimated {
        return Err(Error::Missing {
            what: "the model's architecture",
            accepted: "the techniques change activations, which a bare --params count does not have: give --model (a preset, config.json or model folder), or --layers --hidden --heads --ffn --vocab".to_string(),
        });
    }
    if first.capacity.is_none() || first.fits == Some(true) {
        return Ok(Some(Advice {
            base: first,
            answers: Vec::new(),
            singles: Vec::new(),
            estimates: 1,
            whole: 1,
            models: resolver.models_built(),
            exhausted: false,
        }));
    }
    let Some(found) = search::search(&resolver, stop)? else {
        return Ok(None);
    };
    Ok(Some(Advice {
        base: found.base,
        answers: shortlist(rank::rank(found.fitting)),
        singles: found.singles,
        estimates: found.estimates.saturating_add(1),
        whole: found.whole.saturating_add(1),
        models: resolver.models_built(),
        exhausted: found.exhausted,
    }))
}

/// At most [`MAX_ANSWERS`] of the ranked answers, in rank order: the best
/// of each kind (what it gives up, more GPUs or not) always among them.
fn shortlist(ranked: Vec<Priced>) -> Vec<Priced> {
    let kind = |p: &Priced| {
        (
            rank::category(&p.changes),
            p.changes.iter().any(|c| matches!(c, Change::Gpus { .. })),
        )
    };
    let mut seen = Vec::new();
    let mut keep: Vec<bool> = ranked
        .iter()
        .map(|p| {
            let first = !seen.contains(&kind(p));
            if first {
                seen.push(kind(p));
            }
            first
        })
        .collect();
    let mut room = MAX_ANSWERS.saturating_sub(seen.len());
    for slot in keep.iter_mut() {
        if !*slot && room > 0 {
            *slot = true;
            room -= 1;
        }
    }
    ranked
        .into_iter()
        .zip(keep)
        .filter_map(|(p, kept)| kept.then_some(p))
        .collect()
}

/// What an answer gives up: the most of its changes'.
pub fn category(answer: &Priced) -> Category {
    rank::category(&answer.changes)
}
