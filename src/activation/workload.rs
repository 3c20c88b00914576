//! What one training micro-step is: its shape, its kernels and the
//! techniques switched on, as the activation formulas read them.

use serde::Serialize;

use super::LoraDropout;
use crate::dtype::DType;
use crate::error::{Error, Result};

/// The attention implementation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Attention {
    /// transformers' eager attention: the softmax probabilities are saved.
    Eager,
    /// `scaled_dot_product_attention` (flash or memory-efficient kernel).
    Sdpa,
    /// flash-attention 2.
    Flash,
}

/// Activation recomputation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Recompute {
    /// Everything saved.
    None,
    /// Attention recomputed (Korthikanti et al. 2022).
    Selective,
    /// torchtitan's per-op selective checkpointing: every second matmul's
    /// output and the attention kernel's are saved, the rest recomputed.
    Op,
    /// Gradient checkpointing: each layer keeps only its input.
    Full,
}

/// The loss function: how the logits and the cross-entropy are computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Loss {
    /// transformers' `ForCausalLMLoss`: the whole logits, their fp32 copy.
    Standard,
    /// transformers' `ForCausalLMLoss` before it shifted the labels
    /// instead of the logits (4.48.1 `loss/loss_utils.py`): a contiguous
    /// fp32 copy of the shifted logits besides their fp32 upcast.
    ShiftCopy,
    /// torchtune's `CEWithChunkedOutputLoss` with the output projection
    /// applied per chunk: N chunks along the sequence, each upcast alone.
    Chunked(u64),
    /// Liger's `LigerFusedLinearCrossEntropyLoss`: the logits are never
    /// materialized whole.
    Fused,
}

impl Loss {
    /// The chunks `chunked:N` allows at most (torchtune's default is 8).
    pub const MAX_CHUNKS: u64 = 1 << 20;

    /// Reads `standard`, `chunked:N` (N at least 1) or `fused`.
    pub fn parse(name: &str) -> Result<Loss> {
        let name = name.trim().to_ascii_lowercase();
        let invalid = |reason: &str| Error::InvalidValue {
            what: "--loss",
            value: name.clone(),
            reason: reason.to_string(),
        };
        match name.as_str() {
            "standard" => Ok(Loss::Standard),
            "shift-copy" => Ok(Loss::ShiftCopy),
            "fused" => Ok(Loss::Fused),
            other => match other.strip_prefix("chunked:") {
                Some(count) => match count.parse::<u64>() {
                    Ok(0) => Err(invalid("chunked:N needs at least 1 chunk")),
                    Ok(n) if n <= Loss::MAX_CHUNKS => Ok(Loss::Chunked(n)),
                    Ok(_) => Err(invalid("chunked:N allows at most 1048576 chunks")),
                    Err(_) => Err(invalid(
                        "chunked:N needs a whole number of chunks N (torchtune's default is chunked:8)",
                    )),
                },
                None => Err(Error::UnknownName {
                    kind: "loss",
                    name: other.to_string(),
                    suggestion: (other == "chunked").then(|| "chunked:8".to_string()),
                    accepted: "standard, shift-copy, chunked:N, fused".to_string(),
                }),
            },
        }
    }

    /// The name on the command line.
    pub fn name(self) -> String {
        match self {
            Loss::Standard => "standard".to_string(),
            Loss::ShiftCopy => "shift-copy".to_string(),
            Loss::Chunked(n) => format!("chunked:{n}"),
            Loss::Fused => "fused".to_string(),
        }
    }
}

impl Serialize for Loss {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.name())
    }
}

impl Attention {
    /// Reads `eager`, `sdpa` or `flash` (`flash-attention-2`).
    pub fn parse(name: &str) -> Result<Attention> {
        match name.trim().to_ascii_lowercase().as_str() {
            "eager" => Ok(Attention::Eager),
            "sdpa" => Ok(Attention::Sdpa),
            "flash" | "flash-attention-2" | "flash_attention_2" => Ok(Attention::Flash),
            other => Err(Error::UnknownName {
                kind: "attention",
                name: other.to_string(),
                suggestion: None,
                accepted: "eager, sdpa, flash".to_string(),
            }),
        }
    }
}

impl Recompute {
    /// Every mode, in the order `trainmem fit` reports them.
    pub const ALL: [Recompute; 4] = [
        Recompute::None,
        Recompute::Selective,
        Recompute::Op,
        Recompute::Full,
    ];

    /// Reads `none`, `selective`, `op` or `full`.
    pub fn parse(name: &str) -> Result<Recompute> {
        Recompute::ALL
            .into_iter()
            .find(|mode| mode.name() == name.trim().to_ascii_lowercase())
            .ok_or_else(|| Error::UnknownName {
                kind: "recompute mode",
                name: name.trim().to_ascii_lowercase(),
                suggestion: None,
                accepted: "none, selective, op, full".to_string(),
            })
    }

