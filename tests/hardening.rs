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
        (
            "unknown_autocast_ops",
            &["estimate", "--params", "7B", "--autocast-ops", "tpu"],
        ),
        ("comma_before_suffix", &["estimate", "--params", "1,000B"]),
        (
            "litgpt_version_without_litgpt",
            &["estimate", "--model", "gpt2", "--litgpt", "0.4.13"],
        ),
        (
            "litgpt_version_unreadable",
            &[
                "estimate",
                "--model",
                "gpt2",
                "--implementation",
                "litgpt",
                "--litgpt",
                "0.4.x",
            ],
        ),
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

// Issue 28, finding 1: `check` printed the contents of any file a config
// names as its DeepSpeed config. A companion is read only as DeepSpeed reads
// it, strict JSON, and nothing of its text is said back.

/// A config of each launcher that names `companion` as its DeepSpeed
/// config, with the file name it is written under.
fn naming(launcher: &str, companion: &str) -> (&'static str, String) {
    let quoted = serde_json::to_string(companion).unwrap();
    match launcher {
        "axolotl" => (
            "axolotl.yaml",
            format!(
                "base_model: gpt2\nmicro_batch_size: 1\nsequence_len: 128\ndeepspeed: {quoted}\n"
            ),
        ),
        "llama-factory" => (
            "llama-factory.yaml",
            format!(
                "model_name_or_path: gpt2\nstage: sft\nfinetuning_type: full\ncutoff_len: 128\nper_device_train_batch_size: 1\ndeepspeed: {quoted}\n"
            ),
        ),
        "accelerate" => (
            "accelerate.yaml",
            format!(
                "compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n  deepspeed_config_file: {quoted}\n"
            ),
        ),
        _ => (
            "args.json",
            format!(
                r#"{{"per_device_train_batch_size": 1, "max_seq_length": 128, "model_name_or_path": "gpt2", "deepspeed": {quoted}}}"#
            ),
        ),
    }
}

const LAUNCHERS: [&str; 4] = [
    "axolotl",
    "llama-factory",
    "accelerate",
    "training-arguments",
];

/// `check` of `config` in `format`, in process: everything it would print
/// on stdout and stderr together, and its exit status.
fn checked_in_process(config: &std::path::Path, format: &str) -> (u8, String) {
    let arguments: Vec<std::ffi::OsString> = [
        "check",
        config.to_str().unwrap(),
        "--device",
        "h100",
        "--model",
        "gpt2",
        "--seq-len",
        "128",
        "--micro-batch",
        "1",
        "--format",
        format,
    ]
    .iter()
    .map(Into::into)
    .collect();
    match trainmem::cli::run_args(&arguments) {
        Ok(checked) => (
            checked.exit,
            format!("{}\n{}", checked.report, checked.warnings.join("\n")),
        ),
        Err(message) => (2, message),
    }
}

#[test]
fn a_companion_that_is_not_deepspeed_json_is_refused_without_its_content() {
    let folder = tempfile::tempdir().unwrap();
    let secrets = folder.path().join("secrets");
    std::fs::create_dir(&secrets).unwrap();
    // A YAML file, as `~/.config/gh/hosts.yml` is: its lines used to be listed.
    std::fs::write(
        secrets.join("hosts.yml"),
        "github.com:\n  oauth_token: zqtokenvalue\n  user: zquser\n",
    )
    .unwrap();
    let configs = folder.path().join("configs");
    std::fs::create_dir(&configs).unwrap();
    for launcher in LAUNCHERS {
        for companion in [
            secrets.join("hosts.yml").to_str().unwrap().to_string(),
            "../secrets/hosts.yml".to_string(),
        ] {
            let (name, text) = naming(launcher, &companion);
            let config = configs.join(name);
            std::fs::write(&config, text).unwrap();
            let config = config.to_str().unwrap();
            for format in ["table", "json"] {
                let stderr = refused(&[
                    "check",
                    config,
                    "--device",
                    "h100",
                    "--model",
                    "gpt2",
                    "--seq-len",
                    "128",
                    "--micro-batch",
                    "1",
                    "--format",
                    format,
                ]);
                assert!(!stderr.contains("zq"), "{launcher}: {stderr}");
                assert!(
                    stderr.contains("hosts.yml"),
                    "the companion is named: {stderr}"
                );
                assert!(stderr.contains(name), "the config that names it: {stderr}");
                assert!(
                    stderr.contains("deepspeed"),
                    "the key that names it: {stderr}"
                );
                assert!(
                    stderr.contains("not valid JSON (line 1, column 1)")
                        && stderr.contains("accepted: a DeepSpeed config JSON"),
                    "{stderr}"
                );
            }
        }
    }
}

