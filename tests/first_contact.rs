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

/// The catalogues' default tables fit a 100-column terminal (characters,
/// not bytes: `×` is one); `--verbose` adds the long details, wrapped.
#[test]
fn catalogues_fit_a_hundred_columns() {
    for catalogue in ["models", "optimizers", "precisions", "devices"] {
        let mut runs = vec![vec![catalogue]];
        if catalogue != "models" {
            runs.push(vec![catalogue, "--verbose"]);
        }
        for args in runs {
            let (code, stdout, stderr) = run(&args);
            assert_eq!(code, 0, "{args:?}: {stderr}");
            for line in stdout.lines() {
                assert!(
                    line.chars().count() <= 100,
                    "{args:?}: {} characters: {line}",
                    line.chars().count()
                );
            }
        }
    }
}

/// The details the default table leaves out are in `--verbose` and in
/// JSON, Markdown and CSV.
#[test]
fn catalogue_details_are_behind_verbose_and_the_formats() {
    let cases = [
        (
            "optimizers",
            "torch/optim/sgd.py (momentum>0, nesterov=True)",
        ),
        (
            "optimizers",
            "exp_avg, exp_avg_sq, max_exp_avg_sq, step (host)",
        ),
        ("devices", "Tesla V100 16GB (SXM2 and PCIe)"),
        ("devices", "a100-pcie-40gb"),
        ("devices", "nvidia-smi memory.total 15360 MiB (Tesla T4"),
        (
            "precisions",
            "fp16 weights and gradients, fp32 master weights",
        ),
    ];
    for (catalogue, detail) in cases {
        let (_, table, _) = run(&[catalogue]);
        assert!(!table.contains(detail), "{catalogue}: {detail}");
        assert!(table.contains(&format!("`trainmem {catalogue} --verbose`")));
        for format in ["json", "markdown", "csv"] {
            let (code, stdout, _) = run(&[catalogue, "--format", format]);
            assert_eq!(code, 0);
            assert!(stdout.contains(detail), "{catalogue} {format}: {detail}");
        }
        let (_, verbose, _) = run(&[catalogue, "--verbose"]);
        // Wrapped lines are joined again before looking.
        let joined = verbose.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(joined.contains(detail), "{catalogue} --verbose: {detail}");
    }
}

#[test]
fn devices_table() {
    let (code, stdout, _) = run(&["devices"]);
    assert_eq!(code, 0);
    insta::assert_snapshot!(stdout);
}

/// Help speaks to someone who has not read the project's source texts: no
/// "seed 000", no "the seed's largest common accelerator", no "textbook".
#[test]
fn help_needs_no_source_texts() {
    let commands: [&[&str]; 12] = [
        &["--help"],
        &["compare", "--help"],
        &["estimate", "--help"],
        &["fit", "--help"],
        &["params", "--help"],
        &["plot", "--help"],
        &["serve", "--help"],
        &["models", "--help"],
        &["optimizers", "--help"],
        &["precisions", "--help"],
        &["devices", "--help"],
        &["-h"],
    ];
    for args in commands {
        let (code, stdout, _) = run(args);
        assert_eq!(code, 0, "{args:?}");
        for jargon in ["seed", "textbook"] {
            assert!(
                !stdout.to_lowercase().contains(jargon),
                "{args:?} says `{jargon}`:\n{stdout}"
            );
        }
    }
    let (_, compare, _) = run(&["compare", "--help"]);
    insta::assert_snapshot!("compare_help", compare);
}

/// The README's start (up to its quick start) says how to build, run with
/// arguments and install, and which Rust it needs: the `rust-version` of
/// Cargo.toml.
#[test]
fn readme_start_says_how_to_install_and_which_rust() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let start = readme.split("\n## Quick start").next().unwrap();
    let first_block = start.split("```sh\n").nth(1).unwrap();
    let mut commands = first_block.lines();
    assert!(commands.next().unwrap().starts_with("cargo run --release "));
    assert!(commands.next().unwrap().starts_with("cargo test "));
    let rust_version = env!("CARGO_PKG_RUST_VERSION");
    assert!(!rust_version.is_empty(), "Cargo.toml sets rust-version");
    for needed in [
        "cargo install --path .".to_string(),
        "cargo run --release -- estimate".to_string(),
        format!("Rust {rust_version} or newer"),
        "trainmem completions bash".to_string(),
    ] {
        assert!(start.contains(&needed), "README's start lacks `{needed}`");
    }
}

