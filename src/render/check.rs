//! `trainmem check`: the keys read from the launch configs, the estimate
//! they spell, the verdict and the changes that would make the run fit.

use serde::Serialize;

use super::{Format, escape};
use crate::estimate::Estimate;
use crate::units::{Bytes, Count, UnitSystem};

/// Whether the run fits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Fits,
    DoesNotFit,
    /// A key changes memory in a way trainmem does not model.
    Unknown,
    /// No file names the sequence length (the data decides it): it fits
    /// for sequences up to [`Longest::seq_len`].
    FitsUpTo,
    /// The allocated peak fits, what the allocator reserves does not.
    Tight,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Fits => "fits",
            Verdict::DoesNotFit => "does not fit",
            Verdict::Unknown => "unknown",
            Verdict::FitsUpTo => "fits up to a length",
            Verdict::Tight => "tight",
        }
    }
}

/// One key read from a file.
#[derive(Debug, Clone, Serialize)]
pub struct KeyRow {
    pub file: String,
    pub key: String,
    /// `null` for the keys of a file another config names: read, not shown.
    pub value: Option<String>,
    pub set: String,
    /// sets, not-modelled, no-memory, ignored or unread (a count of a
    /// companion's unknown keys); not in the JSON.
    #[serde(skip)]
    pub kind: &'static str,
}

/// One change that makes the run fit.
#[derive(Debug, Clone, Serialize)]
pub struct Suggestion {
    /// What changes, in words.
    pub change: String,
    /// The config keys to change, `key: value, key: value` (or the flags).
    pub key: String,
    /// The file those keys belong in (`command line` for flags).
    pub file: String,
    /// The peak with the change.
    pub peak: Bytes,
    /// What the allocator reserves with the change, the overhead included.
    pub reserved: Bytes,
    /// What it gives up: `same maths`, `numerics` or `what is trained`.
    pub category: &'static str,
    /// What each change costs, in words.
    pub costs: Vec<&'static str>,
    /// The same changes as `estimate` flags.
    pub flags: Vec<String>,
}

/// Everything `check` reports.
#[derive(Debug)]
pub struct CheckReport<'a> {
    pub estimate: &'a Estimate,
    pub verdict: Verdict,
    /// Each file and the format detected.
    pub files: Vec<(String, &'static str)>,
    pub keys: Vec<KeyRow>,
    pub suggestions: Vec<Suggestion>,
    /// The `trainmem estimate` command the settings spell.
    pub command: String,
    /// Lines said under the keys (values resolved from the model, overrides).
    pub notes: Vec<String>,
    /// When no file names the sequence length: the longest that fits.
    pub longest: Option<Longest>,
}

/// The longest sequence per sample that fits, searched when the data
/// decides the length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Longest {
    /// The longest sequence, in tokens; `None` when not even one token fits.
    pub seq_len: Option<u64>,
    /// The micro-batch it is for.
    pub micro_batch: u64,
}

/// The check report in `format` (table or json; markdown and csv are refused earlier).
pub fn check(report: &CheckReport, format: Format, units: UnitSystem) -> String {
    match format {
        Format::Json => json(report),
        Format::Table => super::wrap::free_text(&table(report, units)),
        _ => table(report, units),
    }
}

fn json(report: &CheckReport) -> String {
    let mut value = serde_json::to_value(report.estimate).unwrap_or_default();
    if let Some(object) = value.as_object_mut() {
        object.insert("verdict".into(), serde_json::json!(report.verdict));
        object.insert("keys".into(), serde_json::json!(report.keys));
        object.insert("suggestions".into(), serde_json::json!(report.suggestions));
        if let Some(longest) = report.longest {
            object.insert("max_seq_len".into(), serde_json::json!(longest.seq_len));
        }
    }
    super::json(&value)
}

/// The widest line of a wrapped list.
const COLUMNS: usize = 100;

/// `head` and the names, comma-separated, wrapped within [`COLUMNS`] with
/// the continuation lines indented.
fn wrapped(head: &str, names: &[String]) -> String {
    let mut out = String::new();
    let mut line = head.to_string();
    for (i, name) in names.iter().enumerate() {
        let piece = if i + 1 < names.len() {
            format!("{name},")
        } else {
            name.clone()
        };
        let width = line.chars().count();
        if width > 4 && width + 1 + piece.chars().count() > COLUMNS && line != head {
            out += line.trim_end();
            out += "\n";
            line = "      ".to_string();
        }
        if !line.ends_with(' ') {
            line.push(' ');
        }
        line += &piece;
    }
    out += line.trim_end();
    out += "\n";
    out
}

