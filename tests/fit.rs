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
    // `fits` reads what the allocator reserves; `fits_allocated` the peak.
    assert_eq!(
        e["fits_allocated"],
        Value::Bool(int(&memory["peak"]) <= int(&e["capacity"]["bytes"]))
    );
    assert_eq!(
        e["fits"],
        Value::Bool(int(&memory["reserved"]) <= int(&e["capacity"]["bytes"]))
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
    // Llama's layers run every mode, torchtitan's per-op policy included.
    assert_eq!(modes.len(), 4);
    let largest: Vec<u64> = modes.iter().map(|m| int(&m["largest"])).collect();
    assert!(
        largest[3] >= largest[2] && largest[2] >= largest[1] && largest[1] >= largest[0],
        "{largest:?}"
    );
    for (mode, batch) in ["none", "selective", "op", "full"].iter().zip(&largest) {
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

/// Issue 10 (e): phi's activations were never estimated, not even for
/// the `phi-2` preset. A Phi layer in bf16 with flash attention on CUDA,
/// by hand (T = 2048, h = a·d = 2560, f = 10240, 32 layers): one
/// LayerNorm's input and fp32 statistics 2Th + 8T, its output read by
/// q/k/v and fc1 once 2Th, the copy of the per-head flash output `dense`
/// reads 2Th, q, k, v, output 8Th and the log-sum-exp 4aT, NewGELU's four
/// tensors and fc2's input 10Tf, two 1-byte `resid_pdrop` masks 2Th.
#[test]
fn phi_2_activations_are_estimated_exactly() {
    let base = [
        "estimate",
        "--model",
        "phi-2",
        "--micro-batch",
        "1",
        "--seq-len",
        "2048",
    ];
    let e = json(&base);
    assert_eq!(e["activations_estimated"], true);
    assert!(int(&e["memory"]["activations"]) > 0);
    assert_eq!(e["memory"]["activations"], e["activations"]["total"]);

    let mut args = base.to_vec();
    args.extend(["--precision", "mixed-bf16", "--attention", "flash"]);
    let e = json(&args);
    let parts: Vec<(String, u64)> = e["activations"]["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|part| {
            (
                part["name"].as_str().unwrap().to_string(),
                int(&part["bytes"]),
            )
        })
        .collect();
    let (t, h, f, a, layers) = (2048u64, 2560u64, 10240u64, 32u64, 32u64);
    let expected = [
        ("norms", 2 * t * h + 8 * t),
        ("attention", 2 * t * h + 2 * t * h),
        ("attention core", 8 * t * h + 4 * a * t),
        ("mlp", 10 * t * f),
        ("dropout masks", 2 * t * h),
    ]
    .map(|(name, bytes)| (name.to_string(), layers * bytes));
    assert_eq!(parts, expected);
}

/// Phi-1.5 has no preset: its published config.json (microsoft/phi-1_5,
/// the `PhiConfig` sizes) read from a file.
#[test]
fn a_phi_1_5_config_gets_activations() {
    let dir = tempfile::Builder::new()
        .prefix("trainmem-phi")
        .tempdir_in(std::env::temp_dir())
        .unwrap();
    let path = dir.path().join("config.json");
    let config = serde_json::json!({
        "architectures": ["PhiForCausalLM"], "model_type": "phi",
        "attention_dropout": 0.0, "embd_pdrop": 0.0, "resid_pdrop": 0.0,
        "hidden_act": "gelu_new", "hidden_size": 2048, "intermediate_size": 8192,
        "layer_norm_eps": 1e-05, "max_position_embeddings": 2048,
        "num_attention_heads": 32, "num_hidden_layers": 24, "num_key_value_heads": null,
        "partial_rotary_factor": 0.5, "qk_layernorm": false, "rope_scaling": null,
        "rope_theta": 10000.0, "tie_word_embeddings": false, "vocab_size": 51200,
    });
    std::fs::write(&path, config.to_string()).unwrap();
    let e = json(&[
        "estimate",
        "--model",
        path.to_str().unwrap(),
        "--micro-batch",
        "1",
        "--seq-len",
        "2048",
    ]);
    assert_eq!(e["activations_estimated"], true);
    assert!(int(&e["memory"]["activations"]) > 0);
    assert_eq!(int(&e["parameters"]["total"]), 1_418_270_720);
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

/// Issue 12: torchtitan's per-op policy is searched where a model's layers
/// can run it, and left out elsewhere (GPT-2's fused projection).
#[test]
fn fit_searches_op_recompute_only_where_it_is_priced() {
    let fit = json(&[
        "fit",
        "--model",
        "gpt2",
        "--seq-len",
        "1024",
        "--capacity",
        "24GB",
    ]);
    let modes: Vec<&str> = fit["recompute_modes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["recompute"].as_str().unwrap())
        .collect();
    assert_eq!(modes, ["none", "selective", "full"]);
    // Every N-th layer goes with full checkpointing only.
    let fit = json(&[
        "fit",
        "--model",
        "llama-3.2-1b",
        "--precision",
        "mixed-bf16",
        "--seq-len",
        "4096",
        "--capacity",
        "80GB",
        "--recompute",
        "full",
        "--recompute-every",
        "2",
    ]);
    let largest: Vec<u64> = fit["recompute_modes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| int(&m["largest"]))
        .collect();
    assert_eq!(largest.len(), 4);
    assert!(largest[3] >= largest[0], "{largest:?}");
    assert_eq!(int(&fit["estimate"]["activations"]["recompute_every"]), 2);
}
