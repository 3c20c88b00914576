//! The real binary: reports as snapshots, exit codes, and every error message.

mod common;

use common::run;

fn ok(args: &[&str]) -> String {
    let (code, stdout, stderr) = run(args);
    assert_eq!(code, 0, "{args:?}: {stderr}");
    assert!(stderr.is_empty(), "{args:?} wrote to stderr: {stderr}");
    stdout
}

#[test]
fn no_arguments_print_the_textbook_report() {
    let report = ok(&[]);
    assert_eq!(report, ok(&["compare"]));
    insta::assert_snapshot!("textbook_report", report);
}

#[test]
fn textbook_report_in_other_formats() {
    insta::assert_snapshot!(
        "textbook_markdown",
        ok(&["compare", "--format", "markdown"])
    );
    insta::assert_snapshot!("textbook_csv", ok(&["compare", "--format", "csv"]));
}

#[test]
fn flags_change_the_comparison() {
    insta::assert_snapshot!(
        "compare_mixed_h200",
        ok(&[
            "compare",
            "--params",
            "1B,13B,70B",
            "--optimizers",
            "all",
            "--precision",
            "mixed-bf16",
            "--device",
            "h200"
        ])
    );
    insta::assert_snapshot!(
        "compare_binary_units",
        ok(&["compare", "--capacity", "80GiB"])
    );
}

#[test]
fn estimate_reports() {
    insta::assert_snapshot!(
        "estimate_table",
        ok(&["estimate", "--params", "7B", "--capacity", "80GB"])
    );
    insta::assert_snapshot!(
        "estimate_mixed_markdown",
        ok(&[
            "estimate",
            "--params",
            "6738415616",
            "--optimizer",
            "adamw",
            "--precision",
            "mixed-bf16",
            "--device",
            "h100-80gb",
            "--format",
            "markdown"
        ])
    );
    insta::assert_snapshot!(
        "estimate_csv",
        ok(&[
            "estimate",
            "--params",
            "1.5B",
            "--optimizer",
            "sgd",
            "--format",
            "csv"
        ])
    );
    insta::assert_snapshot!(
        "estimate_json",
        ok(&[
            "estimate",
            "--params",
            "124M",
            "--capacity",
            "24GiB",
            "--format",
            "json"
        ])
    );
}

#[test]
fn estimate_json_has_the_contract_fields() {
    let json: serde_json::Value = serde_json::from_str(&ok(&[
        "estimate",
        "--params",
        "7B",
        "--device",
        "a100-80gb",
        "--format",
        "json",
    ]))
    .unwrap();
    for field in ["total", "trainable"] {
        assert!(json["parameters"][field].is_u64(), "parameters.{field}");
    }
    for field in [
        "weights",
        "master_weights",
        "gradients",
        "optimizer_states",
        "activations",
        "total",
    ] {
        assert!(json["memory"][field].is_u64(), "memory.{field}");
    }
    assert_eq!(json["fits"], serde_json::Value::Bool(false));
    let without: serde_json::Value =
        serde_json::from_str(&ok(&["estimate", "--params", "7B", "--format", "json"])).unwrap();
    assert!(without["fits"].is_null());
}

#[test]
fn fit_and_catalogues() {
    insta::assert_snapshot!(
        "fit_table",
        ok(&[
            "fit",
            "--optimizer",
            "adam",
            "--precision",
            "fp32",
            "--capacity",
            "80GB"
        ])
    );
    insta::assert_snapshot!(
        "fit_h100_mixed",
        ok(&["fit", "--precision", "mixed-bf16", "--device", "h100"])
    );
    insta::assert_snapshot!("optimizers", ok(&["optimizers"]));
    insta::assert_snapshot!("precisions", ok(&["precisions"]));
    insta::assert_snapshot!("devices_markdown", ok(&["devices", "--format", "markdown"]));
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["fit", "--capacity", "80GB", "--format", "json"])).unwrap();
    assert_eq!(json["max_parameters"], 5_000_000_000u64);
}

