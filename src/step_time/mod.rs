//! The time of one training step, priced per operation from the step's
//! shapes, the device's datasheet and efficiencies fitted to published
//! measured runs.
//!
//! The model is split so that a layout search can price many layouts
//! cheaply: [`Work::of`] walks the inventory once (the matmul parameters a
//! token meets, the layer's widths), and [`price`] is closed-form
//! arithmetic on that summary, a layout, a workload and the device's
//! [`Rates`]: no tensor walks.
//!
//! `step_time_s = compute_s + communication_s + bubble_s + offload_s`, where
//! * `compute_s` is one rank's busiest share of the step:
//!   - the linears' FLOPs (forward, both backward matmuls, recomputation)
//!     at the generation's achievable share of the dense peak (fp8's for
//!     an fp8 recipe), times the tile and wave quantization of the rank's
//!     GEMM shapes (`efficiency.rs`, `matmul.rs`);
//!   - attention by kernel, forward and backward apart (`attention.rs`);
//!   - memory-bound work (norms, activations, rotary, the loss) and the
//!     optimizer step as bytes over the memory bandwidth (`memory_bound.rs`);
//!   - uneven pipeline stages: the stage with ⌈L/p⌉ layers sets the pace;
//! * `communication_s` is the exposed part of the collectives
//!   (`communication.rs`): data-parallel traffic beyond the compute it
//!   overlaps plus the first all-gather and last reduce-scatter, ring
//!   attention's beyond attention, tensor-, pipeline- and expert-parallel
//!   traffic in full;
//! * `bubble_s` is 1F1B's idle share, `(p − 1) / (v · m)` of the pipelined
//!   compute (`bubble.rs`);
//! * `offload_s` is the host optimizer's transfers and CPU step
//!   (`offload.rs`).
//!
//! `--mfu` replaces the per-operation compute by FLOPs / (GPUs × peak ×
//! mfu), as before the model priced operations. Every figure's source is
//! in its file; the fit and its held-out error are in `fitted.rs`
//! ([`Uncertainty`]).

mod attention;
mod bubble;
mod communication;
mod efficiency;
mod fitted;
mod flops;
mod matmul;
mod memory_bound;
mod offload;
mod rates;

pub use communication::{Collective, Link};
pub use efficiency::{Figures, figures};
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
    /// The linears' seconds on the busiest rank.
    pub matmul_s: f64,
    /// Attention's seconds on the busiest rank.
    pub attention_s: f64,
    /// Memory-bound seconds (norms, activations, rotary, loss).
    pub memory_bound_s: f64,
    /// The optimizer step's seconds on the device.
    pub optimizer_s: f64,
    /// Host transfers and the CPU optimizer step of `--offload`, seconds.
    pub offload_s: f64,
    /// The achievable share of the dense peak a large matmul reaches.
    pub matmul_efficiency: f64,
    /// The share left after tile and wave quantization of this layout's GEMMs.
    pub quantization: f64,
    /// How good these figures are: the model's published validation error.
    pub uncertainty: Uncertainty,
}

/// The step-time model's error against published measured runs it was not
/// fitted on (`tests/fixtures/published/step_times.json`, `held-out`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Uncertainty {
    /// Mean |predicted − measured| / measured over the held-out cases.
    pub mean_abs_error: f64,
    /// The share of held-out cases within 15%.
    pub within_15_percent: f64,
    /// Held-out published cases.
    pub held_out_cases: u32,
    /// Mean |error| over the cases the fit read.
    pub fit_mean_abs_error: f64,
    /// Cases the fit read.
    pub fit_cases: u32,
}

/// The published validation error of the step-time model.
pub const UNCERTAINTY: Uncertainty = Uncertainty {
    mean_abs_error: fitted::HELD_OUT_MEAN_ABS_ERROR,
    within_15_percent: fitted::HELD_OUT_WITHIN_15_PERCENT,
    held_out_cases: fitted::HELD_OUT_CASES,
    fit_mean_abs_error: fitted::FIT_MEAN_ABS_ERROR,
    fit_cases: fitted::FIT_CASES,
};

