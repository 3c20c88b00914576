//! Raw command-line strings resolved, once, into validated domain values.

use super::flags::{
    CapacityArgs, FineTuneArgs, OutputArgs, ParallelArgs, ReportArgs, SpeedArgs, TrainingArgs,
    WorkloadArgs,
};
use crate::activation::{Attention, LoraDropout, Loss, Platform, Recompute, Workload};
use crate::architecture::{self, Dimensions, Implementation, Task};
use crate::device::DeviceSpec;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::estimate::{Capacity, Setup, StepOptions};
use crate::finetune::{Bias, FineTune, Lora, Quantization, Targets};
use crate::format::Format;
use crate::model::Model;
use crate::optimizer::{OPTIMIZERS, Optimizer, Options};
use crate::parallel::{
    Framework, FsdpMixedPrecision, Init, Offload, Parallelism, ZeroStage, check_sequence_parallel,
};
use crate::precision::Precision;
use crate::step_time::{Rates, Speed};
use crate::timeline::AllocatorOptions;
use crate::units::{Bytes, Count, UnitSystem, split_unit};

/// The optimizer, its options and the precision of `--optimizer`,
/// `--optimizer-option`, `--precision` and the dtype overrides.
/// The recipe is first kept the way `parallelism`'s framework keeps it, then
/// the explicit dtype flags override it.
pub fn setup(
    training: &TrainingArgs,
    capacity: Option<Capacity>,
    parallelism: Parallelism,
) -> Result<Setup> {
    let optimizer = Optimizer::find(&training.optimizer)?;
    let mut precision = parallelism
        .framework
        .adjust(*Precision::find(&training.precision)?);
    if let Some(name) = &training.grad_dtype {
        precision.gradients = DType::from_name(name)?;
    }
    if let Some(name) = &training.master_dtype {
        precision.master_weights = match name.trim().to_ascii_lowercase().as_str() {
            "none" => None,
            _ => Some(DType::from_name(name)?),
        };
    }
    if let Some(name) = &training.state_dtype {
        precision.optimizer_states = Some(DType::from_name(name)?);
    }
    let mut setup = Setup::new(optimizer, precision).with_capacity(capacity);
    at_most_list_items(
        training.optimizer_options.len(),
        "--optimizer-option",
        &training.optimizer_options.join(" "),
    )?;
    setup.options = Options::resolve(optimizer, &training.optimizer_options)?;
    setup.parallelism = parallelism;
    Ok(setup)
}

/// The parallel layout of `--gpus`, `--zero`/`--fsdp`, `--offload`, `--tp`,
/// `--pp`, `--ep` and `--framework`.
pub fn parallelism(args: &ParallelArgs) -> Result<Parallelism> {
    let (zero, hybrid) = match (&args.zero, &args.fsdp) {
        (_, Some(strategy)) => ZeroStage::from_fsdp(strategy)?,
        (Some(stage), None) => (ZeroStage::parse(stage)?, false),
        (None, None) => (ZeroStage::None, false),
    };
    let framework = match (&args.framework, &args.fsdp) {
        (Some(name), _) => Framework::parse(name)?,
        (None, Some(_)) => Framework::Fsdp2,
        (None, None) => Framework::DeepSpeed,
    };
    check_sequence_parallel(args.tp, args.sequence_parallel)?;
    Parallelism {
        gpus: args.gpus,
        nodes: nodes(args)?,
        zero,
        hybrid,
        offload: Offload::parse(&args.offload)?,
        tensor: args.tp,
        pipeline: args.pp,
        expert: args.ep,
        context: args.cp,
        framework,
        fsdp_mixed_precision: FsdpMixedPrecision::parse(&args.fsdp_mixed_precision)?,
    }
    .validated()
}

/// Accelerators in a node when `--gpus-per-node` is not given: an HGX or
/// DGX machine's eight.
const DEFAULT_GPUS_PER_NODE: u64 = 8;

/// The nodes of `--nodes`, or else `--gpus` / `--gpus-per-node` (one node
/// for up to a node's worth); counts that do not add up are refused.
fn nodes(args: &ParallelArgs) -> Result<u64> {
    let per_node = args.gpus_per_node.unwrap_or(DEFAULT_GPUS_PER_NODE);
    let invalid = |value: String, reason: String| Error::InvalidValue {
        what: "parallel layout",
        value,
        reason,
    };
    match (args.nodes, args.gpus_per_node) {
        (Some(nodes), Some(per_node)) if nodes.checked_mul(per_node) != Some(args.gpus) => {
            Err(invalid(
                format!(
                    "--gpus {} with --nodes {nodes} --gpus-per-node {per_node}",
                    args.gpus
                ),
                format!(
                    "{nodes} nodes of {per_node} hold {} GPUs, not {}: give two of the three, or counts that agree",
                    u128::from(nodes) * u128::from(per_node),
                    args.gpus
                ),
            ))
        }
        (Some(nodes), _) => Ok(nodes),
        (None, _) if args.gpus <= per_node => Ok(1),
        (None, _) if args.gpus.is_multiple_of(per_node) => Ok(args.gpus / per_node),
        (None, _) => Err(invalid(
            format!("--gpus {} with --gpus-per-node {per_node}", args.gpus),
            format!(
                "more GPUs than one node holds must fill whole nodes: give a multiple of {per_node}, --nodes M, or --gpus-per-node N"
            ),
        )),
    }
}

