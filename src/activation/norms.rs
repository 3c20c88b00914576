//! What a norm saves for backward, for `rows` vectors of `width`.

use super::kernels::StatsDtype;
use super::tally::Tally;
use crate::architecture::NormKind;
use crate::error::Result;
use crate::units::Bytes;

/// Bytes of an fp32 element.
pub const FP32: u64 = 4;

/// A norm over `rows` vectors of `width` elements of `element` bytes.
#[derive(Debug, Clone, Copy)]
pub struct NormSite {
    /// The norm module.
    pub kind: NormKind,
    /// Elements per vector.
    pub width: u64,
    /// Vectors.
    pub rows: u64,
    /// Bytes per element of the input.
    pub element: u64,
    /// Whether the norm's weight is frozen (its gradient operand is not saved).
    pub frozen: bool,
}

/// The bytes one norm saves.
///
/// * `RmsNorm` (transformers `LlamaRMSNorm.forward`: `x = x.to(float32)`,
///   `x * rsqrt(x.pow(2).mean(-1) + eps)`, `weight * x.to(dtype)`):
///   the fp32 input (`PowBackward0.self`, `MulBackward0.self`) 4·rows·n,
///   the fp32 rsqrt [rows, 1] (`RsqrtBackward0.result`) 4·rows, and the
///   normalized tensor cast back (`MulBackward0.other`, for the weight's
///   gradient) P·rows·n: 4·rows·n + 4·rows + P·rows·n.
/// * `GemmaRmsNorm` (`GemmaRMSNorm`: `norm(x.float()) * (1 + weight.float())`,
///   cast back after): fp32 input, rsqrt, `1 + weight` [n] and the fp32
///   normalized tensor: 4·rows·n + 4·rows + 4·n + 4·rows·n.
/// * `Olmo2RmsNorm` (`Olmo2RMSNorm`: `(weight * norm(x.float())).to(dtype)`):
///   4·rows·n + 4·rows + 4·rows·n.
/// * `LayerNorm` (`native_layer_norm`): the input P·rows·n, mean and rstd
///   [rows] each in the statistics dtype (CPU: the input's; CUDA: fp32).
/// * `FusedRmsNorm` (`nn.RMSNorm` on CUDA: `rms_norm_symint` calls
///   `at::_fused_rms_norm`, which has a CUDA kernel; its derivative in
///   `tools/autograd/derivatives.yaml` saves `input`, `weight` and
///   `result1`, the rstd [rows, 1] in the fp32 accumulator dtype):
///   P·rows·n + 4·rows, frozen or not (the input's gradient reads both).
///
/// A frozen weight drops the normalized tensor (the last term of the RMS
/// norms); LayerNorm needs its input for the input's gradient anyway.
pub fn saved(site: NormSite, stats: StatsDtype) -> Result<Bytes> {
    let NormSite {
        kind,
        width,
        rows,
        element,
        frozen,
    } = site;
    let mut tally = Tally::new();
    match kind {
        NormKind::RmsNorm | NormKind::GemmaRmsNorm | NormKind::Olmo2RmsNorm => {
            tally.tensor(&[FP32, rows, width])?;
            tally.tensor(&[FP32, rows])?;
            tally.tensor_if(kind == NormKind::GemmaRmsNorm, &[FP32, width])?;
            let normalized = if kind == NormKind::RmsNorm {
                element
            } else {
                FP32
            };
            tally.tensor_if(!frozen, &[normalized, rows, width])?;
        }
        NormKind::LayerNorm => {
            tally.tensor(&[element, rows, width])?;
            tally.add(statistics(rows, element, stats)?)?;
        }
        NormKind::FusedRmsNorm => {
            tally.tensor(&[element, rows, width])?;
            tally.tensor(&[FP32, rows])?;
        }
    }
    Ok(tally.bytes())
}

/// LayerNorm's mean and rstd alone: what a second LayerNorm over an input
/// already saved adds (GPT-NeoX's parallel residual).
pub fn statistics(rows: u64, element: u64, stats: StatsDtype) -> Result<Bytes> {
    let mut tally = Tally::new();
    tally.tensor(&[2, stats.bytes(element), rows])?;
    Ok(tally.bytes())
}

/// Whether the norm computes in fp32 from a copy of its input (so that in
/// fp32 the input itself, a view perhaps, is saved instead).
pub fn upcasts(kind: NormKind) -> bool {
    !matches!(kind, NormKind::LayerNorm | NormKind::FusedRmsNorm)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(kind: NormKind, frozen: bool) -> NormSite {
        NormSite {
            kind,
            width: 64,
            rows: 128,
            element: 2,
            frozen,
        }
    }

    #[test]
    fn llama_rms_norm_saves_fp32_input_rstd_and_the_cast() {
        // Measured: 32768 (fp32 input) + 512 (rsqrt) + 16384 (bf16 normalized).
        let bytes = saved(site(NormKind::RmsNorm, false), StatsDtype::Input).unwrap();
        assert_eq!(bytes, Bytes(32768 + 512 + 16384));
        let frozen = saved(site(NormKind::RmsNorm, true), StatsDtype::Input).unwrap();
        assert_eq!(frozen, Bytes(32768 + 512));
    }

    #[test]
    fn gemma_olmo2_and_layer_norm() {
        assert_eq!(
            saved(site(NormKind::GemmaRmsNorm, false), StatsDtype::Input).unwrap(),
            Bytes(32768 + 512 + 256 + 32768)
        );
        assert_eq!(
            saved(site(NormKind::Olmo2RmsNorm, false), StatsDtype::Input).unwrap(),
            Bytes(32768 + 512 + 32768)
        );
        let cpu = saved(site(NormKind::LayerNorm, false), StatsDtype::Input).unwrap();
        let cuda = saved(site(NormKind::LayerNorm, false), StatsDtype::Fp32).unwrap();
        assert_eq!(cpu, Bytes(16384 + 2 * 2 * 128));
        assert_eq!(cuda, Bytes(16384 + 2 * 4 * 128));
    }

    #[test]
    fn the_fused_rms_norm_saves_its_input_and_fp32_rstd_frozen_or_not() {
        // bf16 input 2·128·64 and the fp32 rstd [128, 1]; no fp32 copy.
        for frozen in [false, true] {
            assert_eq!(
                saved(site(NormKind::FusedRmsNorm, frozen), StatsDtype::Input).unwrap(),
                Bytes(16384 + 512)
            );
        }
        assert!(!upcasts(NormKind::FusedRmsNorm));
        assert!(upcasts(NormKind::Olmo2RmsNorm));
    }
}