    /// The name on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Recompute::None => "none",
            Recompute::Selective => "selective",
            Recompute::Op => "op",
            Recompute::Full => "full",
        }
    }
}

/// Where the kernels run: their saved tensors differ in a few places
/// (LayerNorm statistics, dropout masks, which sdpa kernel runs); see
/// [`Platform::kernels`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    /// CUDA kernels.
    Cuda,
    /// CPU kernels (what the fixtures measured).
    Cpu,
}

impl Platform {
    /// Reads `cuda` or `cpu`.
    pub fn parse(name: &str) -> Result<Platform> {
        match name.trim().to_ascii_lowercase().as_str() {
            "cuda" | "gpu" => Ok(Platform::Cuda),
            "cpu" => Ok(Platform::Cpu),
            other => Err(Error::UnknownName {
                kind: "platform",
                name: other.to_string(),
                suggestion: None,
                accepted: "cuda, cpu".to_string(),
            }),
        }
    }
}

/// One training micro-step's shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Hash)]
pub struct Workload {
    /// Sequences per micro-batch B.
    pub micro_batch: u64,
    /// Tokens per sequence S (an encoder-decoder's input tokens).
    pub seq_len: u64,
    /// An encoder-decoder's decoder tokens per sequence T (`--target-len`;
    /// `None`: S).
    pub target_len: Option<u64>,
    /// The attention implementation.
    pub attention: Attention,
    /// Activation recomputation.
    pub recompute: Recompute,
    /// Recomputation applies to every N-th layer (1: all of them).
    pub recompute_every: u64,
    /// Full checkpointing runs `torch.utils.checkpoint` with
    /// `use_reentrant=True` (`--recompute-reentrant`; see `recompute.rs`).
    pub recompute_reentrant: bool,
    /// The loss function.
    pub loss: Loss,
    /// The dtype activations are computed in.
    pub dtype: DType,
    /// The dtype the weights are stored in (fp32 under autocast), which
    /// the fused loss's weight-gradient buffer takes.
    pub weights_dtype: DType,
    /// Whether the forward runs under `torch.autocast` over weights stored
    /// in `weights_dtype` (`--precision amp-bf16`, not FSDP's
    /// `MixedPrecisionPolicy`, which gathers them in `dtype`): the residual
    /// stream and the norms stay in `weights_dtype`, and every linear
    /// reading it saves its own cast copy in `dtype` (see `autocast.rs`).
    pub autocast: bool,
    /// The kernels' platform.
    pub platform: Platform,
    /// Whose autocast op lists apply (`--autocast-ops`); `None`: the
    /// platform's.
    pub autocast_ops: Option<Platform>,
    /// Whether the base weights are frozen (LoRA): frozen linears save no input.
    pub frozen_base: bool,
    /// Module-name suffixes carrying LoRA adapters (`q_proj`), whose inputs stay saved.
    pub adapted: Vec<String>,
    /// The LoRA rank r (its A outputs, T × r, are saved).
    pub lora_rank: u64,
    /// peft's `lora_dropout` before each adapter (`--lora-dropout`; 0: `nn.Identity`).
    pub lora_dropout: LoraDropout,
    /// The dtype the adapters compute in, when it differs from `dtype` can
    /// (peft's fp32 adapters under a bf16 base); `None`: `dtype`.
    pub lora_dtype: Option<DType>,
    /// Tensor-parallel degree t.
    pub tensor_parallel: u64,
    /// Whether sequence parallelism splits the non-tensor-parallel parts by t.
    pub sequence_parallel: bool,
    /// Pipeline stages p: stage s holds min(p - s, m) micro-batches in
    /// flight (1F1B), the first stage the most.
    pub pipeline: u64,
    /// Micro-batches per optimizer step m (`--grad-accumulation`): what
    /// the pipeline's 1F1B schedule has to keep in flight.
    pub micro_batches: u64,
    /// bitsandbytes before 0.43.2: each 4-bit matmul (`MatMul4Bit`) saved its
    /// input for backward even with a frozen weight.
    pub quantized_inputs_kept: bool,
    /// The decoder's linears are bitsandbytes `Linear4bit`s (`--quantize
    /// nf4` or `fp4`), whose outputs take their inputs' dtype.
    pub four_bit_linears: bool,
    /// An input embedding trains (peft's `modules_to_save`, litgpt's
    /// `StableEmbedding`): with a frozen base, the first layer's input
    /// needs a gradient only then (see `Step::first_input_needs_gradient`).
    pub embeddings_train: bool,
    /// Megatron-core's layers with Transformer Engine's fused kernels
    /// (`--framework megatron`) instead of the transformers modules.
    pub megatron_kernels: bool,
    /// torchtune's `OffloadActivations`: saved tensors go to host memory
    /// (`--offload-activations`, see `offload.rs`).
    pub offload_activations: bool,
    /// Context-parallel degree N: ring attention splits each sequence
    /// across N ranks (`--cp`, see `context.rs`).
    pub context_parallel: u64,
    /// The fp8 matmul recipe of the precision, if any (see `fp8.rs`).
    pub fp8: Option<crate::precision::Fp8>,
    /// The training loop keeps the model's outputs (the logits) referenced
    /// through backward and the optimizer step (`--keep-outputs`: accelerate's
    /// example scripts, litgpt, most hand-written loops); off: they die before
    /// backward (HF Trainer's `compute_loss`, torchtune).
    pub keep_outputs: bool,
    /// The loop keeps them at its own scope, so the step before's outputs
    /// (and what its graph still holds) are alive until this step's forward
    /// returns and rebinds the variable (`--carry-outputs`: accelerate's
    /// `outputs = model(**batch)` and litgpt's `logits = model(input_ids)`
    /// in the loop body itself). Implies `keep_outputs`.
    pub carry_outputs: bool,
    /// Whose model code runs (`--implementation`): the saved tensors of its
    /// modules and its loss (see `implementation/`).
    pub implementation: crate::architecture::Implementation,
}

