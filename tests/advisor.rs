//! The advisor (issue 23): one search over sets of typed changes. Each
//! answer fits when re-priced with exactly its changes, is minimal (drop
//! any one change and it does not fit), and the first answer keeps the
//! training the same whenever some set of such changes fits on the run's
//! own GPUs (checked by exhaustive search on the small configs).

use serde_json::{Value, json};
use trainmem::advisor::{self, Advice, MAX_ESTIMATES};
use trainmem::estimate::{Estimate, estimate};
use trainmem::request::change::apply_all;
use trainmem::request::{Category, Change, EstimateRequest, Slot};

/// One named setup, as the web API's JSON keys.
struct Scenario {
    name: &'static str,
    request: Value,
    /// Small enough to search every subset of the same-maths changes.
    exhaustive: bool,
}

fn scenarios() -> Vec<Scenario> {
    let full = |model: &str, device: &str| {
        json!({"model": model, "optimizer": "adamw", "precision": "mixed-bf16",
            "micro-batch": 1, "seq-len": 2048, "device": device})
    };
    let with = |mut base: Value, extra: Value| {
        for (k, v) in extra.as_object().unwrap() {
            base[k] = v.clone();
        }
        base
    };
    let s = |name, request, exhaustive| Scenario {
        name,
        request,
        exhaustive,
    };
    vec![
        s(
            "8B full fine-tune on a 4090",
            full("llama-3.1-8b", "rtx-4090-24gb"),
            false,
        ),
        s(
            "8B full fine-tune on an H100",
            full("llama-3.1-8b", "h100-80gb"),
            false,
        ),
        s(
            "13B full fine-tune on an A100 80GB",
            full("llama-2-13b", "a100-80gb"),
            false,
        ),
        s(
            "70B QLoRA on 2 x 24 GB",
            with(
                full("llama-3.1-70b", "rtx-4090-24gb"),
                json!({"lora-rank": 16, "quantize": "nf4", "gpus": 2, "fsdp": "shard-grad-op"}),
            ),
            false,
        ),
        s(
            "70B QLoRA on 1 x 48 GB",
            with(
                full("llama-3.1-70b", "rtx-a6000-48gb"),
                json!({"lora-rank": 16, "quantize": "nf4"}),
            ),
            false,
        ),
        s(
            "Mixtral 8x7B LoRA on an H100",
            with(full("mixtral-8x7b", "h100-80gb"), json!({"lora-rank": 16})),
            false,
        ),
        s(
            "a VLM LoRA on a 4090",
            with(
                full("llava-1.5-7b", "rtx-4090-24gb"),
                json!({"lora-rank": 16, "micro-batch": 2, "freeze": ["vision_tower", "multi_modal_projector"]}),
            ),
            false,
        ),
        s(
            "Mistral 7B micro-batch 8 at 4096 on an H100",
            with(
                full("mistral-7b", "h100-80gb"),
                json!({"micro-batch": 8, "seq-len": 4096, "lora-rank": 16}),
            ),
            false,
        ),
        s(
            "Qwen2.5 7B full fine-tune on 4 x A100 40GB",
            with(full("qwen2.5-7b", "a100-40gb"), json!({"gpus": 4})),
            false,
        ),
        s(
            "Llama 3.2 1B full fine-tune on a T4",
            with(full("llama-3.2-1b", "t4-16gb"), json!({"micro-batch": 4})),
            true,
        ),
        s(
            "Qwen2.5 0.5B at 8192 on 8 GB",
            json!({"model": "qwen2.5-0.5b", "optimizer": "adamw", "precision": "mixed-bf16",
                "micro-batch": 2, "seq-len": 8192, "capacity": "8GB"}),
            true,
        ),
        s(
            "GPT-2 fp32 on 4 GB",
            json!({"model": "gpt2", "optimizer": "adam", "micro-batch": 8, "seq-len": 1024,
                "capacity": "4GB"}),
            true,
        ),
        s(
            "SmolLM2 135M, long sequences on 4 GB",
            json!({"model": "smollm2-135m", "optimizer": "adamw", "precision": "bf16",
                "micro-batch": 4, "seq-len": 8192, "capacity": "4GB"}),
            true,
        ),
    ]
}

fn request(value: &Value) -> EstimateRequest {
    EstimateRequest::from_json(value.as_object().unwrap()).unwrap()
}

