//! FP8 training recipes (`--precision fp8-tensorwise|fp8-rowwise|te-fp8`).
//! fp8 matmuls need CUDA sm89+, so no CPU fixture: the rules cite their
//! sources (`src/precision/fp8.rs`) and these pin what the output says.

mod common;

use common::{int, json_of, run};

fn estimate(extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "estimate",
        "--model",
        "llama-3.1-8b",
        "--micro-batch",
        "1",
        "--seq-len",
        "8192",
        "--gpus",
        "8",
    ];
    args.extend(extra);
    args.extend(["--format", "json"]);
    json_of(&args)
}

#[test]
fn precisions_lists_the_three_recipes_with_their_sources() {
    let list = json_of(&["precisions", "--format", "json"]);
    for (name, source) in [
        ("fp8-tensorwise", "torchao/float8/float8_linear.py"),
        ("fp8-rowwise", "torchao/float8/float8_linear.py"),
        ("te-fp8", "transformer_engine/pytorch/module/linear.py"),
    ] {
        let recipe = list
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{name}"));
        assert!(
            recipe["fp8"]["source"].as_str().unwrap().contains(source),
            "{recipe}"
        );
    }
    let (code, out, _) = run(&["precisions", "--verbose"]);
    assert_eq!(code, 0);
    assert!(out.contains("fp8: torchao float8, rowwise dynamic scaling; source:"));
}

#[test]
fn torchao_keeps_the_bf16_saved_inputs_and_adds_only_casts() {
    let base = ["--fsdp", "full-shard", "--precision"];
    let bf16 = estimate(&[&base[..], &["mixed-bf16"]].concat());
    let fp8 = estimate(&[&base[..], &["fp8-tensorwise"]].concat());
    assert_eq!(bf16["activations"]["total"], fp8["activations"]["total"]);
    let casts = &fp8["activations"]["fp8"];
    // The widest linear: down_proj forward T·f + f·h, gate/up backward
    // 2·T·f + h·f + T·h, fp8, plus the fp32 tensorwise scales.
    let (t, h, f) = (8192u64, 4096u64, 14336u64);
    assert_eq!(int(&casts["forward_casts"]), t * f + f * h + 8);
    assert_eq!(
        int(&casts["backward_casts"]),
        2 * t * f + h * f + t * h + 16
    );
    assert_eq!(int(&casts["weight_cache"]), 0);
    assert!(int(&fp8["memory"]["peak"]) >= int(&bf16["memory"]["peak"]));
}

#[test]
fn transformer_engine_saves_fp8_inputs_and_keeps_its_weight_cache() {
    let base = ["--framework", "megatron", "--tp", "8", "--precision"];
    let bf16 = estimate(&[&base[..], &["mixed-bf16"]].concat());
    let fp8 = estimate(&[&base[..], &["te-fp8"]].concat());
    // Per layer and rank (tp 8): the two normalized inputs P·T·h -> T·h, fc2's
    // input P·T·f/8 -> T·f/8, and linear_proj's fp8 copy T·a·d/8 added.
    let (t, h, f, ad) = (8192u64, 4096u64, 14336u64 / 8, 4096u64 / 8);
    let per_layer = 2 * t * h + t * f - t * ad;
    assert_eq!(
        int(&bf16["activations"]["total"]) - int(&fp8["activations"]["total"]),
        32 * per_layer
    );
    let state = &fp8["activations"]["fp8"];
    assert_eq!(state["scaling"], "delayed");
    let cache = int(&state["weight_cache"]) + int(&state["scaling_state"]);
    assert!(cache > 1_700_000_000, "{cache}");
    // The cache is resident from the start of the step.
    let timeline = json_of(&[
        "timeline",
        "--model",
        "llama-3.1-8b",
        "--micro-batch",
        "1",
        "--seq-len",
        "8192",
        "--gpus",
        "8",
        "--framework",
        "megatron",
        "--tp",
        "8",
        "--precision",
        "te-fp8",
        "--format",
        "json",
    ]);
    let load = timeline["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| {
            e["tensor"]
                .as_str()
                .unwrap()
                .starts_with("fp8 weight caches")
        })
        .unwrap();
    assert_eq!(load["phase"], "load");
    assert_eq!(int(&load["bytes"]), cache);
}

#[test]
fn recipes_are_refused_where_their_implementation_does_not_run() {
    for (extra, needle) in [
        (&["--precision", "te-fp8"][..], "--framework megatron"),
        (
            &["--precision", "fp8-rowwise", "--framework", "megatron"],
            "te-fp8",
        ),
        (
            &["--precision", "fp8-tensorwise", "--platform", "cpu"],
            "sm89",
        ),
    ] {
        let mut args = vec![
            "estimate",
            "--model",
            "llama-3.2-1b",
            "--micro-batch",
            "1",
            "--seq-len",
            "64",
        ];
        args.extend(extra);
        let (code, _, err) = run(&args);
        assert_eq!(code, 2, "{extra:?}");
        assert!(err.contains(needle), "{err}");
    }
}
