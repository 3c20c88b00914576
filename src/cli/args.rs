//! The raw command line, as clap reads it: plain strings, validated later by
//! [`super::resolve`] into domain types.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use serde::{Deserialize, Deserializer};

const ABOUT: &str = "How much memory training takes, piece by piece, and whether it fits.";

const LONG_ABOUT: &str = "\
How much memory training a neural network takes, piece by piece, and whether it fits.

Training memory = weights + master weights + gradients + optimizer states + activations.
The gradient-and-optimizer slice alone is M = P × V × B: parameters × values kept per
parameter (1 for SGD, 2 with momentum, 3 for Adam) × bytes per value.

With no command, trainmem compares the memory of SGD, SGD with momentum, RMSProp and Adam
at 124M, 1.5B and 7B parameters against an 80 GB accelerator: `trainmem compare`, whose
flags (`trainmem compare --help`) change the sizes, optimizers, precision and capacity.
Flags come after a command: `trainmem estimate --micro-batch 4`, not `trainmem --micro-batch 4`.";

/// The examples of `--help`, as a literal for [`LONG_HELP`].
macro_rules! examples {
    () => {
        "\
Examples:
  trainmem                                  SGD, momentum, RMSProp, Adam at 124M, 1.5B, 7B on 80 GB
  trainmem estimate --model llama-3.1-8b --optimizer adamw --precision mixed-bf16
  trainmem estimate --model llama-3.1-8b --micro-batch 1 --seq-len 4096 --device h100
  trainmem estimate --params 13B --optimizer adam --precision bf16 --format json
  trainmem fit --optimizer adam --precision fp32 --capacity 80GB
  trainmem compare --params 1B,13B,70B --precision mixed-bf16 --device h200
  trainmem params llama-2-7b                the exact parameter tensors of a model
  trainmem models | optimizers | precisions | devices        the names each flag accepts

Sizes: 80GB = 80 × 10^9 bytes, 80GiB = 80 × 2^30 bytes. Counts: 124M, 1.5B, 7B, 1T, 13e9, 6738415616."
    };
}

const EXAMPLES: &str = examples!();

/// The end of `trainmem --help`: [`EXAMPLES`] and the options.
const LONG_HELP: &str = concat!(
    examples!(),
    "\n\n-h prints a short help, --help this one (each command has both); -V, --version the version."
);

/// `trainmem -h` and `--help`: the commands, then [`SHORT_HELP`] or
/// [`EXAMPLES`]; `-h`, `--help` and `--version` are named in those.
const HELP_TEMPLATE: &str = "\
{about-with-newline}
{usage-heading} {usage}

Commands:
{subcommands}{after-help}";

/// The end of `trainmem -h`: the flags most runs use, three examples and
/// where the rest is; `--help` shows [`EXAMPLES`] and every command.
const SHORT_HELP: &str = "\
Most used flags, after a command (`trainmem COMMAND -h` lists its own):
  --model MODEL | --params N       a preset (trainmem models), config.json, folder; or 7B
  --optimizer NAME                 adam (default), adamw, sgd, adamw-8bit, ... (trainmem optimizers)
  --precision NAME                 fp32 (default), mixed-bf16, bf16, ... (trainmem precisions)
  --micro-batch B --seq-len S      one micro-step's shape: with both, activations are counted
  --device NAME | --capacity SIZE  an accelerator (trainmem devices), or its memory: 80GB
  --gpus N --zero STAGE            GPUs and ZeRO sharding (or --fsdp, --tp, --pp)
  --recompute MODE                 activation recomputation: none, selective, full
  --format FORMAT                  table (default), json, markdown or csv

Examples:
  trainmem estimate --model llama-3.1-8b --optimizer adamw --precision mixed-bf16
  trainmem fit --model llama-3.1-8b --seq-len 4096 --device h100
  trainmem check axolotl.yaml --device h100-80gb

`trainmem --help` says more: more examples, sizes and counts; -V, --version prints the version.";

