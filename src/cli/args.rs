//! The raw command line, as clap reads it: plain strings, validated later by
//! [`super::resolve`] into domain types.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

const ABOUT: &str = "How much memory training takes, piece by piece, and whether it fits.";

const LONG_ABOUT: &str = "\
How much memory training a neural network takes, piece by piece, and whether it fits.

Training memory = weights + master weights + gradients + optimizer states + activations.
The gradient-and-optimizer slice alone is M = P × V × B: parameters × values kept per
parameter (1 for SGD, 2 with momentum, 3 for Adam) × bytes per value.

With no command, trainmem compares the memory of SGD, SGD with momentum, RMSProp and Adam
at 124M, 1.5B and 7B parameters against an 80 GB accelerator (`trainmem compare`, whose
flags below change the sizes, optimizers, precision and capacity).";

const EXAMPLES: &str = "\
Examples:
  trainmem                                  SGD, momentum, RMSProp, Adam at 124M, 1.5B, 7B on 80 GB
  trainmem estimate --model llama-3.1-8b --optimizer adamw --precision mixed-bf16
  trainmem estimate --model llama-3.1-8b --micro-batch 1 --seq-len 4096 --device h100
  trainmem estimate --params 13B --optimizer adam --precision bf16 --format json
  trainmem fit --optimizer adam --precision fp32 --capacity 80GB
  trainmem compare --params 1B,13B,70B --precision mixed-bf16 --device h200
  trainmem params llama-2-7b                the exact parameter tensors of a model
  trainmem models | optimizers | precisions | devices        the names each flag accepts

Sizes: 80GB = 80 × 10^9 bytes, 80GiB = 80 × 2^30 bytes. Counts: 124M, 1.5B, 7B, 1T, 13e9, 6738415616.";

const MODEL_HELP: &str = "\
MODEL is any of:
  a preset name          trainmem params llama-2-7b            (list: trainmem models)
  a config.json          trainmem params path/to/config.json
  a model folder         trainmem params path/to/Llama-2-7b-hf  (config.json and/or safetensors)
  a .safetensors file    trainmem params model.safetensors      (header only, never the data)
  a sharded index        trainmem params model.safetensors.index.json
  a hub id               trainmem params meta-llama/Llama-3.1-8B  (the local hugging face
                         cache, else the preset published from it; nothing is downloaded)

A config.json is counted as transformers builds AutoModelForCausalLM for its model_type:
sum(p.numel() for p in model.parameters()), tied weights once. A checkpoint is counted
from its headers.";

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
    /// Compare optimizers' memory at several model sizes against one accelerator (the default).
    #[command(after_help = EXAMPLES)]
    Compare(CompareArgs),
    /// The training memory of one model, piece by piece.
    #[command(after_help = EXAMPLES)]
    Estimate(EstimateArgs),
    /// One training step as a sequence of allocations and frees: its phases,
    /// its peak and where it happens; `--output chart.svg` draws it.
    #[command(after_help = TIMELINE_HELP)]
    Timeline(TimelineArgs),
    /// Making it fit: the run priced again with one memory technique more at
    /// each step (recomputation, 8-bit states, LoRA, QLoRA, ...).
    #[command(after_help = TECHNIQUES_HELP)]
    Techniques(TechniquesArgs),
    /// Read launch configs (HF TrainingArguments, DeepSpeed, accelerate, axolotl,
    /// torchtune, LLaMA-Factory) and say whether the run fits: exit 0 fits, 1 does
    /// not fit, 2 bad input.
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
    /// Draw the comparison as an SVG chart: a memory breakdown or memory against model size.
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
    /// Print the JSON Schema (draft 2020-12) of `estimate --format json`, for tools that read it.
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
#[derive(Debug, Args, Clone)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_name = "SHELL")]
    pub shell: String,
}

/// How `trainmem models` is written.
#[derive(Debug, Args, Clone, Default)]
pub struct ModelsArgs {
    #[command(flatten)]
    pub output: OutputArgs,

    /// Add each preset's hugging face hub id, the repository its config.json
    /// was published in (a table wider than 100 columns; json, markdown and
    /// csv always have it).
    #[arg(long, short)]
    pub verbose: bool,
}

