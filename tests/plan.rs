//! `trainmem plan`: every printed row is the `estimate` it names, the exact
//! prunings keep what the exhaustive search keeps, any --jobs gives the same
//! answer, the named clusters find layouts, and bad input is refused.

mod common;

use common::run;
use proptest::prelude::*;
use serde_json::Value;

/// `trainmem plan args --format json`, which must succeed.
fn plan(args: &[String]) -> Value {
    let mut all: Vec<&str> = vec!["plan"];
    all.extend(args.iter().map(String::as_str));
    all.extend(["--format", "json"]);
    let (code, out, err) = run(&all);
    assert_eq!(code, 0, "plan {args:?}: {err}");
    serde_json::from_str(&out).unwrap()
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

/// Rows to re-check: the first `first`, then every n-th, the last.
fn sample(layouts: &[Value], first: usize, spread: usize) -> Vec<&Value> {
    let step = (layouts.len() / spread.max(1)).max(1);
    let mut rows: Vec<&Value> = layouts.iter().take(first).collect();
    rows.extend(layouts.iter().step_by(step));
    rows.extend(layouts.last());
    rows
}

/// Runs `estimate` with each sampled row's base and layout flags and checks
/// the same peak and a fitting verdict.
fn rows_are_estimates(args: &[String], first: usize, spread: usize) -> usize {
    let answer = plan(args);
    let base = strings(&answer["base_flags"]);
    let layouts = answer["layouts"].as_array().unwrap();
    let rows = sample(layouts, first, spread);
    for row in &rows {
        let mut estimate: Vec<String> = vec!["estimate".to_string()];
        estimate.extend(base.iter().cloned());
        estimate.extend(strings(&row["flags"]));
        estimate.extend(["--format".to_string(), "json".to_string()]);
        let words: Vec<&str> = estimate.iter().map(String::as_str).collect();
        let (code, out, err) = run(&words);
        assert_eq!(code, 0, "{words:?}: {err}");
        let e: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            e["memory"]["peak"], row["peak"],
            "{}: plan's peak differs from estimate's",
            row["command"]
        );
        // plan keeps layouts by their allocated peak within the capacity
        // less the headroom (the reserve is not simulated per layout).
        assert_eq!(e["fits_allocated"], Value::Bool(true), "{}", row["command"]);
        assert!(row["peak"].as_u64().unwrap() <= answer["usable"].as_u64().unwrap());
        assert_eq!(
            row["command"].as_str().unwrap(),
            format!("trainmem {}", words[..words.len() - 2].join(" "))
        );
    }
    rows.len()
}

