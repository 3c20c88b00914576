//! Every optimizer trainmem knows, as data.
//!
//! Each entry names its reference implementation (package and file); the
//! rules that are more than "copies of the parameter" live in the family
//! files beside this one (`factored.rs`, `quantized.rs`, ...). The fixtures in
//! `tests/fixtures/optimizers/` record what one real `step()` of each
//! allocates (torch 2.15, transformers 5.24, bitsandbytes 0.50.2, torchao
//! 0.18, pytorch-optimizer 4.1, ...; see `tools/measure_optimizers.py`).
//!
//! Temporaries follow the default path on CUDA: torch's `foreach`
//! implementations (`_multi_tensor_*`) allocate whole-group buffers; the
//! per-tensor loops of the other packages allocate per tensor.

use super::adam_mini::{ADAM_MINI_OPTIONS, adam_mini};
use super::factored::{BETA1, adafactor_hf, adafactor_torch, adalomo, came};
use super::layerwise::lamb_norms;
use super::lowrank::{GALORE_8BIT_OPTIONS, GALORE_OPTIONS, galore_adamw, galore_adamw_8bit};
use super::muon::muon;
use super::options::{ADAMW_EMBEDDINGS, CAPTURABLE, FOREACH, FUSED};
use super::preconditioned::{SOAP_OPTIONS, shampoo, soap};
use super::quantized::{
    BNB_OPTIONS, TORCHAO_4BIT_OPTIONS, TORCHAO_FP8_OPTIONS, bnb_32bit_two_states, bnb_one_state,
    bnb_qmaps, bnb_two_states, torchao_4bit, torchao_fp8, torchao_lr,
};
use super::quasi_newton::{HISTORY_SIZE_OPTION, lbfgs};
use super::{Optimizer, OptionKind, OptionSpec, Rule, StateSpec, Temporaries};

const STEP: StateSpec = StateSpec::Counter("step");
const MOMENTUM_BUFFER: StateSpec = StateSpec::LikeParam("momentum_buffer");
const EXP_AVG: StateSpec = StateSpec::LikeParam("exp_avg");
const EXP_AVG_SQ: StateSpec = StateSpec::LikeParam("exp_avg_sq");
const SQUARE_AVG: StateSpec = StateSpec::LikeParam("square_avg");
const GRAD_AVG: StateSpec = StateSpec::LikeParam("grad_avg");

/// `momentum_buffer`, kept only when `momentum > 0` (`torch/optim/sgd.py`,
/// `torch/optim/rmsprop.py`, pytorch-optimizer's LARS).
const MOMENTUM_BUFFER_IF_MOMENTUM: StateSpec = StateSpec::When("momentum", &MOMENTUM_BUFFER);

/// `fused` and `capturable` move torch's `step` counters onto the device.
const TORCH_STEP_OPTIONS: &[OptionSpec] = &[FUSED, CAPTURABLE, FOREACH];

/// `momentum` with the given default: above 0 adds a `momentum_buffer`.
const fn momentum(default: &'static str) -> OptionSpec {
    OptionSpec {
        key: "momentum",
        kind: OptionKind::Float,
        default,
        help: "above 0 adds a `momentum_buffer` of the parameter's shape",
    }
}

/// RMSProp's `centered` with the given default: adds a `grad_avg`.
const fn centered(default: &'static str) -> OptionSpec {
    OptionSpec {
        key: "centered",
        kind: OptionKind::Flag,
        default,
        help: "adds a `grad_avg` of the parameter's shape",
    }
}

/// Plain SGD: no state (`momentum=0`).
pub const SGD: Optimizer = Optimizer {
    name: "sgd",
    aliases: &[],
    title: "SGD",
    summary: "no state: only the gradient",
    source: "torch/optim/sgd.py (momentum=0)",
    options: &[FOREACH],
    flat_assumption: None,
    rule: Rule::PerTensor(&[]),
    global: None,
    fused_backward: false,
    step_temporaries: Temporaries::None,
};

/// SGD with momentum: one momentum buffer per parameter.
pub const SGD_MOMENTUM: Optimizer = Optimizer {
    name: "sgd-momentum",
    aliases: &["momentum"],
    title: "SGD+momentum",
    summary: "momentum_buffer",
    source: "torch/optim/sgd.py (momentum>0)",
    options: &[momentum("0.9"), FOREACH],
    flat_assumption: None,
    rule: Rule::PerTensor(&[MOMENTUM_BUFFER_IF_MOMENTUM]),
    global: None,
    // `_multi_tensor_sgd`: the buffers are updated in place and used as the
    // update (`device_grads = bufs`).
    fused_backward: false,
    step_temporaries: Temporaries::None,
};

/// SGD with Nesterov momentum: the same buffer as SGD with momentum.
pub const SGD_NESTEROV: Optimizer = Optimizer {
    name: "sgd-nesterov",
    aliases: &[],
    title: "SGD+Nesterov",
    summary: "momentum_buffer",
    source: "torch/optim/sgd.py (momentum>0, nesterov=True)",
    options: &[momentum("0.9"), FOREACH],
    flat_assumption: None,
    rule: Rule::PerTensor(&[MOMENTUM_BUFFER_IF_MOMENTUM]),
    global: None,
    // `_multi_tensor_sgd`: `device_grads = torch._foreach_add(device_grads, bufs, alpha=momentum)`.
    fused_backward: false,
    step_temporaries: Temporaries::GroupCopies(1),
};

