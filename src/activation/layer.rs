//! One decoder layer: what each of its parts saves without recomputation,
//! assembled from the norm, attention, MLP and expert formulas by the
//! architecture's layout.

use super::attention::{self, Core, CoreOptions, Kernel};
use super::autocast;
use super::experts;
use super::kernels::Kernels;
use super::lora::Training;
use super::mlp;
use super::norms::{self, FP32, NormSite};
use super::parallel::Rank;
use super::tally::{Tally, plus, times};
use crate::architecture::{Dimensions, LayerLayout, QkNormKind, QkvLayout};
use crate::error::Result;
use crate::units::Bytes;

/// Norms sitting before or after a layer's two blocks, by layout.
pub(super) fn hidden_norms(layout: LayerLayout) -> u64 {
    match layout {
        LayerLayout::ParallelSharedNorm => 1,
        LayerLayout::PreNorm | LayerLayout::PostNorm | LayerLayout::ParallelResidual => 2,
        LayerLayout::Sandwich => 4,
    }
}

/// Which of a layer's tensors need a gradient when its base is frozen.
/// A frozen op whose inputs need none builds no autograd node and saves
/// nothing; the first layer's input, a frozen embedding's output, needs
/// none unless something installs `enable_input_require_grads` (see
/// `Step::first_input_needs_gradient`). Measured on CPU: peft LoRA on
/// q/k/v/o with dropout (`__lora-qkvo-r16-d0.1-`, no checkpointing) saves
/// three adapters' masks and three norms where four layers have four, and
/// litgpt's Phi layer 0 (one norm feeding attention and MLP in parallel)
/// saves neither the norm nor the frozen MLP (`__litgpt-lora-qv-r8-d0.05`).
/// A layer with no adapter at all is priced as if its input needed a
/// gradient (its output would need none, and neither would the next
/// layer's input: LoRA on the head alone; not modelled).
#[derive(Debug, Clone, Copy)]
struct Gradients {
    /// The layer's input.
    input: bool,
    /// The attention block's tensors (an adapter on q/k/v or on the
    /// output projection, or an input needing one).
    attention: bool,
    /// The MLP's input.
    mlp_input: bool,
    /// The MLP's inner product, `down_proj`'s input.
    mlp_product: bool,
    /// The MLP's output.
    mlp_output: bool,
}

impl Gradients {
    fn of(dims: &Dimensions, training: &Training, input_gradient: bool) -> Gradients {
        let linears = &dims.linears;
        let mut attention_linears: Vec<&str> = linears.attention_input.to_vec();
        attention_linears.extend([linears.attention_output, "kv_b_proj", "q_b_proj"]);
        let attention_adapters = training.adapters(&attention_linears);
        let mlp_input_adapters = training.adapters(&linears.mlp_input);
        let mlp_adapters = mlp_input_adapters + training.adapters(&[linears.mlp_output]);
        let input =
            input_gradient || !training.frozen_base || attention_adapters + mlp_adapters == 0;
        let attention = input || attention_adapters > 0;
        let parallel = matches!(
            dims.layout,
            LayerLayout::ParallelSharedNorm | LayerLayout::ParallelResidual
        );
        let mlp_input = if parallel { input } else { attention };
        let mlp_product = mlp_input || mlp_input_adapters > 0;
        Gradients {
            input,
            attention,
            mlp_input,
            mlp_product,
            mlp_output: mlp_product || mlp_adapters > 0,
        }
    }

    /// How many of `layout`'s norms over the hidden state save their
    /// tensors: those whose input needs a gradient.
    fn hidden_norms(self, layout: LayerLayout) -> u64 {
        let count = |needs: &[bool]| needs.iter().filter(|needs| **needs).count() as u64;
        match layout {
            LayerLayout::ParallelSharedNorm | LayerLayout::ParallelResidual => {
                u64::from(self.input) * hidden_norms(layout)
            }
            // Before attention (the input), before the MLP (input + attention).
            LayerLayout::PreNorm => count(&[self.input, self.attention]),
            // After attention's residual sum, after the MLP's.
            LayerLayout::PostNorm => count(&[self.attention, self.mlp_output]),
            // Gemma 2: input, attention's output, the MLP's input, its output.
            LayerLayout::Sandwich => {
                count(&[self.input, self.attention, self.attention, self.mlp_output])
            }
        }
    }
}

