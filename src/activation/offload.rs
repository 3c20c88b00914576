//! Activation offloading (`--offload-activations`): saved tensors go to
//! host memory in forward and come back in backward.
//!
//! The rule is torchtune's `OffloadActivations`
//! (`torchtune/training/_activation_offloading.py`, 0.6.1), a
//! `saved_tensors_hooks` whose `pack_tensor` copies a saved tensor to pinned
//! host memory when `x.element_size() * x.nelement() >= min_offload_size`
//! (1024 bytes by default) and it is neither an `nn.Parameter` nor an
//! `nn.Buffer` (lines 145-153); everything else stays as it is. Views are
//! not skipped: `weight.t()`, which every linear's `MmBackward0` saves, is
//! copied too (host memory, no device memory freed: the weight stays).
//! Each pack is its own host copy, so a tensor several nodes save (the
//! input of q/k/v, RMSNorm's fp32 input and rsqrt, the rotary tables) is
//! copied once per node, and a view (the output projection's input, a view
//! of the attention kernel's output) is a copy of its own. torchtune's recipes enter the context around the
//! model's forward and opt the output head out with a `NoOpManager`
//! (`get_act_offloading_ctx_manager`, lines 396-418); the loss runs
//! outside it. So the decoder's layers, the embedding's saved indices and
//! the final norm are offloaded; the output head's input, the logits and
//! the loss stay on the device.
//!
//! What the device still holds:
//! * tensors under 1024 bytes: of a layer's saved tensors only the per-row
//!   norm statistics lack a hidden-width dimension (RMSNorm's rsqrt, 4 bytes
//!   a row; LayerNorm's mean and rstd), kept when a row count is under 256;
//! * in backward, the tensors of the autograd node being run, brought back
//!   (`unpack_tensor`, `.to("cuda")`) and freed when the node is done, with
//!   the gradients that node produces: for the MLP's widest node, the
//!   product `act(gate) * up` of a gated MLP (GPT-2's `0.5x * (1 + tanh)`),
//!   its two `T x f` inputs and their two gradients, 4·P·T·f (GELU's one
//!   input and its gradient, 2·P·T·f); for attention, the kernel's saved
//!   tensors and the gradients of q, k and v. Under full recomputation the
//!   node is the checkpoint's `_NoopSaveInputs`: the layer input comes back
//!   (P·n·h, DeepSpeed's `cpu_checkpointing` does the same for the
//!   checkpointed inputs) and the layer is rebuilt on the device as without
//!   offloading;
//! * with CUDA streams (`use_streams=True`, torchtune's default, the
//!   [`Platform::Cuda`] model): forward keeps each offloaded tensor alive in
//!   `fwd_stash` until `max_fwd_stash_size` (5) later packs have been made
//!   (lines 154-163), so the last packs of forward, the final norm's, stay on
//!   the device until backward starts (lines 328-332); backward keeps a
//!   node's brought-back tensors in `bwd_tensor_stash` until the next node's
//!   hook runs (lines 263-266, 334-338): two nodes' tensors at once. On CPU
//!   (`use_streams=False`, what the fixtures measure) neither stash exists.
//!
//! GPT-2 (tied embeddings) is not among the fixtures: its offloaded peak,
//! inside layer 0's backward, holds the output head's weight gradient,
//! which autograd keeps in the tied weight's input buffer from the head's
//! backward on, while the step timeline charges that gradient at the
//! embedding, at the end of backward (a timeline rule outside offloading).
//! Its host bytes matched the measurement to the byte.
//!
//! Not modelled: pinned memory's caching host allocator rounds each host
//! block up to a power of two (host bytes are the tensors' sizes); the
//! final norm's backward brings its few tensors back outside any layer.

use serde::Serialize;

use super::attention;
use super::parallel::Rank;
use super::tally::{Tally, plus, times};
use super::{Platform, Recompute};
use crate::architecture::{Dimensions, MlpKind, NormKind};
use crate::error::Result;
use crate::units::Bytes;

/// torchtune's `OffloadActivations(min_offload_size=1024)`: smaller saved
/// tensors stay on the device.
pub const MIN_OFFLOAD_SIZE: u64 = 1024;

