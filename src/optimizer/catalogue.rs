//! Every optimizer trainmem knows, as data.
//!
//! Sources are files of PyTorch 2.x (`torch/optim/*.py`); the fixtures in
//! `tests/fixtures/optimizers/` record what one real `step()` allocates.

use super::{Optimizer, Rule, StateSpec};

const STEP: StateSpec = StateSpec::HostCounter("step");
const MOMENTUM_BUFFER: StateSpec = StateSpec::LikeParam("momentum_buffer");
const EXP_AVG: StateSpec = StateSpec::LikeParam("exp_avg");
const EXP_AVG_SQ: StateSpec = StateSpec::LikeParam("exp_avg_sq");
const SQUARE_AVG: StateSpec = StateSpec::LikeParam("square_avg");

/// Plain SGD: no state (`momentum=0`).
pub const SGD: Optimizer = Optimizer {
    name: "sgd",
    aliases: &[],
    title: "SGD",
    summary: "no state: only the gradient",
    source: "torch/optim/sgd.py (momentum=0)",
    rule: Rule::PerTensor(&[]),
};

/// SGD with momentum: one momentum buffer per parameter.
pub const SGD_MOMENTUM: Optimizer = Optimizer {
    name: "sgd-momentum",
    aliases: &["momentum"],
    title: "SGD+momentum",
    summary: "momentum_buffer",
    source: "torch/optim/sgd.py (momentum>0)",
    rule: Rule::PerTensor(&[MOMENTUM_BUFFER]),
};

/// RMSProp: a running average of squared gradients.
pub const RMSPROP: Optimizer = Optimizer {
    name: "rmsprop",
    aliases: &[],
    title: "RMSProp",
    summary: "square_avg, step (host)",
    source: "torch/optim/rmsprop.py (momentum=0, centered=False)",
    rule: Rule::PerTensor(&[STEP, SQUARE_AVG]),
};

/// Adam: first and second moments.
pub const ADAM: Optimizer = Optimizer {
    name: "adam",
    aliases: &[],
    title: "Adam",
    summary: "exp_avg, exp_avg_sq, step (host)",
    source: "torch/optim/adam.py",
    rule: Rule::PerTensor(&[STEP, EXP_AVG, EXP_AVG_SQ]),
};

/// AdamW: Adam's state; the decoupled weight decay keeps nothing more.
pub const ADAMW: Optimizer = Optimizer {
    name: "adamw",
    aliases: &[],
    title: "AdamW",
    summary: "exp_avg, exp_avg_sq, step (host)",
    source: "torch/optim/adamw.py",
    rule: Rule::PerTensor(&[STEP, EXP_AVG, EXP_AVG_SQ]),
};

/// The catalogue, in the order reports list it.
pub const OPTIMIZERS: &[Optimizer] = &[SGD, SGD_MOMENTUM, RMSPROP, ADAM, ADAMW];

/// The four methods of the textbook comparison (seed 001).
pub const TEXTBOOK: &[&Optimizer] = &[&SGD, &SGD_MOMENTUM, &RMSPROP, &ADAM];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::model::{Model, Tensor};
    use crate::optimizer::Location;
    use crate::units::Count;

    fn device_values(optimizer: &Optimizer) -> u64 {
        let model = Model::flat(Count(1000));
        let tensor: &Tensor = &model.tensors[0];
        optimizer
            .states(tensor, DType::Fp32)
            .unwrap()
            .iter()
            .filter(|s| s.location == Location::Device)
            .map(|s| s.shape.elements().0)
            .sum::<u64>()
            / 1000
    }

    /// Seed 000: V = 1 (SGD), 2 (momentum), 3 (Adam), gradient included.
    #[test]
    fn values_per_parameter_match_the_seed() {
        assert_eq!(1 + device_values(&SGD), 1);
        assert_eq!(1 + device_values(&SGD_MOMENTUM), 2);
        assert_eq!(1 + device_values(&RMSPROP), 2);
        assert_eq!(1 + device_values(&ADAM), 3);
        assert_eq!(1 + device_values(&ADAMW), 3);
    }

    #[test]
    fn names_and_aliases_are_unique() {
        let mut names: Vec<&str> = OPTIMIZERS
            .iter()
            .flat_map(|o| std::iter::once(o.name).chain(o.aliases.iter().copied()))
            .collect();
        let before = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), before);
    }
}
