//! The answer of `trainmem fit`.

use super::{Format, Table, json};
use crate::estimate::Fit;
use crate::units::{UnitSystem, format_ratio};

/// The largest model that fits, with what it costs.
pub fn fit(fit: &Fit, format: Format, units: UnitSystem) -> String {
    let e = &fit.estimate;
    let mut table = Table::new(&[
        "optimizer",
        "precision",
        "capacity",
        ">max parameters",
        ">bytes/param",
        ">memory",
    ]);
    table.row([
        fit.optimizer.to_string(),
        fit.precision.name.to_string(),
        fit.capacity.label.clone(),
        fit.max_parameters.grouped(),
        format_ratio(e.memory.total.0, e.parameters.total.0),
        e.memory.total.display(units),
    ]);
    match format {
        Format::Json => json(fit),
        Format::Csv => table.csv(),
        Format::Markdown => table.markdown(),
        Format::Table => format!(
            "trainmem fit: the largest model whose weights, gradients and optimizer states fit {}\n\n{}\n  {} parameters ({}) fit with {} in {}; one more does not.\n  note: activations are not counted: leave room for them.\n",
            fit.capacity.label,
            table.text(),
            fit.max_parameters.short(),
            fit.max_parameters.grouped(),
            fit.optimizer,
            fit.precision.name
        ),
    }
}
