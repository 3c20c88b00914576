//! `--optimizer-in-backward` (torchtune's `optimizer_in_bwd`): each
//! parameter stepped and its gradient freed as soon as backward produces it.
//! The CPU-measured fixtures are in `tests/fixtures/timeline/*__inbwd.json`
//! (checked by `tests/timeline.rs`); these pin what a user sees.

mod common;

use common::{int, json_of, run};

const LLAMA_8B: [&str; 8] = [
    "estimate",
    "--model",
    "llama-3.1-8b",
    "--precision",
    "mixed-bf16",
    "--micro-batch",
    "1",
    "--seq-len",
];

fn estimate(extra: &[&str]) -> serde_json::Value {
    let mut args = LLAMA_8B.to_vec();
    args.push("2048");
    if !extra.contains(&"--optimizer") {
        args.extend(["--optimizer", "adamw"]);
    }
    args.extend(extra);
    args.extend(["--format", "json"]);
    json_of(&args)
}

fn phase<'a>(e: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    e["timeline"]["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["phase"] == name)
        .unwrap()
}

/// No full gradient copy: only the largest single gradient (the bf16
/// embedding, 128256 x 4096 x 2 B) is ever held, the peak drops by about the
/// whole bf16 gradient (16 GB), and the optimizer phase allocates nothing.
#[test]
fn no_full_gradient_copy_exists() {
    let standard = estimate(&[]);
    let in_backward = estimate(&["--optimizer-in-backward"]);
    assert_eq!(standard["optimizer_in_backward"], false);
    assert_eq!(in_backward["optimizer_in_backward"], true);
    assert_eq!(int(&in_backward["memory"]["gradients"]), 128_256 * 4096 * 2);
    let optimizer = phase(&in_backward, "optimizer");
    assert_eq!(optimizer["peak"], optimizer["start"]);
    let saved = int(&standard["memory"]["peak"]) - int(&in_backward["memory"]["peak"]);
    let gradients = int(&standard["memory"]["gradients"]);
    assert!(saved > gradients / 2, "saved {saved} of {gradients}");
    // The step temporaries are those of one parameter's step: a one-tensor
    // foreach list (one fp32 copy of the embedding) on CUDA.
    assert_eq!(
        int(&in_backward["transients"]["optimizer_step"]),
        128_256 * 4096 * 4
    );
    let notes = in_backward["notes"].as_array().unwrap();
    assert!(notes.iter().any(|n| {
        n.as_str()
            .unwrap()
            .contains("gradient clipping is not possible")
    }));
}

/// FSDP2 runs the hooks on the sharded parameters (torchtune's
/// full_finetune_distributed): accepted.
#[test]
fn fsdp2_is_accepted() {
    let e = estimate(&[
        "--optimizer-in-backward",
        "--gpus",
        "8",
        "--fsdp",
        "full-shard",
    ]);
    assert_eq!(e["optimizer_in_backward"], true);
}

/// What no implementation runs is refused with one line naming the flag.
#[test]
fn what_the_implementations_refuse_is_refused() {
    for extra in [
        &["--grad-accumulation", "4"][..],
        &["--gpus", "8", "--zero", "2"],
        &["--gpus", "8"],
        &["--gpus", "8", "--framework", "megatron"],
        &["--offload", "optimizer", "--zero", "1", "--gpus", "2"],
    ] {
        let mut args = LLAMA_8B.to_vec();
        args.push("2048");
        args.extend(["--optimizer", "adamw", "--optimizer-in-backward"]);
        args.extend(extra);
        let (code, _, stderr) = run(&args);
        assert_eq!(code, 2, "{extra:?}: {stderr}");
        assert!(stderr.contains("--optimizer-in-backward"), "{stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    }
}

/// Per-layer GaLore is GaLore with the step in backward: the 8-bit GaLore
/// moments are smaller than GaLore's fp32 ones (the fp32 projections, which
/// pin whole SVD factors, are the same), and the note names GaLore's per-layer mode.
#[test]
fn per_layer_galore_is_galore_stepped_in_backward() {
    let galore = estimate(&["--optimizer", "galore-adamw", "--optimizer-in-backward"]);
    let galore_8bit = estimate(&[
        "--optimizer",
        "galore-adamw-8bit",
        "--optimizer-in-backward",
    ]);
    assert_eq!(galore_8bit["optimizer"], "galore-adamw-8bit");
    assert_eq!(galore_8bit["optimizer_in_backward"], true);
    assert!(
        int(&galore_8bit["memory"]["optimizer_states"])
            < int(&galore["memory"]["optimizer_states"])
    );
    assert_eq!(int(&galore_8bit["memory"]["gradients"]), 128_256 * 4096 * 2);
    let notes = galore_8bit["notes"].as_array().unwrap();
    assert!(
        notes
            .iter()
            .any(|n| n.as_str().unwrap().contains("galore_adamw8bit_per_layer"))
    );
}

/// `fit` accepts the flag; its ZeRO-3 what-if is FSDP2's full shard.
#[test]
fn fit_searches_with_it() {
    let (code, stdout, stderr) = run(&[
        "fit",
        "--model",
        "llama-3.1-8b",
        "--precision",
        "bf16",
        "--optimizer",
        "adamw",
        "--seq-len",
        "1024",
        "--device",
        "rtx-4090",
        "--optimizer-in-backward",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("optimizer in backward"), "{stdout}");
}
