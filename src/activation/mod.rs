//! Activation memory: what autograd saves for backward in the transformers
//! implementation of each architecture, plus the logits and the loss.
//!
//! Each formula is the sum of the tensors torch's autograd keeps (the
//! `saved_tensors` of the `*Backward0` nodes), counted once per storage,
//! as `tools/measure_activations.py` measures them with
//! `torch.autograd.graph.saved_tensors_hooks`; the fixtures in
//! `tests/fixtures/activations/` and `tools/check_activation_formulas.py`
//! hold the measurements and the closed forms this module ports.
//!
//! One micro-batch on one rank: `parallel.rs` says which sizes a rank
//! holds, `norms.rs`, `attention.rs`, `mlp.rs` and `experts.rs` what each
//! part of a layer saves, `layer.rs` assembles a layer by layout,
//! `recompute.rs` what recomputation keeps, `embeddings.rs` and `loss.rs`
//! what sits outside the layers. `kernels.rs` holds the CPU/CUDA
//! differences as data ([`Kernels`]): with [`Platform::Cpu`] every fixture
//! is reproduced to the byte; [`Platform::Cuda`] differs where CUDA
//! kernels save other tensors (fp32 LayerNorm statistics, 1-byte
//! `native_dropout` masks, sdpa's CUDA dispatch, which refuses no dropout).

mod attention;
mod chunked_loss;
mod context;
mod embeddings;
mod encoder_head;
mod experts;
mod fp8;
mod fused_loss;
mod kernels;
mod layer;
mod lora;
mod loss;
mod megatron;
mod mlp;
mod norms;
mod offload;
mod parallel;
mod recompute;
mod tally;
mod techniques;

use serde::Serialize;

use self::attention::Kernel;
pub use self::fp8::Fp8Activations;
pub use self::kernels::{DropoutMask, ExpertsKernel, Kernels, SdpaDispatch, StatsDtype};
pub use self::lora::LoraDropout;
use self::lora::Training;
pub use self::offload::{MIN_OFFLOAD_SIZE, Offloaded};
use self::parallel::{Rank, Stage, candidate_stages};
use self::recompute::{Kept, PARTS};
use self::tally::{Tally, plus, times};
pub use self::techniques::notes as technique_notes;
use crate::architecture::{Dimensions, LayerLayout, NormKind};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::units::Bytes;

/// Bytes of an fp32 element.
const FP32_BYTES: u64 = 4;

/// The attention implementation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Workload {
    /// Sequences per micro-batch B.
    pub micro_batch: u64,
    /// Tokens per sequence S.
    pub seq_len: u64,
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
    /// The kernels' platform.
    pub platform: Platform,
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
    /// Pipeline stages p: the first stage holds p micro-batches in flight (1F1B).
    pub pipeline: u64,
    /// bitsandbytes before 0.43.2: each 4-bit matmul (`MatMul4Bit`) saved its
    /// input for backward even with a frozen weight.
    pub quantized_inputs_kept: bool,
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
            attention: Attention::Sdpa,
            recompute: Recompute::None,
            recompute_every: 1,
            recompute_reentrant: false,
            loss: Loss::Standard,
            dtype: DType::Bf16,
            weights_dtype: DType::Bf16,
            platform: Platform::Cuda,
            frozen_base: false,
            adapted: Vec::new(),
            lora_rank: 0,
            lora_dropout: LoraDropout::default(),
            lora_dtype: None,
            tensor_parallel: 1,
            sequence_parallel: false,
            pipeline: 1,
            quantized_inputs_kept: false,
            megatron_kernels: false,
            offload_activations: false,
            context_parallel: 1,
            fp8: None,
        }
    }
}

/// A part of the activation memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Part {
    /// What: `attention`, `mlp`, `norms`, `experts`, ...
    pub name: String,
    /// Bytes, summed over all layers.
    pub bytes: Bytes,
}

/// The activation memory of one micro-batch (times the micro-batches in flight).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Activations {
    /// Everything autograd keeps until backward, plus the logits: `memory.activations`.
    pub total: Bytes,
    /// The decoder layers' share, by layer part.
    pub layers: Vec<Part>,
    /// Outside the layers: embedding indices and dropout mask, rotary
    /// tables, the final norm, the output head's input (and Gemma 2's
    /// soft-capped logits).
    pub outside_layers: Bytes,
    /// The logits the model returns (P × T × V).
    pub logits: Bytes,
    /// The loss's saved tensors (fp32 log-softmax and targets).
    pub loss: Bytes,
    /// The largest temporary of backward, on top of `total`: the loss's
    /// two fp32 T x V gradients alive together (`nll_loss_backward`'s and
    /// `log_softmax_backward_data`'s, 8·T·V), or the saved tensors of one
    /// layer rebuilt by recomputation, whichever is larger. (HF's Trainer
    /// drops the returned logits before backward, which frees P·T·V of
    /// `total` meanwhile; not subtracted.)
    pub backward_transient: Bytes,
    /// The loss function priced: `standard`, `chunked:N` or `fused`.
    pub loss_function: Loss,
    /// The recomputation priced: `none`, `selective`, `op` or `full`.
    pub recompute: Recompute,
    /// Recomputation applies to every N-th layer (1: all).
    pub recompute_every: u64,
    /// Activation offloading, when on: what left the device, what the host holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offload: Option<Offloaded>,
    /// fp8 matmuls, when the precision has them: their casts and state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fp8: Option<Fp8Activations>,
    /// How figures were rounded or assumed.
    pub notes: Vec<String>,
    /// The same figures layer by layer, in the order the step allocates and
    /// frees them: what the step timeline reads.
    #[serde(skip)]
    pub schedule: Schedule,
}