const MODEL_HELP: &str = "\
MODEL is any of:
  a preset name          trainmem params llama-2-7b            (list: trainmem models)
  a config.json          trainmem params path/to/config.json
  a model folder         trainmem params path/to/Llama-2-7b-hf  (config.json and/or safetensors)
  a .safetensors file    trainmem params model.safetensors      (header only, never the data)
  a sharded index        trainmem params model.safetensors.index.json
  a hub id               trainmem params meta-llama/Llama-3.1-8B  (the local hugging face
                         cache, else the hub's config.json and headers, never the weights)

A config.json is counted as transformers builds AutoModelForCausalLM for its model_type:
sum(p.numel() for p in model.parameters()), tied weights once. A checkpoint is counted
from its headers.";

/// A file name or model from a text (serde's own `OsString` form is the
/// bytes of one platform): the keyword door's [`super::call`] gives text.
fn os_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<OsString>, D::Error> {
    Option::<String>::deserialize(deserializer).map(|text| text.map(OsString::from))
}

/// The whole command line.
#[derive(Debug, Parser)]
#[command(
    name = "trainmem",
    version,
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_help = SHORT_HELP,
    after_long_help = LONG_HELP,
    help_template = HELP_TEMPLATE
)]
pub struct Cli {
    /// What to do; `compare` with its defaults when omitted. Flags belong to
    /// a command: given without one they are refused (see
    /// [`super::usage::usage_error`]).
    #[command(subcommand)]
    pub command: Option<Command>,

    /// Never use the network: a hub id is read from the local hugging face
    /// cache or a preset only, as with HF_HUB_OFFLINE=1.
    #[arg(long, global = true, help_heading = MODEL)]
    pub offline: bool,
}

/// The commands; serde reads one as `{"plan": {...}}` (the keyword door).
#[derive(Debug, Subcommand, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Command {
    /// Optimizers' memory at several model sizes against one accelerator (the default).
    #[command(after_help = EXAMPLES)]
    Compare(CompareArgs),
    /// The training memory of one model, piece by piece.
    #[command(after_help = EXAMPLES)]
    Estimate(EstimateArgs),
    /// One training step as allocations and frees: its phases and its peak.
    ///
    /// The step as a sequence of allocations and frees: its phases, its peak
    /// and where it happens; `--output chart.svg` draws it.
    #[command(after_help = TIMELINE_HELP)]
    Timeline(TimelineArgs),
    /// Making it fit: the smallest sets of changes that fit, each alone.
    ///
    /// The run priced again with each smallest set of changes that makes it
    /// fit (recomputation, sharding, offload, 8-bit states, LoRA, QLoRA, ...),
    /// each applied alone, ranked by what it gives up.
    #[command(after_help = TECHNIQUES_HELP)]
    Techniques(TechniquesArgs),
    /// Whether the run of your launch configs fits: exit 0 fits, 1 does not.
    ///
    /// Read launch configs (HF TrainingArguments, DeepSpeed, accelerate, axolotl,
    /// torchtune, LLaMA-Factory, torchtitan, litgpt) and say whether the run fits:
    /// exit 0 fits, 1 does not fit, 2 bad input.
    ///
    /// The LoRA flags need --lora-rank from the command line or from a file:
    /// the assembled `estimate` command line checks that, not this one.
    #[command(
        after_help = CHECK_HELP,
        mut_arg("lora_targets", |a| a.requires(clap::builder::Resettable::Reset)),
        mut_arg("lora_bias", |a| a.requires(clap::builder::Resettable::Reset)),
        mut_arg("lora_modules_to_save", |a| a.requires(clap::builder::Resettable::Reset)),
        mut_arg("lora_dora", |a| a.requires(clap::builder::Resettable::Reset)),
        mut_arg("lora_dropout", |a| a.requires(clap::builder::Resettable::Reset)),
        mut_arg("lora_dtype", |a| a.requires(clap::builder::Resettable::Reset))
    )]
    Check(CheckArgs),
    /// The largest model whose weights, gradients and optimizer states fit a capacity.
    #[command(after_help = EXAMPLES)]
    Fit(FitArgs),
    /// The layouts of a cluster that fit, fastest first.
    ///
    /// The layouts of a cluster that fit (ZeRO/FSDP/Megatron, tp, pp, cp, ep,
    /// recomputation, micro-batch), fastest first: each row is an `estimate`
    /// command.
    ///
    /// Every `estimate` flag is accepted; a layout flag typed here (--tp 8,
    /// --zero 3, --micro-batch 2, --recompute full, ...) fixes that axis, and
    /// --allow opens the others.
    #[command(
        after_help = PLAN_HELP,
        mut_arg("lora_targets", |a| a.requires(clap::builder::Resettable::Reset)),
        mut_arg("lora_bias", |a| a.requires(clap::builder::Resettable::Reset)),
        mut_arg("lora_modules_to_save", |a| a.requires(clap::builder::Resettable::Reset)),
        mut_arg("lora_dora", |a| a.requires(clap::builder::Resettable::Reset)),
        mut_arg("lora_dropout", |a| a.requires(clap::builder::Resettable::Reset)),
        mut_arg("lora_dtype", |a| a.requires(clap::builder::Resettable::Reset))
    )]
    Plan(PlanArgs),
    /// The exact parameter tensors of a model: a preset, config.json, folder or safetensors.
    #[command(after_help = MODEL_HELP)]
    Params(ParamsArgs),
    /// Draw an SVG chart: a memory breakdown, memory against size, or techniques.
    ///
    /// Draw the comparison as an SVG chart (--kind): a memory breakdown per
    /// optimizer, memory against model size, or the techniques that make one
    /// run fit.
    #[command(
        after_help = PLOT_HELP,
        mut_arg("format", |a| a.help("Output format: svg, the only one a chart has (the default)"))
    )]
    Plot(PlotArgs),
    /// Serve a local web page that computes with the same engine.
    Serve(ServeArgs),
    /// List the preset models with their exact parameter counts.
    Models(ModelsArgs),
    /// List the optimizers and the state each keeps.
    Optimizers(CatalogueArgs),
    /// List the precision recipes and their bytes.
    Precisions(CatalogueArgs),
    /// List the accelerators and their memory.
    Devices(CatalogueArgs),
    /// Print the JSON Schema of `estimate --format json`, for tools that read it.
    ///
    /// The JSON Schema (draft 2020-12) of `estimate --format json`.
    Schema,
    /// Print a shell completion script: bash, zsh, fish, elvish or powershell.
    #[command(after_help = COMPLETIONS_HELP)]
    Completions(CompletionsArgs),
}

