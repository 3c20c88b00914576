//! Which loss and recomputation settings can be priced for a model, and
//! why the others are refused: the frameworks' own limits, or what the
//! formulas do not cover.

use super::attention::Kernel;
use super::{Attention, Loss, Recompute, Workload};
use crate::architecture::{Dimensions, LayerLayout, QkNormKind, QkvLayout};
use crate::error::{Error, Result};

/// Model types whose decoder layers have bias-free q, k, v, o and MLP
/// projections by default (`attention_bias` and `mlp_bias` false): each
/// projection is one `aten.mm`, which torchtitan's policy counts.
const BIAS_FREE: [&str; 2] = ["llama", "mistral"];

fn refuse(what: &'static str, value: String, reason: impl Into<String>) -> Error {
    Error::InvalidValue {
        what,
        value,
        reason: reason.into(),
    }
}

/// One line per loss or recomputation setting that is not the default,
/// for the report's notes (the activation notes say how each is priced).
pub fn notes(workload: &Workload) -> Vec<String> {
    let mut notes = Vec::new();
    let every = match workload.recompute_every {
        0 | 1 => String::new(),
        n => format!(
            ", only on layers {n}, {}, ... (counting from 1)",
            n.saturating_mul(2)
        ),
    };
    match workload.recompute {
        Recompute::None => {}
        Recompute::Selective => notes.push(format!(
            "recompute: selective (Megatron: the attention core){every}"
        )),
        Recompute::Op => notes.push(format!(
            "recompute: op (torchtitan's per-op policy: input, sdpa output and every second matmul kept){every}"
        )),
        Recompute::Full => notes.push(format!(
            "recompute: full (gradient checkpointing of each layer's input{}){every}",
            if workload.recompute_reentrant {
                "; reentrant: each layer's rebuilt output lives through its backward"
            } else {
                ""
            }
        )),
    }
    match workload.loss {
        Loss::Standard => {}
        Loss::ShiftCopy => notes.push(
            "loss: shift-copy (transformers' ForCausalLMLoss up to 4.48: the shifted fp32 logits copied)"
                .to_string(),
        ),
        Loss::Chunked(n) => notes.push(format!(
            "loss: chunked:{n} (torchtune's CEWithChunkedOutputLoss: the output projection and the fp32 upcast chunk by chunk)"
        )),
        Loss::Fused => notes.push(
            match workload.platform {
                super::Platform::Cuda => "loss: fused (Liger's fused linear-cross-entropy: no logits)",
                super::Platform::Cpu => "loss: fused (cut-cross-entropy's torch_compile path on CPU: the logits kept in their own dtype, nothing in fp32)",
            }
            .to_string(),
        ),
    }
    if workload.autocast {
        let mut note =
            "autocast: the forward runs under torch.autocast (HF Trainer's bf16=True or fp16=True)"
                .to_string();
        let training = super::lora::Training::new(workload);
        if workload.lora_rank > 0 {
            note.push_str(if training.dropped_element == 4 {
                ": fp32 LoRA adapters compute in half precision, each saving its own half copy of its input"
            } else {
                ": peft casts each half-precision adapter's input to its dtype, one copy per adapter"
            });
        }
        notes.push(note);
        if super::autocast::projected_element(workload) != workload.dtype.bytes() {
            notes.push("bitsandbytes' 4-bit linears return their output in their input's dtype (`.to(inp_dtype)`): over the fp32 residual stream the MLP's projections, activation and product are fp32".to_string());
        }
    }
    notes
}

/// Refuses what cannot be priced: see each message.
pub fn check(dims: &Dimensions, workload: &Workload, kernel: Kernel) -> Result<()> {
    check_encoder(dims, workload)?;
    check_recompute(dims, workload, kernel)?;
    check_loss(dims, workload)
}

/// A BERT-style encoder is priced as transformers trains it on one rank:
/// its head computes its own cross-entropy, and the techniques built
/// around causal-LM decoders (torchtune's losses and activation
/// offloading, Megatron's kernels, tensor and context parallelism, fp8)
/// are not priced for it, nor yet a frozen base under LoRA.
fn check_encoder(dims: &Dimensions, workload: &Workload) -> Result<()> {
    if dims.encoder.is_none() {
        return Ok(());
    }
    let model_type = &dims.model_type;
    let unpriced = |what: &'static str, value: String| {
        refuse(
            what,
            value,
            format!(
                "not priced for the encoder `{model_type}`; accepted: the standard loss, one tensor and context rank, no activation offloading, no fp8"
            ),
        )
    };
    if workload.loss != Loss::Standard {
        return Err(unpriced("--loss", workload.loss.name()));
    }
    if workload.megatron_kernels {
        return Err(unpriced("--framework", "megatron".to_string()));
    }
    if workload.tensor_parallel > 1 {
        return Err(unpriced("--tp", workload.tensor_parallel.to_string()));
    }
    if workload.context_parallel > 1 {
        return Err(unpriced("--cp", workload.context_parallel.to_string()));
    }
    if workload.offload_activations {
        return Err(unpriced("--offload-activations", "on".to_string()));
    }
    if workload.fp8.is_some() {
        return Err(unpriced("--precision", "fp8".to_string()));
    }
    if workload.frozen_base {
        return Err(refuse(
            "--lora-rank",
            workload.lora_rank.to_string(),
            format!(
                "the activations of a LoRA run on the encoder `{model_type}` are not priced yet (its frozen head and peft's modules_to_save classifier); drop --micro-batch and --seq-len for the model states alone"
            ),
        ));
    }
    Ok(())
}

