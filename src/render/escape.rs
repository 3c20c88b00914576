//! User-provided text made safe to print on one terminal line.
//!
//! A model name, a tensor name from a safetensors header, a `model_type` or
//! a flag's value may hold newlines, ANSI escape sequences or other control
//! characters that would split a line, recolour the terminal or retitle its
//! window. Every human-readable output (table, Markdown and CSV cells,
//! headers, notes, error messages) shows such text through [`escape`]; JSON
//! is escaped by serde instead.

use std::borrow::Cow;

/// `text` with every control character written as Rust writes it in a
/// string literal (`\n`, `\t`, `\r`, `\u{1b}`), and the Unicode
/// direction overrides that can reorder a line (`\u{202e}`) likewise;
/// other text, quotes and backslashes included, is left as it is.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if needs_escape(c) {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Control characters (C0, DEL, C1) and the bidirectional overrides and
/// isolates (U+202A to U+202E, U+2066 to U+2069).
fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_written_out() {
        assert_eq!(escape("a\nb"), "a\\nb");
        assert_eq!(escape("\u{1b}]0;owned\u{7}"), "\\u{1b}]0;owned\\u{7}");
        assert_eq!(escape("tab\there\r"), "tab\\there\\r");
        assert_eq!(escape("\u{9b}31m"), "\\u{9b}31m");
        assert_eq!(escape("abc\u{202e}def"), "abc\\u{202e}def");
    }

    #[test]
    fn plain_text_is_untouched() {
        assert!(matches!(escape("model.layers.0.q_proj"), Cow::Borrowed(_)));
        assert_eq!(escape("`a` \"b\" 'c' \\d é ×"), "`a` \"b\" 'c' \\d é ×");
    }
}
