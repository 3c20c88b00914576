//! Quantized optimizer states: bitsandbytes' 8-bit optimizers and torchao's
//! 4-bit and fp8 AdamW.
//!
//! Both quantize block-wise: codes of 8 bits (or 4) per value plus one fp32
//! scale per block, and both leave small tensors unquantized.

use super::options::spells;
use super::{GlobalContext, Location, OptionKind, OptionSpec, StateContext, StateTensor};
use crate::dtype::DType;
use crate::error::Result;
use crate::model::Shape;

/// bitsandbytes' block size: one fp32 `absmax` per 256 values (hard-coded in
/// `Optimizer2State.init_state` and `Optimizer1State.init_state`).
pub const BNB_BLOCK: u64 = 256;

/// bitsandbytes' default `min_8bit_size`: smaller tensors keep fp32 states.
pub const MIN_8BIT_SIZE: u64 = 4096;

/// Values in each of bitsandbytes' quantization maps (`name2qmap`).
pub const BNB_QMAP_VALUES: u64 = 256;

/// torchao quantizes a buffer only from this many values (`_AdamBase._new_buffer`).
pub const TORCHAO_MIN_QUANT_NUMEL: u64 = 4096;

/// torchao AdamW4bit's default block size.
pub const TORCHAO_4BIT_BLOCK: u64 = 128;

/// torchao AdamWFp8's default block size.
pub const TORCHAO_FP8_BLOCK: u64 = 256;

/// Two 4-bit codes share a byte (`OptimState4bit.zeros`: `n_elems // 2` uint8).
pub const CODES_PER_BYTE_4BIT: u64 = 2;

/// Values in each 4-bit buffer's own quantization map (`OptimState4bit.qmap`).
pub const TORCHAO_4BIT_QMAP_VALUES: u64 = 16;

/// `min_8bit_size` of bitsandbytes.
pub const MIN_8BIT_SIZE_OPTION: OptionSpec = OptionSpec {
    key: "min_8bit_size",
    kind: OptionKind::Count,
    default: "4096",
    help: "tensors with fewer values keep fp32 states instead of 8-bit ones",
};

/// `max_unorm` of bitsandbytes: above zero adds a 1-value fp32 `unorm_vec`.
pub const MAX_UNORM_OPTION: OptionSpec = OptionSpec {
    key: "max_unorm",
    kind: OptionKind::Float,
    default: "0",
    help: "update-norm clipping; above 0 adds an fp32 `unorm_vec` [1] per tensor",
};

/// The options of bitsandbytes' 8-bit optimizers.
pub const BNB_OPTIONS: &[OptionSpec] = &[MIN_8BIT_SIZE_OPTION, MAX_UNORM_OPTION];

/// `amsgrad` of torchao's AdamW: adds a quantized `max_exp_avg_sq`.
pub const AMSGRAD_OPTION: OptionSpec = OptionSpec {
    key: "amsgrad",
    kind: OptionKind::Flag,
    default: "false",
    help: "adds a third buffer, `max_exp_avg_sq`, quantized like the others",
};

/// The options of torchao's AdamW4bit.
pub const TORCHAO_4BIT_OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        key: "block_size",
        kind: OptionKind::PositiveCount,
        default: "128",
        help: "values per fp32 scale; a tensor stays unquantized unless its size is a multiple",
    },
    AMSGRAD_OPTION,
];

/// The options of torchao's AdamWFp8.
pub const TORCHAO_FP8_OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        key: "block_size",
        kind: OptionKind::PositiveCount,
        default: "256",
        help: "values per fp32 scale; a tensor stays unquantized unless its size is a multiple",
    },
    AMSGRAD_OPTION,
];

const _: () = assert!(spells(MIN_8BIT_SIZE_OPTION.default, MIN_8BIT_SIZE));
const _: () = assert!(spells(TORCHAO_4BIT_OPTIONS[0].default, TORCHAO_4BIT_BLOCK));
const _: () = assert!(spells(TORCHAO_FP8_OPTIONS[0].default, TORCHAO_FP8_BLOCK));

/// `ceil(n / block)`: the number of blocks of `block` values covering `n`.
fn blocks(n: u64, block: u64) -> u64 {
    n.div_ceil(block)
}

/// bitsandbytes' 8-bit states for one tensor of n values, one `(state,
/// absmax)` pair of names per moment: if n < `min_8bit_size`, each state is
/// fp32 of the parameter's shape; otherwise each is uint8 of the parameter's
/// shape plus an fp32 `absmax` [ceil(n / 256)]. `max_unorm > 0` adds an fp32
/// `unorm_vec` [1]. The state dtype is ignored: bitsandbytes fixes both.
/// `step` is a python int; the `qmap` entries are references to the
/// optimizer-wide maps of [`bnb_qmaps`].
///
/// Bytes per moment of a large tensor: n + 4 x ceil(n / 256).
/// Source: bitsandbytes 0.50 `bitsandbytes/optim/optimizer.py`,
/// `Optimizer2State.init_state` / `Optimizer1State.init_state`.
fn bnb_states(
    context: &StateContext,
    moments: &[(&'static str, &'static str)],
) -> Result<Vec<StateTensor>> {
    let n = context.elements();
    let mut states = Vec::new();
    for (state, absmax) in moments {
        if n < context.options.count(MIN_8BIT_SIZE_OPTION.key)? {
            states.push(context.like_param_in(*state, DType::Fp32));
        } else {
            states.push(context.like_param_in(*state, DType::Uint8));
            states.push(context.tensor(*absmax, vec![blocks(n, BNB_BLOCK)], DType::Fp32)?);
        }
    }
    if context.options.enabled(MAX_UNORM_OPTION.key)? {
        states.push(context.tensor("unorm_vec", vec![1], DType::Fp32)?);
    }
    Ok(states)
}

