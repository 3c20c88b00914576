//! The FLOPs of one step, counted from the model's inventory.
//!
//! A linear of n weights costs 2·n FLOPs per token forward, 2·n backward for
//! the gradient of its input, and 2·n more for the gradient of its weight
//! when it is trainable: 6·n for a trained weight, 4·n for a frozen one
//! (LoRA's base). Summed over a dense model this is the 6·P·tokens of Kaplan
//! et al. 2020 (section 2.1) and of PaLM's MFU (Chowdhery et al. 2022,
//! appendix B). Norms, biases and embedding lookups do no matmul and are
//! left out; an output head tied to the embedding is counted as a linear.
//! A mixture of experts counts its routed experts by `top_k / experts`
//! (each token meets k of E) and its shared experts in full.
//!
//! Attention adds, per layer and sequence, QK^T (2·S²·a·d_qk) and PV
//! (2·S²·a·d_v) forward, twice that backward: the 4·B·S²·a·d of Narayanan
//! et al. 2021 (their 96·B·s·l·h²·(1 + s/6h + …) holds 12·B·s²·h per layer
//! without recomputation), the 12·L·H·Q·T of PaLM's appendix B and
//! torchtitan's `get_num_flop_per_token`. Like those three, the count is
//! *not* halved for a causal mask: FlashAttention skips the masked blocks,
//! so the real cost of a long causal sequence is lower and the assumed MFU
//! absorbs the difference. Sliding windows are not taken into account.
//!
//! Recomputation adds what the chosen mode runs again in backward:
//! `full` a layer's whole forward, `selective` its attention core
//! (Korthikanti et al. 2022, section 5), `op` (torchtitan's per-op policy,
//! which saves every second matmul) half of its linears' forward.

use serde::Serialize;

use crate::activation::{Recompute, Workload};
use crate::architecture::QkvLayout;
use crate::model::{Model, Role, Tensor};
use crate::parallel::{Layout, Parallelism, is_token_embedding, layer_of};

/// FLOPs per linear weight per token: forward, input gradient, weight gradient.
const FORWARD: u128 = 2;
const INPUT_GRADIENT: u128 = 2;
const WEIGHT_GRADIENT: u128 = 2;
/// Attention's backward costs twice its forward (two matmuls per forward one).
const BACKWARD_OVER_FORWARD: f64 = 2.0;
/// The share of a layer's linear forward torchtitan's per-op policy recomputes.
const OP_RECOMPUTED_SHARE: f64 = 0.5;

/// What a model costs per token, read once from its inventory; a layout
/// search prices every layout from this without walking the tensors again.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Work {
    /// Matmul weights a token meets inside the decoder layers (active experts only), trainable.
    pub layer_trainable: u128,
    /// The same, frozen.
    pub layer_frozen: u128,
    /// Matmul weights outside the layers (the output head), trainable.
    pub outer_trainable: u128,
    /// The same, frozen.
    pub outer_frozen: u128,
    /// Layers with attention.
    pub layers: u64,
    /// a·(d_qk + d_v): per layer, attention costs 2·S²·this FLOPs forward per sequence.
    pub attention_width: u64,
    /// 2 × kv heads × head width: the keys and values of one token, in elements.
    pub kv_width: u64,
    /// Hidden size h: a token's activation between layers, in elements.
    pub hidden: u64,
    /// Layers holding routed experts.
    pub moe_layers: u64,
    /// Experts each token is routed to.
    pub top_k: u64,
    /// Every parameter, and the routed experts' among them (for expert parallelism).
    pub parameters: u128,
    /// The routed experts' parameters.
    pub expert_parameters: u128,
    /// Parameters that receive gradients.
    pub trainable: u128,
    /// Whether attention's shapes are known (an architecture was read).
    pub attention_known: bool,
    /// The MLP's intermediate width f (an expert's, for a mixture).
    pub intermediate: u64,
    /// Whether the MLP is gated (`down(act(gate(x)) * up(x))`): three matmuls, not two.
    pub gated: bool,
    /// Vocabulary size: the width of the logits the loss reads.
    pub vocab: u64,
    /// Attention heads a.
    pub heads: u64,
    /// A head's width d (queries and keys).
    pub head_dim: u64,
}