/// Where a step time's compute figures come from, for reports.
pub const MODEL_SOURCE: &str = "priced per operation (matmul shapes, attention kernel, memory-bound bytes) at shares fitted to published runs";

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
    let m = micro_batches as f64;
    let flops = flops::per_step(work, layout, workload, micro_batches);
    let gpus = layout.gpus.max(1) as f64;
    let (matmul_peak, matmul_precision) = match (fp8, rates.fp8_flops_per_s) {
        (true, Some(peak)) => (peak as f64, "fp8"),
        _ => (rates.bf16_flops_per_s as f64, "bf16"),
    };
    let bf16_peak = rates.bf16_flops_per_s as f64;
    let (tp, pp, cp) = (
        layout.tensor.max(1),
        layout.pipeline.max(1),
        layout.context.max(1),
    );
    // The stage with ⌈L/p⌉ layers sets the pipeline's pace.
    let stage_layers = work.layers.div_ceil(pp).max(1);
    let uneven = if work.layers > 0 && pp > 1 {
        (stage_layers * pp) as f64 / work.layers as f64
    } else {
        1.0
    };
    let sequence = workload.seq_len / cp;
    let tokens = workload.micro_batch.saturating_mul(sequence);
    // Load-balanced context parallelism splits a causal sequence into 2·cp
    // chunks, a head and a tail per rank (torch's `context_parallel`,
    // Megatron/Transformer Engine's CP): each attention kernel runs on
    // chunks of S / (2·cp) tokens.
    let kernel_sequence = if cp > 1 {
        workload.seq_len / (2 * cp)
    } else {
        workload.seq_len
    };
    let figures = efficiency::figures(rates.generation);
    let matmul_efficiency = rates
        .matmul_efficiency_basis_points
        .map_or(figures.matmul, |points| f64::from(points) / 10_000.0);
    let quantization = matmul::linears(work, tokens, tp, rates.sms);
    let memory = rates.memory_bytes_per_s as f64;
    let per_rank = |total: f64| total / gpus * uneven;
    let (matmul_s, attention_s, memory_bound_s, optimizer_s, mfu, mfu_source) =
        match rates.mfu_basis_points {
            Some(points) => {
                let mfu = f64::from(points) / 10_000.0;
                // The linears at the matmul peak; attention (QK^T, PV) stays
                // in bf16 under every fp8 recipe (Transformer Engine and
                // torchao cast only the linears).
                let linears = (flops.linear + flops.recompute_linear) / (gpus * matmul_peak * mfu);
                let attention =
                    (flops.attention + flops.recompute_attention) / (gpus * bf16_peak * mfu);
                (linears, attention, 0.0, 0.0, mfu, "--mfu")
            }
            None => {
                let linears = per_rank(flops.linear + flops.recompute_linear)
                    / (matmul_peak * matmul_efficiency * quantization);
                let attended = attention::Attended {
                    forward_flops: per_rank(flops.attention / 3.0 + flops.recompute_attention),
                    backward_flops: per_rank(flops.attention * 2.0 / 3.0),
                    scores: (workload.micro_batch * work.heads / tp) as f64
                        * sequence as f64
                        * workload.seq_len as f64
                        * stage_layers as f64
                        * m,
                    sequence: kernel_sequence,
                    head_dim: work.head_dim,
                };
                let attention = attention::seconds(
                    &attended,
                    workload.attention,
                    &figures,
                    bf16_peak,
                    memory,
                    matmul_efficiency,
                );
                let bytes = (memory_bound::bytes_per_micro_batch(
                    work,
                    workload,
                    tokens as f64,
                    stage_layers as f64,
                    tp,
                    pp,
                ) + memory_bound::ring_merge_bytes(
                    work,
                    tokens as f64,
                    stage_layers as f64,
                    tp,
                    cp,
                )) * m;
                let on_device = layout.offload == crate::parallel::Offload::None;
                let optimizer_bytes = if on_device {
                    stepped_parameters(work, layout) * memory_bound::OPTIMIZER_BYTES_PER_PARAMETER
                } else {
                    0.0
                };
                let (memory_bound, optimizer) = if memory > 0.0 {
                    (bytes / memory, optimizer_bytes / memory)
                } else {
                    (0.0, 0.0)
                };
                let busy = linears + attention + memory_bound + optimizer;
                let achieved = per_rank(flops.executed()) / (busy * matmul_peak);
                (
                    linears,
                    attention,
                    memory_bound,
                    optimizer,
                    achieved,
                    MODEL_SOURCE,
                )
            }
        };
    let compute_s = matmul_s + attention_s + memory_bound_s + optimizer_s;
    let pipelined_s = compute_s - optimizer_s;
    let collectives = communication::per_step(work, layout, workload, micro_batches, rates);
    let communication_total_s = collectives.iter().fold(0.0, |sum, c| sum + c.seconds);
    let communication_s = exposed(&collectives, pipelined_s, attention_s, m);
    let bubble_s =
        bubble::fraction(layout.pipeline, rates.virtual_stages, micro_batches) * pipelined_s;
    let offload_s = match layout.offload {
        crate::parallel::Offload::None => 0.0,
        crate::parallel::Offload::Optimizer => offload::seconds(
            stepped_parameters(work, layout),
            0.0,
            rates.host_bytes_per_s,
            rates.gpus_per_node,
        ),
        crate::parallel::Offload::OptimizerAndParams => {
            let weights = local_weights(work, layout) / layout.data_and_context().max(1) as f64;
            offload::seconds(
                stepped_parameters(work, layout),
                2.0 * m * weights * HALF_BYTES,
                rates.host_bytes_per_s,
                rates.gpus_per_node,
            )
        }
    };
    let step_time_s = compute_s + communication_s + bubble_s + offload_s;
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
        matmul_s,
        attention_s,
        memory_bound_s,
        optimizer_s,
        offload_s,
        matmul_efficiency,
        quantization,
        uncertainty: UNCERTAINTY,
    }
}