/// How a catalogue is written.
#[derive(Debug, Args, Clone, Default)]
pub struct CatalogueArgs {
    #[command(flatten)]
    pub output: OutputArgs,

    /// Under the table, each entry's details: states, options, sources,
    /// summaries (json, markdown and csv always have them).
    #[arg(long, short)]
    pub verbose: bool,
}

/// How a report is written.
#[derive(Debug, Args, Clone, Default)]
pub struct OutputArgs {
    /// Output format: table (the default), json, markdown or csv.
    #[arg(long, value_name = "FORMAT")]
    pub format: Option<String>,
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
    /// Optimizer: sgd, sgd-momentum, rmsprop, adam, adamw, lion, adafactor, adamw-8bit
    /// and more (`trainmem optimizers` lists them all).
    #[arg(long, value_name = "NAME", default_value = "adam")]
    pub optimizer: String,

    /// Precision recipe, from `trainmem precisions`: fp32, bf16, fp16, mixed-bf16,
    /// mixed-fp16, amp-bf16, amp-fp16.
    #[arg(long, value_name = "NAME", default_value = "fp32")]
    pub precision: String,

    /// An option of the optimizer that changes its state, as KEY=VALUE (repeatable):
    /// `rank=128` for galore-adamw, `beta1=0.9` for adafactor-hf, `fused=true`.
    /// `trainmem optimizers` lists each optimizer's options.
    #[arg(long = "optimizer-option", value_name = "KEY=VALUE")]
    pub optimizer_options: Vec<String>,

    /// Accumulate gradients in this dtype instead of the recipe's (fp32 with
    /// mixed-bf16 is Megatron's 18 bytes/param with Adam).
    #[arg(long, value_name = "DTYPE")]
    pub grad_dtype: Option<String>,

    /// Keep the master weights in this dtype, or `none` for no master copy.
    #[arg(long, value_name = "DTYPE")]
    pub master_dtype: Option<String>,

    /// Keep optimizer states in this dtype instead of the updated copy's.
    #[arg(long, value_name = "DTYPE")]
    pub state_dtype: Option<String>,
}

/// How training is spread over accelerators.
#[derive(Debug, Args, Clone, Default)]
pub struct ParallelArgs {
    /// Accelerators in all (data × tensor × pipeline parallel).
    #[arg(long, value_name = "N", default_value = "1", value_parser = at_least_one, allow_negative_numbers = true)]
    pub gpus: u64,

    /// Machines the GPUs sit in; host memory is reported per node
    /// [default: --gpus / --gpus-per-node, or 1 for up to a node's worth].
    #[arg(long, value_name = "M", value_parser = at_least_one, allow_negative_numbers = true)]
    pub nodes: Option<u64>,

    /// Accelerators per machine, to count the nodes when --nodes is not
    /// given [default: 8].
    #[arg(long, value_name = "N", value_parser = at_least_one, allow_negative_numbers = true)]
    pub gpus_per_node: Option<u64>,

    /// ZeRO stage: 0 plain data parallel, 1 shards optimizer states and master
    /// weights, 2 also gradients, 3 also weights.
    #[arg(long, value_name = "STAGE", conflicts_with = "fsdp")]
    pub zero: Option<String>,

    /// FSDP sharding strategy instead of --zero: no-shard, shard-grad-op,
    /// full-shard or hybrid-shard (implies --framework fsdp2).
    #[arg(long, value_name = "STRATEGY")]
    pub fsdp: Option<String>,

    /// Keep in host memory: none, optimizer (states and master weights), or
    /// optimizer+params (ZeRO-3 only).
    #[arg(long, value_name = "WHAT", default_value = "none")]
    pub offload: String,

    /// Tensor-parallel degree.
    #[arg(long, value_name = "N", default_value = "1", value_parser = at_least_one, allow_negative_numbers = true)]
    pub tp: u64,

    /// Pipeline-parallel stages.
    #[arg(long, value_name = "N", default_value = "1", value_parser = at_least_one, allow_negative_numbers = true)]
    pub pp: u64,

    /// Expert-parallel degree for MoE models.
    #[arg(long, value_name = "N", default_value = "1", value_parser = at_least_one, allow_negative_numbers = true)]
    pub ep: u64,