#[test]
fn help_teaches() {
    insta::assert_snapshot!("help", ok(&["--help"]));
    insta::assert_snapshot!("estimate_help", ok(&["estimate", "--help"]));
}

/// Bad input: one line on stderr naming the value, nothing on stdout, exit 2.
#[test]
fn every_error_is_one_line_and_exit_two() {
    let cases: &[(&str, &[&str])] = &[
        (
            "unknown_optimizer",
            &["estimate", "--params", "7B", "--optimizer", "adamm"],
        ),
        (
            "unknown_precision",
            &["estimate", "--params", "7B", "--precision", "fp8"],
        ),
        (
            "unknown_device",
            &["estimate", "--params", "7B", "--device", "h1000"],
        ),
        (
            "unknown_format",
            &["estimate", "--params", "7B", "--format", "xml"],
        ),
        (
            "unknown_units",
            &["estimate", "--params", "7B", "--units", "mb"],
        ),
        ("negative_params", &["estimate", "--params", "-7B"]),
        ("zero_params", &["estimate", "--params", "0"]),
        ("malformed_params", &["estimate", "--params", "7X"]),
        (
            "fractional_params",
            &["estimate", "--params", "1.2345678901B"],
        ),
        ("huge_params", &["estimate", "--params", "1e30"]),
        ("overflowing_memory", &["estimate", "--params", "18e18"]),
        (
            "size_without_unit",
            &["estimate", "--params", "7B", "--capacity", "80"],
        ),
        (
            "negative_size",
            &["estimate", "--params", "7B", "--capacity", "-80GB"],
        ),
        (
            "unknown_size_unit",
            &["estimate", "--params", "7B", "--capacity", "80XB"],
        ),
        (
            "capacity_and_device",
            &[
                "estimate",
                "--params",
                "7B",
                "--capacity",
                "80GB",
                "--device",
                "h100",
            ],
        ),
        ("missing_params", &["estimate"]),
        ("unknown_flag", &["estimate", "--params", "7B", "--bogus"]),
        ("unknown_command", &["estimat"]),
        ("fit_without_capacity", &["fit"]),
        ("empty_list_item", &["compare", "--params", "1B,,2B"]),
        ("unknown_in_list", &["compare", "--optimizers", "sgd,adamx"]),
        ("bad_swap", &["compare", "--swap", "adam"]),
    ];
    for (name, args) in cases {
        let (code, stdout, stderr) = run(args);
        assert_eq!(code, 2, "{name}: {args:?}");
        assert!(
            stdout.is_empty(),
            "{name}: stdout should be empty, was {stdout}"
        );
        assert_eq!(stderr.lines().count(), 1, "{name}: {stderr}");
        assert!(stderr.starts_with("error: "), "{name}: {stderr}");
        insta::assert_snapshot!(format!("error_{name}"), stderr);
    }
}

