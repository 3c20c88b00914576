//! Hugging Face hub ids resolved without a network (issue 13, part 3): a
//! fake hub cache with the real layout (`blobs/`, `refs/main`,
//! `snapshots/<revision>/` whose files link into `../../blobs/`), a preset
//! whose published config is the repository's, and the error that names the
//! download command.

#![cfg(unix)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod common;

use common::{HUB_CACHE_VARIABLES, int, run, run_with_env};
use serde_json::{Value, json};
use tempfile::TempDir;

/// A small llama with `layers` decoder layers.
fn tiny_llama(layers: u64) -> String {
    json!({
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": layers,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 1000,
        "max_position_embeddings": 256,
        "rms_norm_eps": 1e-5,
        "tie_word_embeddings": false,
        "torch_dtype": "bfloat16"
    })
    .to_string()
}

/// A safetensors file written by hand: the 8-byte little-endian header
/// length, the JSON header padded to 8 bytes, then zeros for the data.
fn safetensors(tensors: &[(&str, &[u64])]) -> Vec<u8> {
    let mut header = serde_json::Map::new();
    let mut offset = 0u64;
    for (name, shape) in tensors {
        let bytes = shape.iter().product::<u64>() * 2;
        header.insert(
            name.to_string(),
            json!({"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + bytes]}),
        );
        offset += bytes;
    }
    let mut text = Value::Object(header).to_string();
    while !text.len().is_multiple_of(8) {
        text.push(' ');
    }
    let mut file = (text.len() as u64).to_le_bytes().to_vec();
    file.extend(text.as_bytes());
    file.resize(file.len() + offset as usize, 0);
    file
}

/// One repository of a fake hub cache: `models--{owner}--{name}/`.
struct Repository {
    folder: PathBuf,
}

impl Repository {
    fn new(cache: &Path, id: &str) -> Repository {
        let folder = cache.join(format!("models--{}", id.replace('/', "--")));
        std::fs::create_dir_all(folder.join("blobs")).unwrap();
        Repository { folder }
    }

    /// Stores `bytes` as a blob named `blob` (the cache names them by hash).
    fn blob(&self, blob: &str, bytes: &[u8]) -> &Repository {
        std::fs::write(self.folder.join("blobs").join(blob), bytes).unwrap();
        self
    }

    /// `snapshots/<revision>/<file>` as a link to `../../blobs/<blob>`.
    fn link(&self, revision: &str, file: &str, blob: &str) -> &Repository {
        let snapshot = self.snapshot(revision);
        std::fs::create_dir_all(&snapshot).unwrap();
        std::os::unix::fs::symlink(Path::new("../../blobs").join(blob), snapshot.join(file))
            .unwrap();
        self
    }

    /// A snapshot holding a tiny llama's config.json and a model.safetensors
    /// of two tensors, both links into `blobs/`.
    fn model(&self, revision: &str, layers: u64) -> &Repository {
        let config = format!("config-{revision}");
        let weights = format!("weights-{revision}");
        self.blob(&config, tiny_llama(layers).as_bytes())
            .blob(
                &weights,
                &safetensors(&[
                    ("model.embed_tokens.weight", &[1000, 64]),
                    ("model.norm.weight", &[64]),
                ]),
            )
            .link(revision, "config.json", &config)
            .link(revision, "model.safetensors", &weights)
    }

    /// `refs/<name>` holding `revision`, as huggingface_hub writes it (no newline).
    fn reference(&self, name: &str, revision: &str) -> &Repository {
        std::fs::create_dir_all(self.folder.join("refs")).unwrap();
        std::fs::write(self.folder.join("refs").join(name), revision).unwrap();
        self
    }

    fn snapshot(&self, revision: &str) -> PathBuf {
        self.folder.join("snapshots").join(revision)
    }
}

const MAIN: &str = "0123abcd0123abcd0123abcd0123abcd0123abcd";
const OLDER: &str = "fedcba98fedcba98fedcba98fedcba98fedcba98";

/// Runs trainmem with `cache` as `HF_HUB_CACHE` and no other cache variable.
fn run_in(cache: &Path, args: &[&str]) -> (i32, String, String) {
    let mut env: Vec<(&str, Option<&OsStr>)> = HUB_CACHE_VARIABLES
        .iter()
        .map(|name| (*name, None))
        .collect();
    env[0].1 = Some(cache.as_os_str());
    run_with_env(args, &env)
}

fn json_in(cache: &Path, args: &[&str]) -> Value {
    let (code, stdout, stderr) = run_in(cache, args);
    assert_eq!(code, 0, "{args:?}: {stderr}");
    serde_json::from_str(&stdout).unwrap()
}

fn estimate_args(model: &str) -> Vec<&str> {
    vec!["estimate", "--model", model, "--format", "json"]
}

/// Exit 2, nothing on stdout, one `error:` line holding every phrase.
fn refused(outcome: (i32, String, String), phrases: &[&str]) -> String {
    let (code, stdout, stderr) = outcome;
    assert_eq!(code, 2, "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    for phrase in phrases {
        assert!(stderr.contains(phrase), "`{phrase}` not in: {stderr}");
    }
    stderr
}

#[test]
fn a_cached_id_is_read_as_its_snapshot_folder() {
    let cache = TempDir::new().unwrap();
    let repository = Repository::new(cache.path(), "acme/Tiny-Llama");
    repository.model(MAIN, 2).reference("main", MAIN);
    let by_id = json_in(cache.path(), &estimate_args("acme/Tiny-Llama"));
    let folder = repository.snapshot(MAIN);
    let by_folder = json_in(cache.path(), &estimate_args(folder.to_str().unwrap()));
    assert_eq!(by_id["parameters"], by_folder["parameters"]);
    assert_eq!(by_id["memory"]["peak"], by_folder["memory"]["peak"]);
    assert_eq!(by_id["timeline"]["peak"], by_folder["timeline"]["peak"]);
    // Read through the links: the config (two layers) and the safetensors header.
    assert_eq!(int(&by_id["parameters"]["total"]), tiny_llama_parameters(2));
    assert_eq!(by_id["model"]["checkpoint"]["tensors"], 2);
    assert_eq!(by_id["model"]["name"], "acme/Tiny-Llama");
    assert_eq!(
        by_id["model"]["source"],
        "hub cache: models--acme--Tiny-Llama snapshot 0123abcd"
    );
    // The hub's ids are case-blind; the cache keeps the spelling typed.
    let other_case = json_in(cache.path(), &estimate_args("ACME/tiny-llama"));
    assert_eq!(other_case["parameters"], by_id["parameters"]);
}

/// The parameters of [`tiny_llama`], counted by hand: embedding 1000x64 and
/// head 64x1000 (untied); per layer q 64x64, k and v 32x64 (2 kv heads of
/// 16), o 64x64, gate, up and down 128x64, two norms of 64; the final norm.
fn tiny_llama_parameters(layers: u64) -> u64 {
    let per_layer = 64 * 64 + 2 * 32 * 64 + 64 * 64 + 3 * 128 * 64 + 2 * 64;
    2 * 1000 * 64 + layers * per_layer + 64
}

/// A sharded checkpoint: the index and both shards are links into `blobs/`.
#[test]
fn a_sharded_snapshot_is_read_through_its_index() {
    let cache = TempDir::new().unwrap();
    let repository = Repository::new(cache.path(), "acme/sharded");
    let index = json!({"weight_map": {
        "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
        "model.norm.weight": "model-00002-of-00002.safetensors",
        "lm_head.weight": "model-00002-of-00002.safetensors"
    }});
    repository
        .blob("config", tiny_llama(1).as_bytes())
        .blob("index", index.to_string().as_bytes())
        .blob(
            "first",
            &safetensors(&[("model.embed_tokens.weight", &[1000, 64])]),
        )
        .blob(
            "second",
            &safetensors(&[
                ("model.norm.weight", &[64]),
                ("lm_head.weight", &[1000, 64]),
            ]),
        )
        .link(MAIN, "config.json", "config")
        .link(MAIN, "model.safetensors.index.json", "index")
        .link(MAIN, "model-00001-of-00002.safetensors", "first")
        .link(MAIN, "model-00002-of-00002.safetensors", "second")
        .reference("main", MAIN);
    let report = json_in(cache.path(), &estimate_args("acme/sharded"));
    assert_eq!(
        int(&report["parameters"]["total"]),
        tiny_llama_parameters(1)
    );
    assert_eq!(report["model"]["checkpoint"]["files"], 2);
    assert_eq!(report["model"]["checkpoint"]["tensors"], 3);
}

#[test]
fn hf_home_and_the_legacy_variable_name_the_cache_too() {
    let home = TempDir::new().unwrap();
    Repository::new(&home.path().join("hub"), "acme/tiny")
        .model(MAIN, 1)
        .reference("main", MAIN);
    let mut env: Vec<(&str, Option<&OsStr>)> = HUB_CACHE_VARIABLES
        .iter()
        .map(|name| (*name, None))
        .collect();
    env[2].1 = Some(home.path().as_os_str());
    let (code, stdout, stderr) = run_with_env(&estimate_args("acme/tiny"), &env);
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        int(&report["parameters"]["total"]),
        tiny_llama_parameters(1)
    );

    // Without HF_HOME: XDG_CACHE_HOME/huggingface/hub, else HOME/.cache/huggingface/hub.
    let user = TempDir::new().unwrap();
    let default_cache = user.path().join(".cache/huggingface/hub");
    Repository::new(&default_cache, "acme/home")
        .model(MAIN, 4)
        .reference("main", MAIN);
    let total = |env: &[(&str, Option<&OsStr>)]| {
        let (code, stdout, stderr) = run_with_env(&estimate_args("acme/home"), env);
        assert_eq!(code, 0, "{stderr}");
        int(&serde_json::from_str::<Value>(&stdout).unwrap()["parameters"]["total"])
    };
    let mut defaults: Vec<(&str, Option<&OsStr>)> = HUB_CACHE_VARIABLES
        .iter()
        .map(|name| (*name, None))
        .collect();
    defaults[4].1 = Some(user.path().as_os_str());
    assert_eq!(total(&defaults), tiny_llama_parameters(4));
    let xdg = TempDir::new().unwrap();
    Repository::new(&xdg.path().join("huggingface/hub"), "acme/home")
        .model(MAIN, 5)
        .reference("main", MAIN);
    defaults[3].1 = Some(xdg.path().as_os_str());
    assert_eq!(total(&defaults), tiny_llama_parameters(5));

    // HUGGINGFACE_HUB_CACHE comes before HF_HOME.
    let legacy = TempDir::new().unwrap();
    Repository::new(legacy.path(), "acme/tiny")
        .model(MAIN, 3)
        .reference("main", MAIN);
    env[1].1 = Some(legacy.path().as_os_str());
    let (code, stdout, stderr) = run_with_env(&estimate_args("acme/tiny"), &env);
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        int(&report["parameters"]["total"]),
        tiny_llama_parameters(3)
    );
}

