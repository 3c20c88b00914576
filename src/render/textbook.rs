//! The textbook report: seed 001's worked problem in full, seed 000's slice.

use super::{Format, Table, json};
use crate::estimate::{Comparison, Estimate, Textbook};
use crate::model::Model;
use crate::optimizer::Location;
use crate::units::{
    ByteUnit, Bytes, Count, UnitSystem, format_float, format_percent, format_ratio,
};

/// One titled part of the report.
struct Section {
    title: String,
    table: Option<Table>,
    lines: Vec<String>,
}

/// The report of `trainmem compare`.
pub fn textbook(book: &Textbook, format: Format, units: UnitSystem) -> String {
    let comparison = &book.comparison;
    match format {
        Format::Json => {
            let estimates: Vec<&Estimate> =
                comparison.rows.iter().flat_map(|r| &r.estimates).collect();
            json(&estimates)
        }
        Format::Csv => grid(comparison, true, units).csv(),
        Format::Markdown => {
            let mut out = format!("# {}\n\n{}\n", title(), subtitle(comparison, units));
            for section in sections(book, units) {
                out += &format!("\n## {}\n\n", section.title);
                if let Some(table) = &section.table {
                    out += &table.markdown();
                    out += "\n";
                }
                for line in &section.lines {
                    out += &format!("{line}\n\n");
                }
            }
            out.trim_end().to_string() + "\n"
        }
        Format::Table => {
            let mut out = format!("{}\n{}\n", title(), subtitle(comparison, units));
            for section in sections(book, units) {
                out += &format!("\n{}\n", section.title);
                if let Some(table) = &section.table {
                    out += &table.text();
                }
                for line in &section.lines {
                    out += &format!("  {line}\n");
                }
            }
            // Not wrapped: `trainmem` alone prints this report as it always has.
            out
        }
    }
}

fn title() -> &'static str {
    "trainmem: the memory an optimizer costs before any activation is stored"
}

fn subtitle(comparison: &Comparison, units: UnitSystem) -> String {
    let capacity = comparison
        .capacity
        .as_ref()
        .map_or("no capacity".to_string(), |c| {
            format!("capacity {}", c.label)
        });
    let unit = match units {
        UnitSystem::Decimal => "GB = 10^9 bytes",
        UnitSystem::Binary => "GiB = 2^30 bytes",
    };
    format!(
        "precision {}, {capacity}; {unit}",
        comparison.precision.name
    )
}

fn sections(book: &Textbook, units: UnitSystem) -> Vec<Section> {
    let comparison = &book.comparison;
    let mut sections = vec![copies(book), priced(comparison, units)];
    if let Some(section) = fits(comparison, units) {
        sections.push(section);
    }
    sections.push(shares(comparison));
    if let Some(section) = swap(comparison, units) {
        sections.push(section);
    }
    sections.push(slice(book, units));
    sections.push(checks(comparison));
    sections
}

/// Step 1: the state each method keeps, in copies of the parameter vector.
fn copies(book: &Textbook) -> Section {
    let mut table = Table::new(&[
        "method",
        ">weights",
        ">gradient",
        ">state",
        "state tensors",
        ">copies",
    ]);
    let probe = Model::flat(Count(1));
    for row in &book.comparison.rows {
        let Some(e) = row.estimates.first() else {
            continue;
        };
        let names: Vec<String> = row
            .optimizer
            .states(&probe.tensors[0], e.precision.optimizer_dtype(), &e.options)
            .unwrap_or_default()
            .iter()
            .filter(|s| s.location == Location::Device)
            .map(|s| s.name.to_string())
            .collect();
        table.row([
            row.optimizer.title.to_string(),
            format_float(e.copies.weights + e.copies.master_weights),
            format_float(e.copies.gradients),
            format_float(e.copies.optimizer_states),
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            },
            format_float(e.copies.total),
        ]);
    }
    let mixed = &book.mixed_adam;
    let per_parameter = format_ratio(mixed.memory.total.0, mixed.parameters.total.0);
    Section {
        title: "Step 1 - the state each method keeps, in copies of the parameter vector"
            .to_string(),
        table: Some(table),
        lines: vec![format!(
            "Mixed precision, exactly: Adam under mixed-fp16 keeps {} values per parameter (fp16 weight and gradient, fp32 master copy, fp32 exp_avg and exp_avg_sq) = {} bytes; the often-quoted \"six\" holds only if gradients are also kept in fp32 (Megatron's main_grad: 18 bytes).",
            format_float(mixed.copies.total),
            per_parameter
        )],
    }
}

