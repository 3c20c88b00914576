//! The flags of a run, in groups: what `trainmem estimate` (and every
//! command that prices a run) takes on the command line, and what the web
//! API takes as JSON keys. One struct per group carries both clap's and
//! serde's derive, so the two front doors fill the same typed values.
//!
//! JSON keys are the flags' long names in kebab-case (`micro-batch`,
//! `optimizer-option`); see [`super::EstimateRequest::from_json`].

use clap::Args;
use serde::{Deserialize, Serialize};

/// How a report is written.
#[derive(Debug, Args, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct OutputArgs {
    /// Output format: table (the default), json, markdown or csv.
    #[arg(long, value_name = "FORMAT", help_heading = OUTPUT)]
    pub format: Option<String>,
}

/// Units and format of a memory report.
#[derive(Debug, Args, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ReportArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub output: OutputArgs,

    /// Units for sizes: gb (10^9 bytes) or gib (2^30 bytes). Default: gib when
    /// the capacity was given in binary units, else gb.
    #[arg(long, value_name = "UNITS", help_heading = OUTPUT)]
    pub units: Option<String>,
}

/// The accelerator to check against.
#[derive(Debug, Args, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct CapacityArgs {
    /// Memory of one accelerator, e.g. 80GB (10^9 bytes) or 80GiB (2^30 bytes).
    #[arg(
        long,
        value_name = "SIZE",
        conflicts_with = "device",
        allow_hyphen_values = true,
        help_heading = HARDWARE
    )]
    pub capacity: Option<String>,

    /// An accelerator from `trainmem devices`, e.g. h100-80gb, a100-40gb, h200.
    #[arg(long, value_name = "NAME", help_heading = HARDWARE)]
    pub device: Option<String>,
}

/// The optimizer and precision of a run.
#[derive(Debug, Args, Clone, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct TrainingArgs {
    /// Optimizer: sgd, sgd-momentum, rmsprop, adam, adamw, lion, adafactor, adamw-8bit
    /// and more (`trainmem optimizers` lists them all).
    #[arg(long, value_name = "NAME", default_value = "adam", help_heading = TRAINING)]
    pub optimizer: String,

    /// Precision recipe, from `trainmem precisions`: fp32, bf16, fp16, mixed-bf16,
    /// mixed-fp16, amp-bf16, amp-fp16.
    #[arg(long, value_name = "NAME", default_value = "fp32", help_heading = PRECISION)]
    pub precision: String,

    /// An option of the optimizer that changes its state, as KEY=VALUE (repeatable):
    /// `rank=128` for galore-adamw, `beta1=0.9` for adafactor-hf, `fused=true`.
    /// `trainmem optimizers` lists each optimizer's options.
    #[serde(rename = "optimizer-option")]
    #[arg(long = "optimizer-option", value_name = "KEY=VALUE", help_heading = TRAINING)]
    pub optimizer_options: Vec<String>,

    /// Accumulate gradients in this dtype instead of the recipe's (fp32 with
    /// mixed-bf16 is Megatron's 18 bytes/param with Adam).
    #[arg(long, value_name = "DTYPE", help_heading = PRECISION)]
    pub grad_dtype: Option<String>,

    /// Keep the master weights in this dtype, or `none` for no master copy.
    #[arg(long, value_name = "DTYPE", help_heading = PRECISION)]
    pub master_dtype: Option<String>,

    /// Keep optimizer states in this dtype instead of the updated copy's.
    #[arg(long, value_name = "DTYPE", help_heading = PRECISION)]
    pub state_dtype: Option<String>,
}

