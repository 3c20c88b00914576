//! Activations from a trace (`trainmem.trace_activations`, carried in an
//! inventory's `activations_trace`) feed the step timeline: the fixtures
//! are written by tools/trace_inventory.py from the Python tests' CNN and a
//! 2-layer llama, so the engine side is checked without Python.

mod common;

use common::{int, json_of, run};
use serde_json::Value;

const CNN: &str = "tests/fixtures/inventory/tiny_resnet_b2.inventory.json";
const LLAMA: &str = "tests/fixtures/inventory/llama_2l_b2s64.inventory.json";

fn trace_of(path: &str) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_json::from_str::<Value>(&text).unwrap()["activations_trace"].clone()
}

fn report(command: &str, path: &str, more: &[&str]) -> Value {
    let mut args = vec![command, "--model", path, "--format", "json"];
    args.extend(more);
    json_of(&args)
}

#[test]
fn a_traced_cnn_is_priced_at_the_trace_total_block_by_block() {
    let trace = trace_of(CNN);
    let blocks: Vec<u64> = trace["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| int(&b["bytes"]))
        .collect();
    assert_eq!(blocks.len(), 5);
    let parts = blocks.iter().sum::<u64>()
        + int(&trace["before_blocks"])
        + int(&trace["after_blocks"])
        + int(&trace["outputs"]);
    assert_eq!(parts, int(&trace["total"]));

    let estimate = report("estimate", CNN, &["--micro-batch", "2", "--seq-len", "1"]);
    assert_eq!(
        int(&estimate["memory"]["activations"]),
        int(&trace["total"])
    );
    let notes: Vec<&str> = estimate["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("activations come from a trace")),
        "{notes:?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("backward temporaries are not known")),
        "{notes:?}"
    );
    assert!(
        !notes.iter().any(|n| n.contains("not estimated")),
        "{notes:?}"
    );

    // The timeline allocates each block's bytes in forward, in run order,
    // and frees them in backward, in reverse.
    let timeline = report("timeline", CNN, &["--micro-batch", "2", "--seq-len", "1"]);
    let saved = |phase: &str| -> Vec<i64> {
        timeline["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["phase"] == phase && e["tensor"] == "saved activations")
            .map(|e| e["bytes"].as_i64().unwrap())
            .collect()
    };
    let nonzero: Vec<i64> = blocks
        .iter()
        .filter(|&&b| b > 0)
        .map(|&b| i64::try_from(b).unwrap())
        .collect();
    assert_eq!(saved("forward"), nonzero);
    let freed: Vec<i64> = nonzero.iter().rev().map(|b| -b).collect();
    assert_eq!(saved("backward"), freed);
    assert_eq!(
        int(&timeline["memory"]["activations"]),
        int(&trace["total"])
    );
}

#[test]
fn a_traced_llama_equals_its_rule() {
    let trace = trace_of(LLAMA);
    let flags = [
        "--micro-batch",
        "2",
        "--seq-len",
        "64",
        "--precision",
        "fp32",
        "--platform",
        "cpu",
        "--attention",
        "sdpa",
    ];
    let traced = report("estimate", LLAMA, &flags);
    assert_eq!(int(&traced["memory"]["activations"]), int(&trace["total"]));
    // The same model without its trace: the inventory's config gives the
    // rule, fitted to the same saved tensors (CPU kernels, fp32, sdpa).
    let text = std::fs::read_to_string(LLAMA).unwrap();
    let mut document: Value = serde_json::from_str(&text).unwrap();
    document
        .as_object_mut()
        .unwrap()
        .remove("activations_trace");
    let dir = std::env::temp_dir().join(format!("trainmem-traced-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let plain = dir.join("llama.inventory.json");
    std::fs::write(&plain, document.to_string()).unwrap();
    let rule = report("estimate", plain.to_str().unwrap(), &flags);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        int(&traced["memory"]["activations"]),
        int(&rule["memory"]["activations"])
    );
    // What the rule models and a trace cannot see: backward temporaries.
    assert!(int(&traced["memory"]["peak"]) < int(&rule["memory"]["peak"]));
}

#[test]
fn another_shape_is_a_one_line_error() {
    for (args, wanted) in [
        (
            vec!["--micro-batch", "4", "--seq-len", "1"],
            "micro-batch of 2",
        ),
        (
            vec![
                "--micro-batch",
                "2",
                "--seq-len",
                "1",
                "--recompute",
                "full",
            ],
            "--recompute `full`",
        ),
    ] {
        let mut all = vec!["estimate", "--model", CNN];
        all.extend(args);
        let (code, _, stderr) = run(&all);
        assert_eq!(code, 2, "{stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(stderr.contains(wanted), "{stderr}");
    }
    let (code, _, stderr) = run(&[
        "estimate",
        "--model",
        LLAMA,
        "--micro-batch",
        "2",
        "--seq-len",
        "32",
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("sequences of 64 tokens"), "{stderr}");
    // `plan` searches workloads a trace does not describe: refused, not
    // priced by the rules behind the trace's back.
    let (code, _, stderr) = run(&[
        "plan",
        "--model",
        LLAMA,
        "--gpus",
        "8",
        "--device",
        "h100",
        "--seq-len",
        "64",
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("carries an activation trace"), "{stderr}");
}
