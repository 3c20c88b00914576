//! How a report is written: the output format a request names and the
//! renderers write. Ground-layer data, below both the typed request
//! (`crate::request`) and the renderers (`crate::render`, which re-exports
//! it).

use crate::error::{Error, Result};

/// How a report is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// Aligned text for a terminal.
    #[default]
    Table,
    /// Pretty-printed JSON with integer bytes.
    Json,
    /// GitHub-flavoured Markdown.
    Markdown,
    /// Comma-separated values with a header row.
    Csv,
}

impl Format {
    /// Reads `table`, `json`, `markdown` (or `md`) and `csv`.
    pub fn parse(name: &str) -> Result<Format> {
        match name.to_ascii_lowercase().as_str() {
            "table" | "text" => Ok(Format::Table),
            "json" => Ok(Format::Json),
            "markdown" | "md" => Ok(Format::Markdown),
            "csv" => Ok(Format::Csv),
            _ => Err(Error::UnknownName {
                kind: "format",
                name: name.to_string(),
                suggestion: None,
                accepted: "table, json, markdown, csv".to_string(),
            }),
        }
    }
}
