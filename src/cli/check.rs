//! `trainmem check`: launch configs in, the estimate and a verdict out.
//!
//! The files' settings ([`crate::launch`]) and the flags given on the
//! command line are merged into one typed request, read as the web API
//! reads its JSON (no command line is built or parsed again): the estimate
//! of a config is, by construction, `trainmem estimate` with the flags the
//! report prints. Only flags the user typed (clap's value source) override
//! the files; clap's defaults never do.

use std::ffi::OsString;

use clap::ArgMatches;

use super::args::CheckArgs;
use super::flags::{Flags, explicit};
use crate::error::{Error, Result, shown};
use crate::estimate::{Estimate, estimate};
use crate::launch::{self, Change, Deferred, Engine, KeyKind, Launch};
use crate::render::check::{CheckReport, KeyRow, Longest, Suggestion, Verdict};
use crate::render::{self, Format};
use crate::request::change::cli_flags_all;
use crate::request::{EstimateRequest, model_of};
use crate::units::Count;

/// The report, the warnings for stderr and the exit status.
pub struct Checked {
    pub report: String,
    pub warnings: Vec<String>,
    /// 0 fits, 1 does not fit (or unknown with --strict).
    pub exit: u8,
}

/// Runs `check` with the matches of its command line.
pub fn run(args: &CheckArgs, matches: &ArgMatches) -> Result<Checked> {
    run_typed(args, &explicit(matches, "check"))
}

/// Runs `check` with the `estimate` flags the user gave (`typed`, each
/// with its value as given): they override the files' settings.
pub fn run_typed(args: &CheckArgs, typed: &[(String, Option<OsString>)]) -> Result<Checked> {
    let typed = typed.to_vec();
    let format = super::resolve::format(&args.estimate.report.output)?;
    if matches!(format, Format::Markdown | Format::Csv) {
        return Err(Error::InvalidValue {
            what: "--format",
            value: args
                .estimate
                .report
                .output
                .format
                .clone()
                .unwrap_or_default(),
            reason: "check writes table or json".to_string(),
        });
    }
    let mut launch = launch::read(&args.files)?;
    let mut flags = Flags::default();
    for sourced in &launch.settings {
        flags.set(
            sourced.setting.flag,
            sourced.setting.value.as_ref().map(OsString::from),
        );
    }
    let mut notes = Vec::new();
    resolve_deferred(&mut launch, &mut flags, &typed)?;
    for (flag, value) in &typed {
        if let Some(sourced) = launch
            .settings
            .iter()
            .rev()
            .find(|s| s.setting.flag == flag)
        {
            let key = &launch.keys[sourced.key];
            notes.push(format!(
                "{flag} on the command line overrides {} `{}`",
                key.file, key.key
            ));
        }
        flags.set(flag, value.clone());
    }
    let sharded = flags.has("--fsdp") || flags.get("--zero").is_some_and(|z| z != "0");
    if sharded && !flags.has("--gpus") {
        notes.push(
            "no file says how many GPUs run it (the launcher decides): priced on 1; give --gpus N"
                .to_string(),
        );
    }
    let parsed = flags
        .request()
        .map_err(|error| blame(error, &launch, &typed))?;
    if parsed.flags.capacity.capacity.is_none() && parsed.flags.capacity.device.is_none() {
        return Err(Error::Missing {
            what: "accelerator",
            accepted: "launch configs do not say which GPU runs them: give --device NAME (such as h100-80gb; `trainmem devices` lists them) or --capacity SIZE".to_string(),
        });
    }
    if !flags.has("--micro-batch") {
        return Err(Error::Missing {
            what: "workload",
            accepted:
                "no file names the micro-batch: give --micro-batch (activations depend on it)"
                    .to_string(),
        });
    }
    // No file and no flag names the sequence length: the data decides it
    // (torchtune's `max_seq_len: null`, a dataset that is not packed). The
    // answer is the longest sequence that fits at the config's micro-batch,
    // searched as `fit` searches it; the report prices that length.
    let longest = if flags.has("--seq-len") {
        None
    } else {
        let shortest = shortest_sequence(&flags);
        let found =
            longest_fitting(&flags, shortest).map_err(|error| blame(error, &launch, &typed))?;
        let priced_at = found.unwrap_or(shortest);
        flags.set("--seq-len", Some(OsString::from(priced_at.to_string())));
        notes.push(match found {
            Some(tokens) => format!(
                "no file names the sequence length (the data decides it): priced at the longest that fits, {} tokens; give --seq-len to check one length",
                Count(tokens).grouped()
            ),
            None => format!(
                "no file names the sequence length (the data decides it), and not even {} per sample fits: the states alone exceed the card",
                match shortest {
                    1 => "1 token".to_string(),
                    n => format!("{n} tokens, the shortest the loss takes,"),
                }
            ),
        });
        Some(Longest {
            seq_len: found,
            micro_batch: flags
                .get("--micro-batch")
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(1),
        })
    };
    let (_, units) = super::resolve::report(
        &parsed.flags.report,
        parsed.flags.capacity.capacity.as_deref(),
    )?;
    // The request as priced: the searched sequence length, when the data decides it, included.
    let priced = flags
        .request()
        .map_err(|error| blame(error, &launch, &typed))?;
    let first = price(&priced).map_err(|error| blame(error, &launch, &typed))?;
    let unknown = launch.unknown();
    let data_decides = longest.is_some_and(|l| l.seq_len.is_some());
    let verdict = match (unknown, first.fits, first.fits_allocated) {
        (true, _, _) => Verdict::Unknown,
        (false, Some(true), _) if data_decides => Verdict::FitsUpTo,
        (false, Some(true), _) => Verdict::Fits,
        (false, _, Some(true)) => Verdict::Tight,
        _ => Verdict::DoesNotFit,
    };
    let suggestions = if first.fits == Some(false) {
        suggestions(&priced, &launch, &typed).map_err(|error| blame(error, &launch, &typed))?
    } else {
        Vec::new()
    };
    let warnings = launch
        .keys
        .iter()
        .filter(|k| k.kind == KeyKind::NotModelled)
        .map(|k| match &k.value {
            Some(value) => format!(
                "{} `{}` = `{value}`: {}; the verdict is unknown",
                k.file, k.key, k.set
            ),
            None => format!("{} `{}`: {}; the verdict is unknown", k.file, k.key, k.set),
        })
        .collect();
    let report = CheckReport {
        estimate: &first,
        verdict,
        files: launch
            .files
            .iter()
            .map(|(f, format)| (f.clone(), format.name()))
            .collect(),
        keys: launch.keys.iter().map(row).collect(),
        suggestions,
        command: flags.command(),
        notes,
        longest,
    };
    let exit = match verdict {
        Verdict::Fits | Verdict::FitsUpTo => 0,
        Verdict::DoesNotFit => 1,
        Verdict::Unknown => u8::from(args.strict),
        Verdict::Tight => u8::from(!args.allow_tight),
    };
    Ok(Checked {
        report: render::check::check(&report, format, units),
        warnings,
        exit,
    })
}

