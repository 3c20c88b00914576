//! Work and memory bounded by what the answer needs: a 150-byte config.json
//! (llama, 500,000 layers of width 8) used to cost 2.2 GB and seconds for
//! `params`, and `fit` ran for minutes. Every count that drives work has a
//! cap with a clear error (layers, experts, tensors, list items, pipeline
//! stages, L-BFGS history, fit's searches), and the worst accepted inputs
//! are measured.
//!
//! What is measured is work, not time, so that the limits hold on the
//! slowest machine and in a debug build: the bytes the library allocates
//! while it answers, in all and at most at once (counted on this thread by
//! [`Counting`], the test's global allocator, through
//! [`trainmem::cli::run_args`], the same parse and `respond` as the
//! binary). The counts do not depend on the build or the machine. The
//! binary is run too, for its exit status and its one-line messages. How
//! fast these commands are in a release build is `cargo bench --bench
//! commands`.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::run_within;
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use trainmem::activation::Workload;
use trainmem::{Bytes, Optimizer, Precision, Setup, estimate};

/// The system allocator, counting the bytes each thread asks for: a
/// measure of work that does not depend on the machine or the build.
struct Counting;

thread_local! {
    /// Bytes allocated (or grown by `realloc`) on this thread so far.
    static ALLOCATED: Cell<u64> = const { Cell::new(0) };
    /// Bytes allocated on this thread and not yet freed (freed elsewhere,
    /// they stay counted: an over-count, never an under-count).
    static LIVE: Cell<u64> = const { Cell::new(0) };
    /// The most [`LIVE`] has been since it was last reset.
    static PEAK: Cell<u64> = const { Cell::new(0) };
}

