//! What the attention core saves: the kernel's copies of q, k and v, the
//! probabilities or log-sum-exp, and its output.
//!
//! Per layer and rank, with P bytes per element, T = B·S tokens, a query
//! heads and kv key/value heads on the rank, query/key head size dq and
//! value head size dv, and X = B·a·S² attention scores.

use super::Attention;
use super::kernels::{DropoutMask, Kernels, SdpaDispatch};
use super::norms::FP32;
use super::parallel::Rank;
use super::tally::Tally;
use crate::architecture::{Dimensions, EagerSoftmax, Positions, QkvLayout};
use crate::dtype::DType;
use crate::error::Result;
use crate::units::Bytes;

/// The largest head size the flash kernels take (torch `sdp_utils`
/// `check_head_dim_size_flash`).
const FLASH_MAX_HEAD_DIM: u64 = 256;

/// Flash kernels pad the head size to a multiple of this (torch
/// `pad_last_dim<8>` in `scaled_dot_product_flash_attention`,
/// flash-attention's `mha_fwd`).
const FLASH_HEAD_DIM_MULTIPLE: u64 = 8;

/// The memory-efficient kernel pads its log-sum-exp rows to this
/// (`kAlignLSE` in torch's `mem_eff_attention`).
const LOG_SUM_EXP_ALIGNMENT: u64 = 32;

/// The attention kernel that runs, which decides what is saved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// transformers' `eager_attention_forward`.
    Eager,
    /// torch's `_scaled_dot_product_attention_math`.
    Math,
    /// A flash kernel (CPU's, CUDA's or flash-attention 2), which pads the
    /// head size to a multiple of `head_dim_multiple`.
    Flash { head_dim_multiple: u64 },
    /// CUDA's memory-efficient kernel.
    MemoryEfficient,
}

impl Kernel {
    /// The kernel for `attention` on these kernels, for this model and dtype.
    ///
    /// * sdpa on CPU (`sdp_utils_cpp`): the flash kernel, unless attention
    ///   dropout is active or q/k and v head sizes differ (DeepSeek): math.
    /// * sdpa on CUDA (`sdp_utils.cpp`): flash for fp16/bf16 when the head
    ///   sizes are equal and at most 256 (grouped-query heads are fine:
    ///   transformers passes `enable_gqa`); otherwise memory-efficient
    ///   when every query head has its own key head and the head sizes are
    ///   multiples of 8 (16-bit) or 4 (fp32); otherwise math.
    /// * flash-attention 2: its own kernel, which saves like sdpa's flash.
    pub fn resolve(
        attention: Attention,
        kernels: &Kernels,
        dims: &Dimensions,
        dtype: DType,
        dropout: bool,
    ) -> Kernel {
        let (query, value) = head_dims(dims);
        let cuda_flash = Kernel::Flash {
            head_dim_multiple: FLASH_HEAD_DIM_MULTIPLE,
        };
        match attention {
            Attention::Eager => Kernel::Eager,
            Attention::Flash => cuda_flash,
            Attention::Sdpa => match kernels.sdpa {
                SdpaDispatch::Math => Kernel::Math,
                SdpaDispatch::Flash => Kernel::Flash {
                    head_dim_multiple: 1,
                },
                SdpaDispatch::Cpu if dropout || query != value => Kernel::Math,
                SdpaDispatch::Cpu => Kernel::Flash {
                    head_dim_multiple: 1,
                },
                SdpaDispatch::Cuda => {
                    let half = matches!(dtype, DType::Bf16 | DType::Fp16);
                    let alignment = if half { 8 } else { 4 };
                    if half && query == value && query <= FLASH_MAX_HEAD_DIM {
                        cuda_flash
                    } else if dims.kv_heads == dims.heads
                        && query.is_multiple_of(alignment)
                        && value.is_multiple_of(alignment)
                    {
                        Kernel::MemoryEfficient
                    } else {
                        Kernel::Math
                    }
                }
            },
        }
    }