/// `estimate` of `request` with exactly `changes`.
fn priced(request: &EstimateRequest, changes: &[Change]) -> Option<Estimate> {
    let mut changed = request.clone();
    apply_all(changes, &mut changed.flags);
    let (model, setup, _, _) = changed.resolve().ok()?;
    estimate(&model, &setup).ok()
}

fn fits(request: &EstimateRequest, changes: &[Change]) -> bool {
    priced(request, changes).is_some_and(|e| e.fits == Some(true))
}

fn own_hardware(changes: &[Change]) -> bool {
    !changes.iter().any(|c| matches!(c, Change::Gpus { .. }))
}

/// Every set of at most one change per slot of `options`.
fn every_subset(options: &[Change]) -> Vec<Vec<Change>> {
    let mut out: Vec<Vec<Change>> = vec![Vec::new()];
    for option in options {
        let mut grown = Vec::new();
        for set in &out {
            if !set.iter().any(|c| c.slot() == option.slot()) {
                let mut bigger = set.clone();
                bigger.push(option.clone());
                grown.push(bigger);
            }
        }
        out.extend(grown);
    }
    out
}

fn check_answers(name: &str, request: &EstimateRequest, advice: &Advice) {
    for answer in &advice.answers {
        let again = priced(request, &answer.changes)
            .unwrap_or_else(|| panic!("{name}: {:?} refused", answer.changes));
        assert_eq!(again.fits, Some(true), "{name}: {:?}", answer.changes);
        assert_eq!(again.memory.peak, answer.estimate.memory.peak, "{name}");
        for i in 0..answer.changes.len() {
            let mut dropped = answer.changes.clone();
            let gone = dropped.remove(i);
            assert!(
                !fits(request, &dropped),
                "{name}: {:?} still fits without {gone:?}",
                answer.changes
            );
        }
    }
    assert!(
        advice.estimates <= 2 * MAX_ESTIMATES,
        "{name}: {} estimates",
        advice.estimates
    );
    // The work, counted: each model the search prices is built once (its
    // inventory, LoRA and quantization applied, its names read), one per
    // fine-tuning it tries: the run's own, LoRA, QLoRA; not once per estimate.
    let fine_tunings = advisor::space::candidates(request)
        .iter()
        .filter(|c| c.slot() == Slot::Trained)
        .count() as u64;
    assert!(
        advice.models <= 1 + fine_tunings,
        "{name}: {} models built for {} estimates",
        advice.models,
        advice.estimates
    );
}

#[test]
fn every_answer_fits_alone_and_is_minimal() {
    let mut report = String::new();
    let (mut tried, mut whole) = (0, 0);
    for scenario in scenarios().iter().filter(|s| !s.exhaustive) {
        let request = request(&scenario.request);
        let advice = advisor::advise(&request).unwrap();
        check_answers(scenario.name, &request, &advice);
        let first = advice.first().map(|a| {
            a.changes
                .iter()
                .map(Change::words)
                .collect::<Vec<_>>()
                .join(" + ")
        });
        report += &format!(
            "{}: {} answers, {} estimates ({} whole), {} models, first: {first:?}\n",
            scenario.name,
            advice.answers.len(),
            advice.estimates,
            advice.whole,
            advice.models
        );
        assert!(advice.whole <= advice.estimates, "{}", scenario.name);
        tried += advice.estimates;
        whole += advice.whole;
    }
    // Sets whose allocated peak alone is over the capacity are not priced
    // whole: the allocator simulation and the report only for the others.
    assert!(whole < tried, "{whole} of {tried} estimates priced whole");
    println!("{report}");
}

#[test]
fn the_first_answer_keeps_the_maths_when_a_set_that_does_exists() {
    for scenario in scenarios().iter().filter(|s| s.exhaustive) {
        let request = request(&scenario.request);
        let advice = advisor::advise(&request).unwrap();
        check_answers(scenario.name, &request, &advice);
        let same: Vec<Change> = advisor::space::candidates(&request)
            .into_iter()
            .filter(|c| {
                c.category() == Category::SameMaths && own_hardware(std::slice::from_ref(c))
            })
            .collect();
        let exists = every_subset(&same)
            .iter()
            .any(|set| !set.is_empty() && fits(&request, set));
        assert_eq!(
            exists,
            advice
                .answers
                .iter()
                .any(|a| own_hardware(&a.changes) && advisor::category(a) == Category::SameMaths),
            "{}: the search and the exhaustive check disagree",
            scenario.name
        );
        if exists {
            let first = advice.first().expect(scenario.name);
            assert!(
                own_hardware(&first.changes) && advisor::category(first) == Category::SameMaths,
                "{}: a same-maths set fits, the first answer is {:?}",
                scenario.name,
                first.changes
            );
        }
    }
}