fn owned(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// The cases of [`every_printed_row_is_estimate_with_its_flags`]: a node
/// of H100s, 64 of them with a global batch, Mixtral with every axis open,
/// and QLoRA on two RTX 4090s.
const PRINTED_CASES: [&[&str]; 4] = [
    &[
        "--model",
        "llama-3.1-8b",
        "--gpus",
        "8",
        "--device",
        "h100-80gb",
        "--seq-len",
        "8192",
        "--optimizer",
        "adamw",
        "--precision",
        "mixed-bf16",
    ],
    &[
        "--model",
        "llama-3.1-70b",
        "--nodes",
        "8",
        "--gpus-per-node",
        "8",
        "--device",
        "h100-80gb",
        "--seq-len",
        "4096",
        "--optimizer",
        "adamw",
        "--precision",
        "mixed-bf16",
        "--global-batch",
        "256",
    ],
    &[
        "--model",
        "mixtral-8x7b",
        "--gpus",
        "16",
        "--device",
        "a100-80gb",
        "--seq-len",
        "2048",
        "--optimizer",
        "adamw",
        "--precision",
        "mixed-bf16",
        "--allow",
        "all",
    ],
    &[
        "--model",
        "llama-3.1-8b",
        "--gpus",
        "2",
        "--device",
        "rtx-4090-24gb",
        "--seq-len",
        "2048",
        "--optimizer",
        "adamw",
        "--precision",
        "mixed-bf16",
        "--lora-rank",
        "16",
        "--quantize",
        "nf4",
        "--attention",
        "flash",
    ],
];

/// The first and the last of [`PRINTED_CASES`], the quick ones: every
/// sampled row is the `estimate` it names.
#[test]
fn every_printed_row_is_estimate_with_its_flags() {
    let mut checked = 0;
    for case in [PRINTED_CASES[0], PRINTED_CASES[3]] {
        checked += rows_are_estimates(&owned(case), 12, 12);
    }
    assert!(checked > 30, "only {checked} rows checked");
}

/// FSDP1 (`--framework fsdp1`, issue 24): plan prices each layout with the
/// peak-only replay that skips the middle of the identical layers (issue
/// 22); every row, each shown or not, is the `estimate` it names, whose full
/// replay keeps the root unit gathered through backward, holds the root's
/// gradient to its post-backward and prefetches the last layer from the
/// root's pre-backward. With and without gradient accumulation.
#[test]
fn fsdp1_rows_are_estimates_with_their_flags() {
    let case = [
        "--model",
        "llama-3.1-8b",
        "--gpus",
        "8",
        "--device",
        "h100-80gb",
        "--seq-len",
        "4096",
        "--optimizer",
        "adamw",
        "--precision",
        "mixed-bf16",
        "--framework",
        "fsdp1",
    ];
    let mut checked = 0;
    for extra in [&[][..], &["--global-batch", "64"][..]] {
        let mut args = owned(&case);
        args.extend(owned(extra));
        checked += rows_are_estimates(&args, 100, 1);
    }
    assert!(checked > 40, "only {checked} rows checked");
}

/// The two large searches of [`PRINTED_CASES`] (64 GPUs; Mixtral with
/// `--allow all`): minutes of a debug build.
#[test]
#[ignore = "slow in a debug build (large searches, dozens of estimates); .ci/run runs it with --ignored"]
fn every_printed_row_of_the_large_searches_is_estimate_with_its_flags() {
    let mut checked = 0;
    for case in [PRINTED_CASES[1], PRINTED_CASES[2]] {
        checked += rows_are_estimates(&owned(case), 12, 12);
    }
    assert!(checked > 30, "only {checked} rows checked");
}

/// The rows a plan shows fit as `estimate` judges `fits`: on reserved
/// memory (the caching allocator simulated). Without headroom some layouts
/// ranked among the first fit on their allocated peak only: they are left
/// out as tight, and each costs one simulation, counted.
#[test]
fn shown_rows_fit_on_reserved_memory() {
    let mut tight_met = 0;
    for (case, headroom) in [
        (PRINTED_CASES[0], "5%"),
        (PRINTED_CASES[0], "0%"),
        (PRINTED_CASES[3], "0%"),
    ] {
        let mut args = owned(case);
        args.extend(owned(&["--headroom", headroom, "--top", "5"]));
        let answer = plan(&args);
        let base = strings(&answer["base_flags"]);
        let layouts = answer["layouts"].as_array().unwrap();
        let shown: Vec<&Value> = layouts.iter().filter(|l| l["shown"] == true).collect();
        assert_eq!(shown.len(), 5, "{args:?}");
        assert_eq!(answer["shown"], 5);
        let tight = answer["tight"].as_u64().unwrap();
        tight_met += tight;
        // One simulation per shown row and per tight layout, no more.
        assert_eq!(
            answer["reserve_simulations"].as_u64().unwrap(),
            5 + tight,
            "{args:?}"
        );
        let simulated = layouts.iter().filter(|l| !l["reserved"].is_null()).count();
        assert_eq!(simulated, 5, "only the shown rows carry a reserve");
        for row in &shown {
            assert_eq!(row["fits_reserved"], true);
            let mut words: Vec<String> = vec!["estimate".to_string()];
            words.extend(base.iter().cloned());
            words.extend(strings(&row["flags"]));
            words.extend(owned(&["--format", "json"]));
            let words: Vec<&str> = words.iter().map(String::as_str).collect();
            let (code, out, err) = run(&words);
            assert_eq!(code, 0, "{words:?}: {err}");
            let e: Value = serde_json::from_str(&out).unwrap();
            assert_eq!(e["fits"], true, "{}", row["command"]);
            assert_eq!(
                e["memory"]["reserved"], row["reserved"],
                "{}",
                row["command"]
            );
            assert_eq!(e["memory"]["peak"], row["peak"], "{}", row["command"]);
        }
    }
    assert!(
        tight_met > 0,
        "no case met a tight layout: the test checks nothing left out"
    );
}

/// One random plan: every sampled row is its estimate, or a global batch no
/// layout divides is refused on one line.
#[allow(clippy::too_many_arguments)]
fn random_plan(
    model: &str,
    gpus: u64,
    seq: u64,
    optimizer: &str,
    precision: &str,
    device: &str,
    global: u64,
) -> Result<(), TestCaseError> {
    let mut args = owned(&[
        "--model",
        model,
        "--gpus",
        &gpus.to_string(),
        "--seq-len",
        &seq.to_string(),
        "--optimizer",
        optimizer,
        "--precision",
        precision,
        "--device",
        device,
    ]);
    if global > 0 {
        args.extend(owned(&["--global-batch", &global.to_string()]));
    }
    let all: Vec<&str> = std::iter::once("plan")
        .chain(args.iter().map(String::as_str))
        .collect();
    let (code, _, err) = run(&all);
    // A global batch no layout divides is refused, one line, exit 2.
    if code == 2 {
        prop_assert!(err.contains("global batch"), "{err}");
    } else {
        rows_are_estimates(&args, 5, 5);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3, ..ProptestConfig::default() })]

    /// Random presets, clusters and recipes: every sampled row is its estimate.
    #[test]
    fn random_plans_print_estimates(
        model in prop::sample::select(vec!["qwen2.5-0.5b", "llama-3.2-1b", "gpt2", "qwen3-30b-a3b", "smollm2-135m"]),
        gpus in prop::sample::select(vec![1u64, 2, 4, 8, 16]),
        seq in prop::sample::select(vec![512u64, 1024, 4096]),
        optimizer in prop::sample::select(vec!["adamw", "sgd", "adamw-8bit"]),
        precision in prop::sample::select(vec!["mixed-bf16", "bf16", "fp32"]),
        device in prop::sample::select(vec!["h100-80gb", "a100-40gb", "rtx-4090-24gb"]),
        global in prop::sample::select(vec![0u64, 64, 96]),
    ) {
        random_plan(model, gpus, seq, optimizer, precision, device, global)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    /// [`random_plans_print_estimates`] over more cases.
    #[test]
    #[ignore = "slow in a debug build (a plan and a dozen estimates a case); .ci/run runs it with --ignored"]
    fn more_random_plans_print_estimates(
        model in prop::sample::select(vec!["qwen2.5-0.5b", "llama-3.2-1b", "gpt2", "qwen3-30b-a3b", "smollm2-135m"]),
        gpus in prop::sample::select(vec![1u64, 2, 4, 8, 16]),
        seq in prop::sample::select(vec![512u64, 1024, 4096]),
        optimizer in prop::sample::select(vec!["adamw", "sgd", "adamw-8bit"]),
        precision in prop::sample::select(vec!["mixed-bf16", "bf16", "fp32"]),
        device in prop::sample::select(vec!["h100-80gb", "a100-40gb", "rtx-4090-24gb"]),
        global in prop::sample::select(vec![0u64, 64, 96]),
    ) {
        random_plan(model, gpus, seq, optimizer, precision, device, global)?;
    }
}

