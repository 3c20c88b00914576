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
    /// 8-bit exponent-only float (MX block scales).
    Fp8E8m0,
    /// 64-bit signed integer.
    Int64,
    /// 64-bit unsigned integer.
    Uint64,
    /// 32-bit unsigned integer.
    Uint32,
    /// 16-bit unsigned integer.
    Uint16,
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
            DType::Fp64 | DType::Int64 | DType::Uint64 => 64,
            DType::Fp32 | DType::Int32 | DType::Uint32 => 32,
            DType::Fp16 | DType::Bf16 | DType::Int16 | DType::Uint16 => 16,
            DType::Fp8E4m3
            | DType::Fp8E5m2
            | DType::Fp8E8m0
            | DType::Int8
            | DType::Uint8
            | DType::Bool => 8,
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
            DType::Fp8E8m0 => "fp8-e8m0",
            DType::Int64 => "int64",
            DType::Uint64 => "uint64",
            DType::Uint32 => "uint32",
            DType::Uint16 => "uint16",
            DType::Int32 => "int32",
            DType::Int16 => "int16",
            DType::Int8 => "int8",
            DType::Uint8 => "uint8",
            DType::Bool => "bool",
        }
    }
}

/// Names accepted by `--grad-dtype` and friends, with their dtype.
const NAMES: &[(&str, DType)] = &[
    ("fp32", DType::Fp32),
    ("float32", DType::Fp32),
    ("bf16", DType::Bf16),
    ("bfloat16", DType::Bf16),
    ("fp16", DType::Fp16),
    ("float16", DType::Fp16),
    ("fp64", DType::Fp64),
    ("fp8-e4m3", DType::Fp8E4m3),
    ("fp8-e5m2", DType::Fp8E5m2),
    ("int8", DType::Int8),
    ("uint8", DType::Uint8),
];

impl DType {
    /// The dtype called `name` on the command line: `fp32`, `bf16`, `fp16`, ...
    pub fn from_name(name: &str) -> Result<DType> {
        let wanted = name.trim().to_ascii_lowercase();
        NAMES
            .iter()
            .find(|(n, _)| *n == wanted)
            .map(|(_, dtype)| *dtype)
            .ok_or_else(|| Error::UnknownName {
                kind: "dtype",
                name: name.to_string(),
                suggestion: None,
                accepted: "fp32, bf16, fp16, fp64, fp8-e4m3, fp8-e5m2, int8, uint8".to_string(),
            })
    }

    /// The dtype of a safetensors header (`"F32"`, `"BF16"`, `"F8_E4M3"`, ...),
    /// or `None` for a name the format does not define.
    pub fn from_safetensors(name: &str) -> Option<DType> {
        Some(match name {
            "F64" => DType::Fp64,
            "F32" => DType::Fp32,
            "F16" => DType::Fp16,
            "BF16" => DType::Bf16,
            "F8_E4M3" => DType::Fp8E4m3,
            "F8_E5M2" => DType::Fp8E5m2,
            "F8_E8M0" => DType::Fp8E8m0,
            "I64" => DType::Int64,
            "U64" => DType::Uint64,
            "I32" => DType::Int32,
            "U32" => DType::Uint32,
            "I16" => DType::Int16,
            "U16" => DType::Uint16,
            "I8" => DType::Int8,
            "U8" => DType::Uint8,
            "BOOL" => DType::Bool,
            _ => return None,
        })
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
