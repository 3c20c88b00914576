//! Work and memory bounded by what the answer needs: a 150-byte config.json
//! (llama, 500,000 layers of width 8) used to cost 2.2 GB and seconds for
//! `params`, and `fit` ran for minutes. Every count that drives work has a
//! cap with a clear error (layers, experts, tensors, list items, pipeline
//! stages, L-BFGS history, fit's searches), and the worst accepted inputs
//! are measured through the binary.
//!
//! Timing thresholds: the budget is 1 s of a release build. The suite runs
//! debug builds, about ten times slower on this arithmetic (measured: the
//! worst `estimate` takes 0.11 s in release and 0.63 s in debug; `fit` at
//! its budget 0.4 s and 4 s), so under `debug_assertions` the wall-time
//! limit is ten times the release one. Memory does not depend on the build
//! (60 MB debug, 56 MB release for the worst `params --tensors`), so the
//! 256 MB limit holds in both.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::run_within;
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use trainmem::activation::Workload;
use trainmem::{Bytes, Optimizer, Precision, Setup, estimate};

/// The release budget of one command or one library estimate.
const RELEASE_WALL: Duration = Duration::from_secs(1);

/// The wall-time limit of this build: [`RELEASE_WALL`], times ten in a
/// debug build (see the module comment).
fn wall_limit() -> Duration {
    if cfg!(debug_assertions) {
        RELEASE_WALL * 10
    } else {
        RELEASE_WALL
    }
}

/// The peak resident memory allowed to one command, in kilobytes.
const MAX_RSS_KB: i64 = 256 * 1024;

/// Far past any limit here, so a runaway is killed instead of stalling the suite.
const DEADLINE: Duration = Duration::from_secs(60);

fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("trainmem-budgets-")
        .tempdir()
        .unwrap()
}

fn write_config(dir: &Path, name: &str, config: &Value) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, config.to_string()).unwrap();
    path
}

/// The 150-byte config of the report: 500,000 llama layers of width 8.
fn layers_of_width_8(layers: u64) -> Value {
    json!({
        "model_type": "llama", "num_hidden_layers": layers, "hidden_size": 8,
        "intermediate_size": 8, "num_attention_heads": 1, "num_key_value_heads": 1,
        "vocab_size": 8,
    })
}

/// The accepted config with the most tensors: StableLM's norm module per
/// head, 1,024 layers of 26 + 26 heads, 64,518 tensors, just under the cap.
fn most_tensors() -> Value {
    json!({
        "model_type": "stablelm", "num_hidden_layers": 1024, "hidden_size": 26,
        "intermediate_size": 8, "num_attention_heads": 26, "num_key_value_heads": 26,
        "vocab_size": 8, "qk_layernorm": true,
    })
}

/// Expects a one-line usage error that names every needle, quickly.
fn refused(args: &[&str], needles: &[&str]) {
    let (code, stdout, stderr, elapsed) = run_within(args, DEADLINE);
    assert_eq!(code, 2, "{args:?}: {stderr}");
    assert_eq!(stdout, "", "{args:?}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    for needle in needles {
        assert!(
            stderr.contains(needle),
            "{args:?}: lacks `{needle}`: {stderr}"
        );
    }
    assert!(elapsed < wall_limit(), "{args:?} took {elapsed:?}");
}

#[test]
fn the_layer_bomb_is_refused_at_once_by_every_command() {
    let dir = temp_dir();
    let bomb = write_config(dir.path(), "config.json", &layers_of_width_8(500_000));
    let bomb = bomb.to_str().unwrap();
    for args in [
        vec!["params", bomb],
        vec![
            "estimate",
            "--model",
            bomb,
            "--micro-batch",
            "1",
            "--seq-len",
            "4096",
        ],
        vec![
            "fit",
            "--model",
            bomb,
            "--seq-len",
            "128",
            "--device",
            "h100-80gb",
        ],
    ] {
        refused(
            &args,
            &["num_hidden_layers", "`500000`", "at most 1024 layers"],
        );
    }
    let over = write_config(dir.path(), "over.json", &layers_of_width_8(1025));
    refused(
        &["params", over.to_str().unwrap()],
        &["at most 1024 layers"],
    );
}