#[test]
fn refs_main_picks_its_snapshot_among_several() {
    let cache = TempDir::new().unwrap();
    let repository = Repository::new(cache.path(), "acme/tiny");
    repository.model(OLDER, 1).model(MAIN, 2);
    let total =
        |model: &str| int(&json_in(cache.path(), &estimate_args(model))["parameters"]["total"]);

    // Several snapshots and no ref: the error names them.
    refused(
        run_in(cache.path(), &estimate_args("acme/tiny")),
        &["no `refs/main`", MAIN, OLDER, "acme/tiny@REVISION"],
    );
    repository.reference("main", MAIN);
    assert_eq!(total("acme/tiny"), tiny_llama_parameters(2));
    repository.reference("main", OLDER);
    assert_eq!(total("acme/tiny"), tiny_llama_parameters(1));
    // A revision named after `@`: a commit hash or a ref.
    assert_eq!(
        total(&format!("acme/tiny@{MAIN}")),
        tiny_llama_parameters(2)
    );
    repository.reference("v2", MAIN);
    assert_eq!(total("acme/tiny@v2"), tiny_llama_parameters(2));
    refused(
        run_in(cache.path(), &estimate_args("acme/tiny@v3")),
        &["revision `v3`", "--revision v3"],
    );
    // A ref naming a snapshot that is not there.
    repository.reference("main", "0000");
    refused(
        run_in(cache.path(), &estimate_args("acme/tiny")),
        &["no snapshot `0000`", "`refs/main` names it"],
    );
    refused(
        run_in(cache.path(), &estimate_args("acme/tiny@../../x")),
        &["the revision `../../x`"],
    );
}