impl Workload {
    /// `micro_batch` sequences of `seq_len` tokens in bf16 with sdpa
    /// attention, no recomputation, on CUDA, fully trained, on one rank:
    /// the estimate fills in the dtype, the parallel degrees and the
    /// fine-tuning from the setup and the model.
    pub fn new(micro_batch: u64, seq_len: u64) -> Workload {
        Workload {
            micro_batch,
            seq_len,
            target_len: None,
            attention: Attention::Sdpa,
            recompute: Recompute::None,
            recompute_every: 1,
            recompute_reentrant: false,
            loss: Loss::Standard,
            dtype: DType::Bf16,
            weights_dtype: DType::Bf16,
            autocast: false,
            platform: Platform::Cuda,
            autocast_ops: None,
            frozen_base: false,
            adapted: Vec::new(),
            lora_rank: 0,
            lora_dropout: LoraDropout::default(),
            lora_dtype: None,
            tensor_parallel: 1,
            sequence_parallel: false,
            pipeline: 1,
            micro_batches: 1,
            quantized_inputs_kept: false,
            four_bit_linears: false,
            embeddings_train: false,
            megatron_kernels: false,
            offload_activations: false,
            context_parallel: 1,
            fp8: None,
            keep_outputs: false,
            carry_outputs: false,
            implementation: crate::architecture::Implementation::Transformers,
        }
    }
}

/// Refuses what an activation model measured only for plain data-parallel
/// training of the whole model does not price: tensor, pipeline, context
/// or sequence parallelism, adapters or frozen weights, activation
/// offloading, Megatron's kernels, fp8, a loss other than the standard one,
/// and recomputation other than none or full on every layer. `what` names
/// the model in the message (`"Mamba's activations"`).
pub fn plain_data_parallel_only(workload: &Workload, what: &str) -> Result<()> {
    let refused = |flag: &'static str, value: String| Error::InvalidValue {
        what: flag,
        value,
        reason: format!(
            "{what} are modelled for plain data-parallel training of the whole model with the standard loss, and --recompute none or full on every layer"
        ),
    };
    let parallel = [
        ("--tp", workload.tensor_parallel),
        ("--pp", workload.pipeline),
        ("--cp", workload.context_parallel),
    ];
    if let Some((flag, degree)) = parallel.iter().find(|(_, degree)| *degree > 1) {
        return Err(refused(flag, degree.to_string()));
    }
    if workload.sequence_parallel {
        return Err(refused("--sequence-parallel", "on".to_string()));
    }
    if workload.frozen_base || !workload.adapted.is_empty() {
        return Err(refused(
            "fine-tuning",
            "LoRA adapters or frozen weights".to_string(),
        ));
    }
    if workload.offload_activations {
        return Err(refused("--offload-activations", "on".to_string()));
    }
    if workload.megatron_kernels {
        return Err(refused("--framework", "megatron".to_string()));
    }
    if workload.fp8.is_some() {
        return Err(refused("--precision", "fp8".to_string()));
    }
    if workload.loss != Loss::Standard {
        return Err(refused("--loss", workload.loss.name()));
    }
    if !matches!(workload.recompute, Recompute::None | Recompute::Full) {
        return Err(refused(
            "--recompute",
            workload.recompute.name().to_string(),
        ));
    }
    if workload.recompute_every != 1 {
        return Err(refused(
            "--recompute-every",
            workload.recompute_every.to_string(),
        ));
    }
    Ok(())
}