fn check_recompute(dims: &Dimensions, workload: &Workload, kernel: Kernel) -> Result<()> {
    if workload.recompute_reentrant && workload.recompute != Recompute::Full {
        return Err(refuse(
            "--recompute-reentrant",
            workload.recompute.name().to_string(),
            "reentrant checkpointing wraps whole layers: give --recompute full (torch's per-op policies need use_reentrant=False)",
        ));
    }
    let every = workload.recompute_every;
    let value = || every.to_string();
    if every == 0 {
        return Err(refuse("--recompute-every", value(), "must be at least 1"));
    }
    if every > 1 {
        match workload.recompute {
            Recompute::Full => {}
            Recompute::None => {
                return Err(refuse(
                    "--recompute-every",
                    value(),
                    "it chooses which layers --recompute full checkpoints; give --recompute full",
                ));
            }
            Recompute::Selective => {
                return Err(refuse(
                    "--recompute-every",
                    value(),
                    "Megatron's selective recomputation covers every layer; every N-th layer is full checkpointing (--recompute full)",
                ));
            }
            Recompute::Op => {
                return Err(refuse(
                    "--recompute-every",
                    value(),
                    "torchtitan and torchtune apply per-op checkpointing to every layer; their every-N-th-layer option checkpoints whole layers (--recompute full)",
                ));
            }
        }
        if every > dims.layers {
            return Err(refuse(
                "--recompute-every",
                value(),
                format!(
                    "the model has {} layers: no layer would be checkpointed",
                    dims.layers
                ),
            ));
        }
    }
    if workload.recompute == Recompute::Op {
        let op = || "op".to_string();
        if workload.megatron_kernels {
            return Err(refuse(
                "--recompute",
                op(),
                "torchtitan's per-op policy wraps transformers-style layers, not Megatron-core's",
            ));
        }
        if workload.attention != Attention::Sdpa
            || !matches!(kernel, Kernel::Flash { .. } | Kernel::MemoryEfficient)
        {
            return Err(refuse(
                "--recompute",
                op(),
                "the per-op policy is priced with sdpa's flash or memory-efficient kernel, whose outputs it saves (--attention sdpa, no attention dropout)",
            ));
        }
        let plain_layer = BIAS_FREE.contains(&dims.model_type.as_str())
            && dims.qkv == QkvLayout::Separate
            && dims.linears.attention_input.len() == 3
            && dims.experts.is_none()
            && dims.layout == LayerLayout::PreNorm
            && dims.qk_norm == QkNormKind::None;
        if !plain_layer {
            return Err(refuse(
                "--recompute",
                op(),
                format!(
                    "per-op recomputation is priced for Llama and Mistral layers (separate bias-free q, k, v projections, a dense MLP), not `{}`",
                    dims.model_type
                ),
            ));
        }
        if workload.frozen_base || !workload.adapted.is_empty() {
            return Err(refuse(
                "--recompute",
                op(),
                "LoRA adds matmuls that shift the policy's every-second-matmul count; not priced",
            ));
        }
    }
    Ok(())
}

fn check_loss(dims: &Dimensions, workload: &Workload) -> Result<()> {
    let loss = workload.loss;
    if loss == Loss::Standard {
        return Ok(());
    }
    let value = || loss.name();
    if workload.megatron_kernels {
        return Err(refuse(
            "--loss",
            value(),
            "Megatron-core computes its own vocabulary-parallel cross-entropy (--framework megatron)",
        ));
    }
    match loss {
        Loss::Standard | Loss::ShiftCopy => Ok(()),
        Loss::Chunked(_) => Ok(()),
        Loss::Fused if workload.tensor_parallel > 1 => Err(refuse(
            "--loss",
            value(),
            "Liger's fused linear-cross-entropy needs the whole output projection; a vocabulary-parallel head (--tp) is not priced",
        )),
        Loss::Fused if dims.softcap.logits => Err(refuse(
            "--loss",
            value(),
            "logit soft-capping inside the fused kernel is not priced",
        )),
        Loss::Fused => Ok(()),
    }
}
