//! A small table that prints as aligned text, Markdown or CSV.
//!
//! Every header and cell goes through [`escape`]: a tensor name or model
//! name holding a newline or an escape sequence cannot break the table's
//! lines or reach the terminal.

use super::escape;

/// Rows of cells under a header; numeric columns are right-aligned.
#[derive(Debug, Clone, Default)]
pub struct Table {
    headers: Vec<String>,
    right_aligned: Vec<bool>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers; a header starting with `>` marks a
    /// right-aligned column (the `>` is not printed).
    pub fn new(headers: &[&str]) -> Table {
        Table {
            headers: headers
                .iter()
                .map(|h| escape(h.trim_start_matches('>')).into_owned())
                .collect(),
            right_aligned: headers.iter().map(|h| h.starts_with('>')).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; missing cells print empty.
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) -> &mut Table {
        self.rows.push(
            cells
                .into_iter()
                .map(|cell| escape(&cell.into()).into_owned())
                .collect(),
        );
        self
    }

    fn cell(&self, row: &[String], column: usize) -> String {
        row.get(column).cloned().unwrap_or_default()
    }

    /// Aligned text, each line indented by two spaces.
    pub fn text(&self) -> String {
        let widths: Vec<usize> = (0..self.headers.len())
            .map(|c| {
                self.rows
                    .iter()
                    .map(|r| self.cell(r, c).chars().count())
                    .chain([self.headers[c].chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |cells: Vec<String>| {
            let padded: Vec<String> = cells
                .iter()
                .enumerate()
                .map(|(c, cell)| {
                    if self.right_aligned[c] {
                        format!("{cell:>width$}", width = widths[c])
                    } else {
                        format!("{cell:<width$}", width = widths[c])
                    }
                })
                .collect();
            format!("  {}", padded.join("   ").trim_end())
        };
        let mut out = vec![line(self.headers.clone())];
        out.extend(
            self.rows
                .iter()
                .map(|r| line((0..self.headers.len()).map(|c| self.cell(r, c)).collect())),
        );
        out.join("\n") + "\n"
    }

    /// A GitHub-flavoured Markdown table.
    pub fn markdown(&self) -> String {
        let escape = |s: &str| s.replace('|', "\\|");
        let mut out = format!(
            "| {} |\n",
            self.headers
                .iter()
                .map(|h| escape(h))
                .collect::<Vec<_>>()
                .join(" | ")
        );
        let rule: Vec<&str> = self
            .right_aligned
            .iter()
            .map(|r| if *r { "---:" } else { "---" })
            .collect();
        out += &format!("| {} |\n", rule.join(" | "));
        for row in &self.rows {
            let cells: Vec<String> = (0..self.headers.len())
                .map(|c| escape(&self.cell(row, c)))
                .collect();
            out += &format!("| {} |\n", cells.join(" | "));
        }
        out
    }

    /// CSV with a header row; cells with commas or quotes are quoted.
    pub fn csv(&self) -> String {
        let quote = |s: &str| {
            if s.contains([',', '"', '\n']) {
                format!("\"{}\"", s.replace('"', "\"\""))
            } else {
                s.to_string()
            }
        };
        let mut out = self
            .headers
            .iter()
            .map(|h| quote(h))
            .collect::<Vec<_>>()
            .join(",")
            + "\n";
        for row in &self.rows {
            out += &((0..self.headers.len())
                .map(|c| quote(&self.cell(row, c)))
                .collect::<Vec<_>>()
                .join(",")
                + "\n");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_three_ways() {
        let mut table = Table::new(&["name", ">bytes"]);
        table.row(["a", "1"]).row(["b,c", "22"]);
        assert_eq!(
            table.text(),
            "  name   bytes\n  a          1\n  b,c       22\n"
        );
        assert_eq!(
            table.markdown(),
            "| name | bytes |\n| --- | ---: |\n| a | 1 |\n| b,c | 22 |\n"
        );
        assert_eq!(table.csv(), "name,bytes\na,1\n\"b,c\",22\n");
    }
}
