//! litgpt's own LoRA module (`litgpt/lora.py` 0.5.13): the fused q/k/v
//! adapter `LoRAQKVLinear`, which saves more than peft's per-projection
//! adapters when it pads (see [`FusedQkv`]). Its `LoRALinear` (the output
//! projection, the MLP's linears, the head) is `dropout(x) @ lora_A.T @
//! lora_B.T * scaling` added to the frozen output (lines 165-172): the
//! tensors peft's adapter saves, priced as peft's.

use crate::activation::Workload;
use crate::activation::lora::FusedQkv;
use crate::architecture::Dimensions;

/// The fused q/k/v adapter of `dims` under `workload`'s LoRA targets.
///
/// `enable_lora` is `(lora_query, lora_key, lora_value)`
/// (`CausalSelfAttention.__init__`, line 541), read here from the
/// targeted `q_proj`, `k_proj`, `v_proj`; `qkv_shapes` (lines 236-243)
/// gives each enabled part's width: `head_size · n_head` for the queries,
/// `head_size · n_query_groups` for keys and values (the key heads before
/// litgpt's attention repeats them). An architecture whose q/k/v are one
/// linear in transformers too adapts all three or none: nothing to pad.
pub fn fused_qkv(dims: &Dimensions, workload: &Workload) -> FusedQkv {
    let names = &dims.linears.attention_input;
    let enabled: Vec<bool> = names
        .iter()
        .map(|name| workload.adapted.iter().any(|adapted| adapted == name))
        .collect();
    let padded_width = match enabled.as_slice() {
        [q, k, v] if !(*q && *k && *v) => {
            let query = dims.heads.saturating_mul(dims.head_dim);
            let key = dims.kv_heads.saturating_mul(dims.head_dim);
            u64::from(*q) * query + (u64::from(*k) + u64::from(*v)) * key
        }
        _ => 0,
    };
    FusedQkv { padded_width }
}

/// What the rules assume.
pub fn notes() -> String {
    "litgpt's LoRA (litgpt/lora.py 0.5.13): LoRAQKVLinear drops its input once for all enabled q/k/v parts and, when not all three are enabled, zero_pad's index_copy_ saves lora_B's T x w output and an int64 index; its adapters compute in the model's dtype".to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(targets: &[&str]) -> Workload {
        Workload {
            adapted: targets.iter().map(|t| t.to_string()).collect(),
            lora_rank: 8,
            frozen_base: true,
            ..Workload::new(1, 512)
        }
    }

    #[test]
    fn query_and_value_pad_to_their_widths() {
        // 8 heads of 32, 4 key heads: q 256 wide, k and v 128 each.
        let dims = Dimensions::generic(4, 256, 8, 4, 704, 4096).unwrap();
        let qv = fused_qkv(&dims, &workload(&["q_proj", "v_proj"]));
        assert_eq!(qv.padded_width, 256 + 128);
        assert_eq!(
            qv.padded(512, 2).unwrap().0,
            2 * 512 * 384 + 8 * 384,
            "lora_B's output and the index"
        );
        let all = fused_qkv(&dims, &workload(&["q_proj", "k_proj", "v_proj"]));
        assert_eq!(all.padded(512, 2).unwrap().0, 0, "zero_pad returns x");
        let k = fused_qkv(&dims, &workload(&["k_proj"]));
        assert_eq!(k.padded_width, 128);
    }
}
