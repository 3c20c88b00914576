//! Low-rank gradient projection: GaLore.
//!
//! GaLore projects the gradient of an [m, n] matrix onto r directions and
//! keeps Adam's moments in that small space, plus the projection matrix.

use super::options::ADAMW_EMBEDDINGS;
use super::{OptionKind, OptionSpec, StateContext, StateTensor};
use crate::dtype::DType;
use crate::error::Result;

/// `rank` of GaLore.
pub const RANK_OPTION: OptionSpec = OptionSpec {
    key: "rank",
    kind: OptionKind::PositiveCount,
    default: "128",
    help: "projection rank r; moments of an [m, n] matrix shrink to [m, r] or [r, n]",
};

/// The options of GaLore-AdamW.
pub const GALORE_OPTIONS: &[OptionSpec] = &[RANK_OPTION, ADAMW_EMBEDDINGS];

/// GaLore-AdamW (`proj_type="std"`): a 2-D tensor [m, n] with r = min(rank,
/// m, n) keeps, if m >= n, `projector.ortho_matrix` [r, n] and `exp_avg`,
/// `exp_avg_sq` [m, r]; else `projector.ortho_matrix` [m, r] and moments
/// [r, n]; all in the state dtype. Every other tensor (and, with
/// `adamw_embeddings`, embeddings and output heads) keeps plain AdamW
/// moments of its shape. `step` is a python int: no tensor.
///
/// The projection is a slice of `torch.linalg.svd(..., full_matrices=False)`
/// run in fp32. With fp32 states the slice is a view that pins the whole
/// factor: Vh [min(m, n), n] when m >= n, U [m, min(m, n)] otherwise, that is
/// [k, k] with k = min(m, n). trainmem counts that real memory and reports
/// the state with the factor's shape; 16-bit states are cast back to a
/// compact copy of the slice.
///
/// The reference projects only 2-D tensors (a 3-D one fails in `project`),
/// so, as the GaLore README does, the rest takes plain AdamW.
///
/// Values per [m, n] matrix: 2 x r x max(m, n), plus r x min(m, n) for the
/// projection (16-bit) or min(m, n)^2 (fp32).
///
/// Source: galore-torch 1.0 `galore_torch/adamw.py` (`AdamW.step`) and
/// `galore_torch/galore_projector.py` (`project`, `get_orthogonal_matrix`).
pub fn galore_adamw(context: &StateContext) -> Result<Vec<StateTensor>> {
    let adamw_only = context.options.flag(ADAMW_EMBEDDINGS.key) && context.is_embedding_or_head();
    let (m, n) = match context.dims() {
        [m, n] if !adamw_only => (*m, *n),
        _ => {
            return Ok(vec![
                context.like_param("exp_avg"),
                context.like_param("exp_avg_sq"),
            ]);
        }
    };
    let r = context.options.count(RANK_OPTION.key)?.min(m).min(n);
    let (compact, moments) = if m >= n {
        ([r, n], [m, r])
    } else {
        ([m, r], [r, n])
    };
    let k = m.min(n);
    let ortho = if context.dtype == DType::Fp32 {
        [k, k]
    } else {
        compact
    };
    Ok(vec![
        context.tensor("projector.ortho_matrix", ortho.to_vec(), context.dtype)?,
        context.tensor("exp_avg", moments.to_vec(), context.dtype)?,
        context.tensor("exp_avg_sq", moments.to_vec(), context.dtype)?,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Role, Shape, Tensor};
    use crate::optimizer::{Optimizer, Options};

    fn shapes(dims: &[u64], dtype: DType, role: Role, options: &[&str]) -> Vec<Vec<u64>> {
        let optimizer = Optimizer::find("galore-adamw").unwrap();
        let pairs: Vec<String> = options.iter().map(|s| s.to_string()).collect();
        let options = Options::resolve(optimizer, &pairs).unwrap();
        let tensor = Tensor::new("w", Shape::new(dims.to_vec()).unwrap(), role);
        optimizer
            .states(&tensor, dtype, &options)
            .unwrap()
            .iter()
            .map(|s| s.shape.dims().to_vec())
            .collect()
    }

    /// [4096, 11008] at rank 128: m < n, so the projection is [4096, 128] and
    /// the moments [128, 11008]; in fp32 the projection pins U [4096, 4096].
    #[test]
    fn a_wide_matrix_projects_from_the_left() {
        assert_eq!(
            shapes(&[4096, 11008], DType::Bf16, Role::Mlp, &[]),
            vec![vec![4096, 128], vec![128, 11008], vec![128, 11008]]
        );
        assert_eq!(
            shapes(&[4096, 11008], DType::Fp32, Role::Mlp, &[])[0],
            vec![4096, 4096]
        );
    }

    /// [300, 77] at rank 4: m >= n, so [4, 77] and moments [300, 4].
    #[test]
    fn a_tall_matrix_projects_from_the_right() {
        assert_eq!(
            shapes(&[300, 77], DType::Bf16, Role::Mlp, &["rank=4"]),
            vec![vec![4, 77], vec![300, 4], vec![300, 4]]
        );
    }

    #[test]
    fn other_tensors_keep_adamw_moments() {
        assert_eq!(
            shapes(&[4, 64, 96], DType::Bf16, Role::Experts, &[]),
            vec![vec![4, 64, 96]; 2]
        );
        assert_eq!(
            shapes(
                &[1000, 64],
                DType::Bf16,
                Role::Embedding,
                &["adamw_embeddings=true"]
            ),
            vec![vec![1000, 64]; 2]
        );
    }
}