/// What one pipeline stage's activations are made of, layer by layer, for the
/// step timeline (`crate::timeline`): each layer's saved tensors appear in
/// forward and disappear in backward; the loss's tensors sit between.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Schedule {
    /// The pipeline stage, from 0.
    pub stage: u64,
    /// Micro-batches whose activations the stage holds at once (1F1B).
    pub in_flight: u64,
    /// The stage's layers, in forward order.
    pub layers: Vec<LayerActivations>,
    /// Saved before the layers: the embedding's indices and dropout mask.
    pub embeddings: Bytes,
    /// Shared by the layers of a micro-batch: the rotary tables.
    pub shared: Bytes,
    /// What persists across steps with the layers (Transformer Engine's
    /// cached fp8 weights and scaling state), from before the first step.
    pub resident: Bytes,
    /// Whether `embeddings` and `shared` die at the end of the micro-batch's
    /// forward (offloading: each use was copied to the host).
    pub outside_forward_only: bool,
    /// Saved by the final norm and the output head (its input, Gemma 2's
    /// soft-capped logits).
    pub head: Bytes,
    /// The logits the model returns, P·T·V (0 with a fused loss).
    pub logits: Bytes,
    /// The largest temporary while the loss runs: the fp32 copy
    /// `ForCausalLMLoss` makes of half-precision logits, 4·T·V, alive until
    /// `cross_entropy` returns (0 when the logits are fp32); one chunk's
    /// copy with `--loss chunked:N`; one chunk's buffers with `--loss fused`
    /// (see `loss::LossPhase`).
    pub logits_upcast: Bytes,
    /// The loss's saved tensors (fp32 log-softmax, targets; the fused
    /// loss's precomputed gradients).
    pub loss: Bytes,
    /// The loss's backward temporaries (two fp32 T x V gradients, or one
    /// chunk's).
    pub loss_backward: Bytes,
    /// The gradient of the logits in their own dtype, P·T·V, alive while the
    /// output head runs backward (with the chunked loss, also the output
    /// projection's weight-gradient sums).
    pub logits_gradient: Bytes,
    /// Whether the stage holds the output head and the loss.
    pub has_head: bool,
    /// The largest single activation tensor of a layer, P·T·w for its widest
    /// intermediate w.
    pub widest_tensor: Bytes,
}

/// One layer's activations on one rank.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LayerActivations {
    /// The layer's index in the model.
    pub layer: u64,
    /// What it keeps from its forward until its backward.
    pub kept: Bytes,
    /// What recomputation rebuilds of it at the start of its backward.
    pub recomputed: Bytes,
    /// The gradients its backward holds at once besides its saved tensors:
    /// the gradient of its output and of its widest intermediate.
    pub backward: Bytes,
    /// Offloading: what its backward brings back from the host at once.
    pub unpacked: Bytes,
    /// Context parallelism: the ring's key/value buffers while its attention
    /// runs forward.
    pub ring: Bytes,
    /// fp8 matmuls: the widest linear's casts in forward.
    pub fp8_casts: Bytes,
    /// Offloading without recomputation: the layer's last node, its first
    /// norm's backward, alive after the layer's gradients exist (the
    /// gradient flow included).
    pub closing: Bytes,
}

/// The activation memory of every pipeline stage that can be the most loaded
/// (the first and the last; the only one without pipelining).
pub fn stages(dims: &Dimensions, workload: &Workload) -> Result<Vec<Activations>> {
    stages_with(dims, workload, &workload.platform.kernels())
}

/// [`stages`] with explicit kernel choices.
fn stages_with(
    dims: &Dimensions,
    workload: &Workload,
    kernels: &Kernels,
) -> Result<Vec<Activations>> {
    let step = Step::new(dims, workload, kernels)?;
    candidate_stages(dims.layers, workload.pipeline)
        .into_iter()
        .map(|stage| {
            let mut activations = step.stage(stage)?;
            activations.notes.extend(step.notes());
            Ok(activations)
        })
        .collect()
}

/// The activation memory of `dims` under `workload`, on the most loaded
/// rank, with the kernels of `workload.platform`.
pub fn activations(dims: &Dimensions, workload: &Workload) -> Result<Activations> {
    activations_with(dims, workload, &workload.platform.kernels())
}

/// [`activations`] with explicit kernel choices (a forced sdpa backend,
/// `native_dropout` masks on CPU, eager experts): the stage whose
/// activations and backward temporary together are the largest.
pub fn activations_with(
    dims: &Dimensions,
    workload: &Workload,
    kernels: &Kernels,
) -> Result<Activations> {
    let mut heaviest: Option<(Bytes, Activations)> = None;
    for activations in stages_with(dims, workload, kernels)? {
        let peak = plus(activations.total, activations.backward_transient)?;
        if heaviest.as_ref().is_none_or(|(most, _)| peak > *most) {
            heaviest = Some((peak, activations));
        }
    }
    match heaviest {
        Some((_, activations)) => Ok(activations),
        None => {
            let step = Step::new(dims, workload, kernels)?;
            let mut empty = step.empty();
            empty.notes.extend(step.notes());
            Ok(empty)
        }
    }
}

/// What decoder layer `index` keeps for one micro-batch on one rank.
pub fn layer_bytes(
    dims: &Dimensions,
    workload: &Workload,
    kernels: &Kernels,
    index: u64,
) -> Result<Bytes> {
    let step = Step::new(dims, workload, kernels)?;
    step.layer(
        dims.is_sparse(index),
        recompute::checkpointed(index, workload.recompute_every),
    )?
    .total()
}

/// One micro-batch on one rank: everything the formulas read.
struct Step<'a> {
    dims: &'a Dimensions,
    workload: &'a Workload,
    kernels: &'a Kernels,
    rank: Rank,
    training: Training<'a>,
    kernel: Kernel,
}