/// Bytes of an fp32 element.
const FP32: u64 = 4;

/// What offloading did, for the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Offloaded {
    /// The implementation followed.
    pub implementation: &'static str,
    /// Whether a second CUDA stream overlaps the copies (torchtune's default
    /// on CUDA; none on CPU).
    pub streams: bool,
    /// Saved tensors smaller than this stay on the device.
    pub min_offload_size: Bytes,
    /// Device bytes that the offloaded tensors would have kept from forward
    /// to backward, per rank.
    pub device_bytes_saved: Bytes,
    /// Host memory the copies take at the end of forward, per rank: one copy
    /// per saved reference, weight views included.
    pub host_bytes: Bytes,
}

/// The offloading of one layer, per micro-batch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LayerOffload {
    /// What stays on the device from forward to backward.
    pub resident: Bytes,
    /// The host copies.
    pub host: Bytes,
    /// Brought back in backward and alive while its node runs, on top of
    /// the layer's gradient flow.
    pub unpacked: Bytes,
    /// The layer's last node without recomputation (see [`closing_node`]).
    pub closing: Bytes,
}

/// The per-row statistics a layer's norms save, which stay on the device
/// when each is under [`MIN_OFFLOAD_SIZE`]: RMSNorm's fp32 rsqrt [rows]
/// (saved by `rsqrt` and by the product), LayerNorm's mean and rstd.
fn small_statistics(rank: &Rank, dims: &Dimensions, norms: u64, stats_bytes: u64) -> Result<Bytes> {
    let rows = rank.sequence_tokens;
    let (count, each) = match dims.norm {
        NormKind::LayerNorm => (2, stats_bytes.saturating_mul(rows)),
        NormKind::RmsNorm
        | NormKind::GemmaRmsNorm
        | NormKind::Olmo2RmsNorm
        | NormKind::FusedRmsNorm => (1, FP32.saturating_mul(rows)),
    };
    if each >= MIN_OFFLOAD_SIZE {
        return Ok(Bytes::ZERO);
    }
    let mut tally = Tally::new();
    tally.tensor(&[norms, count, each])?;
    Ok(tally.bytes())
}

/// The inputs of one layer's offloading rule.
pub struct LayerSite<'a> {
    /// The rank's sizes.
    pub rank: &'a Rank,
    /// The architecture.
    pub dims: &'a Dimensions,
    /// The platform: streams on CUDA.
    pub platform: Platform,
    /// The recomputation mode.
    pub recompute: Recompute,
    /// The layer's kept bytes without offloading.
    pub kept: Bytes,
    /// The layer's input P·n·h.
    pub input: Bytes,
    /// What the attention kernel saves.
    pub core: Bytes,
    /// The output projection's input when it is a view of the kernel's
    /// output (one storage on the device, a second host copy), else 0.
    pub output_view: Bytes,
    /// Norms over the hidden state in the layer.
    pub hidden_norms: u64,
    /// LayerNorm statistics' element size.
    pub stats_bytes: u64,
    /// Linears reading the attention input that save it, and those reading the MLP input.
    pub input_packs: (u64, u64),
    /// The rotary tables the layer's attention reads (0 under full recomputation).
    pub rotary: Bytes,
}