const COMPLETIONS_HELP: &str = "\
Examples:
  trainmem completions bash > ~/.local/share/bash-completion/completions/trainmem
  trainmem completions zsh > ~/.zfunc/_trainmem       (with fpath+=~/.zfunc in ~/.zshrc)
  trainmem completions fish > ~/.config/fish/completions/trainmem.fish";

/// `trainmem completions`.
#[derive(Debug, Args, Clone, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_name = "SHELL")]
    pub shell: String,
}

/// How `trainmem models` is written.
#[derive(Debug, Args, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ModelsArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub output: OutputArgs,

    /// Add each preset's hugging face hub id, the repository its config.json
    /// was published in (a table wider than 100 columns; json, markdown and
    /// csv always have it).
    #[arg(long, short)]
    pub verbose: bool,
}

/// How a catalogue is written.
#[derive(Debug, Args, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct CatalogueArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub output: OutputArgs,

    /// Under the table, each entry's details: states, options, sources,
    /// summaries (json, markdown and csv always have them).
    #[arg(long, short)]
    pub verbose: bool,
}

pub use crate::request::flags::{
    CapacityArgs, FineTuneArgs, OutputArgs, ParallelArgs, ReportArgs, SpeedArgs, TrainingArgs,
    WorkloadArgs, at_least_one,
};
use crate::request::flags::{HARDWARE, MODEL, PRECISION, TRAINING};

/// `trainmem estimate`.
#[derive(Debug, Args, Clone, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct EstimateArgs {
    /// A bare parameter count instead of --model: 124M, 1.5B, 7B, 1T, 13e9 or 6738415616.
    #[arg(
        long,
        value_name = "N",
        allow_hyphen_values = true,
        conflicts_with = "model",
        help_heading = MODEL
    )]
    pub params: Option<String>,

    /// The model: a preset name (list: `trainmem models`), a config.json, a
    /// model folder, a .safetensors file, a model.safetensors.index.json or a
    /// hub id (`meta-llama/Llama-3.1-8B`): the local hugging face cache, else
    /// the hub's config.json and safetensors headers (never the weights).
    #[arg(long, value_name = "MODEL", help_heading = MODEL)]
    #[serde(default, deserialize_with = "os_text")]
    pub model: Option<OsString>,

    #[command(flatten)]
    #[serde(flatten)]
    pub training: TrainingArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub parallel: ParallelArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub finetune: FineTuneArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub workload: WorkloadArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub capacity: CapacityArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub speed: SpeedArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub report: ReportArgs,
}