#[test]
fn a_run_that_fits_needs_no_change() {
    let request = request(&json!({"model": "gpt2", "micro-batch": 1, "seq-len": 128,
        "device": "h100-80gb"}));
    let advice = advisor::advise(&request).unwrap();
    assert!(advice.answers.is_empty());
    assert_eq!(advice.estimates, 1);
}

/// What the binary prints for `args`: exit code, stdout, stderr.
fn cli(args: &[&str]) -> (i32, String, String) {
    let output = assert_cmd::Command::cargo_bin("trainmem")
        .unwrap()
        .args(args)
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

fn cli_json(args: &[&str]) -> Value {
    let (code, stdout, stderr) = cli(args);
    assert!(code == 0 || code == 1, "{args:?}: {stderr}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// `POST /api/techniques` on a server in this process, on a free port.
fn api_techniques(body: &Value) -> Value {
    use std::io::{Read, Write};
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            // A debug build prices the search in seconds, past the
            // default deadline (2 s) that a release build keeps.
            let limits = trainmem::serve::Limits {
                deadline: std::time::Duration::from_secs(120),
                ..trainmem::serve::Limits::default()
            };
            let (address, serving) = trainmem::serve::bind_with("127.0.0.1", 0, limits)
                .await
                .unwrap();
            sender.send(address).unwrap();
            serving.await.unwrap();
        });
    });
    let address = receiver
        .recv_timeout(std::time::Duration::from_secs(30))
        .unwrap();
    let body = body.to_string();
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(
        stream,
        "POST /api/techniques HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, rest) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // A chunked body, or a plain one.
    let text = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        let mut out = String::new();
        let mut rest = rest;
        while let Some((size, tail)) = rest.split_once("\r\n") {
            let size = usize::from_str_radix(size.trim(), 16).unwrap();
            if size == 0 {
                break;
            }
            out += &tail[..size];
            rest = &tail[size + 2..];
        }
        out
    } else {
        rest.to_string()
    };
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// `techniques`, `check`'s suggestions, `fit`'s hint and `POST
/// /api/techniques` give the same first answer for the same run (the page
/// shows what the API answers).
#[test]
fn every_front_door_gives_the_same_first_answer() {
    let run = [
        "--model",
        "llama-3.1-8b",
        "--optimizer",
        "adamw",
        "--precision",
        "mixed-bf16",
        "--seq-len",
        "2048",
        "--device",
        "rtx-4090-24gb",
    ];
    let with = |head: &[&'static str], tail: &[&'static str]| -> Vec<&'static str> {
        head.iter().chain(run.iter()).chain(tail).copied().collect()
    };
    let techniques = cli_json(&with(
        &["techniques"],
        &["--micro-batch", "1", "--format", "json"],
    ));
    let first = techniques["rungs"][1]["flags"].clone();
    assert!(
        first.as_array().is_some_and(|f| !f.is_empty()),
        "{techniques}"
    );

    // check, with a launch config that sets nothing the flags do not.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("args.json");
    std::fs::write(
        &config,
        r#"{"output_dir": "out", "per_device_train_batch_size": 1, "gradient_accumulation_steps": 1}"#,
    )
    .unwrap();
    let config = config.to_str().unwrap().to_string();
    let mut args: Vec<&str> = vec!["check", &config];
    args.extend(with(&[], &["--micro-batch", "1", "--format", "json"]));
    let checked = cli_json(&args);
    assert_eq!(
        checked["memory"]["peak"], techniques["rungs"][0]["peak"],
        "the same run"
    );
    assert_eq!(checked["suggestions"][0]["flags"], first, "{checked}");

    // fit: no micro-batch fits at any recompute mode, so it hints.
    let fitted = cli_json(&with(&["fit"], &["--format", "json"]));
    assert_eq!(fitted["found"], false, "{fitted}");
    assert_eq!(fitted["hint"]["flags"], first, "{fitted}");

    // The web API (the page's "What would make it fit" lists its rows).
    let mut body = json!({"micro-batch": 1});
    for pair in run.chunks(2) {
        body[pair[0].trim_start_matches("--")] = json!(pair[1]);
    }
    let api = api_techniques(&body);
    assert_eq!(api["rungs"][1]["flags"], first);
    assert_eq!(api["rungs"], techniques["rungs"]);
}

