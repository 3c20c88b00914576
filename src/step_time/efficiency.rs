//! The default share of the peak a step's matmuls reach, by model width.
//!
//! Matmul efficiency grows with the size of the GEMMs: Megatron-LM's own
//! measurements go from 44% of the A100's peak for a 1.7B GPT to 52% for
//! 1T (Narayanan et al. 2021, Table 1). The default therefore depends on the
//! hidden size h, read from one source: Korthikanti et al. 2022, "Reducing
//! Activation Recomputation in Large Transformer Models" (arXiv:2205.05198),
//! Table 5, the hardware FLOPs utilization (HFU: executed FLOPs, recompute
//! included, over iteration time and peak) of four GPT models on A100s
//! with tensor parallelism 8, sequence parallelism and selective
//! recomputation, no data parallelism (their Table 3 gives the layouts).
//!
//! Their HFU spans the whole iteration, bubble included; `compute_s`
//! excludes the bubble, so each figure is scaled by the busy share of its
//! pipeline: efficiency = HFU × (1 + (p − 1)/(v·m)). Between the four
//! widths the efficiency is interpolated linearly in h; below the smallest
//! and above the largest it is held flat. It is an A100 / Megatron-LM
//! figure: other devices and frameworks reach other shares (Llama 3's 405B
//! ran at 38–43% MFU on H100s), which `--mfu` states directly. These four
//! rows are what the default is made of; the same paper's full-recompute
//! rows, its 530B run with 8-way data parallelism, Narayanan et al. 2021
//! Table 1 and Llama 3's Table 4 are held out to test it
//! (`tests/fixtures/published/step_times.json`).

/// One measured run of Korthikanti et al. 2022, Tables 3 and 5.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Measured {
    /// The model, as the paper names it.
    pub model: &'static str,
    /// Hidden size h.
    pub hidden: u64,
    /// Hardware FLOPs utilization, in basis points.
    pub hfu_basis_points: u32,
    /// Pipeline stages p.
    pub pipeline: u64,
    /// Interleaved stages v ("three interleaving stages" for 175B and 530B, section 6).
    pub virtual_stages: u64,
    /// Micro-batches per iteration m: global batch / micro-batch.
    pub micro_batches: u64,
}

/// Korthikanti et al. 2022, Table 5 ("Present Work": sequence parallelism
/// and selective recomputation), with Table 3's layouts.
pub const KORTHIKANTI_2022: [Measured; 4] = [
    Measured {
        model: "22B",
        hidden: 6144,
        hfu_basis_points: 4_370,
        pipeline: 1,
        virtual_stages: 1,
        micro_batches: 1,
    },
    Measured {
        model: "175B (GPT-3)",
        hidden: 12288,
        hfu_basis_points: 5_280,
        pipeline: 8,
        virtual_stages: 3,
        micro_batches: 64,
    },
    Measured {
        model: "530B (MT-NLG)",
        hidden: 20480,
        hfu_basis_points: 5_700,
        pipeline: 35,
        virtual_stages: 3,
        micro_batches: 280,
    },
    Measured {
        model: "1T",
        hidden: 25600,
        hfu_basis_points: 5_700,
        pipeline: 64,
        virtual_stages: 1,
        micro_batches: 512,
    },
];

impl Measured {
    /// The share of the peak while the pipeline is busy.
    fn efficiency(&self) -> f64 {
        f64::from(self.hfu_basis_points) / 10_000.0
            * (1.0
                + super::bubble::fraction(self.pipeline, self.virtual_stages, self.micro_batches))
    }
}

/// Where the default comes from, for reports.
pub const DEFAULT_SOURCE: &str = "by hidden size from Korthikanti et al. 2022 (arXiv:2205.05198) Table 5, A100 HFU over the busy share of the pipeline";

/// The default efficiency for a model of hidden size `hidden` (0: unknown,
/// taken as the narrowest measured model).
pub fn default_for(hidden: u64) -> f64 {
    let points = KORTHIKANTI_2022;
    let first = points[0];
    let last = points[points.len() - 1];
    if hidden <= first.hidden {
        return first.efficiency();
    }
    if hidden >= last.hidden {
        return last.efficiency();
    }
    points
        .windows(2)
        .find_map(|pair| {
            let [low, high] = pair else { return None };
            (hidden <= high.hidden).then(|| {
                let t = (hidden - low.hidden) as f64 / (high.hidden - low.hidden) as f64;
                low.efficiency() + t * (high.efficiency() - low.efficiency())
            })
        })
        .unwrap_or_else(|| last.efficiency())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_measured_widths_give_their_busy_share() {
        // 22B: no pipeline, so the HFU itself.
        assert!((default_for(6144) - 0.437).abs() < 1e-12);
        // 1T: 57.0% over a bubble of 63/512.
        assert!((default_for(25600) - 0.57 * (1.0 + 63.0 / 512.0)).abs() < 1e-12);
        // Held flat outside, monotone between.
        assert_eq!(default_for(0), default_for(6144));
        assert_eq!(default_for(1 << 20), default_for(25600));
        let mut previous = 0.0;
        for h in (6144..=25600).step_by(512) {
            let e = default_for(h);
            assert!(e >= previous, "{h}");
            previous = e;
        }
    }
}
