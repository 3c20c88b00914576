//! torchtitan's model code (`torchtitan/models/llama3/model/model.py` at
//! 0.2.2), measured on CPU against its own Llama 3 and the step of its
//! `train.py` (`tools/measure_implementations.py`, `titan-*` fixtures; saved
//! tensors compared with transformers' `LlamaDecoderLayer` through
//! `saved_tensors_hooks`).
//!
//! * RMSNorm: `nn.RMSNorm` (`model.py` lines 382-383, 457), i.e.
//!   `torch.rms_norm`. `rms_norm_symint` (`aten/src/ATen/native/
//!   layer_norm.cpp`) calls `at::_fused_rms_norm`, which has a CUDA kernel
//!   and otherwise only its `CompositeImplicitAutograd` decomposition. On
//!   CPU that decomposition runs: `x.float()`, `x * rsqrt(mean(x²) + eps)`,
//!   then the product with the weight, which saves the fp32 normalized
//!   tensor (transformers' `LlamaRMSNorm` saves it cast back to the compute
//!   dtype): priced as [`NormKind::Olmo2RmsNorm`], measured. On CUDA the
//!   fused kernel's derivative (`tools/autograd/derivatives.yaml`,
//!   `_fused_rms_norm`) saves the input and the fp32 rstd alone:
//!   [`NormKind::FusedRmsNorm`], from source, not measured here. The fused
//!   kernel came with pytorch/pytorch#153666 (2025): older torch releases
//!   (those of torchtitan's published 2024 benchmarks) decompose on CUDA
//!   too and save as on CPU; trainmem prices the current kernel.
//! * RoPE (`apply_rotary_emb`, lines 141-169): `view_as_complex` of fp32
//!   copies of q and k, multiplied by the complex64 `freqs_cis` buffer; the
//!   product saves only the buffer (it does not require grad) and the
//!   rotated q and k cast back are what the sdpa kernel saves, as in
//!   transformers: nothing per layer beyond the shared buffer. The fp32
//!   copies are transient.
//! * Attention (lines 250-304): separate `wq`, `wk`, `wv` projections,
//!   `scaled_dot_product_attention(..., enable_gqa=True)` with the keys at
//!   their own heads, output `transpose(1, 2).contiguous()` into `wo`: what
//!   transformers' sdpa path saves. `FeedForward` (`w2(silu(w1(x)) * w3(x))`)
//!   saves what `LlamaMLP` saves.
//! * Loss (`torchtitan/components/loss.py` lines 20-27):
//!   `cross_entropy(pred.flatten(0, 1).float(), labels, reduction="sum")`
//!   on the whole logits upcast to fp32, labels already shifted by the data
//!   loader, `del pred` before backward (`train.py` lines 532-542): the
//!   memory of transformers' `ForCausalLMLoss` without the label shift, so
//!   priced as it.
//! * Per-op selective checkpointing (`selective_ac_option = "op"`,
//!   `torchtitan/distributed/activation_checkpoint.py` `_apply_op_sac`, and
//!   Llama 3's `_op_sac_save_list`, `models/llama3/infra/parallelize.py`
//!   lines 36-47): the list names the CUDA sdpa kernels (flash, efficient,
//!   cudnn, math, overrideable) but not
//!   `aten._scaled_dot_product_flash_attention_for_cpu`, so on CPU the
//!   attention's output and log-sum-exp are recomputed, not kept (see
//!   [`op_policy_saves_attention`]).

use crate::activation::Platform;
use crate::architecture::{Dimensions, NormKind};

/// The architecture with torchtitan's module kinds on `platform`.
pub fn dimensions(dims: &Dimensions, platform: Platform) -> Dimensions {
    let mut dims = dims.clone();
    if dims.norm == NormKind::RmsNorm {
        dims.norm = match platform {
            Platform::Cpu => NormKind::Olmo2RmsNorm,
            Platform::Cuda => NormKind::FusedRmsNorm,
        };
    }
    dims
}

/// Whether torchtitan's per-op policy saves the attention kernel that runs
/// on `platform`: its `_op_sac_save_list` lists the CUDA sdpa kernels only.
pub fn op_policy_saves_attention(platform: Platform) -> bool {
    platform == Platform::Cuda
}

/// What the rules change, for the report's notes.
pub fn notes(platform: Platform) -> Vec<String> {
    let norm = match platform {
        Platform::Cpu => {
            "nn.RMSNorm decomposes on CPU and saves its fp32 normalized tensor (measured)"
        }
        Platform::Cuda => {
            "nn.RMSNorm runs the fused CUDA kernel of current torch and saves its input and fp32 rstd (from torch's source, not measured; torch before pytorch#153666, 2025, saves the fp32 normalized tensor as on CPU)"
        }
    };
    let op = match platform {
        Platform::Cpu => {
            "; per-op checkpointing recomputes the CPU sdpa kernel (not in torchtitan's save list)"
        }
        Platform::Cuda => "",
    };
    vec![format!(
        "implementation torchtitan (torchtitan/models/llama3 at 0.2.2): {norm}{op}; RoPE, attention, MLP and the fp32 loss priced as transformers' modules, which save the same tensors"
    )]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torchtitan_norm_follows_the_platform_and_the_cpu_kernel_is_unlisted() {
        let dims = Dimensions::generic(2, 256, 8, 4, 704, 4096).unwrap();
        assert_eq!(
            dimensions(&dims, Platform::Cpu).norm,
            NormKind::Olmo2RmsNorm
        );
        assert_eq!(
            dimensions(&dims, Platform::Cuda).norm,
            NormKind::FusedRmsNorm
        );
        assert_eq!(dimensions(&dims, Platform::Cuda).kv_heads, dims.kv_heads);
        assert!(op_policy_saves_attention(Platform::Cuda));
        assert!(!op_policy_saves_attention(Platform::Cpu));
    }
}
