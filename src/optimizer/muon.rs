//! Muon: orthogonalized momentum for matrices, AdamW for the rest.

use super::options::ADAMW_EMBEDDINGS;
use super::{StateContext, StateTensor};
use crate::error::Result;

/// trainmem's `muon` is the common recipe "Muon for matrices, AdamW for the
/// rest": a tensor of two or more dimensions keeps one `momentum_buffer` of
/// its shape in the state dtype (no step tensor); any other tensor (and, with
/// `adamw_embeddings`, embeddings and output heads) keeps torch AdamW's
/// `step` (0-d fp32, host unless fused or capturable), `exp_avg` and
/// `exp_avg_sq`.
///
/// `torch.optim.Muon` itself refuses every parameter that is not 2-D, so the
/// fixture measures its 2-D tensors alone and matches this rule exactly on
/// them. A tensor of three or more dimensions (a conv kernel, a stack of
/// experts) is what the reference Muon of Keller Jordan flattens to a matrix
/// (`g.view(len(g), -1)`): its momentum keeps the parameter's shape.
///
/// Values per matrix of n values: n (Muon); per other tensor: 2 x n (AdamW).
/// Source: torch 2.x `torch/optim/_muon.py` (`Muon._init_group`) and
/// `torch/optim/adamw.py`.
pub fn muon(context: &StateContext) -> Result<Vec<StateTensor>> {
    let adamw_only = context.options.flag(ADAMW_EMBEDDINGS.key) && context.is_embedding_or_head();
    if context.dims().len() >= 2 && !adamw_only {
        return Ok(vec![context.like_param("momentum_buffer")]);
    }
    Ok(vec![
        context.counter("step"),
        context.like_param("exp_avg"),
        context.like_param("exp_avg_sq"),
    ])
}

#[cfg(test)]
mod tests {
    use crate::dtype::DType;
    use crate::model::{Role, Shape, Tensor};
    use crate::optimizer::{Optimizer, Options};

    fn names(dims: &[u64], role: Role, options: &[&str]) -> Vec<String> {
        let optimizer = Optimizer::find("muon").unwrap();
        let pairs: Vec<String> = options.iter().map(|s| s.to_string()).collect();
        let options = Options::resolve(optimizer, &pairs).unwrap();
        let tensor = Tensor::new("w", Shape::new(dims.to_vec()).unwrap(), role);
        optimizer
            .states(&tensor, DType::Bf16, &options)
            .unwrap()
            .iter()
            .map(|s| s.name.to_string())
            .collect()
    }

    #[test]
    fn matrices_take_momentum_and_the_rest_adamw() {
        assert_eq!(
            names(&[256, 512], Role::Attention, &[]),
            ["momentum_buffer"]
        );
        assert_eq!(
            names(&[32, 16, 3, 3], Role::Other, &[]),
            ["momentum_buffer"]
        );
        assert_eq!(
            names(&[4096], Role::Norm, &[]),
            ["step", "exp_avg", "exp_avg_sq"]
        );
        assert_eq!(
            names(&[1000, 64], Role::Embedding, &[]),
            ["momentum_buffer"]
        );
        assert_eq!(
            names(&[1000, 64], Role::Embedding, &["adamw_embeddings=true"]),
            ["step", "exp_avg", "exp_avg_sq"]
        );
    }
}
