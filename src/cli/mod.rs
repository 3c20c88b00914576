//! The command line: raw arguments, their resolution, and one function per command.

mod args;
mod call;
mod check;
mod completions;
mod flags;
mod in_process;
mod plan;
mod plot;
mod serve;
mod techniques;
mod timeline;
mod usage;

pub use args::Cli;
pub use call::{call, commands, help};
pub use check::Checked;
pub use in_process::run_args;

pub use usage::usage_error;

use std::ffi::OsStr;

use args::{Command, CompareArgs, EstimateArgs, FitArgs, ParamsArgs, WorkloadArgs};

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::estimate::{Fit, Question, Setup, Textbook, TextbookRequest, estimate};
use crate::input::{PRESETS, load_model_os, preset_model, with_image_size, with_task};
use crate::model::Model;
use crate::precision::Precision;
use crate::render::{self, Format, ModelListing};
use crate::request::run::{Steps, resolve_run};
use crate::request::{EstimateRequest, MODEL_ACCEPTED, ModelSource, RunFlags, resolve};
use crate::units::Count;

/// Runs a command line with its clap matches: the report, the warnings for
/// stderr and the exit status (`check` says 1 when the run does not fit).
pub fn respond(cli: Cli, matches: &clap::ArgMatches) -> Result<Checked> {
    if cli.offline {
        crate::input::set_offline();
    }
    match (&cli.command, matches.subcommand()) {
        (Some(Command::Check(args)), Some(("check", check_matches))) => {
            check::run(args, check_matches)
        }
        (Some(Command::Plan(args)), Some(("plan", plan_matches))) => plan::run(args, plan_matches)
            .map(|report| Checked {
                report,
                warnings: Vec::new(),
                exit: 0,
            }),
        _ => run(cli).map(|report| Checked {
            report,
            warnings: Vec::new(),
            exit: 0,
        }),
    }
}

/// Runs the parsed command line and returns the report for stdout.
pub fn run(cli: Cli) -> Result<String> {
    match cli.command {
        Some(Command::Check(_)) => Err(Error::Missing {
            what: "command line",
            accepted:
                "check reads which flags were typed from the command line: run `trainmem check`"
                    .to_string(),
        }),
        Some(Command::Plan(_)) => Err(Error::Missing {
            what: "command line",
            accepted:
                "plan reads which flags were typed from the command line: run `trainmem plan`"
                    .to_string(),
        }),
        None => compare(&CompareArgs::defaults()?),
        Some(Command::Compare(args)) => compare(&args),
        Some(Command::Estimate(args)) => estimate_command(&args),
        Some(Command::Timeline(args)) => timeline::run(&args),
        Some(Command::Techniques(args)) => techniques::run(&args),
        Some(Command::Fit(args)) => fit(&args),
        Some(Command::Params(args)) => params(&args),
        Some(Command::Plot(args)) => plot::run(&args),
        Some(Command::Serve(args)) => serve::run(&args),
        Some(Command::Models(args)) => models(resolve::format(&args.output)?, args.verbose),
        Some(Command::Optimizers(args)) => Ok(render::optimizers(
            resolve::format(&args.output)?,
            args.verbose,
        )),
        Some(Command::Precisions(args)) => Ok(render::precisions(
            resolve::format(&args.output)?,
            args.verbose,
        )),
        Some(Command::Devices(args)) => Ok(render::devices(
            resolve::format(&args.output)?,
            args.verbose,
        )),
        Some(Command::Schema) => Ok(render::schema::ESTIMATE.to_string()),
        Some(Command::Completions(args)) => completions::run(&args),
    }
}

/// The model of `--params N` or `--model MODEL`, built for `--task` and
/// `--image-size`.
fn model_of(params: Option<&str>, model: Option<&OsStr>, workload: &WorkloadArgs) -> Result<Model> {
    let source = model.map(|spec| ModelSource::Path(spec.to_os_string()));
    crate::request::model_of(params, source.as_ref(), workload)
}

/// The typed request the `estimate` flags fill: the same one the web API
/// deserializes from JSON.
impl From<&EstimateArgs> for EstimateRequest {
    fn from(args: &EstimateArgs) -> EstimateRequest {
        EstimateRequest {
            model: args.model.clone().map(ModelSource::Path),
            params: args.params.clone(),
            flags: RunFlags {
                training: args.training.clone(),
                parallel: args.parallel.clone(),
                finetune: args.finetune.clone(),
                workload: args.workload.clone(),
                capacity: args.capacity.clone(),
                speed: args.speed.clone(),
                report: args.report.clone(),
            },
        }
    }
}