/// Counts `grown` bytes allocated and `freed` bytes given back.
fn count(grown: usize, freed: usize) {
    // `try_with`: an allocation while the thread is torn down is not counted.
    let _ = ALLOCATED.try_with(|total| total.set(total.get().saturating_add(grown as u64)));
    let _ = LIVE.try_with(|live| {
        let now = live
            .get()
            .saturating_add(grown as u64)
            .saturating_sub(freed as u64);
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

// SAFETY: every call is passed on unchanged to `System`; counting only
// touches a const-initialised thread-local `Cell`, which never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size(), 0);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size(), 0);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(0, layout.size());
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(
            new_size.saturating_sub(layout.size()),
            layout.size().saturating_sub(new_size),
        );
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// What a call cost on this thread: the bytes it allocated in all, and the
/// most it held at once beyond what was live when it started.
#[derive(Debug, Clone, Copy)]
struct Work {
    allocated: u64,
    peak: u64,
}

/// What `f` returns and what it cost.
fn allocated_by<T>(f: impl FnOnce() -> T) -> (T, Work) {
    let before = ALLOCATED.with(Cell::get);
    let live = LIVE.with(Cell::get);
    PEAK.with(|peak| peak.set(live));
    let value = f();
    let work = Work {
        allocated: ALLOCATED.with(Cell::get) - before,
        peak: PEAK.with(Cell::get).saturating_sub(live),
    };
    (value, work)
}

/// `trainmem args` run in this process: its exit status (2 for a refusal)
/// and what it cost. clap's command tree, built on the first call and kept,
/// is built beforehand so that it is not counted.
fn work_of(args: &[&str]) -> (i32, Work) {
    let _ = trainmem::cli::run_args(&[OsString::from("--version")]);
    let arguments: Vec<OsString> = args.iter().map(OsString::from).collect();
    let (answer, work) = allocated_by(|| trainmem::cli::run_args(&arguments));
    let code = match answer {
        Ok(checked) => i32::from(checked.exit),
        Err(_) => 2,
    };
    (code, work)
}

/// The most a refusal may allocate: it comes before the work it refuses.
/// Measured: at most 2.1 MB (the over-1-MiB config, read up to its cap);
/// the 500,000-layer config is refused after 10 kB.
const REFUSAL_WORK: u64 = 16 << 20;

/// The most one command of the worst accepted inputs may allocate in all.
/// Measured: at most 371 MB (fit spending its whole budget on the deepest
/// config, sharded), 100 MB for `params --tensors` of the most tensors; so
/// a search or an inventory that grew threefold fails.
const WORST_WORK: u64 = 1 << 30;

/// The most heap one command may hold at once. The binary's peak resident
/// set for the worst `params --tensors` was 60 MB in a debug build and 56 MB
/// in release; its heap alone, counted here, is less.
const MAX_LIVE: u64 = 256 << 20;

/// A hang guard only, far past what any command here needs on a slow
/// machine: a runaway child is killed and the test fails instead of
/// stalling the suite. No test compares a time against it otherwise.
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

/// A command line for a message, its long lists cut.
fn shown(args: &[&str]) -> String {
    args.join(" ").chars().take(100).collect()
}

/// Expects a one-line usage error that names every needle, given before
/// the work: within [`REFUSAL_WORK`] bytes allocated in process.
fn refused(args: &[&str], needles: &[&str]) {
    let (code, stdout, stderr, _) = run_within(args, DEADLINE);
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
    let limit = REFUSAL_WORK;
    let (code, work) = work_of(args);
    assert_eq!(code, 2, "{args:?} in process");
    let shown = shown(args);
    eprintln!("{shown}: refused after {} bytes allocated", work.allocated);
    assert!(
        work.allocated < limit,
        "{shown}: allocated {} bytes before refusing, over {limit}",
        work.allocated
    );
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
    // Refused once its budget of tensor evaluations is spent, in process
    // (the binary's one-line messages are checked above, at less cost):
    // the message names the budget, and the bytes spent on the way are
    // bounded like the worst accepted inputs'.
    let args = [
        "fit",
        "--model",
        deep.to_str().unwrap(),
        "--seq-len",
        "128",
        "--device",
        "h100-80gb",
    ];
    let arguments: Vec<OsString> = args.iter().map(OsString::from).collect();
    let _ = trainmem::cli::run_args(&[OsString::from("--version")]);
    let (answer, work) = allocated_by(|| trainmem::cli::run_args(&arguments));
    let Err(line) = answer else {
        panic!("fit answered past its budget");
    };
    for needle in ["model for fit", "`9219 tensors`", "budget of 262144"] {
        assert!(line.contains(needle), "lacks `{needle}`: {line}");
    }
    assert!(
        work.allocated < WORST_WORK,
        "allocated {work:?} before refusing"
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

#[test]
fn the_worst_accepted_configs_cost_bounded_work_and_under_256_mb() {
    let dir = temp_dir();
    let most = write_config(dir.path(), "most.json", &most_tensors());
    let deep = write_config(dir.path(), "deep.json", &layers_of_width_8(1024));
    let (most, deep) = (most.to_str().unwrap(), deep.to_str().unwrap());
    let workload = ["--micro-batch", "1", "--seq-len", "4096"];
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
    ];
    assert_bounded(runs);
}

/// The sharded `fit` searches of the worst configs, apart from the other
/// commands so that the test harness runs the two halves side by side.
#[test]
fn the_worst_accepted_fits_cost_bounded_work_and_under_256_mb() {
    let dir = temp_dir();
    let most = write_config(dir.path(), "most.json", &most_tensors());
    let deep = write_config(dir.path(), "deep.json", &layers_of_width_8(1024));
    // About the deepest config whose fit still answers within the budget
    // (four recompute modes searched: `op` runs on Llama layers).
    let answered = write_config(dir.path(), "answered.json", &layers_of_width_8(220));
    let (most, deep) = (most.to_str().unwrap(), deep.to_str().unwrap());
    let answered = answered.to_str().unwrap();
    let fit = ["--seq-len", "128", "--device", "h100-80gb"];
    let sharded = ["--gpus", "8", "--zero", "3"];
    let runs: Vec<(Vec<&str>, bool)> = vec![
        (
            [&["fit", "--model", answered][..], &fit, &sharded].concat(),
            true,
        ),
        // fit spends its whole budget on the deepest config, then refuses
        // (unsharded: `fit_refuses_past_its_budget_and_presets_stay_within_it`).
        (
            [&["fit", "--model", deep][..], &fit, &sharded].concat(),
            false,
        ),
        (
            [&["fit", "--model", most][..], &fit, &sharded].concat(),
            false,
        ),
    ];
    assert_bounded(runs);
}

/// Each command exits as expected within [`WORST_WORK`] bytes allocated and
/// [`MAX_LIVE`] held at once.
fn assert_bounded(runs: Vec<(Vec<&str>, bool)>) {
    for (args, succeeds) in runs {
        let (code, work) = work_of(&args);
        assert_eq!(code == 0, succeeds, "{args:?}");
        eprintln!(
            "{}: {} bytes allocated, at most {} live",
            shown(&args),
            work.allocated,
            work.peak
        );
        assert!(
            work.allocated < WORST_WORK,
            "{args:?} allocated {} bytes, over {WORST_WORK}",
            work.allocated
        );
        assert!(
            work.peak < MAX_LIVE,
            "{args:?} held {} bytes at once, over {MAX_LIVE}",
            work.peak
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
    /// either fails with an error or answers within the work of the worst
    /// accepted command.
    #[test]
    fn any_config_errors_or_answers_within_the_budget(config in config()) {
        let dir = temp_dir();
        let path = write_config(dir.path(), "config.json", &config);
        let (answered, work) = allocated_by(|| {
            trainmem::input::load_model(path.to_str().unwrap())
                .and_then(|model| estimate(&model, &setup()))
        });
        let answered = if answered.is_ok() { "answered" } else { "refused" };
        prop_assert!(work.allocated < WORST_WORK, "{config} allocated {work:?} ({answered})");
        prop_assert!(work.peak < MAX_LIVE, "{config} held {work:?} ({answered})");
    }
}
