//! One estimate as a table, Markdown, CSV or JSON.

use super::{Format, Table, escape, json};
use crate::architecture::Task;
use crate::estimate::Estimate;
use crate::parallel::{Offload, ZeroStage};
use crate::units::{ByteUnit, Bytes, UnitSystem, format_float, format_ratio};

/// The report of `trainmem estimate`.
pub fn estimate(e: &Estimate, format: Format, units: UnitSystem) -> String {
    match format {
        Format::Json => json(e),
        Format::Csv => breakdown(e, units, true).csv(),
        Format::Markdown => {
            let mut out = format!("## {}\n\n", heading(e));
            out += &breakdown(e, units, false).markdown();
            out += "\n";
            for line in summary_lines(e, units) {
                out += &format!("- {line}\n");
            }
            out
        }
        Format::Table => {
            let mut out = format!("{}\n\n", heading(e));
            out += &breakdown(e, units, false).text();
            out += "\n";
            for line in summary_lines(e, units) {
                out += &format!("  {line}\n");
            }
            super::wrap::free_text(&out)
        }
    }
}

fn heading(e: &Estimate) -> String {
    let mut heading = format!(
        "trainmem estimate: {} ({}{}), {}, {}",
        escape(&e.model.name),
        escape(&e.model.source),
        task_note(e.model.task),
        e.optimizer,
        e.precision.name
    );
    if let Some(layout) = layout(e) {
        heading += &format!(", {layout}");
    }
    heading
}

/// `, task masked-lm` for a model built for another task than a causal
/// LM's, whose head the heading then names; nothing for a causal LM.
pub(super) fn task_note(task: Option<Task>) -> String {
    match task {
        Some(task) if task != Task::CausalLm => format!(", task {task}"),
        _ => String::new(),
    }
}

/// `64 GPUs: data 64 × tensor 1 × pipeline 1, ZeRO-1 (deepspeed)`, or
/// nothing for one accelerator.
pub(super) fn layout(e: &Estimate) -> Option<String> {
    let p = &e.parallelism.layout;
    if p.gpus == 1 && p.zero == ZeroStage::None && p.offload == Offload::None {
        return None;
    }
    let zero = match p.zero {
        ZeroStage::None => "no sharding".to_string(),
        stage => format!(
            "ZeRO-{}{}",
            stage.name(),
            if p.hybrid { " within each node" } else { "" }
        ),
    };
    let offload = match p.offload {
        Offload::None => String::new(),
        Offload::Optimizer => ", optimizer offloaded".to_string(),
        Offload::OptimizerAndParams => ", optimizer and parameters offloaded".to_string(),
    };
    let experts = if p.expert > 1 {
        format!(" (experts over {})", p.expert)
    } else {
        String::new()
    };
    let context = if p.context > 1 {
        format!(" × context {}", p.context)
    } else {
        String::new()
    };
    Some(format!(
        "{} GPU{} on {} node{}: data {} × tensor {} × pipeline {}{context}{experts}, {zero}{offload} ({:?})",
        p.gpus,
        if p.gpus == 1 { "" } else { "s" },
        p.nodes,
        if p.nodes == 1 { "" } else { "s" },
        e.parallelism.data_parallel,
        p.tensor,
        p.pipeline,
        p.framework
    )
    .to_lowercase()
    .replace("zero-", "ZeRO-"))
}