const TECHNIQUES_HELP: &str = "\
Each row adds the flags shown to the run as given, alone (not on top of the rows above),
and is minimal: drop any one change and it does not fit. Its peak is exactly `trainmem
estimate` with them. Rows are ranked by what they give up: first the same training
(recomputation, the loss kernel, sharding, offloading, accumulation), then numerics
(precision, 8-bit states, the step in backward: no gradient clipping), then what is trained
(LoRA, QLoRA); then by step time, then by peak; more GPUs last. A row fits when what the
allocator reserves (memory.reserved, the overhead included) fits the capacity.

Examples:
  trainmem techniques --model llama-3.1-8b --optimizer adamw --precision mixed-bf16 \\
      --micro-batch 1 --seq-len 2048 --device rtx-4090-24gb
  trainmem techniques ... --output ladder.svg          the same steps as a chart
  trainmem techniques ... --format json                for scripts";

/// `trainmem techniques`: the estimate flags, and where to draw the chart.
#[derive(Debug, Args, Clone, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct TechniquesArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub estimate: EstimateArgs,

    /// Draw the steps as an SVG chart into this file (ending in .svg; `-` for stdout).
    #[arg(long, value_name = "FILE.svg", allow_hyphen_values = true)]
    pub output: Option<PathBuf>,
}

const CHECK_HELP: &str = "\
Formats, detected from their keys: HF TrainingArguments / TRL SFTConfig (JSON or YAML),
DeepSpeed JSON (`\"auto\"` filled from the TrainingArguments as the HF integration does),
accelerate config YAML, axolotl YAML, torchtune recipe configs, LLaMA-Factory YAML,
torchtitan job config TOML and litgpt finetune YAML.
A DeepSpeed config named by another file is read too, as DeepSpeed reads it (JSON, whatever
its name); of it only what it set is shown, never its values or its other keys (counted).
It is looked for from the current folder, then among the files given, then from the
config's folder and each folder above it (a repository root).
When no file names the sequence length (torchtune's `max_seq_len: null`), the answer is the
longest sequence that fits at the config's batch: verdict `fits-up-to` (exit 0).
Every key is listed with what it set; a key that changes memory in a way trainmem does not
model makes the verdict `unknown`. Flags given here complete or override the files.

Exit status: 0 fits (or fits up to a length), 1 does not fit or is tight (or unknown with
--strict), 2 bad input.

A run fits when memory.reserved, what PyTorch's caching allocator reserves (simulated,
the --overhead of 1 GiB included), fits the capacity, with no margin beyond that overhead:
runs run out of memory on what is reserved, not on what is allocated. A run whose allocated
peak fits and whose reserve does not is `tight` (exit 1 unless --allow-tight).

When it does not fit, the smallest sets of changes that make it fit are listed, each
applied alone to the run and priced exactly, cheapest first: cheapest means what gives
up least, so first those
that keep the training the same (recomputation, the loss kernel, sharding, offloading,
accumulation), then numerics (precision, 8-bit states, the step in backward: no gradient
clipping), then what is trained (LoRA, QLoRA); then by step time, then by peak; more GPUs
last. Each names the keys to change in your own file.

Examples:
  trainmem check axolotl.yaml --device h100-80gb && axolotl train axolotl.yaml
  trainmem check accelerate.yaml sft.yaml --model llama-3.1-8b --device a100-80gb
  trainmem check train_args.json ds_zero3.json --gpus 8 --device h100 --format json
  trainmem check llama3_1/8B_lora_single_device.yaml --device rtx-4090-24gb
  trainmem check axolotl.yaml --device rtx-4090-24gb --strict     unknown is a failure too";

