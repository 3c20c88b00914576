//! The "Making it fit" answers of `trainmem techniques` as a table,
//! Markdown, CSV or JSON: the run as given, then each minimal set of
//! changes that fits, applied alone.

use super::{Format, Table, escape, json};
use crate::estimate::{Ladder, Rung};
use crate::units::{Bytes, UnitSystem};

/// Each row with the flags it adds, its peak, the change and the verdict.
pub fn techniques(ladder: &Ladder, format: Format, units: UnitSystem) -> String {
    let table = table(ladder, units);
    match format {
        Format::Json => json(ladder),
        Format::Csv => table.csv(),
        Format::Markdown => {
            let mut out = format!("## {}\n\n{}\n", heading(ladder), table.markdown());
            for line in summary(ladder, units) {
                out += &format!("- {line}\n");
            }
            out
        }
        Format::Table => {
            let mut out = format!("{}\n\n{}\n", heading(ladder), table.text());
            for line in summary(ladder, units) {
                out += &format!("  {line}\n");
            }
            super::wrap::free_text(&out)
        }
    }
}

fn heading(ladder: &Ladder) -> String {
    let against = ladder
        .capacity
        .as_ref()
        .map(|c| format!(" on {}", c.label))
        .unwrap_or_default();
    format!(
        "trainmem techniques: {}{against}, the smallest sets of changes that fit, each alone",
        escape(&ladder.model)
    )
}

fn table(ladder: &Ladder, units: UnitSystem) -> Table {
    let mut table = Table::new(&[
        ">rank", "changes", "adds", ">peak", ">change", "peak at", "verdict", "gives up",
    ]);
    for (step, rung) in ladder.rungs.iter().enumerate() {
        table.row([
            if step == 0 {
                String::new()
            } else {
                step.to_string()
            },
            rung.technique.clone(),
            rung.flags.join(" "),
            rung.peak.display(units),
            change(rung, step, units),
            super::timeline::moment(rung.peak_phase, rung.peak_layer),
            verdict(ladder, rung, units),
            rung.category.unwrap_or_default().to_string(),
        ]);
    }
    table
}

/// `-12.3 GB`, `+1.0 GB`, or empty for the first step.
fn change(rung: &Rung, step: usize, units: UnitSystem) -> String {
    if step == 0 {
        return String::new();
    }
    if rung.change == 0 {
        return "0".to_string();
    }
    let size = Bytes(u64::try_from(rung.change.unsigned_abs()).unwrap_or(u64::MAX)).display(units);
    if rung.change < 0 {
        format!("-{size}")
    } else {
        format!("+{size}")
    }
}

/// `fits (3.2 GB spare)`, `tight (reserved 1.0 GB over)` or `over by 12.0
/// GB`; empty without a capacity. Spare is what the allocator's reserve
/// leaves.
fn verdict(ladder: &Ladder, rung: &Rung, units: UnitSystem) -> String {
    let Some(capacity) = &ladder.capacity else {
        return String::new();
    };
    let over = |needed: Bytes| Bytes(needed.0.saturating_sub(capacity.bytes.0)).display(units);
    match (rung.fits, rung.fits_allocated) {
        (Some(true), _) => format!(
            "fits ({} spare)",
            Bytes(capacity.bytes.0.saturating_sub(rung.reserved.0)).display(units)
        ),
        (_, Some(true)) => format!("tight (reserved {} over)", over(rung.reserved)),
        _ => format!("over by {}", over(rung.peak)),
    }
}

fn summary(ladder: &Ladder, units: UnitSystem) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(capacity) = &ladder.capacity {
        let as_given = ladder.rungs.first();
        lines.push(match (as_given.and_then(|r| r.fits), ladder.first_fit()) {
            (Some(true), _) => format!("fits {} as given: nothing to change", capacity.label),
            (_, Some(rung)) => format!(
                "best: {} ({} peak, {} reserved on {}; gives up: {})",
                rung.technique,
                rung.peak.display(units),
                rung.reserved.display(units),
                capacity.label,
                rung.category.unwrap_or_default()
            ),
            (_, None) => format!(
                "no set of up to {} changes tried fits {}: a smaller micro-batch or sequence, or a smaller model",
                crate::advisor::MAX_CHANGES,
                capacity.label
            ),
        });
        for (rank, rung) in ladder.rungs.iter().enumerate().skip(1) {
            lines.push(format!("{rank}: costs {}", rung.costs.join("; ")));
        }
    }
    for skipped in &ladder.skipped {
        lines.push(format!(
            "skipped {} ({}): {}",
            skipped.technique,
            skipped.flags.join(" "),
            skipped.reason
        ));
    }
    if ladder.exhausted {
        lines.push(format!(
            "the search stopped at its budget of {} estimates: larger sets were not all tried",
            crate::advisor::MAX_ESTIMATES
        ));
    }
    lines.push(
        "each row applies alone to the run as given and is minimal (drop any one change and it does not fit); its peak is `trainmem estimate` with its flags, and `trainmem timeline` shows where it falls".to_string(),
    );
    lines
}
