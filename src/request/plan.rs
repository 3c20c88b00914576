//! `trainmem plan` and the web page's plan panel (`POST /api/plan`): the
//! `estimate` flags as typed become a base setup per framework and the
//! search's axes (a typed layout flag fixes its axis); each kept layout is
//! the `estimate` command that reproduces it (the typed flags, then the
//! layout's). Both front doors fill one [`PlanRequest`]; neither goes
//! through the other's text.

use std::ffi::OsString;

use serde_json::{Map, Value};

use super::EstimateRequest;
use super::flag_list::Flags;
use crate::activation::{Loss, Recompute};
use crate::error::{Error, Result};
use crate::format::Format;
use crate::model::Model;
use crate::parallel::{Framework, Offload, ZeroStage};
use crate::plan::{Allow, Axes, Found, Request, Sharding, search};
use crate::units::{Bytes, UnitSystem};

/// A plan asked for: the run, and the search's own settings.
#[derive(Debug, Clone)]
pub struct PlanRequest {
    /// The run as typed: the model where the front door found it, and every
    /// flag (read for the cluster, the capacity, the sequence length and
    /// the report).
    pub estimate: EstimateRequest,
    /// The `estimate` flags as given, each with its value as text, in the
    /// command line's order: every layout's base, less the layout flags,
    /// which fix their axis of the search. `--model` is the words printed
    /// for the model; [`PlanRequest::estimate`] says where it is read.
    pub typed: Vec<(String, Option<OsString>)>,
    pub options: PlanOptions,
}

/// The plan's own settings, which are not `estimate` flags.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanOptions {
    /// The axes the search opens (`zero,fsdp,tp`); `None`: all but offload.
    pub allow: Option<String>,
    /// Memory each GPU keeps free: `5%` or `0.05`.
    pub headroom: String,
    /// Layouts shown in a table, Markdown or CSV report.
    pub top: usize,
    /// Sequences per optimizer step over the whole job.
    pub global_batch: Option<u64>,
    /// Worker threads for the search.
    pub jobs: usize,
    /// Price every candidate, pruning nothing.
    pub exhaustive: bool,
}

/// The command line's defaults of `--headroom`, `--top` and `--jobs`
/// (a test holds `trainmem plan`'s clap defaults to these).
impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            allow: None,
            headroom: "5%".to_string(),
            top: 10,
            global_batch: None,
            jobs: 1,
            exhaustive: false,
        }
    }
}

/// The keys of the plan's own settings in a JSON request.
pub const OWN_KEYS: &[&str] = &[
    "allow",
    "headroom",
    "top",
    "global-batch",
    "jobs",
    "exhaustive",
];

/// What a plan searched and found, and how its report is to be written
/// (each front door hands these to `render::plan`).
pub struct Planned {
    pub found: Found,
    pub format: Format,
    pub units: UnitSystem,
}

/// The `estimate` flags a layout sets: typed, they fix their axis.
const LAYOUT: &[&str] = &[
    "--framework",
    "--zero",
    "--fsdp",
    "--tp",
    "--pp",
    "--ep",
    "--cp",
    "--sequence-parallel",
    "--offload",
    "--recompute",
    "--recompute-every",
    "--loss",
    "--offload-activations",
    "--micro-batch",
    "--grad-accumulation",
];

/// Flags that change how a report is written, not what is priced.
const REPORT: &[&str] = &["--format", "--units"];

/// Micro-batches tried without --global-batch: powers of two up to this.
const MAX_MICRO_BATCH: u64 = 128;

/// The most GPUs a plan searches: their divisors are enumerated, and a
/// million-GPU cluster is beyond any published run.
const MAX_GPUS: u64 = 1 << 20;

/// The largest --global-batch: each layout's micro-batches are its divisors.
const MAX_GLOBAL_BATCH: u64 = 1 << 24;

/// The most parallel structures a search enumerates before refusing:
/// bounded work and memory whatever the flags.
const MAX_STRUCTURES: usize = 1_000_000;

