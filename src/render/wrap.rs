//! The free-text lines of the human reports (notes, the step-time line, the
//! summary under a table) wrapped at word boundaries to the output's width,
//! with a hanging indent, so that no line runs to 350 characters.
//!
//! Only the `table` format is wrapped, and in it only the free text that
//! runs longest: the notes (`note: `, `hint: `, `warning: `), the
//! step-time line and why a peak is below the total, whose words are separated by single spaces. Table rows,
//! the other summary lines and command lines to copy (`trainmem estimate
//! ...`, not in backticks) are left as they are. JSON, CSV and Markdown are
//! never wrapped.
//!
//! The width is [`DEFAULT_COLUMNS`] unless the front door that knows the
//! terminal sets another with [`set_columns`] (the binary does, when its
//! standard output is a terminal).

use std::sync::atomic::{AtomicUsize, Ordering};

/// The width when the output is not a terminal: a file, a pipe, a test.
pub const DEFAULT_COLUMNS: usize = 100;

/// The narrowest width wrapped to: below it a terminal's width is ignored.
pub const MIN_COLUMNS: usize = 40;

/// The width of this process's reports.
static COLUMNS: AtomicUsize = AtomicUsize::new(DEFAULT_COLUMNS);

/// Sets the width that reports are wrapped to, at least [`MIN_COLUMNS`].
pub fn set_columns(columns: usize) {
    COLUMNS.store(columns.max(MIN_COLUMNS), Ordering::Relaxed);
}

/// The width that reports are wrapped to.
pub fn columns() -> usize {
    COLUMNS.load(Ordering::Relaxed)
}

/// Labels whose continuation lines are indented under their text.
const LABELS: &[&str] = &["note: ", "hint: ", "warning: "];

/// The other free-text lines wrapped, continued two spaces in.
const WRAPPED: &[&str] = &["step time: ", "the peak is below the total: "];

/// `report` with each free-text line longer than [`columns`] wrapped.
pub fn free_text(report: &str) -> String {
    lines_within(report, columns())
}

/// `report` with each free-text line longer than `width` characters
/// wrapped at spaces; a continuation line is indented by the line's own
/// indent and two spaces more, or under the text after a `note: ` label.
pub fn lines_within(report: &str, width: usize) -> String {
    let mut out = String::with_capacity(report.len());
    for line in report.split_inclusive('\n') {
        let (text, newline) = match line.strip_suffix('\n') {
            Some(text) => (text, "\n"),
            None => (line, ""),
        };
        if text.chars().count() <= width || !is_free_text(text) {
            out.push_str(line);
            continue;
        }
        let indent = text.len() - text.trim_start().len();
        let body = &text[indent..];
        let hanging = LABELS
            .iter()
            .find(|label| body.starts_with(*label))
            .map_or(2, |label| label.len());
        let continuation = " ".repeat(indent + hanging);
        let mut current = text[..indent].to_string();
        let mut empty = true;
        for word in body.split(' ') {
            let fits = current.chars().count() + 1 + word.chars().count() <= width;
            if !empty && !fits {
                out.push_str(&current);
                out.push('\n');
                current.clone_from(&continuation);
                empty = true;
            }
            if !empty {
                current.push(' ');
            }
            current.push_str(word);
            empty = false;
        }
        out.push_str(&current);
        out.push_str(newline);
    }
    out
}

/// Whether `line` is prose that is wrapped: a note or the step time, its
/// words apart by single spaces (a table row has wider gaps), and not a
/// command line to copy.
fn is_free_text(line: &str) -> bool {
    let body = line.trim_start();
    LABELS
        .iter()
        .chain(WRAPPED)
        .any(|label| body.starts_with(label))
        && !body.contains("  ")
        && !holds_a_command(body)
}

/// The commands a line to copy starts with, after `trainmem `.
const COMMANDS: &[&str] = &[
    "estimate ",
    "timeline ",
    "techniques ",
    "check ",
    "fit ",
    "plan ",
    "params ",
    "plot ",
    "compare ",
];

/// Whether `text` holds a command line with flags to copy (`trainmem
/// estimate --model ...`) that is not quoted in backticks, which wrapping
/// would break.
fn holds_a_command(text: &str) -> bool {
    text.match_indices("trainmem ").any(|(at, found)| {
        let rest = &text[at + found.len()..];
        let quoted = text[..at].ends_with('`');
        !quoted
            && COMMANDS
                .iter()
                .any(|command| rest.starts_with(command) && rest.contains(" --"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_note_wraps_under_its_text() {
        let note = "  note: the quick brown fox jumps over the lazy dog\n";
        assert_eq!(
            lines_within(note, 24),
            "  note: the quick brown\n        fox jumps over\n        the lazy dog\n"
        );
    }

    #[test]
    fn other_prose_wraps_two_spaces_in() {
        assert_eq!(
            lines_within("  step time: one two three four", 20),
            "  step time: one two\n    three four"
        );
    }

    #[test]
    fn rows_commands_other_lines_and_short_lines_are_kept() {
        let kept = "  note: weights    fp32    4 GB and more words here\n\
                    note: as flags: trainmem estimate --model gpt2 --micro-batch 1 --seq-len 1024\n\
                    parameters: a long summary line that is not a note\n\
                    short\n";
        assert_eq!(lines_within(kept, 20), kept);
    }

    #[test]
    fn a_word_longer_than_the_width_stands_alone() {
        assert_eq!(
            lines_within("step time: a verylongwordindeed b", 10),
            "step time:\n  a\n  verylongwordindeed\n  b"
        );
    }

    #[test]
    fn a_backticked_command_is_prose() {
        assert!(is_free_text("note: see `trainmem devices` for the names"));
        assert!(!is_free_text("note: run trainmem estimate --model x"));
        assert!(is_free_text("note: trainmem counts the parameters exactly"));
    }
}
