//! The answer of `trainmem fit`.

use super::{Format, Table, escape, json};
use crate::estimate::Fit;
use crate::units::{UnitSystem, format_ratio};

/// The largest model, micro-batch or sequence that fits, and the fewest GPUs.
pub fn fit(fit: &Fit, format: Format, units: UnitSystem) -> String {
    let e = &fit.estimate;
    if let Some(max) = fit.max_parameters {
        let mut table = Table::new(&[
            "optimizer",
            "precision",
            "capacity",
            ">max parameters",
            ">bytes/param",
            ">memory",
        ]);
        table.row([
            fit.optimizer.to_string(),
            fit.precision.name.to_string(),
            fit.capacity.label.clone(),
            max.grouped(),
            format_ratio(e.memory.total.0, e.parameters.total.0),
            e.memory.total.display(units),
        ]);
        return match format {
            Format::Json => json(fit),
            Format::Csv => table.csv(),
            Format::Markdown => table.markdown(),
            Format::Table => format!(
                "trainmem fit: the largest model whose weights, gradients and optimizer states fit {}\n\n{}\n  {} parameters ({}) fit with {} in {}; {}.\n  note: activations are not counted: leave room for them (give --model and --seq-len for the largest micro-batch).\n{}",
                fit.capacity.label,
                table.text(),
                max.short(),
                max.grouped(),
                fit.optimizer,
                fit.precision.name,
                if fit.at_search_limit {
                    "more may (the search stops there)"
                } else {
                    "one more does not"
                },
                peak_note(fit, units),
            ),
        };
    }
    let searched = if fit.searched == "seq_len" {
        "max sequence length"
    } else {
        "max micro-batch"
    };
    let mut table = Table::new(&["recompute", &format!(">{searched}")]);
    // --recompute-every N applies to the full row (the only mode it goes with).
    let every = e.activations.as_ref().map_or(1, |a| a.recompute_every);
    for m in &fit.recompute_modes {
        table.row([
            if m.recompute == crate::activation::Recompute::Full && every > 1 {
                format!("full, every {every}")
            } else {
                m.recompute.name().to_string()
            },
            match m.largest {
                None => "none fits".to_string(),
                Some(v) if m.at_search_limit => format!("at least {v} (search limit)"),
                Some(v) => v.to_string(),
            },
        ]);
    }
    let plural = |g: u64| format!("{g} GPU{} of this capacity", if g == 1 { "" } else { "s" });
    let layout = &e.parallelism.layout;
    let mut gpus = match fit.min_gpus {
        Some(g) => plural(g),
        None if layout.zero == crate::parallel::ZeroStage::None => {
            "none: without sharding every GPU holds everything".to_string()
        }
        None => "no count up to 65,536 data-parallel ranks fits as configured".to_string(),
    };
    if let Some(g) = fit.min_gpus_zero3 {
        gpus += &format!("; with --zero 3, {}", plural(g));
    }
    match format {
        Format::Json => json(fit),
        Format::Csv => table.csv(),
        Format::Markdown => format!("{}\n- fewest GPUs: {gpus}\n", table.markdown()),
        Format::Table => {
            let mut out = format!(
                "trainmem fit: {} ({}), {}, {}, on {}\n\n",
                escape(&e.model.name),
                escape(&e.model.source),
                fit.optimizer,
                fit.precision.name,
                fit.capacity.label
            );
            let of = format!(
                "peak {}, reserved {} of {}",
                e.memory.peak.display(units),
                e.memory.reserved.display(units),
                fit.capacity.bytes.display(units)
            );
            let searched_value = if fit.searched == "seq_len" {
                "sequence"
            } else {
                "micro-batch"
            };
            if !fit.recompute_modes.is_empty() {
                out += &table.text();
                out += "\n";
                match (fit.found, fit.estimate_recompute) {
                    (true, None) => {
                        out += &format!("  at the answer under the chosen recompute mode: {of}\n")
                    }
                    (true, Some(mode)) => {
                        out += &format!(
                            "  the chosen recompute mode fits no {searched_value}; under --recompute {} the answer fits: {of}\n",
                            mode.name()
                        )
                    }
                    (false, _) => {
                        out += "  nothing fits under any recompute mode\n";
                    }
                }
            } else if fit.found {
                let at = if fit.searched == "gpus" {
                    format!(" on {}", plural(e.parallelism.layout.gpus))
                } else {
                    String::new()
                };
                out += &format!("  {of}{at}\n");
            }
            // The fewest GPUs answer the question asked, or say what more
            // GPUs would do when no micro-batch or sequence fits at all
            // (at the smallest step, named as such).
            match (fit.searched, fit.min_gpus_workload) {
                ("gpus", Some([b, s])) => {
                    out += &format!(
                        "  fewest GPUs for this layout at micro-batch {b} and sequence {s}: {gpus}\n"
                    )
                }
                ("gpus", None) => out += &format!("  fewest GPUs for this layout: {gpus}\n"),
                (_, Some([b, s])) if !fit.found => {
                    let step = if fit.searched == "seq_len" {
                        format!("micro-batch {b} at the shortest sequence searched ({s})")
                    } else {
                        format!("the smallest micro-batch ({b}) at sequence {s}")
                    };
                    out += &format!("  fewest GPUs for this layout with {step}: {gpus}\n");
                }
                _ => {}
            }
            if let Some(hint) = &fit.hint {
                out += &format!(
                    "  hint: {} fits: peak {}, reserved {} ({})\n",
                    escape(&hint.changes),
                    hint.peak.display(units),
                    hint.reserved.display(units),
                    hint.flags.join(" ")
                );
            }
            for note in &e.notes {
                out += &format!("  note: {}\n", escape(note));
            }
            super::wrap::free_text(&out)
        }
    }
}

/// Why `estimate` may say the answer does not fit: its verdict reads the
/// step's peak, which adds what the model states leave out (the optimizer
/// step's temporaries, the weights ZeRO-3 and FSDP gather whole: a flat
/// model is one module, gathered at once).
fn peak_note(fit: &Fit, units: UnitSystem) -> String {
    let e = &fit.estimate;
    if e.memory.peak <= fit.capacity.bytes {
        return String::new();
    }
    format!(
        "  note: `trainmem estimate` judges a fit by the step's peak, {} for this model: it adds the optimizer step's temporaries{}.\n",
        e.memory.peak.display(units),
        if e.parallelism.layout.zero == crate::parallel::ZeroStage::None {
            ""
        } else {
            " and, with sharding, a module's gradients or weights held whole (a flat model is one module)"
        }
    )
}
