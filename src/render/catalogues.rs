//! The catalogues: optimizers, precision recipes and devices.
//!
//! The default table fits a 100-column terminal; the long columns (state
//! descriptions, options, sources, summaries) come with `--verbose` as
//! wrapped details, and always in JSON, Markdown and CSV.

use super::details::Details;
use super::{Format, Table, json};
use crate::device::DEVICES;
use crate::optimizer::OPTIMIZERS;
use crate::precision::PRECISIONS;
use crate::units::{ByteUnit, Bytes, UnitSystem, format_ratio};

/// One catalogue three ways: every column, the columns that fit a
/// terminal, and the rest as details per entry.
struct Catalogue {
    /// Every column, for Markdown and CSV.
    full: Table,
    /// The columns that fit [`super::details::WIDTH`].
    brief: Table,
    /// The other columns, per entry, for `--verbose`.
    details: Details,
    /// The command, for the line that says where the details are.
    command: &'static str,
    /// What the details hold: `states, options and sources`.
    holds: &'static str,
}

impl Catalogue {
    fn write(&self, format: Format, verbose: bool, json_text: impl FnOnce() -> String) -> String {
        match format {
            Format::Json => json_text(),
            Format::Csv => self.full.csv(),
            Format::Markdown => self.full.markdown(),
            Format::Table if verbose => format!(
                "{}
{}",
                self.brief.text(),
                self.details.text()
            ),
            Format::Table => format!(
                "{}
  {}: `trainmem {} --verbose`, or --format json|markdown|csv\n",
                self.brief.text(),
                self.holds,
                self.command
            ),
        }
    }
}

/// `trainmem optimizers`: every rule, its state in bytes per parameter for a
/// 4096 × 4096 matrix in fp32 and in bf16 (shape-aware rules differ on
/// other shapes), its options and its reference implementation.
pub fn optimizers(format: Format, verbose: bool) -> String {
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
    let mut catalogue = Catalogue {
        full: Table::new(&[
            "name",
            "states",
            ">B/param fp32",
            ">B/param bf16",
            "shape-aware",
            "options (defaults)",
            "source",
        ]),
        brief: Table::new(&["name", ">B/param fp32", ">B/param bf16", "shape-aware"]),
        details: Details::new(),
        command: "optimizers",
        holds: "states, options and sources",
    };
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
        let fp32 = per_parameter(optimizer, crate::DType::Fp32);
        let bf16 = per_parameter(optimizer, crate::DType::Bf16);
        let shape_aware = if optimizer.flat_assumption.is_some() {
            "yes"
        } else {
            "no"
        };
        catalogue.full.row([
            name.clone(),
            optimizer.summary.to_string(),
            fp32.clone(),
            bf16.clone(),
            shape_aware.to_string(),
            options.join(" "),
            optimizer.source.to_string(),
        ]);
        catalogue
            .brief
            .row([name.clone(), fp32, bf16, shape_aware.to_string()]);
        catalogue.details.entry(
            name,
            vec![
                ("states", optimizer.summary.to_string()),
                ("options (defaults)", options.join(" ")),
                (
                    "as one flat vector",
                    optimizer.flat_assumption.unwrap_or_default().to_string(),
                ),
                ("source", optimizer.source.to_string()),
            ],
        );
    }
    catalogue.write(format, verbose, || json(OPTIMIZERS))
}

/// The side of the square matrix `trainmem optimizers` prices.
const PROBE_SIDE: u64 = 4096;

