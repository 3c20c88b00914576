//! What share of a GPU's dense peak each kind of work reaches, by
//! architecture generation.
//!
//! Two kinds of figure:
//! * the achievable share of the dense peak of a large, well-shaped matmul
//!   (cuBLAS/hipBLASLt), before tile and wave quantization
//!   (`matmul.rs`): fitted per generation where published training runs
//!   exist (Ampere, Hopper: `fitted.rs`, written by
//!   `tools/fit_step_time.py`), taken from a sibling generation or a
//!   published GEMM benchmark otherwise;
//! * flash attention's share of the dense bf16 peak, forward and backward
//!   separately, for long causal sequences with head width 128, read from
//!   the kernels' papers (`attention.rs` scales it by sequence and head
//!   width).

use super::fitted;
use crate::device::Generation;

/// The efficiency figures of one generation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figures {
    /// Achievable share of the dense peak for a large matmul.
    pub matmul: f64,
    /// Where `matmul` comes from.
    pub matmul_source: &'static str,
    /// Flash attention's forward share of the dense bf16 peak.
    pub attention_forward: f64,
    /// Its backward share (two matmuls per forward one, and the
    /// recomputation of the scores).
    pub attention_backward: f64,
}

/// FlashAttention-2 on A100, causal, head width 128: Dao 2023
/// (arXiv:2307.08691) section 4.1, Figures 4-6, forward "up to 73%" and
/// backward "up to 63%" of the peak for long non-causal sequences; the
/// causal curves sit a few points lower. Approximate.
const AMPERE_FLASH_FORWARD: f64 = 0.68;
const AMPERE_FLASH_BACKWARD: f64 = 0.56;
/// FlashAttention-2 on H100 SXM5 (what `sdpa` and `flash_attn` 2 run on
/// Hopper): Shah et al. 2024, FlashAttention-3 (arXiv:2407.08608),
/// Figures 5-7: about 330-370 TFLOP/s forward and 290-310 backward, causal,
/// head width 128, of the 989 peak. Approximate.
const HOPPER_FLASH_FORWARD: f64 = 0.35;
const HOPPER_FLASH_BACKWARD: f64 = 0.30;
/// Attention on Turing and CDNA 3 (memory-efficient / Composable Kernel
/// flash kernels): no paper figure at hand; about half Ampere's share,
/// approximate.
const OTHER_FLASH_FORWARD: f64 = 0.35;
const OTHER_FLASH_BACKWARD: f64 = 0.25;
/// MI300X's large bf16 GEMMs: about 600 TFLOP/s of the 1,307 peak
/// (SemiAnalysis, "MI300X vs H100 vs H200 Benchmark Part 1: Training",
/// Dec 2024, GEMM section). Approximate.
const CDNA3_MATMUL: f64 = 0.46;

/// The fitted generations' mean, for a bare `--peak-tflops` device.
const UNKNOWN_SOURCE: &str =
    "no generation known (--peak-tflops): the mean of the fitted Ampere and Hopper shares";

/// The figures of `generation` (none: a device known only by its peak).
pub fn figures(generation: Option<Generation>) -> Figures {
    let ampere = Figures {
        matmul: fitted::AMPERE_MATMUL,
        matmul_source: "fitted on published A100 runs (tools/fit_step_time.py)",
        attention_forward: AMPERE_FLASH_FORWARD,
        attention_backward: AMPERE_FLASH_BACKWARD,
    };
    let hopper = Figures {
        matmul: fitted::HOPPER_MATMUL,
        matmul_source: "fitted on published H100 runs (tools/fit_step_time.py)",
        attention_forward: HOPPER_FLASH_FORWARD,
        attention_backward: HOPPER_FLASH_BACKWARD,
    };
    match generation {
        Some(Generation::Ampere) => ampere,
        Some(Generation::Hopper) => hopper,
        Some(Generation::Ada) => Figures {
            matmul_source: "Ampere's fitted share (no published Ada run in the fit)",
            ..ampere
        },
        Some(Generation::Turing) => Figures {
            matmul_source: "Ampere's fitted share (no published Turing run in the fit)",
            attention_forward: OTHER_FLASH_FORWARD,
            attention_backward: OTHER_FLASH_BACKWARD,
            ..ampere
        },
        Some(Generation::Blackwell) => Figures {
            matmul_source: "Hopper's fitted share (no published Blackwell run in the fit)",
            ..hopper
        },
        Some(Generation::Cdna3) => Figures {
            matmul: CDNA3_MATMUL,
            matmul_source: "SemiAnalysis Dec 2024 MI300X GEMM benchmark (approximate)",
            attention_forward: OTHER_FLASH_FORWARD,
            attention_backward: OTHER_FLASH_BACKWARD,
        },
        None => Figures {
            matmul: (ampere.matmul + hopper.matmul) / 2.0,
            matmul_source: UNKNOWN_SOURCE,
            attention_forward: (AMPERE_FLASH_FORWARD + HOPPER_FLASH_FORWARD) / 2.0,
            attention_backward: (AMPERE_FLASH_BACKWARD + HOPPER_FLASH_BACKWARD) / 2.0,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_generation_has_figures_between_zero_and_one() {
        for generation in [
            None,
            Some(Generation::Turing),
            Some(Generation::Ampere),
            Some(Generation::Ada),
            Some(Generation::Hopper),
            Some(Generation::Blackwell),
            Some(Generation::Cdna3),
        ] {
            let f = figures(generation);
            for share in [f.matmul, f.attention_forward, f.attention_backward] {
                assert!(share > 0.0 && share <= 1.0, "{generation:?}");
            }
            // Backward attention is slower than forward.
            assert!(f.attention_backward <= f.attention_forward);
        }
    }
}
