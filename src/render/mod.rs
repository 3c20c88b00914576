//! Renderers: estimates and catalogues as tables, JSON, Markdown and CSV.
//!
//! Renderers only format; every figure arrives computed.

mod catalogues;
pub mod check;
mod details;
mod escape;
mod estimate;
mod fit;
mod params;
pub mod plan;
pub mod schema;
pub mod svg;
mod table;
mod techniques;
mod textbook;
mod timeline;
pub mod wrap;

pub use catalogues::{devices, optimizers, precisions};
pub use escape::escape;
pub use estimate::estimate;
pub use fit::fit;
pub use params::{ModelListing, models, params};
pub use table::Table;
pub use techniques::techniques;
pub use textbook::textbook;
pub use timeline::{peak_moment, timeline};

use serde::Serialize;

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

/// Any serializable value as pretty JSON with a trailing newline.
pub fn json<T: Serialize + ?Sized>(value: &T) -> String {
    // Serializing plain structs of integers, strings and finite floats
    // cannot fail; if it ever did, an empty object is an honest answer.
    let mut text = serde_json::to_string_pretty(value).unwrap_or_else(|_| "{}".to_string());
    text.push('\n');
    text
}
