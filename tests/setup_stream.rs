//! torchtune's QLoRA model setup, replayed allocation by allocation.
//!
//! `tests/fixtures/setup/` holds the allocation streams of
//! `recipes/lora_finetune_single_device.py`'s `_setup_model` (torchtune
//! 0914d5c with torchao 0.1, what the published torchtune QLoRA runs of
//! April-May 2024 ran), measured on CPU with torch's profiler
//! (`tools/measure_torchtune_setup.py`): Llama 2 7B's widths with 2 and 32
//! decoder layers, and a small Llama 2 with 2 and 4 layers followed by
//! three micro-batches and an AdamW step. Replayed through trainmem's
//! caching-allocator simulation, the measured setup and trainmem's model of
//! it (`trainmem::timeline::torchtune_setup`) must agree within 3% on the
//! most allocated, the most reserved and what stays allocated.

mod common;

use std::path::Path;

use trainmem::timeline::torchtune_setup::{MOST_LINEARS, TorchtuneSetup, setup_stream};
use trainmem::timeline::{AllocatorOptions, StreamPeaks, replay_stream};
use trainmem::units::Bytes;

const FIXTURES: [&str; 4] = [
    "qlora-llama2-7b-l2.json",
    "qlora-llama2-7b-l32.json",
    "qlora-llama2-small-l2-b2s128.json",
    "qlora-llama2-small-l4-b2s128.json",
];

fn fixture(name: &str) -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/setup")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn stream(fx: &serde_json::Value) -> Vec<i64> {
    fx["stream"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect()
}

fn int(fx: &serde_json::Value, key: &str) -> u64 {
    fx[key].as_u64().unwrap_or_else(|| panic!("{key}"))
}

/// The setup the fixture measured, as trainmem describes it.
fn described(fx: &serde_json::Value) -> TorchtuneSetup {
    let mut linears = [0u64; MOST_LINEARS];
    let shapes = fx["quantized_linears_per_layer"].as_array().unwrap();
    for (slot, shape) in linears.iter_mut().zip(shapes) {
        *slot = shape
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap())
            .product();
    }
    TorchtuneSetup {
        linears,
        count: shapes.len(),
        layers: int(fx, "layers"),
        layer_other: Bytes(int(fx, "layer_other_bytes")),
        outside: Bytes(int(fx, "outside_bytes")),
        // The measurement's checkpoint is fp16, as Llama-2-7b-hf's `.bin` files.
        checkpoint_element: 2,
        checkpoint_cast: true,
    }
}

fn within(what: &str, name: &str, modelled: Bytes, measured: Bytes) {
    let error = (modelled.0 as f64 - measured.0 as f64) / measured.0 as f64;
    println!(
        "{name}: {what} measured {} modelled {} ({:+.2}%)",
        measured.0,
        modelled.0,
        100.0 * error
    );
    assert!(
        error.abs() <= 0.03,
        "{name}: {what} modelled {} vs measured {} ({:+.2}%)",
        modelled.0,
        measured.0,
        100.0 * error
    );
}

/// The measured setup (building and loading the model), replayed.
fn measured_setup(fx: &serde_json::Value) -> StreamPeaks {
    let all = stream(fx);
    let end = int(&fx["phases"], "load") as usize;
    replay_stream(&all[..end], AllocatorOptions::default()).unwrap()
}

#[test]
fn the_modelled_setup_reserves_what_the_measured_one_does() {
    for name in FIXTURES {
        let fx = fixture(name);
        let measured = measured_setup(&fx);
        // The measured peak is the fixture's own count of the stream.
        let phases = &fx["phases_summary"];
        let own = int(&phases["init"], "peak").max(int(&phases["load"], "peak"));
        assert_eq!(measured.allocated, Bytes(own), "{name}");
        let modelled = replay_stream(
            &setup_stream(&described(&fx)).unwrap(),
            AllocatorOptions::default(),
        )
        .unwrap();
        within("allocated", name, modelled.allocated, measured.allocated);
        within("reserved", name, modelled.reserved, measured.reserved);
        within("kept", name, modelled.end, measured.end);
    }
}