fn estimate_command(args: &EstimateArgs) -> Result<String> {
    let (model, setup, format, units) = estimate_request(args)?;
    Ok(render::estimate(&estimate(&model, &setup)?, format, units))
}

/// The model, setup, format and units the `estimate` flags ask for.
fn estimate_request(
    args: &EstimateArgs,
) -> Result<(Model, Setup, Format, crate::units::UnitSystem)> {
    EstimateRequest::from(args).resolve()
}

fn fit(args: &FitArgs) -> Result<String> {
    let (format, units) = resolve::report(&args.report, args.capacity.capacity.as_deref())?;
    let capacity = resolve::capacity(&args.capacity)?.ok_or_else(|| Error::Missing {
        what: "capacity",
        accepted: "fit needs --capacity SIZE (such as 80GB) or --device NAME (such as h100-80gb)"
            .to_string(),
    })?;
    let parallelism = resolve::parallelism(&args.parallel)?;
    let mut setup = resolve::setup(&args.training, None, parallelism)?;
    if args.model.is_none() && args.params.is_none() {
        if args.workload.micro_batch.is_some() || args.workload.seq_len.is_some() {
            return Err(Error::Missing {
                what: "model",
                accepted: format!(
                    "fit searches a micro-batch or sequence length of a model: give --model MODEL, {MODEL_ACCEPTED}; without --micro-batch and --seq-len, fit finds the largest parameter count"
                ),
            });
        }
        let fit = Fit::new(
            &Model::flat(Count(1)),
            &setup,
            capacity,
            Question::Parameters,
        )?;
        return Ok(render::fit(&fit, format, units));
    }
    let model = model_of(
        args.params.as_deref(),
        args.model.as_deref(),
        &args.workload,
    )?;
    // The quantity searched gets a placeholder of 1 in the workload.
    let filled = |workload: &WorkloadArgs| WorkloadArgs {
        micro_batch: workload.micro_batch.or(workload.seq_len.map(|_| 1)),
        seq_len: workload.seq_len.or(workload.micro_batch.map(|_| 1)),
        ..workload.clone()
    };
    let steps = Steps {
        searched: &filled,
        ..Steps::ESTIMATE
    };
    let (models, workload) = resolve_run(
        vec![model],
        &mut setup,
        &args.workload,
        &args.parallel,
        Some(&args.finetune),
        &steps,
    )?;
    let question = match (workload.micro_batch, workload.seq_len) {
        (None, Some(_)) => Question::MicroBatch,
        (Some(_), None) => Question::SeqLen,
        _ => Question::Gpus,
    };
    let model = one(models)?;
    if question != Question::Gpus && model.dimensions.is_none() {
        return Err(Error::Missing {
            what: "architecture",
            accepted: format!(
                "searching a micro-batch or sequence needs activations, and the architecture of {} is unknown: give --model with a config.json or preset, or --layers --hidden --heads --ffn --vocab",
                model.name
            ),
        });
    }
    let mut fit = Fit::new(&model, &setup, capacity, question)?;
    if !fit.found {
        fit.hint = fit_hint(args, &filled(&workload), question)?;
    }
    Ok(render::fit(&fit, format, units))
}

/// The advisor's best answer for the run `fit` priced (the searched
/// quantity at its smallest, 1), when nothing it searched fits.
fn fit_hint(
    args: &FitArgs,
    workload: &WorkloadArgs,
    question: Question,
) -> Result<Option<crate::estimate::Hint>> {
    let mut request = EstimateRequest::with_model(
        args.model.clone().map(ModelSource::Path),
        args.params.clone(),
    )?;
    request.flags.training = args.training.clone();
    request.flags.parallel = args.parallel.clone();
    request.flags.finetune = args.finetune.clone();
    request.flags.workload = workload.clone();
    request.flags.capacity = args.capacity.clone();
    request.flags.report = args.report.clone();
    // Without a workload there are no activations to advise on: no hint.
    if workload.micro_batch.is_none() || workload.seq_len.is_none() {
        return Ok(None);
    }
    let advice = crate::advisor::advise(&request)?;
    // Asked for GPUs, the best answer with more of them comes first.
    let more_gpus = |answer: &&crate::advisor::Priced| {
        answer
            .changes
            .iter()
            .any(|c| matches!(c, crate::request::Change::Gpus { .. }))
    };
    let best = match question {
        Question::Gpus => advice.answers.iter().find(more_gpus).or(advice.first()),
        _ => advice.first(),
    };
    Ok(best.map(|answer| crate::estimate::Hint {
        changes: answer
            .changes
            .iter()
            .map(crate::request::Change::words)
            .collect::<Vec<_>>()
            .join(" + "),
        flags: crate::request::change::cli_flags_all(&answer.changes, &request.flags),
        peak: answer.estimate.memory.peak,
        reserved: answer.estimate.memory.reserved,
    }))
}

