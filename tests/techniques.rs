//! `trainmem techniques` and `plot --kind techniques`: the "Making it fit"
//! answers. Every row's peak must be exactly what `trainmem estimate` says
//! with the run's flags and the row's, alone, so a row of the table is a
//! command.

mod common;

use common::{int, json_of, run};

const BASE: [&str; 14] = [
    "--model",
    "llama-3.1-8b",
    "--optimizer",
    "adamw",
    "--precision",
    "mixed-bf16",
    "--micro-batch",
    "1",
    "--seq-len",
    "2048",
    "--device",
    "rtx-4090-24gb",
    "--format",
    "json",
];

#[test]
fn every_row_is_the_estimate_its_flags_spell_alone() {
    let mut args = vec!["techniques"];
    args.extend(BASE);
    let ladder = json_of(&args);
    let rungs = ladder["rungs"].as_array().unwrap();
    assert!(rungs.len() >= 3, "{ladder}");
    assert_eq!(rungs[0]["technique"], "as given");
    let base = int(&rungs[0]["peak"]) as i128;
    for rung in &rungs[1..] {
        // The run as given plus the row's flags, alone: a later flag
        // replaces an earlier one of the same name (--optimizer, --zero
        // against --fsdp); a switch (--optimizer-in-backward) takes no value.
        let mut flags: Vec<String> = BASE.iter().map(|f| f.to_string()).collect();
        for flag in rung["flags"].as_array().unwrap() {
            flags.push(flag.as_str().unwrap().to_string());
        }
        let mut given: Vec<(String, Option<String>)> = Vec::new();
        let mut i = 0;
        while i < flags.len() {
            let name = flags[i].clone();
            let value = flags.get(i + 1).filter(|v| !v.starts_with("--")).cloned();
            i += 1 + usize::from(value.is_some());
            match given.iter_mut().find(|(n, _)| *n == name) {
                Some(slot) => slot.1 = value,
                None => given.push((name, value)),
            }
        }
        let mut command = vec!["estimate".to_string()];
        for (name, value) in given {
            command.push(name);
            command.extend(value);
        }
        let command: Vec<&str> = command.iter().map(String::as_str).collect();
        let e = json_of(&command);
        let peak = int(&e["memory"]["peak"]);
        assert_eq!(
            int(&rung["peak"]),
            peak,
            "{}: {command:?}",
            rung["technique"]
        );
        assert_eq!(rung["fits"], e["fits"], "{}", rung["technique"]);
        assert_eq!(rung["fits"], true, "{}", rung["technique"]);
        assert_eq!(int(&rung["reserved"]), int(&e["memory"]["reserved"]));
        // The change is from the run as given, with its sign.
        assert_eq!(
            rung["change"].as_i64().unwrap() as i128,
            peak as i128 - base
        );
        assert!(rung["category"].is_string(), "{rung}");
        assert!(!rung["costs"].as_array().unwrap().is_empty(), "{rung}");
    }
    // Full fine-tuning of 8B under AdamW does not fit 24 GB.
    assert_eq!(rungs[0]["fits"], false);
}

#[test]
fn the_table_names_the_best_answer_and_leaves_out_what_is_on() {
    let mut args = vec!["techniques", "--recompute", "full"];
    args.extend(&BASE[..BASE.len() - 2]);
    let (code, stdout, stderr) = run(&args);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("best:"), "{stdout}");
    assert!(!stdout.contains("activation checkpointing"), "{stdout}");
    assert!(stdout.contains("each row applies alone"), "{stdout}");
}

#[test]
fn the_chart_draws_one_bar_per_step_against_the_capacity() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fit.svg");
    let mut args = vec![
        "plot",
        "--kind",
        "techniques",
        "--output",
        path.to_str().unwrap(),
        "--optimizers",
        "adamw",
    ];
    // plot has --optimizers, not --optimizer: the rest of the run is the same.
    args.extend(
        BASE[..BASE.len() - 2]
            .iter()
            .filter(|f| **f != "--optimizer" && **f != "adamw"),
    );
    let (code, stdout, stderr) = run(&args);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with("wrote "), "{stdout}");
    let svg = std::fs::read_to_string(&path).unwrap();
    let document = roxmltree::Document::parse(&svg).unwrap();
    assert!(svg.contains("capacity rtx-4090-24gb"));
    // One bar per row of `trainmem techniques` for the same run, each named.
    let mut techniques = vec!["techniques"];
    techniques.extend(BASE);
    let rows = json_of(&techniques)["rungs"].as_array().unwrap().clone();
    for row in &rows[1..] {
        let name = row["technique"].as_str().unwrap();
        assert!(svg.contains(name), "{name} is not drawn");
    }
    let bars = document
        .descendants()
        .filter(|n| n.has_tag_name("rect") && n.children().any(|c| c.has_tag_name("title")))
        .count();
    assert!(
        bars >= rows.len() * 3,
        "{bars} stacked pieces for {} rows",
        rows.len()
    );
    // One run at a time, and a model to price.
    args[6] = "adamw,sgd";
    let (code, _, stderr) = run(&args);
    assert_eq!(code, 2);
    assert!(stderr.contains("give one optimizer"), "{stderr}");
    let (code, _, stderr) = run(&[
        "plot",
        "--kind",
        "techniques",
        "--output",
        "x.svg",
        "--optimizers",
        "adamw",
    ]);
    assert_eq!(code, 2);
    assert!(stderr.contains("--model"), "{stderr}");
}

#[test]
fn without_a_micro_batch_there_is_nothing_to_make_fit() {
    let (code, stdout, stderr) = run(&["techniques", "--model", "gpt2"]);
    assert_eq!((code, stdout.as_str()), (2, ""));
    assert!(stderr.contains("--micro-batch and --seq-len"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    // A bare parameter count has no activations for the techniques to change.
    let (code, _, stderr) = run(&[
        "techniques",
        "--params",
        "7B",
        "--micro-batch",
        "1",
        "--seq-len",
        "128",
    ]);
    assert_eq!(code, 2);
    assert!(stderr.contains("architecture"), "{stderr}");
}

/// The README shows `docs/techniques.svg`; it must be what the binary draws.
#[test]
fn the_readme_chart_is_current() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("techniques.svg");
    let (code, _, stderr) = run(&[
        "plot",
        "--kind",
        "techniques",
        "--output",
        path.to_str().unwrap(),
        "--model",
        "llama-3.1-8b",
        "--optimizers",
        "adamw",
        "--precision",
        "mixed-bf16",
        "--micro-batch",
        "1",
        "--seq-len",
        "4096",
        "--device",
        "rtx-4090-24gb",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let drawn = std::fs::read_to_string(&path).unwrap();
    let committed =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/techniques.svg"))
            .unwrap();
    assert!(
        drawn == committed,
        "docs/techniques.svg is stale: rerun the command in tools/README.md"
    );
}
