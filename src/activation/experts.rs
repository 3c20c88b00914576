//! What a mixture of experts saves: the router's choices and the routed
//! tokens through transformers 5's fused experts, plus shared experts.
//!
//! Per layer and rank, with E experts, k per token, Tk = T·k routed
//! copies, expert width f_e (split by tensor parallelism) and w bytes per
//! routing weight (4 when they stay fp32, else P).

use super::kernels::ExpertsKernel;
use super::norms::FP32;
use super::parallel::Rank;
use super::tally::Tally;
use crate::architecture::{MixtureOfExperts, Router, SharedExpert};
use crate::error::Result;
use crate::units::Bytes;

/// Bytes of an int64 index.
const INT64: u64 = 8;

/// Bytes of an int32 offset.
const INT32: u64 = 4;

/// The router's saved tensors, on the rank's sequence tokens n.
///
/// * Softmax routers (`MixtralTopKRouter`, Qwen's): the fp32 softmax
///   [n, E] (`SoftmaxBackward0.result`) 4·n·E and the top-k indices
///   (`TopkBackward0.indices`) 8·n·k; renormalizing (Mixtral,
///   `norm_topk_prob`) divides by the fp32 sum [n, 1]: 4·n + 4·n·k.
/// * DeepSeek-V3 (`DeepseekV3TopkRouter`): `F.linear` on fp32 copies of
///   the input and the weight (16-bit models: 4·n·h + 4·E·h), the fp32
///   sigmoid scores 4·n·E, the gather index 8·n·k, and the
///   renormalization 4·n + 4·n·k.
pub fn router(rank: &Rank, moe: &MixtureOfExperts) -> Result<Bytes> {
    let n = rank.sequence_tokens;
    let (e, k) = (moe.experts, moe.top_k);
    let mut saved = Tally::new();
    let renormalize = match moe.router {
        Router::Softmax { renormalize, .. } => renormalize,
        Router::Sigmoid { renormalize } => {
            if rank.element != FP32 {
                saved.tensor(&[FP32, n, rank.hidden])?;
                saved.tensor(&[FP32, e, rank.hidden])?;
            }
            renormalize
        }
    };
    saved.tensor(&[FP32, n, e])?;
    saved.tensor(&[INT64, n, k])?;
    if renormalize {
        saved.tensor(&[FP32, n])?;
        saved.tensor(&[FP32, n, k])?;
    }
    Ok(saved.bytes())
}

/// The routed experts' saved tensors (transformers 5 `integrations/moe.py`).
///
/// * `grouped_mm`: three int64 permutations 24·Tk, the int32 group
///   offsets 4·E, the gathered input and the expert output P·Tk·2h, the
///   gate-up output, the activation and the product P·Tk·4f_e, the
///   routing weights w·Tk.
/// * eager (a loop over experts): two int64 indices 16·Tk, the gathered
///   input, the output and its weighted copy P·Tk·3h, P·Tk·4f_e, w·Tk.
///
/// The routed copies of all T tokens reach every tensor-parallel rank.
pub fn routed(rank: &Rank, moe: &MixtureOfExperts, kernel: ExpertsKernel) -> Result<Bytes> {
    let p = rank.element;
    let (h, f) = (rank.hidden, rank.expert_intermediate);
    let routed = rank
        .tokens
        .checked_mul(moe.top_k)
        .ok_or_else(|| crate::error::Error::overflow("the routed tokens"))?;
    let weights = match moe.router {
        Router::Softmax {
            fp32_weights: false,
            ..
        } => p,
        Router::Softmax { .. } | Router::Sigmoid { .. } => FP32,
    };
    let mut saved = Tally::new();
    match kernel {
        ExpertsKernel::GroupedMm => {
            saved.tensor(&[3, INT64, routed])?;
            saved.tensor(&[INT32, moe.experts])?;
            saved.tensor(&[2, p, routed, h])?;
        }
        ExpertsKernel::Eager => {
            saved.tensor(&[2, INT64, routed])?;
            saved.tensor(&[3, p, routed, h])?;
        }
    }
    saved.tensor(&[4, p, routed, f])?;
    saved.tensor(&[weights, routed])?;
    Ok(saved.bytes())
}

/// The shared experts: a gated MLP over every token, P·T·f_s·(3 + 1 when
/// `down_proj` keeps its input); Qwen2-MoE's gate adds
/// `sigmoid(shared_expert_gate(x))` [n, 1] and the shared output
/// [n, h] its product saves: P·n + P·n·h.
pub fn shared(rank: &Rank, shared: SharedExpert, down_keeps_input: bool) -> Result<Bytes> {
    let p = rank.element;
    let mut saved = Tally::new();
    let intermediates = 3 + u64::from(down_keeps_input);
    match shared {
        SharedExpert::None => {}
        SharedExpert::Plain { .. } => {
            saved.tensor(&[intermediates, p, rank.tokens, rank.shared_intermediate])?;
        }
        SharedExpert::Gated { .. } => {
            saved.tensor(&[intermediates, p, rank.tokens, rank.shared_intermediate])?;
            saved.tensor(&[p, rank.sequence_tokens])?;
            saved.tensor(&[p, rank.sequence_tokens, rank.hidden])?;
        }
    }
    Ok(saved.bytes())
}
