//! trainmem's peak against published, measured peak memories of real
//! training runs (`tests/fixtures/published/peaks.json`, 142 cases from
//! torchtune, litgpt, torchtitan, peft, DeepSpeed, Megatron-LM, IBM's
//! fms-acceleration benchmarks, Answer.AI's FSDP-QLoRA benchmarks and user
//! reports, each with its source, the
//! quoted figure, the stated setup and what was measured).
//! `tools/published_peaks.py` prints the same table from the release binary.
//!
//! Cases whose setup needs a feature trainmem cannot express yet (torch.compile,
//! float8 with its all-gather, sample packing, torchao's NF4, ...) name it
//! under `missing` and are left out of the error statistics. Cases whose
//! source leaves part of the setup unstated (`unstated_setup`: a DeepSpeed
//! benchmark table that gives neither the precision nor the unit of its
//! figures) are priced under the assumption written there and kept apart.
//!
//! The target holds on the 52 cases whose metric and setup are both
//! stated: mean |error| 2.0%, the largest 10.1% (fms-acceleration's Mistral
//! 7B LoRA under FSDP1, -10.1%). Issue 24 brought them there in steps:
//! - FSDP1's mechanisms measured on CPU (`tools/measure_fsdp.py`: the root
//!   unit gathered from the root's pre-forward to the end of backward, the
//!   flat gradient reduce-scattered in place): 26 cases went from 2.9% and
//!   12.4% to 2.3% and 10.1%, Answer.AI's two allocated FSDP1 LoRA peaks
//!   from -6.1% and -5.3% to +0.1% and +1.3%.
//! - torchtune's QLoRA tutorial run (reserved, -2.1%; -46.7% before its
//!   model setup under torchao 0.1 was replayed: `tests/setup_stream.rs`).
//! - litgpt's LoRA and QLoRA runs, after its LoRA module was priced
//!   (`LoRAQKVLinear`, the repeated key/value heads or, without grouping, v
//!   kept as a view of the fused qkv output, the separate head of a tied
//!   config, and under `--quantize` Lightning's quantized head, the
//!   trainable `StableEmbedding` and the fp16 dequantize-then-cast): 17
//!   more cases, -0.7% to -12.9%.
//!
//! - LoRA on the output head (torchtune's `apply_lora_to_output`, litgpt's
//!   `lora_head`), measured on CPU: 8 more cases, -8.5% to +6.8%.
//!
//! With the 9 partly assumed cases too: 61 cases, mean 4.0%, max 53.5%;
//! those bounds keep it from getting worse.
//!
//! Answer.AI's 11 reserved peaks (FSDP-QLoRA and LoRA, with and without CPU
//! offload) stay out of those statistics, under `missing`, for the reason
//! written there: train.py reads `max_memory_reserved()` after a whole
//! epoch of 1,024 samples, over the blocks loading and wrapping left, and
//! trainmem's allocator simulation replays the wrap and one step (a second
//! replayed step, tried, does not move it): the real allocation order's
//! fragmentation is not modelled. Modelled now from torch's source: the
//! wrap unit by unit with `sync_module_states`' broadcast buckets, the
//! all-gather stream's own blocks, transformers 4.38's fp32 output logits
//! kept by the loop, and FSDP1's rate limiter (`StepPlan::limit_all_gathers`:
//! a resharded unit's block, freed with `record_stream`, comes back to the
//! cache only when the CPU waits for its free event); they went from
//! 13-38% below to 5-22% below, then to 1.5-18.3% below (mean 11.3%, was
//! 13.6%), and [`answerai_reserved_peaks_stay_below_and_within_their_bound`]
//! keeps them there: three (-15.8%, -18.3%, -19.0%) still miss by more than
//! the 15% target.

mod common;

use common::run;
use serde_json::Value;

/// The target over the expressible cases whose metric and setup are stated.
const TARGET_MEAN: f64 = 0.05;
/// No such case may miss by more than this.
const TARGET_MAX: f64 = 0.15;
/// Today's mean |error| over every expressible case with a stated metric,
/// the partly assumed setups included, as a bound.
const MEAN_BOUND: f64 = 0.06;
/// Today's largest |error| among them, as a bound.
const MAX_BOUND: f64 = 0.54;
/// litgpt's runs, each priced with its loop, its LoRA modules and its
/// QLoRA: the largest is the config hub's Phi-2 QLoRA with LoRA on every
/// linear and the 4-bit head (+6.6%; its LoRA twin is +2.1%, the other
/// 21 within 3%), cause not found yet.
const LITGPT_BOUND: f64 = 0.07;

const METRICS: [&str; 4] = ["allocated", "reserved", "nvidia-smi", "unstated"];

fn cases() -> Vec<Value> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/published/peaks.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `trainmem estimate` with a case's flags, as its setup states them.
fn estimate_args(case: &Value) -> Vec<&str> {
    let mut args = vec!["estimate"];
    args.extend(
        case["flags"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap()),
    );
    args
}

fn unit_bytes(unit: &str) -> f64 {
    match unit {
        "GiB" => (1u64 << 30) as f64,
        "GB" => 1e9,
        "MiB" => (1u64 << 20) as f64,
        "MB" => 1e6,
        other => panic!("unit {other}"),
    }
}