/// How training is spread over accelerators.
#[derive(Debug, Args, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ParallelArgs {
    /// Accelerators in all (data × tensor × pipeline parallel).
    #[arg(long, value_name = "N", default_value = "1", value_parser = at_least_one, allow_negative_numbers = true, help_heading = PARALLELISM)]
    pub gpus: u64,

    /// Machines the GPUs sit in; host memory is reported per node
    /// [default: --gpus / --gpus-per-node, or 1 for up to a node's worth].
    #[arg(long, value_name = "M", value_parser = at_least_one, allow_negative_numbers = true, help_heading = PARALLELISM)]
    pub nodes: Option<u64>,

    /// Accelerators per machine, to count the nodes when --nodes is not
    /// given [default: 8].
    #[arg(long, value_name = "N", value_parser = at_least_one, allow_negative_numbers = true, help_heading = PARALLELISM)]
    pub gpus_per_node: Option<u64>,

    /// ZeRO stage: 0 plain data parallel, 1 shards optimizer states and master
    /// weights, 2 also gradients, 3 also weights.
    #[arg(long, value_name = "STAGE", conflicts_with = "fsdp", help_heading = PARALLELISM)]
    pub zero: Option<String>,

    /// FSDP sharding strategy instead of --zero: no-shard, shard-grad-op,
    /// full-shard or hybrid-shard (implies --framework fsdp2).
    #[arg(long, value_name = "STRATEGY", help_heading = PARALLELISM)]
    pub fsdp: Option<String>,

    /// Keep in host memory: none, optimizer (states and master weights), or
    /// optimizer+params (ZeRO-3 only).
    #[arg(long, value_name = "WHAT", default_value = "none", help_heading = TECHNIQUES)]
    pub offload: String,

    /// Tensor-parallel degree.
    #[arg(long, value_name = "N", default_value = "1", value_parser = at_least_one, allow_negative_numbers = true, help_heading = PARALLELISM)]
    pub tp: u64,

    /// Pipeline-parallel stages.
    #[arg(long, value_name = "N", default_value = "1", value_parser = at_least_one, allow_negative_numbers = true, help_heading = PARALLELISM)]
    pub pp: u64,

    /// Expert-parallel degree for MoE models.
    #[arg(long, value_name = "N", default_value = "1", value_parser = at_least_one, allow_negative_numbers = true, help_heading = PARALLELISM)]
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
    #[arg(long, help_heading = PARALLELISM)]
    pub sequence_parallel: bool,

    /// The training framework whose memory layout is followed: deepspeed
    /// (default), megatron (fp32 gradient buffers), fsdp2 (sharded parameters
    /// in their original dtype; default with --fsdp) or fsdp1 (flat
    /// parameters; moves, flattens and shards one wrapped unit at a time
    /// unless --init says otherwise).
    #[arg(long, value_name = "NAME", help_heading = PARALLELISM)]
    pub framework: Option<String>,

    /// How FSDP computes in half precision: policy (MixedPrecisionPolicy:
    /// each layer gathered in the compute dtype and freed after use, as
    /// torchtitan and accelerate do) or autocast (fp32 parameters under
    /// torch.autocast, which saves half copies of the linear weights).
    #[arg(long, value_name = "MODE", default_value = "policy", help_heading = PARALLELISM)]
    pub fsdp_mixed_precision: String,

    /// How each rank first gets the weights: meta (only its shard: meta
    /// device, zero.Init), rank0 (rank 0 broadcasts module by module),
    /// every-rank (the whole model on every GPU before sharding: a model
    /// moved to the GPU before FSDP1 wraps it) or per-unit (FSDP1 with
    /// device_id around a model in host memory: each wrapped unit moved,
    /// flattened and sharded in turn). Default: what the framework does
    /// (per-unit for fsdp1 with --implementation transformers, meta
    /// otherwise).
    #[arg(long, value_name = "MODE", help_heading = PARALLELISM)]
    pub init: Option<String>,

    /// DeepSpeed's reduce_bucket_size in elements (default 500000000, DeepSpeed's own).
    #[arg(long, value_name = "ELEMENTS", help_heading = PARALLELISM)]
    pub reduce_bucket_size: Option<u64>,
}