/// The layouts that fit for `request`, fastest first.
pub fn plan(request: &PlanRequest) -> Result<Planned> {
    let typed = &request.typed;
    let args = &request.options;
    let estimate = &request.estimate.flags;
    let (format, units) =
        super::resolve::report(&estimate.report, estimate.capacity.capacity.as_deref())?;
    let typed_value = |flag: &str| {
        typed
            .iter()
            .rev()
            .find(|(f, _)| f == flag)
            .map(|(_, v)| v.as_ref().map(|v| v.to_string_lossy().into_owned()))
    };
    let mut base = Flags::default();
    for (flag, value) in typed {
        if !LAYOUT.contains(&flag.as_str()) && !REPORT.contains(&flag.as_str()) {
            base.set(flag, value.clone());
        }
    }
    let parallel = &estimate.parallel;
    let gpus = match (
        typed_value("--gpus"),
        parallel.nodes,
        parallel.gpus_per_node,
    ) {
        (Some(_), _, _) => parallel.gpus,
        (None, Some(nodes), Some(per_node)) => {
            let gpus = nodes
                .checked_mul(per_node)
                .ok_or_else(|| Error::InvalidValue {
                    what: "--nodes",
                    value: format!("{nodes} x --gpus-per-node {per_node}"),
                    reason: "the GPU count overflows".to_string(),
                })?;
            base.set("--gpus", Some(OsString::from(gpus.to_string())));
            gpus
        }
        _ => {
            return Err(Error::Missing {
                what: "cluster",
                accepted: "plan needs --gpus N, or --nodes K with --gpus-per-node G".to_string(),
            });
        }
    };
    if gpus > MAX_GPUS {
        return Err(Error::InvalidValue {
            what: "--gpus",
            value: gpus.to_string(),
            reason: format!("plan searches clusters of up to {MAX_GPUS} GPUs"),
        });
    }
    if let Some(batch) = args.global_batch
        && batch > MAX_GLOBAL_BATCH
    {
        return Err(Error::InvalidValue {
            what: "--global-batch",
            value: batch.to_string(),
            reason: format!("at most {MAX_GLOBAL_BATCH} sequences per step"),
        });
    }
    if estimate.workload.seq_len.is_none() {
        return Err(Error::Missing {
            what: "--seq-len",
            accepted: "plan prices each layout's activations: give --seq-len S".to_string(),
        });
    }
    let capacity = super::resolve::capacity(&estimate.capacity)?.ok_or_else(|| Error::Missing {
        what: "capacity",
        accepted: "plan keeps the layouts that fit: give --device NAME (such as h100-80gb) or --capacity SIZE".to_string(),
    })?;
    if args.global_batch.is_some() && typed_value("--grad-accumulation").is_some() {
        return Err(Error::InvalidValue {
            what: "--grad-accumulation",
            value: estimate.workload.grad_accumulation.to_string(),
            reason: "--global-batch sets each layout's accumulation (B / (dp x micro-batch)): drop one of them".to_string(),
        });
    }
    let allow = match &args.allow {
        Some(list) => Allow::parse(list)?,
        None => Allow::DEFAULT,
    };
    let headroom = headroom_basis_points(&args.headroom)?;
    let usable = Bytes(
        u64::try_from(u128::from(capacity.bytes.0) * u128::from(10_000 - headroom) / 10_000)
            .unwrap_or(u64::MAX),
    );
    if args.jobs == 0 || args.jobs > 1024 {
        return Err(Error::InvalidValue {
            what: "--jobs",
            value: args.jobs.to_string(),
            reason: "give 1 to 1024 worker threads".to_string(),
        });
    }

    // One base setup per framework searched, the user's flags parsed as
    // `estimate` parses them (the framework decides how the recipe is kept).
    let frameworks = frameworks(typed_value("--framework").flatten(), &allow, &typed_value)?;
    let mut notes = Vec::new();
    let mut bases = Vec::new();
    let mut model: Option<Model> = None;
    for framework in &frameworks {
        let flags = base.with(&[("--framework", framework.name()), ("--micro-batch", "1")]);
        let mut built = flags.request()?;
        // The model where the front door found it: a path only from the
        // command line, a preset, hub id or pasted config from the server.
        built.model = request.estimate.model.clone();
        let (m, setup, _, _) = built.resolve()?;
        if model.is_none() {
            model = Some(m);
        }
        bases.push((*framework, setup));
    }
    let model = model.ok_or_else(|| Error::Missing {
        what: "framework",
        accepted: "--allow names no framework: add zero, fsdp or megatron".to_string(),
    })?;
    if model.dimensions.is_none() {
        return Err(Error::Missing {
            what: "architecture",
            accepted: format!(
                "plan prices activations, and the architecture of {} is unknown: give --model with a config.json or preset",
                model.name
            ),
        });
    }
    let sizes = crate::parallel::Splittable::of(&model);
    let nodes = bases
        .first()
        .map_or(1, |(_, setup)| setup.parallelism.nodes);
    let per_node = (gpus / nodes.max(1)).max(1);
    let fixed = |flag: &str| -> Result<Option<u64>> {
        typed_value(flag)
            .flatten()
            .map(|v| {
                v.parse::<u64>().map_err(|_| Error::InvalidValue {
                    what: "layout",
                    value: format!("{flag} {v}"),
                    reason: "a positive whole number".to_string(),
                })
            })
            .transpose()
    };
    let degrees = |flag: &str, open: bool, all: Vec<u64>| -> Result<Vec<u64>> {
        Ok(match fixed(flag)? {
            Some(v) => vec![v],
            None if open => all,
            None => vec![1],
        })
    };
    let seq_len = estimate.workload.seq_len.unwrap_or(1);
    let tensor = degrees(
        "--tp",
        allow.tp,
        crate::plan::divisors(per_node)
            .into_iter()
            .filter(|d| gpus.is_multiple_of(*d))
            .collect(),
    )?;
    let pipeline = degrees(
        "--pp",
        allow.pp,
        match sizes.layers {
            Some(layers) => crate::plan::divisors(layers)
                .into_iter()
                .filter(|d| gpus.is_multiple_of(*d))
                .collect(),
            None => vec![1],
        },
    )?;
    let context = degrees(
        "--cp",
        allow.cp,
        crate::plan::divisors(gpus)
            .into_iter()
            .filter(|cp| seq_len.is_multiple_of(2 * cp) || *cp == 1)
            .collect(),
    )?;
    let experts = sizes.experts.unwrap_or(0);
    if allow.ep && args.allow.is_some() && experts == 0 {
        notes.push(format!(
            "--allow ep: {} has no routed experts to split, so expert parallelism stays 1",
            model.name
        ));
    }
    let expert = degrees(
        "--ep",
        allow.ep && experts > 0,
        crate::plan::divisors(experts.max(1)),
    )?;
    let shardings = shardings(&frameworks, nodes, &typed_value)?;
    let sequence_parallel = match typed_value("--sequence-parallel") {
        Some(_) => vec![true],
        None if allow.sp => vec![false, true],
        None => vec![false],
    };
    let offload = match typed_value("--offload").flatten() {
        Some(v) => vec![Offload::parse(&v)?],
        None if allow.offload => vec![
            Offload::None,
            Offload::Optimizer,
            Offload::OptimizerAndParams,
        ],
        None => vec![Offload::None],
    };
    let every = fixed("--recompute-every")?;
    let recompute = match typed_value("--recompute").flatten() {
        Some(v) => vec![(Recompute::parse(&v)?, every.unwrap_or(1))],
        None if allow.recompute => vec![
            (Recompute::None, 1),
            (Recompute::Selective, 1),
            (Recompute::Op, 1),
            (Recompute::Full, 1),
            (Recompute::Full, 2),
            (Recompute::Full, 4),
        ],
        None => vec![(Recompute::None, 1)],
    };
    let loss = match typed_value("--loss").flatten() {
        Some(v) => vec![Loss::parse(&v)?],
        None if allow.loss => vec![Loss::Standard, Loss::Chunked(8), Loss::Fused],
        None => vec![Loss::Standard],
    };
    let offload_activations = match typed_value("--offload-activations") {
        Some(_) => vec![true],
        None if allow.offload => vec![false, true],
        None => vec![false],
    };
    let micro_batches = match fixed("--micro-batch")? {
        Some(v) => vec![v],
        None => std::iter::successors(Some(1u64), |b| Some(b * 2))
            .take_while(|b| *b <= MAX_MICRO_BATCH)
            .collect(),
    };
    let axes = Axes {
        gpus,
        nodes,
        shardings,
        tensor,
        pipeline,
        context,
        expert,
        sequence_parallel,
        offload,
        recompute,
        loss,
        offload_activations,
        micro_batches,
        global_batch: args.global_batch,
        accumulation: estimate.workload.grad_accumulation,
    };
    let bound = [
        axes.tensor.len(),
        axes.pipeline.len(),
        axes.context.len(),
        axes.expert.len(),
        axes.shardings.len(),
        axes.offload.len(),
    ]
    .iter()
    .try_fold(1usize, |product, n| product.checked_mul(*n))
    .unwrap_or(usize::MAX);
    if bound > MAX_STRUCTURES {
        return Err(Error::InvalidValue {
            what: "plan",
            value: format!("{bound} parallel structures"),
            reason: format!(
                "more than {MAX_STRUCTURES} to search: fix a degree (--tp, --pp, --cp, --ep) or narrow --allow"
            ),
        });
    }
    let search_request = Request {
        bases,
        axes,
        usable,
        capacity: capacity.bytes,
        top: args.top,
        jobs: args.jobs,
        prune: !args.exhaustive,
        model: &model,
    };
    let outcome = search(&search_request)?;
    if outcome.candidates == 0 {
        return Err(Error::InvalidValue {
            what: "plan",
            value: match args.global_batch {
                Some(batch) => format!("--global-batch {batch} on {gpus} GPUs"),
                None => format!("{gpus} GPUs"),
            },
            reason: if let Some(refusal) = &outcome.refusal {
                format!(
                    "no layout is accepted; the first refused says: {}",
                    refusal.trim_start_matches("error: ")
                )
            } else if outcome.batch_mismatch > 0 {
                "no layout's data-parallel degree divides the global batch: give a global batch that is a multiple of the data-parallel degrees (a power of two usually is)".to_string()
            } else {
                "no layout of the allowed axes is accepted for this model: widen --allow, or drop a fixed layout flag".to_string()
            },
        });
    }
    if outcome.batch_mismatch > 0 {
        notes.push(format!(
            "{} parallel structures skipped: their data-parallel degree does not divide --global-batch {}",
            outcome.batch_mismatch,
            args.global_batch.unwrap_or(0)
        ));
    }
    if outcome.tight > 0 {
        notes.push(format!(
            "{} layout{} ranked among the first left out: the allocated peak fits, the reserved memory (the caching allocator simulated, as `estimate` judges fits) does not",
            outcome.tight,
            if outcome.tight == 1 { "" } else { "s" },
        ));
    }
    if outcome.reserve_exhausted {
        notes.push(format!(
            "{} caching-allocator simulations found only {} rows that fit on reserved memory: fewer rows shown",
            outcome.reserve_simulations,
            outcome.shown.len(),
        ));
    }
    if !allow.offload {
        notes.push("offload not searched (--allow offload searches it, its host transfers and CPU optimizer step priced)".to_string());
    }
    Ok(Planned {
        found: Found {
            model: model.name.clone(),
            gpus,
            nodes,
            capacity,
            headroom_basis_points: headroom,
            usable,
            base_flags: base
                .words()
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            outcome,
            notes,
        },
        format,
        units,
    })
}