/// RMSProp: a running average of squared gradients.
pub const RMSPROP: Optimizer = Optimizer {
    name: "rmsprop",
    aliases: &[],
    title: "RMSProp",
    summary: "square_avg, step (host)",
    source: "torch/optim/rmsprop.py (momentum=0, centered=False)",
    options: &[CAPTURABLE, momentum("0"), centered("false")],
    flat_assumption: None,
    rule: Rule::PerTensor(&[
        STEP,
        SQUARE_AVG,
        MOMENTUM_BUFFER_IF_MOMENTUM,
        StateSpec::When("centered", &GRAD_AVG),
    ]),
    global: None,
    // `_multi_tensor_rmsprop`: `avg = torch._foreach_sqrt(grouped_square_avgs)`
    // (centered: `torch._foreach_addcmul(...)`, then sqrt in place).
    fused_backward: false,
    step_temporaries: Temporaries::GroupCopies(1),
};

/// Centered RMSProp with momentum: three buffers.
pub const RMSPROP_CENTERED: Optimizer = Optimizer {
    name: "rmsprop-centered",
    aliases: &[],
    title: "RMSProp (centered, momentum)",
    summary: "square_avg, momentum_buffer, grad_avg, step (host)",
    source: "torch/optim/rmsprop.py (centered=True, momentum=0.9)",
    options: &[CAPTURABLE, momentum("0.9"), centered("true")],
    ..RMSPROP
};

/// Adam: first and second moments.
pub const ADAM: Optimizer = Optimizer {
    name: "adam",
    aliases: &[],
    title: "Adam",
    summary: "exp_avg, exp_avg_sq, step (host)",
    source: "torch/optim/adam.py",
    options: TORCH_STEP_OPTIONS,
    flat_assumption: None,
    rule: Rule::PerTensor(&[STEP, EXP_AVG, EXP_AVG_SQ]),
    global: None,
    // `_multi_tensor_adam`: `exp_avg_sq_sqrt = torch._foreach_sqrt(exp_avg_sqs)`
    // holds one parameter-sized buffer for the whole group.
    fused_backward: false,
    step_temporaries: Temporaries::GroupCopies(1),
};

/// AdamW: Adam's state; the decoupled weight decay keeps nothing more.
pub const ADAMW: Optimizer = Optimizer {
    name: "adamw",
    aliases: &[],
    title: "AdamW",
    summary: "exp_avg, exp_avg_sq, step (host)",
    source: "torch/optim/adamw.py",
    ..ADAM
};

/// Adam with AMSGrad: a third buffer, the running maximum of `exp_avg_sq`.
pub const ADAM_AMSGRAD: Optimizer = Optimizer {
    name: "adam-amsgrad",
    aliases: &[],
    title: "Adam (AMSGrad)",
    summary: "exp_avg, exp_avg_sq, max_exp_avg_sq, step (host)",
    source: "torch/optim/adam.py (amsgrad=True)",
    rule: Rule::PerTensor(&[
        STEP,
        EXP_AVG,
        EXP_AVG_SQ,
        StateSpec::LikeParam("max_exp_avg_sq"),
    ]),
    // `_multi_tensor_adam`: `torch._foreach_sqrt(max_exp_avg_sqs)`, one group copy.
    ..ADAM
};

/// Adamax: first moment and an infinity norm.
pub const ADAMAX: Optimizer = Optimizer {
    name: "adamax",
    aliases: &[],
    title: "Adamax",
    summary: "exp_avg, exp_inf, step (host)",
    source: "torch/optim/adamax.py",
    options: &[CAPTURABLE],
    flat_assumption: None,
    rule: Rule::PerTensor(&[STEP, EXP_AVG, StateSpec::LikeParam("exp_inf")]),
    global: None,
    // `_multi_tensor_adamax`: `grouped_grads = torch._foreach_abs(grouped_grads)`.
    fused_backward: false,
    step_temporaries: Temporaries::GroupCopies(1),
};

/// NAdam: Adam's moments plus a running product of momentum coefficients.
pub const NADAM: Optimizer = Optimizer {
    name: "nadam",
    aliases: &[],
    title: "NAdam",
    summary: "exp_avg, exp_avg_sq, step and mu_product (host)",
    source: "torch/optim/nadam.py",
    options: &[CAPTURABLE],
    flat_assumption: None,
    rule: Rule::PerTensor(&[STEP, StateSpec::Counter("mu_product"), EXP_AVG, EXP_AVG_SQ]),
    global: None,
    // `_multi_tensor_nadam`: `exp_avg_sq_sqrt = torch._foreach_sqrt(grouped_exp_avg_sqs)`.
    fused_backward: false,
    step_temporaries: Temporaries::GroupCopies(1),
};

