//! Accelerators: a name and a byte count, with where the figure comes from.

mod catalogue;

pub use catalogue::DEVICES;

use serde::Serialize;

use crate::catalogue::Named;
use crate::error::Result;
use crate::units::Bytes;

/// One accelerator of the catalogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DeviceSpec {
    /// The name used with `--device`: `h100-80gb`.
    pub name: &'static str,
    /// Other accepted names: `h100`.
    pub aliases: &'static [&'static str],
    /// Who makes it.
    pub vendor: &'static str,
    /// The vendor's product name.
    pub product: &'static str,
    /// HBM3, GDDR6X, ...
    pub memory_type: &'static str,
    /// Total memory as the driver reports it, in bytes.
    pub bytes: u64,
    /// Where the figure comes from.
    pub source: &'static str,
    /// Its dense matmul peaks and interconnect, where a datasheet gives them.
    pub compute: Option<Compute>,
}

/// What a device's datasheet says of its speed: dense (no 2:4 sparsity)
/// tensor-core peaks and the bandwidth each GPU has to its peers.
///
/// Bandwidths are per GPU and per direction: NVIDIA quotes NVLink as the
/// bidirectional total ("900 GB/s"), which is twice what one direction
/// carries, and a node's network as one NIC per GPU in Gb/s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Compute {
    /// Dense bf16 tensor-core peak, TFLOP/s (10^12).
    pub bf16_tflops: u32,
    /// Dense fp8 tensor-core peak, TFLOP/s; none where the device has no fp8 matmul.
    pub fp8_tflops: Option<u32>,
    /// One direction of a GPU's link to the GPUs of its node (NVLink,
    /// Infinity Fabric), GB/s (10^9 bytes).
    pub intra_node_gb_per_s: u32,
    /// One direction of a GPU's share of the node's network (its NIC in the
    /// vendor's reference system), GB/s; none where no reference system says.
    pub inter_node_gb_per_s: Option<u32>,
    /// Where the figures come from.
    pub source: &'static str,
    /// Memory (HBM, GDDR) bandwidth, GB/s (10^9 bytes): what memory-bound
    /// work (norms, activations, the optimizer step) runs at.
    pub memory_gb_per_s: u32,
    /// Streaming multiprocessors (AMD: compute units): how many matmul
    /// tiles run at once, so the width of a wave.
    pub sms: u32,
    /// One direction of the GPU's link to host memory (PCIe x16, NVLink-C2C), GB/s.
    pub host_gb_per_s: u32,
    /// The architecture, whose measured efficiencies apply.
    pub generation: Generation,
}

/// A GPU architecture: what the step-time model's efficiency figures are
/// measured and fitted per (`crate::step_time`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Generation {
    /// NVIDIA Turing (T4).
    Turing,
    /// NVIDIA Ampere (A100, A10, A10G, RTX A6000, RTX 3090).
    Ampere,
    /// NVIDIA Ada Lovelace (L4, L40S, RTX 4090).
    Ada,
    /// NVIDIA Hopper (H100, H200).
    Hopper,
    /// NVIDIA Blackwell (B200, GB200).
    Blackwell,
    /// AMD CDNA 3 (MI300X, MI325X).
    Cdna3,
}

impl DeviceSpec {
    /// Looks a device up by name or alias.
    pub fn find(name: &str) -> Result<&'static DeviceSpec> {
        crate::catalogue::find("device", name, DEVICES)
    }

    /// Its memory.
    pub fn memory(&self) -> Bytes {
        Bytes(self.bytes)
    }
}

impl Named for DeviceSpec {
    fn name(&self) -> &'static str {
        self.name
    }
    fn aliases(&self) -> &'static [&'static str] {
        self.aliases
    }
}
