//! One micro-batch on one rank: every layer's saved tensors, recomputed
//! parts and backward working set, assembled into a pipeline stage's
//! [`Activations`] and its [`Schedule`] for the step timeline.

use std::borrow::Cow;

use super::attention::{self, Kernel};
use super::implementation;
use super::lora::{HeadCall, Training};
use super::offload::{MIN_OFFLOAD_SIZE, Offloaded};
use super::parallel::{Rank, Stage};
use super::recompute::{Kept, PARTS};
use super::tally::{Tally, plus, times};
use super::{
    Activations, FP32_BYTES, Kernels, LayerActivations, Loss, Part, Platform, Recompute, Schedule,
    Workload, autocast, chunked_loss, context, embeddings, encoder_head, fp8, fused_loss, layer,
    loss, megatron, mlp, norms, offload, recompute, techniques,
};
use crate::architecture::{Dimensions, LayerLayout, MlpKind, NormKind};
use crate::error::Result;
use crate::units::Bytes;

/// One micro-batch on one rank: everything the formulas read.
pub(super) struct Step<'a> {
    /// The architecture as the implementation's modules save it.
    dims: Cow<'a, Dimensions>,
    workload: &'a Workload,
    kernels: &'a Kernels,
    rank: Rank,
    training: Training<'a>,
    kernel: Kernel,
}