/// The fine-tuning of `--lora-*`, `--freeze`, `--quantize` and `--double-quant`,
/// run by the workload's `--implementation` (litgpt quantizes its head too,
/// and from 0.5.0 trains its token embedding: `--litgpt`).
pub fn finetune(args: &FineTuneArgs, workload: &WorkloadArgs) -> Result<FineTune> {
    let implementation = implementation(workload)?;
    let stable_embedding = litgpt_stable_embedding(workload, implementation)?;
    at_most_list_items(args.freeze.len(), "--freeze", &args.freeze.join(" "))?;
    at_most_list_items(
        args.lora_targets.split(',').count(),
        "--lora-targets",
        &args.lora_targets,
    )?;
    let double_quant = match args.double_quant.trim().to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" => true,
        "off" | "false" | "no" => false,
        other => {
            return Err(Error::InvalidValue {
                what: "--double-quant",
                value: other.to_string(),
                reason: "give `on` or `off`".to_string(),
            });
        }
    };
    let lora = args
        .lora_rank
        .map(|rank| -> Result<Lora> {
            Ok(Lora {
                rank,
                targets: Targets::parse(&args.lora_targets)?,
                bias: Bias::parse(&args.lora_bias)?,
                modules_to_save: args
                    .lora_modules_to_save
                    .as_deref()
                    .map(|list| split(list, "--lora-modules-to-save list"))
                    .transpose()?
                    .unwrap_or_default()
                    .into_iter()
                    .map(str::to_string)
                    .collect(),
                dora: args.lora_dora,
                dropout: LoraDropout::parse(&args.lora_dropout)?,
                dtype: crate::finetune::adapter_dtype(&args.lora_dtype)?,
                quantize_head: implementation == Implementation::Litgpt,
                stable_embedding,
            })
        })
        .transpose()?;
    Ok(FineTune {
        lora,
        freeze: args.freeze.clone(),
        quantize: args
            .quantize
            .as_deref()
            .map(|kind| Quantization::parse(kind, double_quant))
            .transpose()?,
    })
}

/// Gives the setup the adapters' dropout (`--lora-dropout`): what each
/// adapter saves depends on it, and the model inventory does not carry it.
pub fn apply_lora_dropout(setup: &mut Setup, finetune: &FineTune) {
    if let Some(lora) = finetune.lora.as_ref() {
        setup.lora_dropout = lora.dropout;
    }
}

/// The default of `--overhead` when activations are estimated.
const DEFAULT_OVERHEAD: &str = "1GiB";

/// Sets `setup`'s workload, overhead and step options from the workload and
/// parallel flags.
pub fn apply_workload(
    setup: &mut Setup,
    args: &WorkloadArgs,
    parallel: &ParallelArgs,
) -> Result<()> {
    (setup.workload, setup.overhead) = workload(args, parallel)?;
    setup.step = step(args, parallel)?;
    if args.autocast && setup.precision.activations == DType::Fp32 {
        return Err(Error::InvalidValue {
            what: "--autocast",
            value: format!("--precision {}", setup.precision.name),
            reason: "autocast computes in half precision; accepted with a half-precision recipe: bf16, fp16, mixed-bf16, mixed-fp16 (amp-bf16 and amp-fp16 imply it)".to_string(),
        });
    }
    Ok(())
}

/// The step options of `--grad-accumulation`, `--init`, `--reduce-bucket-size`
/// and `--expandable-segments`.
pub fn step(args: &WorkloadArgs, parallel: &ParallelArgs) -> Result<StepOptions> {
    if args.grad_accumulation == 0 {
        return Err(Error::InvalidValue {
            what: "--grad-accumulation",
            value: "0".to_string(),
            reason: "must be at least 1 (1: no accumulation)".to_string(),
        });
    }
    if parallel.reduce_bucket_size == Some(0) {
        return Err(Error::InvalidValue {
            what: "--reduce-bucket-size",
            value: "0".to_string(),
            reason: "must be at least 1 element".to_string(),
        });
    }
    Ok(StepOptions {
        grad_accumulation: args.grad_accumulation,
        init: parallel.init.as_deref().map(Init::parse).transpose()?,
        reduce_bucket_size: parallel.reduce_bucket_size,
        allocator: AllocatorOptions {
            expandable_segments: args.expandable_segments,
        },
        cpu: Platform::parse(&args.platform)? == Platform::Cpu,
        optimizer_in_backward: args.optimizer_in_backward,
        // `--virtual-stages` is a speed flag; `resolve` copies it here.
        virtual_stages: 1,
        implementation: implementation(args)?,
    })
}

/// The bitsandbytes release from which frozen 4-bit matmuls no longer save
/// their input (bitsandbytes 0.43.2, `MatMul4Bit.forward`).
const BITSANDBYTES_SAVES_NO_INPUT: Release = (0, 43, 2);

