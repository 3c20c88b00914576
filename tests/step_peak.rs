//! The peak as the step timeline computes it: the bugs found when the old
//! formula was tried as a user would (issue 10), each pinned.

mod common;

use common::{int, json_of};

const LLAMA_8B: [&str; 6] = [
    "--model",
    "llama-3.1-8b",
    "--optimizer",
    "adamw",
    "--precision",
    "mixed-bf16",
];

fn estimate(extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["estimate"];
    args.extend(LLAMA_8B);
    args.extend(extra);
    args.extend(["--format", "json"]);
    json_of(&args)
}

/// (a) FSDP steps the optimizer on each rank's shards: its foreach temporary
/// is one fp32 copy of the shard (8.03B / 8 x 4 B = 3.74 GiB), not of the
/// whole model (29.92 GiB).
#[test]
fn fsdp_prices_the_optimizer_temporary_on_the_shard() {
    let e = estimate(&["--gpus", "8", "--fsdp", "full-shard"]);
    let temporary = int(&e["transients"]["optimizer_step"]);
    let shard = 8_030_261_248u64.div_ceil(8) * 4;
    assert!(temporary <= shard + (1 << 20), "{temporary} vs {shard}");
    assert!(temporary >= shard - (1 << 24), "{temporary} vs {shard}");
}

