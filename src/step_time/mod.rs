//! The time of one training step: FLOPs over the device's peak, the bytes
//! each collective moves over the links they cross, and the pipeline bubble.
//!
//! The model is split so that a layout search can price many layouts
//! cheaply: [`Work::of`] walks the inventory once (the matmul parameters a
//! token meets, the attention shapes), and [`price`] is closed-form
//! arithmetic on that summary, a layout, a workload and the device's
//! [`Rates`].
//!
//! `step_time_s = compute_s + communication_s + bubble_s`, where
//! * `compute_s` is the step's executed FLOPs (recomputation included) over
//!   `gpus × peak × mfu`, every rank doing an equal share (`flops.rs`);
//! * `communication_s` is the exposed part of the collectives
//!   (`communication.rs`): data-parallel and context-parallel traffic
//!   hides behind compute, tensor-, pipeline- and expert-parallel traffic
//!   does not;
//! * `bubble_s` is 1F1B's idle share, `(p − 1) / (v · m)` of the compute,
//!   with m micro-batches per step and v virtual stages (`bubble.rs`).

mod bubble;
mod communication;
mod efficiency;
mod flops;
mod rates;

pub use communication::{Collective, Link};
pub use efficiency::{DEFAULT_SOURCE, KORTHIKANTI_2022, Measured, default_for};
pub use flops::{Flops, Work};
pub use rates::{Rates, Speed};

use serde::Serialize;

use crate::activation::Workload;
use crate::parallel::Parallelism;

/// The time of one optimizer step and what it is made of.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepTime {
    /// FLOPs the whole job executes per step, recomputation included (a
    /// float: counts pass 2^64 for large jobs).
    pub flops_per_step: f64,
    /// The model FLOPs of the step, without recomputation: what MFU counts.
    pub model_flops_per_step: f64,
    /// The FLOPs by part.
    pub flops: Flops,
    /// Tokens the whole job trains on per step: B × S × m × data-parallel ranks.
    pub tokens_per_step: u64,
    /// The peak each matmul is priced at, FLOP/s per GPU (fp8 for the
    /// linears of an fp8 recipe on a device that has it, bf16 otherwise).
    pub peak_flops_per_s: f64,
    /// `bf16` or `fp8`: which peak the linears run at.
    pub matmul_precision: &'static str,
    /// The assumed fraction of the peak the executed FLOPs run at (`--mfu`).
    pub mfu: f64,
    /// Where `mfu` comes from: `--mfu`, or the default's source.
    pub mfu_source: &'static str,
    /// Executed FLOPs / (gpus × peak × mfu), seconds.
    pub compute_s: f64,
    /// The communication left on the critical path, seconds.
    pub communication_s: f64,
    /// Every collective's time, overlapped or not, seconds.
    pub communication_total_s: f64,
    /// Each collective: bytes per GPU, the link, the time, whether it overlaps.
    pub collectives: Vec<Collective>,
    /// The pipeline's idle time, seconds.
    pub bubble_s: f64,
    /// compute + exposed communication + bubble, seconds.
    pub step_time_s: f64,
    /// tokens_per_step / step_time_s.
    pub tokens_per_s: f64,
    /// The model FLOPs utilization this step time implies:
    /// model_flops_per_step / (step_time_s × gpus × peak).
    pub achieved_mfu: f64,
    /// The device the rates describe.
    pub device: String,
}

/// Prices one step of `work` under `layout`, `workload` and
/// `grad_accumulation` micro-batches per step, on `rates`.
pub fn price(
    work: &Work,
    layout: &Parallelism,
    workload: &Workload,
    grad_accumulation: u64,
    fp8: bool,
    rates: &Rates,
) -> StepTime {
    let micro_batches = grad_accumulation.max(1);
    let flops = flops::per_step(work, layout, workload, micro_batches);
    let gpus = layout.gpus.max(1) as f64;
    let (mfu, mfu_source) = match rates.mfu_basis_points {
        Some(points) => (f64::from(points) / 10_000.0, "--mfu"),
        None => (
            efficiency::default_for(work.hidden),
            efficiency::DEFAULT_SOURCE,
        ),
    };
    let (matmul_peak, matmul_precision) = match (fp8, rates.fp8_flops_per_s) {
        (true, Some(peak)) => (peak as f64, "fp8"),
        _ => (rates.bf16_flops_per_s as f64, "bf16"),
    };
    let bf16_peak = rates.bf16_flops_per_s as f64;
    // The linears at the matmul peak; attention (QK^T, PV) stays in bf16
    // under every fp8 recipe (Transformer Engine and torchao cast only the
    // linears).
    let compute_s = ((flops.linear + flops.recompute_linear) / matmul_peak
        + (flops.attention + flops.recompute_attention) / bf16_peak)
        / (gpus * mfu);
    let collectives = communication::per_step(work, layout, workload, micro_batches, rates);
    // Folded from +0.0: an empty f64 `sum()` is -0.0.
    let total = |keep: fn(&Collective) -> bool| {
        collectives
            .iter()
            .filter(|c| keep(c))
            .fold(0.0, |sum, c| sum + c.seconds)
    };
    let communication_total_s = total(|_| true);
    let overlapped = total(|c| c.overlapped);
    let exposed = total(|c| !c.overlapped);
    let communication_s = exposed + (overlapped - compute_s).max(0.0);
    let bubble_s =
        bubble::fraction(layout.pipeline, rates.virtual_stages, micro_batches) * compute_s;
    let step_time_s = compute_s + communication_s + bubble_s;
    let tokens_per_step = flops.tokens;
    let model_flops = flops.model();
    StepTime {
        flops_per_step: flops.executed(),
        model_flops_per_step: model_flops,
        tokens_per_step,
        peak_flops_per_s: matmul_peak,
        matmul_precision,
        mfu,
        mfu_source,
        compute_s,
        communication_s,
        communication_total_s,
        collectives,
        bubble_s,
        step_time_s,
        tokens_per_s: tokens_per_step as f64 / step_time_s,
        achieved_mfu: model_flops / (step_time_s * gpus * matmul_peak),
        device: rates.device.clone(),
        flops,
    }
}
