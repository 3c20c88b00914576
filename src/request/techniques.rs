//! The ladder of `trainmem techniques` and the web page's "what would make
//! it fit": the run priced again with one memory technique more at each
//! step, on the typed request both front doors build.
//!
//! Each step is a set of `estimate` flags added to the ones before; the
//! step's peak is exactly `trainmem estimate` with all of them (a test
//! checks each row against the command its flags spell).

use super::{EstimateRequest, RunFlags};
use crate::error::{Error, Result};
use crate::estimate::{Ladder, Rung, Skipped, estimate};

/// One technique: the flags it adds, whether the run already has it, and
/// the same change made to the parsed flags.
struct Technique {
    name: &'static str,
    flags: &'static [&'static str],
    /// Why it cannot be added to `args`, if it cannot (already on, not for this setup).
    not_for: fn(&RunFlags) -> Option<&'static str>,
    apply: fn(&mut RunFlags),
}

/// The optimizers an 8-bit Adam replaces.
const ADAM: [&str; 2] = ["adam", "adamw"];

/// The order of the README's "Making it fit": the optimizer's states first
/// (8-bit), then the activations (recomputation and the chunked loss cost
/// time, not quality), then the gradients (stepped in backward), then
/// training fewer parameters, and last moving activations over PCIe.
const LADDER: [Technique; 7] = [
    Technique {
        name: "8-bit AdamW (bitsandbytes)",
        flags: &["--optimizer", "adamw-8bit"],
        not_for: |args| {
            let name = args.training.optimizer.trim().to_ascii_lowercase();
            (!ADAM.contains(&name.as_str())).then_some("only replaces adam or adamw")
        },
        apply: |args| args.training.optimizer = "adamw-8bit".to_string(),
    },
    Technique {
        name: "activation checkpointing",
        flags: &["--recompute", "full"],
        not_for: |args| (args.workload.recompute == "full").then_some("already on"),
        apply: |args| args.workload.recompute = "full".to_string(),
    },
    Technique {
        name: "chunked cross-entropy",
        flags: &["--loss", "chunked:8"],
        not_for: |args| (args.workload.loss != "standard").then_some("another loss is on"),
        apply: |args| args.workload.loss = "chunked:8".to_string(),
    },
    Technique {
        name: "optimizer step in backward",
        flags: &["--optimizer-in-backward"],
        not_for: |args| args.workload.optimizer_in_backward.then_some("already on"),
        apply: |args| args.workload.optimizer_in_backward = true,
    },
    Technique {
        name: "LoRA r16 on every linear",
        flags: &["--lora-rank", "16", "--lora-targets", "all-linear"],
        not_for: |args| args.finetune.lora_rank.is_some().then_some("already on"),
        apply: |args| {
            args.finetune.lora_rank = Some(16);
            args.finetune.lora_targets = "all-linear".to_string();
        },
    },
    Technique {
        name: "QLoRA: the base in nf4",
        flags: &["--quantize", "nf4"],
        not_for: |args| args.finetune.quantize.is_some().then_some("already on"),
        apply: |args| args.finetune.quantize = Some("nf4".to_string()),
    },
    Technique {
        name: "activation offloading",
        flags: &["--offload-activations"],
        not_for: |args| args.workload.offload_activations.then_some("already on"),
        apply: |args| args.workload.offload_activations = true,
    },
];

/// The ladder for `request`: the run as given, then each technique in turn.
pub fn ladder(request: &EstimateRequest) -> Result<Ladder> {
    climb(request, &|| false).map(|(ladder, _)| ladder)
}

/// [`ladder`], asking `stop` before each estimate after the first whether
/// the answer is still wanted (the web server's request was answered at its
/// deadline, or its client left): `None` once it says no, so that the work
/// ends within one estimate instead of pricing every rung.
pub fn ladder_until(request: &EstimateRequest, stop: &dyn Fn() -> bool) -> Result<Option<Ladder>> {
    climb(request, stop).map(|(ladder, stopped)| (!stopped).then_some(ladder))
}

/// The ladder as far as it was priced, and whether `stop` cut it short.
fn climb(request: &EstimateRequest, stop: &dyn Fn() -> bool) -> Result<(Ladder, bool)> {
    if request.flags.workload.micro_batch.is_none() || request.flags.workload.seq_len.is_none() {
        return Err(Error::Missing {
            what: "--micro-batch and --seq-len",
            accepted: "the techniques change activations and the step: give the run's --micro-batch and --seq-len, such as --micro-batch 1 --seq-len 2048".to_string(),
        });
    }
    let (model, setup, _, _) = request.resolve()?;
    let first = estimate(&model, &setup)?;
    if !first.activations_estimated {
        return Err(Error::Missing {
            what: "the model's architecture",
            accepted: "the techniques change activations, which a bare --params count does not have: give --model (a preset, config.json or model folder), or --layers --hidden --heads --ffn --vocab".to_string(),
        });
    }
    let mut ladder = Ladder {
        model: first.model.name.clone(),
        capacity: first.capacity.clone(),
        rungs: vec![Rung::new("as given", Vec::new(), &first, None)],
        skipped: Vec::new(),
    };
    let mut current = request.clone();
    let mut peak = first.memory.peak;
    for technique in &LADDER {
        if stop() {
            return Ok((ladder, true));
        }
        let flags: Vec<String> = technique.flags.iter().map(|f| f.to_string()).collect();
        if let Some(reason) = (technique.not_for)(&current.flags) {
            ladder.skipped.push(Skipped {
                technique: technique.name,
                flags,
                reason: reason.to_string(),
            });
            continue;
        }
        let mut next = current.clone();
        (technique.apply)(&mut next.flags);
        let priced = next
            .resolve()
            .and_then(|(model, setup, _, _)| estimate(&model, &setup));
        match priced {
            Ok(e) => {
                ladder
                    .rungs
                    .push(Rung::new(technique.name, flags, &e, Some(peak)));
                peak = e.memory.peak;
                current = next;
            }
            Err(error) => ladder.skipped.push(Skipped {
                technique: technique.name,
                flags,
                reason: error.to_string(),
            }),
        }
    }
    Ok((ladder, false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn request() -> EstimateRequest {
        let flags = serde_json::json!({"model": "llama-3.2-1b", "micro-batch": 1, "seq-len": 1024});
        EstimateRequest::from_json(flags.as_object().unwrap()).unwrap()
    }

    #[test]
    fn a_stopped_ladder_prices_no_more_rungs() {
        let asked = Cell::new(0);
        let stopped = ladder_until(&request(), &|| {
            asked.set(asked.get() + 1);
            true
        })
        .unwrap();
        assert!(stopped.is_none());
        // Asked once, before the first technique: no rung past the first.
        assert_eq!(asked.get(), 1);
        let asked = Cell::new(0);
        let whole = ladder_until(&request(), &|| {
            asked.set(asked.get() + 1);
            false
        })
        .unwrap()
        .unwrap();
        assert_eq!(asked.get(), LADDER.len());
        assert_eq!(whole.rungs.len(), ladder(&request()).unwrap().rungs.len());
    }
}