/// Fine-tuning: LoRA adapters, frozen tensors, a quantized base.
#[derive(Debug, Args, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct FineTuneArgs {
    /// LoRA rank r: adapters A (r × in) and B (out × r) on each targeted
    /// linear, as peft creates them; the base is frozen.
    #[arg(long, value_name = "R", value_parser = at_least_one, allow_negative_numbers = true, help_heading = FINE_TUNING)]
    pub lora_rank: Option<u64>,

    /// Linear modules that get adapters: `all-linear` (every linear but the
    /// output head, as peft) or names such as `q_proj,v_proj`.
    #[arg(
        long,
        value_name = "LIST",
        default_value = "all-linear",
        requires = "lora_rank",
        help_heading = FINE_TUNING
    )]
    pub lora_targets: String,

    /// Which biases train with LoRA: none, all or lora-only.
    #[arg(
        long,
        value_name = "WHICH",
        default_value = "none",
        requires = "lora_rank",
        help_heading = FINE_TUNING
    )]
    pub lora_bias: String,

    /// Modules trained in full beside the adapters (peft's modules_to_save), such as `lm_head`.
    #[arg(long, value_name = "LIST", requires = "lora_rank", help_heading = FINE_TUNING)]
    pub lora_modules_to_save: Option<String>,

    /// DoRA: a magnitude vector per targeted linear.
    #[arg(long, requires = "lora_rank", help_heading = FINE_TUNING)]
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
    #[arg(long, value_name = "PATTERN", help_heading = FINE_TUNING)]
    pub freeze: Vec<String>,

    /// Store the frozen base's linear weights quantized as bitsandbytes does:
    /// nf4, fp4 (QLoRA) or int8; or nf4-torchao (torchao's NF4Tensor, as
    /// torchtune's QLoRA: int8 scalers per 64 values, one factor per 256
    /// scalers); or nf4-torchao-0.1 (torchao 0.1, torchtune's QLoRA until May
    /// 2024: a bf16 factor per 64 values, and with --implementation torchtune
    /// the model setup that quantizes whole weights at once). Needs --lora-rank.
    /// After peft's prepare_model_for_kbit_training (which upcasts every
    /// weight that is not 4-bit to fp32) under HF Trainer's bf16=True, give
    /// --precision amp-bf16.
    #[arg(long, value_name = "KIND", help_heading = FINE_TUNING)]
    pub quantize: Option<String>,

    /// Double quantization of the 4-bit absmax (on with the bare flag).
    #[arg(long, value_name = "on|off", num_args = 0..=1, default_missing_value = "on", default_value = "off", help_heading = FINE_TUNING)]
    pub double_quant: String,
}

/// The `--help` heading of the memory techniques people turn on to make a
/// run fit (recomputation, the loss kernel, offloading, ...): every such flag
/// carries `help_heading = TECHNIQUES`, whichever group it belongs to.
pub const TECHNIQUES: &str = "Memory techniques";

// The other `--help` headings, one per concept, in the order a run is
// described: what is trained, how, in which dtypes, over how many GPUs,
// which parts (fine-tuning), on what hardware, and how the answer is written.
/// The model: a preset, a file, a bare count and its architecture.
pub const MODEL: &str = "Model";
/// The optimizer and one step's shape (micro-batch, sequence, accumulation).
pub const TRAINING: &str = "Training";
/// The precision recipe and the dtypes of each piece.
pub const PRECISION: &str = "Precision";
/// GPUs, nodes, ZeRO/FSDP and the tp/pp/ep degrees.
pub const PARALLELISM: &str = "Parallelism";
/// LoRA, QLoRA, freezing.
pub const FINE_TUNING: &str = "Fine-tuning";
/// The accelerator, its memory, its speed and the software beneath.
pub const HARDWARE: &str = "Hardware";
/// Format and units of the report.
pub const OUTPUT: &str = "Output";

