//! `trainmem plan` for llama-3.1-70b on 512 H100s: the search the README
//! quotes (`cargo bench --bench plan`), in-process and on one thread.

use clap::{CommandFactory, FromArgMatches};
use criterion::{Criterion, criterion_group, criterion_main};
use trainmem::cli::{Cli, respond};

/// The README's figure: every layout of `--allow all` (170,880 candidates).
const PLAN: &[&str] = &[
    "trainmem",
    "plan",
    "--model",
    "llama-3.1-70b",
    "--gpus",
    "512",
    "--device",
    "h100-80gb",
    "--seq-len",
    "4096",
    "--optimizer",
    "adamw",
    "--precision",
    "mixed-bf16",
    "--allow",
    "all",
];

fn plan(args: &[&str]) -> String {
    let matches = Cli::command().try_get_matches_from(args).unwrap();
    let cli = Cli::from_arg_matches(&matches).unwrap();
    respond(cli, &matches).unwrap().report
}

fn bench(c: &mut Criterion) {
    // The table's second line: "K of N layouts fit (P priced, ...)".
    let report = plan(PLAN);
    eprintln!("{}", report.lines().nth(1).unwrap_or_default());
    let mut group = c.benchmark_group("plan");
    group.sample_size(10);
    group.bench_function("llama-3.1-70b on 512 h100", |b| b.iter(|| plan(PLAN)));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