/// The litgpt release whose QLoRA first swaps the token embedding for
/// bitsandbytes' `StableEmbedding` (litgpt 0.5.0, `finetune/lora.py`,
/// commit ae798ab "Add bnb.nn.StableEmbedding for quantized training").
const LITGPT_STABLE_EMBEDDING: Release = (0, 5, 0);

/// A release as major, minor, patch.
type Release = (u64, u64, u64);

/// Reads `flag`'s VERSION: `0.43.1`, `v0.5`, `0.4.13.dev1` (a pre-release
/// counts as its release).
fn release(flag: &'static str, text: &str, example: &str) -> Result<Release> {
    let invalid = || Error::InvalidValue {
        what: flag,
        value: text.to_string(),
        reason: format!("give a version such as {example}"),
    };
    let mut parts = text.trim().trim_start_matches('v').split('.');
    let mut number = || -> Result<u64> {
        match parts.next() {
            None => Ok(0),
            Some(part) => part.parse().map_err(|_| invalid()),
        }
    };
    let version = (number()?, number()?, number()?);
    match parts.next() {
        None => Ok(version),
        Some(tag) if is_pre_release(tag) && parts.next().is_none() => Ok(version),
        Some(_) => Err(invalid()),
    }
}

/// `dev1`, `rc0`, `post2`: a tag after the release number.
fn is_pre_release(tag: &str) -> bool {
    ["dev", "rc", "post"].iter().any(|prefix| {
        tag.strip_prefix(prefix)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// Whether `--bitsandbytes VERSION` is a release whose 4-bit matmul keeps its input.
fn bitsandbytes_keeps_input(version: Option<&str>) -> Result<bool> {
    let Some(text) = version else {
        return Ok(false);
    };
    Ok(release("--bitsandbytes", text, "`0.43.1` or `0.45.0`")? < BITSANDBYTES_SAVES_NO_INPUT)
}

/// Whether the run's litgpt swaps in `StableEmbedding` under `--quantize`:
/// `--implementation litgpt` of 0.5.0 or later (`--litgpt VERSION`, a
/// current release when not given). `--litgpt` with another implementation
/// is refused.
fn litgpt_stable_embedding(
    workload: &WorkloadArgs,
    implementation: Implementation,
) -> Result<bool> {
    let litgpt = implementation == Implementation::Litgpt;
    match workload.litgpt.as_deref() {
        None => Ok(litgpt),
        Some(text) if !litgpt => Err(Error::InvalidValue {
            what: "--litgpt",
            value: text.to_string(),
            reason:
                "the litgpt version applies to --implementation litgpt; add it or drop --litgpt"
                    .to_string(),
        }),
        Some(text) => {
            Ok(release("--litgpt", text, "`0.4.13` or `0.5.13`")? >= LITGPT_STABLE_EMBEDDING)
        }
    }
}

/// `model` with the images per sample (`--images`, default 1) its
/// activations price (LLaVA's projector and merge); other models as they are.
pub fn with_images(model: Model, args: &WorkloadArgs) -> Model {
    with_images_per_sample(model, args.images)
}

/// [`with_images`] of the `--images` value alone.
pub fn with_images_per_sample(mut model: Model, images: Option<u64>) -> Model {
    if let Some(priced) = model
        .dimensions
        .as_mut()
        .and_then(|dims| dims.images.as_mut())
    {
        priced.per_sample = images.unwrap_or(1);
    }
    model
}

/// The workload of a vision-language model with `--images N` per sample:
/// each image adds its tokens (`image`, from the config or Qwen2-VL's
/// `--image-tokens`) to the sample's `--seq-len`, which must hold them; a
/// note says what each image became. The micro-batch stays B samples.
fn vision_language_workload(
    args: &WorkloadArgs,
    model: &Model,
    (tokens, described): (u64, String),
) -> Result<(WorkloadArgs, Option<String>)> {
    let images = args.images.unwrap_or(1);
    let image_tokens = tokens
        .checked_mul(images)
        .ok_or_else(|| Error::InvalidValue {
            what: "--images",
            value: images.to_string(),
            reason: "the sample's image tokens overflow; accepted: a real number of images"
                .to_string(),
        })?;
    if let Some(seq_len) = args.seq_len
        && seq_len < image_tokens
    {
        return Err(Error::InvalidValue {
            what: "--seq-len",
            value: seq_len.to_string(),
            reason: format!(
                "{}'s {images} image{} per sample take {image_tokens} tokens of the sequence; accepted: --seq-len of at least {image_tokens} (image and text tokens together)",
                model.name,
                if images == 1 { "" } else { "s" }
            ),
        });
    }
    // The input tokens note already says what a fixed-size image becomes;
    // a Qwen2-VL image is described here, from --image-tokens.
    let described = match args.image_tokens {
        Some(_) => format!(" ({described})"),
        None => String::new(),
    };
    let note = format!(
        "images: {images} per sample x {tokens} token{} = {image_tokens} image token{} of each sample's sequence{described}",
        if tokens == 1 { "" } else { "s" },
        if image_tokens == 1 { "" } else { "s" }
    );
    let workload = WorkloadArgs {
        images: None,
        image_tokens: None,
        ..args.clone()
    };
    Ok((workload, Some(note)))
}

/// The workload flags with a vision model's sequence filled in: a ViT reads
/// each image as its patches and the CLS token (197 tokens at 224 px), so
/// `--seq-len` follows from the image size, and `--images N` per sample
/// makes a micro-batch of B x N sequences, said in a note. `--seq-len`
/// that disagrees, and `--images` for a model that takes no images, are
/// refused.
pub fn image_workload(
    args: &WorkloadArgs,
    model: &Model,
) -> Result<(WorkloadArgs, Option<String>)> {
    let sequence = match &model.config {
        Some(config) => architecture::image_sequence(config)?,
        None => None,
    };
    // LLaVA's activations price its images: one per sample unless --images
    // says otherwise, and the report says so.
    let priced_images = args.micro_batch.is_some()
        && model
            .dimensions
            .as_ref()
            .is_some_and(|dims| dims.images.is_some());
    if let Some(config) = &model.config
        && (args.images.is_some() || args.image_tokens.is_some() || priced_images)
        && let Some(image) = architecture::vision_language_image(
            config,
            args.images.unwrap_or(1),
            args.image_tokens,
        )?
    {
        return vision_language_workload(args, model, image);
    }
    if let Some(tokens) = args.image_tokens {
        return Err(Error::InvalidValue {
            what: "--image-tokens",
            value: tokens.to_string(),
            reason: format!(
                "{} is not a vision-language model; accepted for: qwen2_vl, qwen2_5_vl",
                model.name
            ),
        });
    }
    let Some(tokens) = sequence else {
        if let Some(note) = target_tokens(args, model)? {
            return Ok((args.clone(), Some(note)));
        }
        if let Some(images) = args.images {
            return Err(Error::InvalidValue {
                what: "--images",
                value: images.to_string(),
                reason: format!(
                    "{} takes no images whose activations trainmem models; accepted: a vit model",
                    model.name
                ),
            });
        }
        return Ok((args.clone(), None));
    };
    if let Some(seq_len) = args.seq_len
        && seq_len != tokens
    {
        return Err(Error::InvalidValue {
            what: "--seq-len",
            value: seq_len.to_string(),
            reason: format!(
                "{} reads each image as {tokens} tokens (its patches and the CLS token): the sequence follows --image-size; drop --seq-len",
                model.name
            ),
        });
    }
    let images = args.images.unwrap_or(1);
    let micro_batch = args
        .micro_batch
        .map(|batch| {
            batch
                .checked_mul(images)
                .ok_or_else(|| Error::InvalidValue {
                    what: "--images",
                    value: images.to_string(),
                    reason: "the micro-batch's images overflow; accepted: a real number of images"
                        .to_string(),
                })
        })
        .transpose()?;
    let note = match (args.micro_batch, micro_batch) {
        (Some(samples), Some(sequences)) => Some(format!(
            "images: {samples} samples x {images} image{} each = a micro-batch of {sequences} sequences of {tokens} tokens",
            if images == 1 { "" } else { "s" }
        )),
        _ => None,
    };
    let workload = WorkloadArgs {
        micro_batch,
        seq_len: args.seq_len.or(micro_batch.map(|_| tokens)),
        images: None,
        ..args.clone()
    };
    Ok((workload, note))
}

/// Whisper's clip length when `--audio-seconds` is not given: the feature
/// extractor's `chunk_length`.
const WHISPER_SECONDS: u64 = 30;

/// What an encoder-decoder's inputs become, for the report (`tokens:
/// encoder 8 x 512 = 4,096 input tokens, decoder 8 x 128 = 1,024 target
/// tokens`); `--target-len` for a model with one stack is refused.
fn target_tokens(args: &WorkloadArgs, model: &Model) -> Result<Option<String>> {
    let audio = match (&model.config, model.model_type.as_deref()) {
        (Some(config), Some("whisper")) => Some(architecture::audio_tokens(
            config,
            args.audio_seconds.unwrap_or(WHISPER_SECONDS),
        )?),
        _ => match args.audio_seconds {
            Some(seconds) => {
                return Err(Error::InvalidValue {
                    what: "--audio-seconds",
                    value: seconds.to_string(),
                    reason: format!("{} takes no audio; accepted for: whisper", model.name),
                });
            }
            None => None,
        },
    };
    let encoder_decoder = model
        .config
        .as_ref()
        .is_some_and(architecture::is_encoder_decoder);
    if !encoder_decoder {
        return match args.target_len {
            Some(target) => Err(Error::InvalidValue {
                what: "--target-len",
                value: target.to_string(),
                reason: format!(
                    "{} has no decoder reading a separate target; accepted for encoder-decoders: bart, mt5, t5, umt5, whisper",
                    model.name
                ),
            }),
            None => Ok(None),
        };
    }
    let (Some(batch), Some(source)) = (args.micro_batch, args.seq_len) else {
        return Ok(audio);
    };
    if let Some(audio) = audio {
        let target = args.target_len.unwrap_or(source);
        return Ok(Some(format!(
            "{audio} per sample; decoder {batch} x {target} = {} target tokens",
            batch
                .checked_mul(target)
                .map(|tokens| Count(tokens).grouped())
                .unwrap_or_else(|| "too many".to_string())
        )));
    }
    let target = args.target_len.unwrap_or(source);
    let count = |length: u64| {
        batch
            .checked_mul(length)
            .map(|tokens| Count(tokens).grouped())
            .unwrap_or_else(|| "too many".to_string())
    };
    Ok(Some(format!(
        "tokens: encoder {batch} x {source} = {} input tokens, decoder {batch} x {target} = {} target tokens{}",
        count(source),
        count(target),
        if args.target_len.is_none() {
            " (--target-len defaults to --seq-len)"
        } else {
            ""
        }
    )))
}

/// The workload of `--micro-batch`, `--seq-len`, `--attention` and
/// `--recompute` (none without a micro-batch), and the overhead added to the peak.
pub fn workload(args: &WorkloadArgs, parallel: &ParallelArgs) -> Result<(Option<Workload>, Bytes)> {
    let attention = Attention::parse(&args.attention)?;
    let platform = Platform::parse(&args.platform)?;
    let autocast_ops = args
        .autocast_ops
        .as_deref()
        .map(|ops| {
            Platform::parse(ops).map_err(|_| Error::InvalidValue {
                what: "--autocast-ops",
                value: ops.to_string(),
                reason: "accepted: cuda or cpu (whose autocast op lists apply)".to_string(),
            })
        })
        .transpose()?;
    let quantized_inputs_kept = bitsandbytes_keeps_input(args.bitsandbytes.as_deref())?;
    let recompute = Recompute::parse(&args.recompute)?;
    let loss = Loss::parse(&args.loss)?;
    if args.compile {
        return Err(compile_refused());
    }
    let (micro_batch, seq_len) = match (args.micro_batch, args.seq_len) {
        (None, None) => {
            if args.target_len.is_some() {
                return Err(missing(
                    "--micro-batch",
                    "--target-len is the decoder's side of a micro-batch: give --micro-batch B and --seq-len S",
                ));
            }
            if args.offload_activations {
                return Err(missing(
                    "--micro-batch",
                    "--offload-activations moves activations: give --micro-batch B and --seq-len S",
                ));
            }
            let overhead = args
                .overhead
                .as_deref()
                .map(overhead)
                .transpose()?
                .unwrap_or(Bytes::ZERO);
            return Ok((None, overhead));
        }
        (Some(b), Some(s)) => (b, s),
        (Some(_), None) => {
            return Err(missing(
                "--seq-len",
                "activations need --seq-len S with --micro-batch",
            ));
        }
        (None, Some(_)) => {
            return Err(missing(
                "--micro-batch",
                "activations need --micro-batch B with --seq-len",
            ));
        }
    };
    for (flag, value) in [("--micro-batch", micro_batch), ("--seq-len", seq_len)] {
        if value == 0 {
            return Err(Error::InvalidValue {
                what: "workload",
                value: format!("{flag} 0"),
                reason: "must be at least 1".to_string(),
            });
        }
    }
    if let Loss::Chunked(chunks) = loss
        && chunks > seq_len
    {
        return Err(Error::InvalidValue {
            what: "--loss",
            value: loss.name(),
            reason: format!(
                "torchtune splits each sequence into N chunks (torch.chunk along the sequence): N is at most --seq-len {seq_len}"
            ),
        });
    }
    let workload = Workload {
        attention,
        recompute,
        recompute_every: args.recompute_every,
        recompute_reentrant: args.recompute_reentrant,
        loss,
        platform,
        sequence_parallel: parallel.sequence_parallel,
        quantized_inputs_kept,
        offload_activations: args.offload_activations,
        target_len: args.target_len,
        keep_outputs: args.keep_outputs || args.carry_outputs,
        carry_outputs: args.carry_outputs,
        autocast: args.autocast,
        autocast_ops,
        implementation: implementation(args)?,
        ..Workload::new(micro_batch, seq_len)
    };
    // No CUDA context on the CPU.
    let default_overhead = match platform {
        Platform::Cuda => DEFAULT_OVERHEAD,
        Platform::Cpu => "0",
    };
    let overhead = overhead(args.overhead.as_deref().unwrap_or(default_overhead))?;
    Ok((Some(workload), overhead))
}

/// `--implementation`, transformers when not given.
pub(crate) fn implementation(args: &WorkloadArgs) -> Result<Implementation> {
    args.implementation
        .as_deref()
        .map(Implementation::parse)
        .transpose()
        .map(Option::unwrap_or_default)
}

/// `--compile` is refused: what torch.compile saves is decided per traced
/// graph by AOTAutograd's partitioner
/// (`torch/_functorch/partitioners.py`, `min_cut_rematerialization_partition`:
/// a max-flow min-cut over the joint graph, weighted by a runtime and memory
/// cost model, with Inductor's fusion deciding which pointwise results exist
/// at all), so it is not a rule of the architecture that trainmem could price
/// and check on CPU within 3%.
fn compile_refused() -> Error {
    Error::InvalidValue {
        what: "flag",
        value: "--compile".to_string(),
        reason: "torch.compile is not priced: Inductor's min-cut partitioner chooses per traced graph which activations to save or recompute, which the architecture alone does not predict; drop --compile to price the eager step".to_string(),
    }
}

fn overhead(text: &str) -> Result<Bytes> {
    if text.trim() == "0" {
        return Ok(Bytes::ZERO);
    }
    text.parse()
}

fn missing(what: &'static str, accepted: &str) -> Error {
    Error::Missing {
        what,
        accepted: accepted.to_string(),
    }
}

/// The dimensions of a bare `--params` model from `--layers --hidden --heads
/// --kv-heads --ffn --vocab`, when they are given.
pub fn dimensions(args: &WorkloadArgs) -> Result<Option<Dimensions>> {
    match (args.layers, args.hidden, args.heads, args.ffn, args.vocab) {
        (None, None, None, None, None) if args.kv_heads.is_none() => Ok(None),
        (Some(layers), Some(hidden), Some(heads), Some(ffn), Some(vocab)) => Dimensions::generic(
            layers,
            hidden,
            heads,
            args.kv_heads.unwrap_or(heads),
            ffn,
            vocab,
        )
        .map(Some),
        _ => Err(missing(
            "architecture flags",
            "a bare --params model's architecture needs all of --layers, --hidden, --heads, --ffn and --vocab (--kv-heads optional)",
        )),
    }
}

/// The capacity of `--capacity SIZE` or `--device NAME`, if either is given.
pub fn capacity(args: &CapacityArgs) -> Result<Option<Capacity>> {
    capacity_of(args.capacity.as_deref(), args.device.as_deref())
}

/// The capacity of a size or a device name.
pub fn capacity_of(size: Option<&str>, device: Option<&str>) -> Result<Option<Capacity>> {
    match (size, device) {
        (Some(size), _) => {
            let bytes: Bytes = size.parse()?;
            Ok(Some(Capacity {
                bytes,
                label: spaced(size),
            }))
        }
        (None, Some(name)) => {
            let device = DeviceSpec::find(name)?;
            Ok(Some(Capacity {
                bytes: device.memory(),
                label: format!("{} ({})", device.name, device.memory()),
            }))
        }
        (None, None) => Ok(None),
    }
}

/// The output format of `--format`; a table when none is given.
pub fn format(args: &OutputArgs) -> Result<Format> {
    args.format
        .as_deref()
        .map_or(Ok(Format::Table), Format::parse)
}

/// The output format and units.
pub fn report(args: &ReportArgs, capacity_text: Option<&str>) -> Result<(Format, UnitSystem)> {
    Ok((format(&args.output)?, units(args, capacity_text)?))
}

/// The units of `--units`; binary by default when the capacity was written
/// in binary units (`80GiB`).
pub fn units(args: &ReportArgs, capacity_text: Option<&str>) -> Result<UnitSystem> {
    Ok(
        match args
            .units
            .as_deref()
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("gb" | "decimal") => UnitSystem::Decimal,
            Some("gib" | "binary") => UnitSystem::Binary,
            Some(_) => {
                return Err(Error::UnknownName {
                    kind: "units",
                    name: args.units.clone().unwrap_or_default(),
                    suggestion: None,
                    accepted: "gb (10^9 bytes), gib (2^30 bytes)".to_string(),
                });
            }
            None if capacity_text.is_some_and(|c| c.to_ascii_lowercase().contains("ib")) => {
                UnitSystem::Binary
            }
            None => UnitSystem::Decimal,
        },
    )
}

/// A comma-separated list of parameter counts. A bare number followed by
/// an item with a suffix (`1,5B`) is refused as a single count refuses it:
/// the comma may be a decimal one (1.5B) as well as a separator (1 and 5B),
/// and a single `--params 1,5B` is refused for that reason.
pub fn counts(list: &str) -> Result<Vec<Count>> {
    let items = split(list, "parameter count list")?;
    for pair in items.windows(2) {
        if let [bare, scaled] = pair
            && bare.chars().all(|c| c.is_ascii_digit())
            && scaled.starts_with(|c: char| c.is_ascii_digit())
            && scaled.ends_with(|c: char| c.is_ascii_alphabetic())
        {
            // Read together, the pair is refused by the comma rule of one count.
            format!("{bare},{scaled}").parse::<Count>()?;
        }
    }
    items.into_iter().map(str::parse).collect()
}

/// A comma-separated list of optimizers, or `all`. A set: an optimizer
/// named twice (`adam,adam`, or `momentum,sgd-momentum`) is compared once.
pub fn optimizers(list: &str) -> Result<Vec<&'static Optimizer>> {
    if list.trim().eq_ignore_ascii_case("all") {
        return Ok(OPTIMIZERS.iter().collect());
    }
    let mut unique: Vec<&'static Optimizer> = Vec::new();
    for optimizer in optimizer_list(list)? {
        if !unique.iter().any(|o| std::ptr::eq(*o, optimizer)) {
            unique.push(optimizer);
        }
    }
    Ok(unique)
}

fn optimizer_list(list: &str) -> Result<Vec<&'static Optimizer>> {
    split(list, "optimizer list")?
        .into_iter()
        .map(Optimizer::find)
        .collect()
}