#[test]
fn one_snapshot_without_refs_is_used() {
    let cache = TempDir::new().unwrap();
    Repository::new(cache.path(), "acme/tiny").model(OLDER, 1);
    let report = json_in(cache.path(), &estimate_args("acme/tiny"));
    assert_eq!(
        int(&report["parameters"]["total"]),
        tiny_llama_parameters(1)
    );
}

#[test]
fn links_that_lead_nowhere_are_errors_not_hangs() {
    let cache = TempDir::new().unwrap();
    // A config.json whose blob is missing (an interrupted download).
    let dangling = Repository::new(cache.path(), "acme/dangling");
    dangling
        .link(MAIN, "config.json", "missing-blob")
        .reference("main", MAIN);
    refused(
        run_in(cache.path(), &estimate_args("acme/dangling")),
        &[
            "config.json",
            "a link that cannot be followed",
            "does not exist",
        ],
    );
    // A safetensors blob missing beside a good config.
    let shard = Repository::new(cache.path(), "acme/shard");
    shard
        .blob("config", tiny_llama(1).as_bytes())
        .link(MAIN, "config.json", "config")
        .link(MAIN, "model.safetensors", "missing-blob")
        .reference("main", MAIN);
    refused(
        run_in(cache.path(), &estimate_args("acme/shard")),
        &["model.safetensors", "does not exist"],
    );
    // A loop of links.
    let looping = Repository::new(cache.path(), "acme/loop");
    looping
        .link(MAIN, "config.json", "a")
        .reference("main", MAIN);
    std::os::unix::fs::symlink("b", looping.folder.join("blobs/a")).unwrap();
    std::os::unix::fs::symlink("a", looping.folder.join("blobs/b")).unwrap();
    refused(
        run_in(cache.path(), &estimate_args("acme/loop")),
        &["config.json", "a link that cannot be followed"],
    );
    // A FIFO where a blob should be, and one as refs/main: refused at once.
    let fifo = Repository::new(cache.path(), "acme/fifo");
    fifo.link(MAIN, "config.json", "pipe")
        .reference("main", MAIN);
    make_fifo(&fifo.folder.join("blobs/pipe"));
    let fifo_ref = Repository::new(cache.path(), "acme/fiforef");
    fifo_ref.model(MAIN, 1);
    std::fs::create_dir_all(fifo_ref.folder.join("refs")).unwrap();
    make_fifo(&fifo_ref.folder.join("refs/main"));
    for id in ["acme/fifo", "acme/fiforef"] {
        let (code, stdout, stderr, _) = common::run_within_env(
            &estimate_args(id),
            &[("HF_HUB_CACHE", cache.path().as_os_str())],
            Duration::from_secs(20),
        );
        refused((code, stdout, stderr), &["not a regular file (a fifo)"]);
    }
    // A config.json blob far larger than any config.
    let huge = Repository::new(cache.path(), "acme/huge");
    huge.blob("config", &vec![b' '; 2 << 20])
        .link(MAIN, "config.json", "config")
        .reference("main", MAIN);
    refused(
        run_in(cache.path(), &estimate_args("acme/huge")),
        &["config.json", "larger than 1 MiB"],
    );
    // A refs/main that is not a revision (a huge or foreign file).
    let foreign = Repository::new(cache.path(), "acme/foreign");
    foreign
        .model(MAIN, 1)
        .reference("main", &"x".repeat(10_000));
    refused(
        run_in(cache.path(), &estimate_args("acme/foreign")),
        &["refs/main", "does not hold a revision"],
    );
}