impl PlanRequest {
    /// The plan a JSON object asks for (the web API's): the plan's own keys
    /// ([`OWN_KEYS`]) taken out of `object`, the rest the `estimate` keys of
    /// `estimate` (the request `object` made, its model already checked by
    /// the front door). Each key becomes its flag with its value as text
    /// (a number's digits; `true` a switch; a list one flag a value), in the
    /// command line's order, so that the layouts print as `trainmem plan`
    /// prints them. A pasted config.json prints as `--model config.json`.
    pub fn from_json(
        mut object: Map<String, Value>,
        estimate: EstimateRequest,
    ) -> Result<PlanRequest> {
        let options = PlanOptions::from_json(&mut object)?;
        let mut typed: Vec<(String, Option<OsString>)> = Vec::new();
        for (key, value) in &object {
            let long = super::key_named(key)?;
            let flag = match long {
                super::CONFIG => {
                    if !value.is_null() {
                        typed.push(("--model".to_string(), Some(OsString::from("config.json"))));
                    }
                    continue;
                }
                "format" => continue,
                _ => format!("--{long}"),
            };
            let items = match value {
                Value::Array(items) => items.iter().collect(),
                other => vec![other],
            };
            for item in items {
                match item {
                    Value::Null | Value::Bool(false) => {}
                    Value::Bool(true) => typed.push((flag.clone(), None)),
                    Value::String(text) => typed.push((flag.clone(), Some(OsString::from(text)))),
                    Value::Number(n) => {
                        typed.push((flag.clone(), Some(OsString::from(n.to_string()))));
                    }
                    other => {
                        return Err(Error::InvalidValue {
                            what: "request",
                            value: format!("`{key}`: {other}"),
                            reason: "takes text, a number, `true` or a list of them".to_string(),
                        });
                    }
                }
            }
        }
        // In the command line's order (`--params`, `--model`, then the run
        // flags as declared), as clap's matches list them.
        let order: Vec<&str> = [super::PARAMS, super::MODEL]
            .into_iter()
            .chain(
                super::command()
                    .get_arguments()
                    .filter_map(|a| a.get_long()),
            )
            .collect();
        let position = |flag: &str| {
            order
                .iter()
                .position(|long| Some(*long) == flag.strip_prefix("--"))
        };
        typed.sort_by_key(|(flag, _)| position(flag));
        Ok(PlanRequest {
            estimate,
            typed,
            options,
        })
    }
}

