//! The command line: raw arguments, their resolution, and one function per command.

mod args;
mod resolve;

pub use args::Cli;

use args::{Command, CompareArgs, EstimateArgs, FitArgs};

use crate::error::{Error, Result};
use crate::estimate::{Fit, Textbook, TextbookRequest, estimate};
use crate::model::Model;
use crate::precision::Precision;
use crate::render::{self, Format};
use crate::units::Count;

/// Runs the parsed command line and returns the report for stdout.
pub fn run(cli: Cli) -> Result<String> {
    match cli.command {
        None => compare(&cli.compare),
        Some(Command::Compare(args)) => compare(&args),
        Some(Command::Estimate(args)) => estimate_command(&args),
        Some(Command::Fit(args)) => fit(&args),
        Some(Command::Optimizers(args)) => Ok(render::optimizers(Format::parse(&args.format)?)),
        Some(Command::Precisions(args)) => Ok(render::precisions(Format::parse(&args.format)?)),
        Some(Command::Devices(args)) => Ok(render::devices(Format::parse(&args.format)?)),
    }
}

fn estimate_command(args: &EstimateArgs) -> Result<String> {
    let (format, units) = resolve::report(&args.report, args.capacity.capacity.as_deref())?;
    let parameters: Count = args.params.parse()?;
    let setup = resolve::setup(&args.training, resolve::capacity(&args.capacity)?)?;
    let e = estimate(&Model::flat(parameters), &setup)?;
    Ok(render::estimate(&e, format, units))
}

fn fit(args: &FitArgs) -> Result<String> {
    let (format, units) = resolve::report(&args.report, args.capacity.capacity.as_deref())?;
    let capacity = resolve::capacity(&args.capacity)?.ok_or_else(|| Error::Missing {
        what: "capacity",
        accepted: "fit needs --capacity SIZE (such as 80GB) or --device NAME (such as h100-80gb)"
            .to_string(),
    })?;
    let setup = resolve::setup(&args.training, None)?;
    Ok(render::fit(&Fit::new(&setup, capacity)?, format, units))
}

fn compare(args: &CompareArgs) -> Result<String> {
    let capacity_text = args.capacity.as_deref().or(if args.device.is_none() {
        Some("80GB")
    } else {
        None
    });
    let (format, units) = resolve::report(&args.report, args.capacity.as_deref())?;
    let (from, to) = resolve::swap(&args.swap)?;
    let request = TextbookRequest {
        optimizers: resolve::optimizers(&args.optimizers)?,
        sizes: resolve::counts(&args.params)?,
        precision: *Precision::find(&args.precision)?,
        capacity: resolve::capacity_of(capacity_text, args.device.as_deref())?,
        swap: Some((from, to, args.swap_at.parse()?)),
        slice_sizes: resolve::counts(&args.slice_params)?,
        slice_precision: *Precision::find(&args.slice_precision)?,
    };
    Ok(render::textbook(&Textbook::new(&request)?, format, units))
}
