//! torchtune's QLoRA model setup as its allocations, for the step
//! timeline's load phase (issue 24, mechanism 3).
//!
//! `recipes/lora_finetune_single_device.py` at torchtune 0914d5c (April
//! 2024, `torchao==0.1`), `_setup_model` lines 254-269: the model is built on
//! the device in bf16 (`with utils.set_default_dtype(self._dtype),
//! self._device: model = config.instantiate(cfg_model)`), then
//! `model.load_state_dict(base_model_state_dict, strict=False)`. What reaches
//! the device, in order ([`setup_events`]):
//!
//! 1. `lora_llama2` (`torchtune/models/llama2/_component_builders.py` lines
//!    198-240) builds one decoder layer: each quantized `LoRALinear` creates
//!    an `nn.Linear` bf16 weight and `to_nf4`s it (`_create_weight_and_bias`,
//!    `torchtune/modules/peft/lora.py` lines 88-101); then the embedding, the
//!    output head and the final norm.
//! 2. `TransformerDecoder` deep-copies that layer once per layer
//!    (`_get_clones`, `torchtune/modules/transformer.py` line 93); the copy
//!    of an `NF4Tensor` parameter is torchtune's `clone` override,
//!    `to_nf4(get_original_weight())` (`torchtune/utils/_register_nf4_dispatch_ops.py`
//!    lines 12-20), whose result `deepcopy` copies once more. The prototype
//!    layer is freed when the builder returns.
//! 3. `load_state_dict`: each `NF4Tensor`'s `copy_` is torchtune's
//!    `inplace_copy` (same file, lines 23-43):
//!    `to_nf4(args[0][1].to(dest_tensor.device))`, the checkpoint tensor
//!    copied to the device, cast to bf16 and quantized; the new quantized
//!    tensors replace the old ones. Every other parameter is `copy_`'d in
//!    place.
//!
//! torchao 0.1's `to_nf4` (`torchao/dtypes/nf4tensor.py` at v0.1,
//! `quantize_tensor_nearest` lines 438-447) quantizes a whole weight at once:
//! `(value - nf4).abs()` holds 16 bf16 values per weight element, twice, so
//! quantizing an n-element weight peaks at about 68n bytes; torchao 0.2
//! quantizes in chunks of 1024**2 values ("perform in chunks (#196)",
//! 2024-05-01), which this does not describe. The tables below are every
//! allocation and free of each of these operations, measured with torch's
//! profiler on CPU (`tools/torchtune_setup_tables.py`) as sizes linear in
//! n; the CPU's reduction scratch (`n / 16` bytes in `mean`) is in them, a
//! CUDA reduction's is not. Replayed whole, they reproduce the measured
//! streams of `tools/measure_torchtune_setup.py` (`tests/setup_stream.rs`).
//!
//! Approximate: each decoder layer's other parameters (norms, LoRA
//! adapters) are one allocation after its quantized linears, where the real
//! builder makes them between the linears; the rotary tables each attention
//! keeps (2 MiB per layer for Llama 2) are not counted.

use crate::error::{Error, Result};
use crate::units::Bytes;

/// The most quantized linears one decoder layer has (Llama: seven).
pub const MOST_LINEARS: usize = 8;

/// The five tensors an `NF4Tensor` keeps, in `inplace_copy`'s assignment
/// order: `quantized_scalers`, `quantization_factor`, `scaler_mean`,
/// `quantized_data`, `nf4`.
const PIECES: usize = 5;

/// The size of an allocation for a weight of n elements.
#[derive(Debug, Clone, Copy)]
enum Size {
    /// n · numerator / denominator bytes, rounded up.
    Of(u64, u64),
    /// A fixed number of bytes.
    Fixed(u64),
}

/// One step of a table.
#[derive(Debug, Clone, Copy)]
enum Op {
    /// A temporary (or the copy a later step frees).
    Alloc(Size),
    /// One of the `NF4Tensor`'s five tensors ([`PIECES`]), which it keeps.
    Keep(Size, usize),
    /// Frees the table's allocation of that index.
    Free(usize),
    /// Frees that piece of the weight's previous `NF4Tensor`.
    FreeOld(usize),
}