impl PlanOptions {
    /// The plan's own keys, taken out of `object`; the command line's
    /// defaults for those not given.
    pub fn from_json(object: &mut Map<String, Value>) -> Result<PlanOptions> {
        let mut options = PlanOptions::default();
        let keys: Vec<String> = object.keys().cloned().collect();
        for key in keys {
            let long = key.trim().to_ascii_lowercase().replace('_', "-");
            let Some(own) = OWN_KEYS.iter().find(|k| **k == long) else {
                continue;
            };
            let Some(value) = object.remove(&key) else {
                continue;
            };
            let text = match &value {
                Value::Null => continue,
                Value::String(text) => text.trim().to_string(),
                Value::Number(n) => n.to_string(),
                Value::Bool(on) => on.to_string(),
                other => other.to_string(),
            };
            let invalid = |reason: &str| Error::InvalidValue {
                what: own,
                value: text.clone(),
                reason: reason.to_string(),
            };
            match *own {
                "allow" => options.allow = Some(text.clone()),
                "headroom" => options.headroom = text.clone(),
                "top" => options.top = text.parse().map_err(|_| invalid("a whole number"))?,
                "jobs" => options.jobs = text.parse().map_err(|_| invalid("a whole number"))?,
                "global-batch" => {
                    options.global_batch =
                        Some(super::at_least_one(&text).map_err(|reason| invalid(&reason))?);
                }
                _ => {
                    options.exhaustive = match value {
                        Value::Bool(on) => on,
                        _ => return Err(invalid("`true` or `false`")),
                    }
                }
            }
        }
        Ok(options)
    }
}

