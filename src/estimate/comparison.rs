//! The textbook comparison (seed 001): several optimizers priced at several
//! sizes, the threshold where each stops fitting, the saving of a swap, and
//! the sanity checks that make the copy count the quantity to remember.

use serde::Serialize;

use super::{Capacity, Estimate, Setup, estimate, max_parameters};
use crate::error::{Error, Result};
use crate::model::Model;
use crate::optimizer::Optimizer;
use crate::precision::Precision;
use crate::units::{ByteUnit, Bytes, Count, UnitSystem};

/// Optimizers priced at several sizes under one precision.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// The recipe every row uses.
    pub precision: Precision,
    /// The accelerator the rows are checked against.
    pub capacity: Option<Capacity>,
    /// Model sizes (total parameters), the columns.
    pub sizes: Vec<Count>,
    /// What each column is called: `7B`, or a model's name.
    pub labels: Vec<String>,
    /// One row per optimizer, cheapest first on the last model.
    pub rows: Vec<Row>,
    /// Optimizers left out, with why.
    pub skipped: Vec<Skipped>,
    /// What replacing one optimizer by another saves.
    pub swap: Option<Swap>,
    /// The seed's sanity checks, computed.
    pub checks: Vec<Check>,
}

/// An optimizer the comparison could not price.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// Its name.
    pub optimizer: &'static str,
    /// The error that priced it out.
    pub reason: String,
}

/// One optimizer across the sizes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// The optimizer.
    pub optimizer: &'static Optimizer,
    /// One estimate per size.
    pub estimates: Vec<Estimate>,
    /// The largest model that fits the capacity, if one is given.
    pub max_parameters: Option<Count>,
}

/// The saving of swapping one optimizer for another at one size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Swap {
    /// The optimizer given up.
    pub from: &'static Optimizer,
    /// The optimizer used instead.
    pub to: &'static Optimizer,
    /// The model size.
    pub parameters: Count,
    /// `from`'s total.
    pub from_total: Bytes,
    /// `from`'s gradient-and-optimizer slice.
    pub from_slice: Bytes,
    /// Bytes saved.
    pub saved: Bytes,
}

/// One sanity check of the seed, with whether it holds for these figures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// What is claimed.
    pub claim: String,
    /// Whether every figure bears it out.
    pub holds: bool,
    /// The numbers behind the verdict.
    pub detail: String,
}

