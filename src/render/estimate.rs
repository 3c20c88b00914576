//! One estimate as a table, Markdown, CSV or JSON.

use super::{Format, Table, json};
use crate::estimate::Estimate;
use crate::units::{ByteUnit, Bytes, UnitSystem, format_ratio};

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
            out
        }
    }
}

fn heading(e: &Estimate) -> String {
    format!(
        "trainmem estimate: {} ({}), {}, {}",
        e.model.name, e.model.source, e.optimizer, e.precision.name
    )
}

/// The pieces with dtype, bytes per parameter and size; with `raw`, sizes are
/// plain integer bytes (for CSV).
fn breakdown(e: &Estimate, units: UnitSystem, raw: bool) -> Table {
    let unit = ByteUnit::for_column(e.memory.pieces().iter().map(|(_, b)| *b), units);
    let size = |b: Bytes| {
        if raw {
            b.0.to_string()
        } else {
            b.display_in(unit)
        }
    };
    let per_parameter = |b: Bytes| format_ratio(b.0, e.parameters.total.0);
    let precision = &e.precision;
    let master = precision
        .master_weights
        .map_or("-".to_string(), |d| d.to_string());
    let dtypes = [
        precision.weights.to_string(),
        master,
        precision.gradients.to_string(),
        precision.optimizer_dtype().to_string(),
        "-".to_string(),
    ];
    let mut table = Table::new(&[
        "piece",
        "dtype",
        ">bytes/param",
        if raw { ">bytes" } else { ">memory" },
    ]);
    for ((name, bytes), dtype) in e.memory.pieces().into_iter().zip(dtypes) {
        if name == "activations" && !e.activations_estimated {
            table.row([name, "-", "-", if raw { "" } else { "not estimated" }]);
        } else {
            table.row([name.to_string(), dtype, per_parameter(bytes), size(bytes)]);
        }
    }
    table.row([
        "total".to_string(),
        String::new(),
        per_parameter(e.memory.total),
        size(e.memory.total),
    ]);
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
            "gradient + optimizer slice: M = P × V × B = {} = {}",
            slice.equation(),
            slice.bytes.display(units)
        ),
        format!(
            "copies of the parameter vector: {} (weights {}, master {}, gradients {}, optimizer states {})",
            copies.total,
            copies.weights,
            copies.master_weights,
            copies.gradients,
            copies.optimizer_states
        ),
    ];
    if e.host.total > Bytes::ZERO {
        lines.push(format!(
            "host memory: {} (optimizer step counters)",
            e.host.total.display(units)
        ));
    }
    if let Some(capacity) = &e.capacity {
        lines.push(format!(
            "capacity: {}",
            verdict(e.memory.total, capacity.bytes, &capacity.label, units)
        ));
    }
    lines.extend(e.notes.iter().map(|n| format!("note: {n}")));
    lines
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