/// `FROM,TO` of `--swap`.
pub fn swap(pair: &str) -> Result<(&'static Optimizer, &'static Optimizer)> {
    match optimizer_list(pair)?.as_slice() {
        [from, to] => Ok((from, to)),
        _ => Err(Error::InvalidValue {
            what: "swap",
            value: pair.to_string(),
            reason: "give two optimizers as FROM,TO, such as `adam,sgd-momentum`".to_string(),
        }),
    }
}

/// The most items a list flag (`--params a,b,c`, `--optimizers`,
/// `--slice-params`, `--lora-targets`, `--lora-modules-to-save`) or a
/// repeated flag (`--optimizer-option`, `--freeze`) takes. Every item is
/// priced or matched against every tensor, so 8,000 sizes cost `compare`
/// 1.7 GB and half a minute; 64 is more than a report can show.
const MAX_LIST_ITEMS: usize = 64;

/// Refuses more than [`MAX_LIST_ITEMS`] items; `shown` is the value as given.
fn at_most_list_items(items: usize, what: &'static str, shown: &str) -> Result<()> {
    if items <= MAX_LIST_ITEMS {
        return Ok(());
    }
    Err(Error::InvalidValue {
        what,
        value: abbreviated(shown),
        reason: format!(
            "{items} items is more than trainmem takes; accepted: at most {MAX_LIST_ITEMS}"
        ),
    })
}

