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
use crate::render::check::{CheckReport, KeyRow, Suggestion, Verdict};
use crate::render::{self, Format};
use crate::request::model_of;

/// The report, the warnings for stderr and the exit status.
pub struct Checked {
    pub report: String,
    pub warnings: Vec<String>,
    /// 0 fits, 1 does not fit (or unknown with --strict).
    pub exit: u8,
}

/// Runs `check` with the matches of its command line.
pub fn run(args: &CheckArgs, matches: &ArgMatches) -> Result<Checked> {
    run_typed(args, &explicit(matches, "check", &["strict"]))
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
    for (flag, what) in [
        ("--micro-batch", "micro-batch"),
        ("--seq-len", "sequence length"),
    ] {
        if !flags.has(flag) {
            return Err(Error::Missing {
                what: "workload",
                accepted: format!(
                    "no file names the {what}: give {flag} (activations depend on it)"
                ),
            });
        }
    }
    let (_, units) = super::resolve::report(
        &parsed.flags.report,
        parsed.flags.capacity.capacity.as_deref(),
    )?;
    let first = price(&flags).map_err(|error| blame(error, &launch, &typed))?;
    let unknown = launch.unknown();
    let verdict = match (unknown, first.fits) {
        (true, _) => Verdict::Unknown,
        (false, Some(true)) => Verdict::Fits,
        _ => Verdict::DoesNotFit,
    };
    let suggestions = if first.fits == Some(false) {
        suggestions(&flags, &launch, &typed)
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
    };
    let exit = match verdict {
        Verdict::Fits => 0,
        Verdict::DoesNotFit => 1,
        Verdict::Unknown => u8::from(args.strict),
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
                format!(
                    "autocast over the weights as loaded{} -> --precision {recipe}",
                    match engine {
                        Engine::None => "",
                        Engine::Fsdp => ", FSDP's mixed precision",
                        Engine::DeepSpeed => ", DeepSpeed's mixed precision",
                    }
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

/// The estimate `flags` spell.
fn price(flags: &Flags) -> Result<Estimate> {
    let (model, setup, _, _) = flags.request()?.resolve()?;
    estimate(&model, &setup)
}

/// A change tried: what it is, in words, and the flags it sets.
struct Candidate {
    change: Change,
    words: String,
    flags: Vec<(String, String)>,
}

/// Each change tried, in the order they cost the run least: first those that
/// keep the same maths (a smaller micro-batch with more accumulation, a
/// fused loss, recomputation, which costs about a third more compute,
/// activations offloaded over PCIe), then sharding
/// (more communication, with more than one GPU), then offloading the
/// optimizer (host memory and PCIe time), then changes to what is trained
/// (8-bit optimizer states, LoRA, QLoRA).
fn candidates(flags: &Flags) -> Vec<Candidate> {
    let number = |flag: &str, default: u64| {
        flags
            .get(flag)
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(default)
    };
    let candidate = |change: Change, words: String, pairs: &[(&str, &str)]| Candidate {
        change,
        words,
        flags: pairs
            .iter()
            .map(|(f, v)| (f.to_string(), v.to_string()))
            .collect(),
    };
    let mut out = Vec::new();
    let micro_batch = number("--micro-batch", 1);
    let accumulation = number("--grad-accumulation", 1);
    for smaller in (1..micro_batch).rev().filter(|m| micro_batch % m == 0) {
        let more = accumulation.saturating_mul(micro_batch / smaller);
        out.push(candidate(
            Change::MicroBatch {
                micro_batch: smaller,
                accumulation: more,
            },
            format!(
                "micro-batch {micro_batch} -> {smaller}, gradient accumulation {accumulation} -> {more} (the same global batch)"
            ),
            &[
                ("--micro-batch", &smaller.to_string()),
                ("--grad-accumulation", &more.to_string()),
            ],
        ));
    }
    if flags.get("--loss").as_deref() != Some("fused") {
        out.push(candidate(
            Change::FusedLoss,
            "Liger's fused linear cross-entropy (no whole logits)".to_string(),
            &[("--loss", "fused")],
        ));
    }
    if flags.get("--recompute").as_deref() != Some("full") {
        out.push(candidate(
            Change::Recompute,
            "activation checkpointing (full recomputation)".to_string(),
            &[("--recompute", "full")],
        ));
    }
    if !flags.has("--offload-activations") {
        out.push(candidate(
            Change::OffloadActivations,
            "activations offloaded to host memory".to_string(),
            &[("--offload-activations", "")],
        ));
    }
    if number("--gpus", 1) > 1 {
        if flags.has("--fsdp") {
            if flags.get("--fsdp").as_deref() != Some("full-shard") {
                out.push(candidate(
                    Change::FullShard,
                    "FSDP full sharding".to_string(),
                    &[("--fsdp", "full-shard")],
                ));
            }
        } else {
            for next in (number("--zero", 0) + 1)..=3 {
                out.push(candidate(
                    Change::Zero(next as u8),
                    format!("ZeRO stage {next}"),
                    &[("--zero", &next.to_string())],
                ));
            }
        }
    }
    if flags.get("--offload").is_none_or(|o| o == "none") {
        out.push(candidate(
            Change::OffloadOptimizer,
            "optimizer states in host memory".to_string(),
            &[("--offload", "optimizer")],
        ));
    }
    let optimizer = flags
        .get("--optimizer")
        .unwrap_or_else(|| "adam".to_string());
    if optimizer == "adam" || optimizer == "adamw" {
        out.push(candidate(
            Change::Optimizer8bit,
            "8-bit AdamW (bitsandbytes)".to_string(),
            &[("--optimizer", "adamw-8bit")],
        ));
    }
    let lora = flags.has("--lora-rank");
    let lora_flags = [("--lora-rank", "16"), ("--lora-targets", "all-linear")];
    if !lora {
        out.push(candidate(
            Change::Lora,
            "LoRA r16 on every linear".to_string(),
            &lora_flags,
        ));
    }
    if !flags.has("--quantize") {
        let mut pairs = if lora {
            Vec::new()
        } else {
            lora_flags.to_vec()
        };
        pairs.push(("--quantize", "nf4"));
        out.push(candidate(
            Change::Qlora { with_lora: lora },
            "QLoRA: the base in nf4".to_string(),
            &pairs,
        ));
    }
    out
}

/// The changes that make the run fit, cheapest first, each re-priced. Of
/// the steps of one kind (smaller micro-batches, ZeRO stages) only the
/// first that fits is kept. Each kind is priced on its own thread: the
/// estimates are pure, and `check` must answer within 20 ms.
fn suggestions(
    flags: &Flags,
    launch: &Launch,
    typed: &[(String, Option<OsString>)],
) -> Vec<Suggestion> {
    // The candidates grouped by kind, in the order of the first of each.
    let mut kinds: Vec<Vec<Candidate>> = Vec::new();
    for candidate in candidates(flags) {
        let kind = std::mem::discriminant(&candidate.change);
        match kinds
            .iter_mut()
            .find(|group| std::mem::discriminant(&group[0].change) == kind)
        {
            Some(group) => group.push(candidate),
            None => kinds.push(vec![candidate]),
        }
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = kinds
            .iter()
            .map(|group| scope.spawn(move || first_fitting(group, flags, launch, typed)))
            .collect();
        handles
            .into_iter()
            .filter_map(|handle| handle.join().ok().flatten())
            .collect()
    })
}

/// The first candidate of a kind that fits, as a suggestion. A kind's
/// candidates go from the mildest to the strongest (micro-batches from the
/// largest down, ZeRO stages up), and the peak only falls along them, so
/// the first that fits is found by bisection: a few estimates, not one each.
fn first_fitting(
    group: &[Candidate],
    flags: &Flags,
    launch: &Launch,
    typed: &[(String, Option<OsString>)],
) -> Option<Suggestion> {
    let fitting = |index: usize| -> Option<Estimate> {
        let changes: Vec<(&str, &str)> = group[index]
            .flags
            .iter()
            .map(|(f, v)| (f.as_str(), v.as_str()))
            .collect();
        price(&flags.with(&changes))
            .ok()
            .filter(|priced| priced.fits == Some(true))
    };
    // The answer lies in low..=high, high == len meaning none fits.
    let (mut low, mut high) = (0, group.len());
    let mut found = None;
    while low < high {
        let middle = low + (high - low) / 2;
        match fitting(middle) {
            Some(priced) => {
                found = Some((middle, priced));
                high = middle;
            }
            None => low = middle + 1,
        }
    }
    let (index, priced) = found?;
    let candidate = &group[index];
    let changes: Vec<(&str, &str)> = candidate
        .flags
        .iter()
        .map(|(f, v)| (f.as_str(), v.as_str()))
        .collect();
    let (file, key) = spelled(&candidate.change, launch, typed, &changes);
    Some(Suggestion {
        change: candidate.words.clone(),
        key,
        file,
        peak: priced.memory.peak,
    })
}

/// The file and keys a change is made in: the file whose keys set the
/// flags it changes, else the first file whose format has such keys, else
/// the command line.
fn spelled(
    change: &Change,
    launch: &Launch,
    typed: &[(String, Option<OsString>)],
    changes: &[(&str, &str)],
) -> (String, String) {
    let as_flags = || {
        changes
            .iter()
            .map(|(f, v)| {
                if v.is_empty() {
                    f.to_string()
                } else {
                    format!("{f} {v}")
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
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