#[test]
fn every_case_names_its_source_setup_and_metric() {
    let cases = cases();
    assert!(cases.len() >= 25, "{} cases", cases.len());
    for case in &cases {
        let id = case["id"].as_str().unwrap();
        for field in ["source", "quote", "setup"] {
            assert!(
                !case[field].as_str().unwrap().trim().is_empty(),
                "{id}: {field}"
            );
        }
        assert!(METRICS.contains(&case["metric"].as_str().unwrap()), "{id}");
        let measured = &case["measured"];
        let bytes =
            measured["value"].as_f64().unwrap() * unit_bytes(measured["unit"].as_str().unwrap());
        assert!(
            (bytes - case["measured_bytes"].as_f64().unwrap()).abs() <= 1.0,
            "{id}: measured_bytes"
        );
        assert!(
            case["flags"].as_array().is_some_and(|f| !f.is_empty()),
            "{id}"
        );
        // An assumption is written out, never a bare flag.
        if let Some(assumed) = case.get("unstated_setup") {
            assert!(assumed.as_str().is_some_and(|a| a.len() > 20), "{id}");
        }
    }
}

#[test]
fn predicted_against_measured() {
    let cases = cases();
    let (mut errors, mut stated, mut table) = (Vec::new(), Vec::new(), String::new());
    // litgpt's runs (its loops bind `logits` in their body, its QLoRA ran on
    // bitsandbytes 0.41-0.42): each within LITGPT_BOUND since both are priced.
    let mut litgpt = Vec::new();
    for case in cases
        .iter()
        .filter(|c| c["missing"].as_array().unwrap().is_empty())
    {
        let id = case["id"].as_str().unwrap();
        let metric = case["metric"].as_str().unwrap();
        let mut args = estimate_args(case);
        if metric != "nvidia-smi" {
            args.extend(["--overhead", "0"]);
        }
        args.extend(["--format", "json"]);
        let (code, stdout, stderr) = run(&args);
        assert_eq!(code, 0, "{id}: {stderr}");
        let e: Value = serde_json::from_str(&stdout).unwrap();
        let key = if matches!(metric, "reserved" | "nvidia-smi") {
            "reserved"
        } else {
            "peak"
        };
        let predicted = e["memory"][key].as_u64().unwrap() as f64;
        let measured = case["measured_bytes"].as_f64().unwrap();
        let error = (predicted - measured) / measured;
        let assumed = case.get("unstated_setup").is_some();
        table += &format!(
            "{id:<64} {metric:<10} {:+6.1}%{}\n",
            100.0 * error,
            if assumed {
                " (setup partly assumed)"
            } else {
                ""
            }
        );
        if id.starts_with("litgpt-") {
            litgpt.push(error.abs());
        }
        if metric != "unstated" {
            errors.push(error.abs());
            if !assumed {
                stated.push(error.abs());
            }
        }
    }
    let summary = |errors: &[f64]| {
        let mean = errors.iter().sum::<f64>() / errors.len().max(1) as f64;
        (mean, errors.iter().copied().fold(0.0, f64::max))
    };
    let (mean, max) = summary(&errors);
    let (stated_mean, stated_max) = summary(&stated);
    println!(
        "{table}{} with a stated metric and setup: mean {:.1}%, max {:.1}%\n{} with a stated metric: mean {:.1}%, max {:.1}%",
        stated.len(),
        100.0 * stated_mean,
        100.0 * stated_max,
        errors.len(),
        100.0 * mean,
        100.0 * max
    );
    assert!(stated.len() >= 20, "{table}");
    assert!(litgpt.len() >= 15, "{table}");
    assert!(
        litgpt.iter().all(|e| *e <= LITGPT_BOUND),
        "{table}litgpt within 7%"
    );
    assert!(stated_mean <= TARGET_MEAN, "{table}mean {stated_mean}");
    assert!(stated_max <= TARGET_MAX, "{table}max {stated_max}");
    assert!(mean <= MEAN_BOUND, "{table}mean {mean}");
    assert!(max <= MAX_BOUND, "{table}max {max}");
}

/// What cannot be expressed is named, so the cases can join the statistics
/// as the features arrive.
#[test]
fn what_cannot_be_expressed_is_named() {
    let cases = cases();
    let blocked: Vec<&Value> = cases
        .iter()
        .filter(|c| !c["missing"].as_array().unwrap().is_empty())
        .collect();
    assert!(!blocked.is_empty());
    for case in blocked {
        for missing in case["missing"].as_array().unwrap() {
            assert!(missing.as_str().unwrap().len() > 3, "{}", case["id"]);
        }
    }
}

/// Answer.AI's reserved peaks, kept apart (see the module comment): every one
/// is priced, lands below the measured figure (the simulation replays one
/// step, the source's peak spans an epoch) and no further than its bound.
#[test]
fn answerai_reserved_peaks_stay_below_and_within_their_bound() {
    let cases = cases();
    let apart: Vec<&Value> = cases
        .iter()
        .filter(|c| {
            c["id"].as_str().unwrap().starts_with("answerai")
                && c["metric"] == "reserved"
                && !c["missing"].as_array().unwrap().is_empty()
        })
        .collect();
    assert_eq!(apart.len(), 11);
    let (mut sum, mut table) = (0.0, String::new());
    for case in &apart {
        let id = case["id"].as_str().unwrap();
        let mut args = estimate_args(case);
        args.extend(["--overhead", "0", "--format", "json"]);
        let (code, stdout, stderr) = run(&args);
        assert_eq!(code, 0, "{id}: {stderr}");
        let e: Value = serde_json::from_str(&stdout).unwrap();
        let predicted = e["memory"]["reserved"].as_u64().unwrap() as f64;
        let measured = case["measured_bytes"].as_f64().unwrap();
        let error = (predicted - measured) / measured;
        table += &format!("{id:<64} {:+6.1}%\n", 100.0 * error);
        assert!((-0.20..0.0).contains(&error), "{table}");
        sum += error.abs();
    }
    let mean = sum / apart.len() as f64;
    println!("{table}mean {:.1}%", 100.0 * mean);
    assert!(mean <= 0.12, "{table}mean {mean}");
}
