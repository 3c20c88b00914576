//! The answer of `trainmem plan`: the layouts that fit, fastest first, each
//! with the `estimate` command that reproduces it.

use serde::Serialize;

use super::estimate::seconds;
use super::{Format, Table, escape, json};
use crate::estimate::Capacity;
use crate::plan::{Outcome, Row};
use crate::units::{Bytes, Count, UnitSystem, format_percent};

/// What `plan` searched and found (the engine's [`crate::plan::Found`]).
pub use crate::plan::Found as PlanReport;

#[derive(Serialize)]
struct JsonPlan<'a> {
    model: &'a str,
    gpus: u64,
    nodes: u64,
    capacity: &'a Capacity,
    headroom: String,
    usable: Bytes,
    candidates: u64,
    priced: u64,
    refused: u64,
    /// The work done, (structures + layouts priced) x layers: at most
    /// `crate::plan::WORK_BUDGET`.
    layer_pricings: u64,
    kept: usize,
    /// How `fits` is judged: the shown rows on reserved memory, the rest
    /// on the allocated peak with the headroom.
    fits_judged_on: &'static str,
    /// Rows confirmed on reserved memory (the table's, up to `--top`).
    shown: usize,
    /// Layouts dropped because their allocated peak fits and their
    /// reserved memory does not (met on the way to the shown rows).
    tight: u64,
    /// Caching-allocator simulations run to confirm the shown rows.
    reserve_simulations: u64,
    time_unavailable: Option<&'a str>,
    base_flags: &'a [String],
    notes: &'a [String],
    layouts: Vec<JsonLayout>,
}

#[derive(Serialize)]
struct JsonLayout {
    flags: Vec<String>,
    command: String,
    peak: Bytes,
    fits: bool,
    /// The allocated peak within the capacity less the headroom: true for
    /// every layout listed.
    fits_allocated: bool,
    /// `estimate`'s `memory.reserved` (the overhead included), simulated
    /// for the shown rows; null for the others.
    reserved: Option<Bytes>,
    /// Whether `reserved` fits the capacity (`estimate`'s `fits`); null
    /// where it was not simulated.
    fits_reserved: Option<bool>,
    /// Whether the table shows this row.
    shown: bool,
    spare: Bytes,
    step_time_s: Option<f64>,
    tokens_per_s: Option<f64>,
    layout: JsonShape,
    time: Option<JsonTime>,
}

/// The step time's breakdown (`estimate --format json` gives every collective too).
#[derive(Serialize)]
struct JsonTime {
    flops_per_step: f64,
    tokens_per_step: u64,
    compute_s: f64,
    communication_s: f64,
    bubble_s: f64,
    step_time_s: f64,
    tokens_per_s: f64,
    mfu: f64,
    achieved_mfu: f64,
    matmul_s: f64,
    attention_s: f64,
    memory_bound_s: f64,
    optimizer_s: f64,
    offload_s: f64,
    uncertainty: crate::step_time::Uncertainty,
    /// Whether this layout's step time is within the model's stated
    /// uncertainty of the fastest shown: the two are a tie, not a ranking.
    ties_best: bool,
}

#[derive(Serialize)]
struct JsonShape {
    framework: crate::parallel::Framework,
    zero: crate::parallel::ZeroStage,
    hybrid: bool,
    data_parallel: u64,
    tp: u64,
    pp: u64,
    cp: u64,
    ep: u64,
    sequence_parallel: bool,
    offload: crate::parallel::Offload,
    recompute: &'static str,
    recompute_every: u64,
    loss: String,
    offload_activations: bool,
    micro_batch: u64,
    grad_accumulation: u64,
}

