//! Running the real binary from the integration tests.
//!
//! Each test file is its own crate and uses part of this module.
#![allow(dead_code)]

use assert_cmd::Command;
use serde_json::Value;

/// The variables that say where the Hugging Face hub cache is
/// (huggingface_hub's `constants.py`).
pub const HUB_CACHE_VARIABLES: [&str; 5] = [
    "HF_HUB_CACHE",
    "HUGGINGFACE_HUB_CACHE",
    "HF_HOME",
    "XDG_CACHE_HOME",
    "HOME",
];

/// A hub cache folder that does not exist, so that no test reads the hub
/// cache of the machine it runs on.
pub fn no_hub_cache() -> std::path::PathBuf {
    std::env::temp_dir().join("trainmem-tests-no-hub-cache")
}

/// Runs `trainmem args`: its exit code, stdout and stderr. The hub cache is
/// one that does not exist.
pub fn run(args: &[&str]) -> (i32, String, String) {
    run_with_env(args, &[("HF_HUB_CACHE", Some(no_hub_cache().as_os_str()))])
}

/// Runs `trainmem args` with environment variables set (`Some`) or removed
/// (`None`): its exit code, stdout and stderr.
pub fn run_with_env(
    args: &[&str],
    env: &[(&str, Option<&std::ffi::OsStr>)],
) -> (i32, String, String) {
    let mut command = Command::cargo_bin("trainmem").unwrap();
    command.args(args);
    // No test reaches the real hub: hub ids answer offline unless `env`
    // says otherwise (tests/hub_online.rs points HF_ENDPOINT at its own).
    command.env("HF_HUB_OFFLINE", "1");
    for (name, value) in env {
        match value {
            Some(value) => command.env(name, value),
            None => command.env_remove(name),
        };
    }
    let output = command.output().unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

/// The JSON `trainmem args` prints; the run must succeed.
pub fn json_of(args: &[&str]) -> Value {
    let (code, stdout, stderr) = run(args);
    assert_eq!(code, 0, "{args:?}: {stderr}");
    serde_json::from_str(&stdout).unwrap()
}

/// A JSON value that must be an unsigned integer.
pub fn int(value: &Value) -> u64 {
    value
        .as_u64()
        .unwrap_or_else(|| panic!("{value} is not an integer"))
}

/// Runs `trainmem args` but kills it past `deadline` and fails the test, so
/// a regression that hangs (a FIFO opened for reading) or runs away cannot
/// stall the suite: its exit code, stdout, stderr and wall time.
pub fn run_within(
    args: &[&str],
    deadline: std::time::Duration,
) -> (i32, String, String, std::time::Duration) {
    run_within_env(args, &[], deadline)
}

/// [`run_within`] with environment variables set; the hub cache is one that
/// does not exist unless `env` names another.
pub fn run_within_env(
    args: &[&str],
    env: &[(&str, &std::ffi::OsStr)],
    deadline: std::time::Duration,
) -> (i32, String, String, std::time::Duration) {
    use std::io::Read;
    use std::process::Stdio;
    let start = std::time::Instant::now();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_trainmem"))
        .args(args)
        .env("HF_HUB_CACHE", no_hub_cache())
        .env("HF_HUB_OFFLINE", "1")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Drained on threads, so a chatty child cannot fill a pipe and stall.
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            pipe.read_to_string(&mut text).unwrap();
            text
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("trainmem {args:?} ran past {deadline:?} and was killed");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let elapsed = start.elapsed();
    (
        status.code().unwrap_or(-1),
        stdout.join().unwrap(),
        stderr.join().unwrap(),
        elapsed,
    )
}

/// Whether `report` holds `needle` with any run of spaces and line breaks
/// read as one space: a note of a table report is wrapped to 100 columns
/// at spaces (`render::wrap`), so a phrase may be split over two lines.
pub fn contains_words(report: &str, needle: &str) -> bool {
    let words = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
    words(report).contains(&words(needle))
}
