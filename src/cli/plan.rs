//! `trainmem plan`: the typed flags and the plan's own become the
//! [`PlanRequest`] the web API's plan builds too ([`crate::request::plan`]
//! searches it); each kept layout is printed as the `estimate` command that
//! reproduces it (the user's flags, then the layout's).

use std::ffi::OsString;

use clap::ArgMatches;

use super::args::PlanArgs;
use super::flags::explicit;
use crate::error::Result;
use crate::render;
use crate::request::EstimateRequest;
use crate::request::plan::{PlanOptions, PlanRequest, plan};

/// Runs `plan` with the matches of its command line.
pub fn run(args: &PlanArgs, matches: &ArgMatches) -> Result<String> {
    run_typed(args, &explicit(matches, "plan"))
}

/// Runs `plan` with the `estimate` flags the user gave (`typed`, each with
/// its value as given): those fix their axis of the search.
pub fn run_typed(args: &PlanArgs, typed: &[(String, Option<OsString>)]) -> Result<String> {
    let request = PlanRequest {
        estimate: EstimateRequest::from(&args.estimate),
        typed: typed.to_vec(),
        options: PlanOptions {
            allow: args.allow.clone(),
            headroom: args.headroom.clone(),
            top: args.top,
            global_batch: args.global_batch,
            jobs: args.jobs,
            exhaustive: args.exhaustive,
        },
    };
    let planned = plan(&request)?;
    let (format, units) = (planned.format, planned.units);
    Ok(render::plan::plan(&planned.found, format, units, args.top))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::args::{Cli, Command};

    /// The plan's own settings a JSON request leaves out are the command
    /// line's defaults.
    #[test]
    fn the_json_defaults_are_the_shells() {
        let cli = Cli::try_parse_from(["trainmem", "plan", "--params", "7B"]).unwrap();
        let Some(Command::Plan(args)) = cli.command else {
            panic!("not plan");
        };
        let shell = PlanOptions {
            allow: args.allow,
            headroom: args.headroom,
            top: args.top,
            global_batch: args.global_batch,
            jobs: args.jobs,
            exhaustive: args.exhaustive,
        };
        assert_eq!(shell, PlanOptions::default());
    }
}