/// An error about a value a file set, said with the file and the key: the
/// value the message names in backticks is matched to the setting that
/// gave it (the command line's own values are left as they are). Values
/// are matched as messages echo them, cut to a bounded length.
fn blame(error: Error, launch: &Launch, typed: &[(String, Option<OsString>)]) -> Error {
    let text = error.to_string();
    let culprit = launch.settings.iter().rev().find(|sourced| {
        let typed_here = typed.iter().any(|(flag, _)| flag == sourced.setting.flag);
        !typed_here
            && sourced.setting.value.as_ref().is_some_and(|value| {
                let value = shown(value);
                // Values are quoted `so` in trainmem's messages, 'so' in clap's.
                text.contains(&format!("`{value}`")) || text.contains(&format!("'{value}'"))
            })
    });
    match culprit {
        Some(sourced) => {
            let key = &launch.keys[sourced.key];
            let setting = match &sourced.setting.value {
                Some(value) => format!("{} {}", sourced.setting.flag, shown(value)),
                None => sourced.setting.flag.to_string(),
            };
            let value = key
                .value
                .as_ref()
                .map(|value| format!(" = `{value}`"))
                .unwrap_or_default();
            Error::File {
                path: key.file.clone(),
                problem: format!("key `{}`{value} ({setting}): {text}", key.key),
            }
        }
        None => error,
    }
}

fn row(key: &launch::KeyRecord) -> KeyRow {
    KeyRow {
        file: key.file.clone(),
        key: key.key.clone(),
        value: key.value.clone(),
        set: key.set.clone(),
        kind: match key.kind {
            KeyKind::Sets => "sets",
            KeyKind::NotModelled => "not-modelled",
            KeyKind::NoMemory => "no-memory",
            KeyKind::Ignored => "ignored",
            KeyKind::Unread => "unread",
        },
    }
}

