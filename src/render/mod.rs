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

// The format is ground-layer data (the typed request names it too); the
// renderers that write it keep it under their path.
pub use crate::format::Format;

/// Any serializable value as pretty JSON with a trailing newline.
pub fn json<T: Serialize + ?Sized>(value: &T) -> String {
    // Serializing plain structs of integers, strings and finite floats
    // cannot fail; if it ever did, an empty object is an honest answer.
    let mut text = serde_json::to_string_pretty(value).unwrap_or_else(|_| "{}".to_string());
    text.push('\n');
    text
}