/// (b) FSDP's MixedPrecisionPolicy gathers bf16 parameters per layer: no
/// autocast copies of the whole model are saved, unless autocast is asked for.
#[test]
fn fsdp_mixed_precision_is_a_policy_by_default() {
    let has_autocast = |e: &serde_json::Value| {
        e["activations"]["layers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "autocast weight copies")
    };
    let workload = [
        "--micro-batch",
        "1",
        "--seq-len",
        "2048",
        "--gpus",
        "8",
        "--fsdp",
        "full-shard",
    ];
    let policy = estimate(&workload);
    assert!(!has_autocast(&policy));
    assert_eq!(policy["parallelism"]["fsdp_mixed_precision"], "policy");
    let mut autocast_args = workload.to_vec();
    autocast_args.extend(["--fsdp-mixed-precision", "autocast"]);
    let autocast = estimate(&autocast_args);
    assert!(has_autocast(&autocast));
    assert!(int(&autocast["memory"]["activations"]) > int(&policy["memory"]["activations"]));
}

/// (c) With the optimizer offloaded, the host keeps the fp32 gradient
/// partition the host step reads (16 / 18 / 20 bytes per parameter with
/// Adam for ZeRO-1/2, ZeRO-3, ZeRO-3 with the parameters), and the step's
/// temporaries are not on the device.
#[test]
fn offloaded_optimizers_keep_fp32_gradients_and_step_on_the_host() {
    for (zero, offload, host_bytes) in [
        ("2", "optimizer", 16u64),
        ("3", "optimizer", 18),
        ("3", "optimizer+params", 20),
    ] {
        let e = json_of(&[
            "estimate",
            "--params",
            "8B",
            "--optimizer",
            "adam",
            "--precision",
            "mixed-bf16",
            "--gpus",
            "8",
            "--zero",
            zero,
            "--offload",
            offload,
            "--format",
            "json",
        ]);
        let host = &e["host"];
        let per_parameter = (int(&host["total"]) - int(&host["total"]) % 1_000_000) / 8_000_000_000;
        assert_eq!(per_parameter, host_bytes, "ZeRO-{zero} {offload}: {host}");
        assert_eq!(int(&host["gradients"]) % (8_000_000_000 / 8), 0);
        assert_eq!(
            int(&e["transients"]["optimizer_step"]),
            0,
            "the step runs on the host"
        );
    }
}

/// (d) ZeRO-3 with everything offloaded still gathers each layer on the
/// GPU: the peak is never zero.
#[test]
fn fully_offloaded_zero_3_still_gathers_layers_on_the_device() {
    let e = json_of(&[
        "estimate",
        "--model",
        "llama-3.1-405b",
        "--gpus",
        "8",
        "--zero",
        "3",
        "--offload",
        "optimizer+params",
        "--precision",
        "mixed-bf16",
        "--optimizer",
        "adamw",
        "--device",
        "h100-80gb",
        "--format",
        "json",
    ]);
    let peak = int(&e["memory"]["peak"]);
    // One Llama 3.1 405B layer in bf16 is 6.38 GB; two are gathered at once.
    assert!(peak > 2 * 6_000_000_000, "{peak}");
    assert!(int(&e["timeline"]["peak"]["by_kind"]["weights"]) > 12_000_000_000);
    assert_eq!(e["timeline"]["peak"]["phase"], "backward");
}

/// (f) The step counters' note gives the same per-node figure as the host line.
#[test]
fn host_counters_are_one_figure() {
    let (code, stdout, _) =
        common::run(&["estimate", "--params", "7B", "--gpus", "8", "--zero", "1"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("host memory: 32 B per node"), "{stdout}");
    assert!(stdout.contains("`step` counters (32 B)"), "{stdout}");
}

/// `--init every-rank` (a model moved to the GPU before FSDP1 wraps it):
/// each rank holds the whole model before sharding it, and that is the
/// peak of a small step.
#[test]
fn every_rank_init_can_run_out_of_memory_before_training() {
    let meta = estimate(&["--gpus", "8", "--fsdp", "full-shard", "--init", "meta"]);
    let every = estimate(&[
        "--gpus",
        "8",
        "--fsdp",
        "full-shard",
        "--framework",
        "fsdp1",
        "--init",
        "every-rank",
    ]);
    assert_eq!(every["timeline"]["peak"]["phase"], "load");
    // The whole model in fp32 (FSDP keeps fp32 parameters) before sharding.
    assert!(int(&every["timeline"]["load_peak"]) > 32_000_000_000);
    assert!(
        int(&every["timeline"]["load_peak"]) > int(&meta["timeline"]["load_peak"]) + 20_000_000_000
    );
}

/// FSDP1's init replays the wrap unit by unit (issue 24, measured on CPU
/// by `tools/measure_fsdp.py`): transformers' loops (HF Trainer,
/// accelerate) leave the model in host memory and pass `device_id`, so one
/// wrapped unit at a time is moved to the device (`_move_module_to_device`
/// in `torch/distributed/fsdp/_init_utils.py`); litgpt builds on the meta
/// device, which FSDP1 materializes one unit at a time as well
/// (`_materialize_meta_module`). The root unit, the embedding, the final
/// norm and the head, is wrapped last and is the largest.
#[test]
fn fsdp1_init_defaults_follow_the_implementation() {
    let fsdp1 = |extra: &[&str]| {
        let mut args = vec!["timeline"];
        args.extend(LLAMA_8B);
        args.extend([
            "--gpus",
            "8",
            "--fsdp",
            "full-shard",
            "--framework",
            "fsdp1",
        ]);
        args.extend(extra);
        args.extend(["--format", "json"]);
        json_of(&args)
    };
    // The largest unit materialized on the device, in bytes (0: none).
    let unit = |t: &serde_json::Value| -> u64 {
        t["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| {
                e["tensor"]
                    .as_str()
                    .unwrap()
                    .starts_with("a wrapped unit materialized")
            })
            .map(|e| e["bytes"].as_i64().unwrap().max(0) as u64)
            .max()
            .unwrap_or(0)
    };
    let transformers = fsdp1(&[]);
    let litgpt = fsdp1(&["--implementation", "litgpt"]);
    let every = fsdp1(&["--init", "every-rank"]);
    // The root: the embedding and the head, 128256 x 4096 fp32 each, and the final norm.
    assert_eq!(unit(&transformers), 2 * 128_256 * 4096 * 4 + 4096 * 4);
    assert_eq!(unit(&litgpt), unit(&transformers));
    assert_eq!(unit(&every), 0);
    assert_eq!(unit(&fsdp1(&["--init", "per-unit"])), unit(&transformers));
    assert!(int(&every["load_peak"]) > int(&transformers["load_peak"]));
    let (code, _, stderr) = common::run(&["estimate", "--params", "7B", "--implementation", "hf"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("`hf`") && stderr.contains("transformers"),
        "{stderr}"
    );
}

/// Gradient accumulation keeps gradients from one micro-batch to the next:
/// they exist before backward, so the peak grows by a layer's new gradient.
#[test]
fn accumulated_gradients_raise_the_peak() {
    let sgd = |extra: &[&str]| {
        let mut args = vec![
            "estimate",
            "--model",
            "llama-3.2-1b",
            "--optimizer",
            "sgd",
            "--precision",
            "bf16",
            "--micro-batch",
            "1",
            "--seq-len",
            "4096",
            "--format",
            "json",
        ];
        args.extend(extra);
        json_of(&args)
    };
    let once = sgd(&[]);
    let accumulated = sgd(&["--grad-accumulation", "4"]);
    assert!(int(&accumulated["memory"]["peak"]) > int(&once["memory"]["peak"]));
}

/// bitsandbytes before 0.43.2 saved each 4-bit matmul's input.
#[test]
fn old_bitsandbytes_keeps_quantized_inputs() {
    let qlora = [
        "estimate",
        "--model",
        "llama-3.1-8b",
        "--lora-rank",
        "16",
        "--lora-targets",
        "q_proj,v_proj",
        "--quantize",
        "nf4",
        "--micro-batch",
        "1",
        "--seq-len",
        "2048",
        "--precision",
        "bf16",
        "--format",
        "json",
    ];
    let current = json_of(&qlora);
    let mut old = qlora.to_vec();
    old.extend(["--bitsandbytes", "0.43.1"]);
    let old = json_of(&old);
    assert!(int(&old["memory"]["activations"]) > int(&current["memory"]["activations"]));
    let (code, _, stderr) = common::run(&["estimate", "--params", "7B", "--bitsandbytes", "x.y"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("--bitsandbytes"), "{stderr}");
}

/// litgpt's QLoRA trains its token embedding only from 0.5.0, whose
/// `finetune/lora.py` swaps in bitsandbytes' `StableEmbedding`; before it
/// (`--litgpt 0.4.13`, the releases of litgpt's published tables) the
/// embedding stays frozen. A pre-release counts as its release.
#[test]
fn litgpt_trains_its_embedding_from_0_5() {
    let qlora = |version: &'static str| {
        let mut args = vec![
            "estimate",
            "--model",
            "llama-3.1-8b",
            "--implementation",
            "litgpt",
            "--lora-rank",
            "8",
            "--lora-targets",
            "q_proj,v_proj",
            "--quantize",
            "nf4",
            "--precision",
            "bf16",
            "--optimizer",
            "paged-adamw",
            "--micro-batch",
            "1",
            "--seq-len",
            "512",
            "--format",
            "json",
        ];
        if !version.is_empty() {
            args.extend(["--litgpt", version]);
        }
        json_of(&args)
    };
    let trainable = |v: &serde_json::Value| int(&v["parameters"]["trainable"]);
    let embedding = 128_256 * 4096;
    let current = qlora("");
    assert_eq!(trainable(&current), trainable(&qlora("0.5.13")));
    assert_eq!(trainable(&current), trainable(&qlora("v0.5.0")));
    assert_eq!(trainable(&current), trainable(&qlora("0.4.13")) + embedding);
    assert_eq!(
        trainable(&qlora("0.4.13.dev1")),
        trainable(&qlora("0.4.13"))
    );
    // finetune/lora.py builds PagedAdamW before the swap: the optimizer keeps
    // the replaced embedding (one more bf16 V x h on the device) and has no
    // states for the new one, whose bf16 gradient is never zeroed: it is on
    // the device when the step peaks, whenever that is.
    let old = qlora("0.4.13");
    let memory = |v: &serde_json::Value, piece: &str| int(&v["memory"][piece]);
    assert_eq!(
        memory(&current, "weights"),
        memory(&old, "weights") + 2 * embedding
    );
    assert_eq!(
        memory(&current, "gradients"),
        memory(&old, "gradients") + 2 * embedding
    );
    assert_eq!(
        memory(&current, "optimizer_states"),
        memory(&old, "optimizer_states")
    );
    for figure in [&["host", "optimizer_states"], &["parameters", "total"]] {
        assert_eq!(
            int(&current[figure[0]][figure[1]]),
            int(&old[figure[0]][figure[1]])
        );
    }
    let at_peak = |v: &serde_json::Value| int(&v["timeline"]["peak"]["by_kind"]["gradients"]);
    assert!(at_peak(&current) >= at_peak(&old) + 2 * embedding);
}

/// `--framework megatron` prices Megatron-core's layers with Transformer
/// Engine's fused kernels: a fused norm keeps its input, fp32 rsigma and
/// normalized output (2(2Th + 4T) per layer for two norms), where
/// transformers' RMSNorm keeps fp32 copies.
#[test]
fn megatron_layers_use_its_fused_kernels() {
    let activations = |framework: &str| {
        json_of(&[
            "estimate",
            "--model",
            "llama-2-7b",
            "--precision",
            "mixed-bf16",
            "--micro-batch",
            "1",
            "--seq-len",
            "4096",
            "--gpus",
            "8",
            "--zero",
            "1",
            "--framework",
            framework,
            "--format",
            "json",
        ])["activations"]
            .clone()
    };
    let part = |a: &serde_json::Value, name: &str| {
        a["layers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .map(|p| int(&p["bytes"]))
            .unwrap()
    };
    let (megatron, transformers) = (activations("megatron"), activations("deepspeed"));
    let (t, h, layers) = (4096u64, 4096u64, 32u64);
    assert_eq!(part(&megatron, "norms"), layers * 2 * (2 * t * h + 4 * t));
    assert!(part(&transformers, "norms") > part(&megatron, "norms"));
    assert!(int(&megatron["total"]) < int(&transformers["total"]));
}

/// Issue 12: the loss is stated and moves the peak. Llama 3.1's 128,256-word
/// vocabulary at 8,192 tokens: the standard loss's fp32 copy and two fp32
/// gradients of T x V; torchtune's chunks upcast one eighth at a time;
/// Liger's fused kernel never holds the logits.
#[test]
fn chunked_and_fused_losses_lower_the_peak_and_are_stated() {
    let at = |loss: &str| {
        let e = estimate(&["--micro-batch", "1", "--seq-len", "8192", "--loss", loss]);
        assert_eq!(e["activations"]["loss_function"], loss);
        assert!(
            e["activations"]["notes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|n| n.as_str().unwrap().starts_with(&format!("loss: {loss}"))),
            "{loss}"
        );
        e
    };
    let standard = at("standard");
    let chunked = at("chunked:8");
    let fused = at("fused");
    let peak = |e: &serde_json::Value| int(&e["memory"]["peak"]);
    assert!(peak(&chunked) < peak(&standard));
    assert!(peak(&fused) < peak(&chunked));
    assert_eq!(int(&fused["activations"]["logits"]), 0);
    // The standard loss's backward transient, 2 x 4·T·V, is cut by 8.
    let (t, v) = (8192u64, 128_256u64);
    assert_eq!(
        int(&standard["activations"]["backward_transient"]),
        8 * t * v
    );
    assert_eq!(int(&chunked["activations"]["backward_transient"]), t * v);
}

/// Issue 12: bad loss and recompute settings are refused in one line, exit 2.
#[test]
fn loss_and_recompute_settings_are_refused_with_reasons() {
    for (extra, says) in [
        (&["--loss", "chunked:0"][..], "at least 1 chunk"),
        (&["--loss", "chunked:x"][..], "whole number"),
        (&["--loss", "chunked:9000"][..], "at most --seq-len 4096"),
        (&["--loss", "fused", "--tp", "2", "--gpus", "2"][..], "--tp"),
        (
            &["--recompute", "op", "--recompute-every", "2"][..],
            "every layer",
        ),
        (&["--recompute-every", "2"][..], "--recompute full"),
        (&["--recompute", "op", "--attention", "eager"][..], "sdpa"),
    ] {
        let mut args = vec!["estimate"];
        args.extend(LLAMA_8B);
        args.extend(["--micro-batch", "1", "--seq-len", "4096"]);
        args.extend(extra);
        let (code, _, stderr) = common::run(&args);
        assert_eq!(code, 2, "{extra:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(stderr.contains(says), "{extra:?}: {stderr}");
    }
    let (code, _, stderr) = common::run(&[
        "estimate",
        "--model",
        "gpt2",
        "--micro-batch",
        "1",
        "--seq-len",
        "512",
        "--recompute",
        "op",
    ]);
    assert_eq!(code, 2);
    assert!(stderr.contains("not `gpt2`"), "{stderr}");
}

/// Issue 12: checkpointing every second layer lies between none and full,
/// and torchtitan's per-op policy keeps more than full and less than none.
#[test]
fn op_and_every_second_layer_recompute_sit_between_none_and_full() {
    let total = |extra: &[&str]| {
        let mut all = vec!["--micro-batch", "1", "--seq-len", "8192"];
        all.extend(extra);
        int(&estimate(&all)["activations"]["total"])
    };
    let none = total(&["--recompute", "none"]);
    let op = total(&["--recompute", "op"]);
    let full = total(&["--recompute", "full"]);
    let half = total(&["--recompute", "full", "--recompute-every", "2"]);
    assert!(full < op && op < none, "{full} {op} {none}");
    assert!(full < half && half < none, "{full} {half} {none}");
}

/// Issue 12: the text report names the loss and recomputation it priced.
#[test]
fn the_text_report_states_the_loss_and_recompute() {
    let mut args = vec!["estimate"];
    args.extend(LLAMA_8B);
    args.extend([
        "--micro-batch",
        "1",
        "--seq-len",
        "4096",
        "--loss",
        "chunked:8",
        "--recompute",
        "full",
        "--recompute-every",
        "2",
    ]);
    let (code, stdout, _) = common::run(&args);
    assert_eq!(code, 0);
    assert!(
        stdout.contains("note: loss: chunked:8 (torchtune's"),
        "{stdout}"
    );
    assert!(
        stdout.contains("note: recompute: full (gradient checkpointing of each layer's input), only on layers 2, 4, ..."),
        "{stdout}"
    );
}

/// (g) bitsandbytes' paged optimizers keep the states of tensors of at least
/// 1e5 values in CUDA unified memory, which the driver pages to the host
/// under pressure and torch's allocator never sees: they are not device
/// memory. torchtune's low-memory 7B full fine-tune (paged AdamW, bf16)
/// measured 18.81 GiB allocated where trainmem said 67.94 GiB. On the CPU
/// they are ordinary tensors.
#[test]
fn paged_optimizer_states_are_not_device_memory() {
    let run = |platform: &str| {
        json_of(&[
            "estimate",
            "--model",
            "llama-2-7b",
            "--precision",
            "bf16",
            "--optimizer",
            "paged-adamw",
            "--platform",
            platform,
            "--format",
            "json",
        ])
    };
    let cuda = run("cuda");
    let parameters = int(&cuda["parameters"]["total"]);
    // Every tensor but the norms (4,096 values each) is paged: two fp32 states.
    let paged = int(&cuda["paged_states"]);
    assert!(paged > 2 * 4 * (parameters - 300_000), "{paged}");
    assert!(paged <= 2 * 4 * parameters);
    assert!(int(&cuda["memory"]["optimizer_states"]) < 3_000_000);
    assert!(int(&cuda["host"]["optimizer_states"]) >= paged);
    assert!(int(&cuda["memory"]["peak"]) < 30_000_000_000);
    let cpu = run("cpu");
    assert_eq!(int(&cpu["paged_states"]), 0);
    assert_eq!(int(&cpu["memory"]["optimizer_states"]), 2 * 4 * parameters);
}
