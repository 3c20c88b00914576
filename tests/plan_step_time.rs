//! `plan` ranked by the step-time model: published, tuned recipes rank at
//! or near the top with their throughput predicted, and context
//! parallelism is not ranked first at 4k tokens, where each rank's short
//! sequence makes it a loss.

mod common;

use common::json_of;
use serde_json::Value;

/// The bounds: the published layout within 5% of the predicted
/// best, its throughput within 10% of the published one.
const NEAR_BEST: f64 = 0.05;
const CLOSE: f64 = 0.10;

fn plan(base: &[&str], global_batch: &str, top: &str) -> Value {
    let mut args = vec!["plan"];
    args.extend(base);
    args.extend([
        "--global-batch",
        global_batch,
        "--top",
        top,
        "--format",
        "json",
    ]);
    json_of(&args)
}

fn estimate(base: &[&str], layout: &[&str]) -> Value {
    let mut args = vec!["estimate"];
    args.extend(base);
    args.extend(layout);
    args.extend(["--format", "json"]);
    json_of(&args)["time"].clone()
}

/// Published, tuned recipes: cases of `tests/fixtures/published/step_times.json`
/// whose source ran a layout it chose for throughput (LLM Foundry tuned
/// each row's micro-batch; torchtitan's tables give its FSDP recipes), on
/// at most 64 GPUs (a debug build plans each in seconds). Every one is
/// priced and planned and the table is printed; not all meet the bounds
/// (torchtitan's activation-checkpointed rows lose to layouts that fit
/// without recomputation), and the issue asks for at least five that do.
const RECIPES: [&str; 14] = [
    "torchtitan-llama-2-13b-64xa100-no-b2",
    "torchtitan-llama-3.1-70b-64xa100-full-b1",
    "torchtitan-llama-3.1-8b-8xh100-fsdp-eager",
    "llmfoundry-mpt-13b-a100-80gb-8gpus-seq2048",
    "llmfoundry-mpt-7b-a100-80gb-8gpus-seq2048",
    "llmfoundry-mpt-3b-a100-80gb-8gpus-seq2048",
    "llmfoundry-mpt-1b-a100-80gb-8gpus-seq2048",
    "llmfoundry-mpt-760m-a100-80gb-8gpus-seq2048",
    "llmfoundry-mpt-350m-a100-80gb-8gpus-seq2048",
    "llmfoundry-mpt-125m-a100-80gb-8gpus-seq2048",
    "llmfoundry-mpt-13b-h100-80gb-8gpus-seq2048",
    "llmfoundry-mpt-7b-h100-80gb-8gpus-seq2048",
    "llmfoundry-mpt-1b-h100-80gb-8gpus-seq2048",
    "llmfoundry-mpt-760m-h100-80gb-8gpus-seq2048",
];
/// The count of recipes that must meet both bounds.
const RECIPES_MET: usize = 5;
/// Flags that name the cluster and the workload; the rest is the layout.
const CLUSTER: [&str; 7] = [
    "--model",
    "--gpus",
    "--device",
    "--seq-len",
    "--precision",
    "--attention",
    "--framework",
];

/// A recipe read from its published case.
struct Recipe {
    id: String,
    base: Vec<String>,
    layout: Vec<String>,
    global_batch: u64,
    tokens_per_s_per_gpu: f64,
    gpus: f64,
}

fn recipe(id: &str) -> Recipe {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/published/step_times.json"
    );
    let cases: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let case = cases.iter().find(|c| c["id"] == id).unwrap();
    assert_eq!(case["metric"], "tokens_per_s_per_gpu", "{id}");
    let flags: Vec<String> = case["flags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect();
    let (mut base, mut layout) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < flags.len() {
        let valued = flags.get(i + 1).is_some_and(|v| !v.starts_with("--"));
        let take = if valued { 2 } else { 1 };
        let side = if CLUSTER.contains(&flags[i].as_str()) {
            &mut base
        } else {
            &mut layout
        };
        side.extend(flags[i..i + take].iter().cloned());
        i += take;
    }
    // `plan` sizes the optimizer's states; the published runs used AdamW.
    base.extend(["--optimizer".to_string(), "adamw".to_string()]);
    let value = |name: &str| {
        flags
            .iter()
            .position(|f| f == name)
            .map_or(1, |i| flags[i + 1].parse::<u64>().unwrap())
    };
    let split = value("--tp") * value("--pp") * value("--cp");
    Recipe {
        id: id.to_string(),
        global_batch: value("--micro-batch") * value("--grad-accumulation") * value("--gpus")
            / split,
        tokens_per_s_per_gpu: case["measured"]["value"].as_f64().unwrap(),
        gpus: value("--gpus") as f64,
        base,
        layout,
    }
}