    /// Context parallelism: ring attention splits every sequence across N
    /// ranks (torch's context_parallel as torchtitan applies it; Megatron's
    /// CP with Transformer Engine). Each rank holds S/N tokens of every
    /// activation plus the ring's key/value buffers; the model states are
    /// sharded over dp × cp. The sequence must divide by 2N (load-balanced
    /// head-and-tail split).
    #[arg(long, value_name = "N", default_value = "1", value_parser = at_least_one, allow_negative_numbers = true, help_heading = TECHNIQUES)]
    pub cp: u64,

    /// Sequence parallelism with --tp: activations outside the tensor-parallel
    /// regions are split across the tensor-parallel ranks too.
    #[arg(long)]
    pub sequence_parallel: bool,

    /// The training framework whose memory layout is followed: deepspeed
    /// (default), megatron (fp32 gradient buffers), fsdp2 (sharded parameters
    /// in their original dtype; default with --fsdp) or fsdp1 (flat
    /// parameters; moves the whole model to each GPU before sharding unless
    /// --init says otherwise).
    #[arg(long, value_name = "NAME")]
    pub framework: Option<String>,

    /// How FSDP computes in half precision: policy (MixedPrecisionPolicy:
    /// each layer gathered in the compute dtype and freed after use, as
    /// torchtitan and accelerate do) or autocast (fp32 parameters under
    /// torch.autocast, which saves half copies of the linear weights).
    #[arg(long, value_name = "MODE", default_value = "policy")]
    pub fsdp_mixed_precision: String,

    /// How each rank first gets the weights: meta (only its shard: meta
    /// device, zero.Init), rank0 (rank 0 broadcasts module by module) or
    /// every-rank (the whole model on every GPU before sharding). Default:
    /// what the framework does (every-rank for fsdp1, meta otherwise).
    #[arg(long, value_name = "MODE")]
    pub init: Option<String>,

    /// DeepSpeed's reduce_bucket_size in elements (default 500000000, DeepSpeed's own).
    #[arg(long, value_name = "ELEMENTS")]
    pub reduce_bucket_size: Option<u64>,
}

/// Fine-tuning: LoRA adapters, frozen tensors, a quantized base.
#[derive(Debug, Args, Clone, Default)]
pub struct FineTuneArgs {
    /// LoRA rank r: adapters A (r × in) and B (out × r) on each targeted
    /// linear, as peft creates them; the base is frozen.
    #[arg(long, value_name = "R", value_parser = at_least_one, allow_negative_numbers = true)]
    pub lora_rank: Option<u64>,

    /// Linear modules that get adapters: `all-linear` (every linear but the
    /// output head, as peft) or names such as `q_proj,v_proj`.
    #[arg(
        long,
        value_name = "LIST",
        default_value = "all-linear",
        requires = "lora_rank"
    )]
    pub lora_targets: String,

    /// Which biases train with LoRA: none, all or lora-only.
    #[arg(
        long,
        value_name = "WHICH",
        default_value = "none",
        requires = "lora_rank"
    )]
    pub lora_bias: String,

    /// Modules trained in full beside the adapters (peft's modules_to_save), such as `lm_head`.
    #[arg(long, value_name = "LIST", requires = "lora_rank")]
    pub lora_modules_to_save: Option<String>,

    /// DoRA: a magnitude vector per targeted linear.
    #[arg(long, requires = "lora_rank")]
    pub lora_dora: bool,

    /// peft's lora_dropout: the probability of the nn.Dropout before each
    /// adapter's lora_A. Above 0 each adapter saves its own dropped input
    /// (T x in) and the dropout mask instead of sharing the layer's input.
    /// 0 is peft's default (nn.Identity); axolotl configs often use 0.05.
    #[arg(
        long,
        value_name = "P",
        default_value = "0",
        requires = "lora_rank",
        allow_hyphen_values = true,
        help_heading = TECHNIQUES
    )]
    pub lora_dropout: String,

    /// The dtype the adapters are kept and trained in: fp32 (peft's
    /// default, autocast_adapter_dtype=True: under a bf16 base each adapter
    /// then saves an fp32 copy of its input), bf16 or fp16 (torchtune and
    /// litgpt keep adapters in the base dtype). Sets the adapters' weights,
    /// gradients and optimizer states.
    #[arg(
        long,
        value_name = "DTYPE",
        default_value = "fp32",
        requires = "lora_rank",
        help_heading = TECHNIQUES
    )]
    pub lora_dtype: String,

    /// Freeze tensors whose name matches (substring, or glob with `*`), for
    /// full fine-tuning with parts frozen; repeatable. On a vision-language
    /// model, `vision_tower`, `multi_modal_projector` and `language_model`
    /// name its parts whatever its own prefixes; with LoRA, frozen modules
    /// get no adapters.
    #[arg(long, value_name = "PATTERN")]
    pub freeze: Vec<String>,

    /// Store the frozen base's linear weights quantized as bitsandbytes does:
    /// nf4, fp4 (QLoRA) or int8; needs --lora-rank.
    #[arg(long, value_name = "KIND")]
    pub quantize: Option<String>,

    /// Double quantization of the 4-bit absmax (on with the bare flag).
    #[arg(long, value_name = "on|off", num_args = 0..=1, default_missing_value = "on", default_value = "off")]
    pub double_quant: String,
}

