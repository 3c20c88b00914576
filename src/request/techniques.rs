//! `trainmem techniques` and the web page's "what would make it fit": the
//! advisor's answers ([`crate::advisor`]) for the typed request both front
//! doors build, as rows: the run as given, then each minimal set of
//! changes that fits, applied alone to the run as given.
//!
//! Each row's peak is exactly `trainmem estimate` with the run's flags and
//! the row's (a test checks each row against the command its flags spell).

use super::EstimateRequest;
use super::change::{cli_flags_all, json_all};
use crate::advisor::{self, Advice};
use crate::error::Result;
use crate::estimate::{Ladder, Rung, Skipped};

/// The rows for `request`.
pub fn ladder(request: &EstimateRequest) -> Result<Ladder> {
    Ok(rows(request, &advisor::advise(request)?))
}

/// [`ladder`], asking `stop` between batches of estimates whether the
/// answer is still wanted (the web server's request was answered at its
/// deadline, or its client left): `None` once it says no.
pub fn ladder_until(request: &EstimateRequest, stop: &dyn Fn() -> bool) -> Result<Option<Ladder>> {
    Ok(advisor::advise_until(request, stop)?.map(|advice| rows(request, &advice)))
}

/// The advice as rows: the run as given first.
pub fn rows(request: &EstimateRequest, advice: &Advice) -> Ladder {
    let base = &advice.base;
    let mut rungs = vec![Rung::new("as given".to_string(), Vec::new(), base, None)];
    for answer in &advice.answers {
        let words: Vec<String> = answer.changes.iter().map(|c| c.words()).collect();
        let mut rung = Rung::new(
            words.join(" + "),
            cli_flags_all(&answer.changes, &request.flags),
            &answer.estimate,
            Some(base.memory.peak),
        );
        rung.category = Some(advisor::category(answer).name());
        rung.costs = answer.changes.iter().map(|c| c.cost()).collect();
        rung.keys = Some(json_all(&answer.changes, &request.flags));
        rungs.push(rung);
    }
    let skipped = advice
        .singles
        .iter()
        .filter_map(|(change, result)| {
            let reason = result.as_ref().err()?;
            Some(Skipped {
                technique: change.words(),
                flags: change.cli_flags(&request.flags),
                reason: reason.clone(),
            })
        })
        .collect();
    Ladder {
        model: base.model.name.clone(),
        capacity: base.capacity.clone(),
        rungs,
        skipped,
        estimates: advice.estimates,
        exhausted: advice.exhausted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn request() -> EstimateRequest {
        let flags = serde_json::json!({"model": "llama-3.2-1b", "micro-batch": 4, "seq-len": 1024,
            "optimizer": "adamw", "capacity": "12GB"});
        EstimateRequest::from_json(flags.as_object().unwrap()).unwrap()
    }

    #[test]
    fn a_stopped_search_prices_no_more() {
        let asked = Cell::new(0);
        let stopped = ladder_until(&request(), &|| {
            asked.set(asked.get() + 1);
            true
        })
        .unwrap();
        assert!(stopped.is_none());
        // Asked once, before the first batch.
        assert_eq!(asked.get(), 1);
        let whole = ladder_until(&request(), &|| false).unwrap().unwrap();
        assert_eq!(whole.rungs.len(), ladder(&request()).unwrap().rungs.len());
        assert!(whole.rungs.len() > 1, "{whole:?}");
    }
}