#[test]
fn a_companion_shows_what_it_set_and_counts_its_other_keys() {
    let folder = tempfile::tempdir().unwrap();
    // Valid JSON, not all of it DeepSpeed's: a known key, unknown ones, and
    // secret-looking values everywhere.
    std::fs::write(
        folder.path().join("ds.conf"),
        r#"{"zero_optimization": {"stage": 3, "zqkey": "zqvalue"},
            "bf16": {"enabled": "auto"}, "auths": {"registry": {"auth": "zqauth"}},
            "fp16": {"loss_scale": "zqscale"}, "token": "zqtoken"}"#,
    )
    .unwrap();
    for launcher in LAUNCHERS {
        let (name, text) = naming(launcher, "ds.conf");
        let config = folder.path().join(name);
        std::fs::write(&config, text).unwrap();
        for format in ["table", "json"] {
            let (code, out) = checked_in_process(&config, format);
            assert_eq!(code, 0, "{launcher} {format}: {out}");
            assert!(!out.contains("zq"), "{launcher} {format}: {out}");
            assert!(out.contains("--zero 3"), "what it set is shown: {out}");
            assert!(
                out.contains("3 keys not read"),
                "{launcher} {format}: {out}"
            );
        }
    }
    // A bad value of a key trainmem knows: refused without the value.
    std::fs::write(
        folder.path().join("ds.conf"),
        r#"{"zero_optimization": {"stage": "zqstage"}}"#,
    )
    .unwrap();
    let (name, text) = naming("axolotl", "ds.conf");
    let config = folder.path().join(name);
    std::fs::write(&config, text).unwrap();
    let stderr = refused(&["check", config.to_str().unwrap(), "--device", "h100"]);
    assert!(!stderr.contains("zq"), "{stderr}");
    assert!(
        stderr.contains("key `zero_optimization.stage`: unknown value; accepted: 0, 1, 2, 3"),
        "{stderr}"
    );
}

