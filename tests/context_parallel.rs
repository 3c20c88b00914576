//! `--cp N`: ring attention splits each sequence across N ranks (torch's
//! context_parallel as torchtitan applies it). No CPU fixture exists (the
//! ring needs a process group); these check the per-rank rules by hand.

mod common;

use common::{json_of, run};

fn estimate(extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "estimate",
        "--model",
        "llama-3.1-8b",
        "--precision",
        "mixed-bf16",
        "--fsdp",
        "full-shard",
        "--gpus",
        "8",
        "--micro-batch",
        "1",
    ];
    args.extend(extra);
    args.extend(["--format", "json"]);
    json_of(&args)
}

#[test]
fn each_rank_holds_s_over_n_tokens_of_every_activation() {
    let ring = estimate(&["--seq-len", "131072", "--cp", "8"]);
    let plain = estimate(&["--seq-len", "16384"]);
    assert_eq!(ring["activations"]["total"], plain["activations"]["total"]);
    assert_eq!(ring["parallelism"]["context"], 8);
    assert_eq!(ring["parallelism"]["data_parallel"], 1);
    // The states shard over dp × cp = 8 either way (torchtitan's dp_shard_cp).
    assert_eq!(ring["memory"]["weights"], plain["memory"]["weights"]);
    assert_eq!(
        ring["memory"]["optimizer_states"],
        plain["memory"]["optimizer_states"]
    );
    assert!(
        ring["activations"]["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("context parallel 8"))
    );
}

#[test]
fn the_ring_buffers_are_in_the_forward_of_every_layer() {
    let args = [
        "timeline",
        "--model",
        "llama-3.1-8b",
        "--precision",
        "mixed-bf16",
        "--fsdp",
        "full-shard",
        "--gpus",
        "8",
        "--micro-batch",
        "1",
        "--seq-len",
        "131072",
        "--cp",
        "8",
        "--format",
        "json",
    ];
    let timeline = json_of(&args);
    // Q = 32 x 16384 x 128, KV = 2 x 8 x 16384 x 128 elements, bf16:
    // 9 ranks' worth of key/value shards (the cat sent and the all-gather)
    // and the fp32 merged output with the block's fp32 copy.
    let (q, kv) = (32 * 16_384 * 128u64, 2 * 8 * 16_384 * 128u64);
    let expected = 9 * 2 * kv + 2 * 4 * q;
    let rings: Vec<u64> = timeline["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["tensor"] == "ring attention key/value buffers")
        .filter_map(|e| u64::try_from(e["bytes"].as_i64().unwrap()).ok())
        .collect();
    assert_eq!(rings.len(), 32);
    assert!(rings.iter().all(|b| *b == expected), "{rings:?}");
}

#[test]
fn bad_sequences_and_layouts_are_refused() {
    for (extra, needle) in [
        (&["--seq-len", "131064", "--cp", "8"][..], "multiple of 16"),
        (
            &["--seq-len", "4096", "--cp", "2", "--attention", "eager"],
            "eager",
        ),
        (&["--seq-len", "4096", "--cp", "3"], "tp × pp × cp"),
    ] {
        let mut args = vec![
            "estimate",
            "--model",
            "llama-3.1-8b",
            "--gpus",
            "8",
            "--micro-batch",
            "1",
        ];
        args.extend(extra);
        let (code, _, err) = run(&args);
        assert_eq!(code, 2, "{extra:?}");
        assert!(err.contains(needle), "{err}");
    }
}

#[test]
fn fit_keeps_the_context_parallel_degree_when_it_counts_gpus() {
    let (code, out, err) = run(&[
        "fit",
        "--model",
        "llama-3.1-8b",
        "--device",
        "h100-80gb",
        "--precision",
        "mixed-bf16",
        "--zero",
        "3",
        "--recompute",
        "full",
        "--micro-batch",
        "1",
        "--seq-len",
        "32768",
        "--gpus",
        "8",
        "--cp",
        "4",
    ]);
    assert_eq!(code, 0, "{err}");
    // One data-parallel rank of cp 4 fits: 4 GPUs, not 1.
    assert!(out.contains("sequence 32768: 4 GPUs"), "{out}");
}
