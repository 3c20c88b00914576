//! Issue 25, items 2-5, on real upstream files (tests/fixtures/launch/,
//! each with the repository and commit it was taken from on its first
//! line): torchtune recipes whose data decides the sequence length,
//! LLaMA-Factory's DeepSpeed reference resolved from a checkout run from
//! elsewhere, torchtitan's TOML and litgpt's YAML read with every memory
//! key shown, and sample packing.

mod common;

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use common::{no_hub_cache, run};
use serde_json::Value;
use trainmem::launch::{self, Format, KeyKind};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/launch");

fn fixture(name: &str) -> String {
    format!("{FIXTURES}/{name}")
}

/// `check` of `args` in JSON: exit code, the report, stderr.
fn check_json(args: &[&str]) -> (i32, Value, String) {
    let mut all = vec!["check"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--format", "json"]);
    let (code, stdout, stderr) = run(&all);
    let report = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{args:?}: {e}: {stdout} {stderr}"));
    (code, report, stderr)
}

fn peak(report: &Value) -> u64 {
    report["memory"]["peak"].as_u64().unwrap()
}

// Item 2: the data decides the length.

#[test]
fn torchtune_single_device_lora_and_qlora_fit_up_to_a_length_on_24_gb() {
    for recipe in [
        "torchtune-llama3_1-8B_lora_single_device.yaml",
        "torchtune-llama3_1-8B_qlora_single_device.yaml",
    ] {
        let file = fixture(recipe);
        let (code, report, stderr) = check_json(&[&file, "--device", "rtx-4090-24gb"]);
        assert_eq!(code, 0, "{recipe}: {stderr}");
        assert_eq!(report["verdict"], "fits-up-to", "{recipe}");
        let longest = report["max_seq_len"].as_u64().unwrap();
        assert!(longest > 0, "{recipe}");
        // The estimate shown is the one at that length, its reserve within
        // the card, and one token more does not fit at the recipe's batch
        // (judged on the reserve too: `tight` or `does-not-fit`).
        assert!(report["fits"].as_bool().unwrap(), "{recipe}");
        let capacity = report["capacity"]["bytes"].as_u64().unwrap();
        assert!(peak(&report) <= capacity, "{recipe}");
        assert!(
            report["memory"]["reserved"].as_u64().unwrap() <= capacity,
            "{recipe}"
        );
        let longer = (longest + 1).to_string();
        let (code, above, _) =
            check_json(&[&file, "--device", "rtx-4090-24gb", "--seq-len", &longer]);
        assert_eq!(code, 1, "{recipe} at {longer}");
        assert!(
            above["verdict"] == "does-not-fit" || above["verdict"] == "tight",
            "{recipe}: {}",
            above["verdict"]
        );
        assert_eq!(above["fits"], false, "{recipe}");
        let (_, table, _) = run(&["check", &file, "--device", "rtx-4090-24gb"]);
        let batch = report["workload"]["micro_batch"].as_u64().unwrap_or(2);
        let words = format!(
            "fits for sequences up to {} tokens at batch {batch}; your data's longest sample decides",
            grouped(longest)
        );
        assert!(table.contains(&words), "{recipe}: {table}");
    }
}

/// 11264 as `11,264`.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[test]
fn torchtune_70b_lora_on_one_80_gb_gpu_does_not_fit_at_any_length() {
    let file = fixture("torchtune-llama3_1-70B_lora.yaml");
    let (code, report, stderr) = check_json(&[&file, "--device", "h100-80gb"]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(report["verdict"], "does-not-fit");
    assert!(report.get("max_seq_len").is_some_and(Value::is_null));
    // The frozen bf16 base alone is more than the card.
    let capacity = report["capacity"]["bytes"].as_u64().unwrap();
    assert!(report["memory"]["weights"].as_u64().unwrap() > capacity);
    let (code, table, _) = run(&["check", &file, "--device", "h100-80gb"]);
    assert_eq!(code, 1);
    assert!(
        table.contains("the states alone exceed the card"),
        "{table}"
    );
}

#[test]
fn a_sequence_length_on_the_command_line_still_wins() {
    let file = fixture("torchtune-llama3_1-8B_lora_single_device.yaml");
    let (code, report, _) = check_json(&[&file, "--device", "rtx-4090-24gb", "--seq-len", "512"]);
    assert_eq!(code, 0);
    assert_eq!(report["verdict"], "fits");
    assert!(report.get("max_seq_len").is_none());
}

#[test]
fn without_an_architecture_the_length_must_be_given() {
    let file = fixture("ds-zero2-offload.json");
    let (code, stdout, stderr) = run(&["check", &file, "--params", "7B", "--device", "h100"]);
    assert_eq!(code, 2, "{stdout}");
    assert!(stderr.contains("give --seq-len"), "{stderr}");
}

// Item 3: a companion found as the launcher finds it.

/// A copy of LLaMA-Factory's layout: the repository root holds
/// `examples/train_full/llama3_full_sft.yaml`, which names
/// `examples/deepspeed/ds_z3_config.json` from that root.
fn llama_factory_checkout() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    for file in [
        "examples/train_full/llama3_full_sft.yaml",
        "examples/deepspeed/ds_z3_config.json",
    ] {
        let to = root.path().join(file);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(format!("{FIXTURES}/llama-factory-checkout/{file}"), to).unwrap();
    }
    root
}

/// `check args` run from `cwd`.
fn run_in(cwd: &Path, args: &[&str]) -> (i32, String, String) {
    let output = Command::cargo_bin("trainmem")
        .unwrap()
        .args(args)
        .current_dir(cwd)
        .env("HF_HUB_CACHE", no_hub_cache())
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

#[test]
fn llama_factory_zero3_finds_its_deepspeed_file_from_the_repository_root() {
    let checkout = llama_factory_checkout();
    let elsewhere = tempfile::tempdir().unwrap();
    let config = checkout
        .path()
        .join("examples/train_full/llama3_full_sft.yaml");
    let args = [
        "check",
        config.to_str().unwrap(),
        "--model",
        "llama-3.1-8b",
        "--gpus",
        "8",
        "--device",
        "a100-80gb",
    ];
    let (code, stdout, stderr) = run_in(elsewhere.path(), &args);
    assert_eq!(code, 0, "{stderr}");
    let used = checkout.path().join("examples/deepspeed/ds_z3_config.json");
    assert!(
        stdout.contains(&format!(
            "reads {} as a DeepSpeed config (from 2 folders above the config)",
            used.display()
        )),
        "{stdout}"
    );
    assert!(stdout.contains("--zero 3"), "{stdout}");
    // From the repository root, as upstream launches it.
    let relative = [
        "check",
        "examples/train_full/llama3_full_sft.yaml",
        "--model",
        "llama-3.1-8b",
        "--gpus",
        "8",
        "--device",
        "a100-80gb",
    ];
    let (code, stdout, stderr) = run_in(checkout.path(), &relative);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("reads examples/deepspeed/ds_z3_config.json as a DeepSpeed config (from the current folder)"),
        "{stdout}"
    );
    // From the config's own folder, named without a folder.
    let inside = [
        "check",
        "llama3_full_sft.yaml",
        "--model",
        "llama-3.1-8b",
        "--gpus",
        "8",
        "--device",
        "a100-80gb",
    ];
    let (code, stdout, stderr) = run_in(&checkout.path().join("examples/train_full"), &inside);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("as a DeepSpeed config (from 2 folders above the config)"),
        "{stdout}"
    );
}

