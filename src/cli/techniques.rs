//! `trainmem techniques`: the advisor's answers (`crate::advisor`), the
//! table of the README's "Making it fit" and of `trainmem plot --kind
//! techniques`.
//!
//! Each row is a minimal set of `estimate` flags added to the run as given,
//! alone; its peak is exactly `trainmem estimate` with them (a test checks
//! each row against the command its flags spell).

use super::args::EstimateArgs;
use crate::error::{Error, Result};
use crate::estimate::Ladder;
use crate::request::EstimateRequest;

/// The rows for the `estimate` flags in `args`.
pub fn ladder(args: &EstimateArgs) -> Result<Ladder> {
    crate::request::techniques::ladder(&EstimateRequest::from(args))
}

/// The ladder as a report, or drawn into `--output`.
pub fn run(args: &super::args::TechniquesArgs) -> Result<String> {
    let destination = args
        .output
        .as_deref()
        .map(super::plot::Destination::parse)
        .transpose()?;
    if let (Some(_), Some(format)) = (&destination, &args.estimate.report.output.format) {
        return Err(Error::InvalidValue {
            what: "--format",
            value: format.clone(),
            reason: "--output draws the steps as SVG; give --output for the chart or --format for the report, not both".to_string(),
        });
    }
    let (format, units) = super::resolve::report(
        &args.estimate.report,
        args.estimate.capacity.capacity.as_deref(),
    )?;
    let ladder = ladder(&args.estimate)?;
    match destination {
        None => Ok(crate::render::techniques(&ladder, format, units)),
        Some(destination) => {
            let chart = crate::render::svg::techniques(&ladder, units);
            super::plot::deliver(destination, &chart, || described(&ladder))
        }
    }
}

/// What the chart shows, for the line that says where it was written.
pub(super) fn described(ladder: &Ladder) -> String {
    format!(
        "the peak of {} as given and with each smallest set of changes that fits",
        ladder.model
    )
}