/// How much of a long value a message quotes.
const QUOTED_CHARACTERS: usize = 40;

/// `text`, cut to its first characters with `...` when long.
fn abbreviated(text: &str) -> String {
    match text.char_indices().nth(QUOTED_CHARACTERS) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_string(),
    }
}

fn split<'a>(list: &'a str, what: &'static str) -> Result<Vec<&'a str>> {
    at_most_list_items(list.split(',').count(), what, list)?;
    let items: Vec<&str> = list.split(',').map(str::trim).collect();
    if items.iter().any(|item| item.is_empty()) {
        return Err(Error::InvalidValue {
            what,
            value: list.to_string(),
            reason: "an item is empty; separate items with single commas".to_string(),
        });
    }
    Ok(items)
}

/// `80GB` written as `80 GB`, the way the reports print sizes.
fn spaced(size: &str) -> String {
    match split_unit(size) {
        (number, "") => number.to_string(),
        (number, unit) => format!("{number} {unit}"),
    }
}

/// The `--task` asked for, if any.
pub fn task(text: Option<&str>) -> Result<Option<Task>> {
    text.map(Task::parse).transpose()
}

/// The rates a step is timed at: `--device`'s datasheet figures, overridden
/// by `--peak-tflops`, `--intra-node-bandwidth` and `--inter-node-bandwidth`,
/// with `--mfu` and `--virtual-stages`; or why the step cannot be timed.
pub fn speed(
    args: &SpeedArgs,
    capacity: &CapacityArgs,
    parallelism: &Parallelism,
) -> Result<Speed> {
    let mfu = args.mfu.as_deref().map(mfu_basis_points).transpose()?;
    let matmul_efficiency = args
        .matmul_efficiency
        .as_deref()
        .map(|text| share_basis_points("--matmul-efficiency", text))
        .transpose()?;
    if args.virtual_stages == 0 {
        return Err(Error::InvalidValue {
            what: "--virtual-stages",
            value: "0".to_string(),
            reason: "a rank holds at least one stage: give 1 or more".to_string(),
        });
    }
    let peak = args.peak_tflops.as_deref().map(peak_tflops).transpose()?;
    let intra = args
        .intra_node_bandwidth
        .as_deref()
        .map(|t| bandwidth("--intra-node-bandwidth", t))
        .transpose()?;
    let inter = args
        .inter_node_bandwidth
        .as_deref()
        .map(|t| bandwidth("--inter-node-bandwidth", t))
        .transpose()?;
    let device = capacity
        .device
        .as_deref()
        .filter(|_| capacity.capacity.is_none())
        .map(DeviceSpec::find)
        .transpose()?;
    let compute = device.and_then(|d| d.compute);
    let label = device.map_or_else(|| "--peak-tflops".to_string(), |d| d.name.to_string());
    let (bf16, fp8) = match (peak, compute) {
        (Some(flops), _) => (flops, None),
        (None, Some(c)) => (
            u64::from(c.bf16_tflops) * TERA,
            c.fp8_tflops.map(|t| u64::from(t) * TERA),
        ),
        (None, None) => {
            return Ok(match device {
                Some(d) => Speed::Unknown(format!(
                    "`{}` has no dense bf16 peak in the catalogue: pass --peak-tflops",
                    d.name
                )),
                None => Speed::default(),
            });
        }
    };
    let intra = intra.or(compute.map(|c| Bytes(u64::from(c.intra_node_gb_per_s) * GIGA)));
    let inter =
        inter.or(compute.and_then(|c| c.inter_node_gb_per_s.map(|g| Bytes(u64::from(g) * GIGA))));
    let per_node = (parallelism.gpus / parallelism.nodes.max(1)).max(1);
    let intra = match intra {
        Some(b) => b,
        None if per_node > 1 => {
            return Ok(Speed::Unknown(format!(
                "no intra-node bandwidth for `{label}`: pass --intra-node-bandwidth"
            )));
        }
        None => Bytes::ZERO,
    };
    let inter = match inter {
        Some(b) => b,
        None if parallelism.nodes > 1 => {
            return Ok(Speed::Unknown(format!(
                "no inter-node bandwidth for `{label}`: pass --inter-node-bandwidth"
            )));
        }
        None => Bytes::ZERO,
    };
    Ok(Speed::Known(Rates {
        device: label,
        bf16_flops_per_s: bf16,
        fp8_flops_per_s: fp8,
        mfu_basis_points: mfu,
        intra_node: intra,
        inter_node: inter,
        gpus_per_node: per_node,
        virtual_stages: args.virtual_stages,
        memory_bytes_per_s: compute.map_or(0, |c| u64::from(c.memory_gb_per_s) * GIGA),
        sms: compute.map_or(0, |c| u64::from(c.sms)),
        host_bytes_per_s: compute.map_or(0, |c| u64::from(c.host_gb_per_s) * GIGA),
        generation: compute.map(|c| c.generation),
        matmul_efficiency_basis_points: matmul_efficiency,
    }))
}

