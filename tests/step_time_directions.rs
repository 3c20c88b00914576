//! The step time moves the way measured runs do when one thing changes:
//! offloading the optimizer is slower, bigger micro-batches (at the same
//! tokens per step) are not slower, wider tensor or context parallelism on
//! the same GPUs is slower at 4k tokens, more accumulation (the same
//! micro-batch, more of them) does not lower throughput, a newer device is
//! faster; and every device the issue names gets a step time.

mod common;

use common::json_of;
use serde_json::Value;

fn time(args: &[&str]) -> Value {
    let mut all = vec![
        "estimate",
        "--precision",
        "mixed-bf16",
        "--optimizer",
        "adamw",
        "--seq-len",
        "4096",
    ];
    all.extend(args);
    all.extend(["--format", "json"]);
    let report = json_of(&all);
    assert!(
        report["time"].is_object(),
        "{args:?}: {}",
        report["time_unavailable"]
    );
    report["time"].clone()
}

fn tokens_per_s(args: &[&str]) -> f64 {
    time(args)["tokens_per_s"].as_f64().unwrap()
}

const EIGHT_B_ON_8: [&str; 6] = ["--model", "llama-3.1-8b", "--gpus", "8", "--device", "h100"];

fn with<'a>(base: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
    base.iter().chain(extra).copied().collect()
}

#[test]
fn offloading_the_optimizer_costs_time() {
    for zero in ["2", "3"] {
        let base = with(&EIGHT_B_ON_8, &["--zero", zero, "--micro-batch", "1"]);
        let on_device = time(&base);
        let offloaded = time(&with(&base, &["--offload", "optimizer"]));
        assert!(
            offloaded["step_time_s"].as_f64().unwrap() > on_device["step_time_s"].as_f64().unwrap(),
            "zero {zero}"
        );
        assert!(offloaded["offload_s"].as_f64().unwrap() > 0.0);
        assert_eq!(offloaded["optimizer_s"].as_f64().unwrap(), 0.0);
    }
}

#[test]
fn bigger_micro_batches_at_the_same_tokens_are_not_slower() {
    let mut previous = 0.0;
    for (micro, accumulation) in [("1", "8"), ("2", "4"), ("4", "2"), ("8", "1")] {
        let speed = tokens_per_s(&with(
            &EIGHT_B_ON_8,
            &[
                "--fsdp",
                "full-shard",
                "--micro-batch",
                micro,
                "--grad-accumulation",
                accumulation,
            ],
        ));
        assert!(
            speed >= previous,
            "micro-batch {micro}: {speed} < {previous}"
        );
        previous = speed;
    }
}

#[test]
fn wider_tensor_and_context_parallelism_are_slower_at_4k_tokens() {
    for flag in ["--tp", "--cp"] {
        let mut previous = f64::INFINITY;
        for degree in ["1", "2", "4", "8"] {
            let speed = tokens_per_s(&with(
                &EIGHT_B_ON_8,
                &["--fsdp", "full-shard", "--micro-batch", "1", flag, degree],
            ));
            assert!(speed < previous, "{flag} {degree}: {speed} >= {previous}");
            previous = speed;
        }
    }
}

#[test]
fn more_accumulation_does_not_lower_throughput() {
    let mut previous = 0.0;
    for accumulation in ["1", "2", "4", "16"] {
        let speed = tokens_per_s(&with(
            &EIGHT_B_ON_8,
            &[
                "--zero",
                "1",
                "--micro-batch",
                "1",
                "--grad-accumulation",
                accumulation,
            ],
        ));
        assert!(speed >= previous, "accumulation {accumulation}");
        previous = speed;
    }
}

#[test]
fn newer_devices_are_faster() {
    let speed = |device: &str| {
        tokens_per_s(&[
            "--model",
            "llama-3.2-1b",
            "--micro-batch",
            "1",
            "--device",
            device,
        ])
    };
    let order = ["t4", "l4", "a10g", "a100-80gb", "h100", "b200"];
    for pair in order.windows(2) {
        assert!(
            speed(pair[0]) < speed(pair[1]),
            "{} vs {}",
            pair[0],
            pair[1]
        );
    }
}

#[test]
fn every_named_device_gets_a_step_time() {
    for device in [
        "rtx-4090",
        "rtx-a6000",
        "l40s",
        "t4",
        "a10g",
        "l4",
        "gb200",
        "b200",
        "mi300x",
        "a100-40gb",
        "a100-80gb",
        "h100",
        "h100-pcie",
        "h100-nvl",
        "h200",
        "a10",
        "rtx-3090",
        "mi325x",
    ] {
        let t = time(&[
            "--model",
            "llama-3.2-1b",
            "--micro-batch",
            "1",
            "--device",
            device,
        ]);
        let step = t["step_time_s"].as_f64().unwrap();
        assert!(step.is_finite() && step > 0.0, "{device}");
        assert!(t["memory_bound_s"].as_f64().unwrap() > 0.0, "{device}");
        assert!(
            t["uncertainty"]["held_out_cases"].as_u64().unwrap() > 0,
            "{device}"
        );
    }
}