/// RAdam: Adam's moments, rectified.
pub const RADAM: Optimizer = Optimizer {
    name: "radam",
    aliases: &[],
    title: "RAdam",
    summary: "exp_avg, exp_avg_sq, step (host)",
    source: "torch/optim/radam.py",
    options: &[CAPTURABLE],
    flat_assumption: None,
    rule: Rule::PerTensor(&[STEP, EXP_AVG, EXP_AVG_SQ]),
    global: None,
    // `_multi_tensor_radam`: `buffer = torch._foreach_sqrt(grouped_exp_avg_sqs)`.
    fused_backward: false,
    step_temporaries: Temporaries::GroupCopies(1),
};

/// Adagrad: a running sum of squared gradients.
pub const ADAGRAD: Optimizer = Optimizer {
    name: "adagrad",
    aliases: &[],
    title: "Adagrad",
    summary: "sum, step (host)",
    source: "torch/optim/adagrad.py",
    options: &[FUSED],
    flat_assumption: None,
    rule: Rule::PerTensor(&[STEP, StateSpec::LikeParam("sum")]),
    global: None,
    // `_multi_tensor_adagrad`: `std = torch._foreach_sqrt(device_state_sums)` and
    // `numerator = torch._foreach_mul(device_grads, minus_clr)`.
    fused_backward: false,
    step_temporaries: Temporaries::GroupCopies(2),
};

/// Adadelta: running averages of squared gradients and squared updates.
pub const ADADELTA: Optimizer = Optimizer {
    name: "adadelta",
    aliases: &[],
    title: "Adadelta",
    summary: "square_avg, acc_delta, step (host)",
    source: "torch/optim/adadelta.py",
    options: &[CAPTURABLE],
    flat_assumption: None,
    rule: Rule::PerTensor(&[STEP, SQUARE_AVG, StateSpec::LikeParam("acc_delta")]),
    global: None,
    // `_multi_tensor_adadelta`: `std = torch._foreach_add(device_square_avgs, eps)`
    // and `deltas = torch._foreach_add(device_acc_deltas, eps)`.
    fused_backward: false,
    step_temporaries: Temporaries::GroupCopies(2),
};

/// Rprop: the previous gradient and a per-value step size.
pub const RPROP: Optimizer = Optimizer {
    name: "rprop",
    aliases: &[],
    title: "Rprop",
    summary: "prev, step_size, step (host)",
    source: "torch/optim/rprop.py",
    options: &[CAPTURABLE],
    flat_assumption: None,
    rule: Rule::PerTensor(&[
        STEP,
        StateSpec::LikeParam("prev"),
        StateSpec::LikeParam("step_size"),
    ]),
    global: None,
    // `_multi_tensor_rprop`: `signs = torch._foreach_mul(grouped_grads, grouped_prevs)`
    // and `grad_signs = [grad.sign() for grad in grouped_grads]`.
    fused_backward: false,
    step_temporaries: Temporaries::GroupCopies(2),
};

/// ASGD: the running average of the parameters, with device counters.
pub const ASGD: Optimizer = Optimizer {
    name: "asgd",
    aliases: &[],
    title: "ASGD",
    summary: "ax; step, eta, mu (0-d, on the device)",
    source: "torch/optim/asgd.py",
    options: &[],
    flat_assumption: None,
    rule: Rule::PerTensor(&[
        StateSpec::DeviceCounter("step"),
        StateSpec::DeviceCounter("eta"),
        StateSpec::DeviceCounter("mu"),
        StateSpec::LikeParam("ax"),
    ]),
    global: None,
    // `_multi_tensor_asgd`: `intermediate = torch._foreach_sub(grouped_params, grouped_axs)`.
    fused_backward: false,
    step_temporaries: Temporaries::GroupCopies(1),
};

/// torch's Adafactor: factored second moment, no first moment.
pub const ADAFACTOR: Optimizer = Optimizer {
    name: "adafactor",
    aliases: &[],
    title: "Adafactor (torch)",
    summary: "row_var [.., r, 1] + col_var [.., 1, c] per matrix, variance per vector, step (host)",
    source: "torch/optim/_adafactor.py",
    options: &[],
    flat_assumption: Some("one vector of N: a 1-D tensor gets a full `variance` (no factoring)"),
    rule: Rule::Custom(adafactor_torch),
    global: None,
    // `_multi_tensor_adafactor`: `var_estimates` (row_var @ col_var, or a clone
    // of each variance), one parameter-sized list for the group.
    fused_backward: false,
    step_temporaries: Temporaries::GroupCopies(1),
};

/// transformers' Adafactor: factored second moment in fp32, optional first moment.
pub const ADAFACTOR_HF: Optimizer = Optimizer {
    name: "adafactor-hf",
    aliases: &[],
    title: "Adafactor (transformers)",
    summary: "fp32 exp_avg_sq_row + exp_avg_sq_col per matrix, exp_avg_sq per vector, RMS; exp_avg with beta1",
    source: "transformers/optimization.py (Adafactor)",
    options: &[BETA1],
    flat_assumption: Some(
        "one vector of N: a 1-D tensor gets a full fp32 `exp_avg_sq` (no factoring)",
    ),
    rule: Rule::Custom(adafactor_hf),
    global: None,
    // `Adafactor.step`, per tensor: `update = grad**2 + eps`, then the factored
    // estimate and `-update`; 16-bit parameters add `grad.float()` and `p.float()`.
    fused_backward: false,
    step_temporaries: Temporaries::LargestTensorFp32 {
        working: 2,
        upcast: 2,
    },
};

