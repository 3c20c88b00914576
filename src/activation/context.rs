//! Context parallelism (`--cp N`): ring attention splits the sequence
//! across N ranks.
//!
//! torch's `context_parallel` (`torch/distributed/tensor/experimental/
//! _context_parallel/`, torch 2.15), which torchtitan applies to its inner
//! attention with `cp_buffers = [inputs, labels, freqs_cis]` sharded on the
//! sequence, gives each rank S/N positions of every sequence: with load
//! balancing on (`_cp_options.enable_load_balance = True`), the
//! `_HeadTailLoadBalancer` cuts the sequence into 2N chunks and gives rank r
//! chunks r and 2N-1-r (`_load_balancer.py`, `_generate_indices`: `if
//! seq_length % (world_size * 2) != 0: raise AssertionError`). Megatron-core
//! cuts it the same way (`get_batch_on_this_cp_rank`: `2 * cp_size` chunks)
//! for Transformer Engine's `AttnFuncWithCPAndKVP2P`. So every activation of
//! a rank, the logits and the loss included, has B·S/N tokens (a [`Rank`]
//! with `seq` = S/N), and S must be a multiple of 2N.
//!
//! On top, the ring's exchange buffers, per layer while its attention runs,
//! with Q = B·a·(S/N)·d and KV = 2·B·kv·(S/N)·d elements of the local query
//! and key/value shards:
//! * forward (`_templated_ring_attention`, `_attention.py` lines 427-470):
//!   `next_kv = torch.cat([key.flatten(), value.flatten()])` (P·KV) is
//!   exchanged with the default `_RotateMethod.ALL_GATHER`
//!   (`_ContextParallelOptions.rotate_method`, also torchtitan's default
//!   `context_parallel_rotate_method = "allgather"`), whose
//!   `_AllGatherRotater` holds every rank's key/value shard, N·P·KV; the
//!   `_SDPAMerger` (`convert_to_f32 = True`) keeps the merged output in fp32
//!   and upcasts each block's, 2·4·Q. Transformer Engine's P2P ring keeps its
//!   `p2p_comm_buffers[i + 1] = torch.empty_like(p2p_comm_buffers[i])` for
//!   every step as well (N·P·KV);
//! * backward (`_templated_ring_attention_backward`, lines 506-650): the
//!   fp32 accumulators `grad_query`, `grad_key`, `grad_value`
//!   (`torch.zeros_like(..., dtype=accum_dtype)`, 4·(Q + KV)), the key/value
//!   exchange again ((N + 1)·P·KV), the fp32 dK/dV ring of
//!   `dkv_rotater` (`_RotateMethod.ALL_TO_ALL`: the `torch.cat` sent and the
//!   buffer received, 2·4·KV), and one step's `grad_query_`, `grad_key_`,
//!   `grad_value_` from the kernel, P·(Q + KV).
//!
//! Under `--framework megatron` the same figures stand for Transformer
//! Engine's `AttnFuncWithCPAndKVP2P`: its key/value buffers are those above;
//! its per-step outputs, corrections and backward buffers are not read
//! line by line and are priced with torch's rule (approximate).

use super::parallel::Rank;
use super::tally::Tally;
use crate::architecture::Dimensions;
use crate::error::Result;
use crate::units::Bytes;

/// Bytes of an fp32 element.
const FP32: u64 = 4;

/// The local query shard's and key/value shards' elements, Q and KV.
fn shards(rank: &Rank, dims: &Dimensions) -> Result<(u64, u64)> {
    let mut q = Tally::new();
    q.tensor(&[rank.batch, rank.heads, rank.seq, dims.head_dim])?;
    let mut kv = Tally::new();
    kv.tensor(&[2, rank.batch, rank.kv_heads, rank.seq, dims.head_dim])?;
    Ok((q.bytes().0, kv.bytes().0))
}

/// The ring's buffers during one layer's attention forward, on top of
/// what the layer saves: (N + 1)·P·KV + 2·4·Q.
pub fn forward(rank: &Rank, dims: &Dimensions, ranks: u64) -> Result<Bytes> {
    if ranks <= 1 {
        return Ok(Bytes::ZERO);
    }
    let (q, kv) = shards(rank, dims)?;
    let mut tally = Tally::new();
    tally.tensor(&[ranks.saturating_add(1), rank.element, kv])?;
    tally.tensor(&[2, FP32, q])?;
    Ok(tally.bytes())
}

/// The ring's buffers during one layer's attention backward, on top of the
/// gradients the layer's backward holds anyway:
/// 4·(Q + KV) + (N + 1)·P·KV + 2·4·KV + P·(Q + KV).
pub fn backward(rank: &Rank, dims: &Dimensions, ranks: u64) -> Result<Bytes> {
    if ranks <= 1 {
        return Ok(Bytes::ZERO);
    }
    let (q, kv) = shards(rank, dims)?;
    let both = q.saturating_add(kv);
    let mut tally = Tally::new();
    tally.tensor(&[FP32, both])?;
    tally.tensor(&[ranks.saturating_add(1), rank.element, kv])?;
    tally.tensor(&[2, FP32, kv])?;
    tally.tensor(&[rank.element, both])?;
    Ok(tally.bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::activation::Workload;

    #[test]
    fn ring_buffers_of_a_llama_8b_layer_by_hand() {
        // Llama-3.1-8B, B = 1, S = 131072 over N = 8 ranks: 16384 local
        // positions, a = 32, kv = 8, d = 128, bf16.
        let dims = Dimensions::generic(32, 4096, 32, 8, 14336, 128_256).unwrap();
        let mut workload = Workload::new(1, 131_072);
        workload.context_parallel = 8;
        let rank = Rank::new(&dims, &workload).unwrap();
        assert_eq!(rank.seq, 16_384);
        let q = 32 * 16_384 * 128u64;
        let kv = 2 * 8 * 16_384 * 128u64;
        assert_eq!(forward(&rank, &dims, 8).unwrap(), Bytes(9 * 2 * kv + 8 * q));
        assert_eq!(
            backward(&rank, &dims, 8).unwrap(),
            Bytes(4 * (q + kv) + 9 * 2 * kv + 8 * kv + 2 * (q + kv))
        );
        assert_eq!(forward(&rank, &dims, 1).unwrap(), Bytes::ZERO);
    }
}