/// Step 2: every method priced at every size.
fn priced(comparison: &Comparison, units: UnitSystem) -> Section {
    let mut lines: Vec<String> = comparison
        .skipped
        .iter()
        .map(|s| format!("left out: {}: {}", s.optimizer, s.reason))
        .collect();
    for row in &comparison.rows {
        if row.estimates.iter().any(|e| e.paged_states > Bytes::ZERO) {
            lines.push(format!(
                "{}: the states of tensors of 1e5 values or more live in CUDA unified memory, paged to the host under pressure: left out of the accelerator's memory",
                row.optimizer.title
            ));
        }
    }
    Section {
        title: format!(
            "Step 2 - priced: weights + gradients + optimizer states, {}",
            comparison.precision.name
        ),
        table: Some(grid(comparison, false, units)),
        lines,
    }
}

/// Methods down, sizes across; with `raw`, integer bytes with a header per size.
fn grid(comparison: &Comparison, raw: bool, units: UnitSystem) -> Table {
    let unit = ByteUnit::for_column(
        comparison
            .rows
            .iter()
            .flat_map(|r| r.estimates.iter().map(|e| e.memory.total)),
        units,
    );
    let mut headers = vec![if raw {
        "optimizer".to_string()
    } else {
        "method".to_string()
    }];
    headers.extend(
        comparison
            .sizes
            .iter()
            .zip(&comparison.labels)
            .map(|(s, label)| {
                if raw {
                    format!(">bytes_at_{}", s.0)
                } else {
                    format!(">{label}")
                }
            }),
    );
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    let mut table = Table::new(&headers);
    for row in &comparison.rows {
        let mut cells = vec![if raw {
            row.optimizer.name.to_string()
        } else {
            row.optimizer.title.to_string()
        }];
        cells.extend(row.estimates.iter().map(|e| {
            if raw {
                e.memory.total.0.to_string()
            } else {
                e.memory.total.display_in(unit)
            }
        }));
        table.row(cells);
    }
    table
}

/// Step 3: where it stops being a preference.
fn fits(comparison: &Comparison, units: UnitSystem) -> Option<Section> {
    let capacity = comparison.capacity.as_ref()?;
    let largest = comparison.labels.last()?;
    let mut table = Table::new(&[
        "method",
        &format!(">at {largest}"),
        "fits?",
        ">largest model that fits",
    ]);
    for row in &comparison.rows {
        let e = row.estimates.last()?;
        let verdict = super::estimate::verdict(e.memory.total, capacity.bytes, "", units);
        let max = row.max_parameters.unwrap_or_default();
        table.row([
            row.optimizer.title.to_string(),
            e.memory.total.display(units),
            verdict.trim_start_matches(": ").to_string(),
            format!(
                "{} ({}){}",
                max.short(),
                max.grouped(),
                if row.optimizer.flat_assumption.is_some() {
                    " as one flat vector"
                } else {
                    ""
                }
            ),
        ]);
    }
    Some(Section {
        title: format!(
            "Step 3 - where it stops being a preference: one {} accelerator",
            capacity.label
        ),
        table: Some(table),
        lines: thresholds(comparison),
    })
}

/// The intervals between thresholds, and which methods fit in each.
fn thresholds(comparison: &Comparison) -> Vec<String> {
    let limits: Vec<(Count, &str)> = comparison
        .rows
        .iter()
        .filter_map(|r| r.max_parameters.map(|m| (m, r.optimizer.title)))
        .collect();
    let mut bounds: Vec<Count> = limits.iter().map(|(m, _)| *m).collect();
    bounds.sort();
    bounds.dedup();
    let mut lines = Vec::new();
    let mut lower: Option<Count> = None;
    for bound in &bounds {
        let fitting: Vec<&str> = limits
            .iter()
            .filter(|(m, _)| m >= bound)
            .map(|(_, t)| *t)
            .collect();
        let range = match lower {
            None => format!("Up to {}", bound.short()),
            Some(low) => format!("From {} to {}", low.short(), bound.short()),
        };
        let who = if fitting.len() == limits.len() {
            "every method fits: the choice is a convergence question.".to_string()
        } else if fitting.len() == 1 {
            format!("only {} fits: the choice is a hardware one.", fitting[0])
        } else {
            format!(
                "only {} fit: the choice is a hardware one.",
                fitting.join(", ")
            )
        };
        lines.push(format!("{range}: {who}"));
        lower = Some(*bound);
    }
    if let Some(top) = lower {
        lines.push(format!(
            "Above {}: nothing fits, before a single activation is stored; gradient checkpointing cannot help, because this is not activation memory.",
            top.short()
        ));
    }
    lines
}