#[test]
fn a_companion_given_on_the_command_line_satisfies_the_reference() {
    let checkout = llama_factory_checkout();
    // The config alone, away from its checkout, and the DeepSpeed file
    // given beside it.
    let alone = tempfile::tempdir().unwrap();
    let config = alone.path().join("llama3_full_sft.yaml");
    std::fs::copy(
        checkout
            .path()
            .join("examples/train_full/llama3_full_sft.yaml"),
        &config,
    )
    .unwrap();
    let deepspeed = checkout.path().join("examples/deepspeed/ds_z3_config.json");
    let elsewhere = tempfile::tempdir().unwrap();
    let base = [
        "check",
        config.to_str().unwrap(),
        "--model",
        "llama-3.1-8b",
        "--gpus",
        "8",
        "--device",
        "a100-80gb",
    ];
    let (code, _, stderr) = run_in(elsewhere.path(), &base);
    assert_eq!(code, 2, "not found anywhere");
    assert!(
        stderr.contains("no such file in the current folder, nor in the config's folder"),
        "{stderr}"
    );
    assert_eq!(
        stderr
            .trim()
            .lines()
            .filter(|l| l.starts_with("error"))
            .count(),
        1
    );
    let mut given = base.to_vec();
    given.push(deepspeed.to_str().unwrap());
    let (code, stdout, stderr) = run_in(elsewhere.path(), &given);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("--zero 3"), "{stdout}");
    assert!(stdout.contains("(given on the command line)"), "{stdout}");
}