fn table(report: &CheckReport, units: UnitSystem) -> String {
    let files: Vec<String> = report
        .files
        .iter()
        .map(|(file, format)| format!("{} ({format})", escape(file)))
        .collect();
    let mut out = format!("trainmem check: {}\n\n", files.join(", "));
    let shown: Vec<&KeyRow> = report
        .keys
        .iter()
        .filter(|k| k.kind == "sets" || k.kind == "not-modelled")
        .collect();
    let width = shown
        .iter()
        .map(|k| k.key.chars().count())
        .max()
        .unwrap_or(0);
    let mut file = "";
    for key in &shown {
        if key.file != file {
            file = &key.file;
            out += &format!("  {}\n", escape(file));
        }
        match &key.value {
            Some(value) => {
                out += &format!(
                    "    {:width$} = {} -> {}\n",
                    escape(&key.key),
                    escape(value),
                    escape(&key.set)
                );
            }
            None => {
                out += &format!("    {:width$} -> {}\n", escape(&key.key), escape(&key.set));
            }
        }
    }
    for (kind, label) in [
        ("no-memory", "no effect on memory"),
        ("ignored", "ignored (not keys trainmem knows)"),
    ] {
        let names: Vec<String> = report
            .keys
            .iter()
            .filter(|k| k.kind == kind)
            .map(|k| escape(&k.key).into_owned())
            .collect();
        if !names.is_empty() {
            out += &wrapped(&format!("  {label}: "), &names);
        }
    }
    for unread in report.keys.iter().filter(|k| k.kind == "unread") {
        out += &format!(
            "  {}: {} ({})\n",
            escape(&unread.file),
            escape(&unread.key),
            escape(&unread.set)
        );
    }
    for note in &report.notes {
        out += &format!("  {}\n", escape(note));
    }
    out += &format!("\n  as flags: {}\n\n", escape(&report.command));
    out += &super::estimate(report.estimate, Format::Table, units);
    out += "\n";
    let peak = report.estimate.memory.peak;
    let capacity = report
        .estimate
        .capacity
        .as_ref()
        .map(|c| format!(" on {}", escape(&c.label)))
        .unwrap_or_default();
    match (report.verdict, report.longest) {
        (
            Verdict::FitsUpTo,
            Some(Longest {
                seq_len: Some(tokens),
                micro_batch,
            }),
        ) => {
            out += &format!(
                "verdict: fits for sequences up to {} tokens at batch {micro_batch}; your data's longest sample decides: peak {}, reserved {}{capacity}\n",
                Count(tokens).grouped(),
                peak.display(units),
                report.estimate.memory.reserved.display(units)
            );
        }
        _ => {
            out += &format!(
                "verdict: {}: peak {}, reserved {}{capacity}\n",
                report.verdict.name(),
                peak.display(units),
                report.estimate.memory.reserved.display(units)
            );
        }
    }
    if report.verdict == Verdict::Tight {
        out += "  the allocated peak fits, what the allocator reserves does not: the run may run out of memory (exit 1 unless --allow-tight)\n";
    }
    if report.verdict == Verdict::Unknown {
        let count = report
            .keys
            .iter()
            .filter(|k| k.kind == "not-modelled")
            .count();
        out += &format!(
            "  {count} key(s) change memory in ways trainmem does not model (marked `not modelled` above)\n"
        );
    }
    if !report.suggestions.is_empty() {
        out += "\nchanges that fit, each alone, what they give up least first:\n";
        for s in &report.suggestions {
            out += &format!(
                "  {}: peak {}, reserved {} ({})\n      {}: {}\n      costs: {}\n",
                escape(&s.change),
                s.peak.display(units),
                s.reserved.display(units),
                s.category,
                escape(&s.file),
                escape(&s.key),
                s.costs.join("; ")
            );
        }
    } else if report.estimate.fits == Some(false) {
        out += "\nno set of changes tried makes it fit (see `trainmem check --help`)\n";
    }
    out
}