/// Allocated fits, reserved does not: `tight`, exit 1 from `check`
/// unless `--allow-tight`.
#[test]
fn a_tight_run_exits_1_unless_allowed() {
    let e = cli_json(&[
        "estimate",
        "--model",
        "gpt2",
        "--micro-batch",
        "2",
        "--seq-len",
        "1024",
        "--format",
        "json",
    ]);
    let peak = e["memory"]["peak"].as_u64().unwrap();
    let reserved = e["memory"]["reserved"].as_u64().unwrap();
    assert!(peak < reserved, "{peak} {reserved}");
    let capacity = format!("{}B", peak + (reserved - peak) / 2);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("args.json");
    std::fs::write(
        &config,
        r#"{"output_dir": "out", "per_device_train_batch_size": 2}"#,
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let base = [
        "check",
        config,
        "--model",
        "gpt2",
        "--seq-len",
        "1024",
        "--capacity",
        &capacity,
    ];
    let (code, stdout, stderr) = cli(&[&base[..], &["--format", "json"]].concat());
    assert_eq!(code, 1, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["verdict"], "tight");
    assert_eq!(report["fits"], false);
    assert_eq!(report["fits_allocated"], true);
    let (code, stdout, stderr) = cli(&base);
    assert_eq!(code, 1, "{stderr}");
    assert!(stdout.contains("verdict: tight"), "{stdout}");
    let (code, _, stderr) = cli(&[&base[..], &["--allow-tight"]].concat());
    assert_eq!(code, 0, "{stderr}");
}

/// `fit` says what it found: the estimate it shows fits; when the chosen
/// recompute mode fits nothing it names the mode that does; the fewest
/// GPUs never read "at sequence 1"; and when no count fits, the
/// advisor's best change is the hint.
#[test]
fn fit_says_what_it_found() {
    // The chosen mode (none) fits no micro-batch at 8k tokens; full does.
    let found = cli_json(&[
        "fit",
        "--model",
        "llama-3.1-8b",
        "--precision",
        "bf16",
        "--lora-rank",
        "16",
        "--seq-len",
        "8192",
        "--device",
        "a100-40gb",
        "--format",
        "json",
    ]);
    let modes = found["recompute_modes"].as_array().unwrap();
    assert!(modes[0]["largest"].is_null(), "{found}");
    assert_eq!(found["found"], true);
    assert_eq!(
        found["estimate"]["fits"], true,
        "the figure shown is of a mode that fits"
    );
    assert!(found["estimate_recompute"].is_string(), "{found}");
    let (_, table, _) = cli(&[
        "fit",
        "--model",
        "llama-3.1-8b",
        "--precision",
        "bf16",
        "--lora-rank",
        "16",
        "--seq-len",
        "8192",
        "--device",
        "a100-40gb",
    ]);
    assert!(
        table.contains("the chosen recompute mode fits no micro-batch"),
        "{table}"
    );
    // The longest sequence: no GPU count at a placeholder sequence.
    let (_, table, _) = cli(&[
        "fit",
        "--model",
        "llama-3.2-1b",
        "--micro-batch",
        "1",
        "--device",
        "h100-80gb",
    ]);
    assert!(!table.contains("sequence 1"), "{table}");
    assert!(!table.contains("fewest GPUs"), "{table}");
    // A 70B under FSDP: activations do not shard, so no count fits
    // without recomputation; the hint says what does.
    let sharded = cli_json(&[
        "fit",
        "--model",
        "llama-3.1-70b",
        "--fsdp",
        "full-shard",
        "--optimizer",
        "adamw",
        "--precision",
        "mixed-bf16",
        "--micro-batch",
        "1",
        "--seq-len",
        "8192",
        "--device",
        "h100-80gb",
        "--format",
        "json",
    ]);
    assert!(sharded["min_gpus"].is_null(), "{sharded}");
    assert_eq!(sharded["found"], false);
    assert!(
        sharded["hint"]["flags"]
            .as_array()
            .is_some_and(|f| !f.is_empty()),
        "{sharded}"
    );
}