impl Comparison {
    /// Prices every optimizer on every model under `base` (its precision,
    /// capacity, layout and workload; each optimizer with its default
    /// options), finds each one's threshold, the swap saving (`swap` = from,
    /// to, model) and runs the checks.
    pub fn new(
        optimizers: &[&'static Optimizer],
        models: &[Model],
        base: &Setup,
        swap: Option<(&'static Optimizer, &'static Optimizer, &Model)>,
    ) -> Result<Comparison> {
        let sizes = models
            .iter()
            .map(Model::total_parameters)
            .collect::<Result<Vec<_>>>()?;
        let labels = models
            .iter()
            .zip(&sizes)
            .map(|(m, size)| {
                if m.shapes_known {
                    m.name.clone()
                } else {
                    size.short()
                }
            })
            .collect();
        let (mut rows, skipped) = price(optimizers, models, base)?;
        // Ranked by memory on the last (largest) model, cheapest first; the
        // sort is stable, so equal rows keep the order they were asked in.
        rows.sort_by_key(|row| row.estimates.last().map(|e| e.memory.total));
        let swap = swap
            .map(|(from, to, model)| Swap::new(from, to, model, base))
            .transpose()?;
        let alternative = if base.precision.name == "fp32" {
            "fp16"
        } else {
            "fp32"
        };
        let alternative = *Precision::find(alternative)?;
        let other = Setup {
            precision: alternative,
            capacity: None,
            ..base.clone()
        };
        let (other_rows, _) = price(optimizers, models, &other)?;
        let other_rows: Vec<Row> = rows
            .iter()
            .filter_map(|row| {
                other_rows
                    .iter()
                    .find(|o| o.optimizer == row.optimizer)
                    .cloned()
            })
            .collect();
        let checks = vec![
            precision_independence(&rows, &other_rows, alternative),
            adam_twice_sgd(&rows),
            proportional_to_parameters(&rows, &sizes),
        ];
        Ok(Comparison {
            precision: base.precision,
            capacity: base.capacity.clone(),
            sizes,
            labels,
            rows,
            skipped,
            swap,
            checks,
        })
    }
}

/// `base` with `optimizer` at its default options.
fn with_optimizer(base: &Setup, optimizer: &'static Optimizer) -> Setup {
    Setup {
        optimizer,
        options: optimizer.default_options(),
        ..base.clone()
    }
}

/// Every optimizer on every model; an optimizer whose state overflows 64-bit
/// arithmetic on some model (Shampoo's N × N preconditioner of a flat
/// vector) is left out with the reason, not allowed to sink the comparison.
fn price(
    optimizers: &[&'static Optimizer],
    models: &[Model],
    base: &Setup,
) -> Result<(Vec<Row>, Vec<Skipped>)> {
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    for optimizer in optimizers {
        let setup = with_optimizer(base, optimizer);
        let estimates = models
            .iter()
            .map(|model| estimate(model, &setup))
            .collect::<Result<Vec<_>>>();
        let estimates = match estimates {
            Ok(estimates) => estimates,
            Err(error @ Error::Overflow { .. }) => {
                skipped.push(Skipped {
                    optimizer: optimizer.name,
                    reason: error.to_string(),
                });
                continue;
            }
            Err(other) => return Err(other),
        };
        let max_parameters = base
            .capacity
            .as_ref()
            .map(|c| max_parameters(&setup, c.bytes))
            .transpose()?;
        rows.push(Row {
            optimizer,
            estimates,
            max_parameters,
        });
    }
    Ok((rows, skipped))
}

impl Swap {
    fn new(
        from: &'static Optimizer,
        to: &'static Optimizer,
        model: &Model,
        base: &Setup,
    ) -> Result<Swap> {
        let before = estimate(model, &with_optimizer(base, from))?;
        let after = estimate(model, &with_optimizer(base, to))?;
        Ok(Swap {
            from,
            to,
            parameters: before.parameters.total,
            from_total: before.memory.total,
            from_slice: before.gradient_optimizer_slice.bytes,
            saved: Bytes(before.memory.total.0.saturating_sub(after.memory.total.0)),
        })
    }
}

fn totals(row: &Row) -> impl Iterator<Item = u128> + '_ {
    row.estimates.iter().map(|e| u128::from(e.memory.total.0))
}

/// Seed 001: "fp16 halves every number in the table and changes none of the
/// ratios". Every pair of cells has the same ratio under both precisions.
fn precision_independence(rows: &[Row], other: &[Row], alternative: Precision) -> Check {
    let here: Vec<u128> = rows.iter().flat_map(totals).collect();
    let there: Vec<u128> = other.iter().flat_map(totals).collect();
    let holds = here
        .iter()
        .zip(&there)
        .all(|(a, b)| here.iter().zip(&there).all(|(c, d)| a * d == b * c));
    let detail = match (rows.last(), other.last()) {
        (Some(row), Some(other_row)) => match (row.estimates.last(), other_row.estimates.last()) {
            (Some(a), Some(b)) => format!(
                "{} at {}: {} in {}, {} in {}; copies {} and {}",
                row.optimizer.title,
                a.parameters.total.short(),
                a.memory.total,
                a.precision.name,
                b.memory.total,
                b.precision.name,
                crate::units::format_float(a.copies.total),
                crate::units::format_float(b.copies.total)
            ),
            _ => String::new(),
        },
        _ => String::new(),
    };
    Check {
        claim: format!(
            "ratios are precision-independent (every ratio is the same in {})",
            alternative.name
        ),
        holds,
        detail,
    }
}

/// Seed 001: "Adam is exactly twice SGD. Four copies against two, at every size."
fn adam_twice_sgd(rows: &[Row]) -> Check {
    let find = |name: &str| rows.iter().find(|r| r.optimizer.name == name);
    let claim = "Adam is exactly twice SGD at every size".to_string();
    match (find("adam"), find("sgd")) {
        (Some(adam), Some(sgd)) => {
            let holds = totals(adam).zip(totals(sgd)).all(|(a, s)| a == 2 * s);
            let unit = ByteUnit::for_column(
                adam.estimates
                    .iter()
                    .chain(&sgd.estimates)
                    .map(|e| e.memory.total),
                UnitSystem::Decimal,
            );
            let detail = adam
                .estimates
                .iter()
                .zip(&sgd.estimates)
                .map(|(a, s)| {
                    format!(
                        "{} vs {}",
                        a.memory.total.display_in(unit),
                        s.memory.total.display_in(unit)
                    )
                })
                .collect::<Vec<_>>()
                .join(", ");
            Check {
                claim,
                holds,
                detail,
            }
        }
        _ => Check {
            claim,
            holds: true,
            detail: "not applicable: compare both adam and sgd to check it".to_string(),
        },
    }
}

/// Seed 000: "memory here is proportional to the parameter count".
fn proportional_to_parameters(rows: &[Row], sizes: &[Count]) -> Check {
    let holds = rows.iter().all(|row| {
        let cells: Vec<(u128, u128)> = totals(row)
            .zip(sizes.iter().map(|s| u128::from(s.0)))
            .collect();
        cells
            .iter()
            .all(|(m1, p1)| cells.iter().all(|(m2, p2)| m1 * p2 == m2 * p1))
    });
    let detail = match (rows.first(), sizes.first(), sizes.last()) {
        (Some(row), Some(small), Some(large)) if sizes.len() > 1 => {
            let (first, last) = (&row.estimates[0], &row.estimates[sizes.len() - 1]);
            let unit = ByteUnit::for_column(
                row.estimates.iter().map(|e| e.memory.total),
                UnitSystem::Decimal,
            );
            format!(
                "{}: {} / {} = {} and {} / {} = {}",
                row.optimizer.title,
                large.short(),
                small.short(),
                crate::units::format_ratio(large.0, small.0),
                last.memory.total.display_in(unit),
                first.memory.total.display_in(unit),
                crate::units::format_ratio(last.memory.total.0, first.memory.total.0)
            )
        }
        _ => "one size only".to_string(),
    };
    Check {
        claim: "memory is proportional to the parameter count".to_string(),
        holds,
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimizer::TEXTBOOK;

    fn textbook() -> Comparison {
        let models: Vec<Model> = ["124M", "1.5B", "7B"]
            .iter()
            .map(|s| Model::flat(s.parse().unwrap()))
            .collect();
        let capacity = Capacity {
            bytes: "80GB".parse().unwrap(),
            label: "80 GB".into(),
        };
        let adam = Optimizer::find("adam").unwrap();
        let momentum = Optimizer::find("momentum").unwrap();
        let base =
            Setup::new(adam, *Precision::find("fp32").unwrap()).with_capacity(Some(capacity));
        Comparison::new(
            TEXTBOOK,
            &models,
            &base,
            Some((adam, momentum, &Model::flat("1.5B".parse().unwrap()))),
        )
        .unwrap()
    }

    #[test]
    fn every_check_holds_for_the_textbook() {
        for check in textbook().checks {
            assert!(check.holds, "{}: {}", check.claim, check.detail);
        }
    }

    /// Seed 001, Step 5: the swap at 1.5B saves 6 GB, a third of Adam's slice.
    #[test]
    fn swap_saves_six_gigabytes() {
        let swap = textbook().swap.unwrap();
        assert_eq!(swap.saved, Bytes(6_000_000_000));
        assert_eq!(swap.from_total, Bytes(24_000_000_000));
        assert_eq!(swap.from_slice, Bytes(18_000_000_000));
    }

    /// Seed 001, Step 3: at 7B, Adam and momentum do not fit 80 GB; SGD does.
    #[test]
    fn seven_billion_fits_only_with_sgd() {
        let comparison = textbook();
        let fits: Vec<Option<bool>> = comparison
            .rows
            .iter()
            .map(|r| r.estimates[2].fits)
            .collect();
        assert_eq!(fits, [Some(true), Some(false), Some(false), Some(false)]);
    }

    #[test]
    fn a_broken_ratio_is_reported() {
        let sizes = [Count(1000), Count(2000)];
        let models = sizes.map(Model::flat);
        let base = Setup::new(TEXTBOOK[0], *Precision::find("fp32").unwrap());
        let mut comparison = Comparison::new(TEXTBOOK, &models, &base, None).unwrap();
        comparison.rows[0].estimates[1].memory.total = Bytes(1);
        assert!(!proportional_to_parameters(&comparison.rows, &sizes).holds);
        assert!(!adam_twice_sgd(&comparison.rows).holds);
    }
}