/// torchao 0.1 `to_nf4` of a bf16 weight (`NF4Tensor.from_tensor`: `double_quantize_scalers`, `convert_to_norm_float_weight`).
/// 36 allocations; kept: [0, 4, 19, 23, 35].
const TO_NF4: &[Op] = &[
    Op::Keep(Size::Fixed(32), 4),
    Op::Alloc(Size::Of(2, 1)),
    Op::Alloc(Size::Of(1, 32)),
    Op::Alloc(Size::Of(1, 8)),
    Op::Free(1),
    Op::Free(3),
    Op::Keep(Size::Fixed(2), 2),
    Op::Alloc(Size::Fixed(4)),
    Op::Alloc(Size::Of(1, 16)),
    Op::Free(6),
    Op::Alloc(Size::Fixed(8)),
    Op::Alloc(Size::Fixed(4)),
    Op::Free(8),
    Op::Free(7),
    Op::Free(5),
    Op::Alloc(Size::Of(1, 32)),
    Op::Free(2),
    Op::Alloc(Size::Of(1, 32)),
    Op::Alloc(Size::Of(1, 8192)),
    Op::Alloc(Size::Of(1, 2048)),
    Op::Free(10),
    Op::Free(12),
    Op::Alloc(Size::Fixed(8)),
    Op::Alloc(Size::Fixed(2)),
    Op::Alloc(Size::Of(1, 32)),
    Op::Free(14),
    Op::Free(13),
    Op::Alloc(Size::Of(1, 32)),
    Op::Alloc(Size::Fixed(8)),
    Op::Alloc(Size::Fixed(2)),
    Op::Keep(Size::Of(1, 32), 1),
    Op::Free(18),
    Op::Free(17),
    Op::Free(16),
    Op::Free(15),
    Op::Alloc(Size::Of(1, 32)),
    Op::Alloc(Size::Of(1, 32)),
    Op::Free(20),
    Op::Alloc(Size::Of(1, 32)),
    Op::Free(21),
    Op::Keep(Size::Of(1, 64), 0),
    Op::Free(9),
    Op::Free(11),
    Op::Free(22),
    Op::Alloc(Size::Of(2, 1)),
    Op::Alloc(Size::Of(1, 32)),
    Op::Alloc(Size::Of(1, 8)),
    Op::Free(24),
    Op::Free(26),
    Op::Alloc(Size::Of(2, 1)),
    Op::Alloc(Size::Of(32, 1)),
    Op::Alloc(Size::Of(32, 1)),
    Op::Free(28),
    Op::Alloc(Size::Of(2, 1)),
    Op::Alloc(Size::Of(8, 1)),
    Op::Free(30),
    Op::Free(29),
    Op::Alloc(Size::Fixed(8)),
    Op::Alloc(Size::Of(4, 1)),
    Op::Free(32),
    Op::Alloc(Size::Of(4, 1)),
    Op::Free(33),
    Op::Keep(Size::Of(1, 2), 3),
    Op::Free(25),
    Op::Free(27),
    Op::Free(31),
    Op::Free(34),
];
/// torchao 0.1 `NF4Tensor.get_original_weight` (the dequantization `linear_nf4` runs in forward and backward): its last allocation is the bf16 weight it returns.
/// 18 allocations; kept: [17].
const GET_ORIGINAL_WEIGHT: &[Op] = &[
    Op::Alloc(Size::Fixed(8)),
    Op::Alloc(Size::Fixed(1)),
    Op::Alloc(Size::Of(1, 2)),
    Op::Free(1),
    Op::Free(0),
    Op::Alloc(Size::Of(4, 1)),
    Op::Free(2),
    Op::Alloc(Size::Fixed(8)),
    Op::Alloc(Size::Fixed(1)),
    Op::Alloc(Size::Of(1, 2)),
    Op::Free(5),
    Op::Free(4),
    Op::Alloc(Size::Of(4, 1)),
    Op::Free(6),
    Op::Alloc(Size::Of(1, 1)),
    Op::Alloc(Size::Of(1, 1)),
    Op::Alloc(Size::Of(1, 32)),
    Op::Alloc(Size::Of(1, 32)),
    Op::Free(10),
    Op::Alloc(Size::Of(1, 32)),
    Op::Free(11),
    Op::Alloc(Size::Of(1, 1)),
    Op::Alloc(Size::Of(1, 1)),
    Op::Free(13),
    Op::Alloc(Size::Of(1, 1)),
    Op::Alloc(Size::Of(1, 1)),
    Op::Free(15),
    Op::Alloc(Size::Of(2, 1)),
    Op::Free(3),
    Op::Free(7),
    Op::Free(8),
    Op::Free(9),
    Op::Free(12),
    Op::Free(14),
    Op::Free(16),
];
/// `copy.deepcopy` of an `NF4Tensor` parameter: torchtune's `clone` (`get_original_weight`, then `to_nf4`), whose result `deepcopy` copies tensor by tensor.
/// 64 allocations; kept: [54, 56, 58, 60, 62].
const DEEPCOPY: &[Op] = &[
    Op::Alloc(Size::Fixed(8)),
    Op::Alloc(Size::Fixed(1)),
    Op::Alloc(Size::Of(1, 2)),
    Op::Free(1),
    Op::Free(0),
    Op::Alloc(Size::Of(4, 1)),
    Op::Free(2),
    Op::Alloc(Size::Fixed(8)),
    Op::Alloc(Size::Fixed(1)),
    Op::Alloc(Size::Of(1, 2)),
    Op::Free(5),
    Op::Free(4),
    Op::Alloc(Size::Of(4, 1)),
    Op::Free(6),
    Op::Alloc(Size::Of(1, 1)),
    Op::Alloc(Size::Of(1, 1)),
    Op::Alloc(Size::Of(1, 32)),
    Op::Alloc(Size::Of(1, 32)),
    Op::Free(10),
    Op::Alloc(Size::Of(1, 32)),
    Op::Free(11),
    Op::Alloc(Size::Of(1, 1)),
    Op::Alloc(Size::Of(1, 1)),
    Op::Free(13),
    Op::Alloc(Size::Of(1, 1)),
    Op::Alloc(Size::Of(1, 1)),
    Op::Free(15),
    Op::Alloc(Size::Of(2, 1)),
    Op::Free(3),
    Op::Free(7),
    Op::Free(8),
    Op::Free(9),
    Op::Free(12),
    Op::Free(14),
    Op::Free(16),
    Op::Alloc(Size::Fixed(32)),
    Op::Alloc(Size::Of(2, 1)),
    Op::Alloc(Size::Of(1, 32)),
    Op::Alloc(Size::Of(1, 8)),
    Op::Free(19),
    Op::Free(21),
    Op::Alloc(Size::Fixed(2)),
    Op::Alloc(Size::Fixed(4)),
    Op::Alloc(Size::Of(1, 16)),
    Op::Free(24),
    Op::Alloc(Size::Fixed(8)),
    Op::Alloc(Size::Fixed(4)),
    Op::Free(26),
    Op::Free(25),
    Op::Free(23),
    Op::Alloc(Size::Of(1, 32)),
    Op::Free(20),
    Op::Alloc(Size::Of(1, 32)),
    Op::Alloc(Size::Of(1, 8192)),
    Op::Alloc(Size::Of(1, 2048)),
    Op::Free(28),
    Op::Free(30),
    Op::Alloc(Size::Fixed(8)),
    Op::Alloc(Size::Fixed(2)),
    Op::Alloc(Size::Of(1, 32)),
    Op::Free(32),
    Op::Free(31),
    Op::Alloc(Size::Of(1, 32)),
    Op::Alloc(Size::Fixed(8)),
    Op::Alloc(Size::Fixed(2)),
    Op::Alloc(Size::Of(1, 32)),
    Op::Free(36),
    Op::Free(35),
    Op::Free(34),
    Op::Free(33),
    Op::Alloc(Size::Of(1, 32)),
    Op::Alloc(Size::Of(1, 32)),
    Op::Free(38),
    Op::Alloc(Size::Of(1, 32)),
    Op::Free(39),
    Op::Alloc(Size::Of(1, 64)),
    Op::Free(27),
    Op::Free(29),
    Op::Free(40),
    Op::Alloc(Size::Of(2, 1)),
    Op::Alloc(Size::Of(1, 32)),
    Op::Alloc(Size::Of(1, 8)),
    Op::Free(42),
    Op::Free(44),
    Op::Alloc(Size::Of(2, 1)),
    Op::Alloc(Size::Of(32, 1)),
    Op::Alloc(Size::Of(32, 1)),
    Op::Free(46),
    Op::Alloc(Size::Of(2, 1)),
    Op::Alloc(Size::Of(8, 1)),
    Op::Free(48),
    Op::Free(47),
    Op::Alloc(Size::Fixed(8)),
    Op::Alloc(Size::Of(4, 1)),
    Op::Free(50),
    Op::Alloc(Size::Of(4, 1)),
    Op::Free(51),
    Op::Alloc(Size::Of(1, 2)),
    Op::Free(43),
    Op::Free(45),
    Op::Free(49),
    Op::Free(52),
    Op::Free(17),
    Op::Keep(Size::Of(1, 64), 0),
    Op::Alloc(Size::Fixed(1)),
    Op::Free(55),
    Op::Keep(Size::Of(1, 32), 1),
    Op::Alloc(Size::Fixed(2)),
    Op::Free(57),
    Op::Keep(Size::Fixed(2), 2),
    Op::Alloc(Size::Fixed(2)),
    Op::Free(59),
    Op::Keep(Size::Of(1, 2), 3),
    Op::Alloc(Size::Fixed(1)),
    Op::Free(61),
    Op::Keep(Size::Fixed(32), 4),
    Op::Alloc(Size::Fixed(2)),
    Op::Free(63),
    Op::Free(41),
    Op::Free(37),
    Op::Free(22),
    Op::Free(53),
    Op::Free(18),
];
/// torchtune's `inplace_copy` of an fp16 checkpoint tensor: its copy on the device (index 0), the bf16 cast `to_nf4` makes (index 1), `to_nf4`, then the previous pieces dropped.
/// 38 allocations; kept: [2, 6, 21, 25, 37].
const INPLACE_COPY: &[Op] = &[
    Op::Alloc(Size::Of(2, 1)),
    Op::Alloc(Size::Of(2, 1)),
    Op::Keep(Size::Fixed(32), 4),
    Op::Alloc(Size::Of(2, 1)),
    Op::Alloc(Size::Of(1, 32)),
    Op::Alloc(Size::Of(1, 8)),
    Op::Free(3),
    Op::Free(5),
    Op::Keep(Size::Fixed(2), 2),
    Op::Alloc(Size::Fixed(4)),
    Op::Alloc(Size::Of(1, 16)),
    Op::Free(8),
    Op::Alloc(Size::Fixed(8)),
    Op::Alloc(Size::Fixed(4)),
    Op::Free(10),
    Op::Free(9),
    Op::Free(7),
    Op::Alloc(Size::Of(1, 32)),
    Op::Free(4),
    Op::Alloc(Size::Of(1, 32)),
    Op::Alloc(Size::Of(1, 8192)),
    Op::Alloc(Size::Of(1, 2048)),
    Op::Free(12),
    Op::Free(14),
    Op::Alloc(Size::Fixed(8)),
    Op::Alloc(Size::Fixed(2)),
    Op::Alloc(Size::Of(1, 32)),
    Op::Free(16),
    Op::Free(15),
    Op::Alloc(Size::Of(1, 32)),
    Op::Alloc(Size::Fixed(8)),
    Op::Alloc(Size::Fixed(2)),
    Op::Keep(Size::Of(1, 32), 1),
    Op::Free(20),
    Op::Free(19),
    Op::Free(18),
    Op::Free(17),
    Op::Alloc(Size::Of(1, 32)),
    Op::Alloc(Size::Of(1, 32)),
    Op::Free(22),
    Op::Alloc(Size::Of(1, 32)),
    Op::Free(23),
    Op::Keep(Size::Of(1, 64), 0),
    Op::Free(11),
    Op::Free(13),
    Op::Free(24),
    Op::Alloc(Size::Of(2, 1)),
    Op::Alloc(Size::Of(1, 32)),
    Op::Alloc(Size::Of(1, 8)),
    Op::Free(26),
    Op::Free(28),
    Op::Alloc(Size::Of(2, 1)),
    Op::Alloc(Size::Of(32, 1)),
    Op::Alloc(Size::Of(32, 1)),
    Op::Free(30),
    Op::Alloc(Size::Of(2, 1)),
    Op::Alloc(Size::Of(8, 1)),
    Op::Free(32),
    Op::Free(31),
    Op::Alloc(Size::Fixed(8)),
    Op::Alloc(Size::Of(4, 1)),
    Op::Free(34),
    Op::Alloc(Size::Of(4, 1)),
    Op::Free(35),
    Op::Keep(Size::Of(1, 2), 3),
    Op::Free(27),
    Op::Free(29),
    Op::Free(33),
    Op::Free(36),
    Op::Free(0),
    Op::Free(1),
    Op::FreeOld(0),
    Op::FreeOld(1),
    Op::FreeOld(2),
    Op::FreeOld(3),
    Op::FreeOld(4),
];