// Item 4: torchtitan and litgpt.

/// The keys read from `file`: each one's name and what it did.
fn read(file: &str) -> (Format, Vec<(String, KeyKind, String)>) {
    let launch = launch::read(&[PathBuf::from(fixture(file))]).unwrap();
    let format = launch.files[0].1;
    let keys = launch
        .keys
        .iter()
        .map(|k| (k.key.clone(), k.kind, k.set.clone()))
        .collect();
    (format, keys)
}

/// Every key of `file` is known (none ignored), and each memory key in
/// `shown` sets what it says.
fn every_memory_key_shown(file: &str, format: Format, shown: &[(&str, &str)]) {
    let (detected, keys) = read(file);
    assert_eq!(detected, format, "{file}");
    let ignored: Vec<&String> = keys
        .iter()
        .filter(|(_, kind, _)| *kind == KeyKind::Ignored)
        .map(|(key, _, _)| key)
        .collect();
    assert!(ignored.is_empty(), "{file}: unknown keys {ignored:?}");
    for (key, set) in shown {
        let row = keys
            .iter()
            .find(|(k, _, _)| k == key)
            .unwrap_or_else(|| panic!("{file}: `{key}` not shown in {keys:?}"));
        assert!(
            row.1 == KeyKind::Sets || row.1 == KeyKind::NotModelled,
            "{file}: `{key}` is {:?}",
            row.1
        );
        assert!(row.2.contains(set), "{file}: `{key}` -> {}", row.2);
    }
}

#[test]
fn torchtitan_job_configs_are_read_with_every_memory_key_shown() {
    every_memory_key_shown(
        "torchtitan-llama3_8b.toml",
        Format::Torchtitan,
        &[
            ("model.name", "--model llama-3.1-8b"),
            ("training.local_batch_size", "--micro-batch 1"),
            ("training.seq_len", "--seq-len 8192"),
            (
                "parallelism.data_parallel_shard_degree",
                "--fsdp full-shard --framework fsdp2",
            ),
            (
                "parallelism.tensor_parallel_degree",
                "no tensor parallelism",
            ),
            ("activation_checkpoint.mode", "--recompute op"),
            ("training.mixed_precision_param", "--precision mixed-bf16"),
            ("optimizer.name", "--optimizer adamw"),
            ("compile.enable", "off"),
        ],
    );
    every_memory_key_shown(
        "torchtitan-llama3_70b.toml",
        Format::Torchtitan,
        &[
            ("model.name", "--model llama-3.1-70b"),
            (
                "parallelism.tensor_parallel_degree",
                "--tp 8 --sequence-parallel",
            ),
            ("parallelism.data_parallel_shard_degree", "--gpus 8"),
            ("activation_checkpoint.mode", "--recompute full"),
            ("training.local_batch_size", "--micro-batch 8"),
        ],
    );
    every_memory_key_shown(
        "torchtitan-llama3_405b.toml",
        Format::Torchtitan,
        &[
            ("model.name", "--model llama-3.1-405b"),
            ("model.converters", "--precision fp8-tensorwise"),
            (
                "quantize.linear.float8.enable_fsdp_float8_all_gather",
                "not modelled",
            ),
            ("parallelism.enable_async_tensor_parallel", "not modelled"),
            ("compile.enable", "not modelled"),
            ("training.local_batch_size", "--micro-batch 2"),
        ],
    );
    every_memory_key_shown(
        "torchtitan-debug_model.toml",
        Format::Torchtitan,
        &[
            ("model.name", "has no preset here"),
            (
                "activation_checkpoint.mode",
                "--recompute full --recompute-every 2",
            ),
            ("training.local_batch_size", "--micro-batch 8"),
        ],
    );
}