/// `trainmem completions SHELL` prints a completion script that knows the
/// commands and their flags; an unknown shell is a one-line error, exit 2.
#[test]
fn completions_for_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let (code, stdout, stderr) = run(&["completions", shell]);
        assert_eq!(code, 0, "{shell}: {stderr}");
        assert!(stderr.is_empty());
        assert!(!stdout.trim().is_empty(), "{shell}");
        for needed in ["estimate", "optimizer", "--model", "completions"] {
            assert!(stdout.contains(needed), "{shell} lacks {needed}");
        }
        // bash and zsh name the flag whole; fish writes `-l optimizer`.
        assert!(
            stdout.contains("--optimizer") || stdout.contains("-l optimizer"),
            "{shell}"
        );
    }
    let (code, stdout, stderr) = run(&["completions", "tcsh"]);
    assert_eq!(code, 2);
    assert!(stdout.is_empty());
    assert_eq!(
        stderr,
        "error: unknown shell `tcsh` (accepted: bash, zsh, fish, elvish, powershell)\n"
    );
    let (code, _, stderr) = run(&["completions"]);
    assert_eq!(code, 2, "{stderr}");
}

/// The bash script is valid bash and completes `--optim` to the flags.
#[test]
fn bash_completion_completes_a_flag() {
    let (_, script, _) = run(&["completions", "bash"]);
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("trainmem.bash");
    std::fs::write(&path, script).unwrap();
    let probe = format!(
        "source '{}'; COMP_WORDS=(trainmem estimate --optim); COMP_CWORD=2; \
         _trainmem trainmem --optim estimate; echo \"${{COMPREPLY[@]}}\"",
        path.display()
    );
    let Ok(output) = std::process::Command::new("bash")
        .args(["-c", &probe])
        .output()
    else {
        return; // no bash on this machine: the other test covers the text
    };
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        String::from_utf8(output.stdout).unwrap().trim(),
        "--optimizer --optimizer-option --optimizer-in-backward"
    );
}

// ---- issue 26: help that teaches ----

/// `trainmem -h` is the short form: the commands, the most used flags,
/// three examples and where the rest is, in at most 40 lines of at most
/// 100 columns.
#[test]
fn short_help_is_at_most_forty_lines() {
    let (code, stdout, stderr) = run(&["-h"]);
    assert_eq!(code, 0, "{stderr}");
    let lines = stdout.lines().count();
    assert!(lines <= 40, "{lines} lines");
    assert!(stdout.lines().all(|l| l.chars().count() <= 100));
    for wanted in [
        "estimate",
        "--model MODEL",
        "--micro-batch B",
        "--optimizer NAME",
        "Examples:",
        "`trainmem --help`",
    ] {
        assert!(stdout.contains(wanted), "lacks {wanted}");
    }
    let examples = stdout
        .lines()
        .skip_while(|l| *l != "Examples:")
        .skip(1)
        .take_while(|l| l.starts_with("  trainmem "))
        .count();
    assert_eq!(examples, 3);
    insta::assert_snapshot!("short_help", stdout);
}

/// Flags belong to a command: given without one they are refused, exit 2,
/// on one line that says what to type; `trainmem` alone is still the
/// textbook report (tests/cli.rs).
#[test]
fn flags_without_a_command_are_refused_with_a_hint() {
    let (code, stdout, stderr) = run(&["--micro-batch", "4"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stdout.is_empty());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("hint: put a command first: trainmem estimate --micro-batch 4"),
        "{stderr}"
    );
    insta::assert_snapshot!("no_command_micro_batch", stderr);
    let (code, _, stderr) = run(&["--micro-batch", "4", "--seq-len", "4096"]);
    assert_eq!(code, 2);
    assert!(stderr.ends_with("trainmem estimate --micro-batch 4 --seq-len 4096\n"));
    // A flag only `compare` takes, or a list of sizes, is put after `compare`.
    let (_, _, stderr) = run(&["--params", "1B,13B"]);
    assert!(
        stderr.ends_with("hint: put a command first: trainmem compare --params 1B,13B\n"),
        "{stderr}"
    );
    let (code, _, stderr) = run(&["--swap", "adam,sgd"]);
    assert_eq!(code, 2);
    assert!(
        stderr.ends_with("hint: put a command first: trainmem compare --swap adam,sgd\n"),
        "{stderr}"
    );
}

