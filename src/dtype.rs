//! Element types of tensors, with their exact size in bits.

use std::fmt;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::units::{Bytes, Count};

/// The element type of a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// 64-bit float.
    Fp64,
    /// 32-bit float (IEEE single precision).
    Fp32,
    /// 16-bit float (IEEE half precision).
    Fp16,
    /// 16-bit brain float.
    Bf16,
    /// 8-bit float, 4 exponent bits.
    Fp8E4m3,
    /// 8-bit float, 5 exponent bits.
    Fp8E5m2,
    /// 64-bit signed integer.
    Int64,
    /// 32-bit signed integer.
    Int32,
    /// 16-bit signed integer.
    Int16,
    /// 8-bit signed integer.
    Int8,
    /// 8-bit unsigned integer (bitsandbytes' quantized states).
    Uint8,
    /// A boolean, one byte each.
    Bool,
}

impl DType {
    /// Bits per element.
    pub const fn bits(self) -> u64 {
        match self {
            DType::Fp64 | DType::Int64 => 64,
            DType::Fp32 | DType::Int32 => 32,
            DType::Fp16 | DType::Bf16 | DType::Int16 => 16,
            DType::Fp8E4m3 | DType::Fp8E5m2 | DType::Int8 | DType::Uint8 | DType::Bool => 8,
        }
    }

    /// Bytes per element.
    pub const fn bytes(self) -> u64 {
        self.bits() / 8
    }

    /// The bytes of `elements` elements of this type.
    pub fn size_of(self, elements: Count) -> Result<Bytes> {
        elements
            .0
            .checked_mul(self.bytes())
            .map(Bytes)
            .ok_or_else(|| {
                Error::overflow(format!(
                    "the bytes of {} {self} elements",
                    elements.grouped()
                ))
            })
    }

    /// The short lowercase name: `fp32`, `bf16`.
    pub const fn name(self) -> &'static str {
        match self {
            DType::Fp64 => "fp64",
            DType::Fp32 => "fp32",
            DType::Fp16 => "fp16",
            DType::Bf16 => "bf16",
            DType::Fp8E4m3 => "fp8-e4m3",
            DType::Fp8E5m2 => "fp8-e5m2",
            DType::Int64 => "int64",
            DType::Int32 => "int32",
            DType::Int16 => "int16",
            DType::Int8 => "int8",
            DType::Uint8 => "uint8",
            DType::Bool => "bool",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