/// torchao 0.1 quantizes bf16 weights only (`NF4Tensor.from_tensor`:
/// `assert inpt_tensor.dtype == torch.bfloat16`): the `nn.Linear` weight a
/// quantized `LoRALinear` first creates is bf16.
const BF16: u64 = 2;

/// What torchtune's setup builds (see the module's documentation).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TorchtuneSetup {
    /// The elements of each quantized linear of one decoder layer, in
    /// order: the first [`TorchtuneSetup::count`] entries.
    pub linears: [u64; MOST_LINEARS],
    /// How many of `linears` there are.
    pub count: usize,
    /// The decoder layers, each a deep copy of the first.
    pub layers: u64,
    /// Each decoder layer's parameters other than its quantized weights
    /// (norms, LoRA adapters).
    pub layer_other: Bytes,
    /// The parameters outside the layers (embedding, final norm, output head).
    pub outside: Bytes,
    /// Bytes of a checkpoint element (Llama-2-7b-hf's `.bin` files: fp16, 2).
    pub checkpoint_element: u64,
    /// Whether `to_nf4` casts the checkpoint's copy to bf16 (a checkpoint not in bf16).
    pub checkpoint_cast: bool,
}

/// One allocation or free of the setup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetupEvent {
    /// An allocation: a weight (`kept`: an `NF4Tensor`'s tensors, or other
    /// parameters) or a temporary.
    Alloc { bytes: u64, kept: bool },
    /// Frees the allocation of that index (counting allocations from 0).
    Free(usize),
}