/// The pieces with dtype, bytes per parameter and size per accelerator (and
/// on the host when anything lives there); with `raw`, sizes are plain
/// integer bytes (for CSV).
fn breakdown(e: &Estimate, units: UnitSystem, raw: bool) -> Table {
    // A host column when something was offloaded; torch's few-byte `step`
    // counters alone get a line of their own.
    let with_host = e.parallelism.layout.offload != Offload::None;
    let host_sizes = if with_host { e.host.total } else { Bytes::ZERO };
    let unit = ByteUnit::for_size(e.memory.peak.max(host_sizes), units);
    let size = |b: Bytes| {
        if raw {
            b.0.to_string()
        } else {
            b.display_in(unit)
        }
    };
    let per_parameter = |b: Bytes| format_ratio(b.0, e.parameters.total.0);
    let dtypes = [
        e.dtypes.weights.clone(),
        e.dtypes.master_weights.clone(),
        e.dtypes.gradients.clone(),
        e.dtypes.optimizer_states.clone(),
        if e.activations_estimated {
            e.precision.activations.to_string()
        } else {
            "-".to_string()
        },
    ];
    let mut headers = vec![
        "piece",
        "dtype",
        ">bytes/param",
        if raw { ">bytes" } else { ">memory" },
    ];
    if with_host {
        headers.push(if raw { ">host_bytes" } else { ">host" });
    }
    let mut table = Table::new(&headers);
    for (((name, bytes), (_, host)), dtype) in e
        .memory
        .pieces()
        .into_iter()
        .zip(e.host.pieces())
        .zip(dtypes)
    {
        let mut row = if name == "activations" && !e.activations_estimated {
            vec![
                name.to_string(),
                "-".into(),
                "-".into(),
                if raw {
                    String::new()
                } else {
                    "not estimated".into()
                },
            ]
        } else {
            vec![name.to_string(), dtype, per_parameter(bytes), size(bytes)]
        };
        if with_host {
            row.push(size(host));
        }
        table.row(row);
        if let (true, Some(activations)) = (name == "activations", &e.activations) {
            let parts = activations
                .layers
                .iter()
                .map(|p| (p.name.as_str(), p.bytes))
                .chain([
                    ("outside the layers", activations.outside_layers),
                    ("logits", activations.logits),
                    ("loss", activations.loss),
                ])
                .filter(|(_, bytes)| *bytes > Bytes::ZERO);
            for (part, bytes) in parts {
                table.row([
                    format!("  {part}"),
                    String::new(),
                    String::new(),
                    size(bytes),
                ]);
            }
        }
    }
    let mut total = vec![
        "total".to_string(),
        String::new(),
        per_parameter(e.memory.total),
        size(e.memory.total),
    ];
    if with_host {
        total.push(size(e.host.total));
    }
    table.row(total);
    if e.memory.peak != e.memory.total {
        table.row([
            "peak of a step".to_string(),
            String::new(),
            per_parameter(e.memory.peak),
            size(e.memory.peak),
        ]);
    }
    table
}