/// The frameworks searched: the one typed, or those `--allow` opens.
fn frameworks(
    typed: Option<String>,
    allow: &Allow,
    typed_value: &dyn Fn(&str) -> Option<Option<String>>,
) -> Result<Vec<Framework>> {
    if let Some(name) = typed {
        return Ok(vec![Framework::parse(&name)?]);
    }
    if typed_value("--fsdp").is_some() {
        return Ok(vec![Framework::Fsdp2]);
    }
    let mut out = Vec::new();
    let zero_typed = typed_value("--zero").flatten();
    if allow.zero {
        out.push(Framework::DeepSpeed);
    }
    // bitsandbytes' 4-bit and 8-bit weights run through transformers and
    // peft (DeepSpeed, FSDP), not Megatron-core.
    let quantized = typed_value("--quantize").is_some();
    if allow.megatron && !quantized && zero_typed.as_deref().is_none_or(|z| z == "0" || z == "1") {
        out.push(Framework::Megatron);
    }
    if allow.fsdp && zero_typed.is_none() {
        out.push(Framework::Fsdp2);
    }
    if out.is_empty() {
        return Err(Error::InvalidValue {
            what: "--allow",
            value: "(no framework)".to_string(),
            reason: "name at least one framework to shard with: zero, fsdp or megatron".to_string(),
        });
    }
    Ok(out)
}

/// The shardings of the frameworks searched, narrowed by a typed --zero or --fsdp.
fn shardings(
    frameworks: &[Framework],
    nodes: u64,
    typed_value: &dyn Fn(&str) -> Option<Option<String>>,
) -> Result<Vec<Sharding>> {
    let zero = typed_value("--zero")
        .flatten()
        .map(|z| ZeroStage::parse(&z))
        .transpose()?;
    let fsdp = typed_value("--fsdp")
        .flatten()
        .map(|s| ZeroStage::from_fsdp(&s))
        .transpose()?;
    Ok(frameworks
        .iter()
        .flat_map(|f| Sharding::all_of(*f, nodes))
        .filter(|s| zero.is_none_or(|z| s.zero == z))
        .filter(|s| fsdp.is_none_or(|(z, hybrid)| s.zero == z && s.hybrid == hybrid))
        .collect())
}

/// `--headroom`: `5%` or `0.05`, in basis points below 10,000.
fn headroom_basis_points(text: &str) -> Result<u64> {
    let invalid = || Error::InvalidValue {
        what: "--headroom",
        value: text.to_string(),
        reason: "a share of the capacity from 0 to under 100%: such as 5% or 0.05".to_string(),
    };
    let fraction = crate::request::resolve::share(text).ok_or_else(invalid)?;
    if !(fraction.is_finite() && (0.0..1.0).contains(&fraction)) {
        return Err(invalid());
    }
    Ok((fraction * 10_000.0).round().min(9_999.0) as u64)
}
