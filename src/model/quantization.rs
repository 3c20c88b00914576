//! Quantized frozen base weights, as bitsandbytes stores them.
//!
//! 4-bit (`bitsandbytes/functional.py`, `quantize_4bit`, blocksize 64): the
//! packed data holds two values a byte, ceil(n / 2) bytes, with one absmax per
//! block of 64 and a 16-entry fp32 code table. Without double quantization the
//! absmax is fp32; with it, the absmax is uint8 with an fp32 offset, an fp32
//! absmax per 256 blocks and a 256-entry fp32 code table of its own
//! (`QuantState.state2`). 8-bit (`Linear8bitLt`, `Int8Params`): int8 `CB` of
//! the weight's shape plus an fp32 scale `SCB` per output row.
//! `tests/fixtures/quantization/` records what bitsandbytes 0.50 stores.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::units::{Bytes, Count};

/// bitsandbytes' 4-bit block size (`blocksize=64`).
pub const BLOCK: u64 = 64;
/// Blocks per fp32 absmax of the double-quantized absmax (`blocksize=256`).
pub const NESTED_BLOCK: u64 = 256;
/// Entries of the 4-bit code table (NF4 or FP4), fp32.
pub const CODE_4BIT: u64 = 16;
/// Entries of the 8-bit dynamic map of the nested state, fp32.
pub const CODE_8BIT: u64 = 256;
/// Bytes of an fp32 value.
const FP32: u64 = 4;
/// torchao `NF4Tensor`'s values per int8 scaler (`to_nf4` `block_size=64`).
pub const TORCHAO_BLOCK: u64 = 64;
/// torchao `NF4Tensor`'s scalers per quantization factor
/// (`to_nf4` `scaler_block_size=256`).
pub const TORCHAO_SCALER_BLOCK: u64 = 256;
/// Bytes of the dtype of `NF4Tensor`'s small tables: the dtype of the
/// weight it replaced, bf16 in torchtune's QLoRA recipes (`dtype: bf16`).
const TORCHAO_TABLE_ELEMENT: u64 = 2;

/// How a frozen weight is quantized.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Quantization {
    /// 4-bit NormalFloat, with or without double quantization.
    Nf4 { double_quant: bool },
    /// 4-bit float, with or without double quantization.
    Fp4 { double_quant: bool },
    /// LLM.int8(): int8 weights with an fp32 scale per output row.
    Int8,
    /// torchao's `NF4Tensor` (torchtune's QLoRA, `to_nf4`): see
    /// [`Quantization::bytes`].
    #[serde(rename = "nf4-torchao")]
    Nf4Torchao,
    /// torchao 0.1's `NF4Tensor` (torchtune's QLoRA until May 2024, which
    /// pinned `torchao==0.1`): as [`Quantization::Nf4Torchao`], but its
    /// `quantization_factor` is a view of a materialized tensor with one
    /// value per scaler, and its setup quantizes whole weights at once
    /// (`crate::timeline::torchtune_setup`).
    #[serde(rename = "nf4-torchao-0.1")]
    Nf4Torchao01,
}

impl Quantization {
    /// Reads `nf4`, `fp4`, `int8`, `nf4-torchao` or `nf4-torchao-0.1`.
    pub fn parse(name: &str, double_quant: bool) -> Result<Quantization> {
        match name.trim().to_ascii_lowercase().as_str() {
            "nf4" => Ok(Quantization::Nf4 { double_quant }),
            "fp4" => Ok(Quantization::Fp4 { double_quant }),
            "int8" | "8bit" => Ok(Quantization::Int8),
            "nf4-torchao" | "torchao-nf4" => Ok(Quantization::Nf4Torchao),
            "nf4-torchao-0.1" => Ok(Quantization::Nf4Torchao01),
            _ => Err(Error::UnknownName {
                kind: "quantization",
                name: name.to_string(),
                suggestion: None,
                accepted: "nf4, fp4, int8, nf4-torchao, nf4-torchao-0.1".to_string(),
            }),
        }
    }

    /// The bytes a weight of `elements` values in `rows` output rows takes.
    pub fn bytes(self, elements: Count, rows: u64) -> Result<Bytes> {
        let n = elements.0;
        let overflow = || Error::overflow("a quantized weight's bytes");
        let total = match self {
            Quantization::Nf4 { double_quant } | Quantization::Fp4 { double_quant } => {
                let blocks = n.div_ceil(BLOCK);
                let data = n.div_ceil(2);
                let code = CODE_4BIT * FP32;
                let absmax = if double_quant {
                    // uint8 absmax + fp32 offset + fp32 absmax per 256 blocks + 256-entry map.
                    blocks + FP32 + blocks.div_ceil(NESTED_BLOCK) * FP32 + CODE_8BIT * FP32
                } else {
                    blocks.checked_mul(FP32).ok_or_else(overflow)?
                };
                data.checked_add(absmax).and_then(|b| b.checked_add(code))
            }
            Quantization::Int8 => rows
                .checked_mul(FP32)
                .and_then(|scales| n.checked_add(scales)),
            // torchao `nf4_tensor.py` `NF4Tensor.from_tensor`: `quantized_data`
            // uint8, two values a byte; `quantized_scalers` int8, one per block
            // of 64; `quantization_factor`, one per 256 scalers, `scaler_mean`
            // and the 16-entry `nf4` table, in the weight's dtype.
            Quantization::Nf4Torchao => {
                let element = TORCHAO_TABLE_ELEMENT;
                let scalers = n.div_ceil(TORCHAO_BLOCK);
                let factors = scalers.div_ceil(TORCHAO_SCALER_BLOCK);
                factors
                    .checked_add(1 + CODE_4BIT)
                    .and_then(|small| small.checked_mul(element))
                    .and_then(|small| small.checked_add(scalers))
                    .and_then(|b| b.checked_add(n.div_ceil(2)))
            }
            // torchao 0.1 `nf4tensor.py` `double_quantize_scalers` (lines
            // 292-349): `quantization_factor = 256 / (2 * scaler_absmax)` of
            // the expanded absmax, one value per scaler, then
            // `quantization_factor[:, 0]`, a view that keeps all of them:
            // one bf16 factor per block of 64 (measured:
            // `tools/torchtune_setup_tables.py`).
            Quantization::Nf4Torchao01 => {
                let element = TORCHAO_TABLE_ELEMENT;
                let scalers = n.div_ceil(TORCHAO_BLOCK);
                scalers
                    .checked_mul(element)
                    .and_then(|factors| factors.checked_add((1 + CODE_4BIT) * element))
                    .and_then(|b| b.checked_add(scalers))
                    .and_then(|b| b.checked_add(n.div_ceil(2)))
            }
        };
        total.map(Bytes).ok_or_else(overflow)
    }