    /// A short description for the report's notes.
    pub fn describe(self) -> &'static str {
        match self {
            Kernel::Eager => {
                "eager attention saves the B x a x S x S probabilities (fp32 and a cast copy)"
            }
            Kernel::Math => {
                "sdpa's math kernel saves fp32 copies of q, k, v and the fp32 B x a x S x S probabilities"
            }
            Kernel::Flash { .. } => {
                "the flash kernel saves q, k, v, its output and an fp32 log-sum-exp (no S x S tensor)"
            }
            Kernel::MemoryEfficient => {
                "sdpa's memory-efficient kernel saves q, k, v, its output and an fp32 log-sum-exp"
            }
        }
    }
}

/// What the attention core saves in one layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Core {
    /// The kernel's saved tensors.
    pub saved: Bytes,
    /// Whether its output, counted in `saved`, is also the output
    /// projection's input (one storage); otherwise the projection saves a
    /// contiguous copy of its own.
    pub output_shared: bool,
}

/// The gates that change the core: attention dropout and soft-capping.
#[derive(Debug, Clone, Copy)]
pub struct CoreOptions {
    /// Attention dropout active.
    pub dropout: bool,
    /// Gemma 2's `attn_logit_softcapping` (eager only).
    pub softcap: bool,
    /// The saved dropout mask's kind.
    pub mask: DropoutMask,
}

/// What the kernel saves.
///
/// * Eager (transformers `eager_attention_forward`): q (`matmul`), k and v
///   repeated to a heads (`repeat_kv`), P·T·a·(2dq + dv); the
///   probabilities: fp32 `softmax` 4X plus the cast copy P·X the second
///   `matmul` saves (GPT-2: one P·X softmax); with dropout the softmax,
///   the mask (`MulBackward0.other`) and the dropped probabilities
///   instead of the cast copy; with soft-capping the `tanh` output P·X.
///   With B = 1 `matmul` saves v without copying, a view keeping its
///   whole projection alive (fused q/k/v, DeepSeek's `kv_b_proj` output).
/// * Math (`_scaled_dot_product_attention_math`): q, k, v upcast to fp32,
///   4·T·a·(2dq + dv), the fp32 probabilities 4X; with dropout an fp32
///   mask and the dropped probabilities.
/// * Flash (`_scaled_dot_product_flash_attention[_for_cpu]`,
///   `flash_attn_func`): q P·T·a·dq, k and v at kv heads (no repeat),
///   output P·T·a·dv, fp32 log-sum-exp [B, a, S]; head sizes padded to
///   the kernel's multiple (a padded v is a copy); a v of another head
///   size is padded to dq (transformers does so for flash-attention). The
///   output takes q's layout: per head after rotary's `torch.cat` (GPT-NeoX,
///   Phi, Phi-3), when the output projection saves a contiguous copy.
/// * Memory-efficient (`_efficient_attention_forward`): q, k, v, output,
///   fp32 log-sum-exp [B, a, ceil(S / 32) x 32].
///
/// Dropout inside flash and memory-efficient kernels keeps only a Philox
/// seed and offset (16 bytes, not counted).
pub fn core(rank: &Rank, dims: &Dimensions, kernel: Kernel, options: CoreOptions) -> Result<Core> {
    let Rank {
        element: p,
        batch: b,
        seq: s,
        tokens: t,
        heads: a,
        kv_heads: kv,
        ..
    } = *rank;
    let (dq, dv) = head_dims(dims);
    let rest = view_rest(rank, dims);
    let mut saved = Tally::new();
    let output_shared = match kernel {
        Kernel::Eager => {
            saved.tensor(&[p, t, a, dq])?;
            saved.tensor(&[p, t, a, dq])?;
            saved.tensor(&[p, t, a, dv])?;
            saved.tensor_if(b == 1 && kv == a, &[p, t, rest])?;
            saved.add(probabilities(rank, dims.softmax, options)?)?;
            false
        }
        Kernel::Math => {
            saved.tensor(&[FP32, t, a, 2 * dq + dv])?;
            saved.tensor(&[FP32, b, a, s, s])?;
            if options.dropout {
                saved.tensor(&[options.mask.bytes(FP32), b, a, s, s])?;
                saved.tensor(&[FP32, b, a, s, s])?;
            }
            false
        }
        Kernel::Flash { head_dim_multiple } => {
            let padded_query = dq.next_multiple_of(head_dim_multiple);
            let padded_value = if dq == dv {
                dv.next_multiple_of(head_dim_multiple)
            } else {
                padded_query
            };
            let value_copied = padded_value != dv;
            saved.tensor(&[p, t, a, padded_query])?;
            saved.tensor(&[p, t, kv, padded_query])?;
            saved.tensor(&[p, t, kv, padded_value])?;
            saved.tensor_if(!value_copied, &[p, t, rest])?;
            saved.tensor(&[p, t, a, padded_value])?;
            saved.tensor(&[FP32, b, a, s])?;
            !value_copied && !queries_per_head(dims)
        }
        Kernel::MemoryEfficient => {
            saved.tensor(&[p, t, a, 2 * dq + dv])?;
            saved.tensor(&[p, t, rest])?;
            saved.tensor(&[p, t, a, dv])?;
            saved.tensor(&[FP32, b, a, s.next_multiple_of(LOG_SUM_EXP_ALIGNMENT)])?;
            true
        }
    };
    Ok(Core {
        saved: saved.bytes(),
        output_shared,
    })
}