/// What `site`'s layer keeps on the device, copies to the host and brings
/// back, per micro-batch.
pub fn layer(site: &LayerSite) -> Result<LayerOffload> {
    let LayerSite { rank, dims, .. } = *site;
    let streams = site.platform == Platform::Cuda;
    let stash = |bytes: Bytes| if streams { times(bytes, 2) } else { Ok(bytes) };
    if site.recompute == Recompute::Full {
        // Only the checkpoint's saved input goes through the hooks.
        let resident = if site.input.0 < MIN_OFFLOAD_SIZE {
            site.input
        } else {
            Bytes::ZERO
        };
        let host = Bytes(site.input.0 - resident.0);
        return Ok(LayerOffload {
            resident,
            host,
            unpacked: stash(host)?,
            closing: Bytes::ZERO,
        });
    }
    let resident = small_statistics(rank, dims, site.hidden_norms, site.stats_bytes)?;
    let offloaded = Bytes(site.kept.0.saturating_sub(resident.0));
    // Host copies beyond one per storage.
    let (p, n, h) = (rank.element, rank.sequence_tokens, rank.hidden);
    let mut extra = Tally::new();
    let (attention_packs, mlp_packs) = site.input_packs;
    extra.tensor(&[attention_packs.saturating_sub(1), p, n, h])?;
    extra.tensor(&[mlp_packs.saturating_sub(1), p, n, h])?;
    if super::norms::upcasts(dims.norm) {
        // `x.pow(2)` and `x * rsqrt(...)` each save the fp32 input; `rsqrt`
        // and the product each save the rsqrt.
        extra.tensor(&[site.hidden_norms, FP32, n, h])?;
        extra.add(small_statistics_all(n, site.hidden_norms)?)?;
    }
    extra.add(site.output_view)?;
    extra.add(times(site.rotary, 2)?)?;
    extra.add(weight_views(rank, dims)?)?;
    let host = plus(offloaded, extra.bytes())?;
    Ok(LayerOffload {
        resident,
        host,
        unpacked: stash(widest_node(rank, dims, site.core)?)?,
        closing: closing_node(rank, dims)?,
    })
}

/// RMSNorm's rsqrt saved a second time by each of `norms` norms, 4·n each.
fn small_statistics_all(rows: u64, norms: u64) -> Result<Bytes> {
    let mut tally = Tally::new();
    tally.tensor(&[norms, FP32, rows])?;
    Ok(tally.bytes())
}

/// The `weight.t()` views the layer's linears save (`MmBackward0.mat2`, the
/// input requiring grad): P per weight element, attention h·(a·d + 2·kv·d)
/// plus a·dv·h, and MLP h·f per projection. None for GPT-2's `Conv1D`,
/// which saves the parameter itself (`AddmmBackward0.mat2`), and
/// parameters stay.
fn weight_views(rank: &Rank, dims: &Dimensions) -> Result<Bytes> {
    if dims.linears.conv1d {
        return Ok(Bytes::ZERO);
    }
    let d = dims.head_dim;
    let projections = dims.linears.mlp_input.len() as u64 + 1;
    let mut tally = Tally::new();
    tally.tensor(&[
        rank.element,
        rank.hidden,
        rank.heads
            .saturating_mul(d)
            .saturating_add(rank.kv_heads.saturating_mul(d).saturating_mul(2)),
    ])?;
    tally.tensor(&[
        rank.element,
        attention::output_width(rank, dims),
        rank.hidden,
    ])?;
    tally.tensor(&[projections, rank.element, rank.hidden, rank.intermediate])?;
    Ok(tally.bytes())
}

/// The largest node's brought-back tensors plus the gradients alive with
/// it, beyond the one T x f gradient the layer's flow already counts: the
/// MLP's activation (see [`mlp_backward_tensors`]) or the attention kernel
/// (its saved tensors and the gradients of q, k and v).
fn widest_node(rank: &Rank, dims: &Dimensions, core: Bytes) -> Result<Bytes> {
    let mut mlp = Tally::new();
    mlp.tensor(&[
        mlp_backward_tensors(dims.mlp) - 1,
        rank.element,
        rank.tokens,
        rank.intermediate,
    ])?;
    let mut attention = Tally::new();
    attention.add(core)?;
    attention.tensor(&[
        rank.element,
        rank.tokens,
        rank.heads.saturating_add(rank.kv_heads.saturating_mul(2)),
        dims.head_dim,
    ])?;
    Ok(mlp.bytes().max(attention.bytes()))
}

/// The T x f tensors alive at once in the backward of the MLP's activation
/// when its saved tensors come back node by node, the incoming gradient
/// included:
/// * gated (`act(gate) * up`): the product's output gradient, its two
///   operands brought back and their two gradients, 5 (the fixture
///   `llama-v512__fp32__adamw__sdpa__none__b1s512__offload` at its peak,
///   `MulBackward0`);
/// * NewGELU (GPT-2's tanh formula in pointwise ops): 7 at its `x.pow(3)`
///   node, the gradients of its three uses of x still being summed
///   (`PowBackward0`: x brought back, `x^2`, two products and three partial
///   gradients of x, as `tools/measure_timeline.py` measured a GPT-2 step
///   offloaded at B = 1, S = 512; that fixture is not kept, see below);
/// * GELU (one fused op): the incoming gradient, its input brought back and
///   its gradient, 3 (not measured);
/// * QuickGELU (`x * sigmoid(1.702 x)`): as the gated product, the incoming
///   gradient, x and the sigmoid brought back and their two gradients, 5
///   (not measured).
fn mlp_backward_tensors(kind: MlpKind) -> u64 {
    match kind {
        MlpKind::Gated | MlpKind::QuickGelu => 5,
        MlpKind::NewGelu => 7,
        MlpKind::Gelu => 3,
    }
}

