//! Issue 11, "Hardening": inputs that used to give a plausible wrong answer
//! or a message that did not say what was wrong, each run through the
//! binary. Error lines are snapshots; behaviour is asserted directly.

mod common;

use common::{int, json_of, run};

/// Runs a command that must be refused: exit 2, nothing on stdout, one
/// `error: ...` line on stderr, which is returned.
fn refused(args: &[&str]) -> String {
    let (code, stdout, stderr) = run(args);
    assert_eq!(code, 2, "{args:?}: {stderr}");
    assert!(stdout.is_empty(), "{args:?}: stdout was {stdout}");
    assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
    stderr
}

/// A config.json in a fresh folder, and the folder (kept alive by the caller).
fn config(json: &str) -> (tempfile::TempDir, String) {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("config.json");
    std::fs::write(&path, json).unwrap();
    let path = path.to_str().unwrap().to_string();
    (folder, path)
}

#[test]
fn refusals_say_what_is_wrong() {
    let cases: &[(&str, &[&str])] = &[
        ("decimal_comma_count", &["estimate", "--params", "1,5B"]),
        (
            "decimal_comma_size",
            &["estimate", "--params", "7B", "--capacity", "8,0GB"],
        ),
        ("leading_commas", &["estimate", "--params", ",,,7B"]),
        ("comma_before_suffix", &["estimate", "--params", "1,000B"]),
        (
            "bits",
            &["estimate", "--params", "7B", "--capacity", "80Gb"],
        ),
        (
            "gigabits",
            &["estimate", "--params", "7B", "--capacity", "80 Gbit"],
        ),
        (
            "too_many_exbibytes",
            &["estimate", "--params", "7B", "--capacity", "16EiB"],
        ),
        (
            "negative_gpus",
            &["estimate", "--params", "7B", "--gpus", "-1"],
        ),
        ("zero_tp", &["estimate", "--params", "7B", "--tp", "0"]),
        (
            "negative_micro_batch",
            &[
                "estimate",
                "--model",
                "gpt2",
                "--micro-batch",
                "-2",
                "--seq-len",
                "8",
            ],
        ),
        (
            "empty_freeze",
            &["estimate", "--model", "gpt2", "--freeze", ""],
        ),
        (
            "galore_rank_zero",
            &[
                "estimate",
                "--params",
                "7B",
                "--optimizer",
                "galore-adamw",
                "--optimizer-option",
                "rank=0",
            ],
        ),
        (
            "conflicting_option",
            &[
                "estimate",
                "--params",
                "7B",
                "--optimizer",
                "galore-adamw",
                "--optimizer-option",
                "rank=4",
                "--optimizer-option",
                "rank=8",
            ],
        ),
        (
            "tp_above_heads",
            &[
                "estimate",
                "--model",
                "llama-2-7b",
                "--gpus",
                "64",
                "--tp",
                "64",
            ],
        ),
        (
            "huge_tp",
            &[
                "estimate",
                "--model",
                "llama-2-7b",
                "--gpus",
                "4294967296",
                "--tp",
                "4294967296",
            ],
        ),
        (
            "tp_not_dividing_heads",
            &[
                "estimate",
                "--model",
                "llama-2-7b",
                "--gpus",
                "3",
                "--tp",
                "3",
            ],
        ),
        (
            "pp_above_layers",
            &[
                "estimate",
                "--model",
                "llama-2-7b",
                "--gpus",
                "33",
                "--pp",
                "33",
                "--nodes",
                "1",
            ],
        ),
        (
            "ep_not_dividing_experts",
            &[
                "estimate",
                "--model",
                "mixtral-8x7b",
                "--gpus",
                "3",
                "--ep",
                "3",
            ],
        ),
        (
            "ep_on_a_dense_model",
            &[
                "estimate",
                "--model",
                "llama-2-7b",
                "--gpus",
                "2",
                "--ep",
                "2",
            ],
        ),
        (
            "sequence_parallel_without_tp",
            &["estimate", "--params", "7B", "--sequence-parallel"],
        ),
        (
            "gpus_not_filling_nodes",
            &["estimate", "--params", "7B", "--gpus", "12"],
        ),
        (
            "nodes_contradict",
            &[
                "estimate",
                "--params",
                "7B",
                "--gpus",
                "16",
                "--nodes",
                "4",
                "--gpus-per-node",
                "8",
            ],
        ),
        (
            "control_characters",
            &["estimate", "--params", "7B", "--format", "x\n\u{1b}[31my"],
        ),
    ];
    for (name, args) in cases {
        insta::assert_snapshot!(format!("refused_{name}"), refused(args));
    }
}

