#!/usr/bin/env python3
"""Print trainmem's predicted step time against published measurements.

Reads `tests/fixtures/published/step_times.json`: iteration times, achieved
TFLOP/s per GPU and MFU figures of real training runs, each with its source,
the quoted row, the stated setup, what was measured and the
`trainmem estimate` flags of the setup. `role` says whether the case is one
`tools/fit_step_time.py` fits the model's constants on (`fit`) or one held
out of the fit to test it (`held-out`). Cases whose source
leaves part of the setup unstated (`unstated_setup`) are priced under the
assumption written there and reported apart.

What is compared, by `metric`:
* `step_time_s`: `time.step_time_s`;
* `tflops_per_gpu`: `time.flops_per_step / time.step_time_s / gpus`, in
  TFLOP/s (the executed FLOPs, recomputation included, as Megatron counts);
* `mfu`: `time.achieved_mfu`;
* `tokens_per_s_per_gpu`: `time.tokens_per_s / gpus`.

Run from the repository root after `cargo build --release` (no Python
packages needed):

    python3 tools/published_step_times.py

`tests/published_step_times.rs` computes the same table in `cargo test`.
"""
import json
import subprocess
import sys

BINARY = "./target/release/trainmem"


def predict(case):
    run = subprocess.run(
        [BINARY, "estimate", *case["flags"], "--format", "json"],
        capture_output=True,
        text=True,
    )
    if run.returncode != 0:
        return None, run.stderr.strip()
    report = json.loads(run.stdout)
    time = report["time"]
    if time is None:
        return None, report.get("time_unavailable", "no time")
    metric = case["metric"]
    if metric == "step_time_s":
        return time["step_time_s"], None
    if metric == "tflops_per_gpu":
        gpus = report["parallelism"]["gpus"]
        return time["flops_per_step"] / time["step_time_s"] / gpus / 1e12, None
    if metric == "mfu":
        return time["achieved_mfu"], None
    if metric == "tokens_per_s_per_gpu":
        return time["tokens_per_s"] / report["parallelism"]["gpus"], None
    return None, f"unknown metric {metric}"


def main():
    if len(sys.argv) > 1:
        global BINARY
        BINARY = sys.argv[1]
    cases = json.load(open("tests/fixtures/published/step_times.json", encoding="utf-8"))
    groups = {}
    print(f"{'case':<44} {'role':<9} {'metric':<15} {'measured':>10} {'predicted':>10} {'error':>8}")
    for case in cases:
        predicted, problem = predict(case)
        measured = case["measured"]["value"]
        if predicted is None:
            print(f"{case['id']:<44} error: {problem}")
            continue
        error = (predicted - measured) / measured
        assumed = "unstated_setup" in case
        flag = " (assumed setup)" if assumed else ""
        print(
            f"{case['id']:<44} {case['role']:<9} {case['metric']:<15} "
            f"{measured:>10.4g} {predicted:>10.4g} {error:>+8.1%}{flag}"
        )
        key = (case["role"], "partly assumed" if assumed else "stated")
        groups.setdefault(key, []).append(abs(error))
    print()
    for (role, setup), errors in sorted(groups.items()):
        within = sum(e <= 0.15 for e in errors)
        print(
            f"{role:<9} {setup:<15} {len(errors):>2} cases: mean |error| "
            f"{sum(errors) / len(errors):.1%}, max {max(errors):.1%}, within 15%: {within}"
        )


if __name__ == "__main__":
    main()