/// Whether the recipe `id` meets both bounds, and its line of the table.
fn judge(id: &str) -> (bool, String) {
    let recipe = recipe(id);
    let base: Vec<&str> = recipe.base.iter().map(String::as_str).collect();
    let layout: Vec<&str> = recipe.layout.iter().map(String::as_str).collect();
    let published = estimate(&base, &layout);
    let predicted = published["tokens_per_s"].as_f64().unwrap() / recipe.gpus;
    let error = (predicted - recipe.tokens_per_s_per_gpu) / recipe.tokens_per_s_per_gpu;
    let report = plan(&base, &recipe.global_batch.to_string(), "5");
    let rows = report["layouts"].as_array().unwrap();
    let step_of = |row: &Value| row["time"]["step_time_s"].as_f64().unwrap();
    // The JSON lists every layout that fits, plan's top five first.
    let best = rows.iter().map(step_of).fold(f64::INFINITY, f64::min);
    let fifth = rows.iter().take(5).map(step_of).fold(0.0, f64::max);
    let step = published["step_time_s"].as_f64().unwrap();
    // Among the top five (no slower than the slowest of them) or within 5%
    // of the best.
    let near = step <= fifth.max(best * (1.0 + NEAR_BEST));
    let close = error.abs() <= CLOSE;
    let line = format!(
        "{}: published {} tokens/s/GPU, predicted {predicted:.0} ({error:+.3}); \
         its step {step:.3} s, plan's best {best:.3} s ({:+.3}){}",
        recipe.id,
        recipe.tokens_per_s_per_gpu,
        step / best - 1.0,
        if near && close { "" } else { "  [misses]" },
    );
    (near && close, line)
}

#[test]
fn published_recipes_rank_near_the_best_with_their_throughput() {
    // Two threads: each recipe is a plan of thousands of layouts.
    let (first, second) = RECIPES.split_at(RECIPES.len() / 2);
    let judged: Vec<(bool, String)> = std::thread::scope(|scope| {
        let other = scope.spawn(|| second.iter().map(|id| judge(id)).collect::<Vec<_>>());
        let mut judged: Vec<_> = first.iter().map(|id| judge(id)).collect();
        judged.extend(other.join().unwrap());
        judged
    });
    let met = judged.iter().filter(|(met, _)| *met).count();
    let table: String = judged.iter().map(|(_, line)| format!("{line}\n")).collect();
    println!("{table}");
    assert!(met >= RECIPES_MET, "{met} of {}:\n{table}", RECIPES.len());
}

/// The top row's context-parallel degree.
fn first_cp(base: &[&str], global_batch: &str) -> u64 {
    let report = plan(base, global_batch, "1");
    report["layouts"][0]["layout"]["cp"].as_u64().unwrap()
}

const FOUR_K: [&str; 6] = [
    "--seq-len",
    "4096",
    "--precision",
    "mixed-bf16",
    "--optimizer",
    "adamw",
];

fn cluster<'a>(model: &'a str, gpus: &'a str, device: &'a str) -> Vec<&'a str> {
    let mut base = vec!["--model", model, "--gpus", gpus, "--device", device];
    base.extend(FOUR_K);
    base
}

#[test]
fn context_parallelism_is_not_first_at_4k_tokens() {
    assert_eq!(first_cp(&cluster("llama-3.1-8b", "8", "h100"), "64"), 1);
    assert_eq!(
        first_cp(&cluster("llama-3.1-8b", "8", "a100-80gb"), "64"),
        1
    );
    assert_eq!(first_cp(&cluster("llama-3.1-70b", "64", "h100"), "512"), 1);
}

/// The 512-GPU cluster: about a minute of a debug build.
#[test]
#[ignore]
fn context_parallelism_is_not_first_at_4k_tokens_on_512_gpus() {
    assert_eq!(
        first_cp(&cluster("llama-3.1-70b", "512", "h100"), "4096"),
        1
    );
}
