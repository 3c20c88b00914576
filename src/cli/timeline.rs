//! `trainmem timeline`: the step timeline behind `estimate`'s peak.

use super::args::TimelineArgs;
use super::estimate_request;
use super::plot::{Destination, write_atomically};
use crate::error::{Error, Result};
use crate::render;

/// The timeline as a report, or drawn into `--output`.
pub fn run(args: &TimelineArgs) -> Result<String> {
    let destination = args.output.as_deref().map(Destination::parse).transpose()?;
    if let (Some(_), Some(format)) = (&destination, &args.estimate.report.output.format) {
        return Err(Error::InvalidValue {
            what: "--format",
            value: format.clone(),
            reason: "--output draws the timeline as SVG; give --output for the chart or --format for the report, not both".to_string(),
        });
    }
    let (model, setup, format, units) = estimate_request(&args.estimate)?;
    let (estimate, timeline) = crate::estimate::timeline(&model, &setup)?;
    match destination {
        None => Ok(render::timeline(
            &estimate,
            &timeline,
            format,
            units,
            args.events,
        )),
        Some(destination) => {
            let chart = render::svg::timeline(&estimate, &timeline, units);
            match destination {
                Destination::Stdout => Ok(chart),
                Destination::File(path) => {
                    write_atomically(path, &chart)?;
                    let wrote = format!(
                        "wrote {}: the step timeline of {}, peak {} ({})",
                        path.display(),
                        estimate.model.name,
                        timeline.peak.bytes.display(units),
                        render::peak_moment(&timeline.peak)
                    );
                    Ok(format!("{}\n", render::escape(&wrote)))
                }
            }
        }
    }
}
