//! Factored second moments: Adafactor (torch and transformers), CAME, AdaLomo.
//!
//! Instead of a second moment the shape of an [r, c] matrix, these keep a
//! row statistic (r values) and a column statistic (c values), so a matrix
//! costs r + c values instead of r x c. Tensors of one dimension are not
//! factored and keep the full statistic.

use super::state::widened_to_fp32;
use super::{OptionKind, OptionSpec, StateContext, StateTensor};
use crate::dtype::DType;
use crate::error::Result;

/// `beta1` of transformers' Adafactor: `none` keeps no first moment.
pub const BETA1: OptionSpec = OptionSpec {
    key: "beta1",
    kind: OptionKind::Float,
    default: "none",
    help: "first-moment decay; any value, 0 included, adds a full fp32 `exp_avg` (none: no first moment)",
};

/// The dimensions with the last one reduced away: `shape[:-1]`, the row
/// statistic of transformers' Adafactor and CAME.
fn rows(dims: &[u64]) -> Vec<u64> {
    dims[..dims.len() - 1].to_vec()
}

/// The dimensions with the second-to-last reduced away:
/// `shape[:-2] + shape[-1:]`, the column statistic.
fn columns(dims: &[u64]) -> Vec<u64> {
    let mut columns = dims.to_vec();
    columns.remove(dims.len() - 2);
    columns
}

/// torch's Adafactor: a tensor of two or more dimensions [..., r, c] keeps
/// `row_var` [..., r, 1] and `col_var` [..., 1, c]; any other tensor keeps a
/// full `variance`; all in the state dtype (`p.grad.new_zeros`), plus the 0-d
/// fp32 `step` on the host. No first moment.
///
/// Values per [..., r, c] tensor: prod(...) x (r + c).
/// Source: torch 2.x `torch/optim/_adafactor.py`, `Adafactor._init_group`.
pub fn adafactor_torch(context: &StateContext) -> Result<Vec<StateTensor>> {
    let dims = context.dims();
    let mut states = vec![context.counter("step")];
    if dims.len() >= 2 {
        let mut row = dims.to_vec();
        let mut column = dims.to_vec();
        row[dims.len() - 1] = 1;
        column[dims.len() - 2] = 1;
        states.push(context.tensor("row_var", row, context.dtype)?);
        states.push(context.tensor("col_var", column, context.dtype)?);
    } else {
        states.push(context.like_param("variance"));
    }
    Ok(states)
}

/// transformers' Adafactor: a tensor of two or more dimensions keeps
/// `exp_avg_sq_row` = shape[:-1] and `exp_avg_sq_col` = shape[:-2] +
/// shape[-1:] (no keepdim), any other tensor a full `exp_avg_sq`; `beta1` set
/// adds a full `exp_avg`; `RMS` is 0-d. All are created from `grad.float()`,
/// so they are fp32 for 16-bit states (and fp64 for fp64). `step` is a
/// python int: no tensor.
///
/// Values per [..., r, c] tensor: prod(...) x (r + c) + 1, plus r x c with beta1.
/// Source: transformers 5.x `transformers/optimization.py`, `Adafactor.step`.
pub fn adafactor_hf(context: &StateContext) -> Result<Vec<StateTensor>> {
    let dims = context.dims();
    let dtype = widened_to_fp32(context.dtype);
    let mut states = Vec::new();
    if context.options.float(BETA1.key)?.is_some() {
        states.push(context.like_param_in("exp_avg", dtype));
    }
    if dims.len() >= 2 {
        states.push(context.tensor("exp_avg_sq_row", rows(dims), dtype)?);
        states.push(context.tensor("exp_avg_sq_col", columns(dims), dtype)?);
    } else {
        states.push(context.like_param_in("exp_avg_sq", dtype));
    }
    // `state["RMS"] = self._rms(p_data_fp32)`: 0-d, in the fp32 copy's dtype.
    states.push(context.scalar("RMS", dtype));
    Ok(states)
}

/// CAME: transformers' Adafactor rule with a first moment always, and a second
/// pair of factored statistics for the instability (`exp_avg_res_row`,
/// `exp_avg_res_col`) on tensors of two or more dimensions. All from
/// `grad.float()` (fp32 for 16-bit states), except `RMS`, which is
/// `_rms(p.data)`: 0-d in the parameter's own dtype. `step` is a python int.
///
/// Values per [..., r, c] tensor: r x c + 2 x prod(...) x (r + c) + 1.
/// Source: came-pytorch 0.1.3 `came_pytorch/CAME.py`, `CAME.step`.
pub fn came(context: &StateContext) -> Result<Vec<StateTensor>> {
    let dims = context.dims();
    let dtype = widened_to_fp32(context.dtype);
    let mut states = vec![context.like_param_in("exp_avg", dtype)];
    if dims.len() >= 2 {
        states.push(context.tensor("exp_avg_sq_row", rows(dims), dtype)?);
        states.push(context.tensor("exp_avg_sq_col", columns(dims), dtype)?);
        states.push(context.tensor("exp_avg_res_row", rows(dims), dtype)?);
        states.push(context.tensor("exp_avg_res_col", columns(dims), dtype)?);
    } else {
        states.push(context.like_param_in("exp_avg_sq", dtype));
    }
    states.push(context.scalar("RMS", context.dtype));
    Ok(states)
}

