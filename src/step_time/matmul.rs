//! How much of the achievable matmul rate a layer's actual GEMMs get, from
//! their shapes on one rank: tile and wave quantization against the SM
//! count, and each output tile's fixed cost.
//!
//! A GEMM C (M × N) = A (M × K) · B (K × N) runs as ⌈M/128⌉·⌈N/128⌉ output
//! tiles (cuBLAS's and CUTLASS's large bf16 tiles; Hopper also picks 128 ×
//! 256), one tile per SM at a time, so in ⌈tiles / SMs⌉ waves. Its
//! efficiency is therefore
//!
//! `(M·N / (tiles · 128²)) · (tiles / (waves · SMs)) · K / (K + K₀)`
//!
//! the first factor the padding of partial tiles, the second the idle SMs
//! of the last wave (NVIDIA, "Matrix Multiplication Background User's
//! Guide", sections "Tile Quantization" and "Wave Quantization"), the third
//! a tile's prologue and epilogue, worth about K₀ = 128 steps of its inner
//! loop (approximate). Each linear of a layer is priced three times: the
//! forward (M = tokens, N = outputs, K = inputs), the input gradient (M =
//! tokens, N = inputs, K = outputs) and the weight gradient (M = outputs,
//! N = inputs, K = tokens).

use super::flops::Work;

/// Output tile sides, elements.
const TILE: u64 = 128;
/// A tile's fixed cost, in steps of K (approximate).
const TILE_OVERHEAD_K: f64 = 128.0;

/// The efficiency of one GEMM of `m × n` outputs over `k` on `sms` SMs.
pub fn gemm(m: u64, n: u64, k: u64, sms: u64) -> f64 {
    if m == 0 || n == 0 || k == 0 {
        return 1.0;
    }
    let tiles = m.div_ceil(TILE).saturating_mul(n.div_ceil(TILE));
    let padding = (m as f64 * n as f64) / (tiles as f64 * (TILE * TILE) as f64);
    let waves = match sms {
        0 => 1.0,
        sms => tiles as f64 / (tiles.div_ceil(sms) as f64 * sms as f64),
    };
    let depth = k as f64 / (k as f64 + TILE_OVERHEAD_K);
    padding * waves * depth
}

/// The FLOP-weighted efficiency of a step's linears on one rank: `tokens`
/// per micro-batch on the rank, `tp` tensor-parallel ranks splitting the
/// layers' outputs (column-parallel) or inputs (row-parallel) and the head's
/// vocabulary. 1 when the shapes are unknown.
pub fn linears(work: &Work, tokens: u64, tp: u64, sms: u64) -> f64 {
    let (h, f) = (work.hidden, work.intermediate);
    if h == 0 || f == 0 || work.heads == 0 {
        return 1.0;
    }
    let tp = tp.max(1);
    let q = work.heads.saturating_mul(work.head_dim);
    let kv = work.kv_width;
    let up = if work.gated { 2 * f } else { f };
    // (outputs, inputs) of each linear on one rank, per layer; the head once.
    let layer = [((q + kv) / tp, h), (h, q / tp), (up / tp, h), (h, f / tp)];
    let mut weights = 0.0;
    let mut time = 0.0;
    let mut add = |outputs: u64, inputs: u64, count: f64| {
        let w = outputs as f64 * inputs as f64 * count;
        for efficiency in [
            gemm(tokens, outputs, inputs, sms),
            gemm(tokens, inputs, outputs, sms),
            gemm(outputs, inputs, tokens, sms),
        ] {
            weights += w;
            time += w / efficiency.max(f64::MIN_POSITIVE);
        }
    };
    for (outputs, inputs) in layer {
        add(outputs, inputs, work.layers as f64);
    }
    add(work.vocab / tp, h, 1.0);
    if time > 0.0 { weights / time } else { 1.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_wave_of_whole_tiles_loses_only_the_tile_overhead() {
        // 132 SMs, 12 x 11 tiles: one full wave.
        let e = gemm(12 * 128, 11 * 128, 4096, 132);
        assert!((e - 4096.0 / (4096.0 + 128.0)).abs() < 1e-12);
    }

    #[test]
    fn small_and_ragged_matmuls_come_out_slow() {
        // 133 tiles on 132 SMs: two waves, the second nearly empty.
        let ragged = gemm(133 * 128, 128, 4096, 132);
        assert!(ragged < 0.52, "{ragged}");
        // 100 rows pad a 128-row tile.
        let padded = gemm(100, 128 * 132, 4096, 132);
        assert!((padded - 100.0 / 128.0 * 4096.0 / 4224.0).abs() < 1e-12);
        // More tokens per rank: never worse for a large layer.
        assert!(gemm(8192, 4096, 4096, 132) >= gemm(1024, 512, 4096, 132));
    }
}