fn make_fifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn a_preset_answers_for_its_repository_when_not_cached() {
    let cache = TempDir::new().unwrap();
    let preset = json_in(cache.path(), &estimate_args("llama-3.1-8b"));
    for id in ["meta-llama/Llama-3.1-8B", "meta-llama/llama-3.1-8b"] {
        let report = json_in(cache.path(), &estimate_args(id));
        assert_eq!(report["parameters"], preset["parameters"]);
        assert_eq!(report["memory"]["peak"], preset["memory"]["peak"]);
        assert_eq!(
            report["model"]["source"],
            "preset llama-3.1-8b, the published config of meta-llama/Llama-3.1-8B"
        );
        let notes = report["notes"].to_string();
        assert!(notes.contains("(not in the local cache)"), "{notes}");
    }
    // The table says so too.
    let (code, stdout, _) = run_in(cache.path(), &["estimate", "--model", "Qwen/Qwen2.5-7B"]);
    assert_eq!(code, 0);
    assert!(
        stdout.contains("preset qwen2.5-7b, the published config of Qwen/Qwen2.5-7B"),
        "{stdout}"
    );
    // A cached copy comes before the preset.
    Repository::new(cache.path(), "meta-llama/Llama-3.1-8B")
        .model(MAIN, 1)
        .reference("main", MAIN);
    let cached = json_in(cache.path(), &estimate_args("meta-llama/Llama-3.1-8B"));
    assert_eq!(
        int(&cached["parameters"]["total"]),
        tiny_llama_parameters(1)
    );
}

