//! Low-rank gradient projection: GaLore.
//!
//! GaLore projects the gradient of an [m, n] matrix onto r directions and
//! keeps Adam's moments in that small space, plus the projection matrix.

use super::options::ADAMW_EMBEDDINGS;
use super::quantized::{MIN_8BIT_SIZE_OPTION, bnb_two_states};
use super::{OptionKind, OptionSpec, StateContext, StateTensor};
use crate::dtype::DType;
use crate::error::Result;
use crate::model::{Shape, Tensor};

/// `rank` of GaLore.
pub const RANK_OPTION: OptionSpec = OptionSpec {
    key: "rank",
    kind: OptionKind::PositiveCount,
    default: "128",
    help: "projection rank r; moments of an [m, n] matrix shrink to [m, r] or [r, n]",
};

/// The options of GaLore-AdamW.
pub const GALORE_OPTIONS: &[OptionSpec] = &[RANK_OPTION, ADAMW_EMBEDDINGS];

/// `max_unorm` as GaLoreAdamW8bit sets it: `AdamW8bit.__init__` passes its
/// `percentile_clipping` (100) positionally into `Optimizer2State`'s
/// `max_unorm` slot, so every tensor gets an fp32 `unorm_vec` [1].
pub const GALORE_8BIT_MAX_UNORM: OptionSpec = OptionSpec {
    key: "max_unorm",
    kind: OptionKind::Float,
    default: "100",
    help: "GaLoreAdamW8bit passes percentile_clipping (100) here; above 0 adds an fp32 `unorm_vec` [1] per tensor",
};

/// The options of GaLore-AdamW 8-bit.
pub const GALORE_8BIT_OPTIONS: &[OptionSpec] = &[
    RANK_OPTION,
    ADAMW_EMBEDDINGS,
    MIN_8BIT_SIZE_OPTION,
    GALORE_8BIT_MAX_UNORM,
];

/// The projection of a GaLore matrix: `(ortho_matrix, moments)` shapes, or
/// `None` for a tensor GaLore leaves whole (not 2-D, or an embedding or head
/// with `adamw_embeddings`).
///
/// `proj_type="std"`, r = min(rank, m, n): if m >= n, `ortho_matrix` [r, n]
/// and moments [m, r]; else [m, r] and [r, n]. In fp32 the ortho matrix is a
/// slice view that pins the whole SVD factor [k, k], k = min(m, n).
fn projection(context: &StateContext) -> Result<Option<([u64; 2], [u64; 2])>> {
    let adamw_only = context.options.flag(ADAMW_EMBEDDINGS.key) && context.is_embedding_or_head();
    let (m, n) = match context.dims() {
        [m, n] if !adamw_only => (*m, *n),
        _ => return Ok(None),
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
    Ok(Some((ortho, moments)))
}

/// GaLore-AdamW 8-bit (galore-torch 1.0 `galore_torch/adamw8bit.py`,
/// `AdamW8bit.step`): bitsandbytes' `Optimizer2State` whose `init_state`
/// runs after `p.data` was replaced by a clone of the projected gradient, so
/// bitsandbytes' 8-bit rule (`quantized::bnb_two_states`: uint8 `state1`,
/// `state2` plus fp32 `absmax` per 256 values, or fp32 states under
/// `min_8bit_size` values) applies to the projected shape [m, r] or [r, n];
/// `projector.ortho_matrix` as in [`galore_adamw`]; the other tensors get
/// the 8-bit rule on their own shape. Every tensor also gets `unorm_vec`
/// fp32 [1] ([`GALORE_8BIT_MAX_UNORM`]). The optimizer-wide quantization
/// maps are `quantized::bnb_qmaps`.
///
/// Bytes per large [m, n] matrix (m < n, 16-bit params): 2 x (r n + 4
/// ceil(r n / 256)) + 2 m r + 4.
pub fn galore_adamw_8bit(context: &StateContext) -> Result<Vec<StateTensor>> {
    let Some((ortho, moments)) = projection(context)? else {
        return bnb_two_states(context);
    };
    let projected = Tensor::new(
        context.tensor.name.clone(),
        Shape::new(moments.to_vec())?,
        context.tensor.role,
    );
    let mut states =
        vec![context.tensor("projector.ortho_matrix", ortho.to_vec(), context.dtype)?];
    states.extend(bnb_two_states(&StateContext {
        tensor: &projected,
        ..*context
    })?);
    Ok(states)
}

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
    let Some((ortho, moments)) = projection(context)? else {
        return Ok(vec![
            context.like_param("exp_avg"),
            context.like_param("exp_avg_sq"),
        ]);
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

    /// GaLore-AdamW 8-bit on [4096, 11008] bf16 at rank 128: the projection
    /// [4096, 128] bf16, uint8 moments of the projected [128, 11008] with an
    /// fp32 absmax per 256 values, and `unorm_vec` [1]:
    /// 2 x 4096 x 128 + 2 x (1,409,024 + 4 x 5504) + 4 bytes.
    #[test]
    fn galore_8bit_quantizes_the_projected_moments() {
        let optimizer = Optimizer::find("galore-adamw-8bit").unwrap();
        let tensor = Tensor::new("w", Shape::new(vec![4096, 11008]).unwrap(), Role::Mlp);
        let states = optimizer
            .states(&tensor, DType::Bf16, &optimizer.default_options())
            .unwrap();
        let bytes: u64 = states
            .iter()
            .map(|s| s.dtype.size_of(s.shape.elements()).unwrap().0)
            .sum();
        assert_eq!(bytes, 2 * 4096 * 128 + 2 * (128 * 11008 + 4 * 5504) + 4);
        // Under min_8bit_size values after projection: fp32 moments of the projected shape.
        let small = Tensor::new("w", Shape::new(vec![16, 200]).unwrap(), Role::Mlp);
        let names: Vec<_> = optimizer
            .states(&small, DType::Bf16, &optimizer.default_options())
            .unwrap()
            .iter()
            .map(|s| (s.name.to_string(), s.shape.dims().to_vec(), s.dtype))
            .collect();
        assert_eq!(names[1], ("state1".to_string(), vec![16, 200], DType::Fp32));
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
