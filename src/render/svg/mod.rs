//! Charts as SVG, written by hand: small, deterministic, no plotting crate.
//!
//! Like every renderer, these only draw figures the engine computed.

mod axis;
mod breakdown;
mod canvas;
mod scaling;
mod techniques;
mod timeline;

pub use breakdown::breakdown;
pub use scaling::scaling;
pub use techniques::techniques;
pub use timeline::timeline;

use crate::units::Count;

/// Axes, capacity lines and labels.
const INK: &str = "#333333";
/// Secondary text: subtitles, guides.
const MUTED: &str = "#666666";
/// Grid lines.
const GRID: &str = "#e6e6e6";
/// The capacity line and the peak.
const ALERT: &str = "#c0392b";
/// The colour of each kind of memory, bottom of the stack first, in
/// [`crate::timeline::Kind::ALL`] order.
const KIND_COLORS: [&str; 7] = [
    "#bab0ac", "#4e79a7", "#76b7b2", "#f28e2b", "#e15759", "#59a14f", "#b07aa1",
];

/// How a chart names a model: `7B parameters`, or `llama-2-7b (6.74B parameters)`.
fn model_label(size: Count, label: &str) -> String {
    if label == size.short() {
        format!("{label} parameters")
    } else {
        format!("{label} ({} parameters)", size.short())
    }
}
