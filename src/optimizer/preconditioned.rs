//! Kronecker-factored preconditioners: Shampoo and SOAP.
//!
//! Both keep, for dimension i of a tensor, square matrices [d_i, d_i]: the
//! cost grows with the square of each dimension, not with the element count.

use super::options::spells;
use super::{OptionKind, OptionSpec, StateContext, StateTensor};
use crate::dtype::DType;
use crate::error::Result;

/// SOAP's default largest preconditioned dimension (`max_precond_dim`).
pub const SOAP_MAX_PRECOND_DIM: u64 = 10_000;

/// `max_precond_dim` of SOAP.
pub const MAX_PRECOND_DIM_OPTION: OptionSpec = OptionSpec {
    key: "max_precond_dim",
    kind: OptionKind::Count,
    default: "10000",
    help: "dimensions larger than this get no GG/Q matrices",
};

/// `precondition_1d` of SOAP.
pub const PRECONDITION_1D_OPTION: OptionSpec = OptionSpec {
    key: "precondition_1d",
    kind: OptionKind::Flag,
    default: "false",
    help: "also give 1-D tensors a [d, d] GG and Q",
};

/// `fp32_states` of SOAP: the reference implementation's dtype rule.
pub const FP32_STATES_OPTION: OptionSpec = OptionSpec {
    key: "fp32_states",
    kind: OptionKind::Flag,
    default: "false",
    help: "keep every state in fp32 whatever the parameter dtype, as the reference SOAP (nikhilvyas/SOAP) does",
};

const _: () = assert!(spells(MAX_PRECOND_DIM_OPTION.default, SOAP_MAX_PRECOND_DIM));

/// The options of SOAP.
pub const SOAP_OPTIONS: &[OptionSpec] = &[
    MAX_PRECOND_DIM_OPTION,
    PRECONDITION_1D_OPTION,
    FP32_STATES_OPTION,
];

/// Shampoo as pytorch-optimizer implements it (textbook Shampoo: no blocking,
/// no cap on dimensions): for every dimension d_i of a tensor, 1-D included,
/// `pre_cond_i` and `inv_pre_cond_i` of [d_i, d_i], plus `momentum_buffer` of
/// the parameter's shape (step() stores the preconditioned gradient there
/// even with momentum=0), all in the state dtype. `step` lives in the param
/// group as a python int.
///
/// Values per tensor: n + 2 x sum_i d_i^2. A 1-D tensor of n values keeps two
/// n x n matrices, which is why a flat `--params` is meaningless here.
/// Source: pytorch-optimizer 4.1 `pytorch_optimizer/optimizer/shampoo.py`,
/// `Shampoo.init_group` and `Shampoo.step`.
pub fn shampoo(context: &StateContext) -> Result<Vec<StateTensor>> {
    let mut states = Vec::new();
    for (i, &d) in context.dims().iter().enumerate() {
        states.push(context.tensor(format!("pre_cond_{i}"), vec![d, d], context.dtype)?);
        states.push(context.tensor(format!("inv_pre_cond_{i}"), vec![d, d], context.dtype)?);
    }
    states.push(context.like_param("momentum_buffer"));
    Ok(states)
}