/// A small llama or mixtral config.json, its sizes drawn by proptest.
fn small_config(layers: u64, heads: u64, kv: u64, experts: u64) -> tempfile::NamedTempFile {
    let hidden = heads * 16;
    let config = if experts > 0 {
        serde_json::json!({
            "model_type": "mixtral", "hidden_size": hidden, "intermediate_size": hidden * 2,
            "num_attention_heads": heads, "num_key_value_heads": kv,
            "num_hidden_layers": layers, "num_local_experts": experts,
            "num_experts_per_tok": 2, "vocab_size": 1000, "max_position_embeddings": 4096
        })
    } else {
        serde_json::json!({
            "model_type": "llama", "hidden_size": hidden, "intermediate_size": hidden * 3,
            "num_attention_heads": heads, "num_key_value_heads": kv,
            "num_hidden_layers": layers, "vocab_size": 1000,
            "max_position_embeddings": 4096, "tie_word_embeddings": layers.is_multiple_of(2)
        })
    };
    let mut file = tempfile::Builder::new().suffix(".json").tempfile().unwrap();
    std::io::Write::write_all(&mut file, config.to_string().as_bytes()).unwrap();
    file
}

/// One random small model: the pruned search keeps every layout the
/// exhaustive search keeps, with the same peaks and order.
#[allow(clippy::too_many_arguments)]
fn pruning_is_exact(
    layers: u64,
    heads: u64,
    kv_divisor: u64,
    experts: u64,
    gpus: u64,
    capacity_mb: u64,
    seq: u64,
    global: u64,
    optimizer: &str,
    precision: &str,
) -> Result<(), TestCaseError> {
    let config = small_config(layers, heads, (heads / kv_divisor).max(1), experts);
    let mut args = owned(&[
        "--model",
        config.path().to_str().unwrap(),
        "--gpus",
        &gpus.to_string(),
        "--gpus-per-node",
        "8",
        "--capacity",
        &format!("{capacity_mb}MB"),
        "--peak-tflops",
        "100",
        "--intra-node-bandwidth",
        "100GB/s",
        "--inter-node-bandwidth",
        "25GB/s",
        "--seq-len",
        &seq.to_string(),
        "--optimizer",
        optimizer,
        "--precision",
        precision,
        "--allow",
        "all",
        "--overhead",
        "0",
    ]);
    if global > 0 {
        args.extend(owned(&["--global-batch", &global.to_string()]));
    }
    let all: Vec<&str> = std::iter::once("plan")
        .chain(args.iter().map(String::as_str))
        .chain(["--format", "json"])
        .collect();
    let (code, pruned, err) = run(&all);
    let mut exhaustive_args = all.clone();
    exhaustive_args.push("--exhaustive");
    let (code_all, exhaustive, err_all) = run(&exhaustive_args);
    prop_assert_eq!(code, code_all, "{} / {}", err, err_all);
    if code == 0 {
        let pruned: Value = serde_json::from_str(&pruned).unwrap();
        let exhaustive: Value = serde_json::from_str(&exhaustive).unwrap();
        prop_assert_eq!(&pruned["candidates"], &exhaustive["candidates"]);
        prop_assert_eq!(&pruned["kept"], &exhaustive["kept"]);
        prop_assert_eq!(&pruned["layouts"], &exhaustive["layouts"]);
        prop_assert!(pruned["priced"].as_u64() <= exhaustive["priced"].as_u64());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3, ..ProptestConfig::default() })]

    /// The prunings are exact: on random small models, the pruned search
    /// keeps every layout the exhaustive search keeps, with the same peaks
    /// and order.
    #[test]
    fn pruning_keeps_what_the_exhaustive_search_keeps(
        layers in 1u64..7,
        heads in prop::sample::select(vec![2u64, 4, 8]),
        kv_divisor in prop::sample::select(vec![1u64, 2]),
        experts in prop::sample::select(vec![0u64, 0, 4]),
        // Up to 4 GPUs here (an exhaustive search of 16 GPUs with every axis
        // open is most of a minute of a debug build); the ignored test below
        // takes 8 and 16 too.
        gpus in prop::sample::select(vec![1u64, 2, 4]),
        capacity_mb in 20u64..400,
        seq in prop::sample::select(vec![64u64, 128, 256]),
        global in prop::sample::select(vec![0u64, 32]),
        optimizer in prop::sample::select(vec!["adamw", "sgd", "adafactor"]),
        precision in prop::sample::select(vec!["mixed-bf16", "fp32"]),
    ) {
        pruning_is_exact(layers, heads, kv_divisor, experts, gpus, capacity_mb, seq, global, optimizer, precision)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10, ..ProptestConfig::default() })]

    /// [`pruning_keeps_what_the_exhaustive_search_keeps`] over more cases.
    #[test]
    #[ignore = "slow in a debug build (the exhaustive search, twice a case); .ci/run runs it with --ignored"]
    fn pruning_keeps_what_the_exhaustive_search_keeps_in_more_cases(
        layers in 1u64..7,
        heads in prop::sample::select(vec![2u64, 4, 8]),
        kv_divisor in prop::sample::select(vec![1u64, 2]),
        experts in prop::sample::select(vec![0u64, 0, 4]),
        gpus in prop::sample::select(vec![1u64, 2, 4, 8, 16]),
        capacity_mb in 20u64..400,
        seq in prop::sample::select(vec![64u64, 128, 256]),
        global in prop::sample::select(vec![0u64, 32]),
        optimizer in prop::sample::select(vec!["adamw", "sgd", "adafactor"]),
        precision in prop::sample::select(vec!["mixed-bf16", "fp32"]),
    ) {
        pruning_is_exact(layers, heads, kv_divisor, experts, gpus, capacity_mb, seq, global, optimizer, precision)?;
    }
}