/// The `--help` heading of the memory techniques people turn on to make a
/// run fit (recomputation, the loss kernel, offloading, ...): every such flag
/// carries `help_heading = TECHNIQUES`, whichever group it belongs to.
pub const TECHNIQUES: &str = "Memory techniques";

/// One micro-step's shape, for activation memory, and the architecture of a bare
/// parameter count.
#[derive(Debug, Args, Clone, Default)]
pub struct WorkloadArgs {
    /// Sequences per micro-batch (per accelerator); with --seq-len, activations are estimated.
    #[arg(long, value_name = "B", value_parser = at_least_one, allow_negative_numbers = true)]
    pub micro_batch: Option<u64>,

    /// Tokens per sequence.
    #[arg(long, value_name = "S", value_parser = at_least_one, allow_negative_numbers = true)]
    pub seq_len: Option<u64>,

    /// What the model is trained for, and so the head transformers puts on
    /// it: causal-lm (AutoModelForCausalLM, the decoders' default),
    /// masked-lm (AutoModelForMaskedLM, the encoders' default), seq-cls:N
    /// and token-cls:N (sequence and token classification over N labels),
    /// seq2seq, or embedding (the bare AutoModel).
    #[arg(long, value_name = "TASK")]
    pub task: Option<String>,

    /// A vision model's image side in pixels (default: the config's
    /// image_size): the model as transformers builds it for that size,
    /// its position embeddings one per patch.
    #[arg(long, value_name = "PX", value_parser = at_least_one, allow_negative_numbers = true)]
    pub image_size: Option<u64>,

    /// Images per sample for a vision model (default 1): each is a
    /// sequence of its patches (+ the CLS token), so the micro-batch holds
    /// B x N of them; a vision-language model's image tokens are part of
    /// each sample's --seq-len instead.
    #[arg(long, value_name = "N", value_parser = at_least_one, allow_negative_numbers = true)]
    pub images: Option<u64>,

    /// Tokens per image for Qwen2-VL and Qwen2.5-VL, whose resolution is
    /// dynamic: after the 2x2 merge, so N tokens are 4N patches of 14 px
    /// (256 for a 448 x 448 px image); the report says the pixels.
    #[arg(long, value_name = "N", value_parser = at_least_one, allow_negative_numbers = true)]
    pub image_tokens: Option<u64>,

    /// An encoder-decoder's (T5, BART, Whisper) decoder tokens per
    /// sequence: the labels' length, which the decoder reads shifted right
    /// (default: --seq-len, the encoder's input tokens; Whisper's encoder
    /// always holds its 1,500 audio positions).
    #[arg(long, value_name = "T", value_parser = at_least_one, allow_negative_numbers = true)]
    pub target_len: Option<u64>,

    /// Seconds of audio per sample for Whisper (default 30): 100 log-mel
    /// frames a second, halved into encoder positions by the encoder's
    /// stride-2 convolution. WhisperEncoder takes exactly
    /// max_source_positions x 2 frames (30 s for every published model).
    #[arg(long, value_name = "SECONDS", value_parser = at_least_one, allow_negative_numbers = true)]
    pub audio_seconds: Option<u64>,

