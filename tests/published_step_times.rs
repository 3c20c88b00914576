//! The step-time model against published, measured step times and MFU
//! (`tests/fixtures/published/step_times.json`: Korthikanti et al. 2022's
//! iteration times, Narayanan et al. 2021's Table 1, Llama 3's Table 4,
//! each with its source, the quoted row, the stated setup and the flags).
//! `tools/published_step_times.py` prints the same table from the release
//! binary.
//!
//! Four cases are `fitted`: their HFU is what the default efficiency is
//! made of (`src/step_time/efficiency.rs`). The rest are held out. Today:
//! the 5 held-out cases with a fully stated setup are within 10.0% (mean
//! 5.4%); the 13 whose source leaves the micro-batch or the schedule
//! unstated are priced under the assumption written in the case: the 10
//! Megatron rows are within 10.7%, Llama 3's three miss by 16–32% (Meta's
//! own pipeline schedule, which trainmem prices as plain 1F1B).

mod common;

use common::run;
use serde_json::Value;

/// The target: within this of the measurement...
const TARGET: f64 = 0.15;
/// ...on at least this many held-out cases.
const TARGET_CASES: usize = 6;
/// Today's largest |error| among the held-out, fully stated cases, as a bound.
const STATED_MAX_BOUND: f64 = 0.11;
/// Today's largest |error| among the partly assumed cases, as a bound.
const ASSUMED_MAX_BOUND: f64 = 0.33;

const METRICS: [&str; 3] = ["step_time_s", "tflops_per_gpu", "mfu"];

fn cases() -> Vec<Value> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/published/step_times.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn predicted(case: &Value) -> f64 {
    let mut args = vec!["estimate"];
    let flags: Vec<&str> = case["flags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    args.extend(flags);
    args.extend(["--format", "json"]);
    let (code, stdout, stderr) = run(&args);
    let id = case["id"].as_str().unwrap();
    assert_eq!(code, 0, "{id}: {stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let time = &report["time"];
    assert!(time.is_object(), "{id}: {:?}", report["time_unavailable"]);
    let step = time["step_time_s"].as_f64().unwrap();
    match case["metric"].as_str().unwrap() {
        "step_time_s" => step,
        "tflops_per_gpu" => {
            let gpus = report["parallelism"]["gpus"].as_f64().unwrap();
            time["flops_per_step"].as_f64().unwrap() / step / gpus / 1e12
        }
        "mfu" => time["achieved_mfu"].as_f64().unwrap(),
        other => panic!("{id}: metric {other}"),
    }
}

#[test]
fn every_case_names_its_source_setup_metric_and_role() {
    let cases = cases();
    assert!(cases.len() >= TARGET_CASES);
    for case in &cases {
        let id = case["id"].as_str().unwrap();
        for field in ["source", "source_title", "quote", "setup"] {
            assert!(
                !case[field].as_str().unwrap().trim().is_empty(),
                "{id}: {field}"
            );
        }
        assert!(METRICS.contains(&case["metric"].as_str().unwrap()), "{id}");
        assert!(
            ["fitted", "held-out"].contains(&case["role"].as_str().unwrap()),
            "{id}"
        );
        assert!(case["measured"]["value"].as_f64().unwrap() > 0.0, "{id}");
        if let Some(assumed) = case.get("unstated_setup") {
            assert!(!assumed.as_str().unwrap().trim().is_empty(), "{id}");
        }
    }
    // The fitted cases are the four rows the default efficiency reads.
    let fitted = cases.iter().filter(|c| c["role"] == "fitted").count();
    assert_eq!(fitted, trainmem::step_time::KORTHIKANTI_2022.len());
}

#[test]
fn held_out_cases_are_within_fifteen_percent() {
    let mut stated = Vec::new();
    let mut assumed = Vec::new();
    let mut report = String::new();
    for case in cases() {
        let measured = case["measured"]["value"].as_f64().unwrap();
        let predicted = predicted(&case);
        let error = (predicted - measured) / measured;
        let id = case["id"].as_str().unwrap();
        report +=
            &format!("{id}: measured {measured}, predicted {predicted:.4}, error {error:+.3}\n");
        if case["role"] == "fitted" {
            assert!(
                error.abs() <= TARGET,
                "{id}: fitted case off by {error:+.3}"
            );
            continue;
        }
        if case.get("unstated_setup").is_some() {
            assumed.push(error.abs());
        } else {
            stated.push(error.abs());
        }
    }
    let within = stated
        .iter()
        .chain(&assumed)
        .filter(|e| **e <= TARGET)
        .count();
    assert!(
        within >= TARGET_CASES,
        "{within} held-out cases within 15%\n{report}"
    );
    let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    assert!(stated.len() >= 5, "{report}");
    assert!(max(&stated) <= STATED_MAX_BOUND, "{report}");
    assert!(max(&assumed) <= ASSUMED_MAX_BOUND, "{report}");
}