impl<'a> Step<'a> {
    /// The step of `dims` (the architecture as its config reads, before
    /// the implementation's rules rewrite its module kinds).
    pub(super) fn new(
        dims: &'a Dimensions,
        workload: &'a Workload,
        kernels: &'a Kernels,
    ) -> Result<Step<'a>> {
        let mut training = Training::new(workload);
        training.fused_qkv = implementation::fused_qkv(dims, workload);
        let dims = implementation::dimensions(dims, workload.implementation, workload.platform);
        let kernel = Kernel::resolve(
            workload.attention,
            kernels,
            &dims,
            workload.dtype,
            dims.dropout.attention,
        );
        techniques::check(&dims, workload, kernel)?;
        Ok(Step {
            rank: Rank::new(&dims, workload)?,
            dims,
            workload,
            kernels,
            training,
            kernel,
        })
    }

    /// What one layer keeps: under the recompute mode when `checkpointed`
    /// (see `--recompute-every`), everything otherwise.
    pub(super) fn layer(&self, sparse: bool, checkpointed: bool) -> Result<Kept> {
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

    /// What bitsandbytes before 0.43.2 holds of a layer beyond what
    /// autograd saves: `MatMul4Bit.forward` (0.42.0,
    /// `bitsandbytes/autograd/_functions.py` lines 494-527) keeps
    /// `ctx.tensors = (A, B)` whenever its input needs a gradient, an
    /// attribute that neither the node's backward releases nor a
    /// checkpoint's or an offload's saved-tensor hooks see: each 4-bit
    /// linear's input `A`, as `Linear4bit.forward` passes it (cast to the
    /// compute dtype: one copy per linear when the block's input is in
    /// another dtype, the shared input otherwise), lives until the graph
    /// dies. With `all`, every one of them; without, those a layer kept
    /// whole does not save anyway (an adapter sharing its input, the flash
    /// output as the output projection's input): the bytes they add. A
    /// checkpointed layer saves none of them, so under non-reentrant
    /// checkpointing all of them are held; a reentrant checkpoint's forward
    /// runs under no_grad and holds none (its rebuild in backward holds
    /// the layer's, priced with the recomputed tensors). The first
    /// layer's q/k/v input needs no gradient unless the embedding's output
    /// does (a trained embedding, or transformers' gradient checkpointing,
    /// which calls `enable_input_require_grads`). Measured on CPU with
    /// 0.42.0's class ported (`__bnb-0.42` fixtures). Offloaded layers are
    /// not counted (an approximation).
    pub(super) fn held_inputs(
        &self,
        sparse: bool,
        checkpointed: bool,
        first: bool,
        all: bool,
    ) -> Result<Bytes> {
        let training = &self.training;
        if !training.holds_quantized_inputs() || self.workload.offload_activations {
            return Ok(Bytes::ZERO);
        }
        let rank = &self.rank;
        let linears = &self.dims.linears;
        let p = rank.element;
        let cast = rank.normed != p;
        let checkpointed = checkpointed || all;
        let copies = |names: &[&str]| -> u64 {
            if cast {
                names.len() as u64
            } else {
                u64::from(checkpointed || !training.keeps_input(names))
            }
        };
        let needs_gradient = !first || self.first_input_needs_gradient();
        let mut held = Tally::new();
        let n = rank.sequence_tokens;
        if needs_gradient {
            held.tensor(&[copies(&linears.attention_input), p, n, rank.hidden])?;
        }
        let output = linears.attention_output;
        let shared = self.saved_layer(sparse)?.core.output_shared;
        held.tensor_if(
            checkpointed || !(shared || training.keeps_input(&[output])),
            &[p, rank.tokens, attention::output_width(rank, &self.dims)],
        )?;
        if !sparse {
            held.tensor(&[copies(&linears.mlp_input), p, n, rank.hidden])?;
            held.tensor_if(
                cast || checkpointed || !training.keeps_input(&[linears.mlp_output]),
                &[p, rank.tokens, rank.intermediate],
            )?;
        }
        Ok(held.bytes())
    }

    /// What torchtitan's per-op policy keeps of a layer besides its input:
    /// the odd matmuls' outputs and the sdpa kernel's output and fp32
    /// log-sum-exp [B, a, S] when the policy lists the kernel the platform
    /// runs (`techniques::check` refuses other layers).
    pub(super) fn op_saved(&self) -> Result<recompute::OpSaved> {
        let rank = &self.rank;
        let d = self.dims.head_dim;
        let mut log_sum_exp = Tally::new();
        log_sum_exp.tensor(&[FP32_BYTES, rank.batch, rank.heads, rank.seq])?;
        let listed = implementation::op_policy_saves_attention(
            self.workload.implementation,
            self.workload.platform,
        );
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
            listed.then(|| log_sum_exp.bytes()),
        )
    }

    /// Everything one layer saves, before recomputation decides what stays.
    /// Whether the first layer's input, the embeddings' output, needs a
    /// gradient: when a weight before it trains (a base not frozen, a
    /// trained embedding, a trained image projector) or when transformers'
    /// gradient checkpointing has called `enable_input_require_grads` (a
    /// hook making the embedding's output require one, which peft and
    /// `gradient_checkpointing_enable` install for frozen embeddings).
    /// litgpt, torchtune and torchtitan install no such hook.
    pub(super) fn first_input_needs_gradient(&self) -> bool {
        !self.training.frozen_base
            || self.workload.embeddings_train
            || self
                .dims
                .images
                .as_ref()
                .is_some_and(|images| images.projector_trains || images.embeddings_train)
            || (self.workload.recompute != Recompute::None
                && self.workload.implementation
                    == crate::architecture::Implementation::Transformers)
    }

    pub(super) fn saved_layer(&self, sparse: bool) -> Result<layer::SavedLayer> {
        self.saved_layer_with(sparse, true)
    }

    /// What a layer saves, `input_gradient` false when its input needs no
    /// gradient (the first layer: [`Step::first_input_needs_gradient`]).
    fn saved_layer_with(&self, sparse: bool, input_gradient: bool) -> Result<layer::SavedLayer> {
        if self.workload.megatron_kernels {
            return megatron::saved(
                &self.rank,
                &self.dims,
                self.kernels,
                sparse,
                self.workload.fp8.is_some_and(|f| f.saves_fp8_inputs),
            );
        }
        layer::saved(
            &self.rank,
            &self.dims,
            self.kernels,
            &self.training,
            self.kernel,
            sparse,
            input_gradient,
        )
    }

    /// What the first layer keeps when it is not checkpointed and its
    /// input needs no gradient; `None` otherwise (it is priced as the others).
    fn first_layer_kept(&self, stage: Stage) -> Result<Option<Kept>> {
        let checkpointed = recompute::checkpointed(0, self.workload.recompute_every)
            && self.workload.recompute != Recompute::None;
        if stage.first_layer > 0
            || stage.layers == 0
            || checkpointed
            || self.workload.offload_activations
            || self.first_input_needs_gradient()
        {
            return Ok(None);
        }
        let saved = self.saved_layer_with(self.dims.is_sparse(0), false)?;
        recompute::kept(
            Recompute::None,
            self.workload.recompute_reentrant,
            &saved,
            recompute::OpSaved::default(),
        )
        .map(Some)
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
    pub(super) fn layer_backward(&self, sparse: bool, checkpointed: bool) -> Result<Bytes> {
        let rank = &self.rank;
        let saved = self.saved_layer(sparse)?;
        let mut residual = Tally::new();
        residual.tensor(&[rank.element, rank.sequence_tokens, rank.hidden])?;
        let mut mlp = residual;
        let output = self.dims.linears.mlp_output;
        let product = if sparse {
            Bytes::ZERO
        } else if self.training.frozen_base && self.dims.mlp == MlpKind::Gated {
            mlp::frozen_product_backward(rank, rank.intermediate, self.mlp_output_saved()?)?
        } else {
            mlp::product_backward(
                rank,
                self.dims.mlp,
                rank.intermediate,
                self.training.keeps_input(&[output]),
            )?
        };
        mlp.add(self.widest_tensor()?.max(product))?;
        let rebuilt = if checkpointed && !sparse {
            self.adapted_mlp_recompute()?
        } else {
            Bytes::ZERO
        };
        let mlp = {
            let mut most = Tally::new();
            most.add(mlp.bytes().max(rebuilt))?;
            most
        };
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
            &self.dims,
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

    /// The bytes the MLP's output projection saves of its input (`T x f`):
    /// the compute-dtype product when it keeps it (trained, or sharing it
    /// with its adapter), and its adapter's own input and dropout mask (see
    /// `lora.rs`). All of it is released by the projection's backward.
    fn mlp_output_saved(&self) -> Result<Bytes> {
        let rank = &self.rank;
        let training = &self.training;
        let output = self.dims.linears.mlp_output;
        let mut tally = Tally::new();
        if training.keeps_input(&[output]) {
            tally.tensor(&[rank.element, rank.tokens, rank.intermediate])?;
        }
        if training.is_adapted(output) && training.own_inputs {
            let mask = if training.dropout {
                self.kernels.dropout_mask.bytes(training.dropped_element)
            } else {
                0
            };
            tally.tensor(&[
                training.adapter_element + mask,
                rank.tokens,
                rank.intermediate,
            ])?;
        }
        Ok(tally.bytes())
    }

    /// One call of the output head: all tokens, or one chunk's (litgpt's
    /// `lm_head_chunk_size`, torchtune's chunked output with `--loss
    /// chunked:N`: `torch.chunk` into ceil(S / N) positions).
    fn head_call(&self) -> Result<HeadCall> {
        let rank = &self.rank;
        let implementation = self.workload.implementation;
        let rows = match self.workload.loss {
            Loss::Chunked(chunks) => chunked_loss::chunk_tokens(rank, chunks),
            Loss::Standard => {
                implementation::head_chunk(rank, implementation, self.workload.frozen_base)
                    .unwrap_or(rank.tokens)
            }
            Loss::ShiftCopy | Loss::Fused => rank.tokens,
        };
        Ok(HeadCall {
            rows,
            own_gradient: implementation::outputs_cast(rank, implementation)? > Bytes::ZERO,
            cast_by_copy: self.workload.platform == Platform::Cpu,
        })
    }

    /// What a checkpointed layer whose MLP linears carry LoRA adapters
    /// holds, besides its full saved set, at the height of its
    /// recomputation (`--recompute full`, frozen base).
    ///
    /// The recomputation runs inside the layer's backward, so the layer's
    /// output gradient (`T x h`) is alive; without reentrancy the engine
    /// has also run the nodes that need no saved tensor before the first
    /// one that does (`lora_B`'s `MmBackward0` of the output projection):
    /// the layer's residual `AddBackward0`, peft's `.to()` and `+`, whose
    /// `AddBackward0` casts the gradient of the frozen `result` to the
    /// compute dtype when the sum was promoted, and `* scaling`, a new
    /// gradient in the adapter's dtype. The reentrant checkpoint recomputes
    /// before any of the layer's nodes runs (`CheckpointFunction.backward`).
    ///
    /// During the MLP's forward the decoder layer's residual (`T x h`,
    /// `residual = hidden_states` in `LlamaDecoderLayer.forward`, saved by
    /// nobody) and the MLP's input, unless a linear keeps it, are alive.
    /// Two moments then stand out (peft's `Linear.forward`, see
    /// [`Training::forward_height`]):
    /// * inside the last input projection (`up_proj`), whose `T x f`
    ///   output is at its forward height, less what is not rebuilt yet: its
    ///   own output once cast (saved by the product) and the output
    ///   projection's saved input;
    /// * inside the output projection: the product (its input, unless it
    ///   saves it), the cast copy of it when dropout saves the dropped one
    ///   instead, and the `T x h` output: the frozen `result` alone without
    ///   reentrancy, because torch's non-reentrant checkpoint stops the
    ///   recomputation once the last saved tensor is rebuilt (`early_stop`,
    ///   `torch/utils/checkpoint.py` `_StopRecomputationError`), here
    ///   `lora_A`'s output; the whole forward height with it.
    ///
    /// Measured: the CPU fixtures `*__full__*__lora-all-*.json` (peaks in
    /// `up_proj`'s `aten::add` with fp32 adapters, at `down_proj`'s
    /// `lora_A` with dropout).
    fn adapted_mlp_recompute(&self) -> Result<Bytes> {
        let training = &self.training;
        let linears = &self.dims.linears;
        let inputs = training.adapters(&linears.mlp_input);
        let output = training.is_adapted(linears.mlp_output);
        if !training.frozen_base
            || (inputs == 0 && !output)
            || self.workload.recompute != Recompute::Full
        {
            return Ok(Bytes::ZERO);
        }
        let rank = &self.rank;
        let (element, adapter) = (rank.element, training.adapter_element);
        let reentrant = self.workload.recompute_reentrant;
        let height = training.forward_height(element, self.workload.platform == Platform::Cpu);
        let area = |bytes: u64, width: u64| -> Result<Bytes> {
            let mut tally = Tally::new();
            tally.tensor(&[bytes, rank.tokens, width])?;
            Ok(tally.bytes())
        };
        let (hidden, width) = (rank.hidden, rank.intermediate);
        let mut around = Tally::new();
        // The layer's output gradient and the decoder layer's residual.
        around.tensor(&[2, element, rank.tokens, hidden])?;
        if !reentrant && output {
            around.add(area(adapter, hidden)?)?;
            if adapter != element {
                around.add(area(element, hidden)?)?;
            }
        }
        if !training.keeps_input(&linears.mlp_input) {
            around.add(area(element, hidden)?)?;
        }
        let up = if inputs > 0 {
            let not_yet = plus(area(element, width)?, self.mlp_output_saved()?)?;
            Bytes(area(height, width)?.0.saturating_sub(not_yet.0))
        } else {
            Bytes::ZERO
        };
        let down = if output {
            let mut tally = Tally::new();
            if !training.keeps_input(&[linears.mlp_output]) {
                tally.add(area(element, width)?)?;
            }
            if adapter != element && training.dropout {
                tally.add(area(adapter, width)?)?;
            }
            tally.add(area(if reentrant { height } else { element }, hidden)?)?;
            tally.bytes()
        } else {
            Bytes::ZERO
        };
        around.add(up.max(down))?;
        Ok(around.bytes())
    }

    /// Whether every layer is checkpointed (full or per-op recomputation
    /// on every layer): the rotary tables are then held by the checkpoints.
    pub(super) fn every_layer_checkpointed(&self) -> bool {
        matches!(self.workload.recompute, Recompute::Full | Recompute::Op)
            && self.workload.recompute_every <= 1
    }

    /// What offloading does to one layer that keeps `kept` (see `offload.rs`).
    pub(super) fn layer_offload(
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
            dims: &self.dims,
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
                &self.dims,
                self.every_layer_checkpointed(),
                self.kernel,
            )?,
        })
    }

    /// The final norm under offloading: the device bytes it no longer keeps
    /// (none with CUDA streams: its packs are the last of forward, still in
    /// torchtune's `fwd_stash` when backward starts) and its host copies.
    pub(super) fn final_norm_offload(&self) -> Result<(Bytes, Bytes)> {
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
        if norms::upcasts(self.dims.norm) {
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
    pub(super) fn widest_tensor(&self) -> Result<Bytes> {
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
    pub(super) fn stage(&self, stage: Stage) -> Result<Activations> {
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
        let first_kept = self.first_layer_kept(stage)?;
        for layer in stage.first_layer..end {
            if layer == 0 && first_kept.is_some() {
                continue;
            }
            let row = usize::from(self.dims.is_sparse(layer));
            let column = usize::from(recompute::checkpointed(layer, every));
            counts[row][column] += 1;
        }
        let in_flight = stage.in_flight;
        let fp8_figures = match &self.workload.fp8 {
            Some(recipe) => Some(fp8::figures(&self.rank, &self.dims, recipe, stage.layers)?),
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
            if let Some(first) = &first_kept {
                bytes = plus(bytes, first.parts[index])?;
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
        let mut backward = [[Bytes::ZERO; 2]; 2];
        for (sparse, row) in backward.iter_mut().enumerate() {
            for (checkpointed, cell) in row.iter_mut().enumerate() {
                *cell = self.layer_backward(sparse == 1, checkpointed == 1)?;
            }
        }
        schedule.widest_tensor = self.widest_tensor()?;
        let mut added_total = Tally::new();
        for layer in stage.first_layer..end {
            let is_sparse = self.dims.is_sparse(layer);
            let column = usize::from(recompute::checkpointed(layer, every));
            let kind = match &first_kept {
                Some(first) if layer == 0 => first,
                _ => &kinds[usize::from(is_sparse)][column],
            };
            let offload = offloads.map(|o| o[usize::from(is_sparse)][column]);
            let checkpointed = column == 1 && self.workload.recompute != Recompute::None;
            let first = layer == 0;
            // A reentrant checkpoint runs the layer's forward under no_grad:
            // its contexts die with it, and only the rebuild in backward
            // holds the inputs, until that layer's backward ends.
            let rebuilt = checkpointed && self.workload.recompute_reentrant;
            let (added, held, rebuilt_held) = if rebuilt {
                let rebuilt_held = self.held_inputs(is_sparse, false, first, false)?;
                (Bytes::ZERO, Bytes::ZERO, rebuilt_held)
            } else {
                (
                    self.held_inputs(is_sparse, checkpointed, first, false)?,
                    self.held_inputs(is_sparse, checkpointed, first, true)?,
                    Bytes::ZERO,
                )
            };
            added_total.add(times(added, in_flight)?)?;
            schedule.layers.push(LayerActivations {
                layer,
                kept: plus(offload.map_or(kind.total(), |o| Ok(o.resident))?, added)?,
                held,
                recomputed: plus(kind.recomputed, rebuilt_held)?,
                backward: plus(
                    backward[usize::from(is_sparse)][column],
                    fp8_figures.map_or(Bytes::ZERO, |f| f.backward_casts),
                )?,
                unpacked: offload.map_or(Bytes::ZERO, |o| o.unpacked),
                closing: offload.map_or(Bytes::ZERO, |o| o.closing),
                ring: context::forward(&self.rank, &self.dims, self.workload.context_parallel)?,
                fp8_casts: fp8_figures.map_or(Bytes::ZERO, |f| f.forward_casts),
                recast: self.workload.autocast
                    && column == 1
                    && self.workload.recompute == Recompute::Full,
            });
        }
        let added_total = added_total.bytes();
        if added_total > Bytes::ZERO {
            layer_total.add(added_total)?;
            layers.push(Part {
                name: "4-bit linears' inputs (bitsandbytes < 0.43.2 holds them)".to_string(),
                bytes: added_total,
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
                    encoder_head::embeddings(&self.rank, &self.dims, encoder, self.kernels)?
                }
                None => embeddings::saved(&self.rank, &self.dims, self.kernels)?,
            };
            if let Some(images) = &self.dims.images {
                schedule.embeddings =
                    plus(schedule.embeddings, embeddings::images(&self.rank, images)?)?;
            }
            if let Some(encoder) = &self.dims.encoder {
                schedule.batch_inputs = encoder_head::batch_inputs(&self.rank, encoder)?;
            }
            if offloads.is_some() && schedule.embeddings.0 >= MIN_OFFLOAD_SIZE {
                host.add(schedule.embeddings)?;
                embeddings_offloaded = std::mem::take(&mut schedule.embeddings);
            }
            outside.add(schedule.embeddings)?;
        }
        if stage.layers > 0 {
            schedule.shared = embeddings::shared_by_layers(
                &self.rank,
                &self.dims,
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
                Some(encoder) => encoder_head::head(
                    &self.rank,
                    encoder,
                    self.kernels,
                    self.dims.tied_embeddings,
                )?,
                None => loss::head(&self.rank, &self.dims, self.kernels, &self.training, !liger)?,
            };
            if self.dims.encoder.is_none() {
                let adapter = self
                    .training
                    .head(&self.rank, self.kernels, self.head_call()?)?;
                schedule.head = plus(schedule.head, adapter.saved)?;
                schedule.head_forward = adapter.forward;
                schedule.head_backward = adapter.backward;
            }
            if offloads.is_some() {
                let (device, copies) = self.final_norm_offload()?;
                head_offloaded = device;
                host.add(copies)?;
                schedule.head = Bytes(schedule.head.0.saturating_sub(device.0));
            }
            outside.add(schedule.head)?;
            // litgpt's QLoRA quantizes the head too (`finetune::Lora::quantize_head`):
            // before 0.43.2 it holds the final norm's output.
            if self.training.holds_quantized_inputs()
                && self.workload.implementation == crate::architecture::Implementation::Litgpt
                && offloads.is_none()
            {
                let mut input = Tally::new();
                input.tensor(&[self.rank.element, self.rank.tokens, self.rank.hidden])?;
                schedule.head_held = input.bytes();
                outside.add(schedule.head_held)?;
            }
            let phase = if let Some(encoder) = &self.dims.encoder {
                encoder_head::phase(&self.rank, encoder, self.workload.autocast)?
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
                    Loss::Standard => {
                        match implementation::standard_loss(
                            &self.rank,
                            self.workload.implementation,
                            self.workload.frozen_base,
                        )? {
                            Some(phase) => phase,
                            None => loss::standard(&self.rank)?,
                        }
                    }
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
            let cast = implementation::outputs_cast(&self.rank, self.workload.implementation)?;
            // The loop's copy replaces the model's logits while the loss runs.
            logits = if cast > Bytes::ZERO {
                cast
            } else {
                phase.logits
            };
            schedule.outputs_cast = cast;
            loss_bytes = phase.saved;
            transient = phase
                .backward
                .max(schedule.head_forward)
                .max(schedule.head_backward);
            schedule.logits = phase.logits;
            schedule.logits_upcast = phase.upcast;
            schedule.loss = phase.saved;
            schedule.loss_backward = phase.backward;
            schedule.logits_gradient = phase.logits_gradient;
            schedule.last_hidden_state = autocast::last_hidden_state(&self.rank, self.workload)?;
        }
        for (sparse, (row, counts_row)) in kinds.iter().zip(counts).enumerate() {
            for (column, (kind, count)) in row.iter().zip(counts_row).enumerate() {
                if count > 0 {
                    let rebuilt_held = if column == 1
                        && self.workload.recompute != Recompute::None
                        && self.workload.recompute_reentrant
                    {
                        self.held_inputs(sparse == 1, false, false, false)?
                    } else {
                        Bytes::ZERO
                    };
                    transient = transient.max(plus(kind.recomputed, rebuilt_held)?);
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
                "pipeline: stage {} of {} is the most loaded, holding {} micro-batch(es) of {} layer(s) (1F1B: stage s holds min(p - s, m) of the m = {} micro-batches per step)",
                stage.index + 1,
                self.workload.pipeline,
                in_flight,
                stage.layers,
                self.workload.micro_batches,
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

    pub(super) fn empty(&self) -> Activations {
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
    pub(super) fn notes(&self) -> Vec<String> {
        let (dims, workload) = (&*self.dims, self.workload);
        let mut notes = vec![format!("attention: {}", self.kernel.describe())];
        if let Some(images) = &dims.images {
            notes.push(format!(
                "images: the language model runs over the merged sequence of text and image tokens; the frozen vision tower saves nothing (its hidden states live only while it runs forward, not counted); {}; the merge saves its B x S bool mask{}",
                if images.projector_trains {
                    "the projector saves linear_1's input (the selected layer's image rows) and GELU's and linear_2's inputs, n x T x hidden each"
                } else {
                    "the frozen projector saves nothing"
                },
                if images.projector_trains || images.embeddings_train {
                    ""
                } else {
                    " only when a gradient reaches it (not here)"
                }
            ));
        }
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
            Recompute::Op if !implementation::op_policy_saves_attention(
                workload.implementation,
                workload.platform,
            ) => notes.push(
                "op recomputation (torchtitan's per-op policy): each layer keeps its input and every second matmul's output (q, v, gate, down); the sdpa kernel (the CPU one, which torchtitan's save list does not name), norms, rotary, activations and the other matmuls are rebuilt in backward".to_string(),
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