    /// Attention implementation: eager (saves the softmax), sdpa or flash.
    #[arg(long, value_name = "KIND", default_value = "sdpa")]
    pub attention: String,

    /// Activation recomputation: none; selective (Megatron: the attention
    /// core is rebuilt in backward); op (torchtitan's per-op policy: each
    /// layer keeps its input, the sdpa output and every second matmul's
    /// output, norms and pointwise ops are rebuilt; Llama/Mistral layers with
    /// sdpa); full (gradient checkpointing: each layer keeps only its input).
    #[arg(long, value_name = "MODE", default_value = "none", help_heading = TECHNIQUES)]
    pub recompute: String,

    /// Checkpoint only every N-th decoder layer, those whose 1-based index is
    /// a multiple of N (torchtune's and torchtitan's layer option); the
    /// others keep all their activations. Needs --recompute full; 1 is every
    /// layer.
    #[arg(long, value_name = "N", default_value = "1", value_parser = at_least_one, allow_negative_numbers = true, help_heading = TECHNIQUES)]
    pub recompute_every: u64,

    /// Full checkpointing with `use_reentrant=True` (transformers'
    /// default before it switched to False; Trainer runs that pass no
    /// `gradient_checkpointing_kwargs`): each layer's backward re-runs the
    /// whole layer and holds its output too. Needs --recompute full.
    #[arg(long, help_heading = TECHNIQUES)]
    pub recompute_reentrant: bool,

    /// The loss function: standard (transformers' ForCausalLMLoss: the whole
    /// logits plus their fp32 copy); shift-copy (the same up to
    /// transformers 4.48, which also copied the shifted fp32 logits);
    /// chunked:N (torchtune's
    /// CEWithChunkedOutputLoss: the output projection in N chunks of the
    /// sequence, each upcast to fp32 alone; torchtune's default N is 8);
    /// fused (Liger's fused linear-cross-entropy on CUDA: the logits are
    /// never materialized whole; on CPU, cut-cross-entropy's torch.compile
    /// path, which keeps them in their own dtype without an fp32 copy).
    #[arg(long, value_name = "LOSS", default_value = "standard", help_heading = TECHNIQUES)]
    pub loss: String,

    /// Activation offloading: every saved tensor of at least 1024 bytes
    /// (parameters aside) is copied to pinned host memory in forward and
    /// brought back in backward, as torchtune's OffloadActivations does
    /// around the decoder (the output head and the loss stay on the device;
    /// on CUDA a second stream keeps the last packs and one node's tensors
    /// a little longer). With --recompute full only the checkpointed layer
    /// inputs move (DeepSpeed's cpu_checkpointing). Off by default.
    #[arg(long, help_heading = TECHNIQUES)]
    pub offload_activations: bool,

    /// torch.compile: refused. Inductor's min-cut partitioner decides per
    /// traced graph which activations to save and which to recompute, and
    /// fuses pointwise ops; its choice cannot be predicted from the
    /// architecture, so trainmem prices the eager step only.
    #[arg(long, help_heading = TECHNIQUES)]
    pub compile: bool,