#[test]
fn an_unknown_id_names_the_download_command() {
    let cache = TempDir::new().unwrap();
    let stderr = refused(
        run_in(cache.path(), &estimate_args("acme/no-such-model")),
        &[
            "`acme/no-such-model`",
            "not in the local hugging face cache",
            "does not download",
            "`huggingface-cli download acme/no-such-model config.json`",
        ],
    );
    assert!(!stderr.contains("did you mean"), "{stderr}");
    // A near preset is still named.
    refused(
        run_in(
            cache.path(),
            &["params", "meta-llama/Llama-3.1-8B-Instruct"],
        ),
        &[
            "`huggingface-cli download meta-llama/Llama-3.1-8B-Instruct config.json`",
            "`llama-3.1-8b`",
        ],
    );
    // A repository folder without snapshots (nothing downloaded yet) is not cached.
    Repository::new(cache.path(), "acme/empty");
    refused(
        run_in(cache.path(), &estimate_args("acme/empty")),
        &["`huggingface-cli download acme/empty config.json`"],
    );
}

#[test]
fn models_lists_hub_ids() {
    let (code, stdout, _) = run(&["models", "--format", "json"]);
    assert_eq!(code, 0);
    let listing: Value = serde_json::from_str(&stdout).unwrap();
    let listing = listing.as_array().unwrap();
    for entry in listing {
        let id = entry["hub_id"].as_str().unwrap();
        assert_eq!(id.split('/').count(), 2, "{id}");
    }
    let hub_id = |name: &str| {
        listing
            .iter()
            .find(|entry| entry["name"] == name)
            .map(|entry| entry["hub_id"].clone())
    };
    assert_eq!(
        hub_id("llama-3.1-8b"),
        Some(json!("meta-llama/Llama-3.1-8B"))
    );
    assert_eq!(
        hub_id("mixtral-8x7b"),
        Some(json!("mistralai/Mixtral-8x7B-v0.1"))
    );
    // The plain table fits 100 columns and says where the ids are; the
    // verbose table, Markdown and CSV have the column.
    let (_, table, _) = run(&["models"]);
    assert!(!table.contains("meta-llama/"), "{table}");
    assert!(
        table.contains("hub ids: `trainmem models --verbose`"),
        "{table}"
    );
    for args in [
        &["models", "--verbose"][..],
        &["models", "--format", "markdown"],
        &["models", "--format", "csv"],
    ] {
        let (code, table, _) = run(args);
        assert_eq!(code, 0);
        assert!(table.contains("hub id"), "{table}");
        assert!(table.contains("meta-llama/Llama-3.1-8B"), "{table}");
    }
}