#[test]
fn a_comma_only_groups_thousands() {
    let grouped = json_of(&["estimate", "--params", "6,738,415,616", "--format", "json"]);
    assert_eq!(int(&grouped["parameters"]["total"]), 6_738_415_616);
    assert!(refused(&["estimate", "--params", "1,5B"]).contains("for a decimal write `1.5B`"));
}

#[test]
fn exabytes_are_read_as_bytes() {
    let e = json_of(&[
        "estimate",
        "--params",
        "7B",
        "--capacity",
        "16EB",
        "--format",
        "json",
    ]);
    assert_eq!(int(&e["capacity"]["bytes"]), 16_000_000_000_000_000_000);
}

#[test]
fn a_repeated_name_in_a_set_counts_once() {
    let trainable = |args: &[&str]| {
        let mut all = vec![
            "estimate",
            "--model",
            "llama-2-7b",
            "--lora-rank",
            "8",
            "--format",
            "json",
        ];
        all.extend_from_slice(args);
        int(&json_of(&all)["parameters"]["trainable"])
    };
    assert_eq!(
        trainable(&["--lora-modules-to-save", "lm_head,lm_head"]),
        trainable(&["--lora-modules-to-save", "lm_head"])
    );
    assert_eq!(
        trainable(&["--lora-targets", "q_proj,v_proj,q_proj"]),
        trainable(&["--lora-targets", "q_proj,v_proj"])
    );
    let frozen = |patterns: &[&str]| {
        let mut all = vec!["estimate", "--model", "gpt2", "--format", "json"];
        for pattern in patterns {
            all.extend_from_slice(&["--freeze", pattern]);
        }
        int(&json_of(&all)["parameters"]["trainable"])
    };
    assert_eq!(frozen(&["wte", "wte"]), frozen(&["wte"]));
    let (_, twice, _) = run(&[
        "compare",
        "--optimizers",
        "adam,adam,sgd",
        "--format",
        "csv",
    ]);
    let (_, once, _) = run(&["compare", "--optimizers", "adam,sgd", "--format", "csv"]);
    assert_eq!(twice, once);
}

#[test]
fn identical_repeated_options_are_fine() {
    let e = json_of(&[
        "estimate",
        "--params",
        "7B",
        "--optimizer",
        "galore-adamw",
        "--optimizer-option",
        "rank=4",
        "--optimizer-option",
        "rank=4",
        "--format",
        "json",
    ]);
    assert_eq!(e["options"]["rank"], "4");
}

#[test]
fn tp_above_the_key_value_heads_is_priced_with_a_note() {
    // Llama 3.1 8B: 32 heads, 8 key/value heads.
    let e = json_of(&[
        "estimate",
        "--model",
        "llama-3.1-8b",
        "--gpus",
        "16",
        "--tp",
        "16",
        "--format",
        "json",
    ]);
    let notes = e["notes"].as_array().unwrap();
    assert!(
        notes.iter().any(|n| n
            .as_str()
            .unwrap()
            .starts_with("tp 16 exceeds the 8 key/value heads")),
        "{notes:?}"
    );
    let ok = json_of(&[
        "estimate",
        "--model",
        "llama-2-7b",
        "--gpus",
        "8",
        "--tp",
        "8",
        "--sequence-parallel",
        "--format",
        "json",
    ]);
    assert_eq!(int(&ok["parallelism"]["tensor"]), 8);
}