    /// Memory lost beyond the tensors, added to the peak: CUDA context and
    /// allocator fragmentation. Default 1GiB when activations are estimated;
    /// 0 gives what torch.cuda.max_memory_allocated() reports.
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true)]
    pub overhead: Option<String>,

    /// Micro-batches whose gradients accumulate before each optimizer step:
    /// the gradients then exist before each backward.
    #[arg(long, value_name = "N", default_value = "1", value_parser = at_least_one, allow_negative_numbers = true)]
    pub grad_accumulation: u64,

    /// Step each parameter inside backward as soon as its gradient is
    /// produced, and free the gradient at once: torchtune's
    /// optimizer_in_bwd (one optimizer per parameter in a
    /// post-accumulate-grad hook), GaLore's per-layer updates with
    /// galore-adamw or galore-adamw-8bit. No full gradient copy exists; no
    /// gradient clipping or accumulation; single device or FSDP2 only.
    /// Default: off (LOMO and AdaLomo always update in backward).
    #[arg(long, help_heading = TECHNIQUES)]
    pub optimizer_in_backward: bool,

    /// Where the kernels run: cuda, or cpu (the CPU kernels the activation
    /// fixtures measure to the byte, so a prediction can be checked against
    /// autograd on a laptop; no overhead by default).
    #[arg(long, value_name = "PLATFORM", default_value = "cuda")]
    pub platform: String,

    /// The bitsandbytes version of a QLoRA run: before 0.43.2 each 4-bit
    /// matmul kept its input for backward (default: a current version).
    #[arg(long, value_name = "VERSION")]
    pub bitsandbytes: Option<String>,

    /// PyTorch's allocator with expandable_segments:True, for memory.reserved.
    #[arg(long)]
    pub expandable_segments: bool,

    /// Decoder layers of a bare --params model (with --hidden, --heads, --ffn, --vocab).
    #[arg(long, value_name = "N", value_parser = at_least_one, allow_negative_numbers = true)]
    pub layers: Option<u64>,

    /// Hidden size of a bare --params model.
    #[arg(long, value_name = "N", value_parser = at_least_one, allow_negative_numbers = true)]
    pub hidden: Option<u64>,

    /// Attention heads of a bare --params model.
    #[arg(long, value_name = "N", value_parser = at_least_one, allow_negative_numbers = true)]
    pub heads: Option<u64>,

    /// Key/value heads of a bare --params model (default: --heads).
    #[arg(long, value_name = "N", value_parser = at_least_one, allow_negative_numbers = true)]
    pub kv_heads: Option<u64>,

    /// MLP intermediate size of a bare --params model.
    #[arg(long, value_name = "N", value_parser = at_least_one, allow_negative_numbers = true)]
    pub ffn: Option<u64>,

    /// Vocabulary size of a bare --params model.
    #[arg(long, value_name = "N", value_parser = at_least_one, allow_negative_numbers = true)]
    pub vocab: Option<u64>,
}

/// `trainmem estimate`.
#[derive(Debug, Args, Clone)]
pub struct EstimateArgs {
    /// A bare parameter count instead of --model: 124M, 1.5B, 7B, 1T, 13e9 or 6738415616.
    #[arg(
        long,
        value_name = "N",
        allow_hyphen_values = true,
        conflicts_with = "model"
    )]
    pub params: Option<String>,

    /// The model: a preset name (list: `trainmem models`), a config.json, a
    /// model folder, a .safetensors file, a model.safetensors.index.json or a
    /// hub id read from the local hugging face cache (`meta-llama/Llama-3.1-8B`).
    #[arg(long, value_name = "MODEL")]
    pub model: Option<OsString>,

    #[command(flatten)]
    pub training: TrainingArgs,

    #[command(flatten)]
    pub parallel: ParallelArgs,

    #[command(flatten)]
    pub finetune: FineTuneArgs,

    #[command(flatten)]
    pub workload: WorkloadArgs,

    #[command(flatten)]
    pub capacity: CapacityArgs,

    #[command(flatten)]
    pub speed: SpeedArgs,

    #[command(flatten)]
    pub report: ReportArgs,
}

/// What the step-time model prices a step at, beyond `--device`'s datasheet.
#[derive(Debug, Args, Clone, Default)]
pub struct SpeedArgs {
    /// The share of the matmul peak the step's executed FLOPs reach, e.g.
    /// 0.45 or 45% (default: by hidden size, 44% to 64%, from Megatron-LM's
    /// A100 runs in Korthikanti et al. 2022 Table 5).
    #[arg(long, value_name = "FRACTION", allow_hyphen_values = true)]
    pub mfu: Option<String>,

    /// Dense bf16 peak of one accelerator in TFLOP/s, for --capacity or to
    /// override --device's datasheet figure.
    #[arg(long, value_name = "TFLOPS", allow_hyphen_values = true)]
    pub peak_tflops: Option<String>,

    /// One direction of a GPU's link inside its node, e.g. 450GB/s
    /// (default: --device's NVLink figure).
    #[arg(long, value_name = "SIZE/s", allow_hyphen_values = true)]
    pub intra_node_bandwidth: Option<String>,

    /// One direction of a GPU's share of the network between nodes, e.g.
    /// 50GB/s (default: --device's reference system, one 400 Gb/s NIC per GPU on H100).
    #[arg(long, value_name = "SIZE/s", allow_hyphen_values = true)]
    pub inter_node_bandwidth: Option<String>,