/// The one model of a one-model resolution.
fn one(models: Vec<Model>) -> Result<Model> {
    models.into_iter().next().ok_or_else(|| Error::Missing {
        what: "model",
        accepted: "internal error: the resolution lost the model".to_string(),
    })
}

fn params(args: &ParamsArgs) -> Result<String> {
    let format = resolve::format(&args.output)?;
    let spec = args.model.as_deref().ok_or_else(|| Error::Missing {
        what: "model",
        accepted: format!("give MODEL, {MODEL_ACCEPTED}: `trainmem params llama-3.1-8b`"),
    })?;
    let model = match resolve::task(args.task.as_deref())? {
        Some(task) => with_task(load_model_os(spec)?, task)?,
        None => load_model_os(spec)?,
    };
    let model = match args.image_size {
        Some(image_size) => with_image_size(model, image_size)?,
        None => model,
    };
    render::params(&model, format, args.tensors)
}

fn models(format: Format, verbose: bool) -> Result<String> {
    let listings = PRESETS
        .iter()
        .map(|preset| {
            let model = preset_model(preset)?;
            let parameters = model.total_parameters()?;
            Ok(ModelListing {
                name: preset.name,
                hub_id: preset.hub_id,
                model_type: model.model_type.clone(),
                parameters,
                tensors: model.tensors.len(),
                bf16_weights: DType::Bf16.size_of(parameters)?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(render::models(&listings, format, verbose))
}

fn compare(args: &CompareArgs) -> Result<String> {
    let (format, units) = resolve::report(&args.report, args.capacity.as_deref())?;
    Ok(render::textbook(
        &Textbook::new(&textbook_request(args)?)?,
        format,
        units,
    ))
}

/// What the compare flags ask for: optimizers, models, precision, capacity
/// (80 GB unless told otherwise), the swap and the slice examples.
fn textbook_request(args: &CompareArgs) -> Result<TextbookRequest> {
    let capacity_text = args.capacity.as_deref().or(if args.device.is_none() {
        Some("80GB")
    } else {
        None
    });
    let (from, to) = resolve::swap(&args.swap)?;
    let models = match &args.model {
        Some(spec) => vec![model_of(None, Some(spec), &args.workload)?],
        None => resolve::counts(&args.params)?
            .into_iter()
            .map(Model::flat)
            .collect(),
    };
    let swap_model = match (&args.swap_at, &args.model) {
        (Some(size), _) => Model::flat(size.parse()?),
        (None, Some(_)) => models[0].clone(),
        (None, None) => Model::flat("1.5B".parse()?),
    };
    let parallelism = resolve::parallelism(&args.parallel)?;
    let optimizers = resolve::optimizers(&args.optimizers)?;
    let precision = parallelism
        .framework
        .adjust(*Precision::find(&args.precision)?);
    let mut base = Setup::new(optimizers.first().copied().unwrap_or(from), precision)
        .with_capacity(resolve::capacity_of(capacity_text, args.device.as_deref())?);
    base.parallelism = parallelism;
    let steps = Steps {
        dimensions_for: |model| !model.shapes_known,
        ..Steps::ESTIMATE
    };
    let (models, _) = resolve_run(
        models,
        &mut base,
        &args.workload,
        &args.parallel,
        None,
        &steps,
    )?;
    Ok(TextbookRequest {
        optimizers,
        models,
        base,
        swap: Some((from, to, swap_model)),
        slice_sizes: resolve::counts(&args.slice_params)?,
        slice_precision: *Precision::find(&args.slice_precision)?,
    })
}