const WHAT: &str = "torchtune's setup";

fn bytes_of(size: Size, n: u64) -> Result<u64> {
    match size {
        Size::Of(numerator, denominator) => n
            .checked_mul(numerator)
            .map(|b| b.div_ceil(denominator))
            .ok_or_else(|| Error::overflow(WHAT)),
        Size::Fixed(bytes) => Ok(bytes),
    }
}

/// The events as they are made.
#[derive(Default)]
struct Recorder {
    events: Vec<SetupEvent>,
    allocations: usize,
}

impl Recorder {
    fn alloc(&mut self, bytes: u64, kept: bool) -> Option<usize> {
        if bytes == 0 {
            return None;
        }
        self.events.push(SetupEvent::Alloc { bytes, kept });
        self.allocations += 1;
        Some(self.allocations - 1)
    }

    fn free(&mut self, index: Option<usize>) {
        if let Some(index) = index {
            self.events.push(SetupEvent::Free(index));
        }
    }

    /// Runs `table` for a weight of `n` elements; `old` is its previous
    /// `NF4Tensor`, `sizes` replaces the sizes of the table's first
    /// allocations (`None`: not made). Returns the kept pieces.
    fn run(
        &mut self,
        table: &[Op],
        n: u64,
        old: [Option<usize>; PIECES],
        sizes: &[Option<u64>],
    ) -> Result<[Option<usize>; PIECES]> {
        let mut made: Vec<Option<usize>> = Vec::with_capacity(table.len());
        let mut kept = [None; PIECES];
        for op in table {
            match *op {
                Op::Alloc(size) => {
                    let bytes = match sizes.get(made.len()) {
                        Some(given) => *given,
                        None => Some(bytes_of(size, n)?),
                    };
                    made.push(bytes.and_then(|b| self.alloc(b, false)));
                }
                Op::Keep(size, piece) => {
                    let index = self.alloc(bytes_of(size, n)?, true);
                    made.push(index);
                    if let Some(slot) = kept.get_mut(piece) {
                        *slot = index;
                    }
                }
                Op::Free(index) => self.free(made.get(index).copied().flatten()),
                Op::FreeOld(piece) => self.free(old.get(piece).copied().flatten()),
            }
        }
        Ok(kept)
    }
}