#[test]
fn a_closed_pipe_is_not_an_error() {
    use std::process::{Command as Process, Stdio};
    let mut child = Process::new(assert_cmd::cargo::cargo_bin("trainmem"))
        .args(["devices"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert!(output.stderr.is_empty());
}

/// Issue 16: what each image becomes in a vision-language model, the
/// vision tower frozen by its part name under LoRA, and the inputs refused
/// in one line.
#[test]
fn vision_language_inputs() {
    let llava = ok(&[
        "estimate",
        "--model",
        "llava-1.5-7b",
        "--lora-rank",
        "16",
        "--freeze",
        "vision_tower",
        "--freeze",
        "multi_modal_projector",
        "--micro-batch",
        "2",
        "--seq-len",
        "2048",
        "--images",
        "2",
    ]);
    assert!(
        llava.contains("a 336 px image -> 576 image tokens"),
        "{llava}"
    );
    assert!(
        llava.contains("images: 2 per sample x 576 tokens = 1152 image tokens"),
        "{llava}"
    );
    // 32 layers x 7 linears; none in the frozen tower and projector.
    assert!(
        llava.contains("LoRA rank 16 on 224 linear modules"),
        "{llava}"
    );
    assert!(!llava.contains("activations are not estimated"), "{llava}");
    let qwen = ok(&[
        "estimate",
        "--model",
        "qwen2.5-vl-7b",
        "--freeze",
        "vision_tower",
        "--micro-batch",
        "1",
        "--seq-len",
        "4096",
        "--images",
        "3",
        "--image-tokens",
        "1024",
    ]);
    assert!(
        common::contains_words(
            &qwen,
            "= 4096 patches of 14 px merged 2x2 = 802816 pixels, such as 896 x 896 px"
        ),
        "{qwen}"
    );
    assert!(qwen.contains("3072 image tokens"), "{qwen}");
    for args in [
        &[
            "estimate",
            "--model",
            "qwen2.5-vl-7b",
            "--micro-batch",
            "1",
            "--seq-len",
            "512",
            "--images",
            "2",
        ][..],
        &[
            "estimate",
            "--model",
            "llava-1.5-7b",
            "--micro-batch",
            "1",
            "--seq-len",
            "512",
            "--images",
            "1",
        ],
        &["estimate", "--model", "gemma-3-4b", "--image-tokens", "64"],
        &[
            "estimate",
            "--model",
            "llama-3.1-8b",
            "--image-tokens",
            "64",
        ],
        &[
            "estimate",
            "--model",
            "qwen2.5-vl-7b",
            "--image-size",
            "448",
        ],
        &[
            "estimate",
            "--model",
            "llama-3.1-8b",
            "--freeze",
            "vision_tower",
        ],
        &["estimate", "--model", "llava-1.5-7b", "--task", "seq-cls:2"],
        // Activations are measured with the vision tower frozen and no
        // adapters on the projector.
        &[
            "estimate",
            "--model",
            "llava-1.5-7b",
            "--micro-batch",
            "1",
            "--seq-len",
            "1024",
        ],
        &[
            "estimate",
            "--model",
            "llava-1.5-7b",
            "--lora-rank",
            "8",
            "--freeze",
            "vision_tower",
            "--micro-batch",
            "1",
            "--seq-len",
            "1024",
        ],
    ] {
        let (code, stdout, stderr) = run(args);
        assert_eq!(code, 2, "{args:?}: {stdout}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
    }
}

#[test]
fn mamba_activations_need_the_torch_path() {
    let workload = ["--micro-batch", "1", "--seq-len", "64"];
    let mamba2 = std::env::temp_dir().join(format!("trainmem-mamba2-{}.json", std::process::id()));
    std::fs::write(
        &mamba2,
        r#"{"model_type": "mamba2", "hidden_size": 256, "num_heads": 8, "head_dim": 64,
            "n_groups": 1, "state_size": 64, "num_hidden_layers": 4, "vocab_size": 1000}"#,
    )
    .unwrap();
    for model in ["mamba-2.8b", mamba2.to_str().unwrap()] {
        let report = ok(&[
            &["estimate", "--model", model, "--platform", "cpu"][..],
            &workload,
        ]
        .concat());
        assert!(report.contains("mixer layers"), "{model}: {report}");
        assert!(
            report.contains("transformers' torch path"),
            "{model}: {report}"
        );
        for refused in [
            &["--platform", "cuda"][..],
            &["--platform", "cpu", "--recompute", "selective"],
        ] {
            let args = [&["estimate", "--model", model][..], &workload, refused].concat();
            let (code, stdout, stderr) = run(&args);
            assert_eq!(code, 2, "{args:?}");
            assert!(stdout.is_empty(), "{args:?}");
            assert_eq!(stderr.lines().count(), 1, "{stderr}");
            assert!(stderr.contains("Mamba's activations"), "{stderr}");
        }
    }
    // The model states alone need no activation model.
    ok(&[
        "estimate",
        "--model",
        "mamba-2.8b",
        "--gpus",
        "2",
        "--tp",
        "2",
    ]);
    std::fs::remove_file(mamba2).unwrap();
}
