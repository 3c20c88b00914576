//! The step-time model through the binary: FLOPs from the real inventory,
//! the device's peaks, the null time and its reason, and bad flags.

mod common;

use common::{json_of, run};
use serde_json::Value;

fn time(args: &[&str]) -> Value {
    let mut all = vec!["estimate"];
    all.extend(args);
    all.extend(["--format", "json"]);
    json_of(&all)
}

/// Matmul parameters a token meets: the linear FLOPs over 6 x tokens.
fn active(model: &str) -> f64 {
    let report = time(&[
        "--model",
        model,
        "--micro-batch",
        "1",
        "--seq-len",
        "1",
        "--device",
        "h100",
    ]);
    let flops = &report["time"]["flops"];
    flops["linear"].as_f64().unwrap() / 6.0 / flops["tokens"].as_f64().unwrap()
}

#[test]
fn a_mixture_of_experts_counts_its_active_experts() {
    // Published active parameters, embeddings included (which do no matmul):
    // Mixtral 8x7B 12.9B (Mistral AI, "Mixtral of experts"), DeepSeek-V3 37B
    // (its technical report, arXiv:2412.19437), Qwen3-30B-A3B 3.3B (its model card).
    let cases = [
        ("mixtral-8x7b", 12.9e9, 32_000.0 * 4096.0),
        ("deepseek-v3", 37.0e9, 129_280.0 * 7168.0),
        ("qwen3-30b-a3b", 3.3e9, 151_936.0 * 2048.0),
    ];
    for (model, published, embedding) in cases {
        let counted = active(model) + embedding;
        let error = (counted - published) / published;
        assert!(error.abs() < 0.02, "{model}: {counted} vs {published}");
    }
}

#[test]
fn a_frozen_base_skips_its_weight_gradients() {
    let args = |lora: bool| {
        let mut a = vec![
            "--model",
            "llama-3.1-8b",
            "--micro-batch",
            "1",
            "--seq-len",
            "512",
            "--device",
            "h100",
        ];
        if lora {
            a.extend(["--lora-rank", "8"]);
        }
        time(&a)["time"]["flops"]["linear"].as_f64().unwrap()
    };
    let (full, lora) = (args(false), args(true));
    // 4 x P instead of 6 x P for the base, plus the small adapters.
    let ratio = lora / full;
    assert!(ratio > 4.0 / 6.0 && ratio < 4.0 / 6.0 + 0.01, "{ratio}");
}

#[test]
fn the_step_adds_up_and_an_fp8_recipe_uses_the_fp8_peak() {
    let report = time(&[
        "--model",
        "llama-3.1-8b",
        "--micro-batch",
        "1",
        "--seq-len",
        "2048",
        "--device",
        "h100",
        "--gpus",
        "16",
        "--tp",
        "2",
        "--pp",
        "2",
        "--grad-accumulation",
        "8",
        "--framework",
        "megatron",
        "--precision",
        "te-fp8",
    ]);
    let t = &report["time"];
    let get = |k: &str| t[k].as_f64().unwrap();
    assert_eq!(t["matmul_precision"], "fp8");
    assert_eq!(get("peak_flops_per_s"), 1979e12);
    let sum = get("compute_s") + get("communication_s") + get("bubble_s") + get("offload_s");
    assert!((get("step_time_s") - sum).abs() < 1e-9);
    let parts = get("matmul_s") + get("attention_s") + get("memory_bound_s") + get("optimizer_s");
    assert!((get("compute_s") - parts).abs() < 1e-9);
    // 1F1B: (p - 1) / m of the pipelined compute (the optimizer step is not pipelined).
    assert!((get("bubble_s") - (get("compute_s") - get("optimizer_s")) / 8.0).abs() < 1e-9);
    // 1 x 2048 x 8 micro-batches x 4 data-parallel ranks.
    assert_eq!(t["tokens_per_step"], 65_536);
    assert!((get("tokens_per_s") - 65_536.0 / get("step_time_s")).abs() < 1e-6);
}

