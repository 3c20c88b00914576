//! The bytes each collective moves per step, per GPU, and their time.
//!
//! Volumes are the bandwidth-optimal ring algorithms' (NCCL's "bus
//! bandwidth" convention, nccl-tests `doc/PERFORMANCE.md`): an all-reduce
//! of N bytes over d ranks moves 2·(d − 1)/d·N per rank, an all-gather or a
//! reduce-scatter (d − 1)/d·N, an all-to-all (d − 1)/d of what a rank sends.
//! A collective runs at the intra-node bandwidth when its ranks share a node
//! and at the inter-node bandwidth otherwise. Ranks are laid out as
//! Megatron orders them (`megatron/core/parallel_state.py`, order
//! `tp-cp-ep-dp-pp`): tensor-parallel ranks adjacent, then context, data,
//! and pipeline outermost; a group of size g with stride s stays in a node
//! when s·g ≤ GPUs per node.
//!
//! What is counted, per step of m micro-batches (L layers per stage):
//! * ZeRO-3 / FSDP full shard: an all-gather of the weights for forward and
//!   another for backward per micro-batch, one reduce-scatter of the
//!   gradients per step (accumulation without a sync, as FSDP's
//!   `no_sync`/`set_requires_gradient_sync(False)` and DeepSpeed do).
//! * ZeRO-1/2: a reduce-scatter of the gradients and an all-gather of the
//!   updated weights per step. No sharding (DDP): an all-reduce.
//! * Tensor parallelism: two all-reduces of a layer's activations forward
//!   and two backward per layer and micro-batch (Shoeybi et al. 2019,
//!   section 3: f and g), two more per recomputed forward; sequence
//!   parallelism moves the same bytes as all-gathers and reduce-scatters.
//! * Pipeline parallelism: each micro-batch's activation forward and its
//!   gradient backward across a stage boundary, split over the tensor
//!   ranks (Narayanan et al. 2021, section 4.1's scatter/gather).
//! * Expert parallelism: dispatch and combine all-to-alls, forward and
//!   backward, of every token's k routed copies, per MoE layer.
//! * Context parallelism: ring attention passes each rank's keys and values
//!   around the ring forward ((N − 1) hops) and keys, values and their
//!   gradients backward (Liu et al. 2023, Ring Attention).
//!
//! Each call costs a latency plus its bytes over the achievable bus
//! bandwidth: NCCL reaches about 80% of NVLink's one-direction bandwidth
//! (nccl-tests all-reduce bus bandwidth, about 230-240 GB/s of A100's 300
//! and 360-370 of H100's 450) and about 90% of a 200/400 Gb/s NIC, with
//! about 10 µs per call inside a node and 25 µs across (nccl-tests
//! small-message times; approximate).
//!
//! Overlap (stated in every report; `mod.rs` applies it): data-parallel
//! traffic runs concurrently with compute (FSDP's prefetch, DDP's bucketed
//! all-reduce) except the first layer's all-gather and the last layer's
//! reduce-scatter, which nothing hides; ring attention's exchanges hide
//! behind attention only; tensor-, pipeline- and expert-parallel traffic
//! sits on the critical path and shows in full.

use serde::Serialize;

use super::flops::Work;
use super::rates::Rates;
use crate::activation::{Recompute, Workload};
use crate::parallel::{Parallelism, ZeroStage};

/// Which links a collective crosses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Link {
    /// NVLink or its like, inside a node.
    IntraNode,
    /// The network between nodes.
    InterNode,
}

/// One kind of traffic of a step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Collective {
    /// `fsdp all-gather`, `tp all-reduce`, ...
    pub name: &'static str,
    /// Bytes each GPU sends per step.
    pub bytes_per_gpu: f64,
    /// The links it crosses.
    pub link: Link,
    /// Seconds per step at that link's bandwidth.
    pub seconds: f64,
    /// Whether it runs concurrently with compute.
    pub overlapped: bool,
    /// Calls per step (each pays the link's latency).
    pub calls: f64,
}