/// Step 4: the optimizer state as a share of the total.
fn shares(comparison: &Comparison) -> Section {
    let mut table = Table::new(&[
        "method",
        ">optimizer state share",
        ">gradient + state share",
    ]);
    for row in &comparison.rows {
        let Some(e) = row.estimates.last() else {
            continue;
        };
        let total = e.memory.total.0;
        table.row([
            row.optimizer.title.to_string(),
            format_percent(e.memory.optimizer_states.0, total),
            format_percent(e.gradient_optimizer_slice.bytes.0, total),
        ]);
    }
    Section {
        title: "Step 4 - the share: optimizer state as a part of the total".to_string(),
        table: Some(table),
        lines: Vec::new(),
    }
}

/// Step 5: what the swap saves.
fn swap(comparison: &Comparison, units: UnitSystem) -> Option<Section> {
    let swap = comparison.swap.as_ref()?;
    Some(Section {
        title: format!(
            "Step 5 - the swap at {}: {} -> {}",
            swap.parameters.short(),
            swap.from.title,
            swap.to.title
        ),
        table: None,
        lines: vec![format!(
            "saves {}: {} of {}'s {} total, {} of its {} gradient + optimizer slice",
            swap.saved.display(units),
            format_percent(swap.saved.0, swap.from_total.0),
            swap.from.title,
            swap.from_total.display(units),
            format_percent(swap.saved.0, swap.from_slice.0),
            swap.from_slice.display(units),
        )],
    })
}

/// Seed 000: M = P x V x B at its own sizes and bytes per value.
fn slice(book: &Textbook, units: UnitSystem) -> Section {
    let mut table = Table::new(&["example", "M = P × V × B", ">M"]);
    for e in &book.slice_examples {
        table.row([
            format!(
                "{} at {} ({})",
                e.optimizer,
                e.parameters.total.short(),
                e.precision.name
            ),
            e.gradient_optimizer_slice.equation(),
            e.gradient_optimizer_slice.bytes.display(units),
        ]);
    }
    let mut lines = Vec::new();
    if let (Some(first), Some(last)) = (book.slice_examples.first(), book.slice_examples.last())
        && book.slice_examples.len() > 1
    {
        lines.push(format!(
            "ratio {} / {} = {}, the ratio of the parameter counts {} / {} = {}",
            first.gradient_optimizer_slice.bytes.display(units),
            last.gradient_optimizer_slice.bytes.display(units),
            format_ratio(
                first.gradient_optimizer_slice.bytes.0,
                last.gradient_optimizer_slice.bytes.0
            ),
            first.parameters.total.short(),
            last.parameters.total.short(),
            format_ratio(first.parameters.total.0, last.parameters.total.0),
        ));
    }
    let values: Vec<String> = book
        .comparison
        .rows
        .iter()
        .filter_map(|r| {
            r.estimates.first().map(|e| {
                format!(
                    "{} {}",
                    r.optimizer.title,
                    e.gradient_optimizer_slice.values_text()
                )
            })
        })
        .collect();
    lines.push(format!(
        "V (gradient + optimizer values per parameter): {}",
        values.join(", ")
    ));
    Section {
        title: "The gradient-and-optimizer slice: M = P × V × B".to_string(),
        table: Some(table),
        lines,
    }
}

/// The seed's sanity checks, computed.
fn checks(comparison: &Comparison) -> Section {
    Section {
        title: "Checks".to_string(),
        table: None,
        lines: comparison
            .checks
            .iter()
            .map(|c| {
                format!(
                    "[{}] {}: {}",
                    if c.holds { "holds" } else { "FAILS" },
                    c.claim,
                    c.detail
                )
            })
            .collect(),
    }
}
