//! How fast the commands whose work the tests bound answer in a release
//! build (`cargo bench --bench commands`), in-process and on one thread:
//! the speed figures the test suite no longer asserts, since a time of a
//! debug build on a loaded machine says little. The tests bound the same
//! runs by counted work (`tests/budgets.rs`: bytes allocated, fit's budget
//! of tensor evaluations; `tests/timeline.rs`: events).
//!
//! Measured figures, to compare a change against: `check` on a launch
//! config about 20 ms as a whole process; the worst accepted config's
//! `estimate` 0.11 s; `fit` spending its whole budget about 0.4 s;
//! DeepSeek-V3's timeline on 256 GPUs under 100 ms (a release build on a
//! 2-core machine, 2025).

use std::ffi::OsString;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/launch");

/// `trainmem args`, answered in this process; a refusal is an answer too.
fn answer(args: &[String]) -> usize {
    let arguments: Vec<OsString> = args.iter().map(OsString::from).collect();
    match trainmem::cli::run_args(&arguments) {
        Ok(checked) => checked.report.len(),
        Err(line) => line.len(),
    }
}

fn words(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_string).collect()
}

/// The 150-byte config of `tests/budgets.rs`: `layers` llama layers of width 8.
fn thin_layers(dir: &std::path::Path, layers: u64) -> String {
    let path = dir.join(format!("layers-{layers}.json"));
    let config = json!({
        "model_type": "llama", "num_hidden_layers": layers, "hidden_size": 8,
        "intermediate_size": 8, "num_attention_heads": 1, "num_key_value_heads": 1,
        "vocab_size": 8,
    });
    std::fs::write(&path, config.to_string()).unwrap();
    path.to_str().unwrap().to_string()
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let deep = thin_layers(dir.path(), 1024);
    let runs: Vec<(&str, Vec<String>)> = vec![
        (
            "check sft-qwen-full.yaml",
            words(&format!(
                "check {FIXTURES}/sft-qwen-full.yaml --model qwen2.5-0.5b --device a100-40gb"
            )),
        ),
        (
            "estimate 1024 thin layers",
            words(&format!(
                "estimate --model {deep} --micro-batch 1 --seq-len 4096"
            )),
        ),
        (
            "fit 1024 thin layers (refused at its budget)",
            words(&format!(
                "fit --model {deep} --seq-len 128 --device h100-80gb"
            )),
        ),
        (
            "timeline deepseek-v3 on 256 gpus",
            words(
                "timeline --model deepseek-v3 --gpus 256 --tp 8 --pp 8 --ep 4 --zero 1 \
                 --framework megatron --precision mixed-bf16 --optimizer adamw \
                 --micro-batch 1 --seq-len 4096 --format json",
            ),
        ),
    ];
    let mut group = c.benchmark_group("commands");
    group.sample_size(10);
    for (name, args) in &runs {
        group.bench_function(*name, |b| b.iter(|| answer(args)));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
