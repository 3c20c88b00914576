//! `--offload-activations`: torchtune's `OffloadActivations` as a user turns
//! it on. The CPU-measured steps are in `tests/fixtures/timeline/*__offload.json`
//! (checked by `tests/timeline.rs`); these pin what the output says.

mod common;

use common::{int, json_of, run};

fn estimate(extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "estimate",
        "--model",
        "llama-3.1-8b",
        "--optimizer",
        "adamw",
        "--precision",
        "bf16",
        "--micro-batch",
        "1",
        "--seq-len",
        "8192",
    ];
    args.extend(extra);
    args.extend(["--format", "json"]);
    json_of(&args)
}

#[test]
fn offloading_moves_the_layers_to_the_host_and_lowers_the_device_peak() {
    let kept = estimate(&[]);
    let offloaded = estimate(&["--offload-activations"]);
    let saved = &offloaded["activations"]["offload"];
    assert_eq!(saved["min_offload_size"], 1024);
    assert_eq!(saved["streams"], true, "CUDA: torchtune's use_streams=True");
    let gone = int(&saved["device_bytes_saved"]);
    assert!(gone > 0);
    // The device keeps the logits, the loss and the head's input.
    assert_eq!(
        int(&kept["activations"]["total"]) - int(&offloaded["activations"]["total"]),
        gone
    );
    // Every saved reference is a host copy, weight views included: more than left the device.
    let host = int(&saved["host_bytes"]);
    assert!(host > gone + 8_000_000_000, "{host} vs {gone}");
    assert_eq!(int(&offloaded["host"]["activations"]), host);
    assert!(int(&offloaded["memory"]["peak"]) < int(&kept["memory"]["peak"]));
    assert!(kept["activations"]["offload"].is_null());
}

#[test]
fn host_bytes_are_per_node() {
    let one = estimate(&["--offload-activations"]);
    let eight = estimate(&["--offload-activations", "--gpus", "8"]);
    assert_eq!(
        int(&eight["host"]["activations"]),
        8 * int(&eight["activations"]["offload"]["host_bytes"])
    );
    assert_eq!(
        int(&eight["activations"]["offload"]["host_bytes"]),
        int(&one["activations"]["offload"]["host_bytes"])
    );
}

#[test]
fn with_full_recomputation_only_the_layer_inputs_move() {
    // 32 layer inputs of 8192 x 4096 bf16, the embedding's int64 indices
    // and the final RMSNorm's packs (fp32 input and rsqrt twice, the bf16 cast).
    let e = estimate(&["--offload-activations", "--recompute", "full"]);
    let (t, h) = (8192u64, 4096u64);
    let norm = 2 * (4 * t * h + 4 * t) + 2 * t * h;
    assert_eq!(
        int(&e["activations"]["offload"]["host_bytes"]),
        32 * 2 * t * h + 8 * t + norm
    );
}

#[test]
fn the_text_report_and_the_timeline_say_where_the_activations_went() {
    let args = [
        "--model",
        "llama-3.2-1b",
        "--micro-batch",
        "1",
        "--seq-len",
        "1024",
        "--offload-activations",
    ];
    let (code, out, _) = run(&[&["estimate"], &args[..]].concat());
    assert_eq!(code, 0);
    assert!(out.contains("activations offloaded to the host (torchtune OffloadActivations)"));
    let (code, out, _) = run(&[&["timeline"], &args[..]].concat());
    assert_eq!(code, 0);
    assert!(out.contains("of offloaded activations"), "{out}");
}

#[test]
fn offloading_needs_a_micro_batch_and_refuses_megatron() {
    let (code, _, err) = run(&[
        "estimate",
        "--model",
        "llama-3.2-1b",
        "--offload-activations",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("--micro-batch"), "{err}");
    let (code, _, err) = run(&[
        "estimate",
        "--model",
        "llama-3.2-1b",
        "--micro-batch",
        "1",
        "--seq-len",
        "1024",
        "--offload-activations",
        "--framework",
        "megatron",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--offload-activations"), "{err}");
}

/// The host copies the CPU fixtures made (numpy memory, one copy per
/// saved reference) against `activations.offload.host_bytes`.
#[test]
fn host_bytes_match_the_measured_copies() {
    let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/timeline");
    let scratch = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for entry in std::fs::read_dir(&folder).unwrap() {
        let path = entry.unwrap().path();
        let fixture: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let Some(measured) = fixture["offload_host_peak_bytes"].as_u64() else {
            continue;
        };
        let config = scratch.path().join("config.json");
        std::fs::write(&config, fixture["config"].to_string()).unwrap();
        let (batch, seq) = (fixture["batch"].to_string(), fixture["seq_len"].to_string());
        let e = json_of(&[
            "estimate",
            "--model",
            config.to_str().unwrap(),
            "--precision",
            fixture["dtype"].as_str().unwrap(),
            "--attention",
            fixture["attention"].as_str().unwrap(),
            "--recompute",
            fixture["recompute"].as_str().unwrap(),
            "--platform",
            "cpu",
            "--micro-batch",
            &batch,
            "--seq-len",
            &seq,
            "--offload-activations",
            "--format",
            "json",
        ]);
        let predicted = int(&e["activations"]["offload"]["host_bytes"]);
        assert_eq!(predicted, measured, "{}", fixture["id"]);
        checked += 1;
    }
    assert!(checked >= 8, "{checked} offload fixtures");
}
