//! Optimizer offload (ZeRO-Offload, ZeRO-Infinity): the host steps the
//! optimizer, so each step moves the rank's gradient shard down and its
//! updated bf16 weights up over the host link, and the CPU runs Adam.
//!
//! * Transfers: 2 bytes per parameter each way (Ren et al. 2021,
//!   "ZeRO-Offload", section 4: fp16 gradients to the CPU, fp16 parameters
//!   back), at 80% of the link's one-direction bandwidth (pinned-memory
//!   copies; approximate). With the parameters offloaded too
//!   (`optimizer+params`), each micro-batch's forward and backward gather
//!   streams the rank's weight shard up again.
//! * The CPU step: DeepSpeed's `DeepSpeedCPUAdam` (AVX-512, many threads)
//!   updates about 5·10^9 parameters a second on a two-socket node; the
//!   ZeRO-Offload paper's section 5 times it at a few tenths of a second per
//!   10^9 parameters, 5-7× PyTorch's CPU Adam. Approximate; the node's GPUs
//!   share it.
//!
//! Nothing is overlapped: DeepSpeed's one-step delayed update, which hides
//! the CPU step, is off by default.

/// Share of the host link's bandwidth a pinned copy reaches.
const HOST_LINK_SHARE: f64 = 0.8;
/// Bytes per parameter moved each way per step.
const BYTES_EACH_WAY: f64 = 2.0;
/// Parameters `DeepSpeedCPUAdam` steps per second on one node.
const CPU_ADAM_PARAMETERS_PER_S_PER_NODE: f64 = 5e9;

/// The offload's seconds per step: `stepped` parameters the rank's optimizer
/// steps, `streamed` bytes of weights brought up from the host per step,
/// `host_bytes_per_s` the link, `gpus_per_node` sharing the CPU.
pub fn seconds(stepped: f64, streamed: f64, host_bytes_per_s: u64, gpus_per_node: u64) -> f64 {
    let link = host_bytes_per_s as f64 * HOST_LINK_SHARE;
    let transfers = if link > 0.0 {
        (2.0 * BYTES_EACH_WAY * stepped + streamed) / link
    } else {
        0.0
    };
    let cpu = stepped * gpus_per_node.max(1) as f64 / CPU_ADAM_PARAMETERS_PER_S_PER_NODE;
    transfers + cpu
}

#[cfg(test)]
mod tests {
    use super::seconds;

    #[test]
    fn a_billion_parameters_on_one_pcie_gen4_gpu() {
        // 4 GB over 25.6 GB/s, plus 10^9 / 5 * 10^9 s of CPU Adam.
        let s = seconds(1e9, 0.0, 32_000_000_000, 1);
        assert!((s - (4e9 / 25.6e9 + 0.2)).abs() < 1e-9, "{s}");
        // A node's eight GPUs share the CPU.
        assert!(seconds(1e9, 0.0, 32_000_000_000, 8) > s);
    }
}