    /// Virtual pipeline stages per rank (Megatron's interleaved 1F1B): the
    /// bubble is (pp - 1) / (virtual-stages x micro-batches).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub virtual_stages: u64,
}

const TECHNIQUES_HELP: &str = "\
Each step keeps the techniques before it and adds the flags shown; its peak is exactly
`trainmem estimate` with all of them. Techniques the run already has are skipped.

Examples:
  trainmem techniques --model llama-3.1-8b --optimizer adamw --precision mixed-bf16 \\
      --micro-batch 1 --seq-len 2048 --device rtx-4090-24gb
  trainmem techniques ... --output ladder.svg          the same steps as a chart
  trainmem techniques ... --format json                for scripts";

/// `trainmem techniques`: the estimate flags, and where to draw the chart.
#[derive(Debug, Args, Clone)]
pub struct TechniquesArgs {
    #[command(flatten)]
    pub estimate: EstimateArgs,

    /// Draw the steps as an SVG chart into this file (ending in .svg; `-` for stdout).
    #[arg(long, value_name = "FILE.svg", allow_hyphen_values = true)]
    pub output: Option<PathBuf>,
}

const CHECK_HELP: &str = "\
Formats, detected from their keys: HF TrainingArguments / TRL SFTConfig (JSON or YAML),
DeepSpeed JSON (`\"auto\"` filled from the TrainingArguments as the HF integration does),
accelerate config YAML, axolotl YAML, torchtune recipe configs and LLaMA-Factory YAML.
A DeepSpeed config named by another file is read too. Every key is listed with what it
set; a key that changes memory in a way trainmem does not model makes the verdict
`unknown`. Flags given here complete or override the files.

Exit status: 0 fits, 1 does not fit (or unknown with --strict), 2 bad input.

When it does not fit, the single changes that make it fit are listed, cheapest first:
cheapest means what costs the run least, in this order: a smaller micro-batch with more
accumulation (the same global batch), Liger's fused loss, full recomputation (about a
third more compute), activations offloaded to the host, a higher ZeRO stage or FSDP full
sharding (communication; more than one GPU), the optimizer states in host memory, 8-bit
AdamW, LoRA r16, QLoRA. Each names the key to change in your own file.

Examples:
  trainmem check axolotl.yaml --device h100-80gb && axolotl train axolotl.yaml
  trainmem check accelerate.yaml sft.yaml --model llama-3.1-8b --device a100-80gb
  trainmem check train_args.json ds_zero3.json --gpus 8 --device h100 --format json
  trainmem check llama3_1/8B_lora_single_device.yaml --device rtx-4090-24gb
  trainmem check axolotl.yaml --device rtx-4090-24gb --strict     unknown is a failure too";

/// `trainmem check`: launch configs, and any `estimate` flag to complete or override them.
#[derive(Debug, Args, Clone)]
pub struct CheckArgs {
    /// Launch configs: TrainingArguments/SFTConfig, DeepSpeed, accelerate, axolotl,
    /// torchtune or LLaMA-Factory files.
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,

    /// Exit 1 when the verdict is unknown (a key changes memory in a way not modelled).
    #[arg(long)]
    pub strict: bool,

    #[command(flatten)]
    pub estimate: EstimateArgs,
}

const PLAN_HELP: &str = "\
What is searched (--allow; default: all but offload):
  zero       DeepSpeed ZeRO 0-3 (pipeline stages only with ZeRO 0-1, no tp/cp)
  fsdp       FSDP2 no-shard, shard-grad-op, full-shard, hybrid-shard (across nodes)
  megatron   Megatron-LM, with or without the distributed optimizer (--zero 1)
  tp pp cp ep  tensor (within a node), pipeline (equal stages), context and expert degrees
  sp         sequence parallelism with tp
  recompute  none, selective (Megatron), op (torchtitan), full
  loss       standard, chunked:8 (torchtune), fused (Liger); Megatron keeps its own
  offload    optimizer states (and parameters, ZeRO-3/FSDP) and activations in host
             memory; off by default: the step-time model does not price host transfers