#[test]
fn torchtitan_8b_is_checked_end_to_end() {
    let file = fixture("torchtitan-llama3_8b.toml");
    // FSDP2 over 8 GPUs, batch 1 of 8,192 tokens, per-op recomputation.
    let (code, report, stderr) = check_json(&[&file, "--device", "h100-80gb", "--gpus", "8"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(report["verdict"], "fits");
    let (_, table, _) = run(&["check", &file, "--device", "h100-80gb", "--gpus", "8"]);
    assert!(table.contains("(torchtitan)"), "{table}");
    assert!(peak(&report) > 0);
}

#[test]
fn litgpt_finetune_configs_are_read_with_every_memory_key_shown() {
    every_memory_key_shown(
        "litgpt-llama-3.1-8b-lora.yaml",
        Format::Litgpt,
        &[
            ("checkpoint_dir", "--model llama-3.1-8b"),
            ("precision", "--precision bf16"),
            (
                "lora_r",
                "--lora-rank 32 --lora-targets q_proj,v_proj --lora-dtype bf16 --lora-dropout 0.05",
            ),
            ("train.micro_batch_size", "--micro-batch 1"),
            ("train.global_batch_size", "--grad-accumulation 8"),
            ("train.max_seq_length", "--seq-len 512"),
            ("quantize", "none"),
            ("devices", "one device"),
            ("optimizer", "--optimizer adamw"),
        ],
    );
    every_memory_key_shown(
        "litgpt-llama-3.1-8b-qlora.yaml",
        Format::Litgpt,
        &[
            ("quantize", "--quantize nf4"),
            // finetune/lora.py's instantiate_bnb_optimizer under bnb.*
            ("optimizer", "--optimizer paged-adamw"),
            ("train.micro_batch_size", "--micro-batch 2"),
            ("train.global_batch_size", "--grad-accumulation 4"),
        ],
    );
    every_memory_key_shown(
        "litgpt-llama-3.1-8b-full.yaml",
        Format::Litgpt,
        &[
            (
                "devices",
                "--gpus 4 --fsdp full-shard --framework fsdp1 --recompute full",
            ),
            ("train.global_batch_size", "--grad-accumulation 4"),
            ("train.micro_batch_size", "--micro-batch 4"),
        ],
    );
    every_memory_key_shown(
        "litgpt-llama-3.2-1B-lora.yaml",
        Format::Litgpt,
        &[("checkpoint_dir", "--model llama-3.2-1b")],
    );
}

#[test]
fn litgpt_qlora_is_checked_end_to_end() {
    let file = fixture("litgpt-llama-3.1-8b-qlora.yaml");
    let (code, report, stderr) = check_json(&[&file, "--device", "rtx-4090-24gb"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(report["verdict"], "fits");
}

// Item 5: sample packing.

#[test]
fn packing_prices_the_varlen_kernel_unless_the_config_names_one() {
    let folder = tempfile::tempdir().unwrap();
    let packed = folder.path().join("packed.yaml");
    std::fs::write(
        &packed,
        "base_model: meta-llama/Llama-3.1-8B\nmicro_batch_size: 1\nsequence_len: 4096\nsample_packing: true\n",
    )
    .unwrap();
    let launch = launch::read(std::slice::from_ref(&packed)).unwrap();
    let row = launch
        .keys
        .iter()
        .find(|k| k.key == "sample_packing")
        .unwrap();
    assert_eq!(row.set, "--attention flash");
    let named = folder.path().join("named.yaml");
    std::fs::write(
        &named,
        "base_model: meta-llama/Llama-3.1-8B\nmicro_batch_size: 1\nsequence_len: 4096\nsample_packing: true\nsdp_attention: true\n",
    )
    .unwrap();
    let launch = launch::read(std::slice::from_ref(&named)).unwrap();
    let row = launch
        .keys
        .iter()
        .find(|k| k.key == "sample_packing")
        .unwrap();
    assert!(
        row.set.contains("attention as the config names it"),
        "{}",
        row.set
    );
}
