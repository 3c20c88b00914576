//! Exact quantities: byte sizes and parameter counts, their parsing and printing.
//!
//! Both are integers with checked arithmetic; floats appear only in ratios and
//! on screen. GB means 10^9 bytes and GiB 2^30, as the SI and IEC say.

mod bytes;
mod count;
mod decimal;

pub use bytes::{ByteUnit, Bytes, UnitSystem, split_unit};
pub use count::Count;
pub use decimal::{format_float, format_percent, format_ratio, format_two_decimals};
