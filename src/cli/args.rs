//! The raw command line, as clap reads it: plain strings, validated later by
//! [`super::resolve`] into domain types.

use clap::{Args, Parser, Subcommand};

const ABOUT: &str = "How much memory training takes, piece by piece, and whether it fits.";

const LONG_ABOUT: &str = "\
How much memory training a neural network takes, piece by piece, and whether it fits.

Training memory = weights + master weights + gradients + optimizer states + activations.
The gradient-and-optimizer slice alone is M = P × V × B: parameters × values kept per
parameter (1 for SGD, 2 with momentum, 3 for Adam) × bytes per value.

With no command, trainmem prints the textbook comparison (the same as `trainmem compare`).";

const EXAMPLES: &str = "\
Examples:
  trainmem                                          the textbook report: SGD, momentum, RMSProp, Adam at 124M, 1.5B, 7B
  trainmem estimate --params 7B --optimizer adamw --precision mixed-bf16 --device h100-80gb
  trainmem estimate --params 13B --optimizer adam --precision bf16 --format json
  trainmem fit --optimizer adam --precision fp32 --capacity 80GB
  trainmem compare --params 1B,13B,70B --precision mixed-bf16 --device h200
  trainmem optimizers | precisions | devices       the catalogues

Sizes: 80GB = 80 × 10^9 bytes, 80GiB = 80 × 2^30 bytes. Counts: 124M, 1.5B, 7B, 1T, 13e9, 6738415616.";

/// The whole command line.
#[derive(Debug, Parser)]
#[command(
    name = "trainmem",
    version,
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_help = EXAMPLES,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// What to do; `compare` when omitted.
    #[command(subcommand)]
    pub command: Option<Command>,

    /// Options of the default `compare` command.
    #[command(flatten)]
    pub compare: CompareArgs,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// The textbook comparison: optimizers priced at several model sizes (the default).
    #[command(after_help = EXAMPLES)]
    Compare(CompareArgs),
    /// The training memory of one model, piece by piece.
    #[command(after_help = EXAMPLES)]
    Estimate(EstimateArgs),
    /// The largest model whose weights, gradients and optimizer states fit a capacity.
    #[command(after_help = EXAMPLES)]
    Fit(FitArgs),
    /// List the optimizers and the state each keeps.
    Optimizers(OutputArgs),
    /// List the precision recipes and their bytes.
    Precisions(OutputArgs),
    /// List the accelerators and their memory.
    Devices(OutputArgs),
}

/// How a report is written.
#[derive(Debug, Args, Clone, Default)]
pub struct OutputArgs {
    /// Output format: table, json, markdown or csv.
    #[arg(long, value_name = "FORMAT", default_value = "table")]
    pub format: String,
}

/// Units and format of a memory report.
#[derive(Debug, Args, Clone, Default)]
pub struct ReportArgs {
    #[command(flatten)]
    pub output: OutputArgs,

    /// Units for sizes: gb (10^9 bytes) or gib (2^30 bytes). Default: gib when
    /// the capacity was given in binary units, else gb.
    #[arg(long, value_name = "UNITS")]
    pub units: Option<String>,
}

/// The accelerator to check against.
#[derive(Debug, Args, Clone, Default)]
pub struct CapacityArgs {
    /// Memory of one accelerator, e.g. 80GB (10^9 bytes) or 80GiB (2^30 bytes).
    #[arg(
        long,
        value_name = "SIZE",
        conflicts_with = "device",
        allow_hyphen_values = true
    )]
    pub capacity: Option<String>,

    /// An accelerator from `trainmem devices`, e.g. h100-80gb, a100-40gb, h200.
    #[arg(long, value_name = "NAME")]
    pub device: Option<String>,
}

/// The optimizer and precision of a run.
#[derive(Debug, Args, Clone)]
pub struct TrainingArgs {
    /// Optimizer, from `trainmem optimizers`: sgd, sgd-momentum, rmsprop, adam, adamw.
    #[arg(long, value_name = "NAME", default_value = "adam")]
    pub optimizer: String,

    /// Precision recipe, from `trainmem precisions`: fp32, bf16, fp16, mixed-bf16,
    /// mixed-fp16, amp-bf16, amp-fp16.
    #[arg(long, value_name = "NAME", default_value = "fp32")]
    pub precision: String,
}

/// `trainmem estimate`.
#[derive(Debug, Args, Clone)]
pub struct EstimateArgs {
    /// Parameter count: 124M, 1.5B, 7B, 1T, 13e9 or 6738415616.
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub params: String,

    #[command(flatten)]
    pub training: TrainingArgs,

    #[command(flatten)]
    pub capacity: CapacityArgs,

    #[command(flatten)]
    pub report: ReportArgs,
}

/// `trainmem fit`.
#[derive(Debug, Args, Clone)]
pub struct FitArgs {
    #[command(flatten)]
    pub training: TrainingArgs,

    #[command(flatten)]
    pub capacity: CapacityArgs,

    #[command(flatten)]
    pub report: ReportArgs,
}

/// `trainmem compare` (and `trainmem` with no command).
#[derive(Debug, Args, Clone)]
pub struct CompareArgs {
    /// Model sizes to price, comma-separated.
    #[arg(
        long,
        value_name = "LIST",
        default_value = "124M,1.5B,7B",
        allow_hyphen_values = true
    )]
    pub params: String,

    /// Optimizers to compare, comma-separated, or `all`.
    #[arg(
        long,
        value_name = "LIST",
        default_value = "sgd,sgd-momentum,rmsprop,adam"
    )]
    pub optimizers: String,

    /// Precision recipe of the comparison.
    #[arg(long, value_name = "NAME", default_value = "fp32")]
    pub precision: String,

    /// Memory of one accelerator (default 80GB, the seed's largest common accelerator).
    #[arg(
        long,
        value_name = "SIZE",
        conflicts_with = "device",
        allow_hyphen_values = true
    )]
    pub capacity: Option<String>,

    /// An accelerator from `trainmem devices`, instead of --capacity.
    #[arg(long, value_name = "NAME")]
    pub device: Option<String>,

    /// The swap to price, as FROM,TO.
    #[arg(long, value_name = "FROM,TO", default_value = "adam,sgd-momentum")]
    pub swap: String,

    /// The model size at which the swap is priced.
    #[arg(
        long,
        value_name = "N",
        default_value = "1.5B",
        allow_hyphen_values = true
    )]
    pub swap_at: String,

    /// Sizes of the M = P × V × B examples (seed 000).
    #[arg(
        long,
        value_name = "LIST",
        default_value = "13B,1B",
        allow_hyphen_values = true
    )]
    pub slice_params: String,

    /// Precision of the M = P × V × B examples (seed 000 uses B = 2 bytes).
    #[arg(long, value_name = "NAME", default_value = "bf16")]
    pub slice_precision: String,

    #[command(flatten)]
    pub report: ReportArgs,
}