/// SOAP: `exp_avg` and `exp_avg_sq` of the parameter's shape; for a tensor of
/// two or more dimensions, `GG[i]` and `Q[i]` of [d_i, d_i] for every
/// dimension d_i <= `max_precond_dim` (an empty list beyond); a 1-D tensor
/// gets them only with `precondition_1d` (and d <= `max_precond_dim`).
///
/// Dtype: pytorch-optimizer (the default, measured) keeps everything in the
/// gradient's dtype (the state dtype); the reference SOAP works on
/// `p.grad.float()` and keeps everything in fp32 (`fp32_states=true`).
/// `step` is a python int in both. `merge_dims=True` (off in both by
/// default) is not modelled.
///
/// Values per tensor: 2 x n + 2 x sum_{d_i <= max} d_i^2.
/// Source: pytorch-optimizer 4.1 `pytorch_optimizer/optimizer/soap.py`
/// (`init_group`, `init_pre_conditioner`, `get_orthogonal_matrix`); the
/// reference nikhilvyas/SOAP `soap.py` at 01df676 (`init_preconditioner`).
pub fn soap(context: &StateContext) -> Result<Vec<StateTensor>> {
    let options = context.options;
    let dtype = if options.flag(FP32_STATES_OPTION.key) {
        DType::Fp32
    } else {
        context.dtype
    };
    let max_dim = options.count(MAX_PRECOND_DIM_OPTION.key)?;
    let mut states = vec![
        context.like_param_in("exp_avg", dtype),
        context.like_param_in("exp_avg_sq", dtype),
    ];
    let dims = context.dims();
    let preconditioned: Vec<(usize, u64)> = match dims {
        [d] if options.flag(PRECONDITION_1D_OPTION.key) && *d <= max_dim => vec![(0, *d)],
        [_] => Vec::new(),
        _ => dims
            .iter()
            .copied()
            .enumerate()
            .filter(|(_, d)| *d <= max_dim)
            .collect(),
    };
    for (i, d) in preconditioned {
        states.push(context.tensor(format!("GG[{i}]"), vec![d, d], dtype)?);
        states.push(context.tensor(format!("Q[{i}]"), vec![d, d], dtype)?);
    }
    Ok(states)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Role, Shape, Tensor};
    use crate::optimizer::{Optimizer, Options};

    fn values(optimizer: &str, dims: &[u64], options: &[&str]) -> u64 {
        let optimizer = Optimizer::find(optimizer).unwrap();
        let pairs: Vec<String> = options.iter().map(|s| s.to_string()).collect();
        let options = Options::resolve(optimizer, &pairs).unwrap();
        let tensor = Tensor::new("w", Shape::new(dims.to_vec()).unwrap(), Role::Other);
        optimizer
            .states(&tensor, DType::Fp32, &options)
            .unwrap()
            .iter()
            .map(|s| s.shape.elements().0)
            .sum()
    }

    /// Shampoo on [256, 512]: 131,072 + 2 x (256^2 + 512^2) = 786,432.
    #[test]
    fn shampoo_keeps_two_square_matrices_per_dimension() {
        assert_eq!(
            values("shampoo", &[256, 512], &[]),
            131_072 + 2 * (65_536 + 262_144)
        );
        // A vector of 100: 100 + 2 x 100^2.
        assert_eq!(values("shampoo", &[100], &[]), 100 + 20_000);
    }

    /// SOAP on [1000, 64]: 2 x 64,000 + 2 x (1000^2 + 64^2); a dimension over
    /// the cap gets nothing.
    #[test]
    fn soap_preconditions_dimensions_up_to_the_cap() {
        assert_eq!(
            values("soap", &[1000, 64], &[]),
            128_000 + 2 * (1_000_000 + 4_096)
        );
        assert_eq!(
            values("soap", &[1000, 64], &["max_precond_dim=500"]),
            128_000 + 2 * 4_096
        );
        assert_eq!(values("soap", &[100], &[]), 200);
        assert_eq!(
            values("soap", &[100], &["precondition_1d=true"]),
            200 + 2 * 10_000
        );
    }

    #[test]
    fn reference_soap_keeps_fp32_states() {
        let optimizer = Optimizer::find("soap").unwrap();
        let options = Options::resolve(optimizer, &["fp32_states=true".to_string()]).unwrap();
        let tensor = Tensor::new("w", Shape::new(vec![16, 16]).unwrap(), Role::Other);
        let states = optimizer.states(&tensor, DType::Bf16, &options).unwrap();
        assert!(states.iter().all(|s| s.dtype == DType::Fp32));
    }
}