/// bitsandbytes' two-state optimizers (AdamW8bit, PagedAdamW8bit): `state1`
/// (first moment) and `state2` (second moment); see `bnb_states`.
pub fn bnb_two_states(context: &StateContext) -> Result<Vec<StateTensor>> {
    bnb_states(context, &[("state1", "absmax1"), ("state2", "absmax2")])
}

/// bitsandbytes' 32-bit two-state optimizers (`PagedAdamW`, `optim_bits=32`):
/// `state1` and `state2` fp32 of the parameter's shape for every tensor,
/// whatever the parameter dtype (`Optimizer2State.init_state`: `dtype =
/// torch.float32` when `optim_bits == 32`); no `absmax`, no quantization map;
/// `step` is a python int. Paged or not, the bytes are the same: see
/// `PAGED_ADAMW` in the catalogue for where they live.
pub fn bnb_32bit_two_states(context: &StateContext) -> Result<Vec<StateTensor>> {
    Ok(vec![
        context.like_param_in("state1", DType::Fp32),
        context.like_param_in("state2", DType::Fp32),
    ])
}

/// bitsandbytes' one-state optimizers (Lion8bit): `state1` only; see `bnb_states`.
pub fn bnb_one_state(context: &StateContext) -> Result<Vec<StateTensor>> {
    bnb_states(context, &[("state1", "absmax1")])
}

/// bitsandbytes' quantization maps, kept once per optimizer: `dynamic` and
/// `udynamic`, 256 fp32 values each, both even for one-state optimizers,
/// created when the first tensor of at least `min_8bit_size` values is seen.
///
/// Source: bitsandbytes 0.50 `bitsandbytes/optim/optimizer.py`, `fill_qmap`
/// and `init_state` (`self.name2qmap[...].to(p.device)`).
pub fn bnb_qmaps(context: &GlobalContext) -> Result<Vec<StateTensor>> {
    if context.tensors == 0
        || context.largest.0 < context.options.count(MIN_8BIT_SIZE_OPTION.key)?
    {
        return Ok(Vec::new());
    }
    Ok(["name2qmap.dynamic", "name2qmap.udynamic"]
        .into_iter()
        .map(|name| StateTensor::device(name, Shape::vector(BNB_QMAP_VALUES), DType::Fp32))
        .collect())
}

/// How torchao stores one quantized buffer.
#[derive(Debug, Clone, Copy)]
enum TorchaoCodes {
    /// `OptimState4bit`: codes uint8 [n / 2], scale fp32 [n / block], qmap fp32 [16].
    FourBit,
    /// `OptimStateFp8`: codes float8_e4m3fn of the parameter's shape, scale fp32 [n / block].
    Fp8,
}

/// One torchao buffer (`_AdamBase._new_buffer`): quantized only when n >=
/// 4096 and n is a multiple of the block size, else `zeros_like(p)` in the
/// state dtype.
fn torchao_buffer(
    context: &StateContext,
    name: &'static str,
    codes: TorchaoCodes,
) -> Result<Vec<StateTensor>> {
    let n = context.elements();
    let block = context.options.positive_count("block_size")?;
    if n < TORCHAO_MIN_QUANT_NUMEL || !n.is_multiple_of(block) {
        return Ok(vec![context.like_param(name)]);
    }
    let scale = context.tensor(format!("{name}.scale"), vec![n / block], DType::Fp32)?;
    Ok(match codes {
        TorchaoCodes::FourBit => vec![
            context.tensor(
                format!("{name}.codes"),
                vec![n / CODES_PER_BYTE_4BIT],
                DType::Uint8,
            )?,
            scale,
            context.tensor(
                format!("{name}.qmap"),
                vec![TORCHAO_4BIT_QMAP_VALUES],
                DType::Fp32,
            )?,
        ],
        TorchaoCodes::Fp8 => vec![
            context.like_param_in(format!("{name}.codes"), DType::Fp8E4m3),
            scale,
        ],
    })
}

/// torchao's quantized AdamW: a 0-d fp32 `step` created on the host
/// (`torch.tensor(0.0)`), then `exp_avg`, `exp_avg_sq` (and
/// `max_exp_avg_sq` with amsgrad), each a torchao buffer.
fn torchao_adamw(context: &StateContext, codes: TorchaoCodes) -> Result<Vec<StateTensor>> {
    let mut states = vec![context.counter("step")];
    states.extend(torchao_buffer(context, "exp_avg", codes)?);
    states.extend(torchao_buffer(context, "exp_avg_sq", codes)?);
    if context.options.flag(AMSGRAD_OPTION.key) {
        states.extend(torchao_buffer(context, "max_exp_avg_sq", codes)?);
    }
    Ok(states)
}