/// CAME: Adafactor's factored statistics twice, plus a first moment, in fp32.
pub const CAME: Optimizer = Optimizer {
    name: "came",
    aliases: &[],
    title: "CAME",
    summary: "fp32 exp_avg; exp_avg_sq_row/col + exp_avg_res_row/col per matrix, exp_avg_sq per vector; RMS",
    source: "came-pytorch: came_pytorch/CAME.py",
    options: &[],
    flat_assumption: Some("one vector of N: full fp32 `exp_avg` and `exp_avg_sq` (no factoring)"),
    rule: Rule::Custom(came),
    global: None,
    // `CAME.step`, per tensor: `update`, its factored estimate, `res` and `-update`
    // in fp32; 16-bit gradients add `grad.float()`.
    fused_backward: false,
    step_temporaries: Temporaries::LargestTensorFp32 {
        working: 3,
        upcast: 1,
    },
};

/// AdaLomo: LOMO's fused update with a factored fp32 second moment.
pub const ADALOMO: Optimizer = Optimizer {
    name: "adalomo",
    aliases: &[],
    title: "AdaLomo",
    summary: "fp32 exp_avg_sq_row [rows] + exp_avg_sq_col [cols] per matrix, exp_avg_sq per vector; fused into backward",
    source: "lomo-optim: lomo_optim/adalomo.py",
    options: &[],
    flat_assumption: Some("one vector of N: a full fp32 `exp_avg_sq` (no factoring)"),
    rule: Rule::Custom(adalomo),
    global: None,
    // The update runs in a gradient hook, per tensor: `grad.to(float32)`,
    // `update` and its factored estimate, `p.data.to(float32)`.
    fused_backward: true,
    step_temporaries: Temporaries::LargestTensorFp32 {
        working: 2,
        upcast: 2,
    },
};

/// LOMO: SGD fused into the backward pass; no state.
pub const LOMO: Optimizer = Optimizer {
    name: "lomo",
    aliases: &[],
    title: "LOMO",
    summary: "no state; each gradient is applied and freed inside backward, never stored in full",
    source: "lomo-optim: lomo_optim/lomo.py",
    options: &[],
    flat_assumption: None,
    rule: Rule::PerTensor(&[]),
    global: None,
    // `Lomo.fuse_update`, per tensor: `grad.to(float32)` and `p.data.to(float32)`,
    // copies only for 16-bit parameters.
    fused_backward: true,
    step_temporaries: Temporaries::LargestTensorFp32 {
        working: 0,
        upcast: 2,
    },
};

/// Lion: one momentum buffer.
pub const LION: Optimizer = Optimizer {
    name: "lion",
    aliases: &[],
    title: "Lion",
    summary: "exp_avg",
    source: "lion-pytorch: lion_pytorch/lion_pytorch.py",
    options: &[],
    flat_assumption: None,
    rule: Rule::PerTensor(&[EXP_AVG]),
    global: None,
    // `update_fn`, per tensor: `exp_avg.clone().mul_(beta1).add(grad, ...)`.
    fused_backward: false,
    step_temporaries: Temporaries::LargestTensorCopies(2),
};

/// Sophia: a first moment and a diagonal Hessian estimate.
pub const SOPHIA: Optimizer = Optimizer {
    name: "sophia",
    aliases: &[],
    title: "Sophia (SophiaG)",
    summary: "exp_avg, hessian, step (host)",
    source: "sophia-opt: sophia_opt/__init__.py (SophiaG)",
    options: &[CAPTURABLE],
    flat_assumption: None,
    rule: Rule::PerTensor(&[STEP, EXP_AVG, StateSpec::LikeParam("hessian")]),
    global: None,
    // `_single_tensor_sophiag`, per tensor: `exp_avg.abs()`, `rho * bs * hess + eps`,
    // their ratio, `exp_avg.sign()`.
    fused_backward: false,
    step_temporaries: Temporaries::LargestTensorCopies(3),
};

/// LAMB: Adam's moments and layer-wise trust ratios.
pub const LAMB: Optimizer = Optimizer {
    name: "lamb",
    aliases: &[],
    title: "LAMB",
    summary: "exp_avg, exp_avg_sq; weight_norm, adam_norm, trust_ratio (one value per tensor)",
    source: "pytorch-optimizer: pytorch_optimizer/optimizer/lamb.py",
    options: &[],
    flat_assumption: None,
    rule: Rule::PerTensor(&[EXP_AVG, EXP_AVG_SQ]),
    global: Some(lamb_norms),
    // `Lamb._step_foreach`: `updates = torch._foreach_sqrt(exp_avg_sqs)`.
    fused_backward: false,
    step_temporaries: Temporaries::GroupCopies(1),
};