/// Every allocation and free of torchtune's setup, in order.
pub fn setup_events(setup: &TorchtuneSetup) -> Result<Vec<SetupEvent>> {
    let linears = setup.linears.get(..setup.count).unwrap_or(&setup.linears);
    let mut r = Recorder::default();
    // The prototype layer: each quantized linear's bf16 weight, quantized,
    // then freed when `_create_weight_and_bias` returns.
    let mut prototype = Vec::with_capacity(linears.len());
    for &n in linears {
        let weight = r.alloc(
            n.checked_mul(BF16).ok_or_else(|| Error::overflow(WHAT))?,
            false,
        );
        prototype.push(r.run(TO_NF4, n, [None; PIECES], &[])?);
        r.free(weight);
    }
    let prototype_other = r.alloc(setup.layer_other.0, true);
    r.alloc(setup.outside.0, true);
    // `_get_clones`: a deep copy per layer.
    let mut layers = Vec::new();
    for _ in 0..setup.layers {
        let mut layer = Vec::with_capacity(linears.len());
        for &n in linears {
            layer.push(r.run(DEEPCOPY, n, [None; PIECES], &[])?);
        }
        r.alloc(setup.layer_other.0, true);
        layers.push(layer);
    }
    // The builder returns: the prototype layer goes.
    for pieces in prototype {
        for piece in pieces {
            r.free(piece);
        }
    }
    r.free(prototype_other);
    // `load_state_dict`, layer by layer.
    let copy = linears
        .iter()
        .map(|&n| n.checked_mul(setup.checkpoint_element))
        .collect::<Option<Vec<u64>>>()
        .ok_or_else(|| Error::overflow(WHAT))?;
    for layer in &mut layers {
        for ((pieces, &n), &copied) in layer.iter_mut().zip(linears).zip(&copy) {
            let cast = setup.checkpoint_cast.then(|| n.saturating_mul(BF16));
            *pieces = r.run(INPLACE_COPY, n, *pieces, &[Some(copied), cast])?;
        }
    }
    Ok(r.events)
}