/// `trainmem precisions`.
pub fn precisions(format: Format, verbose: bool) -> String {
    let headers = [
        "name",
        "weights",
        "gradients",
        "master",
        "states",
        ">bytes/param with adam",
    ];
    let mut catalogue = Catalogue {
        full: Table::new(&[headers.as_slice(), &["summary"]].concat()),
        brief: Table::new(&headers),
        details: Details::new(),
        command: "precisions",
        holds: "what each recipe means",
    };
    for p in PRECISIONS {
        let master = p.master_weights.map_or(0, |d| d.bytes());
        let adam =
            p.weights.bytes() + p.gradients.bytes() + master + 2 * p.optimizer_dtype().bytes();
        let bytes = |d: crate::DType| format!("{d} ({} B)", d.bytes());
        let cells = [
            p.name.to_string(),
            bytes(p.weights),
            bytes(p.gradients),
            p.master_weights.map_or("-".to_string(), bytes),
            bytes(p.optimizer_dtype()),
            adam.to_string(),
        ];
        catalogue.brief.row(cells.clone());
        catalogue
            .full
            .row(cells.into_iter().chain([p.summary.to_string()]));
        let mut fields = vec![("summary", p.summary.to_string())];
        if !p.aliases.is_empty() {
            fields.insert(0, ("aliases", p.aliases.join(", ")));
        }
        if let Some(fp8) = &p.fp8 {
            fields.push((
                "fp8",
                format!(
                    "{}, {} scaling{}; source: {}",
                    fp8.implementation,
                    match fp8.scaling {
                        crate::precision::Scaling::Tensorwise => "tensorwise dynamic",
                        crate::precision::Scaling::Rowwise => "rowwise dynamic",
                        crate::precision::Scaling::Delayed => "delayed",
                    },
                    if fp8.needs_megatron {
                        " (with --framework megatron)"
                    } else {
                        ""
                    },
                    fp8.source
                ),
            ));
        }
        catalogue.details.entry(p.name, fields);
    }
    catalogue.write(format, verbose, || json(PRECISIONS))
}

/// `trainmem devices`.
pub fn devices(format: Format, verbose: bool) -> String {
    let mut catalogue = Catalogue {
        full: Table::new(&[
            "name",
            "aliases",
            "product",
            ">bytes",
            ">GB",
            ">GiB",
            ">bf16 TFLOPS",
            ">fp8 TFLOPS",
            ">intra-node GB/s",
            ">inter-node GB/s",
            "source",
            "speed source",
        ]),
        brief: Table::new(&[
            "name",
            "vendor",
            "memory type",
            ">bytes",
            ">GB",
            ">GiB",
            ">bf16 TFLOPS",
        ]),
        details: Details::new(),
        command: "devices",
        holds: "aliases, products and sources",
    };
    for d in DEVICES {
        let bytes = Bytes(d.bytes);
        let gb = bytes.display_in(ByteUnit::GB);
        let gib = bytes.display_in(ByteUnit::for_size(Bytes(1 << 30), UnitSystem::Binary));
        let figure = |value: Option<u32>| value.map_or_else(|| "-".to_string(), |v| v.to_string());
        let compute = d.compute;
        let bf16 = figure(compute.map(|c| c.bf16_tflops));
        catalogue.full.row([
            d.name.to_string(),
            d.aliases.join(", "),
            d.product.to_string(),
            d.bytes.to_string(),
            gb.clone(),
            gib.clone(),
            bf16.clone(),
            figure(compute.and_then(|c| c.fp8_tflops)),
            figure(compute.map(|c| c.intra_node_gb_per_s)),
            figure(compute.and_then(|c| c.inter_node_gb_per_s)),
            d.source.to_string(),
            compute.map_or("-", |c| c.source).to_string(),
        ]);
        catalogue.brief.row([
            d.name.to_string(),
            d.vendor.to_string(),
            d.memory_type.to_string(),
            d.bytes.to_string(),
            gb,
            gib,
            bf16,
        ]);
        let mut fields = vec![
            ("product", d.product.to_string()),
            ("aliases", d.aliases.join(", ")),
            ("source", d.source.to_string()),
        ];
        if let Some(c) = compute {
            fields.push(("speed source", c.source.to_string()));
        }
        catalogue.details.entry(d.name, fields);
    }
    catalogue.write(format, verbose, || json(DEVICES))
}
