//! Replaying a recorded allocation stream through the caching-allocator
//! simulation: what a measured sequence of allocations and frees (torch's
//! profiler memory events, in order) would have reserved on CUDA.
//!
//! The stream is integers, as `tools/measure_torchtune_setup.py` writes
//! them: a positive value allocates that many bytes (allocation `k` is the
//! `k`-th positive value), `-(k + 1)` frees allocation `k`. Each allocation
//! is one real tensor, so none is split into pieces (the timeline's
//! aggregate events are; see `allocator.rs`).

use super::AllocatorOptions;
use super::allocator::{Allocator, Stream};
use crate::error::{Error, Result};
use crate::units::Bytes;

/// What a replayed stream reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamPeaks {
    /// The most allocated at once (`max_memory_allocated`).
    pub allocated: Bytes,
    /// The most the simulated caching allocator reserved (`max_memory_reserved`).
    pub reserved: Bytes,
    /// Allocated when the stream ends.
    pub end: Bytes,
}

const WHAT: &str = "the allocation stream";

/// Replays `stream` (see the module's documentation) from an empty allocator.
pub fn replay_stream(stream: &[i64], options: AllocatorOptions) -> Result<StreamPeaks> {
    let mut allocator = Allocator::new(options, u64::MAX);
    // Every allocation is one block (`Allocator::malloc_whole`).
    let mut sizes: Vec<u64> = Vec::new();
    let mut live: Vec<bool> = Vec::new();
    let (mut total, mut high) = (0u64, 0u64);
    for (at, &value) in stream.iter().enumerate() {
        if value > 0 {
            let bytes = value.unsigned_abs();
            allocator.malloc_whole(sizes.len(), bytes, Stream::Compute)?;
            sizes.push(bytes);
            live.push(true);
            total = total
                .checked_add(bytes)
                .ok_or_else(|| Error::overflow(WHAT))?;
            high = high.max(total);
        } else {
            let index = usize::try_from(value.unsigned_abs().saturating_sub(1))
                .map_err(|_| Error::overflow(WHAT))?;
            let freeable = value < 0 && live.get(index).copied().unwrap_or(false);
            if !freeable {
                return Err(Error::InvalidValue {
                    what: "allocation stream entry",
                    value: value.to_string(),
                    reason: format!(
                        "entry {at} frees no live allocation (accepted: a positive size, or -(k + 1) for a live allocation k)"
                    ),
                });
            }
            let bytes = sizes[index];
            live[index] = false;
            allocator.free(index);
            total -= bytes;
        }
    }
    Ok(StreamPeaks {
        allocated: Bytes(high),
        reserved: Bytes(allocator.peak_reserved()),
        end: Bytes(total),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_freed_block_is_reused_and_a_larger_request_grows_the_reserve() {
        // 30 MiB, freed, then 20 MiB (fits the cached block), then 40 MiB.
        let mib = |n: i64| n << 20;
        let peaks = replay_stream(
            &[mib(30), -1, mib(20), mib(40)],
            AllocatorOptions::default(),
        )
        .unwrap();
        assert_eq!(peaks.allocated, Bytes(60 << 20));
        assert_eq!(peaks.reserved, Bytes(70 << 20));
        assert_eq!(peaks.end, Bytes(60 << 20));
    }

    #[test]
    fn a_free_of_nothing_is_an_error() {
        assert!(replay_stream(&[1000, -2], AllocatorOptions::default()).is_err());
        assert!(replay_stream(&[1000, -1, -1], AllocatorOptions::default()).is_err());
        assert!(replay_stream(&[0], AllocatorOptions::default()).is_err());
    }
}
