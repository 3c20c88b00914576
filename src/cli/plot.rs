//! `trainmem plot`: the comparison drawn as an SVG file.

use std::io::Write;
use std::path::Path;

use super::args::{CompareArgs, EstimateArgs, PlotArgs};
use super::{resolve, textbook_request};
use crate::error::{Error, Result};
use crate::estimate::{Comparison, TextbookRequest};
use crate::model::Model;
use crate::optimizer::Optimizer;
use crate::render::svg;
use crate::units::Count;

/// The left end of the scaling chart's size axis unless a model is smaller:
/// 100M, about GPT-2 small.
const SCALING_FROM: u64 = 100_000_000;
/// The scaling chart runs to this multiple of the largest threshold (or model).
const SCALING_REACH: u64 = 2;
/// Sizes priced along the scaling chart's axis, per decade: the R10
/// preferred numbers (ISO 3), whole numbers, so the chart is the same on
/// every machine.
const SCALING_STEPS: [u64; 10] = [100, 125, 160, 200, 250, 315, 400, 500, 630, 800];

/// What to draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Breakdown,
    Scaling,
    Techniques,
}

impl Kind {
    fn parse(name: &str) -> Result<Kind> {
        match name.trim().to_ascii_lowercase().as_str() {
            "breakdown" => Ok(Kind::Breakdown),
            "scaling" => Ok(Kind::Scaling),
            "techniques" => Ok(Kind::Techniques),
            _ => Err(Error::UnknownName {
                kind: "chart kind",
                name: name.to_string(),
                suggestion: None,
                accepted: "breakdown, scaling, techniques".to_string(),
            }),
        }
    }
}

/// Where the chart goes: a file ending in `.svg`, or stdout for `-`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Destination<'a> {
    Stdout,
    File(&'a Path),
}

impl Destination<'_> {
    pub(super) fn parse(path: &Path) -> Result<Destination<'_>> {
        if path.as_os_str() == "-" {
            return Ok(Destination::Stdout);
        }
        match path.extension() {
            Some(extension) if extension.eq_ignore_ascii_case("svg") => Ok(Destination::File(path)),
            _ => Err(Error::InvalidValue {
                what: "--output",
                value: path.to_string_lossy().into_owned(),
                reason: "plot draws SVG only: give a file name ending in .svg, such as chart.svg, or - for stdout".to_string(),
            }),
        }
    }
}

/// The one format a chart has; `--format` is shared with `compare`, so
/// anything else is refused rather than ignored.
fn check_format(format: Option<&str>) -> Result<()> {
    match format {
        None => Ok(()),
        Some(name) if name.trim().eq_ignore_ascii_case("svg") => Ok(()),
        Some(name) => Err(Error::InvalidValue {
            what: "--format",
            value: name.to_string(),
            reason: "plot draws svg only; for the figures as a table, json, markdown or csv, run `trainmem compare` with the same flags".to_string(),
        }),
    }
}

/// Writes the chart and returns the line to print, or returns the chart
/// itself for `--output -`.
pub fn run(args: &PlotArgs) -> Result<String> {
    check_format(args.compare.report.output.format.as_deref())?;
    let destination = Destination::parse(&args.output)?;
    let kind = Kind::parse(&args.kind)?;
    let units = resolve::units(&args.compare.report, args.compare.capacity.as_deref())?;
    let compare = || -> Result<(TextbookRequest, Comparison)> {
        let request = textbook_request(&args.compare)?;
        let compared = Comparison::new(&request.optimizers, &request.models, &request.base, None)?;
        Ok((request, compared))
    };
    let (chart, what) = match kind {
        Kind::Techniques => {
            let ladder = super::techniques::ladder(&techniques_args(&args.compare)?)?;
            (
                svg::techniques(&ladder, units),
                super::techniques::described(&ladder),
            )
        }
        Kind::Breakdown => {
            let (_, compared) = compare()?;
            (
                svg::breakdown(&compared, units),
                format!(
                    "memory breakdown of {} optimizers at {}",
                    compared.rows.len(),
                    compared.labels.last().cloned().unwrap_or_default()
                ),
            )
        }
        Kind::Scaling => {
            let (request, compared) = compare()?;
            let grid = scaling_grid(&request, &compared)?;
            let models: Vec<(Count, String)> = compared
                .sizes
                .iter()
                .copied()
                .zip(compared.labels.iter().cloned())
                .collect();
            (
                svg::scaling(&grid, &models, units),
                format!(
                    "memory of {} optimizers from {} to {} parameters",
                    grid.rows.len(),
                    grid.sizes.first().map(|s| s.short()).unwrap_or_default(),
                    grid.sizes.last().map(|s| s.short()).unwrap_or_default()
                ),
            )
        }
    };
    deliver(destination, &chart, || what)
}

/// The chart itself for `--output -`; otherwise writes it and returns the
/// line that says so, `what` it shows.
pub(super) fn deliver(
    destination: Destination,
    chart: &str,
    what: impl FnOnce() -> String,
) -> Result<String> {
    match destination {
        Destination::Stdout => Ok(chart.to_string()),
        Destination::File(path) => {
            write_atomically(path, chart)?;
            let wrote = format!("wrote {}: {}", path.display(), what());
            Ok(format!("{}\n", crate::render::escape(&wrote)))
        }
    }
}

