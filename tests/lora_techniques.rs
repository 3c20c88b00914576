//! `--lora-dropout` and `--lora-dtype`: what each adapter keeps (measured
//! with real peft in `tests/fixtures/timeline/*__lora-*.json`, checked by
//! `tests/timeline.rs`) and how the flags read.

mod common;

use common::{int, json_of, run};

fn estimate(extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "estimate",
        "--model",
        "llama-3.1-8b",
        "--precision",
        "bf16",
        "--optimizer",
        "adamw",
        "--lora-rank",
        "16",
        "--micro-batch",
        "1",
        "--seq-len",
        "2048",
        "--format",
        "json",
    ];
    args.extend(extra);
    json_of(&args)
}

/// bf16 adapters (torchtune, litgpt) keep weights, gradients and Adam's
/// states in half the bytes of peft's fp32 ones, and share the layer's
/// bf16 input instead of saving an fp32 copy per adapter.
#[test]
fn bf16_adapters_halve_the_adapter_pieces() {
    let fp32 = estimate(&[]);
    let bf16 = estimate(&["--lora-dtype", "bf16"]);
    assert_eq!(fp32["lora"]["dtype"], "fp32");
    assert_eq!(bf16["lora"]["dtype"], "bf16");
    for piece in ["gradients", "optimizer_states"] {
        assert_eq!(
            int(&fp32["memory"][piece]),
            2 * int(&bf16["memory"][piece]),
            "{piece}"
        );
    }
    assert!(int(&bf16["memory"]["activations"]) < int(&fp32["memory"]["activations"]));
}

/// Dropout: each adapter saves its own dropped input and a mask, so the
/// activations grow; 0 is peft's default and says so.
#[test]
fn dropout_adds_each_adapters_input_and_mask() {
    let bf16 = ["--lora-dtype", "bf16"];
    let without = estimate(&bf16);
    let with = estimate(&[&bf16[..], &["--lora-dropout", "0.05"]].concat());
    assert_eq!(without["lora"]["dropout"], 0.0);
    assert_eq!(with["lora"]["dropout"], 0.05);
    // Llama-3.1-8B, all-linear, 2048 tokens, 32 layers: with dropout q, k,
    // v, o, gate and up each save their own 4096-wide dropped input and
    // down its 14336-wide one, bf16 plus a 1-byte CUDA mask; without, the
    // frozen base kept only the shared inputs adapters read: q/k/v's and
    // gate/up's (4096 each) and down's (14336); o's is the attention
    // output, saved by the kernel either way. Layer 0's q/k/v read a
    // frozen embedding's output, which needs no gradient: their dropouts
    // build no autograd node and save no mask.
    let grown = int(&with["memory"]["activations"]) - int(&without["memory"]["activations"]);
    let own = 32 * 2048 * 3 * (6 * 4096 + 14336) - 2048 * 3 * 4096;
    let shared = 32 * 2048 * 2 * (4096 + 4096 + 14336);
    assert_eq!(grown, own - shared);
}

#[test]
fn bad_values_are_refused() {
    for (flag, value) in [
        ("--lora-dropout", "1"),
        ("--lora-dropout", "-0.1"),
        ("--lora-dropout", "often"),
        ("--lora-dtype", "int8"),
    ] {
        let (code, _, stderr) = run(&[
            "estimate",
            "--model",
            "llama-3.1-8b",
            "--lora-rank",
            "8",
            flag,
            value,
        ]);
        assert_eq!(code, 2, "{flag} {value}: {stderr}");
        assert!(stderr.contains(value), "{stderr}");
    }
}