/// LARS: SGD momentum with layer-wise trust ratios.
pub const LARS: Optimizer = Optimizer {
    name: "lars",
    aliases: &[],
    title: "LARS",
    summary: "momentum_buffer",
    source: "pytorch-optimizer: pytorch_optimizer/optimizer/lars.py",
    options: &[momentum("0.9")],
    flat_assumption: None,
    rule: Rule::PerTensor(&[MOMENTUM_BUFFER_IF_MOMENTUM]),
    global: None,
    // `LARS._step_foreach`: in-place updates; the norms are one value per tensor.
    fused_backward: false,
    step_temporaries: Temporaries::None,
};

/// Adan: three moments and the previous gradient.
pub const ADAN: Optimizer = Optimizer {
    name: "adan",
    aliases: &[],
    title: "Adan",
    summary: "exp_avg, exp_avg_sq, exp_avg_diff, previous_grad",
    source: "pytorch-optimizer: pytorch_optimizer/optimizer/adan.py",
    options: &[],
    flat_assumption: None,
    rule: Rule::PerTensor(&[
        EXP_AVG,
        EXP_AVG_SQ,
        StateSpec::LikeParam("exp_avg_diff"),
        StateSpec::LikeParam("previous_grad"),
    ]),
    global: None,
    // `Adan._step_foreach`: `de_noms = torch._foreach_sqrt(exp_avg_sqs)`.
    fused_backward: false,
    step_temporaries: Temporaries::GroupCopies(1),
};

/// Adam-mini: a full first moment, one second moment per block.
pub const ADAM_MINI: Optimizer = Optimizer {
    name: "adam-mini",
    aliases: &[],
    title: "Adam-mini",
    summary: "m; vmean per head (q/k), per row (embeddings, v, o, mlp) or per tensor; v for biases",
    source: "adam-mini: adam_mini/adam_mini.py (1.1.1)",
    options: ADAM_MINI_OPTIONS,
    flat_assumption: Some(
        "one vector named `parameters`, which matches no keyword: a full `m` and a single 0-d `vmean`",
    ),
    rule: Rule::Custom(adam_mini),
    global: None,
    // `Adam_mini.step`, per tensor: `grad * grad`, then `update = m * stepsize`
    // and `-update`.
    fused_backward: false,
    step_temporaries: Temporaries::LargestTensorCopies(2),
};

/// Schedule-free AdamW: the averaging sequence z and a second moment.
pub const SCHEDULE_FREE_ADAMW: Optimizer = Optimizer {
    name: "schedule-free-adamw",
    aliases: &[],
    title: "Schedule-Free AdamW",
    summary: "z, exp_avg_sq",
    source: "schedulefree: schedulefree/adamw_schedulefree.py",
    options: &[],
    flat_assumption: None,
    rule: Rule::PerTensor(&[StateSpec::LikeParam("z"), EXP_AVG_SQ]),
    global: None,
    // `AdamWScheduleFree.step` (foreach): `denom = torch._foreach_div(exp_avg_sq, bias_correction2)`.
    fused_backward: false,
    step_temporaries: Temporaries::GroupCopies(1),
};

/// Muon for matrices, AdamW for the rest.
pub const MUON: Optimizer = Optimizer {
    name: "muon",
    aliases: &[],
    title: "Muon (+AdamW)",
    summary: "momentum_buffer per tensor of 2+ dims; exp_avg, exp_avg_sq, step (host) for the rest (AdamW)",
    source: "torch/optim/_muon.py (2+ dims) + torch/optim/adamw.py (the rest)",
    options: &[FUSED, CAPTURABLE, ADAMW_EMBEDDINGS],
    flat_assumption: Some(
        "one vector of N: a 1-D tensor gets AdamW's two moments (Muon takes only matrices)",
    ),
    rule: Rule::Custom(muon),
    global: None,
    // `_single_tensor_muon`, per tensor: the Nesterov update `grad.lerp(buf, ...)`,
    // its bf16 copy and the Newton-Schulz iterate (plus [k, k] Gram matrices,
    // k = min(rows, cols)).
    fused_backward: false,
    step_temporaries: Temporaries::LargestTensorCopies(3),
};

/// GaLore-AdamW: AdamW moments in a rank-r projection of each matrix.
pub const GALORE_ADAMW: Optimizer = Optimizer {
    name: "galore-adamw",
    aliases: &[],
    title: "GaLore-AdamW",
    summary: "per matrix: projector.ortho_matrix + exp_avg, exp_avg_sq of rank r; AdamW moments for the rest",
    source: "galore-torch: galore_torch/adamw.py, galore_torch/galore_projector.py",
    options: GALORE_OPTIONS,
    flat_assumption: Some(
        "one vector of N: a 1-D tensor gets plain AdamW moments (GaLore projects only matrices)",
    ),
    rule: Rule::Custom(galore_adamw),
    global: None,
    // `GaLoreProjector.get_orthogonal_matrix` every `update_proj_gap` steps:
    // U and Vh of an fp32 SVD (plus `.float()` of a 16-bit gradient); other
    // steps: `project_back` and its scaled copy.
    fused_backward: false,
    step_temporaries: Temporaries::LargestTensorFp32 {
        working: 2,
        upcast: 1,
    },
};