A layout is kept when its peak (exactly `trainmem estimate`'s) leaves --headroom of
the capacity free. Kept layouts are ranked by tokens per second (the step-time model
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
#[derive(Debug, Args, Clone)]
pub struct PlanArgs {
    #[command(flatten)]
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
#[derive(Debug, Args, Clone)]
pub struct TimelineArgs {
    #[command(flatten)]
    pub estimate: EstimateArgs,

    /// Draw the timeline as an SVG chart into this file (ending in .svg; `-` for stdout).
    #[arg(long, value_name = "FILE.svg", allow_hyphen_values = true)]
    pub output: Option<PathBuf>,

    /// List every event in the table, not only the phases.
    #[arg(long)]
    pub events: bool,
}

/// `trainmem fit`.
#[derive(Debug, Args, Clone)]
pub struct FitArgs {
    /// Without a model: the largest parameter count that fits. With one:
    /// its largest micro-batch (given --seq-len), longest sequence (given
    /// --micro-batch) and the fewest GPUs. A preset, config.json, folder or safetensors.
    #[arg(long, value_name = "MODEL", conflicts_with = "params")]
    pub model: Option<OsString>,

    /// A bare parameter count (with --layers --hidden --heads --ffn --vocab for activations).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub params: Option<String>,

    #[command(flatten)]
    pub training: TrainingArgs,

    #[command(flatten)]
    pub parallel: ParallelArgs,

    #[command(flatten)]
    pub finetune: FineTuneArgs,

    #[command(flatten)]
    pub workload: WorkloadArgs,

    #[command(flatten)]
    pub capacity: CapacityArgs,

    #[command(flatten)]
    pub report: ReportArgs,
}

/// `trainmem params`.
#[derive(Debug, Args, Clone)]
pub struct ParamsArgs {
    /// A preset name, a config.json, a model folder, a .safetensors file, an index or a hub id.
    #[arg(value_name = "MODEL")]
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
    pub output: OutputArgs,
}

const PLOT_HELP: &str = "\
Examples:
  trainmem plot --output chart.svg                     the default comparison as stacked bars at 7B
  trainmem plot --output scaling.svg --kind scaling    memory against model size, and the 80 GB line
  trainmem plot --output - > chart.svg                 the SVG on stdout
  trainmem plot --output qwen.svg --model qwen2.5-7b --optimizers all --device h100";

/// `trainmem plot`: the compare flags, plus where and what to draw.
#[derive(Debug, Args, Clone)]
pub struct PlotArgs {
    /// The SVG file to write, ending in .svg; `-` writes the SVG to stdout.
    #[arg(long, value_name = "FILE.svg", allow_hyphen_values = true)]
    pub output: PathBuf,

    /// breakdown: stacked bars per optimizer with the capacity line; scaling:
    /// memory against model size per optimizer, crossing the capacity line at
    /// each optimizer's threshold.
    #[arg(long, value_name = "KIND", default_value = "breakdown")]
    pub kind: String,

    #[command(flatten)]
    pub compare: CompareArgs,
}

/// `trainmem serve`.
#[derive(Debug, Args, Clone)]
pub struct ServeArgs {
    /// The port to listen on.
    #[arg(long, default_value = "8080")]
    pub port: u16,

    /// The address to listen on; loopback unless you mean to share it.
    /// Requests must name it, or a loopback name, as their host.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
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

    /// Compare on one model instead of --params sizes: a preset, a config.json,
    /// a model folder, a .safetensors file or an index.
    #[arg(long, value_name = "MODEL")]
    pub model: Option<OsString>,

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

    /// Memory of one accelerator, such as 80GB or 80GiB [default: 80GB, the
    /// nominal memory of an A100 or H100 80GB].
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
    #[arg(long, value_name = "NAME", default_value = "bf16")]
    pub slice_precision: String,

    #[command(flatten)]
    pub parallel: ParallelArgs,

    #[command(flatten)]
    pub workload: WorkloadArgs,

    #[command(flatten)]
    pub report: ReportArgs,
}

/// A whole number of at least 1 (a GPU count, a degree, a size): the parser
/// of every numeric flag, so `--gpus -1` is named and explained rather than
/// taken for an unknown flag.
fn at_least_one(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(value) if value >= 1 => Ok(value),
        _ => Err("must be a whole number ≥ 1".to_string()),
    }
}
