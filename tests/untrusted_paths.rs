//! Paths that are not what their names say, through the binary: FIFOs named
//! like model files (which would block `open()` forever), shards linked to
//! files outside the model, and Hugging Face hub ids given as paths.
//!
//! Every run has a deadline: a regression that hangs kills the child and
//! fails the test instead of stalling the suite.

mod common;

use std::path::Path;
use std::time::Duration;

use common::run_within;

/// Far above what any of these runs takes, even in a debug build on a busy
/// machine, and far below a hang.
const DEADLINE: Duration = Duration::from_secs(20);

fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("trainmem-paths-")
        .tempdir()
        .unwrap()
}

/// `mkfifo path`.
#[cfg(unix)]
fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

/// Runs `trainmem args` and expects a one-line usage error containing every needle.
fn refused(args: &[&str], needles: &[&str]) -> String {
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
    stderr
}

#[cfg(unix)]
#[test]
fn a_fifo_named_like_a_shard_in_a_model_folder_is_refused_without_blocking() {
    let dir = temp_dir();
    let fifo = dir.path().join("model.safetensors");
    mkfifo(&fifo);
    let folder = dir.path().to_str().unwrap();
    refused(
        &["params", folder],
        &["model.safetensors", "not a regular file (a fifo)"],
    );
    refused(
        &["estimate", "--model", folder],
        &["not a regular file (a fifo)"],
    );
}

#[cfg(unix)]
#[test]
fn a_fifo_named_as_a_shard_by_an_index_is_refused_without_blocking() {
    let dir = temp_dir();
    mkfifo(&dir.path().join("model-00001-of-00001.safetensors"));
    let index = dir.path().join("model.safetensors.index.json");
    std::fs::write(
        &index,
        r#"{"weight_map": {"w": "model-00001-of-00001.safetensors"}}"#,
    )
    .unwrap();
    refused(
        &["params", index.to_str().unwrap()],
        &[
            "model-00001-of-00001.safetensors",
            "not a regular file (a fifo)",
        ],
    );
    refused(
        &["params", dir.path().to_str().unwrap()],
        &["not a regular file (a fifo)"],
    );
}

#[cfg(unix)]
#[test]
fn a_fifo_config_or_model_path_says_it_is_not_a_regular_file() {
    let dir = temp_dir();
    let config = dir.path().join("config.json");
    mkfifo(&config);
    for args in [
        vec!["params", dir.path().to_str().unwrap()],
        vec!["params", config.to_str().unwrap()],
        vec!["estimate", "--model", config.to_str().unwrap()],
        vec![
            "fit",
            "--model",
            config.to_str().unwrap(),
            "--device",
            "h100-80gb",
        ],
    ] {
        let stderr = refused(&args, &["config.json", "not a regular file (a fifo)"]);
        assert!(!stderr.contains("no such file"), "{stderr}");
    }
    let bare = dir.path().join("model.safetensors");
    mkfifo(&bare);
    refused(
        &["params", bare.to_str().unwrap()],
        &["not a regular file (a fifo)"],
    );
}

#[cfg(unix)]
#[test]
fn a_shard_linked_outside_the_model_folder_is_refused_and_not_read() {
    let dir = temp_dir();
    let secret = dir.path().join("passwd");
    std::fs::write(&secret, "root:x:0:0:root:/root:/bin/bash\n").unwrap();
    let model = dir.path().join("model");
    std::fs::create_dir(&model).unwrap();
    std::os::unix::fs::symlink(&secret, model.join("model-00001-of-00001.safetensors")).unwrap();
    std::fs::write(
        model.join("model.safetensors.index.json"),
        r#"{"weight_map": {"w": "model-00001-of-00001.safetensors"}}"#,
    )
    .unwrap();
    let stderr = refused(
        &["params", model.to_str().unwrap()],
        &["outside the index's folder"],
    );
    assert!(!stderr.contains("3475222254926655346"), "{stderr}");
    assert!(!stderr.contains("root"), "{stderr}");
}

/// A hub id that is neither in the (here absent) hub cache nor a preset's
/// repository: nothing is downloaded, the message names the command that
/// fetches the config and the preset with that architecture. (The cache
/// itself is tested in `tests/hub_cache.rs`.)
#[test]
fn a_hub_id_says_nothing_is_downloaded_and_names_the_preset() {
    for (id, preset) in [
        ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
        ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b"),
    ] {
        let stderr = refused(
            &["estimate", "--model", id],
            &[
                &format!("`{id}`"),
                "does not download",
                &format!("`huggingface-cli download {id} config.json`"),
                &format!("`{preset}`"),
            ],
        );
        assert!(!stderr.contains("no such file"), "{stderr}");
        refused(&["params", id], &["does not download"]);
    }
    refused(
        &["params", "mistralai/Mistral-Nemo-Instruct-2407"],
        &["does not download", "huggingface-cli download"],
    );
    // Something that is clearly a path keeps the plain message.
    refused(
        &["params", "no/such/config.json"],
        &["no such file or folder"],
    );
}