/// GaLore-AdamW 8-bit: bitsandbytes' 8-bit moments of each projected matrix.
pub const GALORE_ADAMW_8BIT: Optimizer = Optimizer {
    name: "galore-adamw-8bit",
    aliases: &[],
    title: "GaLore-AdamW 8-bit",
    summary: "per matrix: projector.ortho_matrix + uint8 state1, state2 of rank r (+ fp32 absmax per 256); 8-bit AdamW for the rest; unorm_vec per tensor",
    source: "galore-torch: galore_torch/adamw8bit.py (AdamW8bit.step), galore_torch/galore_projector.py; bitsandbytes: bitsandbytes/optim/optimizer.py (Optimizer2State.init_state)",
    options: GALORE_8BIT_OPTIONS,
    flat_assumption: Some(
        "one vector of N: a 1-D tensor gets bitsandbytes' 8-bit moments of its shape (GaLore projects only matrices)",
    ),
    rule: Rule::Custom(galore_adamw_8bit),
    global: Some(bnb_qmaps),
    // `AdamW8bit.step`, per tensor: `p.saved_data = p.data.clone()`, then
    // `project_back` and its `* scale` copy (three parameter copies in the
    // parameter dtype); every `update_proj_gap` steps the fp32 SVD of the
    // gradient (`.float()`, U and Vh) comes first: three fp32 copies bound
    // both. On the CPU the tensors it does not project (with
    // `adamw_embeddings`, the embeddings and head) go through bitsandbytes'
    // CPU backend, whose five fp32 copies of the whole tensor bound it there.
    fused_backward: false,
    step_temporaries: Temporaries::ByPlatform {
        cuda: &Temporaries::LargestTensorFp32 {
            working: 3,
            upcast: 0,
        },
        cpu: &BNB_ADAM_8BIT_CPU,
    },
};

/// Shampoo: two square preconditioners per dimension.
pub const SHAMPOO: Optimizer = Optimizer {
    name: "shampoo",
    aliases: &[],
    title: "Shampoo",
    summary: "pre_cond_i, inv_pre_cond_i [d_i, d_i] per dimension; momentum_buffer",
    source: "pytorch-optimizer: pytorch_optimizer/optimizer/shampoo.py (Shampoo)",
    options: &[],
    flat_assumption: Some(
        "one vector of N: two N x N preconditioners (absurd for a real model: give --model)",
    ),
    rule: Rule::Custom(shampoo),
    global: None,
    // `Shampoo.step`, per tensor: the unfolded and transposed gradient copies and
    // the preconditioned product (the SVD of each [d, d] factor comes on top).
    fused_backward: false,
    step_temporaries: Temporaries::LargestTensorCopies(3),
};

/// SOAP: Adam in the eigenbasis of Shampoo's preconditioners.
pub const SOAP: Optimizer = Optimizer {
    name: "soap",
    aliases: &[],
    title: "SOAP",
    summary: "exp_avg, exp_avg_sq; GG[i], Q[i] [d_i, d_i] per dimension <= max_precond_dim (none for 1-D)",
    source: "pytorch-optimizer: pytorch_optimizer/optimizer/soap.py; fp32_states=true: nikhilvyas/SOAP soap.py",
    options: SOAP_OPTIONS,
    flat_assumption: Some(
        "one vector of N: no preconditioner (precondition_1d=false), only exp_avg and exp_avg_sq",
    ),
    rule: Rule::Custom(soap),
    global: None,
    // `SOAP.step`, per tensor: the projected gradient, its square, `de_nom`, the
    // projected `exp_avg`, their ratio and its back-projection.
    fused_backward: false,
    step_temporaries: Temporaries::LargestTensorCopies(4),
};

/// L-BFGS: a history of curvature pairs over the flattened parameters.
pub const LBFGS: Optimizer = Optimizer {
    name: "lbfgs",
    aliases: &[],
    title: "L-BFGS",
    summary: "global, over all N trainable values: d, prev_flat_grad, history_size pairs of [N] (steady state)",
    source: "torch/optim/lbfgs.py",
    options: &[HISTORY_SIZE_OPTION],
    flat_assumption: None,
    rule: Rule::PerTensor(&[]),
    global: Some(lbfgs),
    // `LBFGS.step`: `flat_grad` (torch.cat of the gradients), `q = flat_grad.neg()`,
    // the new direction `d` while the old one is still held, or the new pair
    // `y`, `s` before the oldest is dropped: about four flat vectors.
    fused_backward: false,
    step_temporaries: Temporaries::GroupCopies(4),
};