impl Work {
    /// One walk over `model`'s tensors.
    pub fn of(model: &Model) -> Work {
        let dims = model.dimensions.as_ref();
        let moe = dims.and_then(|d| d.experts.as_ref());
        let tied_head = Layout::of(model).tied_head;
        let mut work = Work::default();
        let mut moe_layers = std::collections::BTreeSet::new();
        for tensor in &model.tensors {
            let n = u128::from(tensor.shape.elements().0);
            work.parameters += n;
            if tensor.trainable {
                work.trainable += n;
            }
            let routed = tensor.role == Role::Experts && !tensor.name.contains("shared_expert");
            if routed {
                work.expert_parameters += n;
                if let Some(layer) = layer_of(&tensor.name) {
                    moe_layers.insert(layer);
                }
            }
            if !is_matmul(model, tensor, tied_head) {
                continue;
            }
            let active = match (routed, moe) {
                (true, Some(moe)) if moe.experts > 0 => {
                    n * u128::from(moe.top_k) / u128::from(moe.experts)
                }
                _ => n,
            };
            let slot = match (layer_of(&tensor.name).is_some(), tensor.trainable) {
                (true, true) => &mut work.layer_trainable,
                (true, false) => &mut work.layer_frozen,
                (false, true) => &mut work.outer_trainable,
                (false, false) => &mut work.outer_frozen,
            };
            *slot += active;
        }
        if let Some(d) = dims {
            let (qk, v) = match d.qkv {
                QkvLayout::Latent(l) => (l.qk_nope_head_dim + l.qk_rope_head_dim, l.v_head_dim),
                _ => (d.head_dim, d.head_dim),
            };
            work.layers = d.layers;
            work.attention_width = d.heads.saturating_mul(qk.saturating_add(v));
            work.kv_width = d.kv_heads.saturating_mul(qk.saturating_add(v));
            work.hidden = d.hidden;
            work.attention_known = true;
            work.intermediate = moe.map_or(d.intermediate, |m| m.intermediate);
            work.gated = d.mlp == crate::architecture::MlpKind::Gated;
            work.vocab = d.vocab;
            work.heads = d.heads;
            work.head_dim = qk;
        }
        work.top_k = moe.map_or(0, |m| m.top_k);
        work.moe_layers = moe_layers.len() as u64;
        work
    }
}

/// Whether a tensor is a matmul weight: a matrix (or a stack of expert
/// matrices) outside the norms and the embeddings, the tied head's
/// embedding, or the flat vector that stands for a bare `--params` model.
fn is_matmul(model: &Model, tensor: &Tensor, tied_head: bool) -> bool {
    if !model.shapes_known {
        return true;
    }
    match tensor.role {
        Role::Norm => false,
        Role::Embedding => tied_head && is_token_embedding(tensor),
        _ => tensor.shape.dims().len() >= 2,
    }
}

/// The FLOPs of one step of the whole job, by part.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Flops {
    /// Tokens per step.
    pub tokens: u64,
    /// The linears, forward and backward.
    pub linear: f64,
    /// Attention's QK^T and PV, forward and backward.
    pub attention: f64,
    /// The linears run again by recomputation.
    pub recompute_linear: f64,
    /// Attention run again by recomputation.
    pub recompute_attention: f64,
}

impl Flops {
    /// The model FLOPs: what the step needs without recomputation.
    pub fn model(&self) -> f64 {
        self.linear + self.attention
    }

    /// What the step executes.
    pub fn executed(&self) -> f64 {
        self.model() + self.recompute_linear + self.recompute_attention
    }
}