/// One micro-step's shape, for activation memory, and the architecture of a bare
/// parameter count.
#[derive(Debug, Args, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct WorkloadArgs {
    /// Sequences per micro-batch (per accelerator); with --seq-len, activations are estimated.
    #[arg(long, value_name = "B", value_parser = at_least_one, allow_negative_numbers = true, help_heading = TRAINING)]
    pub micro_batch: Option<u64>,

    /// Tokens per sequence.
    #[arg(long, value_name = "S", value_parser = at_least_one, allow_negative_numbers = true, help_heading = TRAINING)]
    pub seq_len: Option<u64>,

    /// What the model is trained for, and so the head transformers puts on
    /// it: causal-lm (AutoModelForCausalLM, the decoders' default),
    /// masked-lm (AutoModelForMaskedLM, the encoders' default), seq-cls:N
    /// and token-cls:N (sequence and token classification over N labels),
    /// seq2seq, or embedding (the bare AutoModel).
    #[arg(long, value_name = "TASK", help_heading = MODEL)]
    pub task: Option<String>,

    /// A vision model's image side in pixels (default: the config's
    /// image_size): the model as transformers builds it for that size,
    /// its position embeddings one per patch.
    #[arg(long, value_name = "PX", value_parser = at_least_one, allow_negative_numbers = true, help_heading = TRAINING)]
    pub image_size: Option<u64>,

    /// Images per sample for a vision model (default 1): each is a
    /// sequence of its patches (+ the CLS token), so the micro-batch holds
    /// B x N of them; a vision-language model's image tokens are part of
    /// each sample's --seq-len instead.
    #[arg(long, value_name = "N", value_parser = at_least_one, allow_negative_numbers = true, help_heading = TRAINING)]
    pub images: Option<u64>,

    /// Tokens per image for Qwen2-VL and Qwen2.5-VL, whose resolution is
    /// dynamic: after the 2x2 merge, so N tokens are 4N patches of 14 px
    /// (256 for a 448 x 448 px image); the report says the pixels.
    #[arg(long, value_name = "N", value_parser = at_least_one, allow_negative_numbers = true, help_heading = TRAINING)]
    pub image_tokens: Option<u64>,

    /// An encoder-decoder's (T5, BART, Whisper) decoder tokens per
    /// sequence: the labels' length, which the decoder reads shifted right
    /// (default: --seq-len, the encoder's input tokens; Whisper's encoder
    /// always holds its 1,500 audio positions).
    #[arg(long, value_name = "T", value_parser = at_least_one, allow_negative_numbers = true, help_heading = TRAINING)]
    pub target_len: Option<u64>,

    /// Seconds of audio per sample for Whisper (default 30): 100 log-mel
    /// frames a second, halved into encoder positions by the encoder's
    /// stride-2 convolution. WhisperEncoder takes exactly
    /// max_source_positions x 2 frames (30 s for every published model).
    #[arg(long, value_name = "SECONDS", value_parser = at_least_one, allow_negative_numbers = true, help_heading = TRAINING)]
    pub audio_seconds: Option<u64>,

    /// Attention implementation: eager (saves the softmax), sdpa or flash.
    #[arg(long, value_name = "KIND", default_value = "sdpa", help_heading = TECHNIQUES)]
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
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true, help_heading = HARDWARE)]
    pub overhead: Option<String>,

    /// Micro-batches whose gradients accumulate before each optimizer step:
    /// the gradients then exist before each backward.
    #[arg(long, value_name = "N", default_value = "1", value_parser = at_least_one, allow_negative_numbers = true, help_heading = TRAINING)]
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
    #[arg(long, value_name = "PLATFORM", default_value = "cuda", help_heading = HARDWARE)]
    pub platform: String,

    /// Whose autocast op lists apply under autocast: cuda (layer_norm,
    /// pow, softmax and the rest of CUDA's fp32 list run in fp32) or cpu.
    /// Default: --platform's. Hidden: the CPU fixtures that emulate CUDA's
    /// lists (`tools/measure_timeline.py`, `__cuda-autocast`) set it.
    #[arg(long, value_name = "PLATFORM", hide = true)]
    pub autocast_ops: Option<String>,

    /// The bitsandbytes version of a QLoRA run: before 0.43.2 each 4-bit
    /// matmul held its input until the graph died, past its backward (with
    /// --carry-outputs, into the next forward; a reentrant checkpoint's
    /// layers hold none; default: a current version).
    #[arg(long, value_name = "VERSION", help_heading = HARDWARE)]
    pub bitsandbytes: Option<String>,

    /// The litgpt version of an --implementation litgpt run: before 0.5.0
    /// its QLoRA kept the token embedding frozen; from 0.5.0 it trains
    /// bitsandbytes' StableEmbedding (default: a current version).
    #[arg(long, value_name = "VERSION", help_heading = HARDWARE)]
    pub litgpt: Option<String>,

    /// PyTorch's allocator with expandable_segments:True, for memory.reserved.
    #[arg(long, help_heading = HARDWARE)]
    pub expandable_segments: bool,

    /// Decoder layers of a bare --params model (with --hidden, --heads, --ffn, --vocab).
    #[arg(long, value_name = "N", value_parser = at_least_one, allow_negative_numbers = true, help_heading = MODEL)]
    pub layers: Option<u64>,

    /// Hidden size of a bare --params model.
    #[arg(long, value_name = "N", value_parser = at_least_one, allow_negative_numbers = true, help_heading = MODEL)]
    pub hidden: Option<u64>,

    /// Attention heads of a bare --params model.
    #[arg(long, value_name = "N", value_parser = at_least_one, allow_negative_numbers = true, help_heading = MODEL)]
    pub heads: Option<u64>,

    /// Key/value heads of a bare --params model (default: --heads).
    #[arg(long, value_name = "N", value_parser = at_least_one, allow_negative_numbers = true, help_heading = MODEL)]
    pub kv_heads: Option<u64>,

    /// MLP intermediate size of a bare --params model.
    #[arg(long, value_name = "N", value_parser = at_least_one, allow_negative_numbers = true, help_heading = MODEL)]
    pub ffn: Option<u64>,

    /// Vocabulary size of a bare --params model.
    #[arg(long, value_name = "N", value_parser = at_least_one, allow_negative_numbers = true, help_heading = MODEL)]
    pub vocab: Option<u64>,

    /// The training loop keeps the model's outputs referenced through
    /// backward: `outputs = model(**batch); loss = outputs.loss;
    /// accelerator.backward(loss)` (accelerate's examples, litgpt, most
    /// hand-written loops), so the logits stay alive until the step returns
    /// (in the compute dtype; an fp32 copy where the loop's wrapper casts
    /// them: accelerate under autocast, litgpt's Fabric). Off by default: HF
    /// Trainer's compute_loss and torchtune drop them before backward.
    #[arg(long, help_heading = TRAINING)]
    pub keep_outputs: bool,

    /// The loop holds its outputs at its own scope, not in a function per
    /// step: `outputs = model(**batch)` (accelerate's examples as written)
    /// or `logits = model(input_ids)` (litgpt's finetune loops) is rebound
    /// only when the next forward returns, so the previous micro-batch's
    /// logits, and the inputs bitsandbytes before 0.43.2 holds in its graph
    /// (--bitsandbytes), are alive through the next forward. Implies
    /// --keep-outputs.
    #[arg(long, help_heading = TRAINING)]
    pub carry_outputs: bool,

    /// The forward runs under torch.autocast to the compute dtype over the
    /// weights as loaded: HF Trainer's bf16=True or fp16=True (accelerate's
    /// mixed precision) on a model loaded in half precision. peft's fp32
    /// adapters then compute in half precision, each saving its own half
    /// copy of its input. Implied by --precision amp-bf16 / amp-fp16 (fp32
    /// weights); needs a half-precision compute dtype.
    #[arg(long, help_heading = TRAINING)]
    pub autocast: bool,

    /// Whose model code runs the architecture: transformers (default; HF
    /// Trainer, accelerate, peft, TRL), litgpt, torchtune or torchtitan.
    /// Each saves its own tensors for backward (litgpt's Phi: one tanh-GELU
    /// input instead of NewGELU's four; its chunked cross-entropy on
    /// Fabric's fp32 copy of the logits), and it sets FSDP1's --init
    /// default: per-unit for transformers, meta for the others.
    #[arg(long, value_name = "NAME", help_heading = TRAINING)]
    pub implementation: Option<String>,
}