/// `trainmem check`: launch configs, and any `estimate` flag to complete or override them.
#[derive(Debug, Args, Clone, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct CheckArgs {
    /// Launch configs: TrainingArguments/SFTConfig, DeepSpeed, accelerate, axolotl,
    /// torchtune, LLaMA-Factory, torchtitan or litgpt files.
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,

    /// Exit 1 when the verdict is unknown (a key changes memory in a way not modelled).
    #[arg(long)]
    pub strict: bool,

    #[command(flatten)]
    #[serde(flatten)]
    pub estimate: EstimateArgs,

    /// Exit 0 when the verdict is tight: the allocated peak fits, the
    /// allocator's reserve does not (the run may still run, or run out of
    /// memory on fragmentation).
    #[arg(long)]
    pub allow_tight: bool,
}

const PLAN_HELP: &str = "\
What is searched (--allow; default: all but offload):
  zero       DeepSpeed ZeRO 0-3 (pipeline stages only with ZeRO 0-1, no tp/cp)
  fsdp       FSDP2 no-shard, shard-grad-op, full-shard, hybrid-shard (across nodes)
  megatron   Megatron-LM, with or without the distributed optimizer (--zero 1)
  tp pp cp ep  tensor (within a node), pipeline (equal stages), context and expert degrees
  sp         sequence parallelism with tp
  recompute  none, selective (Megatron), op (torchtitan), full; full on every 2nd or
             4th layer only (torchtitan, torchtune: --recompute-every)
  loss       standard, chunked:8 (torchtune), fused (Liger); Megatron keeps its own
  offload    optimizer states (and parameters, ZeRO-3/FSDP) and activations in host
             memory; off by default: the step-time model does not price host transfers
A layout is kept when its peak (exactly `trainmem estimate`'s) leaves --headroom of
the capacity free. The rows shown (--top) also fit as `estimate` judges `fits`, on
reserved memory (memory.reserved: the caching allocator simulated for the ranked
layouts, best first, until --top fit); a layout whose reserve exceeds the capacity
is left out as tight (JSON: shown, reserved, fits_reserved, tight, reserve_simulations).
Kept layouts are ranked by tokens per second (the step-time model
of `estimate`: compute at an assumed MFU, exposed communication, pipeline bubble),
then without offload first, then by the lower peak, then the fewer flags. With
--global-batch B each layout runs B / dp sequences per rank and step as micro-batch x
accumulation; without it, --grad-accumulation (default 1) and micro-batches 1 to 128.

Examples:
  trainmem plan --model llama-3.1-8b --gpus 8 --device h100-80gb --seq-len 8192 \\
      --optimizer adamw --precision mixed-bf16
  trainmem plan --model llama-3.1-70b --nodes 8 --gpus-per-node 8 --device h100-80gb \\
      --seq-len 4096 --optimizer adamw --precision mixed-bf16 --global-batch 512
  trainmem plan ... --allow fsdp,tp,recompute         FSDP2 with tensor parallelism only
  trainmem plan ... --tp 8 --recompute selective      those axes fixed
  trainmem plan ... --format json                     every kept layout, for scripts";

/// `trainmem plan`: every `estimate` flag, and the search's own.
#[derive(Debug, Args, Clone, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct PlanArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub estimate: EstimateArgs,

    /// The axes the search opens, comma-separated: zero, fsdp, megatron, tp,
    /// pp, ep, cp, sp, recompute, loss, offload, or all [default: all but offload].
    #[arg(long, value_name = "LIST")]
    pub allow: Option<String>,

    /// Memory each GPU keeps free, as a share of its capacity: 5% or 0.05.
    #[arg(
        long,
        value_name = "SHARE",
        default_value = "5%",
        allow_hyphen_values = true
    )]
    pub headroom: String,

    /// Layouts shown in the table, markdown and csv (json gives every kept layout).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,

    /// Sequences per optimizer step over the whole job: each layout splits them
    /// into data-parallel ranks x micro-batch x accumulation.
    #[arg(long, value_name = "B", value_parser = at_least_one, allow_negative_numbers = true)]
    pub global_batch: Option<u64>,

    /// Worker threads for the search (the answer is the same for any count).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub jobs: usize,

    /// Price every candidate, pruning nothing: slower, and the same answer
    /// (the prunings are exact; this checks them).
    #[arg(long)]
    pub exhaustive: bool,
}