/// `--jobs 1, 2, 3, 8` give byte-identical answers: a search of 4 GPUs at a
/// global batch of 16 (about 5,000 layouts kept, enough to split eight ways).
#[test]
fn any_number_of_jobs_gives_the_same_answer() {
    jobs_give_the_same_answer("4", &["--global-batch", "16"]);
}

/// The same on 16 GPUs with every micro-batch (about 13,000 layouts kept).
#[test]
#[ignore = "slow in a debug build (four searches of 16 GPUs with every axis open); .ci/run runs it with --ignored"]
fn any_number_of_jobs_gives_the_same_answer_on_16_gpus() {
    jobs_give_the_same_answer("16", &[]);
}

fn jobs_give_the_same_answer(gpus: &str, more_flags: &[&str]) {
    let mut args = owned(&[
        "--model",
        "llama-3.1-8b",
        "--gpus",
        gpus,
        "--device",
        "h100-80gb",
        "--seq-len",
        "4096",
        "--optimizer",
        "adamw",
        "--precision",
        "mixed-bf16",
        "--allow",
        "all",
    ]);
    args.extend(owned(more_flags));
    let one = plan(&args);
    assert!(one["kept"].as_u64().unwrap() > 1_000, "{}", one["kept"]);
    for jobs in ["2", "3", "8"] {
        let mut more = args.clone();
        more.extend(owned(&["--jobs", jobs]));
        assert_eq!(plan(&more), one, "--jobs {jobs}");
    }
}

