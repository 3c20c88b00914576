//! The "Making it fit" ladder of `trainmem techniques` as a table,
//! Markdown, CSV or JSON.

use super::{Format, Table, escape, json};
use crate::estimate::{Ladder, Rung};
use crate::units::{Bytes, UnitSystem};

/// Each step with the flags it adds, its peak, the change and the verdict.
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
        "trainmem techniques: {}{against}, one memory technique more at each step",
        escape(&ladder.model)
    )
}

fn table(ladder: &Ladder, units: UnitSystem) -> Table {
    let mut table = Table::new(&[
        ">step",
        "technique",
        "adds",
        ">peak",
        ">change",
        "peak at",
        "verdict",
    ]);
    for (step, rung) in ladder.rungs.iter().enumerate() {
        table.row([
            step.to_string(),
            rung.technique.to_string(),
            rung.flags.join(" "),
            rung.peak.display(units),
            change(rung, step, units),
            super::timeline::moment(rung.peak_phase, rung.peak_layer),
            verdict(ladder, rung, units),
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

/// `fits (3.2 GB spare)` or `over by 12.0 GB`; empty without a capacity.
fn verdict(ladder: &Ladder, rung: &Rung, units: UnitSystem) -> String {
    let Some(capacity) = &ladder.capacity else {
        return String::new();
    };
    if rung.peak <= capacity.bytes {
        format!(
            "fits ({} spare)",
            Bytes(capacity.bytes.0 - rung.peak.0).display(units)
        )
    } else {
        format!(
            "over by {}",
            Bytes(rung.peak.0 - capacity.bytes.0).display(units)
        )
    }
}

fn summary(ladder: &Ladder, units: UnitSystem) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(capacity) = &ladder.capacity {
        lines.push(match ladder.first_fit() {
            Some(rung) => format!(
                "first fit: {} ({} peak on {})",
                rung.technique,
                rung.peak.display(units),
                capacity.label
            ),
            None => format!(
                "nothing here fits {}: more GPUs (`trainmem fit`) or a smaller micro-batch or sequence",
                capacity.label
            ),
        });
    }
    for skipped in &ladder.skipped {
        lines.push(format!(
            "skipped {} ({}): {}",
            skipped.technique,
            skipped.flags.join(" "),
            skipped.reason
        ));
    }
    lines.push(
        "each step keeps the flags above it; its peak is `trainmem estimate` with all of them, and `trainmem timeline` shows where it falls".to_string(),
    );
    lines
}
