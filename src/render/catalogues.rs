//! The catalogues: optimizers, precision recipes and devices.

use super::{Format, Table, json};
use crate::device::DEVICES;
use crate::optimizer::OPTIMIZERS;
use crate::precision::PRECISIONS;
use crate::units::{ByteUnit, Bytes, UnitSystem, format_ratio};

fn write(table: &Table, format: Format, json_text: impl FnOnce() -> String) -> String {
    match format {
        Format::Json => json_text(),
        Format::Csv => table.csv(),
        Format::Markdown => table.markdown(),
        Format::Table => table.text(),
    }
}

/// `trainmem optimizers`: every rule, its state in bytes per parameter for a
/// 4096 × 4096 matrix in fp32 and in bf16 (shape-aware rules differ on
/// other shapes), its options and its reference implementation.
pub fn optimizers(format: Format) -> String {
    let probe = crate::model::Tensor::new(
        "model.layers.0.mlp.up_proj.weight",
        crate::model::Shape::new(vec![PROBE_SIDE, PROBE_SIDE])
            .unwrap_or_else(|_| crate::model::Shape::vector(1)),
        crate::model::Role::Mlp,
    );
    let per_parameter = |optimizer: &crate::optimizer::Optimizer, dtype| {
        optimizer
            .state_bytes(&probe, dtype)
            .map_or("-".to_string(), |b| {
                format_ratio(b.0, PROBE_SIDE * PROBE_SIDE)
            })
    };
    let mut table = Table::new(&[
        "name",
        "states",
        ">B/param fp32",
        ">B/param bf16",
        "shape-aware",
        "options (defaults)",
        "source",
    ]);
    for optimizer in OPTIMIZERS {
        let options: Vec<String> = optimizer
            .options
            .iter()
            .map(|o| format!("{}={}", o.key, o.default))
            .collect();
        let mut name = optimizer.name.to_string();
        if !optimizer.aliases.is_empty() {
            name += &format!(" ({})", optimizer.aliases.join(", "));
        }
        table.row([
            name,
            optimizer.summary.to_string(),
            per_parameter(optimizer, crate::DType::Fp32),
            per_parameter(optimizer, crate::DType::Bf16),
            if optimizer.flat_assumption.is_some() {
                "yes"
            } else {
                "no"
            }
            .to_string(),
            options.join(" "),
            optimizer.source.to_string(),
        ]);
    }
    write(&table, format, || json(OPTIMIZERS))
}

/// The side of the square matrix `trainmem optimizers` prices.
const PROBE_SIDE: u64 = 4096;

/// `trainmem precisions`.
pub fn precisions(format: Format) -> String {
    let mut table = Table::new(&[
        "name",
        "weights",
        "gradients",
        "master",
        "states",
        ">bytes/param with adam",
        "summary",
    ]);
    for p in PRECISIONS {
        let master = p.master_weights.map_or(0, |d| d.bytes());
        let adam =
            p.weights.bytes() + p.gradients.bytes() + master + 2 * p.optimizer_dtype().bytes();
        let bytes = |d: crate::DType| format!("{d} ({} B)", d.bytes());
        table.row([
            p.name.to_string(),
            bytes(p.weights),
            bytes(p.gradients),
            p.master_weights.map_or("-".to_string(), bytes),
            bytes(p.optimizer_dtype()),
            adam.to_string(),
            p.summary.to_string(),
        ]);
    }
    write(&table, format, || json(PRECISIONS))
}

/// `trainmem devices`.
pub fn devices(format: Format) -> String {
    let mut table = Table::new(&[
        "name", "aliases", "product", ">bytes", ">GB", ">GiB", "source",
    ]);
    for d in DEVICES {
        let bytes = Bytes(d.bytes);
        table.row([
            d.name.to_string(),
            d.aliases.join(", "),
            d.product.to_string(),
            d.bytes.to_string(),
            bytes.display_in(ByteUnit::GB),
            bytes.display_in(ByteUnit::for_size(Bytes(1 << 30), UnitSystem::Binary)),
            d.source.to_string(),
        ]);
    }
    write(&table, format, || json(DEVICES))
}