/// Fills in the values that waited for the other files or the model.
fn resolve_deferred(
    launch: &mut Launch,
    flags: &mut Flags,
    typed: &[(String, Option<OsString>)],
) -> Result<()> {
    for (deferred, key) in launch.deferred.clone() {
        let set = match deferred {
            Deferred::Autocast { dtype, engine } => {
                let precision = flags.get("--precision");
                let amp = format!("amp-{dtype}");
                let recipe = match (engine, precision.as_deref()) {
                    // DeepSpeed's engine keeps an fp32 master copy whatever the script loads.
                    (Engine::DeepSpeed, _) => format!("mixed-{dtype}"),
                    // fp32 weights: FSDP's master copy, or autocast.
                    (Engine::Fsdp, None | Some("fp32")) => format!("mixed-{dtype}"),
                    (Engine::Fsdp, Some(p)) if p == amp => format!("mixed-{dtype}"),
                    (Engine::None, None | Some("fp32")) => format!("amp-{dtype}"),
                    // Weights loaded in half precision stay as they are.
                    (_, Some(other)) => other.to_string(),
                };
                flags.set("--precision", Some(OsString::from(&recipe)));
                // Plain autocast over half-precision weights: what fp32
                // adapters save changes (`--autocast`).
                let half_weights = engine == Engine::None && recipe == dtype;
                if half_weights {
                    flags.set("--autocast", None);
                } else if engine != Engine::None {
                    // FSDP's and DeepSpeed's mixed precision cast the
                    // weights themselves: no autocast.
                    flags.0.retain(|(flag, _)| flag != "--autocast");
                }
                format!(
                    "autocast over the weights as loaded{} -> --precision {recipe}{}",
                    match engine {
                        Engine::None => "",
                        Engine::Fsdp => ", FSDP's mixed precision",
                        Engine::DeepSpeed => ", DeepSpeed's mixed precision",
                    },
                    if half_weights { " --autocast" } else { "" }
                )
            }
            Deferred::Half(dtype) => {
                let precision = flags.get("--precision").unwrap_or_default();
                if precision == dtype
                    || precision == format!("amp-{dtype}")
                    || precision == format!("mixed-{dtype}")
                {
                    let recipe = format!("mixed-{dtype}");
                    flags.set("--precision", Some(OsString::from(&recipe)));
                    format!("auto: on, as the TrainingArguments ask -> --precision {recipe}")
                } else {
                    "auto: off, as the TrainingArguments do not ask for it".to_string()
                }
            }
            Deferred::HiddenSquared(flag) => {
                // The model the final command line names, typed flags included.
                let mut probe = flags.clone();
                for (f, v) in typed {
                    probe.set(f, v.clone());
                }
                let request = probe.request()?;
                let hidden = model_of(
                    request.params.as_deref(),
                    request.model.as_ref(),
                    &request.flags.workload,
                )
                .ok()
                .and_then(|m| m.dimensions.map(|d| d.hidden));
                match hidden.and_then(|h| h.checked_mul(h)) {
                    Some(elements) => {
                        flags.set(flag, Some(OsString::from(elements.to_string())));
                        format!("auto: hidden_size² -> {flag} {elements}")
                    }
                    None => "auto: hidden_size², unknown without the model's architecture; DeepSpeed's default is priced".to_string(),
                }
            }
        };
        if let Some(record) = launch.keys.get_mut(key) {
            record.set = set;
        }
    }
    Ok(())
}

/// The shortest sequence priced: one token per sample.
const SHORTEST_SEQUENCE: u64 = 1;

/// The shortest sequence the run takes: [`SHORTEST_SEQUENCE`], or N for
/// torchtune's chunked loss (`--loss chunked:N`), which splits every
/// sequence into N chunks (`torch.chunk` along the sequence).
fn shortest_sequence(flags: &Flags) -> u64 {
    flags
        .get("--loss")
        .and_then(|loss| loss.strip_prefix("chunked:")?.trim().parse::<u64>().ok())
        .unwrap_or(SHORTEST_SEQUENCE)
        .max(SHORTEST_SEQUENCE)
}