const TIMELINE_HELP: &str = "\
The peak of `trainmem estimate` is the maximum of this timeline: the model states the
step starts with, each layer's saved activations in forward, the loss, each layer freed
in backward as its gradients appear, and the optimizer step. Under ZeRO-3/FSDP each
layer is gathered before it runs and freed after it.

Examples:
  trainmem timeline --model llama-3.1-8b --precision mixed-bf16 --micro-batch 1 --seq-len 4096
  trainmem timeline --model llama-3.1-8b --gpus 8 --fsdp full-shard --micro-batch 2 \\
      --seq-len 8192 --output step.svg               memory over the step, as a chart
  trainmem timeline --model qwen2.5-7b --micro-batch 1 --seq-len 2048 --format json";

/// `trainmem timeline`: every flag of `estimate`, and where to draw it.
#[derive(Debug, Args, Clone, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct TimelineArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub estimate: EstimateArgs,

    /// Draw the timeline as an SVG chart into this file (ending in .svg; `-` for stdout).
    #[arg(long, value_name = "FILE.svg", allow_hyphen_values = true)]
    pub output: Option<PathBuf>,

    /// List every event in the table, not only the phases.
    #[arg(long)]
    pub events: bool,
}

/// `trainmem fit`.
#[derive(Debug, Args, Clone, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct FitArgs {
    /// Without a model: the largest parameter count that fits. With one:
    /// its largest micro-batch (given --seq-len), longest sequence (given
    /// --micro-batch) and the fewest GPUs. A preset, config.json, folder or safetensors.
    #[arg(long, value_name = "MODEL", conflicts_with = "params", help_heading = MODEL)]
    #[serde(default, deserialize_with = "os_text")]
    pub model: Option<OsString>,

    /// A bare parameter count (with --layers --hidden --heads --ffn --vocab for activations).
    #[arg(long, value_name = "N", allow_hyphen_values = true, help_heading = MODEL)]
    pub params: Option<String>,

    #[command(flatten)]
    #[serde(flatten)]
    pub training: TrainingArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub parallel: ParallelArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub finetune: FineTuneArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub workload: WorkloadArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub capacity: CapacityArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub report: ReportArgs,
}

/// `trainmem params`.
#[derive(Debug, Args, Clone, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ParamsArgs {
    /// A preset name, a config.json, a model folder, a .safetensors file, an index or a hub id.
    #[arg(value_name = "MODEL")]
    #[serde(default, deserialize_with = "os_text")]
    pub model: Option<OsString>,

    /// List every tensor: name, shape, role, parameters.
    #[arg(long)]
    pub tensors: bool,

    /// The task whose head to count: causal-lm, masked-lm, seq-cls:N,
    /// token-cls:N, seq2seq or embedding (default: the model type's own).
    #[arg(long, value_name = "TASK")]
    pub task: Option<String>,

    /// A vision model's image side in pixels (default: the config's
    /// image_size): its position embeddings one per patch.
    #[arg(long, value_name = "PX", value_parser = at_least_one, allow_negative_numbers = true)]
    pub image_size: Option<u64>,

    #[command(flatten)]
    #[serde(flatten)]
    pub output: OutputArgs,
}

const PLOT_HELP: &str = "\
Examples:
  trainmem plot --output chart.svg                     the default comparison as stacked bars at 7B
  trainmem plot --output scaling.svg --kind scaling    memory against model size, and the 80 GB line
  trainmem plot --output - > chart.svg                 the SVG on stdout
  trainmem plot --output qwen.svg --model qwen2.5-7b --optimizer all --device h100
  trainmem plot --output ladder.svg --kind techniques --model llama-3.1-8b --optimizer adamw \\
      --micro-batch 4 --seq-len 4096 --device rtx-4090-24gb   the techniques that make it fit";

