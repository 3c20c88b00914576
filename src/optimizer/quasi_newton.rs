//! Quasi-Newton state: L-BFGS.
//!
//! L-BFGS works on the whole trainable vector at once: its state is global,
//! a few flat vectors plus a history of curvature pairs.

use super::{GlobalContext, OptionKind, OptionSpec, StateTensor};
use crate::error::{Error, Result};
use crate::model::Shape;

/// `history_size` of L-BFGS.
pub const HISTORY_SIZE_OPTION: OptionSpec = OptionSpec {
    key: "history_size",
    kind: OptionKind::Count,
    default: "100",
    help: "curvature pairs kept: 2 x history_size flat vectors of every trainable value",
};

/// torch's L-BFGS in its steady state, over the flattened trainable vector
/// of N values, in the state dtype: `d` and `prev_flat_grad` [N];
/// `old_dirs[i]` and `old_stps[i]` [N] for each of the `history_size` pairs;
/// 0-d `ro[i]` and `al[i]` per pair; a 0-d `H_diag`. (`t` is a python float
/// after the first inner iteration; `func_evals`, `n_iter` ints.)
///
/// Values: (2 + 2 x history_size) x N + 2 x history_size + 1.
///
/// The history fills one pair per inner iteration (`max_iter=20` per
/// `step()`), so after the first `step()` it may hold fewer pairs; trainmem
/// reports the steady state, the full history, which is what training keeps
/// from the first few steps on. Its state lives under
/// The longest L-BFGS history accepted: ten times torch's default of 100.
/// Each entry is two copies of the parameters and four state tensors listed
/// one by one, so a hostile `history_size=10000000` cost 4 GB and 10 s.
pub const MAX_HISTORY: u64 = 1000;

/// `optimizer.state[params[0]]` for the one param group L-BFGS accepts.
/// Source: torch 2.x `torch/optim/lbfgs.py`, `LBFGS.step`.
pub fn lbfgs(context: &GlobalContext) -> Result<Vec<StateTensor>> {
    let n = context.elements.0;
    if context.tensors == 0 {
        return Ok(Vec::new());
    }
    let history = context.options.count(HISTORY_SIZE_OPTION.key)?;
    if history > MAX_HISTORY {
        return Err(Error::InvalidValue {
            what: "optimizer option",
            value: format!("{}={history}", HISTORY_SIZE_OPTION.key),
            reason: format!(
                "at most {MAX_HISTORY}: each entry is two copies of the parameters (torch's default is 100)"
            ),
        });
    }
    let flat = |name: String| StateTensor::device(name, Shape::vector(n), context.dtype);
    let scalar = |name: String| StateTensor::device(name, Shape::scalar(), context.dtype);
    let mut states = vec![flat("d".to_string()), flat("prev_flat_grad".to_string())];
    for i in 0..history {
        states.push(flat(format!("old_dirs[{i}]")));
        states.push(flat(format!("old_stps[{i}]")));
        states.push(scalar(format!("ro[{i}]")));
        states.push(scalar(format!("al[{i}]")));
    }
    states.push(scalar("H_diag".to_string()));
    Ok(states)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::optimizer::{Optimizer, Options};
    use crate::units::Count;

    fn bytes(history: u64, n: u64, dtype: DType) -> u64 {
        let optimizer = Optimizer::find("lbfgs").unwrap();
        let options = Options::resolve(optimizer, &[format!("history_size={history}")]).unwrap();
        let context = GlobalContext {
            elements: Count(n),
            largest: Count(n),
            tensors: 1,
            dtype,
            options: &options,
        };
        optimizer
            .global_states(&context)
            .unwrap()
            .iter()
            .map(|s| s.dtype.size_of(s.shape.elements()).unwrap().0)
            .sum()
    }

    /// 1B fp32 values at the default history of 100: 202 flat vectors, 808 GB,
    /// plus 201 scalars.
    #[test]
    fn the_history_is_two_flat_vectors_per_pair() {
        assert_eq!(
            bytes(100, 1_000_000_000, DType::Fp32),
            202 * 4_000_000_000 + 201 * 4
        );
        assert_eq!(bytes(10, 256_809, DType::Bf16), 22 * 513_618 + 21 * 2);
    }
}