/// `trainmem techniques`' flags from plot's: the one optimizer, the model,
/// the precision, the capacity, the layout and the workload.
fn techniques_args(compare: &CompareArgs) -> Result<EstimateArgs> {
    let optimizers: Vec<&str> = compare.optimizers.split(',').map(str::trim).collect();
    let [optimizer] = optimizers.as_slice() else {
        return Err(Error::InvalidValue {
            what: "--optimizer",
            value: compare.optimizers.clone(),
            reason: "plot --kind techniques prices one run: give one optimizer, such as --optimizer adamw".to_string(),
        });
    };
    if compare.model.is_none() {
        return Err(Error::Missing {
            what: "--model",
            accepted: "plot --kind techniques prices one model: give --model, such as --model llama-3.1-8b".to_string(),
        });
    }
    // `estimate`'s own defaults, as if no flag were given: the typed
    // request's, the ones the web API and the keyword door start from.
    let defaults = crate::request::EstimateRequest::with_model(None, None)?.flags;
    let mut args = EstimateArgs {
        params: None,
        model: compare.model.clone(),
        training: defaults.training,
        parallel: compare.parallel.clone(),
        finetune: defaults.finetune,
        workload: compare.workload.clone(),
        capacity: defaults.capacity,
        speed: defaults.speed,
        report: compare.report.clone(),
    };
    args.training.optimizer = (*optimizer).to_string();
    args.training.precision = compare.precision.clone();
    args.capacity.capacity = compare.capacity.clone();
    args.capacity.device = compare.device.clone();
    Ok(args)
}

/// The same optimizers, precision and capacity priced over log-spaced flat
/// models (ten a decade), from 100M (or a decade below the smallest model) to twice the
/// largest threshold (or model).
fn scaling_grid(request: &TextbookRequest, compared: &Comparison) -> Result<Comparison> {
    let smallest = compared
        .sizes
        .iter()
        .map(|s| s.0)
        .min()
        .unwrap_or(SCALING_FROM);
    let from = if smallest >= SCALING_FROM {
        SCALING_FROM
    } else {
        10u64.pow(smallest.max(1).ilog10())
    };
    let largest = compared
        .rows
        .iter()
        .filter_map(|row| row.max_parameters.map(|m| m.0))
        .chain(compared.sizes.iter().map(|s| s.0))
        .max()
        .unwrap_or(SCALING_FROM);
    let to = largest
        .saturating_mul(SCALING_REACH)
        .max(from.saturating_mul(10));
    let mut sizes = vec![Count(from)];
    let mut decade = (from / 100).max(1);
    while decade <= to / 100 {
        sizes.extend(
            SCALING_STEPS
                .iter()
                .filter_map(|step| step.checked_mul(decade))
                .filter(|size| *size > from && *size < to)
                .map(Count),
        );
        decade = match decade.checked_mul(10) {
            Some(next) => next,
            None => break,
        };
    }
    sizes.push(Count(to));
    let models: Vec<Model> = sizes.into_iter().map(Model::flat).collect();
    let price = |optimizer: &'static Optimizer, count: usize| {
        Comparison::new(&[optimizer], &models[..count], &request.base, None)
    };
    // Each optimizer is priced as far up the grid as 64-bit bytes reach: a
    // rule quadratic in a tensor's size (Shampoo on one flat vector)
    // overflows long before the others, and its line then stops early.
    let mut grid: Option<Comparison> = None;
    let mut rows = Vec::new();
    for optimizer in &request.optimizers {
        let priced = match price(optimizer, models.len()) {
            Err(Error::Overflow { .. }) => {
                let (mut fits, mut overflows) = (0, models.len());
                let mut best = None;
                while overflows - fits > 1 {
                    let middle = (fits + overflows) / 2;
                    match price(optimizer, middle) {
                        Ok(comparison) => (fits, best) = (middle, Some(comparison)),
                        Err(Error::Overflow { .. }) => overflows = middle,
                        Err(error) => return Err(error),
                    }
                }
                match best {
                    Some(comparison) => comparison,
                    None => continue,
                }
            }
            other => other?,
        };
        rows.extend(priced.rows.iter().cloned());
        if grid
            .as_ref()
            .is_none_or(|g| g.sizes.len() < priced.sizes.len())
        {
            grid = Some(priced);
        }
    }
    let mut grid = grid.ok_or_else(|| Error::overflow("every optimizer's memory on the chart"))?;
    // Cheapest first at the largest size every line reaches, as compare ranks them.
    let shared = rows.iter().map(|r| r.estimates.len()).min().unwrap_or(0);
    rows.sort_by_key(|row| shared.checked_sub(1).map(|i| row.estimates[i].memory.total));
    grid.rows = rows;
    Ok(grid)
}

/// Writes `text` to a temporary file beside `path`, then renames it over
/// `path`: a reader sees the old file or the whole new one, never half.
pub(super) fn write_atomically(path: &Path, text: &str) -> Result<()> {
    let failed = |problem: String| Error::File {
        path: path.display().to_string(),
        problem,
    };
    let name = path
        .file_name()
        .ok_or_else(|| failed("not a file name; give a path such as chart.svg".to_string()))?;
    let folder = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let temporary = folder.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = std::fs::File::create(&temporary)
        .and_then(|mut file| {
            file.write_all(text.as_bytes())?;
            file.sync_all()
        })
        .and_then(|()| std::fs::rename(&temporary, path));
    written.map_err(|error| {
        let _ = std::fs::remove_file(&temporary);
        failed(format!("cannot write: {error}"))
    })
}