impl<'a> Step<'a> {
    fn new(dims: &'a Dimensions, workload: &'a Workload, kernels: &'a Kernels) -> Result<Step<'a>> {
        let kernel = Kernel::resolve(
            workload.attention,
            kernels,
            dims,
            workload.dtype,
            dims.dropout.attention,
        );
        techniques::check(dims, workload, kernel)?;
        Ok(Step {
            dims,
            workload,
            kernels,
            rank: Rank::new(dims, workload)?,
            training: Training::new(workload),
            kernel,
        })
    }

    /// What one layer keeps: under the recompute mode when `checkpointed`
    /// (see `--recompute-every`), everything otherwise.
    fn layer(&self, sparse: bool, checkpointed: bool) -> Result<Kept> {
        let mode = if checkpointed {
            self.workload.recompute
        } else {
            Recompute::None
        };
        let op = if mode == Recompute::Op {
            self.op_saved()?
        } else {
            recompute::OpSaved::default()
        };
        recompute::kept(
            mode,
            self.workload.recompute_reentrant,
            &self.saved_layer(sparse)?,
            op,
        )
    }

    /// What torchtitan's per-op policy keeps of a layer besides its input:
    /// the odd matmuls' outputs and the sdpa kernel's output and fp32
    /// log-sum-exp [B, a, S] (`techniques::check` refuses other layers).
    fn op_saved(&self) -> Result<recompute::OpSaved> {
        let rank = &self.rank;
        let d = self.dims.head_dim;
        let mut log_sum_exp = Tally::new();
        log_sum_exp.tensor(&[FP32_BYTES, rank.batch, rank.heads, rank.seq])?;
        recompute::op_saved(
            rank.element,
            rank.tokens,
            recompute::OpWidths {
                queries: rank.heads.saturating_mul(d),
                keys_values: rank.kv_heads.saturating_mul(d),
                hidden: rank.hidden,
                intermediate: rank.intermediate,
                mlp_inputs: self.dims.linears.mlp_input.len() as u64,
            },
            log_sum_exp.bytes(),
        )
    }

    /// Everything one layer saves, before recomputation decides what stays.
    fn saved_layer(&self, sparse: bool) -> Result<layer::SavedLayer> {
        if self.workload.megatron_kernels {
            return megatron::saved(
                &self.rank,
                self.dims,
                self.kernels,
                sparse,
                self.workload.fp8.is_some_and(|f| f.saves_fp8_inputs),
            );
        }
        layer::saved(
            &self.rank,
            self.dims,
            self.kernels,
            &self.training,
            self.kernel,
            sparse,
        )
    }

    /// What one layer's backward holds at its height besides its saved
    /// tensors (all of them, recomputed ones included), the larger of two
    /// moments, as the CPU timeline fixtures show:
    /// * the MLP's backward: the gradient of the layer's output (P·n·h, the
    ///   residual stream's) and one gradient as wide as the widest
    ///   intermediate (P·T·w), or, when a dense gated MLP's `down_proj`
    ///   is frozen and kept no input, its product's backward when larger
    ///   (`mlp::product_backward`: 3·P·T·f);
    /// * the attention's backward, after the MLP's saved tensors, the second
    ///   norm's and the dropout masks' second half are freed: the residual
    ///   gradient, with eager or math attention the gradients of the
    ///   probabilities ((4 + P)·B·a·S²: see below), and the gradients of q,
    ///   k and v (P·T·(a·d + 2·kv·d)).
    fn layer_backward(&self, sparse: bool) -> Result<Bytes> {
        let rank = &self.rank;
        let saved = self.saved_layer(sparse)?;
        let mut residual = Tally::new();
        residual.tensor(&[rank.element, rank.sequence_tokens, rank.hidden])?;
        let mut mlp = residual;
        let product = if sparse {
            Bytes::ZERO
        } else {
            mlp::product_backward(
                rank,
                self.dims.mlp,
                rank.intermediate,
                self.training.keeps_input(&[self.dims.linears.mlp_output]),
            )?
        };
        mlp.add(self.widest_tensor()?.max(product))?;
        let mut attention = residual;
        if matches!(self.kernel, Kernel::Eager | Kernel::Math) {
            // The softmax runs in fp32: the probabilities' gradient cast to
            // fp32 and the softmax's fp32 backward output, with the
            // gradient in the model's dtype still alive (P = 4: 2 x 4X).
            attention.tensor(&[
                FP32_BYTES + rank.element,
                rank.batch,
                rank.heads,
                rank.seq,
                rank.seq,
            ])?;
        }
        attention.add(context::backward(
            rank,
            self.dims,
            self.workload.context_parallel,
        )?)?;
        let d = self.dims.head_dim;
        attention.tensor(&[
            rank.element,
            rank.tokens,
            rank.heads.saturating_add(rank.kv_heads.saturating_mul(2)),
            d,
        ])?;
        let released = [
            saved.mlp,
            saved.experts,
            Bytes(saved.norms.0 / 2),
            Bytes(saved.dropout.0 / 2),
            saved.output_input,
        ]
        .into_iter()
        .try_fold(Bytes::ZERO, plus)?;
        Ok(mlp
            .bytes()
            .max(Bytes(attention.bytes().0.saturating_sub(released.0))))
    }

    /// Whether every layer is checkpointed (full or per-op recomputation
    /// on every layer): the rotary tables are then held by the checkpoints.
    fn every_layer_checkpointed(&self) -> bool {
        matches!(self.workload.recompute, Recompute::Full | Recompute::Op)
            && self.workload.recompute_every <= 1
    }

    /// What offloading does to one layer that keeps `kept` (see `offload.rs`).
    fn layer_offload(
        &self,
        sparse: bool,
        checkpointed: bool,
        kept: &Kept,
    ) -> Result<offload::LayerOffload> {
        let saved = self.saved_layer(sparse)?;
        let linears = &self.dims.linears;
        let packs = |names: &[&str]| {
            names
                .iter()
                .map(|name| {
                    u64::from(self.training.keeps_input(&[name]) && !self.training.frozen_base)
                        + self.training.adapters(&[name])
                })
                .sum::<u64>()
        };
        offload::layer(&offload::LayerSite {
            rank: &self.rank,
            dims: self.dims,
            platform: self.workload.platform,
            recompute: if checkpointed {
                self.workload.recompute
            } else {
                Recompute::None
            },
            kept: kept.total()?,
            input: saved.input,
            core: saved.core.saved,
            output_view: if saved.core.output_shared {
                saved.output_input
            } else {
                Bytes::ZERO
            },
            hidden_norms: layer::hidden_norms(self.dims.layout),
            stats_bytes: self.kernels.layer_norm_stats.bytes(self.rank.element),
            input_packs: (packs(&linears.attention_input), packs(&linears.mlp_input)),
            rotary: embeddings::shared_by_layers(
                &self.rank,
                self.dims,
                self.every_layer_checkpointed(),
                self.kernel,
            )?,
        })
    }

    /// The final norm under offloading: the device bytes it no longer keeps
    /// (none with CUDA streams: its packs are the last of forward, still in
    /// torchtune's `fwd_stash` when backward starts) and its host copies.
    fn final_norm_offload(&self) -> Result<(Bytes, Bytes)> {
        let rank = &self.rank;
        let norm = norms::saved(
            norms::NormSite {
                kind: self.dims.norm,
                width: rank.hidden,
                rows: rank.sequence_tokens,
                element: rank.element,
                frozen: self.training.frozen_base,
            },
            self.kernels.layer_norm_stats,
        )?;
        let mut copies = Tally::new();
        copies.add(norm)?;
        if self.dims.norm != NormKind::LayerNorm {
            // The fp32 input and the rsqrt, each saved by two nodes.
            copies.tensor(&[
                FP32_BYTES,
                rank.sequence_tokens,
                rank.hidden.saturating_add(1),
            ])?;
        }
        let device = if self.workload.platform == Platform::Cuda {
            Bytes::ZERO
        } else {
            norm
        };
        Ok((device, copies.bytes()))
    }

    /// P·T·w for the layer's widest intermediate w.
    fn widest_tensor(&self) -> Result<Bytes> {
        let rank = &self.rank;
        let widest = rank
            .intermediate
            .max(rank.expert_intermediate)
            .max(rank.shared_intermediate)
            .max(rank.hidden);
        let mut tally = Tally::new();
        tally.tensor(&[rank.element, rank.tokens, widest])?;
        Ok(tally.bytes())
    }

    /// The activations a pipeline stage holds.
    fn stage(&self, stage: Stage) -> Result<Activations> {
        let end = stage.first_layer.saturating_add(stage.layers);
        let every = self.workload.recompute_every;
        // The four kinds of layer: [dense, sparse] x [kept whole, checkpointed].
        let mut kinds = [[Kept::default(); 2]; 2];
        let mut counts = [[0u64; 2]; 2];
        for (is_sparse, row) in kinds.iter_mut().enumerate() {
            for (checkpointed, kind) in row.iter_mut().enumerate() {
                *kind = self.layer(is_sparse == 1, checkpointed == 1)?;
            }
        }
        for layer in stage.first_layer..end {
            let row = usize::from(self.dims.is_sparse(layer));
            let column = usize::from(recompute::checkpointed(layer, every));
            counts[row][column] += 1;
        }
        let in_flight = stage.in_flight;
        let fp8_figures = match &self.workload.fp8 {
            Some(recipe) => Some(fp8::figures(&self.rank, self.dims, recipe, stage.layers)?),
            None => None,
        };
        // What offloading does to each of the four kinds of layer.
        let offloads = if self.workload.offload_activations {
            let mut all = [[offload::LayerOffload::default(); 2]; 2];
            for (is_sparse, row) in all.iter_mut().enumerate() {
                for (checkpointed, slot) in row.iter_mut().enumerate() {
                    *slot = self.layer_offload(
                        is_sparse == 1,
                        checkpointed == 1,
                        &kinds[is_sparse][checkpointed],
                    )?;
                }
            }
            Some(all)
        } else {
            None
        };

        let mut layers = Vec::new();
        let mut layer_total = Tally::new();
        for (index, name) in PARTS.iter().enumerate() {
            let mut bytes = Bytes::ZERO;
            for (row, counts_row) in kinds.iter().zip(counts) {
                for (kind, count) in row.iter().zip(counts_row) {
                    bytes = plus(bytes, times(kind.parts[index], count)?)?;
                }
            }
            let bytes = times(bytes, in_flight)?;
            if offloads.is_some() {
                continue;
            }
            layer_total.add(bytes)?;
            if bytes > Bytes::ZERO {
                layers.push(Part {
                    name: (*name).to_string(),
                    bytes,
                });
            }
        }

        let mut schedule = Schedule {
            stage: stage.index,
            in_flight,
            has_head: stage.head,
            ..Schedule::default()
        };
        let backward = [self.layer_backward(false)?, self.layer_backward(true)?];
        schedule.widest_tensor = self.widest_tensor()?;
        for layer in stage.first_layer..end {
            let is_sparse = self.dims.is_sparse(layer);
            let column = usize::from(recompute::checkpointed(layer, every));
            let kind = &kinds[usize::from(is_sparse)][column];
            let offload = offloads.map(|o| o[usize::from(is_sparse)][column]);
            schedule.layers.push(LayerActivations {
                layer,
                kept: offload.map_or(kind.total(), |o| Ok(o.resident))?,
                recomputed: kind.recomputed,
                backward: plus(
                    backward[usize::from(is_sparse)],
                    fp8_figures.map_or(Bytes::ZERO, |f| f.backward_casts),
                )?,
                unpacked: offload.map_or(Bytes::ZERO, |o| o.unpacked),
                closing: offload.map_or(Bytes::ZERO, |o| o.closing),
                ring: context::forward(&self.rank, self.dims, self.workload.context_parallel)?,
                fp8_casts: fp8_figures.map_or(Bytes::ZERO, |f| f.forward_casts),
            });
        }
        let mut host = Tally::new();
        if let Some(offloads) = offloads {
            let mut resident = Tally::new();
            for (row, counts_row) in offloads.iter().zip(counts) {
                for (kind, count) in row.iter().zip(counts_row) {
                    resident.add(times(kind.resident, count)?)?;
                    host.add(times(kind.host, count)?)?;
                }
            }
            let resident = times(resident.bytes(), in_flight)?;
            layer_total.add(resident)?;
            if resident > Bytes::ZERO {
                layers.push(Part {
                    name: "under the offload threshold".to_string(),
                    bytes: resident,
                });
            }
        }
        let mut outside = Tally::new();
        let mut embeddings_offloaded = Bytes::ZERO;
        if stage.embeddings {
            schedule.embeddings = match &self.dims.encoder {
                Some(encoder) => {
                    encoder_head::embeddings(&self.rank, self.dims, encoder, self.kernels)?
                }
                None => embeddings::saved(&self.rank, self.dims, self.kernels)?,
            };
            if offloads.is_some() && schedule.embeddings.0 >= MIN_OFFLOAD_SIZE {
                host.add(schedule.embeddings)?;
                embeddings_offloaded = std::mem::take(&mut schedule.embeddings);
            }
            outside.add(schedule.embeddings)?;
        }
        if stage.layers > 0 {
            schedule.shared = embeddings::shared_by_layers(
                &self.rank,
                self.dims,
                self.every_layer_checkpointed(),
                self.kernel,
            )?;
            outside.add(schedule.shared)?;
        }
        let (mut logits, mut loss_bytes, mut transient) = (Bytes::ZERO, Bytes::ZERO, Bytes::ZERO);
        schedule.outside_forward_only = offloads.is_some();
        if let Some(figures) = &fp8_figures {
            schedule.resident = plus(figures.weight_cache, figures.scaling_state)?;
        }
        let mut head_offloaded = Bytes::ZERO;
        if stage.head {
            // Liger's kernel computes the head's gradients in its forward;
            // cut-cross-entropy on CPU saves a copy of the head's input.
            let liger =
                self.workload.loss == Loss::Fused && self.workload.platform == Platform::Cuda;
            schedule.head = match &self.dims.encoder {
                Some(encoder) => encoder_head::head(&self.rank, encoder, self.kernels)?,
                None => loss::head(&self.rank, self.dims, self.kernels, &self.training, !liger)?,
            };
            if offloads.is_some() {
                let (device, copies) = self.final_norm_offload()?;
                head_offloaded = device;
                host.add(copies)?;
                schedule.head = Bytes(schedule.head.0.saturating_sub(device.0));
            }
            outside.add(schedule.head)?;
            let phase = if let Some(encoder) = &self.dims.encoder {
                encoder_head::phase(&self.rank, encoder)?
            } else if self.workload.megatron_kernels {
                // The fp32 copy is the saved softmax: no separate upcast.
                let (saved, backward) = megatron::loss(&self.rank)?;
                loss::LossPhase {
                    upcast: Bytes::ZERO,
                    saved,
                    backward,
                    ..loss::standard(&self.rank)?
                }
            } else {
                match self.workload.loss {
                    Loss::Standard => loss::standard(&self.rank)?,
                    Loss::ShiftCopy => loss::shift_copy(&self.rank)?,
                    Loss::Chunked(chunks) => chunked_loss::phase(&self.rank, chunks)?,
                    Loss::Fused => match self.workload.platform {
                        Platform::Cuda => {
                            fused_loss::phase(&self.rank, self.workload.weights_dtype.bytes())?
                        }
                        Platform::Cpu => fused_loss::torch_compile_phase(
                            &self.rank,
                            self.workload.weights_dtype.bytes(),
                        )?,
                    },
                }
            };
            logits = phase.logits;
            loss_bytes = phase.saved;
            transient = phase.backward;
            schedule.logits = phase.logits;
            schedule.logits_upcast = phase.upcast;
            schedule.loss = phase.saved;
            schedule.loss_backward = phase.backward;
            schedule.logits_gradient = phase.logits_gradient;
        }
        for (row, counts_row) in kinds.iter().zip(counts) {
            for (kind, count) in row.iter().zip(counts_row) {
                if count > 0 {
                    transient = transient.max(kind.recomputed);
                }
            }
        }
        let outside_layers = times(outside.bytes(), in_flight)?;
        let offload = match offloads {
            Some(_) => {
                // What left the device: every layer's saved tensors but the
                // residue, the embeddings, the final norm.
                let mut saved = Tally::new();
                for (row, counts_row) in kinds.iter().zip(counts) {
                    for (kind, count) in row.iter().zip(counts_row) {
                        saved.add(times(kind.total()?, count)?)?;
                    }
                }
                let residue = layer_total.bytes();
                let mut gone = Tally::new();
                gone.add(Bytes(
                    times(saved.bytes(), in_flight)?.0.saturating_sub(residue.0),
                ))?;
                gone.add(times(
                    plus(embeddings_offloaded, head_offloaded)?,
                    in_flight,
                )?)?;
                Some(Offloaded {
                    implementation: "torchtune OffloadActivations",
                    streams: self.workload.platform == Platform::Cuda,
                    min_offload_size: Bytes(MIN_OFFLOAD_SIZE),
                    device_bytes_saved: gone.bytes(),
                    host_bytes: times(host.bytes(), in_flight)?,
                })
            }
            None => None,
        };
        let logits = times(logits, in_flight)?;
        let loss_bytes = times(loss_bytes, in_flight)?;

        let mut total = layer_total;
        total.add(outside_layers)?;
        total.add(logits)?;
        total.add(loss_bytes)?;
        let mut notes = Vec::new();
        if self.workload.pipeline > 1 {
            notes.push(format!(
                "pipeline: stage {} of {} is the most loaded, holding {} micro-batch(es) of {} layer(s) (1F1B, at least {} micro-batches per step)",
                stage.index + 1,
                self.workload.pipeline,
                in_flight,
                stage.layers,
                self.workload.pipeline,
            ));
        }
        Ok(Activations {
            total: total.bytes(),
            layers,
            outside_layers,
            logits,
            loss: loss_bytes,
            backward_transient: transient,
            loss_function: self.workload.loss,
            recompute: self.workload.recompute,
            recompute_every: self.workload.recompute_every,
            offload,
            fp8: fp8_figures,
            notes,
            schedule,
        })
    }

    fn empty(&self) -> Activations {
        Activations {
            total: Bytes::ZERO,
            layers: Vec::new(),
            outside_layers: Bytes::ZERO,
            logits: Bytes::ZERO,
            loss: Bytes::ZERO,
            backward_transient: Bytes::ZERO,
            loss_function: self.workload.loss,
            recompute: self.workload.recompute,
            recompute_every: self.workload.recompute_every,
            offload: None,
            fp8: None,
            notes: Vec::new(),
            schedule: Schedule::default(),
        }
    }

    /// How the figures were reached.
    fn notes(&self) -> Vec<String> {
        let (dims, workload) = (self.dims, self.workload);
        let mut notes = vec![format!("attention: {}", self.kernel.describe())];
        if workload.platform == Platform::Cuda {
            if dims.norm == NormKind::LayerNorm {
                notes.push("CUDA: LayerNorm saves its mean and rstd in fp32".to_string());
            }
            let dropout = dims.dropout;
            if dropout.attention || dropout.residual || dropout.embedding {
                notes.push(
                    "CUDA: dropout saves 1-byte bool masks (native_dropout); flash and memory-efficient attention keep only a seed".to_string(),
                );
            }
        }
        match workload.recompute {
            Recompute::None => {}
            Recompute::Selective => notes.push(
                "selective recomputation: the attention core (probabilities, the kernel's q, k, v copies) is rebuilt in backward; its inputs q, k, v stay".to_string(),
            ),
            Recompute::Op => notes.push(
                "op recomputation (torchtitan's per-op policy): each layer keeps its input, the sdpa kernel's output and log-sum-exp and every second matmul's output (q, v, gate, down); norms, rotary, activations and the other matmuls are rebuilt in backward".to_string(),
            ),
            Recompute::Full => notes.push(
                "full recomputation: each layer keeps its input; rotary tables and cache positions held by the checkpoints outside autograd are not counted".to_string(),
            ),
        }
        if workload.recompute_every > 1 {
            notes.push(format!(
                "recompute every {}: only layers whose 1-based index is a multiple of {} are checkpointed (torchtune, torchtitan); the others keep everything",
                workload.recompute_every, workload.recompute_every,
            ));
        }
        match workload.loss {
            Loss::Standard => notes.push(
                "loss: standard (transformers' ForCausalLMLoss: whole logits, their fp32 copy, fp32 log-softmax)".to_string(),
            ),
            Loss::ShiftCopy => notes.push(
                "loss: shift-copy (transformers' ForCausalLMLoss up to 4.48: the fp32 upcast of the logits and a contiguous fp32 copy of the shifted logits, fp32 log-softmax)".to_string(),
            ),
            Loss::Chunked(chunks) => notes.push(format!(
                "loss: chunked:{chunks} (torchtune's CEWithChunkedOutputLoss): all {chunks} logits chunks exist; each is upcast to fp32 and its gradients computed one chunk of {} tokens at a time; every chunk's fp32 log-softmax stays until backward",
                chunked_loss::chunk_tokens(&self.rank, chunks),
            )),
            Loss::Fused if workload.platform == Platform::Cuda => notes.push(format!(
                "loss: fused (Liger's fused linear-cross-entropy, CUDA): no logits; chunks of {} tokens' logits at a time; the output projection's input gradient and weight gradient (in the weights' dtype) are kept from the forward",
                fused_loss::chunk_tokens(self.rank.tokens, self.rank.vocab, self.rank.hidden),
            )),
            Loss::Fused => notes.push(
                "loss: fused on CPU is cut-cross-entropy's torch_compile implementation (Liger's and CCE's kernels are CUDA-only): Inductor keeps the shifted logits in their own dtype, without an fp32 copy, log-softmax or T x V gradient".to_string(),
            ),
        }
        if workload.frozen_base {
            notes.push(
                "frozen base: frozen linears and norms save no weight-gradient inputs; LoRA adapters keep their input and lora_A's T x r output; routed experts are counted as trainable".to_string(),
            );
        }
        if workload.lora_rank > 0 {
            let adapter = workload.lora_dtype.unwrap_or(workload.dtype);
            if workload.lora_dropout.is_active() {
                notes.push(format!(
                    "LoRA dropout {}: each adapter saves its own dropped input (T x in, {adapter}) and the dropout mask ({}) instead of sharing the layer's input (peft's nn.Dropout before lora_A)",
                    workload.lora_dropout.probability(),
                    match workload.platform {
                        Platform::Cpu => "CPU: noise in the input dtype",
                        Platform::Cuda => "CUDA: 1-byte native_dropout mask",
                    }
                ));
            } else if adapter != workload.dtype {
                notes.push(format!(
                    "{adapter} adapters under {} compute: peft casts the input of each adapter to {adapter} (_cast_input_dtype), so each saves its own {adapter} copy of it",
                    workload.dtype
                ));
            }
        }
        if workload.tensor_parallel > 1 {
            notes.push(format!(
                "tensor parallel {}: heads, MLP and expert widths and the vocabulary split per rank, rounded up{} (Korthikanti et al. 2022, Table 2)",
                workload.tensor_parallel,
                if workload.sequence_parallel {
                    "; sequence parallelism splits the rest along the sequence"
                } else {
                    ""
                },
            ));
        }
        if workload.recompute != Recompute::Full {
            match dims.layout {
                LayerLayout::ParallelResidual => notes
                    .push("parallel residual: both LayerNorms read one saved input".to_string()),
                LayerLayout::ParallelSharedNorm => notes.push(
                    "parallel residual: attention and the MLP read one LayerNorm's saved output"
                        .to_string(),
                ),
                LayerLayout::PreNorm | LayerLayout::PostNorm | LayerLayout::Sandwich => {}
            }
        }
        if workload.context_parallel > 1 {
            notes.push(format!(
                "context parallel {}: each rank holds {} of the {} positions of every sequence (head-and-tail load balancing), plus ring attention's key/value buffers per layer: all {} ranks' key/value shards and the fp32 merge in forward (torch context_parallel, all-gather rotation), the fp32 gradient accumulators and the dK/dV ring in backward",
                workload.context_parallel,
                self.rank.seq,
                workload.seq_len,
                workload.context_parallel,
            ));
        }
        if let Some(fp8) = &workload.fp8 {
            notes.push(if fp8.saves_fp8_inputs {
                format!("fp8 ({}): linears save their inputs in fp8 (1 byte); each layer's four GEMM modules keep their cached fp8 weight and transpose and an fp32 amax history of {} rows, resident from the first step (dense layers; expert weights not counted)", fp8.implementation, fp8.amax_history_len)
            } else {
                format!("fp8 ({}): linears save their high-precision inputs (ctx.save_for_backward(input_hp, weight_hp_t)); the fp8 casts of the widest linear are a temporary of each layer's forward and backward; dynamic scaling keeps no amax history; FSDP's float8 all-gather is not modelled", fp8.implementation)
            });
        }
        if workload.offload_activations {
            notes.push(format!(
                "activation offloading (torchtune OffloadActivations{}): saved tensors of at least {} bytes, parameters aside, are copied to host memory in forward, one copy per saved reference, and brought back node by node in backward; {}the output head's input, the logits and the loss stay on the device",
                if workload.platform == Platform::Cuda {
                    ", use_streams=True"
                } else {
                    ", use_streams=False as on CPU"
                },
                MIN_OFFLOAD_SIZE,
                match (workload.recompute, workload.platform) {
                    (Recompute::Full, _) => "with full recomputation only the checkpointed layer inputs move (DeepSpeed's cpu_checkpointing); ",
                    (_, Platform::Cuda) => "the stream keeps the final norm's packs until backward and one more node's tensors in backward; ",
                    (_, Platform::Cpu) => "",
                },
            ));
        }
        notes.push(
            match workload.loss {
                Loss::Standard | Loss::ShiftCopy => "backward transient: the loss's two fp32 T x V gradients (nll_loss and log_softmax backward), or the largest recomputed layer",
                Loss::Chunked(_) => "backward transient: one chunk's two fp32 gradients (nll_loss and log_softmax backward), or the largest recomputed layer",
                Loss::Fused => "backward transient: the largest recomputed layer (the fused loss's gradients were computed in its forward)",
            }
            .to_string(),
        );
        notes
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::architecture::dimensions;
    use crate::error::Error;

    fn workload(micro_batch: u64, seq_len: u64, attention: Attention) -> Workload {
        Workload {
            attention,
            ..Workload::new(micro_batch, seq_len)
        }
    }

    fn layer(dims: &Dimensions, workload: &Workload) -> u64 {
        layer_bytes(dims, workload, &workload.platform.kernels(), 0)
            .unwrap()
            .0
    }

    /// Llama-2-7B's sizes.
    fn llama_7b() -> Dimensions {
        Dimensions::generic(32, 4096, 32, 32, 11008, 32000).unwrap()
    }

    #[test]
    fn a_llama_layer_on_cuda_with_flash_attention_by_hand() {
        // Per layer, bf16, T = B·S: two RMSNorms 2(4Th + 4T + 2Th), q/k/v's
        // input 2Th, the flash kernel's q, k, v, output 2T(2ad + 2kv·d) and
        // log-sum-exp 4BaS, the MLP's input 2Th and 4 x 2Tf.
        let dims = llama_7b();
        let (b, s) = (1, 4096);
        let (t, h, f, a, kv, d) = (b * s, 4096, 11008, 32, 32, 128);
        let expected = 2 * (4 * t * h + 4 * t + 2 * t * h)
            + 2 * t * h
            + 2 * t * (2 * a * d + 2 * kv * d)
            + 4 * b * a * s
            + 2 * t * h
            + 4 * 2 * t * f;
        assert_eq!(expected, 4096 * 186_504);
        assert_eq!(layer(&dims, &workload(b, s, Attention::Sdpa)), expected);
        assert_eq!(layer(&dims, &workload(b, s, Attention::Flash)), expected);
        // Eager: no log-sum-exp, the probabilities instead (fp32 softmax and
        // its bf16 copy, 6BaS²); o_proj saves a copy of the output, which
        // replaces the flash output it shared.
        let eager = layer(&dims, &workload(b, s, Attention::Eager));
        assert_eq!(eager, expected - 4 * b * a * s + 6 * b * a * s * s);
    }

    #[test]
    fn the_whole_model_adds_embeddings_rotary_head_logits_and_loss() {
        let dims = llama_7b();
        let w = workload(2, 1024, Attention::Sdpa);
        let e = activations(&dims, &w).unwrap();
        let (t, s, h, v) = (2048u64, 1024u64, 4096u64, 32000u64);
        let per_layer = layer(&dims, &w);
        let outside = 8 * t + 2 * 2 * s * 128 + (4 * t * h + 4 * t + 2 * t * h) + 2 * t * h;
        assert_eq!(e.outside_layers.0, outside);
        assert_eq!(e.logits.0, 2 * t * v);
        assert_eq!(e.loss.0, 4 * t * v + 8 * t + 4);
        assert_eq!(e.total.0, 32 * per_layer + outside + 6 * t * v + 8 * t + 4);
        assert_eq!(e.backward_transient.0, 2 * 4 * t * v);
        let parts: u64 = e.layers.iter().map(|p| p.bytes.0).sum();
        assert_eq!(parts, 32 * per_layer);
        assert!(e.notes.iter().any(|n| n.contains("flash kernel")));
    }

    #[test]
    fn selective_recompute_drops_the_probabilities_and_full_keeps_the_input() {
        let dims = llama_7b();
        let (b, s, t, h, a, d) = (1u64, 2048u64, 2048u64, 4096u64, 32u64, 128u64);
        let mut w = workload(b, s, Attention::Eager);
        let none = layer(&dims, &w);
        w.recompute = Recompute::Selective;
        let selective = layer(&dims, &w);
        // The core keeps only q, k, v (2T·a·d + 2·2T·kv·d); the o_proj input stays.
        let eager_core = 3 * 2 * t * a * d + 6 * b * a * s * s;
        assert_eq!(none - selective, eager_core - 3 * 2 * t * a * d);
        w.attention = Attention::Sdpa;
        let flash_selective = layer(&dims, &w);
        w.recompute = Recompute::None;
        assert_eq!(layer(&dims, &w) - flash_selective, 4 * b * a * s);
        w.recompute = Recompute::Full;
        assert_eq!(layer(&dims, &w), 2 * t * h);
        let e = activations(&dims, &w).unwrap();
        // The backward transient is the larger of the loss's gradients and
        // one rebuilt layer.
        w.recompute = Recompute::None;
        let rebuilt = layer(&dims, &w);
        assert_eq!(e.backward_transient.0, rebuilt.max(8 * t * 32000));
        assert!(e.layers.iter().all(|p| p.name == "layer inputs"));
    }

    #[test]
    fn op_recompute_keeps_q_v_gate_down_and_the_kernel_output_by_hand() {
        let dims = llama_7b();
        let (b, s, t, h, f, a, kv, d) = (1u64, 2048u64, 2048u64, 4096u64, 11008u64, 32, 32, 128);
        let mut w = workload(b, s, Attention::Sdpa);
        let none = layer(&dims, &w);
        w.recompute = Recompute::Op;
        let op = layer(&dims, &w);
        // Input 2Th; q 2T·ad, v 2T·kv·d, gate 2Tf, down 2Th; sdpa output
        // 2T·ad and its fp32 log-sum-exp 4·B·a·S.
        let kept = 2 * t * h
            + 2 * t * a * d
            + 2 * t * kv * d
            + 2 * t * f
            + 2 * t * h
            + 2 * t * a * d
            + 4 * b * a * s;
        assert_eq!(op, kept);
        // Backward rebuilds the unrecomputed layer less what it shares with
        // the kept outputs (all but down's).
        let e = activations(&dims, &w).unwrap();
        let rebuilt = none - (kept - 2 * t * h - 2 * t * h);
        assert_eq!(e.backward_transient.0, rebuilt.max(8 * t * 32000));
        assert!(e.layers.iter().any(|p| p.name == "saved op outputs"));
        assert!(e.notes.iter().any(|n| n.contains("per-op policy")));
        assert_eq!(e.recompute, Recompute::Op);
    }

    #[test]
    fn every_second_layer_checkpointed_keeps_half_the_layers_whole() {
        let dims = llama_7b();
        let mut w = workload(1, 2048, Attention::Sdpa);
        let none = layer(&dims, &w);
        w.recompute = Recompute::Full;
        let full = layer(&dims, &w);
        let all = activations(&dims, &w).unwrap();
        w.recompute_every = 2;
        let half = activations(&dims, &w).unwrap();
        // 16 of 32 layers whole; the rotary tables are saved again by the others.
        let rotary = 2 * 2 * 2048 * 128;
        assert_eq!(half.total.0, all.total.0 + 16 * (none - full) + rotary);
        assert_eq!(half.recompute_every, 2);
        assert!(half.notes.iter().any(|n| n.contains("recompute every 2")));
        assert_eq!(
            layer_bytes(&dims, &w, &w.platform.kernels(), 0).unwrap().0,
            none
        );
        assert_eq!(
            layer_bytes(&dims, &w, &w.platform.kernels(), 1).unwrap().0,
            full
        );
        // Only full checkpointing has an every-N-th-layer form.
        w.recompute = Recompute::Op;
        assert!(matches!(
            activations(&dims, &w),
            Err(Error::InvalidValue { .. })
        ));
    }

    #[test]
    fn the_loss_modes_parse_and_refuse() {
        assert_eq!(Loss::parse("standard").unwrap(), Loss::Standard);
        assert_eq!(Loss::parse(" Chunked:8 ").unwrap(), Loss::Chunked(8));
        assert_eq!(Loss::parse("fused").unwrap(), Loss::Fused);
        assert_eq!(Loss::parse("shift-copy").unwrap(), Loss::ShiftCopy);
        assert_eq!(Loss::ShiftCopy.name(), "shift-copy");
        assert_eq!(Loss::Chunked(4).name(), "chunked:4");
        for bad in [
            "chunked:0",
            "chunked:x",
            "chunked:",
            "chunked:-1",
            "chunked:99999999",
        ] {
            assert!(
                matches!(Loss::parse(bad), Err(Error::InvalidValue { .. })),
                "{bad}"
            );
        }
        assert!(matches!(
            Loss::parse("chunked"),
            Err(Error::UnknownName {
                suggestion: Some(_),
                ..
            })
        ));
    }

    #[test]
    fn chunked_and_fused_losses_shrink_the_loss_phase() {
        let dims = llama_7b();
        let mut w = workload(1, 4096, Attention::Sdpa);
        let standard = activations(&dims, &w).unwrap();
        w.loss = Loss::Chunked(8);
        let chunked = activations(&dims, &w).unwrap();
        let (t, v, h) = (4096u64, 32000u64, 4096u64);
        // The same log-softmax bytes (every chunk's), targets 8T instead of
        // the padded labels' 8(S + 1), eight total_weight scalars instead of
        // one; an eighth of the upcast and of the backward gradients.
        assert_eq!(chunked.total.0, standard.total.0 - 8 + 4 * 7);
        assert_eq!(chunked.schedule.logits_upcast.0, 4 * t * v / 8);
        assert_eq!(chunked.backward_transient.0, 8 * t * v / 8);
        w.loss = Loss::Fused;
        let fused = activations(&dims, &w).unwrap();
        assert_eq!(fused.logits, Bytes::ZERO);
        // No lm_head input saved: the head keeps only the final norm.
        assert_eq!(standard.schedule.head.0 - fused.schedule.head.0, 2 * t * h);
        assert_eq!(fused.loss.0, 2 * t * h + 2 * v * h + 4 * t + t);
        assert_eq!(fused.loss_function, Loss::Fused);
        // On CPU: cut-cross-entropy's compiled fallback keeps the shifted logits.
        w.platform = Platform::Cpu;
        let cpu = activations(&dims, &w).unwrap();
        assert_eq!(cpu.loss.0, 2 * (t - 1) * v + 12 * (t - 1));
        assert!(cpu.notes.iter().any(|n| n.contains("torch_compile")));
    }

    #[test]
    fn tensor_and_sequence_parallel_divide_a_gpt2_block_like_table_2() {
        // Table 2: per layer R + D/t with tensor parallelism (R: norm
        // inputs, column-parallel inputs, hidden dropout masks; D: the rest),
        // (R + D)/t with sequence parallelism too.
        let dims = dimensions(&json!({
            "model_type": "gpt2", "n_embd": 1024, "n_head": 16, "n_layer": 4,
        }))
        .unwrap();
        let at = |t: u64, sequence_parallel: bool| {
            let mut w = workload(2, 1024, Attention::Eager);
            w.tensor_parallel = t;
            w.sequence_parallel = sequence_parallel;
            layer(&dims, &w)
        };
        let (one, two) = (at(1, false), at(2, false));
        let split = 2 * (one - two);
        let replicated = one - split;
        assert!(replicated > 0 && split > replicated);
        for t in [4, 8, 16] {
            assert_eq!(at(t, false), replicated + split / t, "t = {t}");
            assert_eq!(at(t, true), one / t, "t = {t} with sequence parallelism");
        }
    }

    #[test]
    fn the_first_pipeline_stage_holds_p_micro_batches() {
        let dims = dimensions(&json!({
            "model_type": "llama", "hidden_size": 256, "num_attention_heads": 4,
            "num_hidden_layers": 8, "intermediate_size": 512, "vocab_size": 1000,
        }))
        .unwrap();
        let mut w = workload(2, 128, Attention::Sdpa);
        let per_layer = layer(&dims, &w);
        w.pipeline = 4;
        let e = activations(&dims, &w).unwrap();
        let layers: u64 = e.layers.iter().map(|p| p.bytes.0).sum();
        assert_eq!(layers, 4 * 2 * per_layer, "4 micro-batches of 2 layers");
        assert_eq!(e.logits, Bytes::ZERO);
        assert!(e.notes.iter().any(|n| n.contains("stage 1 of 4")));
        // A huge vocabulary makes the last stage (logits, loss) the heaviest.
        let mut wide = dims.clone();
        wide.vocab = 4_000_000;
        let e = activations(&wide, &w).unwrap();
        assert!(e.logits > Bytes::ZERO);
        assert!(e.notes.iter().any(|n| n.contains("stage 4 of 4")));
    }

    #[test]
    fn lora_adapters_keep_their_inputs_and_rank_r_outputs() {
        let dims = llama_7b();
        let (t, h, r) = (1024u64, 4096u64, 16u64);
        let mut w = workload(1, 1024, Attention::Sdpa);
        w.frozen_base = true;
        let frozen = layer(&dims, &w);
        w.adapted = vec!["q_proj".to_string(), "v_proj".to_string()];
        w.lora_rank = r;
        assert_eq!(layer(&dims, &w), frozen + 2 * t * h + 2 * 2 * t * r);
        w.adapted.push("down_proj".to_string());
        assert_eq!(
            layer(&dims, &w),
            frozen + 2 * t * h + 3 * 2 * t * r + 2 * t * 11008
        );
    }

    #[test]
    fn cuda_masks_and_layer_norm_statistics_differ_from_cpu() {
        let dims = dimensions(&json!({
            "model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 2, "vocab_size": 1000,
        }))
        .unwrap();
        let mut w = workload(2, 64, Attention::Eager);
        let cuda = layer(&dims, &w);
        w.platform = Platform::Cpu;
        let cpu = layer(&dims, &w);
        let (b, s, t, h, a) = (2u64, 64u64, 128u64, 64u64, 4u64);
        // Two LayerNorms: fp32 statistics (+2 x 2 x 2T); three dropout
        // masks: 1 byte instead of 2 (-B·a·S² - 2 x T·h).
        assert_eq!(cuda + b * a * s * s + 2 * t * h, cpu + 2 * 2 * 2 * t);
    }

    #[test]
    fn a_phi_layer_keeps_its_one_norm_output_once_for_both_blocks() {
        let dims = dimensions(&json!({
            "model_type": "phi", "hidden_size": 64, "num_attention_heads": 4,
            "intermediate_size": 176, "num_hidden_layers": 2, "vocab_size": 1000,
        }))
        .unwrap();
        let (t, h, r) = (128u64, 64u64, 8u64);
        let mut w = workload(2, 64, Attention::Sdpa);
        w.platform = Platform::Cpu;
        // The fixture phi__base__bf16__sdpa__b2s64.
        assert_eq!(layer(&dims, &w), 342_528);
        w.frozen_base = true;
        let frozen = layer(&dims, &w);
        w.lora_rank = r;
        // An adapter on either block keeps the shared output; on both, still once.
        for adapted in [vec!["fc1"], vec!["q_proj"], vec!["q_proj", "fc1"]] {
            let adapters = adapted.len() as u64;
            w.adapted = adapted.into_iter().map(str::to_string).collect();
            assert_eq!(
                layer(&dims, &w),
                frozen + 2 * t * h + adapters * 2 * t * r,
                "{:?}",
                w.adapted
            );
        }
        let e = activations(&dims, &w).unwrap();
        assert!(e.notes.iter().any(|n| n.contains("one LayerNorm")));
    }

    #[test]
    fn huge_sizes_overflow_instead_of_wrapping() {
        let dims =
            Dimensions::generic(1_000_000, 1 << 20, 1 << 10, 1 << 10, 1 << 22, 1 << 30).unwrap();
        let w = workload(1 << 20, 1 << 20, Attention::Eager);
        assert!(matches!(
            activations(&dims, &w),
            Err(Error::Overflow { .. })
        ));
    }

    #[test]
    fn deepseek_on_cuda_uses_memory_efficient_attention() {
        let dims =
            dimensions(&json!({"model_type": "deepseek_v3", "num_hidden_layers": 4})).unwrap();
        let e = activations(&dims, &workload(1, 4096, Attention::Sdpa)).unwrap();
        assert!(
            e.notes.iter().any(|n| n.contains("memory-efficient")),
            "{:?}",
            e.notes
        );
        assert!(e.layers.iter().any(|p| p.name == "experts"));
    }
}
