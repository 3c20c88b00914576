//! A simulation of PyTorch's CUDA caching allocator over the timeline, for
//! the memory it reserves (`torch.cuda.max_memory_reserved()`, what
//! `nvidia-smi` shows less the CUDA context).
//!
//! `c10/cuda/CUDACachingAllocator.cpp`: every request is rounded up to a
//! multiple of 512 bytes (`kMinBlockSize`); requests up to 1 MiB
//! (`kSmallSize`) come from a small pool of 2 MiB segments (`kSmallBuffer`),
//! larger ones from a large pool whose new segments are 20 MiB
//! (`kLargeBuffer`) for requests under 10 MiB (`kMinLargeAlloc`) and the
//! request rounded up to 2 MiB (`kRoundLarge`) otherwise. A request takes
//! the smallest cached free block of its pool that is large enough (best
//! fit), split when the rest is at least 512 bytes (small pool) or more than
//! 1 MiB (large pool); freed blocks merge with free neighbours of their
//! segment and stay cached: reserved memory never shrinks within a step
//! (no `empty_cache`). With `expandable_segments:True` the large pool is one
//! segment mapped in 2 MiB pages as it grows, so it reserves the largest
//! total of live large blocks rounded up to 2 MiB.
//!
//! Approximate: the timeline's events are aggregates (a layer's saved
//! activations are dozens of tensors), so each is split into blocks of at
//! most a granularity, the size of the step's largest single tensor
//! (`StepPlan::granularity`); the fragmentation of interleaved small tensors
//! is not modelled.

use std::collections::BTreeMap;

use crate::error::{Error, Result};

/// `kMinBlockSize`: every request is a multiple of 512 bytes.
const MIN_BLOCK: u64 = 512;
/// `kSmallSize`: requests up to 1 MiB use the small pool.
const SMALL_SIZE: u64 = 1 << 20;
/// `kSmallBuffer`: the small pool's segments are 2 MiB.
const SMALL_BUFFER: u64 = 2 << 20;
/// `kMinLargeAlloc`: large requests under 10 MiB get a `kLargeBuffer` segment.
const MIN_LARGE_ALLOC: u64 = 10 << 20;
/// `kLargeBuffer`: 20 MiB segments for mid-sized requests.
const LARGE_BUFFER: u64 = 20 << 20;
/// `kRoundLarge`: larger segments are rounded up to 2 MiB.
const ROUND_LARGE: u64 = 2 << 20;

/// The allocator's settings (`PYTORCH_CUDA_ALLOC_CONF`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AllocatorOptions {
    /// `expandable_segments:True`.
    pub expandable_segments: bool,
}

/// The most blocks one timeline event becomes: an aggregate larger than
/// this many times the granularity is split into this many equal blocks,
/// which bounds the simulation's work by the number of events.
const MOST_PIECES: u64 = 16;

/// One block an allocation was made of: its segment (`None`: a large
/// block of the expandable segment, which has no slots) and its size as
/// requested.
#[derive(Debug, Clone, Copy)]
struct Placed {
    block: usize,
    segment: Option<usize>,
    bytes: u64,
}

/// A block of a segment, in address order.
#[derive(Debug, Clone, Copy)]
struct Slot {
    /// Its identity in the free index.
    uid: usize,
    size: u64,
    /// The block holding it, or `None` when free.
    owner: Option<usize>,
}

#[derive(Debug, Clone)]
struct Segment {
    slots: Vec<Slot>,
}

/// The CUDA stream an allocation is made on: the caching allocator keeps
/// its cached blocks per stream (`BlockPool` orders blocks by stream, then
/// size, and `get_free_block` only returns a block of the requesting
/// stream), so memory freed on one stream is not reused by another.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Stream {
    /// The default stream: compute, the optimizer, loading.
    #[default]
    Compute,
    /// The all-gather stream of ZeRO-3/FSDP: gathered parameters (FSDP1's
    /// `_unshard_stream`, FSDP2's `all_gather_stream`).
    Gather,
}

/// The simulated allocator.
#[derive(Debug, Clone)]
pub(super) struct Allocator {
    options: AllocatorOptions,
    /// The largest block one request becomes; larger requests are split.
    granularity: u64,
    segments: Vec<Segment>,
    /// Free slots, best fit first: (stream, small pool, size, uid) -> segment.
    free_slots: BTreeMap<(Stream, bool, u64, usize), usize>,
    /// The pool of each segment.
    small: Vec<bool>,
    /// The stream of each segment.
    stream: Vec<Stream>,
    /// For each allocation id, its blocks.
    placed: Vec<Vec<Placed>>,
    next_block: usize,
    next_uid: usize,
    reserved: u64,
    peak_reserved: u64,
    /// Expandable segments: live bytes of the large pool, and their peak.
    large_live: u64,
    large_peak: u64,
}

/// `round_size`: a multiple of 512 bytes, at least 512.
fn round_size(bytes: u64) -> Option<u64> {
    if bytes < MIN_BLOCK {
        Some(MIN_BLOCK)
    } else {
        bytes.checked_next_multiple_of(MIN_BLOCK)
    }
}