const TERA: u64 = 1_000_000_000_000;
/// The largest `--peak-tflops`: 10^6 TFLOP/s keeps FLOP/s well inside u64.
const MAX_PEAK_TFLOPS: f64 = 1e6;
const GIGA: u64 = 1_000_000_000;

/// A share written as a fraction (`0.44`) or a percentage (`44%`), as a
/// fraction; `None` when it is not a number. Callers check its range.
pub fn share(text: &str) -> Option<f64> {
    let trimmed = text.trim();
    let (number, scale) = match trimmed.strip_suffix('%') {
        Some(n) => (n.trim(), 100.0),
        None => (trimmed, 1.0),
    };
    number.parse::<f64>().ok().map(|value| value / scale)
}

/// `--mfu`: a fraction in (0, 1], as `0.44` or `44%`, in basis points.
fn mfu_basis_points(text: &str) -> Result<u32> {
    share_basis_points("--mfu", text)
}

/// A share of the peak (`--mfu`, `--matmul-efficiency`): a fraction in
/// (0, 1], as `0.44` or `44%`, in basis points.
fn share_basis_points(what: &'static str, text: &str) -> Result<u32> {
    let invalid = |reason: &str| Error::InvalidValue {
        what,
        value: text.to_string(),
        reason: reason.to_string(),
    };
    let fraction = share(text)
        .ok_or_else(|| invalid("give a fraction such as 0.44 or a percentage such as 44%"))?;
    if !(fraction.is_finite() && fraction > 0.0 && fraction <= 1.0) {
        return Err(invalid(
            "the share of the peak must be above 0 and at most 1 (100%)",
        ));
    }
    let points = (fraction * 10_000.0).round() as u32;
    if points == 0 {
        return Err(invalid("below 0.01%: give at least 0.0001"));
    }
    Ok(points)
}

