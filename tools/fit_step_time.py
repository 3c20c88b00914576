#!/usr/bin/env python3
"""Fit the step-time model's free constants to published measured runs.

Reads `tests/fixtures/published/step_times.json`. Each case has a `role`:
`fit` cases are what the constants are fitted on; `held-out` cases (every
other case of each source, in file order, chosen before any fit) are never
read by the fit and only reported. The free constants are the achievable
share of the dense matmul peak per fitted GPU generation (Ampere: A100
cases; Hopper: H100/H200 cases); every other efficiency figure is sourced
in `src/step_time/` and not fitted.

How: each case is priced by the trainmem binary at a grid of
`--matmul-efficiency` values (the flag replaces the fitted constant, so
the binary's own model is evaluated, not a copy of it); the tool then picks,
per generation, the grid value (refined by linear interpolation of the step
time in 1/efficiency between grid points) minimizing the mean |error| of
that generation's fit cases, and writes `src/step_time/fitted.rs` with the
constants and both halves' figures. `cargo test --test
published_step_times` recomputes the figures from the rebuilt binary.

    cargo build && python3 tools/fit_step_time.py [./target/debug/trainmem]
"""
import json
import subprocess
import sys

CASES = "tests/fixtures/published/step_times.json"
OUTPUT = "src/step_time/fitted.rs"
GRID = [0.40 + 0.05 * i for i in range(12)]  # 0.40 .. 0.95
FINE = [0.40 + 0.005 * i for i in range(111)]  # 0.40 .. 0.95
GENERATION = {"a100": "ampere", "h100": "hopper", "h200": "hopper"}


def generation(case):
    device = case["flags"][case["flags"].index("--device") + 1]
    return GENERATION.get(device.split("-")[0])


def predict(binary, case, efficiency):
    run = subprocess.run(
        [binary, "estimate", *case["flags"], "--matmul-efficiency", f"{efficiency:.4f}",
         "--format", "json"],
        capture_output=True, text=True, check=True)
    report = json.loads(run.stdout)
    time = report["time"]
    gpus = report["parallelism"]["gpus"]
    return {
        "step_time_s": time["step_time_s"],
        "tflops_per_gpu": time["flops_per_step"] / time["step_time_s"] / gpus / 1e12,
        "mfu": time["achieved_mfu"],
        "tokens_per_s_per_gpu": time["tokens_per_s"] / gpus,
    }[case["metric"]], time["step_time_s"]


def at(samples, efficiency):
    """A case's metric at `efficiency`, interpolated in 1/efficiency."""
    for (e0, (m0, t0)), (e1, (m1, t1)) in zip(samples, samples[1:]):
        if e0 <= efficiency <= e1:
            w = (1 / efficiency - 1 / e0) / (1 / e1 - 1 / e0)
            step = t0 + w * (t1 - t0)
            # The metric is the step time or its inverse times a constant.
            return m0 * (step / t0 if m0 / t0 == m1 / t1 else t0 / step)
    raise ValueError(efficiency)


def error(case, value):
    measured = case["measured"]["value"]
    return (value - measured) / measured


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "./target/debug/trainmem"
    cases = json.load(open(CASES, encoding="utf-8"))
    samples = {}
    for case in cases:
        samples[case["id"]] = [(e, predict(binary, case, e)) for e in GRID]
    fitted = {}
    for gen in ("ampere", "hopper"):
        fit = [c for c in cases if c["role"] == "fit" and generation(c) == gen]
        best = min(FINE, key=lambda e: sum(abs(error(c, at(samples[c["id"]], e))) for c in fit))
        fitted[gen] = round(best, 3)
    halves = {}
    for role in ("fit", "held-out"):
        errors = []
        for c in cases:
            if c["role"] != role:
                continue
            gen = generation(c)
            e = fitted.get(gen, (fitted["ampere"] + fitted["hopper"]) / 2)
            errors.append(error(c, at(samples[c["id"]], e)))
            print(f"{c['id']:<56} {role:<8} {errors[-1]:+.3f}")
        halves[role] = errors
    fit, held = halves["fit"], halves["held-out"]
    mean = lambda v: sum(abs(x) for x in v) / len(v)
    within = sum(abs(x) <= 0.15 for x in held) / len(held)
    print(f"fitted: {fitted}")
    print(f"fit: {len(fit)} cases, mean |error| {mean(fit):.1%}")
    print(f"held-out: {len(held)} cases, mean |error| {mean(held):.1%}, within 15%: {within:.0%}")
    with open(OUTPUT, "w", encoding="utf-8") as out:
        out.write(f'''//! The step-time model's fitted constants and its published validation
//! error. Written by `tools/fit_step_time.py` from
//! `tests/fixtures/published/step_times.json` (do not edit by hand: run
//! the tool, which fits on the `fit` cases and reports the `held-out` ones
//! it never saw).

/// The achievable share of the dense peak a large matmul reaches on
/// Ampere (A100), fitted on the `fit` cases run on A100s.
pub const AMPERE_MATMUL: f64 = {fitted["ampere"]};
/// The same on Hopper (H100, H200), fitted on the `fit` cases run on H100s.
pub const HOPPER_MATMUL: f64 = {fitted["hopper"]};
/// Published cases the fit read.
pub const FIT_CASES: u32 = {len(fit)};
/// Their mean |error| at the fitted constants.
pub const FIT_MEAN_ABS_ERROR: f64 = {mean(fit):.3f};
/// Published cases held out of the fit.
pub const HELD_OUT_CASES: u32 = {len(held)};
/// Their mean |error| (predicted - measured) / measured.
pub const HELD_OUT_MEAN_ABS_ERROR: f64 = {mean(held):.3f};
/// The share of them within 15% of the measurement.
pub const HELD_OUT_WITHIN_15_PERCENT: f64 = {within:.3f};
''')


if __name__ == "__main__":
    main()
