//! Running the real binary from the integration tests.
//!
//! Each test file is its own crate and uses part of this module.
#![allow(dead_code)]

use assert_cmd::Command;
use serde_json::Value;

/// Runs `trainmem args`: its exit code, stdout and stderr.
pub fn run(args: &[&str]) -> (i32, String, String) {
    let output = Command::cargo_bin("trainmem")
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