/// `--peak-tflops`: a positive number of TFLOP/s, in FLOP/s.
fn peak_tflops(text: &str) -> Result<u64> {
    let value: f64 = text.trim().parse().map_err(|_| Error::InvalidValue {
        what: "--peak-tflops",
        value: text.to_string(),
        reason: "give a number of TFLOP/s such as 989".to_string(),
    })?;
    if !(1e-3..=MAX_PEAK_TFLOPS).contains(&value) {
        return Err(Error::InvalidValue {
            what: "--peak-tflops",
            value: text.to_string(),
            reason: format!("the peak must be between 0.001 and {MAX_PEAK_TFLOPS} TFLOP/s"),
        });
    }
    Ok((value * TERA as f64) as u64)
}

/// A bandwidth such as `450GB/s` (or `450GB`, per second understood).
fn bandwidth(what: &'static str, text: &str) -> Result<Bytes> {
    let size = text.trim();
    let size = size.strip_suffix("/s").unwrap_or(size);
    let bytes: Bytes = size.parse().map_err(|e: Error| Error::InvalidValue {
        what,
        value: text.to_string(),
        reason: format!("{e}; give bytes per second such as 450GB/s"),
    })?;
    if bytes == Bytes::ZERO {
        return Err(Error::InvalidValue {
            what,
            value: text.to_string(),
            reason: "a bandwidth must be above zero".to_string(),
        });
    }
    Ok(bytes)
}