/// `trainmem plot`: the compare flags, plus where and what to draw.
#[derive(Debug, Args, Clone, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct PlotArgs {
    /// The SVG file to write, ending in .svg; `-` writes the SVG to stdout.
    #[arg(long, value_name = "FILE.svg", allow_hyphen_values = true)]
    pub output: PathBuf,

    /// breakdown: stacked bars per optimizer with the capacity line; scaling:
    /// memory against model size per optimizer, crossing the capacity line at
    /// each optimizer's threshold; techniques: one run as given and with each
    /// smallest set of changes that fits (`trainmem techniques`; one
    /// --optimizer and a --model).
    #[arg(long, value_name = "KIND", default_value = "breakdown")]
    pub kind: String,

    #[command(flatten)]
    #[serde(flatten)]
    pub compare: CompareArgs,
}

/// `trainmem serve`.
#[derive(Debug, Args, Clone, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ServeArgs {
    /// The port to listen on.
    #[arg(long, default_value = "8080")]
    pub port: u16,

    /// The address to listen on; loopback unless you mean to share it.
    /// Requests must name it, or a loopback name, as their host.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
}

/// `trainmem compare` (and `trainmem` with no command, its defaults).
#[derive(Debug, Args, Clone, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct CompareArgs {
    /// Model sizes to price, comma-separated.
    #[arg(
        long,
        value_name = "LIST",
        default_value = "124M,1.5B,7B",
        allow_hyphen_values = true,
        help_heading = MODEL
    )]
    pub params: String,

    /// Compare on one model instead of --params sizes: a preset, a config.json,
    /// a model folder, a .safetensors file or an index.
    #[arg(long, value_name = "MODEL", help_heading = MODEL)]
    #[serde(default, deserialize_with = "os_text")]
    pub model: Option<OsString>,

    /// Optimizers to compare, comma-separated, or `all` (one for `plot --kind
    /// techniques`). `--optimizers`, the old spelling, is still taken.
    #[serde(rename = "optimizer")]
    #[arg(
        long = "optimizer",
        alias = "optimizers",
        value_name = "LIST",
        default_value = "sgd,sgd-momentum,rmsprop,adam",
        help_heading = TRAINING
    )]
    pub optimizers: String,

    /// Precision recipe of the comparison.
    #[arg(long, value_name = "NAME", default_value = "fp32", help_heading = PRECISION)]
    pub precision: String,

    /// Memory of one accelerator, such as 80GB or 80GiB [default: 80GB, the
    /// nominal memory of an A100 or H100 80GB].
    #[arg(
        long,
        value_name = "SIZE",
        conflicts_with = "device",
        allow_hyphen_values = true,
        help_heading = HARDWARE
    )]
    pub capacity: Option<String>,

    /// An accelerator from `trainmem devices`, instead of --capacity.
    #[arg(long, value_name = "NAME", help_heading = HARDWARE)]
    pub device: Option<String>,

    /// Price replacing one optimizer by another, as FROM,TO: the memory saved.
    #[arg(long, value_name = "FROM,TO", default_value = "adam,sgd-momentum")]
    pub swap: String,

    /// The model size at which the swap is priced [default: 1.5B, or the --model].
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub swap_at: Option<String>,

    /// Model sizes of the worked examples of M = P × V × B, the memory of
    /// gradients and optimizer states (parameters × values × bytes).
    #[arg(
        long,
        value_name = "LIST",
        default_value = "13B,1B",
        allow_hyphen_values = true
    )]
    pub slice_params: String,

    /// Precision of those worked examples (bf16: B = 2 bytes per value).
    #[arg(long, value_name = "NAME", default_value = "bf16", help_heading = PRECISION)]
    pub slice_precision: String,

    #[command(flatten)]
    #[serde(flatten)]
    pub parallel: ParallelArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub workload: WorkloadArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub report: ReportArgs,
}

impl CompareArgs {
    /// What `trainmem compare` takes with no flag: what `trainmem` alone prints.
    pub fn defaults() -> crate::error::Result<CompareArgs> {
        use clap::FromArgMatches;
        CompareArgs::augment_args(clap::Command::new("compare").no_binary_name(true))
            .try_get_matches_from(std::iter::empty::<OsString>())
            .and_then(|matches| CompareArgs::from_arg_matches(&matches))
            .map_err(|error| crate::error::Error::InvalidValue {
                what: "compare's defaults",
                value: String::new(),
                reason: error.to_string(),
            })
    }
}
