//! The step timeline as a table, Markdown, CSV or JSON.

use serde::Serialize;

use super::{Format, Table, escape, json};
use crate::estimate::{Capacity, Estimate};
use crate::timeline::{Event, Kind, Peak, Phase, PhaseSummary, Timeline};
use crate::units::{Bytes, UnitSystem};

/// `backward, layer 31` or `optimizer`.
pub fn peak_moment(peak: &Peak) -> String {
    moment(peak.phase, peak.layer)
}

/// `backward, layer 31`: a phase and, inside the layers, the layer.
pub(super) fn moment(phase: Phase, layer: Option<u64>) -> String {
    format!(
        "{}{}",
        phase.name(),
        layer.map(|l| format!(", layer {l}")).unwrap_or_default()
    )
}

/// What `trainmem timeline --format json` prints.
#[derive(Serialize)]
struct TimelineReport<'a> {
    model: &'a str,
    events: &'a [Event],
    peak: &'a Peak,
    phases: &'a [PhaseSummary],
    load_peak: Bytes,
    reserved: Bytes,
    memory: &'a crate::estimate::Memory,
    /// Host memory per node (offloaded activations, optimizer step counters).
    host: &'a crate::estimate::Memory,
    capacity: &'a Option<Capacity>,
    fits: Option<bool>,
    /// The time of the step, as in `estimate`.
    time: &'a Option<crate::step_time::StepTime>,
    #[serde(skip_serializing_if = "Option::is_none")]
    time_unavailable: Option<&'a String>,
    notes: &'a [String],
}

/// The report of `trainmem timeline`: the phases with their running
/// totals, the peak and what it is made of; every event with `events`
/// (always in JSON and CSV).
pub fn timeline(
    e: &Estimate,
    timeline: &Timeline,
    format: Format,
    units: UnitSystem,
    events: bool,
) -> String {
    match format {
        Format::Json => json(&TimelineReport {
            model: &e.model.name,
            events: &timeline.events,
            peak: &timeline.peak,
            phases: &timeline.phases,
            load_peak: timeline.load_peak,
            reserved: timeline.reserved,
            memory: &e.memory,
            host: &e.host,
            capacity: &e.capacity,
            fits: e.fits,
            time: &e.time,
            time_unavailable: e.time_unavailable.as_ref(),
            notes: &e.notes,
        }),
        Format::Csv => event_table(timeline, units).csv(),
        Format::Markdown => {
            let mut out = format!("## {}\n\n", heading(e));
            out += &phase_table(timeline, units).markdown();
            if events {
                out += "\n";
                out += &event_table(timeline, units).markdown();
            }
            out += "\n";
            for line in summary(e, timeline, units) {
                out += &format!("- {line}\n");
            }
            out
        }
        Format::Table => {
            let mut out = format!("{}\n\n", heading(e));
            out += &phase_table(timeline, units).text();
            if events {
                out += "\n";
                out += &event_table(timeline, units).text();
            }
            out += "\n";
            for line in summary(e, timeline, units) {
                out += &format!("  {line}\n");
            }
            super::wrap::free_text(&out)
        }
    }
}

fn heading(e: &Estimate) -> String {
    let mut heading = format!(
        "trainmem timeline: {} ({}), {}, {}",
        escape(&e.model.name),
        escape(&e.model.source),
        e.optimizer,
        e.precision.name
    );
    if let Some(layout) = super::estimate::layout(e) {
        heading += &format!(", {layout}");
    }
    heading
}

fn phase_table(timeline: &Timeline, units: UnitSystem) -> Table {
    let mut table = Table::new(&["phase", ">start", ">peak", ">end"]);
    for phase in &timeline.phases {
        table.row([
            phase.phase.name().to_string(),
            phase.start.display(units),
            phase.peak.display(units),
            phase.end.display(units),
        ]);
    }
    table
}

fn event_table(timeline: &Timeline, units: UnitSystem) -> Table {
    let mut table = Table::new(&["phase", ">layer", "kind", "tensor", ">bytes", ">total"]);
    for event in &timeline.events {
        let size = Bytes(event.bytes.unsigned_abs()).display(units);
        table.row([
            event.phase.name().to_string(),
            event.layer.map(|l| l.to_string()).unwrap_or_default(),
            event.kind.name().to_string(),
            event.tensor.to_string(),
            if event.bytes < 0 {
                format!("-{size}")
            } else {
                format!("+{size}")
            },
            event.total.display(units),
        ]);
    }
    table
}

fn summary(e: &Estimate, timeline: &Timeline, units: UnitSystem) -> Vec<String> {
    let peak = &timeline.peak;
    let parts: Vec<String> = Kind::ALL
        .iter()
        .filter(|kind| peak.by_kind.get(**kind) > Bytes::ZERO)
        .map(|kind| format!("{} {}", kind.name(), peak.by_kind.get(*kind).display(units)))
        .collect();
    let mut lines = vec![
        format!(
            "peak {} in {}: {}",
            peak.bytes.display(units),
            peak_moment(peak),
            parts.join(", ")
        ),
        format!(
            "{} events; loading peaks at {}; reserved by the caching allocator (simulated, without the overhead): {}",
            timeline.events.len(),
            timeline.load_peak.display(units),
            timeline.reserved.display(units)
        ),
    ];
    if e.host.activations > Bytes::ZERO {
        lines.push(format!(
            "host memory: {} per node of offloaded activations (outside this timeline, which is the device's)",
            e.host.activations.display(units)
        ));
    }
    if let Some(capacity) = &e.capacity {
        lines.push(format!(
            "capacity: {}",
            super::estimate::verdict(peak.bytes, capacity.bytes, &capacity.label, units)
        ));
    }
    lines.extend(super::estimate::time_line(e));
    lines.extend(e.notes.iter().map(|n| format!("note: {}", escape(n))));
    lines
}