/// Bytes of a bf16 gradient or weight, and of a bf16 activation.
const HALF: f64 = 2.0;
/// Achievable share of the link bandwidth, inside a node and across.
const INTRA_NODE_BUS_SHARE: f64 = 0.8;
const INTER_NODE_BUS_SHARE: f64 = 0.9;
/// Seconds per call, inside a node and across.
const INTRA_NODE_LATENCY_S: f64 = 10e-6;
const INTER_NODE_LATENCY_S: f64 = 25e-6;
/// DDP's gradient bucket (`bucket_cap_mb = 25`): one all-reduce call each.
const DDP_BUCKET_BYTES: f64 = 25.0 * 1024.0 * 1024.0;

/// Every collective of one step.
pub fn per_step(
    work: &Work,
    layout: &Parallelism,
    workload: &Workload,
    micro_batches: u64,
    rates: &Rates,
) -> Vec<Collective> {
    let m = micro_batches as f64;
    let per_node = rates.gpus_per_node.max(1);
    let link = |stride: u64, size: u64| {
        if layout.nodes <= 1 || stride.saturating_mul(size) <= per_node {
            Link::IntraNode
        } else {
            Link::InterNode
        }
    };
    let seconds = |bytes: f64, link: Link, calls: f64| {
        let (bandwidth, share, latency) = match link {
            Link::IntraNode => (
                rates.intra_node.0,
                INTRA_NODE_BUS_SHARE,
                INTRA_NODE_LATENCY_S,
            ),
            Link::InterNode => (
                rates.inter_node.0,
                INTER_NODE_BUS_SHARE,
                INTER_NODE_LATENCY_S,
            ),
        };
        calls * latency + bytes / (bandwidth.max(1) as f64 * share)
    };
    let mut out = Vec::new();
    let mut push = |name: &'static str, bytes: f64, link: Link, overlapped: bool, calls: f64| {
        if bytes > 0.0 {
            let calls = calls.max(1.0);
            out.push(Collective {
                name,
                bytes_per_gpu: bytes,
                link,
                seconds: seconds(bytes, link, calls),
                overlapped,
                calls,
            });
        }
    };
    let (tp, pp, cp, ep) = (
        layout.tensor.max(1),
        layout.pipeline.max(1),
        layout.context.max(1),
        layout.expert.max(1),
    );
    let act = workload.dtype.bytes() as f64;
    let share = |d: u64| (d.saturating_sub(1)) as f64 / d.max(1) as f64;
    let gathered_layers = (work.layers as f64 / pp as f64).max(1.0);

    // Data parallelism over the ranks that hold the same layers (dp × cp).
    let shard = layout.data_and_context();
    if shard > 1 {
        let dense = (work.parameters - work.expert_parameters) as f64;
        let local_weights = (dense + work.expert_parameters as f64 / ep as f64) / (tp * pp) as f64;
        let trained = work.trainable as f64 / work.parameters.max(1) as f64;
        let local_gradients = local_weights * trained;
        let data_link = link(tp, shard);
        let f = share(shard);
        match layout.zero {
            ZeroStage::Weights => {
                push(
                    "fsdp all-gather",
                    2.0 * m * f * local_weights * HALF,
                    data_link,
                    true,
                    2.0 * m * gathered_layers,
                );
                push(
                    "fsdp reduce-scatter",
                    f * local_gradients * HALF,
                    data_link,
                    true,
                    gathered_layers,
                );
            }
            ZeroStage::Gradients | ZeroStage::OptimizerStates => {
                push(
                    "zero reduce-scatter",
                    f * local_gradients * HALF,
                    data_link,
                    true,
                    gathered_layers,
                );
                push(
                    "zero all-gather",
                    f * local_weights * HALF,
                    data_link,
                    true,
                    gathered_layers,
                );
            }
            ZeroStage::None => {
                push(
                    "dp all-reduce",
                    2.0 * f * local_gradients * HALF,
                    data_link,
                    true,
                    (local_gradients * HALF / DDP_BUCKET_BYTES).ceil(),
                );
            }
        }
    }
    let seq_local = workload.seq_len as f64 / cp as f64;
    let tokens_local = workload.micro_batch as f64 * seq_local;
    let layers_local = work.layers as f64 / pp as f64;
    let virtual_stages = rates.virtual_stages.max(1) as f64;
    let recompute_passes = match workload.recompute {
        Recompute::Full => 1.0,
        _ => 0.0,
    };
    if tp > 1 {
        let activation = tokens_local * work.hidden as f64 * act;
        let count = (4.0 + 2.0 * recompute_passes) * layers_local * m;
        push(
            "tp all-reduce",
            count * 2.0 * share(tp) * activation,
            link(1, tp),
            false,
            count,
        );
    }
    if pp > 1 {
        let activation = tokens_local * work.hidden as f64 * act / tp as f64;
        push(
            "pp send/recv",
            2.0 * m * virtual_stages * activation,
            link(tp * cp * layout.data(), pp),
            false,
            2.0 * m * virtual_stages,
        );
    }
    if ep > 1 && work.moe_layers > 0 {
        let routed = tokens_local * work.top_k as f64 * work.hidden as f64 * act;
        let moe_local = work.moe_layers as f64 / pp as f64;
        push(
            "ep all-to-all",
            4.0 * moe_local * m * share(ep) * routed,
            link(tp * cp, ep),
            false,
            4.0 * moe_local * m,
        );
    }
    if cp > 1 {
        let chunk = tokens_local * work.kv_width as f64 * act;
        // Forward: keys and values, N − 1 hops; backward: those and their gradients.
        let hops = (cp - 1) as f64 * (1.0 + 2.0 + recompute_passes);
        push(
            "cp ring",
            hops * layers_local * m * chunk,
            link(tp, cp),
            true,
            hops * layers_local * m,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::activation::Workload;
    use crate::units::Bytes;

    fn rates() -> Rates {
        Rates {
            device: "test".to_string(),
            bf16_flops_per_s: 1,
            fp8_flops_per_s: None,
            mfu_basis_points: None,
            intra_node: Bytes(100),
            inter_node: Bytes(10),
            gpus_per_node: 8,
            virtual_stages: 1,
            memory_bytes_per_s: 0,
            sms: 0,
            host_bytes_per_s: 0,
            generation: None,
            matmul_efficiency_basis_points: None,
        }
    }

    fn work() -> Work {
        Work {
            parameters: 1_000,
            trainable: 1_000,
            layers: 4,
            hidden: 10,
            ..Work::default()
        }
    }

    #[test]
    fn ddp_all_reduces_twice_the_gradient_share() {
        let layout = Parallelism {
            gpus: 4,
            ..Parallelism::SINGLE
        };
        let out = per_step(&work(), &layout, &Workload::new(1, 1), 1, &rates());
        assert_eq!(out.len(), 1);
        // 2 (d - 1)/d x 1,000 bf16 values: 2 x 3/4 x 2,000 bytes.
        assert_eq!(out[0].bytes_per_gpu, 3_000.0);
        assert_eq!(out[0].link, Link::IntraNode);
        // One bucket: a latency plus the bytes at 80% of the link.
        assert_eq!(out[0].calls, 1.0);
        assert!((out[0].seconds - (INTRA_NODE_LATENCY_S + 3_000.0 / 80.0)).abs() < 1e-9);
        assert!(out[0].overlapped);
    }

    #[test]
    fn tensor_parallel_all_reduces_four_times_a_layer_and_crosses_nodes_when_wide() {
        let layout = Parallelism {
            gpus: 16,
            nodes: 2,
            tensor: 16,
            ..Parallelism::SINGLE
        };
        let out = per_step(&work(), &layout, &Workload::new(1, 2), 1, &rates());
        let tp = out.iter().find(|c| c.name == "tp all-reduce").unwrap();
        // 4 all-reduces x 4 layers x 2 (15/16) x (2 tokens x 10 x 2 bytes).
        assert_eq!(tp.bytes_per_gpu, 16.0 * 2.0 * 15.0 / 16.0 * 40.0);
        assert_eq!(tp.link, Link::InterNode);
        assert!(!tp.overlapped);
    }
}