/// The longest sequence per sample whose step peaks within the capacity at
/// the micro-batch `flags` give ([`crate::estimate::max_seq_len`], `fit`'s
/// search: doubling, then bisection, up to 2^20 tokens); `None` when not
/// even `shortest` fits.
fn longest_fitting(flags: &Flags, shortest: u64) -> Result<Option<u64>> {
    let (model, setup, _, _) = flags
        .with(&[("--seq-len", &shortest.to_string())])
        .request()?
        .resolve()?;
    if model.dimensions.is_none() {
        // Without the architecture no activation is priced: every length
        // would "fit".
        return Err(Error::Missing {
            what: "workload",
            accepted: format!(
                "no file names the sequence length, and the architecture of {} is unknown, so the longest that fits cannot be searched: give --seq-len, or --model with a config.json or preset",
                model.name
            ),
        });
    }
    match setup.capacity.as_ref().map(|c| c.bytes) {
        Some(capacity) => Ok(crate::estimate::max_seq_len(&model, &setup, capacity)?
            .filter(|longest| *longest >= shortest)),
        None => Ok(None),
    }
}

/// The estimate of `request`.
fn price(request: &EstimateRequest) -> Result<Estimate> {
    let (model, setup, _, _) = request.resolve()?;
    estimate(&model, &setup)
}

/// The advisor's answers for the run the files spell, each spelled in
/// the keys of the file that set what it changes.
fn suggestions(
    request: &EstimateRequest,
    launch: &Launch,
    typed: &[(String, Option<OsString>)],
) -> Result<Vec<Suggestion>> {
    let advice = crate::advisor::advise(request)?;
    Ok(advice
        .answers
        .iter()
        .map(|answer| {
            let (file, key) = spelled_all(&answer.changes, &request.flags, launch, typed);
            Suggestion {
                change: answer
                    .changes
                    .iter()
                    .map(Change::words)
                    .collect::<Vec<_>>()
                    .join(" + "),
                key,
                file,
                peak: answer.estimate.memory.peak,
                reserved: answer.estimate.memory.reserved,
                category: crate::advisor::category(answer).name(),
                costs: answer.changes.iter().map(Change::cost).collect(),
                flags: cli_flags_all(&answer.changes, &request.flags),
            }
        })
        .collect())
}

/// The one place a set of changes is made: the file each change of it
/// would be written in, when that is one file, as `key: value, key:
/// value`; else the command line, as flags.
fn spelled_all(
    changes: &[Change],
    flags: &crate::request::RunFlags,
    launch: &Launch,
    typed: &[(String, Option<OsString>)],
) -> (String, String) {
    let mut ordered: Vec<&Change> = changes.iter().collect();
    ordered.sort_by_key(|c| c.slot());
    let mut current = flags.clone();
    let mut places: Vec<(String, String)> = Vec::new();
    for change in ordered {
        places.push(spelled(change, launch, typed, &change.cli_flags(&current)));
        change.apply(&mut current);
    }
    let command_line = "command line".to_string();
    match places.first() {
        Some((file, _)) if places.iter().all(|(f, _)| f == file) && *file != command_line => (
            file.clone(),
            places
                .iter()
                .map(|(_, key)| key.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        ),
        _ => (command_line, cli_flags_all(changes, flags).join(" ")),
    }
}

/// The file and keys a change is made in: the file whose keys set the
/// flags it changes, else the first file whose format has such keys, else
/// the command line.
fn spelled(
    change: &Change,
    launch: &Launch,
    typed: &[(String, Option<OsString>)],
    flags: &[String],
) -> (String, String) {
    let as_flags = || flags.join(" ");
    if change
        .flags()
        .iter()
        .any(|f| typed.iter().any(|(t, _)| t == f))
    {
        return ("command line".to_string(), as_flags());
    }
    let format_of = |file: &str| {
        launch
            .files
            .iter()
            .find(|(f, _)| f == file)
            .map(|(_, format)| *format)
    };
    let owner = change
        .flags()
        .iter()
        .find_map(|flag| launch.file_setting(flag))
        .and_then(|file| format_of(file).map(|format| (file.to_string(), format)))
        .filter(|(_, format)| format.spell(change).is_some());
    let chosen = owner.or_else(|| {
        launch
            .files
            .iter()
            .find(|(_, format)| format.spell(change).is_some())
            .map(|(file, format)| (file.clone(), *format))
    });
    match chosen.and_then(|(file, format)| format.spell(change).map(|keys| (file, keys))) {
        Some((file, keys)) => (
            file,
            keys.iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect::<Vec<_>>()
                .join(", "),
        ),
        None => ("command line".to_string(), as_flags()),
    }
}
