//! Arbitrary bytes through the safetensors header parser: it must return an
//! error, never panic, overflow or allocate past its cap.
//!
//! The first 8 bytes of the input are the file's length (so lengths unlike
//! the bytes given are tried too); the rest are the file's first bytes. The
//! same bytes also go through the index parser.

#![no_main]

use libfuzzer_sys::fuzz_target;
use trainmem::checkpoint::{parse_header, parse_index};

fuzz_target!(|data: &[u8]| {
    let _ = parse_header(data, data.len() as u64);
    if let Some((length, file)) = data.split_first_chunk::<8>() {
        let _ = parse_header(file, u64::from_le_bytes(*length));
    }
    let _ = parse_index(data);
});