/// The FLOPs of one step: `micro_batches` micro-batches of `workload` on
/// every data-parallel replica of `layout`.
pub fn per_step(
    work: &Work,
    layout: &Parallelism,
    workload: &Workload,
    micro_batches: u64,
) -> Flops {
    let sequences = workload
        .micro_batch
        .saturating_mul(micro_batches)
        .saturating_mul(layout.data());
    let seq_len = workload.seq_len as f64;
    let tokens = sequences.saturating_mul(workload.seq_len);
    let t = tokens as f64;
    let trained = (work.layer_trainable + work.outer_trainable) as f64;
    let frozen = (work.layer_frozen + work.outer_frozen) as f64;
    let per_token = (FORWARD + INPUT_GRADIENT + WEIGHT_GRADIENT) as f64 * trained
        + (FORWARD + INPUT_GRADIENT) as f64 * frozen;
    let attention_forward = work.layers as f64
        * sequences as f64
        * 2.0
        * seq_len
        * seq_len
        * work.attention_width as f64;
    let layer_forward = FORWARD as f64 * (work.layer_trainable + work.layer_frozen) as f64 * t;
    let recomputed = match workload.recompute_every {
        0 | 1 => 1.0,
        every => (work.layers / every) as f64 / work.layers.max(1) as f64,
    };
    let (recompute_linear, recompute_attention) = match workload.recompute {
        Recompute::None => (0.0, 0.0),
        Recompute::Selective => (0.0, attention_forward),
        Recompute::Op => (OP_RECOMPUTED_SHARE * layer_forward, 0.0),
        Recompute::Full => (layer_forward, attention_forward),
    };
    Flops {
        tokens,
        linear: per_token * t,
        attention: attention_forward * (1.0 + BACKWARD_OVER_FORWARD),
        recompute_linear: recomputed * recompute_linear,
        recompute_attention: recomputed * recompute_attention,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Shape;

    const H: u64 = 64;
    const F: u64 = 256;
    const V: u64 = 1000;

    /// One layer's MLP, a norm and an untied head: hand-countable.
    fn model(frozen_mlp: bool) -> Model {
        let matrix = |rows, cols| Shape::new(vec![rows, cols]).unwrap();
        let mut up = Tensor::new("model.layers.0.mlp.up_proj.weight", matrix(F, H), Role::Mlp);
        up.trainable = !frozen_mlp;
        Model::from_tensors(
            "toy",
            "test",
            vec![
                Tensor::new("model.embed_tokens.weight", matrix(V, H), Role::Embedding),
                up,
                Tensor::new(
                    "model.layers.0.input_layernorm.weight",
                    Shape::vector(H),
                    Role::Norm,
                ),
                Tensor::new("lm_head.weight", matrix(V, H), Role::OutputHead),
            ],
        )
    }

    #[test]
    fn six_per_trained_weight_four_per_frozen_one() {
        let workload = Workload::new(2, 8);
        let tokens = 16.0;
        let trained = per_step(&Work::of(&model(false)), &Parallelism::SINGLE, &workload, 1);
        assert_eq!(trained.tokens, 16);
        assert_eq!(trained.linear, 6.0 * ((F * H + V * H) as f64) * tokens);
        let frozen = per_step(&Work::of(&model(true)), &Parallelism::SINGLE, &workload, 1);
        assert_eq!(frozen.linear, (4 * F * H + 6 * V * H) as f64 * tokens);
        // No architecture: no attention, nothing recomputed.
        assert_eq!(trained.attention, 0.0);
    }

    #[test]
    fn full_recompute_runs_the_layers_forward_once_more() {
        let mut workload = Workload::new(1, 4);
        workload.recompute = Recompute::Full;
        let flops = per_step(&Work::of(&model(false)), &Parallelism::SINGLE, &workload, 3);
        // The layer's linear only (not the head), forward: 2 per weight per token.
        assert_eq!(flops.recompute_linear, 2.0 * (F * H) as f64 * 12.0);
        workload.recompute = Recompute::Op;
        let op = per_step(&Work::of(&model(false)), &Parallelism::SINGLE, &workload, 3);
        assert_eq!(op.recompute_linear, flops.recompute_linear / 2.0);
    }
}
