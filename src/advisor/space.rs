//! The candidate changes for a request: every [`Change`] that this run
//! does not already have and that its flags allow, each once (a smaller
//! micro-batch and more GPUs with their sizes found when priced).

use crate::request::{Change, EstimateRequest, RunFlags};

/// The optimizers an 8-bit AdamW replaces.
const ADAM: [&str; 2] = ["adam", "adamw"];

/// The most GPUs the advisor proposes: 128 nodes of eight.
pub const MAX_GPUS: u64 = 1024;

/// GPUs per node when the run says nothing: an HGX machine's eight (the
/// command line's default); counts beyond one node fill whole nodes.
const GPUS_PER_NODE: u64 = 8;

/// A placeholder for "more GPUs": the search replaces it with the fewest
/// that fit with the rest of the set.
pub const MORE_GPUS: Change = Change::Gpus { gpus: 0 };

/// A placeholder for "a smaller micro-batch, the same global batch": the
/// search replaces it with the largest that fits with the rest of the set.
pub const SMALLER_BATCH: Change = Change::MicroBatch {
    micro_batch: 0,
    accumulation: 0,
};

/// The smaller micro-batches that keep the global batch (the divisors of
/// the run's, each with the accumulation that makes up the rest), largest
/// (mildest) first.
pub fn batch_sizes(flags: &RunFlags) -> Vec<Change> {
    let micro_batch = flags.workload.micro_batch.unwrap_or(1);
    let accumulation = flags.workload.grad_accumulation;
    (1..micro_batch)
        .rev()
        .filter(|m| micro_batch.is_multiple_of(*m))
        .filter_map(|smaller| {
            accumulation
                .checked_mul(micro_batch / smaller)
                .map(|more| Change::MicroBatch {
                    micro_batch: smaller,
                    accumulation: more,
                })
        })
        .collect()
}

/// The changes the advisor may combine for `request`, in the order the
/// ranking prefers them (same maths first).
pub fn candidates(request: &EstimateRequest) -> Vec<Change> {
    let flags = &request.flags;
    let mut out = Vec::new();
    if !batch_sizes(flags).is_empty() {
        out.push(SMALLER_BATCH);
    }
    let loss = flags.workload.loss.trim();
    if loss != "fused" {
        out.push(Change::FusedLoss);
        if !loss.starts_with("chunked") {
            out.push(Change::ChunkedLoss);
        }
    }
    let recompute = flags.workload.recompute.trim();
    if recompute != "full" {
        out.push(Change::Recompute);
        if recompute == "none" {
            out.push(Change::SelectiveRecompute);
        }
    }
    if !flags.workload.offload_activations {
        out.push(Change::OffloadActivations);
    }
    if flags.parallel.gpus > 1 {
        match flags.parallel.fsdp.as_deref() {
            Some("full-shard" | "hybrid-shard") => {}
            Some(_) => out.push(Change::FullShard),
            None => {
                let stage = flags
                    .parallel
                    .zero
                    .as_deref()
                    .and_then(|z| z.trim().parse::<u8>().ok())
                    .unwrap_or(0);
                // Stage 2 and 3: stage 1 saves less than 2 at no lower cost.
                for next in (stage + 1).max(2)..=3 {
                    out.push(Change::Zero(next));
                }
            }
        }
    }
    let offload = flags.parallel.offload.trim();
    if offload == "none" {
        out.push(Change::OffloadOptimizer);
    }
    if offload != "optimizer+params" {
        out.push(Change::OffloadParameters);
    }
    if flags.parallel.gpus < MAX_GPUS
        && flags.parallel.tp * flags.parallel.pp * flags.parallel.cp == 1
    {
        out.push(MORE_GPUS);
    }
    let optimizer = flags.training.optimizer.trim().to_ascii_lowercase();
    if ADAM.contains(&optimizer.as_str()) {
        out.push(Change::Optimizer8bit);
        out.push(Change::PagedOptimizer8bit);
    }
    if !flags.workload.optimizer_in_backward {
        out.push(Change::OptimizerInBackward);
    }
    match flags.training.precision.trim() {
        "fp32" | "amp-bf16" => {
            out.push(Change::MixedBf16);
            out.push(Change::PureBf16);
        }
        "mixed-bf16" => out.push(Change::PureBf16),
        _ => {}
    }
    if flags.finetune.lora_rank.is_none() {
        out.push(Change::Lora);
    }
    if flags.finetune.quantize.is_none() {
        out.push(Change::Qlora {
            with_lora: flags.finetune.lora_rank.is_some(),
        });
    }
    out
}

/// The GPU counts "more GPUs" may take above the run's own: each count up
/// to a node, then whole nodes.
pub fn gpu_counts(flags: &RunFlags) -> Vec<u64> {
    let from = flags.parallel.gpus.saturating_add(1);
    let per_node = flags.parallel.gpus_per_node.unwrap_or(GPUS_PER_NODE);
    (from..=MAX_GPUS)
        .filter(|g| *g <= per_node || g.is_multiple_of(per_node))
        .collect()
}
