//! Activations, the peak of a step, and the searches of `trainmem fit`,
//! through the real binary.

mod common;

use assert_cmd::Command;
use common::{int, json_of};
use serde_json::Value;

fn json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["--format", "json"]);
    json_of(&all)
}

const LLAMA: [&str; 8] = [
    "--model",
    "llama-3.1-8b",
    "--precision",
    "mixed-bf16",
    "--optimizer",
    "adamw",
    "--device",
    "h100-80gb",
];

/// Without a micro-batch the peak is the model states (the seed texts' question).
#[test]
fn without_a_micro_batch_the_peak_is_the_model_states_and_the_step() {
    // The step timeline without activations: every model state, then the
    // optimizer's temporaries on top (Adam's foreach `sqrt`, one fp32 copy).
    let e = json(&["estimate", "--params", "7B"]);
    assert_eq!(
        int(&e["memory"]["peak"]),
        int(&e["memory"]["total"]) + int(&e["transients"]["optimizer_step"])
    );
    assert_eq!(int(&e["memory"]["peak"]), 112_000_000_000 + 28_000_000_000);
    assert_eq!(e["timeline"]["peak"]["phase"], "optimizer");
    assert_eq!(int(&e["memory"]["activations"]), 0);
    assert_eq!(e["activations_estimated"], false);
}

#[test]
fn a_micro_batch_adds_activations_and_a_peak() {
    let mut args = vec!["estimate"];
    args.extend(LLAMA);
    args.extend([
        "--micro-batch",
        "1",
        "--seq-len",
        "4096",
        "--gpus",
        "8",
        "--zero",
        "3",
    ]);
    let e = json(&args);
    let memory = &e["memory"];
    assert_eq!(memory["activations"], e["activations"]["total"]);
    let states = int(&memory["total"]) - int(&memory["activations"]);
    // The peak is the step timeline's maximum: the model states, the
    // overhead, and what the step holds at that moment, which is never more
    // than every activation and temporary at once.
    let peak = &e["timeline"]["peak"];
    assert_eq!(memory["peak"], peak["bytes"]);
    let by_kind: u64 = peak["by_kind"].as_object().unwrap().values().map(int).sum();
    assert_eq!(by_kind, int(&memory["peak"]));
    let transients = &e["transients"];
    let every_temporary = int(&transients["backward"])
        + int(&transients["parameter_gather"])
        + int(&transients["optimizer_step"]);
    assert!(int(&memory["peak"]) > states + int(&e["overhead"]));
    assert!(
        int(&memory["peak"])
            <= int(&memory["total"])
                + every_temporary
                + int(&e["overhead"])
                + int(&e["activations"]["logits"])
    );
    assert_eq!(
        e["fits"],
        Value::Bool(int(&memory["peak"]) <= int(&e["capacity"]["bytes"]))
    );
    // The logits of Llama 3.1 (vocabulary 128,256) in bf16: 2 × T × V.
    assert_eq!(int(&e["activations"]["logits"]), 2 * 4096 * 128_256);
}

/// Issue 6: the largest micro-batch under each recompute mode, exact: the
/// answer fits and one more does not.
#[test]
fn fit_finds_the_largest_micro_batch_per_recompute_mode() {
    let mut args = vec!["fit"];
    args.extend(LLAMA);
    args.extend(["--seq-len", "4096", "--gpus", "8", "--zero", "3"]);
    let fit = json(&args);
    let modes = fit["recompute_modes"].as_array().unwrap();
    assert_eq!(modes.len(), 3);
    let largest: Vec<u64> = modes.iter().map(|m| int(&m["largest"])).collect();
    assert!(
        largest[2] >= largest[1] && largest[1] >= largest[0],
        "{largest:?}"
    );
    for (mode, batch) in ["none", "selective", "full"].iter().zip(&largest) {
        let peak = |b: u64| {
            let b = b.to_string();
            let mut args = vec!["estimate"];
            args.extend(LLAMA);
            args.extend([
                "--seq-len",
                "4096",
                "--gpus",
                "8",
                "--zero",
                "3",
                "--recompute",
                mode,
                "--micro-batch",
                &b,
            ]);
            json(&args)["fits"].as_bool().unwrap()
        };
        assert!(peak(*batch), "{mode}: {batch} should fit");
        assert!(!peak(batch + 1), "{mode}: {} should not fit", batch + 1);
    }
    // One H100 cannot hold the model states at all.
    let mut alone = vec!["fit"];
    alone.extend(LLAMA);
    alone.extend(["--seq-len", "4096"]);
    let alone = json(&alone);
    assert!(
        alone["recompute_modes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["largest"].is_null())
    );
    assert!(int(&alone["min_gpus_zero3"]) > 1);
}

#[test]
fn fit_finds_the_longest_sequence() {
    let mut args = vec!["fit"];
    args.extend(LLAMA);
    args.extend(["--micro-batch", "1", "--gpus", "8", "--zero", "3"]);
    let fit = json(&args);
    assert_eq!(fit["searched"], "seq_len");
    assert!(int(&fit["max_seq_len"]) > 4096);
}

#[test]
fn architecture_flags_give_a_bare_count_activations() {
    let e = json(&[
        "estimate",
        "--params",
        "7B",
        "--layers",
        "32",
        "--hidden",
        "4096",
        "--heads",
        "32",
        "--ffn",
        "11008",
        "--vocab",
        "32000",
        "--micro-batch",
        "1",
        "--seq-len",
        "2048",
    ]);
    assert_eq!(e["activations_estimated"], true);
    assert!(int(&e["memory"]["activations"]) > 0);
}

#[test]
fn workload_errors_are_one_line() {
    for args in [
        vec!["estimate", "--params", "7B", "--micro-batch", "2"],
        vec![
            "estimate",
            "--model",
            "gpt2",
            "--micro-batch",
            "0",
            "--seq-len",
            "8",
        ],
        vec![
            "estimate",
            "--model",
            "gpt2",
            "--micro-batch",
            "1",
            "--seq-len",
            "8",
            "--attention",
            "paged",
        ],
        vec![
            "estimate",
            "--model",
            "gpt2",
            "--micro-batch",
            "1",
            "--seq-len",
            "8",
            "--recompute",
            "half",
        ],
        vec!["estimate", "--params", "7B", "--layers", "32"],
        vec![
            "fit",
            "--params",
            "7B",
            "--seq-len",
            "2048",
            "--capacity",
            "80GB",
        ],
    ] {
        let output = Command::cargo_bin("trainmem")
            .unwrap()
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert_eq!(
            String::from_utf8_lossy(&output.stderr).lines().count(),
            1,
            "{args:?}"
        );
    }
}