/// `get_allocation_size`: the size of a new segment for a request of `size`.
fn segment_size(size: u64) -> Option<u64> {
    if size <= SMALL_SIZE {
        Some(SMALL_BUFFER)
    } else if size < MIN_LARGE_ALLOC {
        Some(LARGE_BUFFER)
    } else {
        size.checked_next_multiple_of(ROUND_LARGE)
    }
}

/// Whether a free remainder of `remaining` bytes is split off (`should_split`).
fn splits(small: bool, remaining: u64) -> bool {
    if small {
        remaining >= MIN_BLOCK
    } else {
        remaining > SMALL_SIZE
    }
}

const WHAT: &str = "the reserved-memory simulation";

impl Allocator {
    pub(super) fn new(options: AllocatorOptions, granularity: u64) -> Allocator {
        Allocator {
            options,
            granularity: granularity.max(MIN_BLOCK),
            segments: Vec::new(),
            free_slots: BTreeMap::new(),
            small: Vec::new(),
            stream: Vec::new(),
            placed: Vec::new(),
            next_block: 0,
            next_uid: 0,
            reserved: 0,
            peak_reserved: 0,
            large_live: 0,
            large_peak: 0,
        }
    }

    /// The most reserved at any moment.
    pub(super) fn peak_reserved(&self) -> u64 {
        if self.options.expandable_segments {
            let large = self.large_peak.next_multiple_of(ROUND_LARGE);
            let small = SMALL_BUFFER.saturating_mul(self.segments.len() as u64);
            large.saturating_add(small)
        } else {
            self.peak_reserved
        }
    }

    /// The blocks `bytes` becomes: pieces of the granularity, at most [`MOST_PIECES`].
    fn pieces(&self, bytes: u64) -> impl Iterator<Item = u64> + use<> {
        let piece = self.granularity.max(bytes.div_ceil(MOST_PIECES)).max(1);
        let mut left = bytes;
        std::iter::from_fn(move || {
            (left > 0).then(|| {
                let next = left.min(piece);
                left -= next;
                next
            })
        })
    }

    /// Allocation `id` of `bytes`.
    pub(super) fn malloc(&mut self, id: usize, bytes: u64, stream: Stream) -> Result<()> {
        let pieces: Vec<u64> = self.pieces(bytes).collect();
        self.malloc_pieces(id, &pieces, stream)
    }

    /// Allocation `id` of `bytes` as one block: a real tensor, not an
    /// aggregate of the timeline (a recorded stream, torchtune's setup).
    pub(super) fn malloc_whole(&mut self, id: usize, bytes: u64, stream: Stream) -> Result<()> {
        self.malloc_pieces(id, &[bytes], stream)
    }

    fn malloc_pieces(&mut self, id: usize, pieces: &[u64], stream: Stream) -> Result<()> {
        if self.placed.len() <= id {
            self.placed.resize(id + 1, Vec::new());
        }
        for &piece in pieces {
            let block = self.next_block;
            self.next_block += 1;
            let segment = self.malloc_block(block, piece, stream)?;
            if let Some(blocks) = self.placed.get_mut(id) {
                blocks.push(Placed {
                    block,
                    segment,
                    bytes: piece,
                });
            }
        }
        Ok(())
    }

    fn uid(&mut self) -> usize {
        self.next_uid += 1;
        self.next_uid
    }

    /// One block of `bytes`; its segment, or `None` in an expandable segment.
    fn malloc_block(&mut self, block: usize, bytes: u64, stream: Stream) -> Result<Option<usize>> {
        let size = round_size(bytes).ok_or_else(|| Error::overflow(WHAT))?;
        let small = size <= SMALL_SIZE;
        if self.options.expandable_segments && !small {
            self.large_live = self
                .large_live
                .checked_add(size)
                .ok_or_else(|| Error::overflow(WHAT))?;
            self.large_peak = self.large_peak.max(self.large_live);
            return Ok(None);
        }
        // Best fit among the cached free blocks of the pool.
        let found = self
            .free_slots
            .range((stream, small, size, 0)..)
            .next()
            .filter(|((on, pool, _, _), _)| *on == stream && *pool == small)
            .map(|(key, segment)| (*key, *segment));
        let (uid, segment_index) = match found {
            Some((key, segment)) => {
                self.free_slots.remove(&key);
                (key.3, segment)
            }
            None => {
                let grown = segment_size(size).ok_or_else(|| Error::overflow(WHAT))?;
                self.reserved = self
                    .reserved
                    .checked_add(grown)
                    .ok_or_else(|| Error::overflow(WHAT))?;
                self.peak_reserved = self.peak_reserved.max(self.reserved);
                let uid = self.uid();
                self.segments.push(Segment {
                    slots: vec![Slot {
                        uid,
                        size: grown,
                        owner: None,
                    }],
                });
                self.small.push(small);
                self.stream.push(stream);
                (uid, self.segments.len() - 1)
            }
        };
        let rest_uid = self.uid();
        let Some(segment) = self.segments.get_mut(segment_index) else {
            return Ok(None);
        };
        let Some(index) = segment.slots.iter().position(|s| s.uid == uid) else {
            return Ok(None);
        };
        let slot = &mut segment.slots[index];
        let remaining = slot.size - size;
        slot.owner = Some(block);
        if splits(small, remaining) {
            slot.size = size;
            segment.slots.insert(
                index + 1,
                Slot {
                    uid: rest_uid,
                    size: remaining,
                    owner: None,
                },
            );
            self.free_slots
                .insert((stream, small, remaining, rest_uid), segment_index);
        }
        Ok(Some(segment_index))
    }

