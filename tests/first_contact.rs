//! Issue 11: trainmem tried as a new user would, through the real binary.

mod common;

use common::run;

/// A near-miss of a preset name suggests the preset of the same family and
/// size, nearest in version.
#[test]
fn a_near_miss_suggests_the_same_family_and_size() {
    let cases = [
        ("llama-3-8b", "llama-3.1-8b"),
        ("llama3-70b", "llama-3.1-70b"),
        ("qwen-7b", "qwen2.5-7b"),
        ("mistral7b", "mistral-7b"),
        ("Meta-Llama-3.1-8B-Instruct", "llama-3.1-8b"),
    ];
    for (wanted, expected) in cases {
        let (code, stdout, stderr) = run(&["estimate", "--model", wanted]);
        assert_eq!(code, 2, "{wanted}");
        assert!(stdout.is_empty());
        assert!(
            stderr.starts_with(&format!(
                "error: unknown model `{wanted}`; did you mean `{expected}`?"
            )),
            "{wanted}: {stderr}"
        );
    }
}

/// With no model, each command that needs one says how to give one: a
/// preset, a config.json, a folder or a safetensors file, and where the
/// presets are listed.
#[test]
fn without_a_model_the_message_names_model_and_the_list() {
    let cases: [(&str, &[&str]); 5] = [
        ("estimate", &["estimate"]),
        (
            "estimate_micro_batch",
            &["estimate", "--micro-batch", "1", "--seq-len", "4096"],
        ),
        (
            "fit_seq_len",
            &["fit", "--device", "h100", "--seq-len", "4096"],
        ),
        (
            "fit_micro_batch",
            &["fit", "--device", "h100", "--micro-batch", "1"],
        ),
        ("params", &["params"]),
    ];
    for (name, args) in cases {
        let (code, stdout, stderr) = run(args);
        assert_eq!(code, 2, "{name}");
        assert!(stdout.is_empty(), "{name}: {stdout}");
        assert_eq!(stderr.lines().count(), 1, "{name}: {stderr}");
        assert!(stderr.starts_with("error: missing model: "), "{stderr}");
        for needed in ["`trainmem models`", "config.json", "folder", ".safetensors"] {
            assert!(stderr.contains(needed), "{name}: {needed}: {stderr}");
        }
        if name != "params" {
            assert!(stderr.contains("--model MODEL"), "{name}: {stderr}");
        }
        insta::assert_snapshot!(format!("no_model_{name}"), stderr);
    }
}
