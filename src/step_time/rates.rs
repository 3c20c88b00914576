//! What the device does per second: its matmul peaks, the assumed share of
//! them a step reaches, and its links.

use crate::device::Generation;
use crate::units::Bytes;

/// The speeds a step is priced at, resolved from `--device` and the flags
/// that override it (`--mfu`, `--peak-tflops`, `--intra-node-bandwidth`,
/// `--inter-node-bandwidth`, `--virtual-stages`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rates {
    /// The device, for the report: `h100-80gb`.
    pub device: String,
    /// Dense bf16 peak per GPU, FLOP/s.
    pub bf16_flops_per_s: u64,
    /// Dense fp8 peak per GPU, FLOP/s, when the device has one.
    pub fp8_flops_per_s: Option<u64>,
    /// The share of the peak the executed FLOPs run at, in basis points
    /// (1/10,000), from `--mfu`; `None`: the default for the model's width.
    pub mfu_basis_points: Option<u32>,
    /// One direction of a GPU's link inside its node, bytes per second.
    pub intra_node: Bytes,
    /// One direction of a GPU's share of the node's network, bytes per second.
    pub inter_node: Bytes,
    /// GPUs per node: collectives whose ranks span more cross the network.
    pub gpus_per_node: u64,
    /// Virtual pipeline stages per rank (Megatron's interleaved schedule).
    pub virtual_stages: u64,
    /// Memory bandwidth per GPU, bytes per second (0: unknown, memory-bound
    /// work not priced).
    pub memory_bytes_per_s: u64,
    /// Streaming multiprocessors per GPU (0: unknown, no wave quantization).
    pub sms: u64,
    /// One direction of a GPU's link to host memory, bytes per second.
    pub host_bytes_per_s: u64,
    /// The architecture whose efficiency figures apply (none: a bare
    /// `--peak-tflops`, priced at the fitted generations' mean).
    pub generation: Option<Generation>,
    /// `--matmul-efficiency`: the achievable share of the dense peak a
    /// large matmul reaches, in basis points, replacing the fitted figure.
    pub matmul_efficiency_basis_points: Option<u32>,
}

/// The rates of a step, or why there are none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Speed {
    /// Priced at these rates.
    Known(Rates),
    /// Not priced, and why (shown in the report instead of a guess).
    Unknown(String),
}

impl Default for Speed {
    fn default() -> Speed {
        Speed::Unknown(
            "no device with a known peak: pass --device (see `trainmem devices`) or --peak-tflops"
                .to_string(),
        )
    }
}