/// What the setup leaves cached is most of what the whole run reserves:
/// the step after it reuses the setup's free blocks.
#[test]
fn the_setup_reserves_more_than_the_steps_after_it_add() {
    for name in FIXTURES.iter().filter(|n| n.contains("-b2s")) {
        let fx = fixture(name);
        let setup = measured_setup(&fx);
        let whole = replay_stream(&stream(&fx), AllocatorOptions::default()).unwrap();
        println!(
            "{name}: setup reserves {}, setup and steps {} (allocated {} then {})",
            setup.reserved.0, whole.reserved.0, setup.allocated.0, whole.allocated.0
        );
        assert!(whole.reserved >= setup.reserved);
        assert!(whole.reserved.0 - setup.reserved.0 < setup.reserved.0);
    }
}

/// torchtune's QLoRA tutorial (`docs/source/tutorials/qlora_finetune.rst`
/// at 0914d5c): "Peak memory reserved, model init 9.13 GB" for Llama 2 7B
/// (`llama2/7B_qlora_single_device`). The measured stream of the 32 layers
/// (CPU, every allocation and free) replayed through the allocator
/// simulation, and trainmem's setup of the 32 layers described as the
/// fixture measured two of them, each within 3%.
#[test]
fn the_modelled_setup_of_llama2_7b_reserves_what_the_tutorial_logged_at_model_init() {
    let measured = measured_setup(&fixture("qlora-llama2-7b-l32.json"));
    within(
        "reserved at model init, the measured stream",
        "llama2/7B_qlora_single_device",
        measured.reserved,
        Bytes(9_130_000_000),
    );
    let mut fx = fixture("qlora-llama2-7b-l2.json");
    fx["layers"] = serde_json::json!(32);
    let modelled = replay_stream(
        &setup_stream(&described(&fx)).unwrap(),
        AllocatorOptions::default(),
    )
    .unwrap();
    within(
        "reserved at model init",
        "llama2/7B_qlora_single_device",
        modelled.reserved,
        Bytes(9_130_000_000),
    );
}

/// The small Llama 2 fixtures' steps (mechanism (b), `linear_nf4`'s
/// dequantization through torchao 0.1's `get_original_weight`): trainmem's
/// timeline with the flags of the run (`--platform cpu`), its step peak
/// against the third micro-batch's (the first after the optimizer step, as
/// trainmem's step starts: optimizer states, no gradients) and its load
/// peak against the measured setup's, each within 3%.
#[test]
fn the_small_steps_after_the_setup_peak_where_trainmem_says() {
    for (name, config) in [
        (
            "qlora-llama2-small-l2-b2s128.json",
            "llama2-small-l2.config.json",
        ),
        (
            "qlora-llama2-small-l4-b2s128.json",
            "llama2-small-l4.config.json",
        ),
    ] {
        let fx = fixture(name);
        let config = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/setup")
            .join(config);
        let (code, stdout, stderr) = common::run(&[
            "estimate",
            "--model",
            config.to_str().unwrap(),
            "--precision",
            "bf16",
            "--optimizer",
            "adamw",
            "--lora-rank",
            "8",
            "--lora-targets",
            "all-linear",
            "--lora-dropout",
            "0.05",
            "--lora-dtype",
            "bf16",
            "--micro-batch",
            "2",
            "--seq-len",
            "128",
            "--recompute",
            "full",
            "--implementation",
            "torchtune",
            "--quantize",
            "nf4-torchao-0.1",
            "--platform",
            "cpu",
            "--overhead",
            "0",
            "--format",
            "json",
        ]);
        assert_eq!(code, 0, "{stderr}");
        let e: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        let timeline = &e["timeline"];
        let step = timeline["phases"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["phase"] != "load")
            .map(|p| p["peak"].as_u64().unwrap())
            .max()
            .unwrap();
        let measured_step = int(&fx["phases_summary"]["micro-batch-2"], "peak");
        within("step peak", name, Bytes(step), Bytes(measured_step));
        let load = timeline["load_peak"].as_u64().unwrap();
        within(
            "load peak",
            name,
            Bytes(load),
            measured_setup(&fx).allocated,
        );
    }
}