/// `--help` groups a command's flags under headings, one per concept.
#[test]
fn long_help_groups_flags_by_heading() {
    let (code, stdout, stderr) = run(&["estimate", "--help"]);
    assert_eq!(code, 0, "{stderr}");
    let headings: Vec<&str> = stdout
        .lines()
        .filter(|l| l.ends_with(':') && !l.starts_with(' '))
        .collect();
    for heading in [
        "Model:",
        "Training:",
        "Precision:",
        "Parallelism:",
        "Fine-tuning:",
        "Memory techniques:",
        "Hardware:",
        "Output:",
    ] {
        assert!(headings.contains(&heading), "{heading} in {headings:?}");
    }
    // Each flag under the heading of its concept.
    let under = |flag: &str| {
        let at = stdout.find(&format!("      --{flag} ")).unwrap();
        headings
            .iter()
            .filter(|h| stdout.find(&format!("\n{h}\n")).is_some_and(|i| i < at))
            .max_by_key(|h| stdout.find(&format!("\n{h}\n")))
            .copied()
            .unwrap()
    };
    assert_eq!(under("micro-batch"), "Training:");
    assert_eq!(under("zero"), "Parallelism:");
    assert_eq!(under("lora-rank"), "Fine-tuning:");
    assert_eq!(under("device"), "Hardware:");
    assert_eq!(under("format"), "Output:");
    assert_eq!(under("master-dtype"), "Precision:");
}

/// `plot` spells the optimizer as `techniques` does (`--optimizer`, a list
/// where a list is taken), keeps `--optimizers` as a hidden alias, and
/// lists `techniques` among its kinds.
#[test]
fn plot_takes_optimizer_like_every_command() {
    let (code, help, _) = run(&["plot", "--help"]);
    assert_eq!(code, 0);
    assert!(help.contains("--optimizer <LIST>"), "{help}");
    assert!(!help.contains("--optimizers <"), "{help}");
    assert!(
        help.contains("techniques: one run as given and with each"),
        "{help}"
    );
    let ladder = |spelling: &str| {
        run(&[
            "plot",
            "--kind",
            "techniques",
            "--model",
            "gpt2",
            spelling,
            "adamw",
            "--micro-batch",
            "1",
            "--seq-len",
            "512",
            "--output",
            "-",
        ])
    };
    let (code, new, stderr) = ladder("--optimizer");
    assert_eq!(code, 0, "{stderr}");
    assert!(new.starts_with("<svg"), "{new:.80}");
    assert_eq!(ladder("--optimizers").1, new);
    let (code, _, stderr) = run(&["compare", "--optimizer", "adam,sgd", "--format", "csv"]);
    assert_eq!(code, 0, "{stderr}");
}

/// The free text of a table report (notes, the step-time line) is wrapped
/// to 100 columns at spaces when stdout is not a terminal, with a hanging
/// indent; table rows and command lines are not; JSON is never wrapped.
#[test]
fn notes_wrap_to_a_hundred_columns_and_json_does_not() {
    let args = [
        "estimate",
        "--model",
        "llama-3.1-8b",
        "--micro-batch",
        "4",
        "--seq-len",
        "4096",
        "--device",
        "h100",
        "--gpus",
        "8",
        "--zero",
        "3",
    ];
    let (code, table, stderr) = run(&args);
    assert_eq!(code, 0, "{stderr}");
    let wrapped = |line: &&str| {
        ["  note: ", "  step time: ", "    "]
            .iter()
            .any(|start| line.starts_with(start))
    };
    for line in table.lines().filter(wrapped) {
        assert!(line.chars().count() <= 100, "{line}");
    }
    assert!(table.contains("\n  step time: "));
    assert!(
        table.contains("\n        "),
        "a note's continuation under its text"
    );
    let (_, json, _) = run(&[&args[..], &["--format", "json"]].concat());
    assert!(json.lines().any(|l| l.chars().count() > 100));
    let notes: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(
        notes["notes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| !n.as_str().unwrap().contains('\n'))
    );
}

/// `compare` shows sizes that differ with the digits that tell them apart.
#[test]
fn compare_tells_close_sizes_apart() {
    let (code, stdout, stderr) = run(&["compare", "--params", "13.01625B,13.0175B"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("104.13 GB"), "{stdout}");
    assert!(stdout.contains("104.14 GB"), "{stdout}");
    assert!(!stdout.contains("0.1 TB"), "{stdout}");
}

/// Mamba's step peaks below its total: the report says why.
#[test]
fn a_peak_below_the_total_is_explained() {
    let (code, stdout, stderr) = run(&[
        "estimate",
        "--model",
        "mamba-2.8b",
        "--platform",
        "cpu",
        "--micro-batch",
        "1",
        "--seq-len",
        "2048",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        common::contains_words(
            &stdout,
            "the peak is below the total: the total adds every piece at its largest, but they are never all live at once"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("gradients "), "{stdout}");
}