/// torchao's AdamW4bit: per quantized buffer of n values, n / 2 bytes of
/// codes, 4 x n / 128 bytes of scales and a 16-value fp32 map.
///
/// Source: torchao 0.18 `torchao/optim/adam.py` (`_AdamBase`, `AdamW4bit`),
/// `torchao/optim/subclass_4bit.py` (`OptimState4bit.zeros`).
pub fn torchao_4bit(context: &StateContext) -> Result<Vec<StateTensor>> {
    torchao_adamw(context, TorchaoCodes::FourBit)
}

/// torchao's AdamWFp8: per quantized buffer of n values, n bytes of
/// float8_e4m3fn codes and 4 x n / 256 bytes of scales.
///
/// Source: torchao 0.18 `torchao/optim/adam.py` (`_AdamBase`, `AdamWFp8`),
/// `torchao/optim/subclass_fp8.py` (`OptimStateFp8.zeros`).
pub fn torchao_fp8(context: &StateContext) -> Result<Vec<StateTensor>> {
    torchao_adamw(context, TorchaoCodes::Fp8)
}

/// torchao turns each param group's learning rate into a 0-d fp32 tensor on
/// the host (`_AdamBase.add_param_group`); trainmem has one group.
pub fn torchao_lr(context: &GlobalContext) -> Result<Vec<StateTensor>> {
    if context.tensors == 0 {
        return Ok(Vec::new());
    }
    Ok(vec![StateTensor {
        location: Location::Host,
        ..StateTensor::device("param_groups[0].lr", Shape::scalar(), DType::Fp32)
    }])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Role, Tensor};
    use crate::optimizer::{Optimizer, Options};

    fn bytes(optimizer: &str, dims: &[u64], dtype: DType, options: &[&str]) -> u64 {
        let optimizer = Optimizer::find(optimizer).unwrap();
        let pairs: Vec<String> = options.iter().map(|s| s.to_string()).collect();
        let options = Options::resolve(optimizer, &pairs).unwrap();
        let tensor = Tensor::new("w", Shape::new(dims.to_vec()).unwrap(), Role::Other);
        optimizer
            .states(&tensor, dtype, &options)
            .unwrap()
            .iter()
            .map(|s| s.dtype.size_of(s.shape.elements()).unwrap().0)
            .sum()
    }

    /// A [4096, 4096] matrix under AdamW8bit: 2 x (16,777,216 + 4 x 65,536).
    #[test]
    fn eight_bit_states_are_a_byte_plus_a_block_scale() {
        assert_eq!(
            bytes("adamw-8bit", &[4096, 4096], DType::Bf16, &[]),
            2 * (16_777_216 + 4 * 65_536)
        );
        // 5000 values: ceil(5000 / 256) = 20 blocks.
        assert_eq!(bytes("lion-8bit", &[5000], DType::Bf16, &[]), 5000 + 4 * 20);
        // Under min_8bit_size: fp32 whatever the parameter dtype.
        assert_eq!(bytes("adamw-8bit", &[100], DType::Bf16, &[]), 2 * 400);
        assert_eq!(
            bytes("adamw-8bit", &[5000], DType::Bf16, &["min_8bit_size=10000"]),
            2 * 20_000
        );
        assert_eq!(
            bytes("adamw-8bit", &[100], DType::Bf16, &["max_unorm=1.0"]),
            2 * 400 + 4
        );
    }

    /// torchao 4-bit on [256, 512]: per buffer 65,536 + 4 x 1,024 + 64 bytes,
    /// plus the 4-byte host step.
    #[test]
    fn four_bit_buffers_are_half_a_byte_plus_scales_and_a_map() {
        assert_eq!(
            bytes("adamw-4bit", &[256, 512], DType::Bf16, &[]),
            4 + 2 * (65_536 + 4_096 + 64)
        );
        // 300 x 77 = 23,100 is not a multiple of 128: plain bf16 buffers.
        assert_eq!(
            bytes("adamw-4bit", &[300, 77], DType::Bf16, &[]),
            4 + 2 * 2 * 23_100
        );
        assert_eq!(
            bytes("adamw-fp8", &[256, 512], DType::Bf16, &[]),
            4 + 2 * (131_072 + 4 * 512)
        );
        assert_eq!(
            bytes("adamw-fp8", &[256, 512], DType::Bf16, &["amsgrad=true"]),
            4 + 3 * (131_072 + 4 * 512)
        );
    }

    #[test]
    fn a_zero_block_size_is_an_error() {
        let optimizer = Optimizer::find("adamw-4bit").unwrap();
        let error = Options::resolve(optimizer, &["block_size=0".to_string()]).unwrap_err();
        assert!(error.to_string().contains("block_size=0"), "{error}");
    }
}