fn summary_lines(e: &Estimate, units: UnitSystem) -> Vec<String> {
    let slice = &e.gradient_optimizer_slice;
    let copies = &e.copies;
    let mut lines = vec![
        format!(
            "parameters: {} ({} trainable)",
            e.parameters.total.grouped(),
            e.parameters.trainable.grouped()
        ),
        format!(
            "gradient + optimizer slice: M = P × V × B = {} = {}{}{}",
            slice.equation(),
            Bytes(slice.bytes.0.saturating_add(slice.paged.0)).display(units),
            if slice.paged > Bytes::ZERO {
                format!(
                    ", {} of it paged states in unified memory, {} on the device",
                    slice.paged.display(units),
                    slice.bytes.display(units)
                )
            } else {
                String::new()
            },
            if layout(e).is_some() {
                " (whole model, one device)"
            } else {
                ""
            }
        ),
        format!(
            "copies of the parameter vector: {} (weights {}, master {}, gradients {}, optimizer states {})",
            format_float(copies.total),
            format_float(copies.weights),
            format_float(copies.master_weights),
            format_float(copies.gradients),
            format_float(copies.optimizer_states)
        ),
    ];
    if let Some(quantized) = &e.quantized {
        lines.push(format!(
            "quantized base: {} parameters in {} ({} bits/param, block scales and code tables included)",
            quantized.parameters.grouped(),
            quantized.bytes.display(units),
            crate::units::format_float(quantized.bits_per_parameter)
        ));
    }
    if layout(e).is_some() {
        let p = &e.parallelism;
        lines.push(format!(
            "memory is per accelerator: the most loaded one{} holds {} parameters before sharding",
            if p.layout.pipeline > 1 {
                format!(
                    " (pipeline stage {} of {})",
                    p.pipeline_stage, p.layout.pipeline
                )
            } else {
                String::new()
            },
            p.local_parameters.grouped()
        ));
    }
    let processes = (e.parallelism.layout.gpus / e.parallelism.layout.nodes).max(1);
    if let Some(offload) = e.activations.as_ref().and_then(|a| a.offload.as_ref()) {
        lines.push(format!(
            "activations offloaded to the host ({}): {} per node ({} per process), {} less on the device",
            offload.implementation,
            e.host.activations.display(units),
            offload.host_bytes.display(units),
            offload.device_bytes_saved.display(units),
        ));
    }
    if let Some(fp8) = e.activations.as_ref().and_then(|a| a.fp8.as_ref()) {
        lines.push(if fp8.saves_fp8_inputs {
            format!(
                "fp8 ({}, {} scaling): linears save fp8 inputs; cached fp8 weights {} and scaling state {} per accelerator",
                fp8.implementation,
                fp8.scaling.name(),
                fp8.weight_cache.display(units),
                fp8.scaling_state.display(units),
            )
        } else {
            format!(
                "fp8 ({}, {} scaling): linears save their bf16 inputs; the widest linear's fp8 casts are {} in forward, {} in backward",
                fp8.implementation,
                fp8.scaling.name(),
                fp8.forward_casts.display(units),
                fp8.backward_casts.display(units),
            )
        });
    }
    if e.parallelism.layout.offload != Offload::None {
        lines.push(format!("host memory is per node ({processes} processes)"));
    } else if e.host.total > e.host.activations {
        let what = if e.paged_states > Bytes::ZERO {
            "paged optimizer states and step counters"
        } else {
            "optimizer step counters"
        };
        lines.push(format!(
            "host memory: {} per node ({what})",
            Bytes(e.host.total.0 - e.host.activations.0).display(units)
        ));
    }
    lines.push(peak_line(e, units));
    lines.extend(below_the_total(e, units));
    if e.memory.reserved != e.memory.peak {
        lines.push(format!(
            "reserved by PyTorch's caching allocator (simulated, with the overhead): {}",
            e.memory.reserved.display(units)
        ));
    }
    let transients = &e.transients;
    if transients.optimizer_step > Bytes::ZERO || transients.parameter_gather > Bytes::ZERO {
        let mut parts = Vec::new();
        if transients.optimizer_step > Bytes::ZERO {
            parts.push(format!(
                "optimizer step {}",
                transients.optimizer_step.display(units)
            ));
        }
        if transients.parameter_gather > Bytes::ZERO {
            parts.push(format!(
                "gathered layer {}",
                transients.parameter_gather.display(units)
            ));
        }
        lines.push(format!(
            "step temporaries (not in the total): {}",
            parts.join(", ")
        ));
    }
    if let Some(capacity) = &e.capacity {
        lines.push(format!(
            "capacity: {}",
            verdict(e.memory.peak, capacity.bytes, &capacity.label, units)
        ));
        if e.fits == Some(false) && e.fits_allocated == Some(true) {
            lines.push(format!(
                "tight: the allocator reserves {}, {} over: the allocated peak fits, the reserve does not",
                e.memory.reserved.display(units),
                Bytes(e.memory.reserved.0.saturating_sub(capacity.bytes.0)).display(units)
            ));
        }
    }
    lines.extend(time_line(e));
    lines.extend(e.notes.iter().map(|n| format!("note: {}", escape(n))));
    lines
}