/// The layer's last backward node, its first norm's, when every weight
/// gradient of the layer exists: the gradient flowing into the layer's
/// input in the model's dtype P·n·h, plus
/// * RMSNorm (computed in fp32): six fp32 n x h tensors, as the bf16 CPU
///   fixture `llama-v512__bf16__adamw__sdpa__none__b1s512__offload` shows at
///   its peak (`PowBackward0`): the fp32 input brought back, `pow`'s
///   `x^1`, the two products of its backward, `MeanBackward1`'s `div` and
///   the product's gradient `g * rsqrt`;
/// * LayerNorm: its input brought back and its gradient, 2·P·n·h.
fn closing_node(rank: &Rank, dims: &Dimensions) -> Result<Bytes> {
    let (p, n, h) = (rank.element, rank.sequence_tokens, rank.hidden);
    let mut tally = Tally::new();
    tally.tensor(&[p, n, h])?;
    match dims.norm {
        // The fused RMSNorm's backward, one kernel as LayerNorm's, is priced
        // as it: the input's gradient and the input.
        NormKind::LayerNorm | NormKind::FusedRmsNorm => tally.tensor(&[2, p, n, h])?,
        NormKind::RmsNorm | NormKind::GemmaRmsNorm | NormKind::Olmo2RmsNorm => {
            tally.tensor(&[RMS_NORM_BACKWARD_FP32_TENSORS, FP32, n, h])?
        }
    }
    Ok(tally.bytes())
}

/// The fp32 `n x h` tensors alive in an RMSNorm's backward (see [`closing_node`]).
const RMS_NORM_BACKWARD_FP32_TENSORS: u64 = 6;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::activation::Workload;
    use crate::architecture::dimensions;

    fn llama() -> Dimensions {
        dimensions(&json!({
            "model_type": "llama", "hidden_size": 256, "intermediate_size": 704,
            "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 4,
            "vocab_size": 512,
        }))
        .unwrap()
    }

    #[test]
    fn statistics_under_1024_bytes_stay_on_the_device() {
        let dims = llama();
        let rank = |s| Rank::new(&dims, &Workload::new(1, s)).unwrap();
        // rsqrt: 4 bytes a row; 255 rows stay, 256 rows (1024 bytes) go.
        assert_eq!(
            small_statistics(&rank(255), &dims, 2, 4).unwrap(),
            Bytes(2 * 4 * 255)
        );
        assert_eq!(small_statistics(&rank(256), &dims, 2, 4).unwrap(), Bytes(0));
    }

    #[test]
    fn weight_views_of_a_llama_layer_by_hand() {
        // q 256 x 256, k and v 256 x 128, o 256 x 256, gate/up/down 256 x 704, fp32.
        let dims = llama();
        let mut workload = Workload::new(1, 512);
        workload.dtype = crate::dtype::DType::Fp32;
        let rank = Rank::new(&dims, &workload).unwrap();
        let elements = 256 * 256 + 2 * 256 * 128 + 256 * 256 + 3 * 256 * 704;
        assert_eq!(weight_views(&rank, &dims).unwrap(), Bytes(4 * elements));
        // GPT-2's Conv1D saves the parameter itself: no host copy.
        let gpt2 = dimensions(&json!({
            "model_type": "gpt2", "n_embd": 256, "n_head": 8, "n_layer": 4, "vocab_size": 4096,
        }))
        .unwrap();
        let rank = Rank::new(&gpt2, &workload).unwrap();
        assert_eq!(weight_views(&rank, &gpt2).unwrap(), Bytes::ZERO);
    }
}