    /// Frees allocation `id`: each of its blocks as it was placed.
    pub(super) fn free(&mut self, id: usize) {
        let blocks = self
            .placed
            .get_mut(id)
            .map(std::mem::take)
            .unwrap_or_default();
        for placed in blocks {
            match placed.segment {
                Some(segment) => self.free_block(placed.block, segment),
                // A large block of the expandable segment.
                None if self.options.expandable_segments => {
                    if let Some(size) = round_size(placed.bytes).filter(|s| *s > SMALL_SIZE) {
                        self.large_live = self.large_live.saturating_sub(size);
                    }
                }
                None => {}
            }
        }
    }

    fn free_block(&mut self, block: usize, segment_index: usize) {
        let small = self.small.get(segment_index).copied().unwrap_or(false);
        let stream = self.stream.get(segment_index).copied().unwrap_or_default();
        let Some(segment) = self.segments.get_mut(segment_index) else {
            return;
        };
        let Some(mut index) = segment.slots.iter().position(|s| s.owner == Some(block)) else {
            return;
        };
        segment.slots[index].owner = None;
        // Merge with the free neighbours.
        if index + 1 < segment.slots.len() && segment.slots[index + 1].owner.is_none() {
            let next = segment.slots.remove(index + 1);
            self.free_slots
                .remove(&(stream, small, next.size, next.uid));
            segment.slots[index].size += next.size;
        }
        if index > 0 && segment.slots[index - 1].owner.is_none() {
            let current = segment.slots.remove(index);
            index -= 1;
            let previous = segment.slots[index];
            self.free_slots
                .remove(&(stream, small, previous.size, previous.uid));
            segment.slots[index].size += current.size;
        }
        let merged = segment.slots[index];
        self.free_slots
            .insert((stream, small, merged.size, merged.uid), segment_index);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_round_as_the_caching_allocator_does() {
        assert_eq!(round_size(1), Some(512));
        assert_eq!(round_size(513), Some(1024));
        assert_eq!(segment_size(1 << 20), Some(2 << 20));
        assert_eq!(segment_size((1 << 20) + 512), Some(20 << 20));
        assert_eq!(segment_size(11 << 20), Some(12 << 20));
        assert_eq!(segment_size((10 << 20) + 1), Some(12 << 20));
    }

    #[test]
    fn freed_blocks_are_reused_best_fit_and_reserved_never_shrinks() {
        let mut a = Allocator::new(AllocatorOptions::default(), u64::MAX);
        a.malloc(0, 100 << 20, Stream::Compute).unwrap();
        a.free(0);
        // Fits in the cached 100 MiB block: no new segment.
        a.malloc(1, 60 << 20, Stream::Compute).unwrap();
        a.malloc(2, 30 << 20, Stream::Compute).unwrap();
        assert_eq!(a.peak_reserved(), 100 << 20);
        // The 10 MiB left cannot hold 20 MiB: a new segment.
        a.malloc(3, 20 << 20, Stream::Compute).unwrap();
        assert_eq!(a.peak_reserved(), 120 << 20);
        // Small requests take a 2 MiB small-pool segment, shared.
        a.malloc(4, 1000, Stream::Compute).unwrap();
        a.malloc(5, 1000, Stream::Compute).unwrap();
        assert_eq!(a.peak_reserved(), (120 << 20) + (2 << 20));
    }

    #[test]
    fn fragmentation_reserves_more_than_is_allocated() {
        // Two 50 MiB blocks freed apart cannot hold one 80 MiB request.
        let mut a = Allocator::new(AllocatorOptions::default(), u64::MAX);
        a.malloc(0, 50 << 20, Stream::Compute).unwrap();
        a.malloc(1, 50 << 20, Stream::Compute).unwrap();
        a.free(0);
        a.free(1);
        a.malloc(2, 80 << 20, Stream::Compute).unwrap();
        assert_eq!(a.peak_reserved(), 180 << 20);
        let mut e = Allocator::new(
            AllocatorOptions {
                expandable_segments: true,
            },
            u64::MAX,
        );
        e.malloc(0, 50 << 20, Stream::Compute).unwrap();
        e.malloc(1, 50 << 20, Stream::Compute).unwrap();
        e.free(0);
        e.free(1);
        e.malloc(2, 80 << 20, Stream::Compute).unwrap();
        assert_eq!(e.peak_reserved(), 100 << 20);
    }
}