/// Eager attention's probabilities, X = B·a·S² scores:
/// `softmax(dtype=float32)` 4X and `.to(dtype)` P·X (no copy in fp32;
/// GPT-2: `softmax` in the model dtype, P·X); with dropout the softmax,
/// the mask and the dropped P·X; soft-capping adds `tanh`'s P·X.
fn probabilities(rank: &Rank, softmax: EagerSoftmax, options: CoreOptions) -> Result<Bytes> {
    let Rank {
        element: p,
        batch: b,
        seq: s,
        heads: a,
        ..
    } = *rank;
    // CUDA autocast runs `softmax` in fp32, and the model casts back.
    let softmax_bytes = match softmax {
        EagerSoftmax::Fp32WithCast => FP32,
        EagerSoftmax::ModelDtype if rank.cuda_autocast => FP32,
        EagerSoftmax::ModelDtype => p,
    };
    let mut saved = Tally::new();
    saved.tensor(&[softmax_bytes, b, a, s, s])?;
    if options.dropout {
        saved.tensor(&[options.mask.bytes(p), b, a, s, s])?;
        saved.tensor(&[p, b, a, s, s])?;
    } else {
        saved.tensor_if(softmax_bytes != p, &[p, b, a, s, s])?;
    }
    saved.tensor_if(options.softcap, &[p, b, a, s, s])?;
    Ok(saved.bytes())
}

/// What selective recomputation keeps of the core: its inputs q, k, v as
/// the layer computed them (kv heads, model dtype), and the projection v
/// is a view of. Everything the kernel saves is rebuilt in backward.
pub fn checkpoint_inputs(rank: &Rank, dims: &Dimensions) -> Result<Bytes> {
    let Rank {
        element: p,
        tokens: t,
        heads: a,
        kv_heads: kv,
        ..
    } = *rank;
    let (dq, dv) = head_dims(dims);
    let mut kept = Tally::new();
    kept.tensor(&[p, t, a, dq])?;
    kept.tensor(&[p, t, kv, dq + dv])?;
    kept.tensor(&[p, t, view_rest(rank, dims)])?;
    Ok(kept.bytes())
}

/// Elements of the core's output per token on the rank (the output
/// projection's input): a·dv.
pub fn output_width(rank: &Rank, dims: &Dimensions) -> u64 {
    rank.heads * head_dims(dims).1
}

/// Whether q and k reach the kernel as new tensors laid out per head
/// (rotary's `torch.cat`), whose layout the flash kernel's output takes.
fn queries_per_head(dims: &Dimensions) -> bool {
    matches!(
        dims.positions,
        Positions::Rotary {
            concatenated: true,
            ..
        }
    )
}