/// Bytes of a bf16 weight.
const HALF_BYTES: f64 = 2.0;

/// The exposed communication: tensor-, pipeline- and expert-parallel
/// traffic in full; data-parallel traffic beyond the `pipelined` compute it
/// overlaps, plus one layer's all-gather (the first, which nothing
/// precedes) and one layer's reduce-scatter (the last, which nothing
/// follows); ring attention's exchanges beyond `attention`.
fn exposed(collectives: &[Collective], pipelined: f64, attention: f64, micro_batches: f64) -> f64 {
    let mut serial = 0.0;
    let mut data = 0.0;
    let mut edges = 0.0;
    let mut ring = 0.0;
    for c in collectives {
        match (c.overlapped, c.name) {
            (false, _) => serial += c.seconds,
            (true, "cp ring") => ring += c.seconds,
            (true, name) => {
                data += c.seconds;
                // One call's worth: each micro-batch's forward opens with
                // a gather no prefetch precedes; the last layer's
                // reduce-scatter follows all compute.
                let per_call = c.seconds / c.calls.max(1.0);
                match name {
                    "fsdp all-gather" => edges += per_call * micro_batches.max(1.0),
                    "fsdp reduce-scatter" => edges += per_call,
                    _ => {}
                }
            }
        }
    }
    serial + (data - edges - pipelined).max(0.0) + edges + (ring - attention).max(0.0)
}

/// The weights one rank holds of its stage, before data-parallel sharding.
fn local_weights(work: &Work, layout: &Parallelism) -> f64 {
    let dense = (work.parameters - work.expert_parameters.min(work.parameters)) as f64;
    let experts = work.expert_parameters as f64 / layout.expert.max(1) as f64;
    (dense + experts) / (layout.tensor.max(1) * layout.pipeline.max(1)) as f64
}

/// The trainable parameters one rank's optimizer steps: its stage's share,
/// over the data-parallel ranks when ZeRO shards the optimizer.
fn stepped_parameters(work: &Work, layout: &Parallelism) -> f64 {
    let trained = work.trainable as f64 / work.parameters.max(1) as f64;
    let shards = match layout.zero {
        crate::parallel::ZeroStage::None => 1,
        _ => layout.data_and_context().max(1),
    };
    local_weights(work, layout) * trained / shards as f64
}