/// [`setup_events`] as the integer stream [`super::replay_stream`] reads.
pub fn setup_stream(setup: &TorchtuneSetup) -> Result<Vec<i64>> {
    setup_events(setup)?
        .into_iter()
        .map(|event| match event {
            SetupEvent::Alloc { bytes, .. } => i64::try_from(bytes),
            SetupEvent::Free(index) => i64::try_from(index).map(|i| -(i + 1)),
        })
        .collect::<std::result::Result<Vec<i64>, _>>()
        .map_err(|_| Error::overflow(WHAT))
}

/// The most `linear_nf4` holds at once to dequantize a weight of `n`
/// elements (`weight.to(input.dtype)` is `get_original_weight` under
/// torchao 0.1, lines 409-436): about 14n bytes, the bf16 weight included.
pub fn dequantize_peak(n: u64) -> Result<Bytes> {
    let mut sizes: Vec<u64> = Vec::new();
    let (mut live, mut high) = (0u64, 0u64);
    for op in GET_ORIGINAL_WEIGHT {
        match *op {
            Op::Alloc(size) | Op::Keep(size, _) => {
                let bytes = bytes_of(size, n)?;
                sizes.push(bytes);
                live = live
                    .checked_add(bytes)
                    .ok_or_else(|| Error::overflow(WHAT))?;
                high = high.max(live);
            }
            Op::Free(index) => live = live.saturating_sub(sizes.get(index).copied().unwrap_or(0)),
            Op::FreeOld(_) => {}
        }
    }
    Ok(Bytes(high))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Quantization;
    use crate::units::Count;

    /// What every table keeps is what trainmem prices torchao 0.1's
    /// `NF4Tensor` at, and quantizing peaks at about 68n.
    #[test]
    fn the_tables_keep_an_nf4_tensor_and_peak_at_68n() {
        let n = 4096 * 11_008;
        let stored = Quantization::Nf4Torchao01.bytes(Count(n), 4096).unwrap().0;
        for table in [TO_NF4, DEEPCOPY, INPLACE_COPY] {
            let kept: u64 = table
                .iter()
                .filter_map(|op| match op {
                    Op::Keep(size, _) => Some(bytes_of(*size, n).unwrap()),
                    _ => None,
                })
                .sum();
            assert_eq!(kept, stored);
        }
        let mut r = Recorder::default();
        r.run(TO_NF4, n, [None; PIECES], &[]).unwrap();
        let peak = super::super::replay_stream(
            &stream_of(&r.events),
            super::super::AllocatorOptions::default(),
        )
        .unwrap()
        .allocated
        .0;
        assert!(peak > 66 * n && peak < 67 * n, "{peak}");
        let dequantize = dequantize_peak(n).unwrap().0;
        assert!(dequantize > 14 * n && dequantize < 15 * n, "{dequantize}");
    }

    fn stream_of(events: &[SetupEvent]) -> Vec<i64> {
        events
            .iter()
            .map(|e| match e {
                SetupEvent::Alloc { bytes, .. } => *bytes as i64,
                SetupEvent::Free(i) => -(*i as i64 + 1),
            })
            .collect()
    }

    /// Every allocation that is not a weight is freed by the end, and
    /// every free frees a live allocation.
    #[test]
    fn the_setup_frees_all_its_temporaries() {
        let setup = TorchtuneSetup {
            linears: [512 * 512, 512 * 512, 1536 * 512, 0, 0, 0, 0, 0],
            count: 3,
            layers: 4,
            layer_other: Bytes(10_000),
            outside: Bytes(1_000_000),
            checkpoint_element: 2,
            checkpoint_cast: true,
        };
        let events = setup_events(&setup).unwrap();
        let peaks = super::super::replay_stream(
            &stream_of(&events),
            super::super::AllocatorOptions::default(),
        )
        .unwrap();
        let per_layer = 2 * Quantization::Nf4Torchao01
            .bytes(Count(512 * 512), 512)
            .unwrap()
            .0
            + Quantization::Nf4Torchao01
                .bytes(Count(1536 * 512), 512)
                .unwrap()
                .0
            + 10_000;
        assert_eq!(peaks.end.0, 4 * per_layer + 1_000_000);
    }
}
