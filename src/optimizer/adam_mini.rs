//! Adam-mini: one second moment per block instead of per value.
//!
//! Adam-mini partitions parameters by their NAME (a lower-cased substring
//! match) and keeps Adam's full first moment but a single second-moment
//! value per block: per attention head for queries and keys, per row
//! (output neuron, token) for embeddings, values, projections and MLPs, per
//! tensor for everything else; bias tensors keep plain Adam.

use super::{OptionKind, OptionSpec, StateContext, StateTensor};
use crate::error::{Error, Result};

/// `dim` of Adam-mini: the hidden size, for the query/key head blocks.
pub const DIM_OPTION: OptionSpec = OptionSpec {
    key: "dim",
    kind: OptionKind::PositiveCount,
    default: "2048",
    help: "hidden size; query/key blocks hold dim x dim / n_heads values",
};

/// `n_heads` of Adam-mini.
pub const N_HEADS_OPTION: OptionSpec = OptionSpec {
    key: "n_heads",
    kind: OptionKind::PositiveCount,
    default: "32",
    help: "attention heads; query/key blocks hold dim x dim / n_heads values",
};

/// The options of Adam-mini.
pub const ADAM_MINI_OPTIONS: &[OptionSpec] = &[DIM_OPTION, N_HEADS_OPTION];

/// Names that keep plain Adam (`adam_block_names`).
const ADAM_BLOCK_NAMES: &[&str] = &["bias"];
/// Query and key names: one second moment per head (`wqk_names`).
const QUERY_KEY_NAMES: &[&str] = &["k_proj", "q_proj", "wq", "wk", "query", "key"];
/// Names with one second moment per row: `embd_names`, `output_names`,
/// `wv_names`, `mlp_names`, `attn_proj_names`.
const PER_ROW_NAMES: &[&str] = &[
    "embed",
    "embd",
    "wte",
    "lm_head",
    "output",
    "final_layer",
    "v_proj",
    "wv",
    "value",
    "feed_forward",
    "linear",
    "mlp",
    "o_proj",
    "wo",
    "attn.proj",
];

/// Adam-mini 1.1.1, by the lower-cased tensor name, checked in this order:
/// - contains `bias`: `m` and `v` of the parameter's shape (Adam);
/// - a query/key name: `m` of the parameter's shape (viewed [-1, h] with h =
///   dim x dim / n_heads) and `vmean` [n / h, 1];
/// - an embedding, output, value, attention-projection or MLP name: `m` and
///   `vmean` [shape[0], 1];
/// - anything else: `m` and a 0-d `vmean`.
///
/// All in the state dtype; `step` is a python int.
///
/// Generalizations where the reference fails: per-row names on a tensor of
/// three or more dimensions (the update views it as [shape[0], 1]) keep
/// `vmean` [shape[0], 1], what the reference allocates before failing; a
/// query/key tensor whose size is not a multiple of h (the reference's view
/// fails) keeps ceil(n / h) head values; a 0-d tensor keeps a 0-d `vmean`.
///
/// Values per tensor of n values: 2 x n (bias), n + blocks otherwise.
/// Source: adam-mini 1.1.1 `adam_mini/adam_mini.py`, `Adam_mini.step`.
pub fn adam_mini(context: &StateContext) -> Result<Vec<StateTensor>> {
    let name = context.tensor.name.to_ascii_lowercase();
    let matches = |keywords: &[&str]| keywords.iter().any(|k| name.contains(k));
    let mut states = vec![context.like_param("m")];
    if matches(ADAM_BLOCK_NAMES) {
        states.push(context.like_param("v"));
    } else if matches(QUERY_KEY_NAMES) {
        let head = head_values(context)?;
        states.push(context.tensor(
            "vmean",
            vec![context.elements().div_ceil(head), 1],
            context.dtype,
        )?);
    } else if let (true, Some(&rows)) = (matches(PER_ROW_NAMES), context.dims().first()) {
        states.push(context.tensor("vmean", vec![rows, 1], context.dtype)?);
    } else {
        states.push(context.scalar("vmean", context.dtype));
    }
    Ok(states)
}

/// Values per query/key head block: `head_numel = dim * dim // n_heads`.
fn head_values(context: &StateContext) -> Result<u64> {
    let dim = context.options.positive_count(DIM_OPTION.key)?;
    let heads = context.options.positive_count(N_HEADS_OPTION.key)?;
    let square = dim
        .checked_mul(dim)
        .ok_or_else(|| Error::overflow("Adam-mini's dim x dim"))?;
    match square / heads {
        0 => Err(Error::InvalidValue {
            what: "optimizer option",
            value: format!("n_heads={heads}"),
            reason: format!("more heads than dim x dim = {square} values"),
        }),
        head => Ok(head),
    }
}

#[cfg(test)]
mod tests {
    use crate::dtype::DType;
    use crate::model::{Role, Shape, Tensor};
    use crate::optimizer::{Optimizer, Options};

    fn states(name: &str, dims: &[u64]) -> Vec<(String, Vec<u64>)> {
        let optimizer = Optimizer::find("adam-mini").unwrap();
        let options = Options::resolve(
            optimizer,
            &["dim=4096".to_string(), "n_heads=32".to_string()],
        )
        .unwrap();
        let tensor = Tensor::new(name, Shape::new(dims.to_vec()).unwrap(), Role::Other);
        optimizer
            .states(&tensor, DType::Bf16, &options)
            .unwrap()
            .into_iter()
            .map(|s| (s.name.to_string(), s.shape.dims().to_vec()))
            .collect()
    }

    /// Llama-2-7B: a q_proj [4096, 4096] has 32 heads of 4096 x 4096 / 32
    /// values; an mlp [11008, 4096] one value per row; a norm one in all.
    #[test]
    fn blocks_follow_the_names() {
        let q = states("model.layers.0.self_attn.q_proj.weight", &[4096, 4096]);
        assert_eq!(q[1], ("vmean".to_string(), vec![32, 1]));
        let mlp = states("model.layers.0.mlp.up_proj.weight", &[11008, 4096]);
        assert_eq!(mlp[1], ("vmean".to_string(), vec![11008, 1]));
        let norm = states("model.layers.0.input_layernorm.weight", &[4096]);
        assert_eq!(norm[1], ("vmean".to_string(), vec![]));
        let bias = states("model.layers.0.self_attn.q_proj.bias", &[4096]);
        assert_eq!(bias[1], ("v".to_string(), vec![4096]));
    }
}
