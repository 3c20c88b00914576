//! Labelled details per catalogue entry, wrapped to the terminal width the
//! tables keep: what is too long for a table column (sources, notes, state
//! descriptions) in `--verbose`.

/// The widest line a catalogue prints by default, in characters.
pub const WIDTH: usize = 100;

/// Entries, each a heading and its labelled fields.
#[derive(Debug, Clone, Default)]
pub struct Details {
    entries: Vec<(String, Vec<(&'static str, String)>)>,
}

impl Details {
    /// An empty list.
    pub fn new() -> Details {
        Details::default()
    }

    /// Adds an entry; empty fields are left out.
    pub fn entry(&mut self, heading: impl Into<String>, fields: Vec<(&'static str, String)>) {
        let fields = fields
            .into_iter()
            .filter(|(_, value)| !value.trim().is_empty())
            .collect();
        self.entries.push((heading.into(), fields));
    }

    /// Each heading indented two spaces, its fields four, wrapped at
    /// [`WIDTH`] under the start of the value; a word longer than a line
    /// stays whole.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for (heading, fields) in &self.entries {
            out += &format!("  {heading}\n");
            for (label, value) in fields {
                let lead = format!("    {label}: ");
                out += &wrap(&lead, value, WIDTH);
            }
        }
        out
    }
}

/// `lead` then the words of `text`, each line at most `width` characters;
/// lines after the first are indented as far as `lead` reaches.
fn wrap(lead: &str, text: &str, width: usize) -> String {
    let indent = " ".repeat(lead.chars().count());
    let mut out = String::new();
    let mut line = lead.to_string();
    let mut empty = true;
    for word in text.split_whitespace() {
        let needed = line.chars().count() + usize::from(!empty) + word.chars().count();
        if !empty && needed > width {
            out += line.trim_end();
            out.push('\n');
            line = indent.clone();
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line += word;
        empty = false;
    }
    out += line.trim_end();
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_under_the_value() {
        assert_eq!(
            wrap("    source: ", "one two three four", 22),
            "    source: one two\n            three four\n"
        );
        // A word longer than the line is kept whole on its own line.
        assert_eq!(
            wrap("  a: ", "x abcdefghijklmnop y", 10),
            "  a: x\n     abcdefghijklmnop\n     y\n"
        );
    }

    #[test]
    fn leaves_out_empty_fields() {
        let mut details = Details::new();
        details.entry(
            "sgd",
            vec![("options", String::new()), ("source", "torch".into())],
        );
        assert_eq!(details.text(), "  sgd\n    source: torch\n");
    }
}