/// bitsandbytes' AdamW8bit: block-wise 8-bit moments.
pub const ADAMW_8BIT: Optimizer = Optimizer {
    name: "adamw-8bit",
    aliases: &[],
    title: "AdamW 8-bit (bitsandbytes)",
    summary: "uint8 state1, state2 + fp32 absmax per 256 values (fp32 states under 4096 values); 2 shared maps",
    source: "bitsandbytes: bitsandbytes/optim/optimizer.py (Optimizer2State.init_state)",
    options: BNB_OPTIONS,
    flat_assumption: Some(
        "one vector of N >= 4096: 8-bit states plus ceil(N / 256) fp32 absmax each; a real model's small tensors keep fp32 states",
    ),
    rule: Rule::Custom(bnb_two_states),
    global: Some(bnb_qmaps),
    // The blockwise CUDA kernels update the quantized states in place.
    fused_backward: false,
    step_temporaries: Temporaries::ByPlatform {
        cuda: &Temporaries::None,
        cpu: &BNB_ADAM_8BIT_CPU,
    },
};

/// bitsandbytes' CPU backend for its two-state 8-bit optimizers
/// (`_optimizer_update_8bit_blockwise_cpu`, bitsandbytes 0.50): `state1`
/// and `state2` dequantized to fp32, `grad = g.float() * gnorm_scale`,
/// `state2_fp32.sqrt()` and its quotient `denom`, live together (measured:
/// five fp32 copies of the tensor); `p.data.float()` copies a 16-bit parameter.
const BNB_ADAM_8BIT_CPU: Temporaries = Temporaries::LargestTensorFp32 {
    working: 5,
    upcast: 1,
};

/// bitsandbytes' PagedAdamW8bit: AdamW8bit's bytes, large states in paged memory.
pub const PAGED_ADAMW_8BIT: Optimizer = Optimizer {
    name: "paged-adamw-8bit",
    aliases: &[],
    title: "Paged AdamW 8-bit (bitsandbytes)",
    summary: "as adamw-8bit; state1/state2 of tensors >= 1e5 values in CUDA unified (paged) memory",
    source: "bitsandbytes: bitsandbytes/optim/optimizer.py (get_state_buffer, Optimizer2State.init_state)",
    ..ADAMW_8BIT
};

/// bitsandbytes' PagedAdamW (32-bit): fp32 moments, large ones in paged memory.
pub const PAGED_ADAMW: Optimizer = Optimizer {
    name: "paged-adamw",
    aliases: &["paged-adamw-32bit"],
    title: "Paged AdamW 32-bit (bitsandbytes)",
    summary: "fp32 state1, state2 of every tensor's shape; those of tensors >= 1e5 values in CUDA unified (paged) memory",
    source: "bitsandbytes: bitsandbytes/optim/adamw.py (PagedAdamW), bitsandbytes/optim/optimizer.py (get_state_buffer, Optimizer2State.init_state)",
    options: &[],
    flat_assumption: None,
    rule: Rule::Custom(bnb_32bit_two_states),
    global: None,
    // `F.optimizer_update_32bit` updates the parameter and both states in place.
    fused_backward: false,
    step_temporaries: Temporaries::None,
};

/// bitsandbytes' Lion8bit: one block-wise 8-bit moment.
pub const LION_8BIT: Optimizer = Optimizer {
    name: "lion-8bit",
    aliases: &[],
    title: "Lion 8-bit (bitsandbytes)",
    summary: "uint8 state1 + fp32 absmax per 256 values (fp32 state under 4096 values); 2 shared maps",
    source: "bitsandbytes: bitsandbytes/optim/optimizer.py (Optimizer1State.init_state)",
    options: BNB_OPTIONS,
    flat_assumption: Some(
        "one vector of N >= 4096: an 8-bit state plus ceil(N / 256) fp32 absmax; a real model's small tensors keep fp32 states",
    ),
    rule: Rule::Custom(bnb_one_state),
    global: Some(bnb_qmaps),
    fused_backward: false,
    step_temporaries: Temporaries::None,
};

/// torchao's AdamW4bit: block-wise 4-bit moments.
pub const ADAMW_4BIT: Optimizer = Optimizer {
    name: "adamw-4bit",
    aliases: &[],
    title: "AdamW 4-bit (torchao)",
    summary: "4-bit exp_avg, exp_avg_sq (n/2 bytes + fp32 scale per 128 + 16-value map) if n >= 4096, n % 128 == 0; step (host)",
    source: "torchao: torchao/optim/adam.py (AdamW4bit), torchao/optim/subclass_4bit.py",
    options: TORCHAO_4BIT_OPTIONS,
    flat_assumption: Some(
        "one vector of N: quantized when N >= 4096 and N is a multiple of 128; a real model's small or odd-sized tensors stay in the state dtype",
    ),
    rule: Rule::Custom(torchao_4bit),
    global: Some(torchao_lr),
    // `single_param_adam` (compiled), per tensor: the fp32 moments are
    // materialized for block-wise requantization.
    fused_backward: false,
    step_temporaries: Temporaries::LargestTensorFp32 {
        working: 2,
        upcast: 0,
    },
};

