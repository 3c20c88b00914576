//! torchtune's model code (`torchtune/modules/` at 0.6.1), measured on CPU
//! against its own Llama 3 (`tools/measure_implementations.py`, `tt-llama`
//! fixtures; saved tensors compared with transformers' `LlamaDecoderLayer`
//! through `saved_tensors_hooks`).
//!
//! * RMSNorm (`torchtune/modules/rms_norm.py`): `x_fp32 = x.float();
//!   x_normed = x_fp32 * torch.rsqrt(x_fp32.pow(2).mean(-1, keepdim=True) +
//!   eps); (x_normed * self.scale).type_as(x)`: the product with the scale
//!   saves the fp32 normalized tensor (transformers' `LlamaRMSNorm` saves it
//!   cast back to the compute dtype), as `Olmo2RMSNorm` and litgpt's norm
//!   do: priced as [`NormKind::Olmo2RmsNorm`].
//! * Grouped-query attention (`torchtune/modules/attention.py`,
//!   `MultiHeadAttention.forward`): "expand the key and value tensors to
//!   have the same shape as the query tensor" with `k.unsqueeze(2).expand(
//!   ...).flatten(1, 2)` before `scaled_dot_product_attention`: the
//!   flatten copies, so the kernel saves k and v at the query's heads
//!   (transformers passes `enable_gqa` and saves them at the key heads):
//!   priced with as many key heads as query heads.
//! * RoPE (`RotaryPositionalEmbeddings`) multiplies by its cache, which
//!   does not require grad: nothing per layer beyond the shared cache, as
//!   transformers. The loss of the recipes (`CEWithChunkedOutputLoss`, 8
//!   chunks upcast one at a time) is `--loss chunked:8`.

use crate::architecture::{Dimensions, NormKind};

/// The architecture with torchtune's module kinds.
pub fn dimensions(dims: &Dimensions) -> Dimensions {
    let mut dims = dims.clone();
    if dims.norm == NormKind::RmsNorm {
        dims.norm = NormKind::Olmo2RmsNorm;
    }
    dims.kv_heads = dims.heads;
    dims
}

/// What the rules change, for the report's notes.
pub fn notes() -> Vec<String> {
    vec!["implementation torchtune: its RMSNorm saves the fp32 normalized tensor and its attention expands keys and values to the query heads before SDPA (torchtune/modules/rms_norm.py, attention.py at 0.6.1); the rest priced as transformers' modules".to_string()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torchtune_saves_the_fp32_norm_and_expanded_keys() {
        let dims = Dimensions::generic(2, 256, 8, 4, 704, 4096).unwrap();
        let tt = dimensions(&dims);
        assert_eq!(tt.norm, NormKind::Olmo2RmsNorm);
        assert_eq!(tt.kv_heads, 8);
        assert_eq!(tt.heads, dims.heads);
    }
}