/// `step time: 0.65 s on 64 x h100-80gb at an assumed MFU of 44%: ...`, or
/// why the step is not timed; nothing when there is no step (no workload).
pub(crate) fn time_line(e: &Estimate) -> Option<String> {
    match (&e.time, &e.time_unavailable) {
        (Some(t), _) => Some(format!(
            "step time: {} on {} x {} (published error ±{:.0}%: mean |error| over {} held-out runs): compute {} ({}; {:.1}% of the {} peak), communication {} exposed of {}, bubble {}{}; {} tokens/s, {:.3e} FLOPs per step, model FLOPs utilization {:.1}%",
            seconds(t.step_time_s),
            e.parallelism.layout.gpus,
            escape(&t.device),
            t.uncertainty.mean_abs_error * 100.0,
            t.uncertainty.held_out_cases,
            seconds(t.compute_s),
            if t.mfu_source == "--mfu" {
                "at --mfu".to_string()
            } else {
                format!(
                    "matmuls {}, attention {}, memory-bound {}, optimizer {}",
                    seconds(t.matmul_s),
                    seconds(t.attention_s),
                    seconds(t.memory_bound_s),
                    seconds(t.optimizer_s)
                )
            },
            t.mfu * 100.0,
            t.matmul_precision,
            seconds(t.communication_s),
            seconds(t.communication_total_s),
            seconds(t.bubble_s),
            if t.offload_s > 0.0 {
                format!(", offload {}", seconds(t.offload_s))
            } else {
                String::new()
            },
            crate::units::Count(t.tokens_per_s.round() as u64),
            t.flops_per_step,
            t.achieved_mfu * 100.0,
        )),
        (None, Some(why)) if e.activations_estimated => {
            Some(format!("step time: not estimated: {}", escape(why)))
        }
        _ => None,
    }
}

/// Seconds with three significant figures: `0.651 s`, `12.3 s`, `1,234 s`.
pub(super) fn seconds(s: f64) -> String {
    if s >= 100.0 {
        format!("{} s", crate::units::Count(s.round() as u64))
    } else if s >= 10.0 {
        format!("{s:.1} s")
    } else if s >= 1.0 {
        format!("{s:.2} s")
    } else {
        format!("{s:.3} s")
    }
}

/// `peak: backward, layer 31: weights 16.06 GB, ...`: the moment of the
/// step timeline's maximum and what is allocated then.
fn peak_line(e: &Estimate, units: UnitSystem) -> String {
    let peak = &e.timeline.peak;
    let parts: Vec<String> = crate::timeline::Kind::ALL
        .iter()
        .filter(|kind| peak.by_kind.get(**kind) > Bytes::ZERO)
        .map(|kind| format!("{} {}", kind.name(), peak.by_kind.get(*kind).display(units)))
        .collect();
    format!(
        "peak of the step timeline: {}{}: {}",
        peak.phase.name(),
        peak.layer
            .map(|l| format!(", layer {l}"))
            .unwrap_or_default(),
        parts.join(", ")
    )
}

/// Why the step's peak can be below the table's total: the total adds each
/// steady piece at its largest, but the timeline never holds them all at
/// once (in backward, gradients are allocated layer by layer as the saved
/// activations are freed; the logits and the loss are gone by then). The
/// pieces held at the peak below their whole size are named.
fn below_the_total(e: &Estimate, units: UnitSystem) -> Option<String> {
    use crate::timeline::Kind;
    let m = &e.memory;
    if m.peak >= m.total {
        return None;
    }
    let at_peak = &e.timeline.peak.by_kind;
    let partial: Vec<String> = [
        (Kind::Weights, m.weights),
        (Kind::MasterWeights, m.master_weights),
        (Kind::Gradients, m.gradients),
        (Kind::OptimizerStates, m.optimizer_states),
        (Kind::Activations, m.activations),
    ]
    .into_iter()
    .filter(|(kind, whole)| at_peak.get(*kind) < *whole)
    .map(|(kind, whole)| {
        format!(
            "{} {} of {}",
            kind.name(),
            at_peak.get(kind).display(units),
            whole.display(units)
        )
    })
    .collect();
    Some(format!(
        "the peak is below the total: the total adds every piece at its largest, but they are never all live at once (at the peak: {})",
        partial.join(", ")
    ))
}

/// `80 GB: fits, 24 GB spare` or `80 GB: does not fit, 32 GB over`.
pub(crate) fn verdict(needed: Bytes, capacity: Bytes, label: &str, units: UnitSystem) -> String {
    if needed <= capacity {
        format!(
            "{label}: fits, {} spare",
            Bytes(capacity.0 - needed.0).display(units)
        )
    } else {
        format!(
            "{label}: does not fit, {} over",
            Bytes(needed.0 - capacity.0).display(units)
        )
    }
}
