//! Every figure of the two seed texts, produced by the real binary.
//!
//! Seed 000 ("Optimizer States Memory Requirements") and seed 001 ("The memory
//! an optimiser costs before any activation is stored") are in
//! `shared/reference/seeds/`; each assertion names the sentence it pins.

mod common;

use assert_cmd::Command;
use common::{int, json_of as trainmem};
use serde_json::Value;

fn estimate(params: &str, optimizer: &str, precision: &str) -> Value {
    trainmem(&[
        "estimate",
        "--params",
        params,
        "--optimizer",
        optimizer,
        "--precision",
        precision,
        "--format",
        "json",
    ])
}

/// Seed 000: "1 billion × 3 × 2 bytes, which comes to 6 GB"; 13B gives 78 GB;
/// "from 78 GB to 6 GB, roughly a thirteenfold reduction".
#[test]
fn seed_000_slice_is_p_times_v_times_b() {
    let big = estimate("13B", "adam", "bf16");
    let small = estimate("1B", "adam", "bf16");
    let m_big = int(&big["gradient_optimizer_slice"]["bytes"]);
    let m_small = int(&small["gradient_optimizer_slice"]["bytes"]);
    assert_eq!(m_big, 78_000_000_000);
    assert_eq!(m_small, 6_000_000_000);
    assert_eq!(m_big, 13 * m_small);
    assert_eq!(int(&big["gradient_optimizer_slice"]["bytes_per_value"]), 2);
    assert_eq!(
        m_big,
        int(&big["memory"]["gradients"]) + int(&big["memory"]["optimizer_states"])
    );
}

/// Seed 000: "V = 1" for SGD, "V = 2" for momentum, "V = 3" for Adam.
#[test]
fn seed_000_values_per_parameter() {
    for (optimizer, v) in [
        ("sgd", 1.0),
        ("sgd-momentum", 2.0),
        ("momentum", 2.0),
        ("adam", 3.0),
    ] {
        let e = estimate("1B", optimizer, "bf16");
        assert_eq!(
            e["gradient_optimizer_slice"]["values_per_parameter"].as_f64(),
            Some(v),
            "{optimizer}"
        );
    }
}

/// Seed 001, Step 1 and 2: copies 2, 3, 3, 4, priced at 124M, 1.5B, 7B in fp32
/// ("1.98 GB against 0.99 GB"; 12/18/18/24 GB; 56/84/84/112 GB).
#[test]
fn seed_001_copies_and_prices() {
    let rows: Vec<Value> = trainmem(&["compare", "--format", "json"])
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(rows.len(), 12);
    let expected = [
        ("sgd", 2.0, [992_000_000u64, 12_000_000_000, 56_000_000_000]),
        (
            "sgd-momentum",
            3.0,
            [1_488_000_000, 18_000_000_000, 84_000_000_000],
        ),
        (
            "rmsprop",
            3.0,
            [1_488_000_000, 18_000_000_000, 84_000_000_000],
        ),
        (
            "adam",
            4.0,
            [1_984_000_000, 24_000_000_000, 112_000_000_000],
        ),
    ];
    for (i, (optimizer, copies, totals)) in expected.iter().enumerate() {
        for (j, total) in totals.iter().enumerate() {
            let e = &rows[i * 3 + j];
            assert_eq!(e["optimizer"], *optimizer);
            assert_eq!(int(&e["memory"]["total"]), *total, "{optimizer} #{j}");
            assert_eq!(e["copies"]["total"].as_f64(), Some(*copies));
        }
    }
}

/// Seed 001, Step 3: "At 7B, Adam's four copies come to 112 GB ... 80 GB ...
/// SGD with momentum brings it to 84 GB, which is still over."
#[test]
fn seed_001_what_fits_80_gb_at_7b() {
    let rows = trainmem(&["compare", "--format", "json"]);
    let at_7b: Vec<(String, bool)> = rows
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| int(&e["parameters"]["total"]) == 7_000_000_000)
        .map(|e| {
            (
                e["optimizer"].as_str().unwrap().to_string(),
                e["fits"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        at_7b,
        [
            ("sgd".to_string(), true),
            ("sgd-momentum".to_string(), false),
            ("rmsprop".to_string(), false),
            ("adam".to_string(), false)
        ]
    );
}

/// Issue 2: thresholds 5B (Adam), 6.67B (momentum, RMSProp), 10B (SGD) at 80 GB in fp32.
#[test]
fn seed_001_thresholds() {
    for (optimizer, max) in [
        ("adam", 5_000_000_000u64),
        ("sgd-momentum", 6_666_666_666),
        ("rmsprop", 6_666_666_666),
        ("sgd", 10_000_000_000),
    ] {
        let fit = trainmem(&[
            "fit",
            "--optimizer",
            optimizer,
            "--precision",
            "fp32",
            "--capacity",
            "80GB",
            "--format",
            "json",
        ]);
        assert_eq!(int(&fit["max_parameters"]), max, "{optimizer}");
    }
}

/// Seed 001, Step 4: "Half of Adam's four-way footprint is state".
#[test]
fn seed_001_adam_state_share_is_half() {
    for size in ["124M", "1.5B", "7B"] {
        let e = estimate(size, "adam", "fp32");
        assert_eq!(
            2 * int(&e["memory"]["optimizer_states"]),
            int(&e["memory"]["total"])
        );
    }
}

/// Seed 001, Step 5: the swap at 1.5B saves 6 GB, "a third of the optimiser footprint".
#[test]
fn seed_001_swap_at_one_and_a_half_billion() {
    let adam = estimate("1.5B", "adam", "fp32");
    let momentum = estimate("1.5B", "sgd-momentum", "fp32");
    let saved = int(&adam["memory"]["total"]) - int(&momentum["memory"]["total"]);
    assert_eq!(saved, 6_000_000_000);
    assert_eq!(3 * saved, int(&adam["gradient_optimizer_slice"]["bytes"]));
    let report = Command::cargo_bin("trainmem").unwrap().output().unwrap();
    let text = String::from_utf8(report.stdout).unwrap();
    assert!(
        text.contains("saves 6 GB: 25% of Adam's 24 GB total, 33.33% of its 18 GB"),
        "{text}"
    );
}

/// Seed 001, Check: "fp16 halves every number in the table and changes none of
/// the ratios"; "Adam is exactly twice SGD ... at every size".
#[test]
fn seed_001_sanity_checks() {
    for size in ["124M", "1.5B", "7B"] {
        let fp32 = estimate(size, "adam", "fp32");
        let fp16 = estimate(size, "adam", "fp16");
        assert_eq!(
            int(&fp32["memory"]["total"]),
            2 * int(&fp16["memory"]["total"])
        );
        assert_eq!(fp32["copies"]["total"], fp16["copies"]["total"]);
        let sgd = estimate(size, "sgd", "fp32");
        assert_eq!(
            int(&fp32["memory"]["total"]),
            2 * int(&sgd["memory"]["total"])
        );
    }
    let report = Command::cargo_bin("trainmem").unwrap().output().unwrap();
    let text = String::from_utf8(report.stdout).unwrap();
    assert_eq!(text.matches("[holds]").count(), 3, "{text}");
    assert!(!text.contains("FAILS"));
}