/// The query/key and value head sizes.
pub fn head_dims(dims: &Dimensions) -> (u64, u64) {
    match dims.qkv {
        QkvLayout::Latent(latent) => (
            latent.qk_nope_head_dim + latent.qk_rope_head_dim,
            latent.v_head_dim,
        ),
        QkvLayout::Separate | QkvLayout::Fused => (dims.head_dim, dims.head_dim),
    }
}

/// Elements per token of the projection v is a view of, besides v itself:
/// q and k of a fused projection, (a + kv)·d; DeepSeek's `k_nope` beside v
/// in the `kv_b_proj` output, a·d_nope; none for separate projections.
fn view_rest(rank: &Rank, dims: &Dimensions) -> u64 {
    match dims.qkv {
        QkvLayout::Separate => 0,
        QkvLayout::Fused => (rank.heads + rank.kv_heads) * dims.head_dim,
        QkvLayout::Latent(latent) => rank.heads * latent.qk_nope_head_dim,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::activation::Platform;

    fn llama(kv_heads: u64) -> Dimensions {
        Dimensions::generic(2, 64, 4, kv_heads, 176, 1000).unwrap()
    }

    #[test]
    fn cuda_dispatch_follows_dtype_heads_and_head_size() {
        let cuda = Platform::Cuda.kernels();
        let flash = Kernel::Flash {
            head_dim_multiple: 8,
        };
        let pick =
            |dims: &Dimensions, dtype| Kernel::resolve(Attention::Sdpa, &cuda, dims, dtype, true);
        assert_eq!(pick(&llama(4), DType::Bf16), flash);
        assert_eq!(pick(&llama(4), DType::Fp32), Kernel::MemoryEfficient);
        assert_eq!(pick(&llama(2), DType::Fp32), Kernel::Math);
        let mut wide = llama(4);
        wide.head_dim = 512;
        assert_eq!(pick(&wide, DType::Bf16), Kernel::MemoryEfficient);
        let cpu = Platform::Cpu.kernels();
        let pick =
            |dropout| Kernel::resolve(Attention::Sdpa, &cpu, &llama(4), DType::Bf16, dropout);
        assert_eq!(
            pick(false),
            Kernel::Flash {
                head_dim_multiple: 1
            }
        );
        assert_eq!(pick(true), Kernel::Math);
        assert_eq!(
            Kernel::resolve(Attention::Flash, &cpu, &llama(4), DType::Bf16, true),
            flash
        );
    }

    #[test]
    fn flash_pads_odd_head_sizes_and_then_copies_the_output() {
        let mut dims = llama(4);
        dims.head_dim = 20;
        let rank = Rank {
            element: 2,
            residual: 2,
            projected: 2,
            normed: 2,
            cuda_autocast: false,
            batch: 2,
            seq: 64,
            tokens: 128,
            sequence_tokens: 128,
            hidden: 64,
            heads: 4,
            kv_heads: 4,
            intermediate: 176,
            expert_intermediate: 0,
            shared_intermediate: 0,
            vocab: 1000,
            tensor_parallel: 1,
        };
        let options = CoreOptions {
            dropout: false,
            softcap: false,
            mask: DropoutMask::Bool,
        };
        let exact = core(
            &rank,
            &dims,
            Kernel::Flash {
                head_dim_multiple: 1,
            },
            options,
        )
        .unwrap();
        assert!(exact.output_shared);
        assert_eq!(exact.saved, Bytes(4 * 2 * 128 * 4 * 20 + 4 * 2 * 4 * 64));
        let padded = core(
            &rank,
            &dims,
            Kernel::Flash {
                head_dim_multiple: 8,
            },
            options,
        )
        .unwrap();
        assert!(!padded.output_shared);
        assert_eq!(padded.saved, Bytes(4 * 2 * 128 * 4 * 24 + 4 * 2 * 4 * 64));
        let efficient = core(&rank, &dims, Kernel::MemoryEfficient, options).unwrap();
        assert_eq!(
            efficient.saved,
            Bytes(4 * 2 * 128 * 4 * 20 + 4 * 2 * 4 * 64)
        );
    }
}