/// Everything one layer saves, by part, before recomputation decides what stays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SavedLayer {
    /// The norms over the hidden state, on queries and keys, and in
    /// DeepSeek's bottlenecks.
    pub norms: Bytes,
    /// The inputs the projections into attention keep (q/k/v's shared
    /// input; DeepSeek's bottleneck outputs).
    pub attention: Bytes,
    /// The output projection's input, P·T·a·dv (0 when frozen).
    pub output_input: Bytes,
    /// What the attention kernel saves.
    pub core: Core,
    /// What selective recomputation keeps of the core instead.
    pub core_inputs: Bytes,
    /// The dense MLP (its input and intermediates).
    pub mlp: Bytes,
    /// The mixture of experts (its input, router, routed and shared experts).
    pub experts: Bytes,
    /// The hidden-state dropout masks.
    pub dropout: Bytes,
    /// The LoRA adapters' `T x r` outputs of `lora_A`, and the inputs and
    /// dropout masks each adapter keeps of its own (see `lora.rs`).
    pub lora: Bytes,
    /// The layer's input, P·n·h: all that full recomputation keeps.
    pub input: Bytes,
}

/// What one layer (dense, or `sparse` with the experts) saves on a rank.
///
/// For a Llama layer in bf16 without parallelism (P = 2, T = B·S, n = T):
/// two RMSNorms 2(4Th + 4T + 2Th), q/k/v's input 2Th, the core, the
/// output projection's input (shared with the flash output), the MLP's
/// input 2Th and intermediates 4·2Tf.
///
/// For a Phi layer (one LayerNorm feeding both blocks; CPU statistics in
/// the input dtype, no dropout): the norm's input and statistics
/// P·Th + 2·P·T, its output once P·Th (q/k/v's and fc1's input), q/k
/// LayerNorms P·T·a·d + 2·P·T·a and P·T·kv·d + 2·P·T·kv when
/// `qk_layernorm`, the core, a copy of its output for `dense` P·T·a·d
/// (the flash output is laid out per head), `NewGELU`'s 4·P·Tf and fc2's
/// input P·Tf; with `resid_pdrop` two masks 2·P·Th.
///
/// `input_gradient` false: the layer's input needs no gradient (the first
/// layer over a frozen embedding, see [`Gradients`]).
pub fn saved(
    rank: &Rank,
    dims: &Dimensions,
    kernels: &Kernels,
    training: &Training,
    kernel: Kernel,
    sparse: bool,
    input_gradient: bool,
) -> Result<SavedLayer> {
    let p = rank.element;
    let (n, t, h) = (rank.sequence_tokens, rank.tokens, rank.hidden);
    let gradients = Gradients::of(dims, training, input_gradient);
    // The norms over the residual stream compute in its dtype, those
    // inside attention (q/k norms, bottlenecks) in the compute dtype.
    let norm_in = |element: u64, width: u64, rows: u64| {
        norms::saved(
            NormSite {
                kind: dims.norm,
                width,
                rows,
                element,
                frozen: training.frozen_base,
            },
            kernels.layer_norm_stats,
        )
    };
    let hidden_norm = |width: u64, rows: u64| norm_in(rank.normed, width, rows);
    let norm = |width: u64, rows: u64| norm_in(p, width, rows);
    let linears = &dims.linears;

    let mut norm_bytes = Tally::new();
    match dims.layout {
        LayerLayout::ParallelResidual if gradients.input => {
            norm_bytes.add(hidden_norm(h, n)?)?;
            norm_bytes.add(norms::statistics(n, rank.normed, kernels.layer_norm_stats)?)?;
        }
        layout => norm_bytes.add(times(hidden_norm(h, n)?, gradients.hidden_norms(layout))?)?,
    }
    let d = dims.head_dim;
    match dims.qk_norm {
        _ if !gradients.attention => {}
        QkNormKind::None => {}
        QkNormKind::PerHead => {
            norm_bytes.add(norm(d, t.saturating_mul(rank.heads))?)?;
            norm_bytes.add(norm(d, t.saturating_mul(rank.kv_heads))?)?;
        }
        QkNormKind::WholeProjection => {
            norm_bytes.add(norm(rank.heads.saturating_mul(d), t)?)?;
            norm_bytes.add(norm(rank.kv_heads.saturating_mul(d), t)?)?;
        }
    }

    let mut attention_bytes = Tally::new();
    let attention_keeps_input = training.keeps_input(&linears.attention_input);
    attention_bytes.tensor(&[
        autocast::input_copies(rank, training, &linears.attention_input),
        p,
        n,
        h,
    ])?;
    let mut lora_adapters = training.adapters(&linears.attention_input)
        + training.adapters(&[linears.attention_output]);
    // Each adapter's own input (a cast copy or its dropped input) and
    // dropout mask, when it does not share the compute-dtype input.
    // A dropout whose input needs no gradient builds no autograd node:
    // the adapter saves its dropped input and no mask.
    let adapter_input = |input_gradient: bool| {
        if input_gradient {
            training.own_input_element(kernels)
        } else {
            training.adapter_element
        }
    };
    let mut lora = Tally::new();
    let mut own_input = |count: u64, element: u64, rows: u64, width: u64| {
        lora.tensor_if(
            training.own_inputs && count > 0,
            &[count, element, rows, width],
        )
    };
    // litgpt's fused q/k/v adapter drops its input once for all enabled
    // parts and saves `zero_pad`'s source and index (`FusedQkv`).
    let qkv_adapters = training.adapters(&linears.attention_input);
    let qkv_input = adapter_input(gradients.input);
    let padded = match training.fused_qkv {
        Some(fused) if qkv_adapters > 0 => {
            own_input(1, qkv_input, n, h)?;
            fused.padded(t, training.adapter_element)?
        }
        _ => {
            own_input(qkv_adapters, qkv_input, n, h)?;
            Bytes::ZERO
        }
    };
    own_input(
        training.adapters(&[linears.attention_output]),
        adapter_input(true),
        t,
        attention::output_width(rank, dims),
    )?;
    if let QkvLayout::Latent(latent) = dims.qkv {
        // kv_a_layernorm over the key/value bottleneck; in fp32 its
        // `.to(float32)` copies nothing and the saved input is a view of
        // `kv_a_proj_with_mqa`'s whole output, rotary part included.
        norm_bytes.add(norm(latent.kv_lora_rank, n)?)?;
        norm_bytes.tensor_if(
            p == FP32 && norms::upcasts(dims.norm),
            &[FP32, n, latent.qk_rope_head_dim],
        )?;
        attention_bytes.tensor_if(
            training.keeps_input(&["kv_b_proj"]),
            &[p, n, latent.kv_lora_rank],
        )?;
        lora_adapters += training.adapters(&["kv_b_proj"]);
        own_input(
            training.adapters(&["kv_b_proj"]),
            adapter_input(true),
            n,
            latent.kv_lora_rank,
        )?;
        if let Some(rank_q) = latent.q_lora_rank {
            norm_bytes.add(norm(rank_q, n)?)?;
            attention_bytes.tensor_if(training.keeps_input(&["q_b_proj"]), &[p, n, rank_q])?;
            lora_adapters += training.adapters(&["q_b_proj"]);
            own_input(
                training.adapters(&["q_b_proj"]),
                adapter_input(true),
                n,
                rank_q,
            )?;
        }
    }

    let mut output_input = Tally::new();
    output_input.tensor_if(
        training.keeps_input(&[linears.attention_output]),
        &[p, t, attention::output_width(rank, dims)],
    )?;
    let mut core = attention::core(
        rank,
        dims,
        kernel,
        CoreOptions {
            dropout: dims.dropout.attention,
            softcap: dims.softcap.attention,
            mask: kernels.dropout_mask,
        },
    )?;
    if !gradients.attention {
        core.saved = Bytes::ZERO;
    }

    // With one shared norm the MLP's input is the storage q/k/v keep
    // (under autocast each linear keeps its own cast).
    let input_shared =
        dims.layout == LayerLayout::ParallelSharedNorm && attention_keeps_input && rank.normed == p;
    let mut block_input = Tally::new();
    block_input.tensor_if(
        !input_shared,
        &[
            autocast::input_copies(rank, training, &linears.mlp_input),
            p,
            n,
            h,
        ],
    )?;
    let down_keeps_input = training.keeps_input(&[linears.mlp_output]);
    let mlp_adapters =
        training.adapters(&linears.mlp_input) + training.adapters(&[linears.mlp_output]);
    let mlp_own_inputs = |lora: &mut dyn FnMut(u64, u64, u64, u64) -> Result<()>| -> Result<()> {
        lora(
            training.adapters(&linears.mlp_input),
            adapter_input(gradients.mlp_input),
            n,
            h,
        )?;
        lora(
            training.adapters(&[linears.mlp_output]),
            adapter_input(gradients.mlp_product),
            t,
            rank.intermediate,
        )
    };
    let (mut mlp_bytes, mut expert_bytes) = (Bytes::ZERO, Bytes::ZERO);
    match (&dims.experts, sparse) {
        (Some(moe), true) => {
            let mut tally = block_input;
            tally.add(experts::router(rank, moe)?)?;
            tally.add(experts::routed(rank, moe, kernels.experts)?)?;
            tally.add(experts::shared(rank, moe.shared, down_keeps_input)?)?;
            expert_bytes = tally.bytes();
            if moe.shared != crate::architecture::SharedExpert::None {
                lora_adapters += mlp_adapters;
                mlp_own_inputs(&mut own_input)?;
            }
        }
        _ if !gradients.mlp_product => {
            // Nothing before `down_proj` needs a gradient: only its
            // adapter saves (the product it shares with the frozen linear,
            // or its own dropped copy).
            let mut tally = Tally::new();
            tally.tensor_if(down_keeps_input, &[rank.projected, t, rank.intermediate])?;
            mlp_bytes = tally.bytes();
            lora_adapters += mlp_adapters;
            mlp_own_inputs(&mut own_input)?;
        }
        _ => {
            mlp_bytes = plus(
                block_input.bytes(),
                mlp::saved(rank, dims.mlp, rank.intermediate, down_keeps_input)?,
            )?;
            lora_adapters += mlp_adapters;
            mlp_own_inputs(&mut own_input)?;
        }
    }

    let mut dropout = Tally::new();
    dropout.tensor_if(
        dims.dropout.residual,
        &[
            u64::from(gradients.attention) + u64::from(gradients.mlp_output),
            kernels.dropout_mask.bytes(rank.residual),
            n,
            h,
        ],
    )?;
    lora.tensor(&[lora_adapters, training.adapter_element, n, training.rank])?;
    lora.add(padded)?;
    let mut input = Tally::new();
    input.tensor(&[rank.residual, n, h])?;

    Ok(SavedLayer {
        norms: norm_bytes.bytes(),
        attention: attention_bytes.bytes(),
        output_input: output_input.bytes(),
        core,
        core_inputs: attention::checkpoint_inputs(rank, dims)?,
        mlp: mlp_bytes,
        experts: expert_bytes,
        dropout: dropout.bytes(),
        lora: lora.bytes(),
        input: input.bytes(),
    })
}
