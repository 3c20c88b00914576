//! The pipeline bubble of a 1F1B schedule.

/// The idle share of a pipeline, relative to its busy time: (p − 1) / (v · m)
/// for p stages, v virtual stages per rank (Megatron's interleaved
/// schedule; 1 for plain 1F1B) and m micro-batches per step.
///
/// Narayanan et al. 2021, section 2.2.1 (bubble fraction (p − 1)/m for
/// PipeDream-Flush's 1F1B) and 2.2.2 (the interleaved schedule divides it
/// by v).
pub fn fraction(stages: u64, virtual_stages: u64, micro_batches: u64) -> f64 {
    if stages <= 1 {
        return 0.0;
    }
    (stages - 1) as f64 / (virtual_stages.max(1) as f64 * micro_batches.max(1) as f64)
}

#[cfg(test)]
mod tests {
    use super::fraction;

    #[test]
    fn one_f_one_b_and_interleaved() {
        assert_eq!(fraction(1, 1, 8), 0.0);
        assert_eq!(fraction(4, 1, 8), 3.0 / 8.0);
        assert_eq!(fraction(4, 2, 8), 3.0 / 16.0);
    }
}