/// AdaLomo: a 1-D tensor [n] keeps `exp_avg_sq` [n]; any other keeps
/// `exp_avg_sq_row` [shape[0]] and `exp_avg_sq_col` [shape[1]]; always fp32
/// (`torch.zeros(..., dtype=torch.float32)`), allocated in `__init__`. No
/// first moment, no step tensor.
///
/// The reference factors only the first two dimensions: for a tensor of three
/// or more dimensions `__init__` allocates [shape[0]] and [shape[1]] and the
/// first update then fails (`update.mean(dim=-1)` does not fit). trainmem
/// prices what `__init__` allocates; any working fix keeps O(rows + columns)
/// values, a negligible difference. A 0-d tensor, which the reference also
/// rejects, is priced as a vector of one.
///
/// Source: lomo-optim 0.1.1 `lomo_optim/adalomo.py`, `AdaLomo.__init__`.
pub fn adalomo(context: &StateContext) -> Result<Vec<StateTensor>> {
    Ok(match context.dims() {
        [] => vec![context.tensor("exp_avg_sq", vec![1], DType::Fp32)?],
        [n] => vec![context.tensor("exp_avg_sq", vec![*n], DType::Fp32)?],
        [rows, columns, ..] => vec![
            context.tensor("exp_avg_sq_row", vec![*rows], DType::Fp32)?,
            context.tensor("exp_avg_sq_col", vec![*columns], DType::Fp32)?,
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Role, Shape, Tensor};
    use crate::optimizer::{Optimizer, Options};

    fn states(
        rule: fn(&StateContext) -> Result<Vec<StateTensor>>,
        dims: &[u64],
        dtype: DType,
    ) -> Vec<(String, Vec<u64>, DType)> {
        let tensor = Tensor::new("w", Shape::new(dims.to_vec()).unwrap(), Role::Other);
        let options = Optimizer::find("adafactor-hf").unwrap().default_options();
        let context = StateContext {
            tensor: &tensor,
            dtype,
            options: &options,
        };
        rule(&context)
            .unwrap()
            .into_iter()
            .map(|s| (s.name.to_string(), s.shape.dims().to_vec(), s.dtype))
            .collect()
    }

    /// A [4096, 11008] bf16 matrix: torch keeps [4096, 1] and [1, 11008] in
    /// bf16; transformers keeps [4096] and [11008] in fp32, plus a 0-d RMS.
    #[test]
    fn a_matrix_keeps_rows_and_columns() {
        let torch = states(adafactor_torch, &[4096, 11008], DType::Bf16);
        assert_eq!(torch[1], ("row_var".into(), vec![4096, 1], DType::Bf16));
        assert_eq!(torch[2], ("col_var".into(), vec![1, 11008], DType::Bf16));
        let hf = states(adafactor_hf, &[4096, 11008], DType::Bf16);
        assert_eq!(
            hf,
            vec![
                ("exp_avg_sq_row".into(), vec![4096], DType::Fp32),
                ("exp_avg_sq_col".into(), vec![11008], DType::Fp32),
                ("RMS".into(), vec![], DType::Fp32),
            ]
        );
    }

    /// A [8, 64, 96] stack: rows [8, 64], columns [8, 96] (transformers); torch
    /// keeps [8, 64, 1] and [8, 1, 96].
    #[test]
    fn a_stack_factors_its_last_two_dimensions() {
        let hf = states(came, &[8, 64, 96], DType::Fp32);
        let shapes: Vec<Vec<u64>> = hf.iter().map(|s| s.1.clone()).collect();
        assert_eq!(
            shapes,
            vec![
                vec![8, 64, 96],
                vec![8, 64],
                vec![8, 96],
                vec![8, 64],
                vec![8, 96],
                vec![]
            ]
        );
        let torch = states(adafactor_torch, &[8, 64, 96], DType::Fp32);
        assert_eq!(torch[1].1, vec![8, 64, 1]);
        assert_eq!(torch[2].1, vec![8, 1, 96]);
    }

    #[test]
    fn a_vector_keeps_a_full_statistic() {
        assert_eq!(
            states(adafactor_torch, &[100], DType::Bf16)[1],
            ("variance".into(), vec![100], DType::Bf16)
        );
        assert_eq!(
            states(adafactor_hf, &[100], DType::Bf16)[0],
            ("exp_avg_sq".into(), vec![100], DType::Fp32)
        );
        assert_eq!(
            states(adalomo, &[100], DType::Bf16),
            vec![("exp_avg_sq".into(), vec![100], DType::Fp32)]
        );
    }

    /// AdaLomo factors the first two dimensions of a conv kernel [32, 16, 3, 3].
    #[test]
    fn adalomo_takes_the_first_two_dimensions() {
        let shapes: Vec<Vec<u64>> = states(adalomo, &[32, 16, 3, 3], DType::Bf16)
            .into_iter()
            .map(|s| s.1)
            .collect();
        assert_eq!(shapes, vec![vec![32], vec![16]]);
    }

    #[test]
    fn beta1_adds_a_first_moment() {
        let optimizer = Optimizer::find("adafactor-hf").unwrap();
        let options = Options::resolve(optimizer, &["beta1=0.9".to_string()]).unwrap();
        let tensor = Tensor::new("w", Shape::new(vec![300, 77]).unwrap(), Role::Other);
        let states = optimizer.states(&tensor, DType::Bf16, &options).unwrap();
        assert_eq!(states[0].name, "exp_avg");
        assert_eq!(states[0].dtype, DType::Fp32);
        assert_eq!(states[0].shape.dims(), &[300, 77]);
    }
}