#[test]
fn impossible_key_value_heads_are_refused() {
    let (_folder, zero) =
        config(r#"{"model_type": "llama", "num_attention_heads": 32, "num_key_value_heads": 0}"#);
    insta::assert_snapshot!(
        "refused_zero_kv_heads",
        refused(&["params", &zero]).replace(&zero, "CONFIG")
    );
    let (_folder, odd) =
        config(r#"{"model_type": "llama", "num_attention_heads": 32, "num_key_value_heads": 5}"#);
    insta::assert_snapshot!(
        "refused_kv_heads_not_dividing",
        refused(&["estimate", "--model", &odd])
    );
    let (_folder, above) =
        config(r#"{"model_type": "llama", "num_attention_heads": 32, "num_key_value_heads": 64}"#);
    refused(&["estimate", "--model", &above]);
    refused(&[
        "estimate",
        "--params",
        "7B",
        "--layers",
        "2",
        "--hidden",
        "64",
        "--heads",
        "8",
        "--kv-heads",
        "3",
        "--ffn",
        "64",
        "--vocab",
        "10",
    ]);
}

#[test]
fn a_model_type_must_be_a_string() {
    let (_folder, path) = config(r#"{"model_type": 7}"#);
    insta::assert_snapshot!(
        "refused_model_type_number",
        refused(&["params", &path]).replace(&path, "CONFIG")
    );
    let (_folder, path) = config("{\"model_type\": \"llama\\u001b]0;title\\u0007\\n\"}");
    let line = refused(&["params", &path]);
    assert!(line.contains("llama\\u{1b}]0;title\\u{7}\\n"), "{line}");
}

#[test]
fn tensor_names_cannot_reach_the_terminal() {
    let name = "model.layers.0.q\u{1b}]0;pwned\u{7}\nproj.weight";
    let header = format!(
        r#"{{"{}":{{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}}}}"#,
        name.replace('\u{1b}', "\\u001b")
            .replace('\u{7}', "\\u0007")
            .replace('\n', "\\n")
    );
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("evil.safetensors");
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(&[0; 16]);
    std::fs::write(&path, bytes).unwrap();
    let path = path.to_str().unwrap();
    for format in ["table", "markdown", "csv"] {
        let (code, stdout, _) = run(&["params", path, "--tensors", "--format", format]);
        assert_eq!(code, 0);
        assert!(
            !stdout.contains('\u{1b}') && !stdout.contains('\u{7}'),
            "{format}: {stdout}"
        );
        assert!(
            stdout.contains("q\\u{1b}]0;pwned\\u{7}\\nproj.weight"),
            "{format}: {stdout}"
        );
    }
    // JSON keeps the name exactly, escaped as JSON escapes it.
    let (_, json, _) = run(&["params", path, "--tensors", "--format", "json"]);
    let listed: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(json.contains("\\u001b]0;pwned\\u0007\\nproj"), "{json}");
    assert!(listed.to_string().contains("pwned"));
}

#[test]
fn fit_says_when_it_reached_its_search_limit() {
    let args = [
        "fit",
        "--params",
        "1M",
        "--layers",
        "1",
        "--hidden",
        "64",
        "--heads",
        "1",
        "--ffn",
        "64",
        "--vocab",
        "10",
        "--seq-len",
        "1",
        "--capacity",
        "1PB",
    ];
    let (code, table, _) = run(&args);
    assert_eq!(code, 0);
    assert!(table.contains("at least 1048576 (search limit)"), "{table}");
    let mut json = args.to_vec();
    json.extend_from_slice(&["--format", "json"]);
    let fit = json_of(&json);
    assert_eq!(fit["at_search_limit"], true);
    assert_eq!(int(&fit["max_micro_batch"]), 1 << 20);
    assert_eq!(fit["recompute_modes"][0]["at_search_limit"], true);
    let exact = json_of(&[
        "fit",
        "--model",
        "gpt2",
        "--seq-len",
        "1024",
        "--capacity",
        "80GB",
        "--format",
        "json",
    ]);
    assert_eq!(exact["at_search_limit"], false);
}

#[test]
fn gpus_fill_nodes_of_eight_unless_told_otherwise() {
    let nodes = |args: &[&str]| {
        let mut all = vec!["estimate", "--params", "7B", "--format", "json"];
        all.extend_from_slice(args);
        int(&json_of(&all)["parallelism"]["nodes"])
    };
    assert_eq!(nodes(&["--gpus", "256"]), 32);
    assert_eq!(nodes(&["--gpus", "4"]), 1);
    assert_eq!(nodes(&["--gpus", "16", "--gpus-per-node", "4"]), 4);
    assert_eq!(nodes(&["--gpus", "16", "--nodes", "2"]), 2);
    assert_eq!(
        nodes(&["--gpus", "16", "--nodes", "2", "--gpus-per-node", "8"]),
        2
    );
    let (_, table, _) = run(&["estimate", "--params", "7B", "--gpus", "256"]);
    assert!(
        table.starts_with(
            "trainmem estimate: 7B parameters (--params), adam, fp32, 256 gpus on 32 nodes"
        ),
        "{table}"
    );
}

#[cfg(unix)]
#[test]
fn arguments_that_are_not_utf8_are_named_and_paths_may_be_any_bytes() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    let binary = assert_cmd::cargo::cargo_bin("trainmem");
    let output = std::process::Command::new(&binary)
        .args([
            OsStr::new("estimate"),
            OsStr::new("--params"),
            OsStr::new("7B"),
            OsStr::new("--optimizer"),
            OsStr::from_bytes(b"ad\xffam"),
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.starts_with("error: the argument `ad\u{fffd}am` is not valid UTF-8"),
        "{stderr}"
    );

    // A model folder whose name is not UTF-8 is read like any other.
    let parent = tempfile::tempdir().unwrap();
    let folder = parent.path().join(OsStr::from_bytes(b"gpt\xff2"));
    std::fs::create_dir(&folder).unwrap();
    std::fs::write(folder.join("config.json"), r#"{"model_type": "gpt2"}"#).unwrap();
    let output = std::process::Command::new(&binary)
        .arg("params")
        .arg(&folder)
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("124,439,808"));
    let missing = parent.path().join(OsStr::from_bytes(b"no\xffne.json"));
    let output = std::process::Command::new(&binary)
        .arg("params")
        .arg(&missing)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .contains("no\u{fffd}ne.json`: no such file or folder")
    );
}

#[cfg(unix)]
#[test]
fn a_closed_stdout_is_a_failure_a_closed_pipe_is_not() {
    let binary = assert_cmd::cargo::cargo_bin("trainmem");
    let output = std::process::Command::new("sh")
        .args(["-c", "exec \"$0\" estimate --params 7B >&-"])
        .arg(&binary)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(output.stderr).unwrap(),
        "error: cannot write the report: standard output is closed\n"
    );
    let output = std::process::Command::new("sh")
        .args(["-c", "exec \"$0\" estimate --params 7B >/dev/null"])
        .arg(&binary)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
}

#[cfg(unix)]
#[test]
fn model_names_cannot_reach_the_terminal() {
    let parent = tempfile::tempdir().unwrap();
    let folder = parent.path().join("gp\u{1b}[31mt\n2");
    std::fs::create_dir(&folder).unwrap();
    std::fs::write(folder.join("config.json"), r#"{"model_type": "gpt2"}"#).unwrap();
    let model = folder.to_str().unwrap();
    let chart = parent.path().join("chart.svg");
    let chart = chart.to_str().unwrap();
    let mut commands: Vec<Vec<&str>> = Vec::new();
    for format in ["table", "markdown", "csv"] {
        commands.push(vec!["estimate", "--model", model, "--format", format]);
        commands.push(vec!["compare", "--model", model, "--format", format]);
        commands.push(vec!["params", model, "--format", format]);
    }
    commands.push(vec![
        "fit",
        "--model",
        model,
        "--capacity",
        "80GB",
        "--seq-len",
        "512",
    ]);
    commands.push(vec!["plot", "--model", model, "--output", chart]);
    for args in commands {
        let (code, stdout, stderr) = run(&args);
        assert_eq!(code, 0, "{args:?}: {stderr}");
        assert!(!stdout.contains('\u{1b}'), "{args:?}: {stdout}");
        assert!(!stdout.contains("t\n2"), "{args:?}: {stdout}");
        // CSV carries figures only, no model name.
        if args.last() != Some(&"csv") {
            assert!(stdout.contains("gp\\u{1b}[31mt\\n2"), "{args:?}: {stdout}");
        }
    }
}