/// `trainmem estimate <the user's flags> <the layout's>`, quoted for a shell.
fn command(base: &[String], row: &Row) -> String {
    let mut words = vec!["trainmem".to_string(), "estimate".to_string()];
    for word in base.iter().chain(&row.flags()) {
        if word.is_empty()
            || word.contains(|c: char| c.is_whitespace() || "'\"$`\\|&;<>()*?".contains(c))
        {
            words.push(format!("'{}'", word.replace('\'', r"'\''")));
        } else {
            words.push(word.clone());
        }
    }
    words.join(" ")
}

/// The sharding in words: `ZeRO-3`, `FSDP2 full-shard`, `Megatron dist-opt`.
fn sharding(row: &Row) -> String {
    use crate::parallel::{Framework, ZeroStage};
    let s = row.layout.sharding;
    let strategy = s.zero.fsdp_name(s.hybrid);
    match s.framework {
        Framework::DeepSpeed => format!("ZeRO-{}", s.zero.name()),
        Framework::Megatron if s.zero == ZeroStage::None => "Megatron".to_string(),
        Framework::Megatron => "Megatron dist-opt".to_string(),
        Framework::Fsdp2 => format!("FSDP2 {strategy}"),
        Framework::Fsdp1 => format!("FSDP1 {strategy}"),
    }
}

/// The first `top` rows worth showing: the search's (`Outcome::shown`),
/// each confirmed on reserved memory; a row whose only difference from a
/// row already shown is a loss kernel or activation offloading that does
/// not lower its peak is left out (JSON keeps every layout).
fn shown(outcome: &Outcome, top: usize) -> Vec<&Row> {
    outcome
        .shown
        .iter()
        .filter_map(|&index| outcome.kept.get(index))
        .take(top)
        .collect()
}

/// What JSON's `fits_judged_on` says.
const FITS_JUDGED_ON: &str = "every layout listed has its allocated peak (memory.peak) within the capacity less the headroom; the shown rows (\"shown\": true, the table's --top) also have their reserved memory (memory.reserved, the caching allocator simulated) within the capacity, which is estimate's fits; layouts whose reserve does not fit are dropped and counted in tight";

