//! Work that is priced by the bytes it moves, not its FLOPs: norms,
//! residual adds, rotary embeddings, the MLP's activation, the loss over
//! the logits, and the optimizer step over every state. Each is bytes over
//! the memory bandwidth; PyTorch's eager kernels read and write their
//! operands once per op.
//!
//! Per token, per layer, forward (elements; × the activation dtype's bytes):
//! * two norms, each reading h, writing h and an fp32 statistics pass
//!   (about 4h each), and two residual adds (read 2h, write h): 14·h, split
//!   by the tensor-parallel ranks only under sequence parallelism;
//! * rotary embeddings on queries and keys (read and write): 2·(q + k)/tp;
//! * the activation: SiLU then the gate product (read f, write f; read 2f,
//!   write f) 5·f for a gated MLP, GELU's read and write and bias 3·f
//!   otherwise, over tp.
//!
//! Backward moves twice the forward's bytes (each op reads its input and
//! the output's gradient and writes the input's gradient); recomputation
//! (`full`, `op`) runs the forward's again. The loss reads and writes the
//! logits about 16 bytes per logit (bf16 logits, their fp32 copy, the
//! softmax and its gradient), V/tp per token on the last stage.
//!
//! The optimizer step (Adam's, the default, taken for all) reads the fp32
//! master weight, gradient and two moments and writes the weight, the
//! moments and the bf16 copy, and zeroes the gradient: 34 bytes per
//! parameter the rank steps.

use crate::activation::{Recompute, Workload};

use super::flops::Work;

/// Elements of a token's hidden state the norms and residual adds move.
const HIDDEN_PASSES: f64 = 14.0;
/// Elements per query/key element rotary embeddings move.
const ROTARY_PASSES: f64 = 2.0;
/// Elements per MLP-intermediate element the activation moves.
const GATED_PASSES: f64 = 5.0;
const PLAIN_PASSES: f64 = 3.0;
/// Backward bytes per forward byte.
const BACKWARD_OVER_FORWARD: f64 = 2.0;
/// Bytes per logit of the loss, forward and backward.
const LOSS_BYTES_PER_LOGIT: f64 = 16.0;
/// Adam's step: reads 4 fp32 values (weight, gradient, two moments),
/// writes 3 and a bf16 copy, zeroes the fp32 gradient.
pub const OPTIMIZER_BYTES_PER_PARAMETER: f64 = 4.0 * 4.0 + 3.0 * 4.0 + 2.0 + 4.0;

/// Bytes one rank's layers and loss move per micro-batch of `tokens` tokens
/// on the rank, with `layers` layers on it and `stages` pipeline stages.
pub fn bytes_per_micro_batch(
    work: &Work,
    workload: &Workload,
    tokens: f64,
    layers: f64,
    tp: u64,
    stages: u64,
) -> f64 {
    if work.hidden == 0 {
        return 0.0;
    }
    let tp = tp.max(1) as f64;
    let act = workload.dtype.bytes() as f64;
    let hidden_split = if workload.sequence_parallel { tp } else { 1.0 };
    let queries_keys = (work.heads * work.head_dim + work.kv_width / 2) as f64;
    let activation = if work.gated {
        GATED_PASSES
    } else {
        PLAIN_PASSES
    };
    let forward = (HIDDEN_PASSES * work.hidden as f64 / hidden_split
        + ROTARY_PASSES * queries_keys / tp
        + activation * work.intermediate as f64 / tp)
        * act;
    let recomputed = match workload.recompute {
        Recompute::Full | Recompute::Op => {
            let every = workload.recompute_every.max(1);
            (work.layers / every) as f64 / work.layers.max(1) as f64
        }
        Recompute::None | Recompute::Selective => 0.0,
    };
    let per_layer = forward * (1.0 + BACKWARD_OVER_FORWARD + recomputed);
    let loss = LOSS_BYTES_PER_LOGIT * work.vocab as f64 / tp / stages.max(1) as f64;
    tokens * (layers * per_layer + loss)
}

/// Bytes per query element ring attention's merge of partial results moves
/// per hop: read the running fp32 output and log-sum-exp, write them back
/// (Liu et al. 2023, Ring Attention; torch's `_scaled_dot_product_ring_*`
/// and Transformer Engine's CP merge each block's result so).
const RING_MERGE_BYTES: f64 = 12.0;
/// Backward hops per forward hop (the keys and values and their gradients).
const RING_BACKWARD_HOPS: f64 = 2.0;

/// Bytes ring attention's per-hop merges move on one rank per micro-batch
/// of `tokens` tokens on the rank (`cp` ranks in the ring).
pub fn ring_merge_bytes(work: &Work, tokens: f64, layers: f64, tp: u64, cp: u64) -> f64 {
    if cp <= 1 {
        return 0.0;
    }
    let queries = (work.heads * work.head_dim) as f64 / tp.max(1) as f64;
    let hops = (cp - 1) as f64 * (1.0 + RING_BACKWARD_HOPS);
    tokens * layers * queries * RING_MERGE_BYTES * hops
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adam_moves_thirty_four_bytes_per_parameter() {
        assert_eq!(OPTIMIZER_BYTES_PER_PARAMETER, 34.0);
    }

    #[test]
    fn recomputation_and_tokens_add_bytes() {
        let work = Work {
            hidden: 4096,
            intermediate: 14336,
            gated: true,
            heads: 32,
            head_dim: 128,
            kv_width: 2048,
            layers: 32,
            vocab: 128256,
            ..Work::default()
        };
        let mut workload = Workload::new(1, 4096);
        let plain = bytes_per_micro_batch(&work, &workload, 4096.0, 32.0, 1, 1);
        workload.recompute = Recompute::Full;
        let full = bytes_per_micro_batch(&work, &workload, 4096.0, 32.0, 1, 1);
        assert!(full > plain);
        assert!(bytes_per_micro_batch(&work, &workload, 8192.0, 32.0, 1, 1) > full);
    }
}