#[cfg(unix)]
#[test]
fn a_companion_that_is_a_fifo_or_a_device_is_refused_at_once() {
    let folder = tempfile::tempdir().unwrap();
    let fifo = folder.path().join("ds.json");
    let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    for (companion, what) in [("ds.json", "a fifo"), ("/dev/zero", "a device")] {
        let (name, text) = naming("axolotl", companion);
        let config = folder.path().join(name);
        std::fs::write(&config, text).unwrap();
        let (code, stdout, stderr, _) = common::run_within(
            &["check", config.to_str().unwrap(), "--device", "h100"],
            std::time::Duration::from_secs(20),
        );
        assert_eq!(code, 2, "{stderr}");
        assert!(stdout.is_empty());
        assert!(stderr.contains(what), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }
}

#[test]
fn a_duplicate_key_in_a_companion_is_refused_without_naming_it() {
    let folder = tempfile::tempdir().unwrap();
    std::fs::write(
        folder.path().join("ds.json"),
        r#"{"zqsecret": 1, "zqsecret": 2}"#,
    )
    .unwrap();
    let (name, text) = naming("axolotl", "ds.json");
    let config = folder.path().join(name);
    std::fs::write(&config, text).unwrap();
    let stderr = refused(&["check", config.to_str().unwrap(), "--device", "h100"]);
    assert!(!stderr.contains("zq"), "{stderr}");
    assert!(
        stderr.contains("a key is written twice (line 1, column"),
        "{stderr}"
    );
}

#[cfg(unix)]
#[test]
fn a_hub_cache_config_linked_outside_the_cache_is_refused() {
    let cache = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(
        outside.path().join("config.json"),
        r#"{"model_type": "zqsecretvalue", "hidden_size": 64}"#,
    )
    .unwrap();
    let repository = cache.path().join("models--acme--leak");
    let snapshot = repository.join("snapshots").join("0123abcd");
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::create_dir_all(repository.join("refs")).unwrap();
    std::fs::write(repository.join("refs/main"), "0123abcd").unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("config.json"),
        snapshot.join("config.json"),
    )
    .unwrap();
    let (code, stdout, stderr) = common::run_with_env(
        &["estimate", "--model", "acme/leak"],
        &[("HF_HUB_CACHE", Some(cache.path().as_os_str()))],
    );
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(!stderr.contains("zq"), "{stderr}");
    assert!(
        stderr.contains("outside the cache's repository folder"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

mod companions_never_leak {
    use super::{LAUNCHERS, checked_in_process, naming};
    use proptest::prelude::*;

    /// What a companion holds, each with `marker` planted in it.
    fn contents() -> impl Strategy<Value = (String, Vec<u8>)> {
        let marker = "zq[a-z0-9]{10}";
        prop_oneof![
            // Random bytes around the marker.
            (marker, prop::collection::vec(any::<u8>(), 0..200), any::<prop::sample::Index>())
                .prop_map(|(marker, mut bytes, at)| {
                    let at = at.index(bytes.len() + 1);
                    bytes.splice(at..at, marker.bytes());
                    (marker, bytes)
                }),
            // YAML, as a token file is.
            (marker, "[a-z_]{1,10}", "[a-z_]{1,10}").prop_map(|(marker, a, b)| {
                let text = format!("{a}: {marker}\n{b}:\n  - {marker}\n  {marker}: 1\n");
                (marker, text.into_bytes())
            }),
            // JSON that is not DeepSpeed's, with secret-looking strings.
            (marker, "[a-z_]{1,10}").prop_map(|(marker, key)| {
                let text = format!(
                    r#"{{"{key}": "{marker}", "auths": {{"{marker}": {{"auth": "{marker}"}}}}, "list": ["{marker}"]}}"#
                );
                (marker, text.into_bytes())
            }),
            // DeepSpeed's keys, with the marker as their values and as keys of
            // their sections.
            (marker, 0usize..6).prop_map(|(marker, which)| {
                let keys = [
                    "\"zero_optimization\": {\"stage\": \"M\"}",
                    "\"zero_optimization\": {\"stage\": 2, \"M\": \"M\"}",
                    "\"bf16\": {\"enabled\": \"M\"}",
                    "\"optimizer\": {\"type\": \"M\", \"params\": {\"M\": 1}}",
                    "\"train_micro_batch_size_per_gpu\": \"M\"",
                    "\"fp16\": {\"enabled\": false, \"M\": [\"M\"]}",
                ];
                let text = format!("{{{}}}", keys[which].replace('M', &marker));
                (marker, text.into_bytes())
            }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Acceptance of issue 28: whatever a companion holds, no byte of its
        /// marker reaches stdout or stderr, in table or JSON.
        #[test]
        fn no_byte_of_a_companion_is_said(
            (marker, bytes) in contents(),
            launcher in prop::sample::select(LAUNCHERS.to_vec()),
            relative in any::<bool>(),
        ) {
            let folder = tempfile::tempdir().unwrap();
            let companion = folder.path().join("companion.conf");
            std::fs::write(&companion, &bytes).unwrap();
            let named = if relative {
                "companion.conf".to_string()
            } else {
                companion.to_str().unwrap().to_string()
            };
            let (name, text) = naming(launcher, &named);
            let config = folder.path().join(name);
            std::fs::write(&config, text).unwrap();
            for format in ["table", "json"] {
                let (_, out) = checked_in_process(&config, format);
                prop_assert!(!out.contains(&marker), "{launcher} {format}: {out}");
            }
        }
    }
}

// Issue 28, finding 2: `check` was quadratic in the keys (49,000 keys: 75 s).
// The work is bounded by a count in `launch::tests::
// keys_are_ordered_with_work_linear_in_the_text`; here the same file of
// 49,000 unknown keys is checked whole and its keys come in the file's order.
#[test]
fn forty_nine_thousand_keys_are_checked_in_the_files_order() {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("axolotl.yaml");
    let mut text = String::from("base_model: gpt2\nmicro_batch_size: 1\nsequence_len: 128\n");
    for i in 0..49_000 {
        text += &format!("k{i}: 1\n");
    }
    std::fs::write(&path, text).unwrap();
    let json = json_of(&[
        "check",
        path.to_str().unwrap(),
        "--device",
        "h100",
        "--format",
        "json",
    ]);
    let keys: Vec<&str> = json["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys.len(), 49_004, "with the default optimizer");
    assert_eq!(keys[3..6], ["k0", "k1", "k2"]);
    assert_eq!(keys[13], "k10");
}

// Issue 28, finding 7: huge values were echoed whole in one-line errors and
// table rows.
#[test]
fn huge_values_are_cut_in_errors_and_reports() {
    let folder = tempfile::tempdir().unwrap();
    let digits = "1".repeat(1_000_000);
    let huge = "x".repeat(600_000);
    let cases = [
        format!("base_model: gpt2\nsequence_len: 128\nmicro_batch_size: {digits}\n"),
        format!("base_model: {huge}\nsequence_len: 128\nmicro_batch_size: 1\n"),
        format!("base_model: gpt2\nsequence_len: 128\nmicro_batch_size: \"{huge}\"\n"),
        format!(
            "base_model: gpt2\nsequence_len: 128\nmicro_batch_size: 1\nadapter: lora\nlora_target_modules: [\"{huge}\"]\n"
        ),
    ];
    for (i, text) in cases.iter().enumerate() {
        let path = folder.path().join(format!("huge{i}.yaml"));
        std::fs::write(&path, text).unwrap();
        let stderr = refused(&["check", path.to_str().unwrap(), "--device", "h100"]);
        assert!(stderr.len() < 2_000, "case {i}: {} bytes", stderr.len());
    }
    // Accepted, with a huge unknown key and value: every line bounded.
    let path = folder.path().join("accepted.json");
    std::fs::write(
        &path,
        format!(
            r#"{{"model_name_or_path": "gpt2", "max_seq_length": 128, "per_device_train_batch_size": 1, "{}": 1, "output_dir": "{huge}"}}"#,
            "k".repeat(300_000)
        ),
    )
    .unwrap();
    for format in ["table", "json"] {
        let (code, stdout, stderr) = run(&[
            "check",
            path.to_str().unwrap(),
            "--device",
            "h100",
            "--format",
            format,
        ]);
        assert_eq!(code, 0, "{stderr}");
        let longest = stdout.lines().map(str::len).max().unwrap_or(0);
        assert!(longest < 1_000, "{format}: a line of {longest} bytes");
    }
}

/// Writes `text` as `folder/name` and runs `check` on it for an H100 with
/// `more` flags: the one-line refusal it must give.
fn check_refused(folder: &std::path::Path, name: &str, text: &str, more: &[&str]) -> String {
    let path = folder.join(name);
    std::fs::write(&path, text).unwrap();
    let args: Vec<&str> = ["check", path.to_str().unwrap(), "--device", "h100"]
        .into_iter()
        .chain(more.iter().copied())
        .collect();
    refused(&args)
}

// Issue 28, finding 8: errors named the wrong key, leaked the YAML library's
// options, and JSON accepted a key given twice.
#[test]
fn errors_name_the_key_at_fault() {
    let folder = tempfile::tempdir().unwrap();
    let cases = [
        (
            "axolotl.yaml",
            "base_model: gpt2\nadapter: lora\nlora_r: 0\nmicro_batch_size: 1\nsequence_len: 128\n",
            "key `lora_r` = `0`: expected a whole number",
        ),
        (
            "torchtune.yaml",
            "model:\n  _component_: torchtune.models.llama3_1.lora_llama3_1_8b\n  lora_rank: 1e9\n  lora_attn_modules: [q_proj]\nbatch_size: 1\n",
            "key `model.lora_rank` = `1000000000.0`: expected a whole number",
        ),
        (
            "twice.yaml",
            "base_model: gpt2\nmicro_batch_size: 1\nmicro_batch_size: 2\nsequence_len: 128\n",
            "key `micro_batch_size` is written twice",
        ),
        (
            "twice.json",
            r#"{"per_device_train_batch_size": 1, "model_name_or_path": "gpt2", "per_device_train_batch_size": 8}"#,
            "key `per_device_train_batch_size` is written twice",
        ),
        (
            "nested.yaml",
            "base_model: gpt2\nmicro_batch_size: 1\nsequence_len: 128\nfsdp_config:\n  fsdp_version: 2\n  fsdp_version: 1\n",
            "key `fsdp_config.fsdp_version` is written twice",
        ),
    ];
    for (name, text, wanted) in cases {
        let stderr = check_refused(folder.path(), name, text, &["--seq-len", "128"]);
        assert!(stderr.contains(wanted), "{name}: {stderr}");
        assert!(!stderr.contains("DuplicateKeyPolicy"), "{name}: {stderr}");
        assert!(
            !stderr.contains("`adapter`") && !stderr.contains("_component_"),
            "{stderr}"
        );
    }
}

// Issue 28, finding 11 (launch configs): an empty list of LoRA targets and a
// billion processes on one machine were accepted.
#[test]
fn absurd_launch_values_are_refused() {
    let folder = tempfile::tempdir().unwrap();
    let cases = [
        (
            "axolotl.yaml",
            "base_model: gpt2\nadapter: lora\nlora_target_modules: []\nmicro_batch_size: 1\nsequence_len: 128\n",
            "key `lora_target_modules` = `[]`: an empty list puts LoRA adapters on no module",
        ),
        (
            "args.json",
            r#"{"per_device_train_batch_size": 1, "model_name_or_path": "gpt2", "use_peft": true, "lora_target_modules": []}"#,
            "key `lora_target_modules` = `[]`: an empty list puts LoRA adapters on no module",
        ),
        (
            "accelerate.yaml",
            "distributed_type: MULTI_GPU\nnum_processes: 1000000000\n",
            "key `num_processes` = `1000000000`: 1000000000 processes on each of 1 machine(s); accepted: at most 1024 per machine",
        ),
    ];
    for (name, text, wanted) in cases {
        let stderr = check_refused(
            folder.path(),
            name,
            text,
            &["--model", "gpt2", "--seq-len", "128", "--micro-batch", "1"],
        );
        assert!(stderr.contains(wanted), "{name}: {stderr}");
    }
    // 1,024 processes on each of 2 machines is a real, if large, run.
    let path = folder.path().join("large.yaml");
    std::fs::write(
        &path,
        "distributed_type: MULTI_GPU\nnum_machines: 2\nnum_processes: 2048\n",
    )
    .unwrap();
    let (code, _, stderr) = run(&[
        "check",
        path.to_str().unwrap(),
        "--device",
        "h100",
        "--model",
        "gpt2",
        "--seq-len",
        "128",
        "--micro-batch",
        "1",
    ]);
    assert!(code == 0 || code == 1, "{stderr}");
}

// Issue 28, finding 3: `plan` on deep models is bounded by counted work.

/// A Llama config.json of `layers` small layers, in a fresh folder.
fn deep_llama(layers: u64) -> (tempfile::TempDir, String) {
    config(&format!(
        r#"{{"model_type": "llama", "hidden_size": 512, "intermediate_size": 1376,
            "num_attention_heads": 8, "num_key_value_heads": 8,
            "num_hidden_layers": {layers}, "vocab_size": 32000}}"#
    ))
}

#[test]
fn a_deep_plan_is_refused_before_it_prices_anything() {
    let (_folder, model) = deep_llama(1024);
    let args = [
        "plan",
        "--model",
        &model,
        "--gpus",
        "1024",
        "--device",
        "h100-80gb",
        "--seq-len",
        "4096",
        "--allow",
        "all",
        "--jobs",
        "1",
    ];
    // The old search priced for minutes: killed past the deadline, it fails.
    let (code, stdout, stderr, _) = common::run_within(&args, std::time::Duration::from_secs(120));
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("1,024 layers"), "{stderr}");
    assert!(stderr.contains("budget"), "{stderr}");
    assert!(
        stderr.contains("--pp") && stderr.contains("--allow"),
        "{stderr}"
    );
}

#[test]
fn a_plan_counts_its_work_within_the_budget() {
    let (_folder, model) = deep_llama(256);
    let plan = json_of(&[
        "plan",
        "--model",
        &model,
        "--gpus",
        "16",
        "--device",
        "h100-80gb",
        "--seq-len",
        "1024",
        "--allow",
        "zero,pp",
        "--micro-batch",
        "1",
        "--format",
        "json",
    ]);
    let work = int(&plan["layer_pricings"]);
    let priced = int(&plan["priced"]);
    assert!(priced > 0, "{plan}");
    // Every priced layout replays the model's 256 layers, and so does every
    // structure's states: counted, not timed.
    assert!(work >= priced * 256, "{work} for {priced} layouts");
    assert!(work <= trainmem::plan::WORK_BUDGET, "{work}");
}

// Issue 28, finding 4: pipeline activations follow the micro-batches in flight.

#[test]
fn pipeline_activations_grow_with_the_micro_batches_in_flight() {
    let activations = |accumulation: &str| {
        int(&json_of(&[
            "estimate",
            "--model",
            "llama-3.1-8b",
            "--micro-batch",
            "1",
            "--seq-len",
            "4096",
            "--pp",
            "32",
            "--gpus",
            "32",
            "--grad-accumulation",
            accumulation,
            "--format",
            "json",
        ])["memory"]["activations"])
    };
    let [one, four, thirty_two, sixty_four] = ["1", "4", "32", "64"].map(activations);
    assert!(one < four && four < thirty_two, "{one} {four} {thirty_two}");
    // The first stage holds min(pp, m) = 32 micro-batches from m = 32 on.
    assert_eq!(thirty_two, sixty_four);
}

// Issue 28, finding 5: virtual stages must fill the layers.

#[test]
fn virtual_stages_must_divide_the_layers_by_stage() {
    let error = refused(&[
        "estimate",
        "--model",
        "llama-3.1-8b",
        "--pp",
        "32",
        "--gpus",
        "32",
        "--virtual-stages",
        "1000000",
        "--micro-batch",
        "1",
        "--seq-len",
        "4096",
    ]);
    assert!(
        error.contains("--pp 32") && error.contains("--virtual-stages 1000000"),
        "{error}"
    );
    assert!(error.contains("32 layers"), "{error}");
    // A plan keeps only layouts whose pp x v divides the 32 layers.
    let plan = json_of(&[
        "plan",
        "--model",
        "llama-3.1-8b",
        "--gpus",
        "32",
        "--device",
        "h100-80gb",
        "--seq-len",
        "1024",
        "--allow",
        "zero,pp",
        "--micro-batch",
        "1",
        "--virtual-stages",
        "4",
        "--format",
        "json",
    ]);
    let layouts = plan["layouts"].as_array().unwrap();
    assert!(!layouts.is_empty(), "{plan}");
    for layout in layouts {
        let pp = int(&layout["layout"]["pp"]);
        assert_eq!(32 % (pp * 4), 0, "{}", layout["command"]);
    }
}

// Issue 28, finding 6: `fit` without a model searches past the capacity
// in parameters when sharding puts less than a byte per parameter on a GPU.

#[test]
fn fit_with_zero_3_finds_the_sharded_boundary() {
    let answer = |gpus: &str| {
        int(&json_of(&[
            "fit",
            "--optimizer",
            "adam",
            "--precision",
            "fp32",
            "--capacity",
            "80GB",
            "--gpus",
            gpus,
            "--zero",
            "3",
            "--format",
            "json",
        ])["max_parameters"])
    };
    // 16 bytes per parameter over g GPUs: 80 GB x g / 16.
    assert_eq!(answer("8"), 40_000_000_000);
    assert_eq!(answer("64"), 320_000_000_000);
    assert_eq!(answer("1000"), 5_000_000_000_000);
}

mod fit_boundary {
    use proptest::prelude::*;
    use trainmem::estimate::MAX_PARAMETERS;
    use trainmem::optimizer::OPTIMIZERS;
    use trainmem::parallel::{Framework, Parallelism, ZeroStage};
    use trainmem::{Bytes, Count, Model, Precision, Setup, estimate, max_parameters};

    const PRECISIONS: [&str; 4] = ["fp32", "mixed-bf16", "bf16", "mixed-fp16"];
    const STAGES: [ZeroStage; 4] = [
        ZeroStage::None,
        ZeroStage::OptimizerStates,
        ZeroStage::Gradients,
        ZeroStage::Weights,
    ];

    /// The model states of `parameters`; an overflow (as `fit` reads it)
    /// does not fit anything.
    fn total(parameters: u64, setup: &Setup) -> u64 {
        match estimate(&Model::flat(Count(parameters)), setup) {
            Ok(e) => e.memory.total.0,
            Err(trainmem::Error::Overflow { .. }) => u64::MAX,
            Err(other) => panic!("{other}"),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn fit_answers_the_last_count_that_fits(
            gpus in 1u64..200_000,
            stage in 0usize..4,
            fsdp in any::<bool>(),
            optimizer in 0usize..OPTIMIZERS.len(),
            precision in 0usize..PRECISIONS.len(),
            capacity in 1_000_000u64..200_000_000_000_000,
        ) {
            let optimizer = &OPTIMIZERS[optimizer];
            // Bisection is exact for the elementwise rules (see tests/properties.rs).
            prop_assume!(optimizer.flat_assumption.is_none());
            let framework = if fsdp { Framework::Fsdp2 } else { Framework::DeepSpeed };
            let zero = STAGES[stage];
            prop_assume!(!(fsdp && zero == ZeroStage::OptimizerStates));
            let Ok(parallelism) = (Parallelism { gpus, zero, framework, ..Parallelism::SINGLE }).validated() else {
                return Ok(());
            };
            let precision = framework.adjust(*Precision::find(PRECISIONS[precision]).unwrap());
            let mut setup = Setup::new(optimizer, precision);
            setup.parallelism = parallelism;
            let Ok(max) = max_parameters(&setup, Bytes(capacity)) else {
                return Ok(());
            };
            if max.0 > 0 {
                prop_assert!(total(max.0, &setup) <= capacity, "{} does not fit", max.0);
            }
            if max.0 < MAX_PARAMETERS {
                prop_assert!(total(max.0 + 1, &setup) > capacity, "{} fits too", max.0 + 1);
            }
        }
    }
}

// Issue 28, finding 11 (engine): absurd values refused or noted.

#[test]
fn more_experts_per_token_than_experts_is_refused() {
    let preset = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("presets/deepseek-v3.json"),
    )
    .unwrap();
    let mut config: serde_json::Value = serde_json::from_str(&preset).unwrap();
    config["num_experts_per_tok"] = serde_json::json!(300);
    let (_folder, path) = self::config(&config.to_string());
    let error = refused(&["estimate", "--model", &path]);
    assert!(error.contains("num_experts_per_tok"), "{error}");
    assert!(error.contains("`300`") && error.contains("256"), "{error}");
}

#[test]
fn sequence_parallelism_needs_a_sequence_tp_divides() {
    let args = |seq: &'static str| {
        [
            "estimate",
            "--model",
            "llama-3.1-8b",
            "--tp",
            "8",
            "--gpus",
            "8",
            "--sequence-parallel",
            "--micro-batch",
            "1",
            "--seq-len",
            seq,
        ]
    };
    let error = refused(&args("4095"));
    assert!(
        error.contains("--seq-len 4095") && error.contains("--tp 8"),
        "{error}"
    );
    assert!(error.contains("4096"), "{error}");
    assert_eq!(run(&args("4096")).0, 0);
}

#[test]
fn a_lora_rank_above_a_layer_width_is_noted() {
    let notes = |rank: &str| {
        json_of(&[
            "estimate",
            "--model",
            "llama-3.1-8b",
            "--lora-rank",
            rank,
            "--format",
            "json",
        ])["notes"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|n| n.as_str().map(str::to_string))
            .filter(|n| n.contains("exceeds the smaller dimension"))
            .collect::<Vec<_>>()
    };
    let over = notes("5000");
    assert_eq!(over.len(), 1, "{over:?}");
    assert!(
        over[0].contains("5000") && over[0].contains("4096"),
        "{over:?}"
    );
    assert!(notes("16").is_empty());
}

#[test]
fn a_decimal_comma_in_a_count_list_is_refused_as_in_one_count() {
    let listed = refused(&["compare", "--params", "1,5B"]);
    let single = refused(&["estimate", "--params", "1,5B"]);
    assert_eq!(listed, single);
    assert!(listed.contains("`1.5B`"), "{listed}");
    assert_eq!(run(&["compare", "--params", "1B,5B"]).0, 0);
    assert_eq!(run(&["compare", "--params", "1000,2000"]).0, 0);
}

// Issue 25: the new readers (torchtitan's TOML, litgpt's YAML) and the
// companion search are held to the bounds of the old ones.

#[test]
fn a_toml_job_config_is_bounded_like_yaml_and_json() {
    let folder = tempfile::tempdir().unwrap();
    let head = "[training]\nlocal_batch_size = 1\nseq_len = 128\n[model]\nname = \"llama3\"\nflavor = \"8B\"\n";
    // More bytes than a launch config may have.
    let huge = format!("{head}[job]\ndescription = \"{}\"\n", "x".repeat(1 << 21));
    let stderr = check_refused(folder.path(), "huge.toml", &huge, &[]);
    assert!(stderr.contains("more than the 1048576"), "{stderr}");
    // Deeper than MAX_DEPTH, and deeper than the parser's own guard.
    for levels in [40, 5_000] {
        let deep = format!(
            "{head}[job]\nx = {}1{}\n",
            "[".repeat(levels),
            "]".repeat(levels)
        );
        let stderr = check_refused(folder.path(), "deep.toml", &deep, &[]);
        assert!(
            stderr.contains("deeper than") || stderr.contains("invalid TOML"),
            "{levels}: {stderr}"
        );
        assert!(stderr.len() < 600, "{levels}: {stderr}");
    }
    // A key given twice, and a table given twice, said by line.
    let twice = format!("{head}[training]\nseq_len = 256\n");
    let stderr = check_refused(folder.path(), "twice.toml", &twice, &[]);
    assert!(stderr.contains("invalid TOML"), "{stderr}");
    assert!(stderr.contains("(line 7, column"), "{stderr}");
    let key_twice = format!("{head}[job]\na = 1\na = 2\n");
    let stderr = check_refused(folder.path(), "key.toml", &key_twice, &[]);
    assert!(stderr.contains("(line 9, column"), "{stderr}");
    // Many values within the bytes: refused or read, never slow to refuse.
    let many = format!("{head}[job]\nx = [{}]\n", "1,".repeat(200_000));
    let (code, _, stderr) = run(&[
        "check",
        &{
            let path = folder.path().join("many.toml");
            std::fs::write(&path, many).unwrap();
            path.to_str().unwrap().to_string()
        },
        "--device",
        "h100",
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("more than 100000 values"), "{stderr}");
}

#[cfg(unix)]
#[test]
fn a_toml_fifo_is_refused_at_once_and_a_linked_toml_is_read_as_its_target() {
    let folder = tempfile::tempdir().unwrap();
    let fifo = folder.path().join("job.toml");
    let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    let (code, stdout, stderr, _) = common::run_within(
        &["check", fifo.to_str().unwrap(), "--device", "h100"],
        std::time::Duration::from_secs(20),
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(stdout.is_empty());
    assert!(stderr.contains("a fifo"), "{stderr}");
    // A link to a file that is not TOML: refused by line and column, its
    // text not repeated beyond the cut every echoed value gets.
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("secret");
    std::fs::write(&target, format!("zq{}\n", "s".repeat(5_000))).unwrap();
    let link = folder.path().join("linked.toml");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let stderr = refused(&["check", link.to_str().unwrap(), "--device", "h100"]);
    assert!(stderr.contains("invalid TOML"), "{stderr}");
    assert!(stderr.len() < 600, "{stderr}");
}

#[test]
fn the_search_for_a_companion_stops_after_a_bounded_number_of_folders() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(
        root.path().join("ds.json"),
        r#"{"zero_optimization": {"stage": 2}}"#,
    )
    .unwrap();
    let (name, text) = naming("axolotl", "ds.json");
    // Found from a few folders down.
    let near = root.path().join("a/b/c");
    std::fs::create_dir_all(&near).unwrap();
    std::fs::write(near.join(name), &text).unwrap();
    let (code, stdout, stderr) = run(&[
        "check",
        near.join(name).to_str().unwrap(),
        "--device",
        "h100",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("from 3 folders above the config"),
        "{stdout}"
    );
    // Not from further than trainmem::launch::MAX_PARENT_FOLDERS.
    let mut far = root.path().to_path_buf();
    for level in 0..=trainmem::launch::MAX_PARENT_FOLDERS {
        far = far.join(format!("d{level}"));
    }
    std::fs::create_dir_all(&far).unwrap();
    std::fs::write(far.join(name), &text).unwrap();
    let stderr = refused(&[
        "check",
        far.join(name).to_str().unwrap(),
        "--device",
        "h100",
    ]);
    assert!(
        stderr.contains("no such file in the current folder"),
        "{stderr}"
    );
}

/// `all-linear` inside a list is a module name peft matches nowhere: the
/// list would lose every linear, so it is refused with what to write.
#[test]
fn all_linear_stands_alone_in_lora_targets() {
    assert!(
        refused(&[
            "estimate",
            "--model",
            "llama-2-7b",
            "--lora-rank",
            "8",
            "--lora-targets",
            "all-linear,lm_head",
        ])
        .contains("`all-linear` stands alone")
    );
}