/// What the step-time model prices a step at, beyond `--device`'s datasheet.
#[derive(Debug, Args, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct SpeedArgs {
    /// The share of the peak the step's executed FLOPs reach, e.g. 0.45 or
    /// 45%, replacing the per-operation model (default: each matmul,
    /// attention kernel and memory-bound op priced by shape, at shares
    /// fitted to published runs; see `time.uncertainty`).
    #[arg(long, value_name = "FRACTION", allow_hyphen_values = true, help_heading = HARDWARE)]
    pub mfu: Option<String>,

    /// Dense bf16 peak of one accelerator in TFLOP/s, for --capacity or to
    /// override --device's datasheet figure.
    #[arg(long, value_name = "TFLOPS", allow_hyphen_values = true, help_heading = HARDWARE)]
    pub peak_tflops: Option<String>,

    /// One direction of a GPU's link inside its node, e.g. 450GB/s
    /// (default: --device's NVLink figure).
    #[arg(long, value_name = "SIZE/s", allow_hyphen_values = true, help_heading = HARDWARE)]
    pub intra_node_bandwidth: Option<String>,

    /// One direction of a GPU's share of the network between nodes, e.g.
    /// 50GB/s (default: --device's reference system, one 400 Gb/s NIC per GPU on H100).
    #[arg(long, value_name = "SIZE/s", allow_hyphen_values = true, help_heading = HARDWARE)]
    pub inter_node_bandwidth: Option<String>,

    /// Virtual pipeline stages per rank (Megatron's interleaved 1F1B): the
    /// bubble is (pp - 1) / (virtual-stages x micro-batches).
    #[arg(long, value_name = "N", default_value_t = 1, help_heading = PARALLELISM)]
    pub virtual_stages: u64,

    /// The achievable share of the dense peak a large matmul reaches, e.g.
    /// 0.7, replacing the one fitted for the device's generation (A100
    /// and H100 fitted to published runs; the step time's published error
    /// is in `time.uncertainty`).
    #[arg(long, value_name = "FRACTION", allow_hyphen_values = true, help_heading = HARDWARE)]
    pub matmul_efficiency: Option<String>,
}

/// A whole number of at least 1 (a GPU count, a degree, a size): the parser
/// of every numeric flag, so `--gpus -1` is named and explained rather than
/// taken for an unknown flag.
pub fn at_least_one(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(value) if value >= 1 => Ok(value),
        _ => Err("must be a whole number ≥ 1".to_string()),
    }
}