    /// The part of [`Quantization::bytes`] that is not the weight's
    /// parameter data, and so stays whole on every rank when FSDP or ZeRO-3
    /// shards the parameters: bitsandbytes keeps a 4-bit weight's
    /// `QuantState` (absmax, code tables, the nested state of double
    /// quantization) as an attribute of the `Params4bit` and of its module,
    /// not as a parameter, and restores it on the flattened shard
    /// (`fix_4bit_weight_quant_state_from_module`, "the quant state got lost
    /// when the parameter got converted. This happens for example for fsdp",
    /// `bitsandbytes/nn/modules.py` lines 487-501, 0.50.2); LLM.int8's `SCB`
    /// is likewise an attribute of `Int8Params`. torchao's `NF4Tensor` is
    /// one tensor subclass, sharded whole: none.
    pub fn unsharded_state_bytes(self, elements: Count, rows: u64) -> Result<Bytes> {
        let data = match self {
            Quantization::Nf4 { .. } | Quantization::Fp4 { .. } => elements.0.div_ceil(2),
            Quantization::Int8 => elements.0,
            Quantization::Nf4Torchao | Quantization::Nf4Torchao01 => return Ok(Bytes::ZERO),
        };
        let total = self.bytes(elements, rows)?;
        Ok(Bytes(total.0.saturating_sub(data)))
    }

    /// `nf4 with double quantization`.
    pub fn describe(self) -> String {
        match self {
            Quantization::Nf4 { double_quant: true } => "nf4 with double quantization".to_string(),
            Quantization::Nf4 {
                double_quant: false,
            } => "nf4".to_string(),
            Quantization::Fp4 { double_quant: true } => "fp4 with double quantization".to_string(),
            Quantization::Fp4 {
                double_quant: false,
            } => "fp4".to_string(),
            Quantization::Int8 => "int8 (LLM.int8)".to_string(),
            Quantization::Nf4Torchao => {
                "nf4 in an NF4Tensor (int8 scalers per 64 values)".to_string()
            }
            Quantization::Nf4Torchao01 => {
                "nf4 in a torchao 0.1 NF4Tensor (int8 scalers and bf16 factors per 64 values)"
                    .to_string()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The quantization state FSDP does not shard: everything but the
    /// packed data (the q_proj [256, 256] keeps 34,900 - 32,768 bytes).
    #[test]
    fn the_state_outside_the_parameter_data() {
        let nf4 = Quantization::Nf4 { double_quant: true };
        assert_eq!(
            nf4.unsharded_state_bytes(Count(65_536), 256).unwrap(),
            Bytes(34_900 - 32_768)
        );
        assert_eq!(
            Quantization::Int8
                .unsharded_state_bytes(Count(65_536), 256)
                .unwrap(),
            Bytes(256 * 4)
        );
        assert_eq!(
            Quantization::Nf4Torchao
                .unsharded_state_bytes(Count(65_536), 256)
                .unwrap(),
            Bytes::ZERO
        );
    }

    /// The fixture's q_proj [256, 256] with nf4 and double quantization: 34,900 bytes.
    #[test]
    fn four_bit_with_double_quantization() {
        let nf4 = Quantization::Nf4 { double_quant: true };
        assert_eq!(nf4.bytes(Count(65_536), 256).unwrap(), Bytes(34_900));
        assert_eq!(nf4.bytes(Count(16_384), 64).unwrap(), Bytes(9_544));
    }

    /// torchao 0.18 `to_nf4` of a bf16 [256, 256] weight: 32768 data bytes,
    /// 1024 int8 scalers, 4 bf16 factors, the bf16 mean and 16-entry table.
    #[test]
    fn torchao_nf4_stores_int8_scalers_and_small_tables_in_the_weight_dtype() {
        let nf4 = Quantization::Nf4Torchao;
        assert_eq!(
            nf4.bytes(Count(65_536), 256).unwrap(),
            Bytes(32_768 + 1_024 + 2 * (4 + 1 + 16))
        );
    }

    #[test]
    fn eight_bit_keeps_a_scale_per_row() {
        assert_eq!(
            Quantization::Int8.bytes(Count(65_536), 256).unwrap(),
            Bytes(65_536 + 1_024)
        );
    }
}
