//! The catalogues: optimizers, precision recipes and devices.

use super::{Format, Table, json};
use crate::device::DEVICES;
use crate::model::Model;
use crate::optimizer::{Location, OPTIMIZERS};
use crate::precision::PRECISIONS;
use crate::units::{ByteUnit, Bytes, Count, UnitSystem};

fn write(table: &Table, format: Format, json_text: impl FnOnce() -> String) -> String {
    match format {
        Format::Json => json_text(),
        Format::Csv => table.csv(),
        Format::Markdown => table.markdown(),
        Format::Table => table.text(),
    }
}

/// `trainmem optimizers`.
pub fn optimizers(format: Format) -> String {
    let probe = Model::flat(Count(1));
    let mut table = Table::new(&["name", "aliases", "states", ">state values/param", "source"]);
    for optimizer in OPTIMIZERS {
        let states = optimizer
            .states(&probe.tensors[0], crate::DType::Fp32)
            .unwrap_or_default();
        let device_values: u64 = states
            .iter()
            .filter(|s| s.location == Location::Device)
            .map(|s| s.shape.elements().0)
            .sum();
        table.row([
            optimizer.name.to_string(),
            optimizer.aliases.join(", "),
            optimizer.summary.to_string(),
            device_values.to_string(),
            optimizer.source.to_string(),
        ]);
    }
    write(&table, format, || json(OPTIMIZERS))
}

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