#[test]
fn without_a_known_peak_time_is_null_and_the_report_says_why() {
    let base = [
        "--model",
        "llama-3.1-8b",
        "--micro-batch",
        "1",
        "--seq-len",
        "512",
    ];
    for (extra, why) in [
        (&[][..], "no device with a known peak"),
        (
            &["--device", "v100-16gb"][..],
            "`v100-16gb` has no dense bf16 peak",
        ),
        (&["--capacity", "80GB"][..], "no device with a known peak"),
    ] {
        let mut args = base.to_vec();
        args.extend(extra);
        let report = time(&args);
        assert!(report["time"].is_null(), "{extra:?}");
        assert!(
            report["time_unavailable"].as_str().unwrap().contains(why),
            "{extra:?}"
        );
        let mut text = vec!["estimate"];
        text.extend(&args);
        let (code, stdout, _) = run(&text);
        assert_eq!(code, 0);
        assert!(
            stdout.contains(&format!("step time: not estimated: {}", &why[..10])),
            "{stdout}"
        );
    }
    // --peak-tflops stands in for a device.
    let mut args = base.to_vec();
    args.extend(["--capacity", "24GB", "--peak-tflops", "165", "--mfu", "40%"]);
    let t = &time(&args)["time"];
    assert_eq!(t["peak_flops_per_s"], 165e12);
    assert_eq!(t["mfu"], 0.4);
    assert_eq!(t["mfu_source"], "--mfu");
}

#[test]
fn bad_speed_flags_are_refused_with_exit_2() {
    let base = [
        "estimate",
        "--model",
        "llama-3.1-8b",
        "--micro-batch",
        "1",
        "--seq-len",
        "512",
        "--device",
        "h100",
    ];
    for (flag, value) in [
        ("--mfu", "0"),
        ("--mfu", "1.5"),
        ("--mfu", "fast"),
        ("--mfu", "NaN"),
        ("--peak-tflops", "-3"),
        ("--peak-tflops", "inf"),
        ("--peak-tflops", "1e12"),
        ("--intra-node-bandwidth", "0GB/s"),
        ("--inter-node-bandwidth", "400Gb/s"),
        ("--virtual-stages", "0"),
    ] {
        let mut args = base.to_vec();
        args.extend([flag, value]);
        let (code, stdout, stderr) = run(&args);
        assert_eq!(code, 2, "{flag} {value}: {stderr}");
        assert!(stdout.is_empty());
        assert!(stderr.starts_with("error: "), "{stderr}");
    }
}

#[test]
fn bandwidth_flags_override_the_catalogue() {
    let args = |bw: &str| {
        time(&[
            "--model",
            "llama-3.1-8b",
            "--micro-batch",
            "1",
            "--seq-len",
            "2048",
            "--device",
            "h100",
            "--gpus",
            "8",
            "--tp",
            "8",
            "--intra-node-bandwidth",
            bw,
        ])["time"]
            .clone()
    };
    // Each call's latency is the same at both bandwidths; the bytes take 10x longer.
    let latency = |t: &Value| {
        t["collectives"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["calls"].as_f64().unwrap())
            .sum::<f64>()
            * 10e-6
    };
    let (fast, slow) = (args("900GB/s"), args("90GB/s"));
    let exposed = |t: &Value| t["communication_s"].as_f64().unwrap() - latency(t);
    assert!(
        (exposed(&slow) / exposed(&fast) - 10.0).abs() < 1e-6,
        "{fast} {slow}"
    );
}

#[test]
fn the_device_catalogue_gives_speeds_with_sources() {
    let devices = json_of(&["devices", "--format", "json"]);
    let h100 = devices
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "h100-80gb")
        .unwrap();
    assert_eq!(h100["compute"]["bf16_tflops"], 989);
    assert_eq!(h100["compute"]["fp8_tflops"], 1979);
    assert!(
        h100["compute"]["source"]
            .as_str()
            .unwrap()
            .contains("datasheet")
    );
}

/// A negative rate is named and explained, not taken for an unknown flag.
#[test]
fn negative_rates_are_named() {
    for (flag, value) in [
        ("--mfu", "-1"),
        ("--peak-tflops", "-5"),
        ("--intra-node-bandwidth", "-5GB/s"),
        ("--inter-node-bandwidth", "-1"),
    ] {
        let (code, stdout, stderr) = run(&[
            "estimate",
            "--model",
            "llama-3.2-1b",
            "--micro-batch",
            "1",
            "--seq-len",
            "512",
            flag,
            value,
        ]);
        assert_eq!((code, stdout.as_str()), (2, ""), "{flag} {value}");
        assert!(
            stderr.starts_with(&format!("error: invalid {flag} `{value}`")),
            "{stderr}"
        );
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    }
}