#[test]
fn a_node_finds_layouts_best_first() {
    finds_layouts_best_first("llama-3.1-8b", "8", "8192");
}

/// The clusters of 64 and 256 GPUs the README names.
#[test]
#[ignore = "slow in a debug build (searches of 64 and 256 GPUs); .ci/run runs it with --ignored"]
fn the_named_clusters_find_layouts() {
    for (model, gpus, seq) in [
        ("llama-3.1-70b", "64", "4096"),
        ("mixtral-8x22b", "256", "4096"),
        ("deepseek-v3", "256", "4096"),
    ] {
        finds_layouts_best_first(model, gpus, seq);
    }
}

/// `model` on `gpus` H100s at `seq` tokens: some layout fits, and the
/// layouts are ranked fastest first.
fn finds_layouts_best_first(model: &str, gpus: &str, seq: &str) {
    let answer = plan(&owned(&[
        "--model",
        model,
        "--gpus",
        gpus,
        "--device",
        "h100-80gb",
        "--seq-len",
        seq,
        "--optimizer",
        "adamw",
        "--precision",
        "mixed-bf16",
        "--global-batch",
        "1024",
    ]));
    let kept = answer["kept"].as_u64().unwrap();
    assert!(kept > 0, "{model} on {gpus} x H100: nothing fits");
    assert!(answer["candidates"].as_u64().unwrap() >= kept);
    let best = &answer["layouts"][0];
    assert!(best["tokens_per_s"].as_f64().unwrap() > 0.0);
    // Best first, to the ranking's 1% resolution: throughputs within 1% rank
    // as equal, the layout with fewer parallel dimensions first.
    let speeds: Vec<f64> = answer["layouts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["tokens_per_s"].as_f64().unwrap())
        .collect();
    assert!(
        speeds.windows(2).all(|w| w[0] * 1.01 >= w[1]),
        "{model}: not ranked"
    );
}

#[test]
fn the_table_prints_each_row_as_a_command() {
    let (code, out, err) = run(&[
        "plan",
        "--model",
        "llama-3.1-8b",
        "--gpus",
        "8",
        "--device",
        "h100-80gb",
        "--seq-len",
        "8192",
        "--optimizer",
        "adamw",
        "--precision",
        "mixed-bf16",
        "--top",
        "3",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Each row is exactly:"), "{out}");
    assert_eq!(
        out.matches("trainmem estimate --model llama-3.1-8b")
            .count(),
        3,
        "{out}"
    );
    for format in ["markdown", "csv"] {
        let (code, out, err) = run(&[
            "plan",
            "--model",
            "llama-3.1-8b",
            "--gpus",
            "8",
            "--device",
            "h100-80gb",
            "--seq-len",
            "8192",
            "--top",
            "2",
            "--format",
            format,
        ]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(
            out.matches("trainmem estimate").count(),
            2,
            "{format}: {out}"
        );
    }
}

#[test]
fn typed_layout_flags_fix_their_axis() {
    let answer = plan(&owned(&[
        "--model",
        "llama-3.1-70b",
        "--gpus",
        "64",
        "--device",
        "h100-80gb",
        "--seq-len",
        "4096",
        "--optimizer",
        "adamw",
        "--precision",
        "mixed-bf16",
        "--tp",
        "8",
        "--recompute",
        "selective",
    ]));
    for layout in answer["layouts"].as_array().unwrap() {
        assert_eq!(layout["layout"]["tp"], 8);
        assert_eq!(layout["layout"]["recompute"], "selective");
    }
    assert!(answer["kept"].as_u64().unwrap() > 0);
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let base = [
        "plan",
        "--model",
        "llama-3.1-8b",
        "--device",
        "h100-80gb",
        "--seq-len",
        "4096",
    ];
    let cases: [(&[&str], &str); 11] = [
        (&["--gpus", "2000000"], "--gpus"),
        (
            &["--gpus", "8", "--global-batch", "99999999999"],
            "--global-batch",
        ),
        (&["--gpus", "0"], "--gpus"),
        (&["--gpus", "8", "--allow", "zero,warp"], "warp"),
        (&["--gpus", "8", "--allow", "tp,pp"], "framework"),
        (
            &["--gpus", "8", "--allow", "zero", "--global-batch", "7"],
            "global batch",
        ),
        (&["--gpus", "8", "--headroom", "150%"], "--headroom"),
        (&["--gpus", "8", "--jobs", "0"], "--jobs"),
        (
            &[
                "--gpus",
                "8",
                "--global-batch",
                "64",
                "--grad-accumulation",
                "2",
            ],
            "--global-batch",
        ),
        (&["--nodes", "2"], "--gpus"),
        (&["--gpus", "8", "--tp", "3"], "no layout"),
    ];
    for (extra, needle) in cases {
        let args: Vec<&str> = base.iter().copied().chain(extra.iter().copied()).collect();
        let (code, out, err) = run(&args);
        assert_eq!(code, 2, "{args:?}: {out}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    let (code, _, err) = run(&[
        "plan",
        "--model",
        "llama-3.1-8b",
        "--gpus",
        "8",
        "--device",
        "h100-80gb",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("--seq-len"), "{err}");
    let (code, _, err) = run(&[
        "plan",
        "--model",
        "llama-3.1-8b",
        "--gpus",
        "8",
        "--seq-len",
        "512",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("--device"), "{err}");
    // An axis the model cannot open is explained, not an error.
    let (code, out, err) = run(&[
        "plan",
        "--model",
        "llama-3.1-8b",
        "--gpus",
        "8",
        "--device",
        "h100-80gb",
        "--seq-len",
        "4096",
        "--allow",
        "zero,ep",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("no routed experts"), "{out}");
}