#[test]
fn fit_refuses_past_its_budget_and_presets_stay_within_it() {
    let dir = temp_dir();
    let deep = write_config(dir.path(), "deep.json", &layers_of_width_8(1024));
    refused(
        &[
            "fit",
            "--model",
            deep.to_str().unwrap(),
            "--seq-len",
            "128",
            "--device",
            "h100-80gb",
        ],
        &["model for fit", "`9219 tensors`", "budget of 262144"],
    );
    // The largest preset's hardest search spends about 140,000 of 262,144.
    let (code, _, stderr, _) = run_within(
        &[
            "fit",
            "--model",
            "llama-3.1-405b",
            "--micro-batch",
            "1",
            "--capacity",
            "10TB",
        ],
        DEADLINE,
    );
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn a_config_over_one_mib_is_refused() {
    let dir = temp_dir();
    let mut config = layers_of_width_8(2);
    config["mlp_only_layers"] = Value::Array(vec![json!(0); 600_000]);
    let path = write_config(dir.path(), "config.json", &config);
    refused(&["params", path.to_str().unwrap()], &["larger than 1 MiB"]);
}

#[test]
fn long_lists_and_repetitions_are_refused() {
    let sizes = vec!["1B"; 8000].join(",");
    refused(
        &["compare", "--params", &sizes],
        &["parameter count list", "8000 items", "at most 64"],
    );
    let sizes = vec!["1B"; 65].join(",");
    refused(&["compare", "--slice-params", &sizes], &["65 items"]);
    let optimizers = vec!["adam"; 65].join(",");
    refused(
        &["compare", "--optimizers", &optimizers],
        &["optimizer list"],
    );
    let targets = vec!["q_proj"; 65].join(",");
    refused(
        &[
            "estimate",
            "--model",
            "gpt2",
            "--lora-rank",
            "8",
            "--lora-targets",
            &targets,
        ],
        &["--lora-targets", "at most 64"],
    );
    let mut freeze = vec!["estimate", "--model", "gpt2"];
    for _ in 0..65 {
        freeze.extend(["--freeze", "h.0"]);
    }
    refused(&freeze, &["--freeze", "at most 64"]);
    let mut options = vec!["estimate", "--params", "7B", "--optimizer", "adamw"];
    for _ in 0..65 {
        options.extend(["--optimizer-option", "fused=true"]);
    }
    refused(&options, &["--optimizer-option", "at most 64"]);
    // 64 of each is accepted.
    let sizes = vec!["1B"; 64].join(",");
    let (code, _, stderr, _) = run_within(&["compare", "--params", &sizes], DEADLINE);
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn counts_that_size_allocations_are_capped() {
    refused(
        &[
            "estimate",
            "--params",
            "7B",
            "--gpus",
            "1000000000",
            "--pp",
            "1000000000",
        ],
        &["--pp 1000000000", "at most 1024 pipeline stages"],
    );
    refused(
        &[
            "estimate",
            "--params",
            "7B",
            "--optimizer",
            "lbfgs",
            "--optimizer-option",
            "history_size=10000000",
        ],
        &["history_size=10000000", "at most 1000"],
    );
    // rank x experts used to overflow (a panic in debug builds).
    refused(
        &[
            "estimate",
            "--model",
            "mixtral-8x7b",
            "--lora-rank",
            "2305843009213693952",
        ],
        &["LoRA rank times the expert count", "overflows"],
    );
    let dir = temp_dir();
    let mut config = layers_of_width_8(2);
    config["model_type"] = json!("mixtral");
    config["num_local_experts"] = json!(100_000);
    let path = write_config(dir.path(), "config.json", &config);
    refused(
        &["params", path.to_str().unwrap()],
        &["num_local_experts", "at most 16384 experts"],
    );
}

// ---- the worst accepted inputs, measured ----

/// What one run of the binary cost.
#[cfg(target_os = "linux")]
struct Cost {
    code: i32,
    stderr: String,
    wall: Duration,
    max_rss_kb: i64,
}

/// Runs `trainmem args` and measures its wall time and peak resident set
/// (`ru_maxrss` of this child alone, from `wait4`), killing it past [`DEADLINE`].
#[cfg(target_os = "linux")]
// The child is reaped by `wait4`, which also gives its rusage; clippy sees
// no `wait()` on that path.
#[allow(clippy::zombie_processes)]
fn measured(args: &[&str]) -> Cost {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_trainmem"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr_pipe = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        stderr_pipe.read_to_string(&mut text).unwrap();
        text
    });
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero `rusage` is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `pid` is our own unreaped child; the pointers are to live locals.
        let reaped = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        assert!(reaped >= 0, "wait4 failed");
        if reaped == pid {
            break;
        }
        if start.elapsed() > DEADLINE {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("trainmem {args:?} ran past {DEADLINE:?} and was killed");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let wall = start.elapsed();
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    Cost {
        code,
        stderr: stderr.join().unwrap(),
        wall,
        max_rss_kb: usage.ru_maxrss,
    }
}

#[cfg(target_os = "linux")]
#[test]
fn the_worst_accepted_configs_cost_under_a_second_and_256_mb() {
    let dir = temp_dir();
    let most = write_config(dir.path(), "most.json", &most_tensors());
    let deep = write_config(dir.path(), "deep.json", &layers_of_width_8(1024));
    // About the deepest config whose fit still answers within the budget
    // (four recompute modes searched: `op` runs on Llama layers).
    let answered = write_config(dir.path(), "answered.json", &layers_of_width_8(220));
    let (most, deep) = (most.to_str().unwrap(), deep.to_str().unwrap());
    let answered = answered.to_str().unwrap();
    let workload = ["--micro-batch", "1", "--seq-len", "4096"];
    let fit = ["--seq-len", "128", "--device", "h100-80gb"];
    let sharded = ["--gpus", "8", "--zero", "3"];
    let runs: Vec<(Vec<&str>, bool)> = vec![
        (vec!["params", most, "--tensors"], true),
        (vec!["params", most, "--format", "json"], true),
        (
            [&["estimate", "--model", most][..], &workload].concat(),
            true,
        ),
        (
            [&["estimate", "--model", most][..], &workload, &sharded].concat(),
            true,
        ),
        (
            [&["estimate", "--model", deep][..], &workload].concat(),
            true,
        ),
        (
            [&["fit", "--model", answered][..], &fit, &sharded].concat(),
            true,
        ),
        // fit spends its whole budget on the deepest config, then refuses.
        ([&["fit", "--model", deep][..], &fit].concat(), false),
        (
            [&["fit", "--model", deep][..], &fit, &sharded].concat(),
            false,
        ),
        (
            [&["fit", "--model", most][..], &fit, &sharded].concat(),
            false,
        ),
    ];
    for (args, succeeds) in runs {
        let cost = measured(&args);
        assert_eq!(cost.code == 0, succeeds, "{args:?}: {}", cost.stderr);
        assert!(
            cost.wall < wall_limit(),
            "{args:?} took {:?}, over {:?}",
            cost.wall,
            wall_limit()
        );
        assert!(
            cost.max_rss_kb < MAX_RSS_KB,
            "{args:?} peaked at {} kB, over {MAX_RSS_KB} kB",
            cost.max_rss_kb
        );
    }
}

// ---- any config.json through the library ----

/// Keys that size a model, across the supported architectures.
const SIZE_KEYS: &[&str] = &[
    "num_hidden_layers",
    "n_layer",
    "n_layers",
    "hidden_size",
    "n_embd",
    "d_model",
    "intermediate_size",
    "n_inner",
    "ffn_hidden_size",
    "num_attention_heads",
    "n_head",
    "n_heads",
    "num_key_value_heads",
    "num_kv_heads",
    "vocab_size",
    "head_dim",
    "num_experts",
    "num_local_experts",
    "n_routed_experts",
    "moe_intermediate_size",
    "num_experts_per_tok",
    "first_k_dense_replace",
    "decoder_sparse_step",
    "shared_expert_intermediate_size",
    "n_shared_experts",
    "q_lora_rank",
    "kv_lora_rank",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "v_head_dim",
    "max_position_embeddings",
    "n_positions",
    "sliding_window_pattern",
];

/// Switches that change the layout.
const FLAG_KEYS: &[&str] = &[
    "qk_layernorm",
    "tie_word_embeddings",
    "multi_query",
    "use_parallel_residual",
    "new_decoder_architecture",
    "parallel_attn",
    "bias",
    "attention_bias",
];

/// A size: small, real-sized, past the layer cap, or huge.
fn size() -> impl Strategy<Value = Value> {
    prop_oneof![
        (0u64..16).prop_map(Value::from),
        (1u64..5_000).prop_map(Value::from),
        (1u64..4_096).prop_map(Value::from),
        (1u64..1 << 20).prop_map(Value::from),
        (1u64..=u32::MAX as u64).prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
    ]
}

/// A layer count: real, around the cap, far past it (the bomb), or huge.
fn layers() -> impl Strategy<Value = u64> {
    prop_oneof![
        1u64..128,
        900u64..1_200,
        1_000u64..1_000_000,
        0u64..=u32::MAX as u64,
    ]
}

fn config() -> impl Strategy<Value = Value> {
    let model_types = trainmem::architecture::supported();
    (
        proptest::sample::select(model_types),
        layers(),
        proptest::collection::btree_map(proptest::sample::select(SIZE_KEYS), size(), 0..12),
        proptest::collection::btree_map(proptest::sample::select(FLAG_KEYS), any::<bool>(), 0..3),
        // Most configs keep widths small so that layer counts, not
        // overflow, decide: a real-sized model of many thin layers.
        any::<bool>(),
    )
        .prop_map(|(model_type, layers, sizes, flags, thin)| {
            let mut object = Map::new();
            object.insert("model_type".into(), json!(model_type));
            for key in ["num_hidden_layers", "n_layer", "n_layers"] {
                object.insert(key.into(), json!(layers));
            }
            if thin {
                for key in [
                    "hidden_size",
                    "n_embd",
                    "d_model",
                    "intermediate_size",
                    "vocab_size",
                ] {
                    object.insert(key.into(), json!(8));
                }
                for key in ["num_attention_heads", "n_head", "num_key_value_heads"] {
                    object.insert(key.into(), json!(1));
                }
            }
            for (key, value) in sizes {
                object.insert(key.into(), value);
            }
            for (key, value) in flags {
                object.insert(key.into(), json!(value));
            }
            Value::Object(object)
        })
}

fn setup() -> Setup {
    let mut setup = Setup::new(
        Optimizer::find("adamw").unwrap(),
        *Precision::find("mixed-bf16").unwrap(),
    );
    setup.workload = Some(Workload::new(1, 4096));
    setup.overhead = Bytes(1 << 30);
    setup
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Any config.json, read from a file and estimated with a micro-batch,
    /// either fails with an error or answers within the time budget.
    #[test]
    fn any_config_errors_or_answers_within_the_budget(config in config()) {
        let dir = temp_dir();
        let path = write_config(dir.path(), "config.json", &config);
        let start = Instant::now();
        let answered = trainmem::input::load_model(path.to_str().unwrap())
            .and_then(|model| estimate(&model, &setup()));
        let elapsed = start.elapsed();
        prop_assert!(
            elapsed < wall_limit(),
            "{config} took {elapsed:?} ({})",
            if answered.is_ok() { "answered" } else { "refused" }
        );
    }
}