/// Renders the plan; `top` rows in the table, markdown and csv.
pub fn plan(report: &PlanReport, format: Format, units: UnitSystem, top: usize) -> String {
    let outcome = &report.outcome;
    let headroom = format_percent(report.headroom_basis_points, 10_000);
    let best = outcome.kept.first().and_then(|row| row.time.as_ref());
    if format == Format::Json {
        return json(&JsonPlan {
            model: &report.model,
            gpus: report.gpus,
            nodes: report.nodes,
            capacity: &report.capacity,
            headroom,
            usable: report.usable,
            candidates: outcome.candidates,
            priced: outcome.priced,
            refused: outcome.refused,
            layer_pricings: outcome.work.layer_pricings(),
            kept: outcome.kept.len(),
            fits_judged_on: FITS_JUDGED_ON,
            shown: outcome.shown.len(),
            tight: outcome.tight,
            reserve_simulations: outcome.reserve_simulations,
            time_unavailable: outcome.time_unavailable.as_deref(),
            base_flags: &report.base_flags,
            notes: &report.notes,
            layouts: outcome
                .kept
                .iter()
                .enumerate()
                .map(|(index, row)| JsonLayout {
                    flags: row.flags(),
                    command: command(&report.base_flags, row),
                    peak: row.peak,
                    fits: true,
                    fits_allocated: true,
                    reserved: row.reserved,
                    fits_reserved: row.reserved.map(|r| {
                        r.0.saturating_add(crate::estimate::RESERVED_MARGIN.0)
                            <= report.capacity.bytes.0
                    }),
                    shown: outcome.shown.contains(&index),
                    spare: Bytes(report.capacity.bytes.0.saturating_sub(row.peak.0)),
                    step_time_s: row.time.as_ref().map(|t| t.step_time_s),
                    tokens_per_s: row.time.as_ref().map(|t| t.tokens_per_s),
                    layout: JsonShape {
                        framework: row.layout.sharding.framework,
                        zero: row.layout.sharding.zero,
                        hybrid: row.layout.sharding.hybrid,
                        data_parallel: report.gpus
                            / (row.layout.tensor * row.layout.pipeline * row.layout.context),
                        tp: row.layout.tensor,
                        pp: row.layout.pipeline,
                        cp: row.layout.context,
                        ep: row.layout.expert,
                        sequence_parallel: row.layout.sequence_parallel,
                        offload: row.layout.offload,
                        recompute: row.layout.recompute.name(),
                        recompute_every: row.layout.recompute_every,
                        loss: row.layout.loss.name(),
                        offload_activations: row.layout.offload_activations,
                        micro_batch: row.layout.micro_batch,
                        grad_accumulation: row.layout.accumulation,
                    },
                    time: row.time.as_ref().map(|t| JsonTime {
                        flops_per_step: t.flops_per_step,
                        tokens_per_step: t.tokens_per_step,
                        compute_s: t.compute_s,
                        communication_s: t.communication_s,
                        bubble_s: t.bubble_s,
                        step_time_s: t.step_time_s,
                        tokens_per_s: t.tokens_per_s,
                        mfu: t.mfu,
                        achieved_mfu: t.achieved_mfu,
                        matmul_s: t.matmul_s,
                        attention_s: t.attention_s,
                        memory_bound_s: t.memory_bound_s,
                        optimizer_s: t.optimizer_s,
                        offload_s: t.offload_s,
                        uncertainty: t.uncertainty,
                        ties_best: ties(best, t),
                    }),
                })
                .collect(),
        });
    }
    let mut table = Table::new(&[
        ">#",
        "sharding",
        ">dp",
        ">tp",
        ">pp",
        ">cp",
        ">ep",
        "sp",
        "recompute",
        "loss",
        ">micro-batch",
        ">accum",
        ">peak",
        ">spare",
        ">step time",
        ">tokens/s",
        ">MFU",
    ]);
    let shown = shown(outcome, top);
    for (index, row) in shown.iter().enumerate() {
        let l = &row.layout;
        let mut name = sharding(row);
        match l.offload {
            crate::parallel::Offload::None => {}
            crate::parallel::Offload::Optimizer => name.push_str(" +offload optimizer"),
            crate::parallel::Offload::OptimizerAndParams => name.push_str(" +offload all"),
        }
        if l.offload_activations {
            name.push_str(" +offload activations");
        }
        table.row([
            (index + 1).to_string(),
            name,
            (report.gpus / (l.tensor * l.pipeline * l.context)).to_string(),
            l.tensor.to_string(),
            l.pipeline.to_string(),
            l.context.to_string(),
            l.expert.to_string(),
            if l.sequence_parallel { "yes" } else { "-" }.to_string(),
            if l.recompute_every > 1 {
                format!("{} /{}", l.recompute.name(), l.recompute_every)
            } else {
                l.recompute.name().to_string()
            },
            l.loss.name(),
            l.micro_batch.to_string(),
            l.accumulation.to_string(),
            row.peak.display(units),
            Bytes(report.capacity.bytes.0.saturating_sub(row.peak.0)).display(units),
            row.time
                .as_ref()
                .map_or("-".to_string(), |t| seconds(t.step_time_s)),
            row.time.as_ref().map_or("-".to_string(), |t| {
                Count(t.tokens_per_s.round() as u64).grouped()
            }),
            row.time.as_ref().map_or("-".to_string(), |t| {
                format!("{:.1}%", t.achieved_mfu * 100.0)
            }),
        ]);
    }
    match format {
        Format::Csv => {
            let mut csv = Table::new(&[
                "rank",
                "command",
                "peak_bytes",
                "step_time_s",
                "tokens_per_s",
            ]);
            for (index, row) in shown.iter().enumerate() {
                csv.row([
                    (index + 1).to_string(),
                    command(&report.base_flags, row),
                    row.peak.0.to_string(),
                    row.time
                        .as_ref()
                        .map_or(String::new(), |t| t.step_time_s.to_string()),
                    row.time
                        .as_ref()
                        .map_or(String::new(), |t| t.tokens_per_s.to_string()),
                ]);
            }
            csv.csv()
        }
        Format::Markdown => {
            let mut out = table.markdown();
            out.push('\n');
            for (index, row) in shown.iter().enumerate() {
                out.push_str(&format!(
                    "{}. `{}`\n",
                    index + 1,
                    command(&report.base_flags, row)
                ));
            }
            out
        }
        _ => {
            let mut out = format!(
                "trainmem plan: {} on {} x {} ({} node{}), peak at most {} ({} headroom)\n{} of {} layouts fit ({} priced, the rest pruned exactly); {} first\n\n",
                escape(&report.model),
                report.gpus,
                escape(&report.capacity.label),
                report.nodes,
                if report.nodes == 1 { "" } else { "s" },
                report.usable.display(units),
                headroom,
                Count(outcome.kept.len() as u64).grouped(),
                Count(outcome.candidates).grouped(),
                Count(outcome.priced).grouped(),
                if outcome.time_unavailable.is_some() {
                    "lowest peak"
                } else {
                    "fastest"
                },
            );
            if shown.is_empty() {
                out.push_str(
                    "  no layout fits: allow more axes (--allow all), recompute, or more GPUs\n",
                );
            } else {
                out.push_str(&table.text());
                out.push_str("\nEach row is exactly:\n");
                for (index, row) in shown.iter().enumerate() {
                    out.push_str(&format!(
                        "  {}. {}\n",
                        index + 1,
                        escape(&command(&report.base_flags, row))
                    ));
                }
            }
            if let Some(why) = &outcome.time_unavailable {
                out.push_str(&format!(
                    "\n  step time: not estimated ({}): layouts ranked by their peak\n",
                    escape(why)
                ));
            }
            if let Some(time) = shown.first().and_then(|row| row.time.as_ref()) {
                out.push_str(&format!(
                    "\n  step time: {} for {} tokens (published error ±{:.0}%, mean |error| over {} held-out runs): compute {} (matmuls {}, attention {}, memory-bound {}, optimizer {}), exposed communication {}, bubble {}, offload {}; communication and the pipeline bubble as `trainmem estimate` prices them\n",
                    seconds(time.step_time_s),
                    Count(time.tokens_per_step).grouped(),
                    time.uncertainty.mean_abs_error * 100.0,
                    time.uncertainty.held_out_cases,
                    seconds(time.compute_s),
                    seconds(time.matmul_s),
                    seconds(time.attention_s),
                    seconds(time.memory_bound_s),
                    seconds(time.optimizer_s),
                    seconds(time.communication_s),
                    seconds(time.bubble_s),
                    seconds(time.offload_s),
                ));
                let tied = shown
                    .iter()
                    .skip(1)
                    .take_while(|row| row.time.as_ref().is_some_and(|t| ties(best, t)))
                    .count();
                if tied > 0 {
                    out.push_str(&format!(
                        "  rows 1-{} are within the model's ±{:.0}% of each other: a tie, not a ranking\n",
                        tied + 1,
                        time.uncertainty.mean_abs_error * 100.0,
                    ));
                }
            }
            for note in &report.notes {
                out.push_str(&format!("  note: {}\n", escape(note)));
            }
            super::wrap::free_text(&out)
        }
    }
}

/// Whether `time` is within the step-time model's published mean |error|
/// of the fastest layout's: closer than the model can tell apart.
fn ties(best: Option<&crate::step_time::StepTime>, time: &crate::step_time::StepTime) -> bool {
    best.is_some_and(|best| {
        time.step_time_s <= best.step_time_s * (1.0 + time.uncertainty.mean_abs_error)
    })
}