/// torchao's AdamWFp8: block-wise float8 moments.
pub const ADAMW_FP8: Optimizer = Optimizer {
    name: "adamw-fp8",
    aliases: &[],
    title: "AdamW fp8 (torchao)",
    summary: "float8_e4m3 exp_avg, exp_avg_sq + fp32 scale per 256 if n >= 4096, n % 256 == 0; step (host)",
    source: "torchao: torchao/optim/adam.py (AdamWFp8), torchao/optim/subclass_fp8.py",
    options: TORCHAO_FP8_OPTIONS,
    flat_assumption: Some(
        "one vector of N: quantized when N >= 4096 and N is a multiple of 256; a real model's small or odd-sized tensors stay in the state dtype",
    ),
    rule: Rule::Custom(torchao_fp8),
    ..ADAMW_4BIT
};

/// The catalogue, in the order reports list it.
pub const OPTIMIZERS: &[Optimizer] = &[
    SGD,
    SGD_MOMENTUM,
    SGD_NESTEROV,
    RMSPROP,
    RMSPROP_CENTERED,
    ADAM,
    ADAMW,
    ADAM_AMSGRAD,
    ADAMAX,
    NADAM,
    RADAM,
    ADAGRAD,
    ADADELTA,
    RPROP,
    ASGD,
    ADAFACTOR,
    ADAFACTOR_HF,
    CAME,
    LION,
    SOPHIA,
    LAMB,
    LARS,
    ADAN,
    ADAM_MINI,
    SCHEDULE_FREE_ADAMW,
    MUON,
    GALORE_ADAMW,
    GALORE_ADAMW_8BIT,
    SHAMPOO,
    SOAP,
    LBFGS,
    LOMO,
    ADALOMO,
    ADAMW_8BIT,
    PAGED_ADAMW_8BIT,
    PAGED_ADAMW,
    LION_8BIT,
    ADAMW_4BIT,
    ADAMW_FP8,
];

/// The optimizers whose large states bitsandbytes allocates in CUDA unified
/// memory (`Optimizer8bit.get_state_buffer`: `F.get_paged` for tensors of at
/// least 1e5 values when `is_paged`; ordinary tensors on the CPU).
pub const PAGED: &[&str] = &[PAGED_ADAMW.name, PAGED_ADAMW_8BIT.name];

/// The four methods of the textbook comparison (seed 001).
pub const TEXTBOOK: &[&Optimizer] = &[&SGD, &SGD_MOMENTUM, &RMSPROP, &ADAM];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::model::{Model, Tensor};
    use crate::optimizer::{GlobalContext, Location, Options};
    use crate::units::Count;

    fn device_values(optimizer: &Optimizer) -> u64 {
        let model = Model::flat(Count(1000));
        let tensor: &Tensor = &model.tensors[0];
        optimizer
            .states(tensor, DType::Fp32, &optimizer.default_options())
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

    /// bitsandbytes' 8-bit Adam: no temporaries in its CUDA kernel; on the
    /// CPU five fp32 copies of the tensor (six for a bf16 one, whose
    /// `p.data.float()` copies), as measured in
    /// `tests/fixtures/timeline/llama__fp32__galore8bit-perlayer__*`.
    #[test]
    fn bitsandbytes_8bit_temporaries_depend_on_the_platform() {
        let options = ADAMW_8BIT.default_options();
        let context = |dtype| GlobalContext {
            elements: Count(1000),
            largest: Count(100),
            tensors: 10,
            dtype,
            options: &options,
        };
        let on = |cpu: bool, dtype| {
            ADAMW_8BIT
                .step_temporaries_on(&options, cpu)
                .bytes(&context(dtype))
                .unwrap()
                .0
        };
        assert_eq!(on(false, DType::Fp32), 0);
        assert_eq!(on(true, DType::Fp32), 5 * 100 * 4);
        assert_eq!(on(true, DType::Bf16), 6 * 100 * 4);
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

    /// Every entry says what it keeps and where the rule comes from, and its
    /// defaults resolve.
    #[test]
    fn every_entry_is_documented_and_resolves() {
        for optimizer in OPTIMIZERS {
            assert!(!optimizer.summary.is_empty(), "{}", optimizer.name);
            assert!(!optimizer.source.is_empty(), "{}", optimizer.name);
            Options::resolve(optimizer, &[]).unwrap();
        }
    }

    /// Options off reproduce the plain rule: momentum=0 keeps no buffer,
    /// centered adds `grad_avg`.
    #[test]
    fn options_switch_states() {
        let tensor = &Model::flat(Count(10)).tensors[0];
        let names = |optimizer: &Optimizer, pairs: &[&str]| -> Vec<String> {
            let pairs: Vec<String> = pairs.iter().map(|s| s.to_string()).collect();
            let options = Options::resolve(optimizer, &pairs).unwrap();
            optimizer
                .states(tensor, DType::Fp32, &options)
                .unwrap()
                .iter()
                .map(|s| s.name.to_string())
                .collect()
        };
        assert!(names(&SGD_MOMENTUM, &["momentum=0"]).is_empty());
        assert_eq!(
            names(&RMSPROP_CENTERED, &[]),
            ["step", "square_avg", "momentum_buffer", "grad_avg"]
        );
        assert_eq!(
            names(&RMSPROP, &["centered=true"]),
            ["step", "square_avg", "grad_avg"]
        );
    }
}
