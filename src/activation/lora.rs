//! Which linears keep their input: a frozen base and its LoRA adapters.
//!
//! A `Linear` saves its input only for its weight's gradient
//! (`MmBackward0.self`); a frozen linear does not. A norm's weight-gradient
//! operand (the normalized tensor) likewise goes with a frozen weight.
//!
//! peft's LoRA layer (`peft/tuners/lora/layer.py`, `Linear.forward`, peft
//! 0.21) computes, per adapter,
//! `x = self._cast_input_dtype(x, lora_A.weight.dtype)` then
//! `result = result + lora_B(lora_A(dropout(x))) * scaling`, where
//! `dropout` is `nn.Dropout(p)` for `lora_dropout > 0` and `nn.Identity`
//! for 0 (peft's default). So:
//! * adapters in the compute dtype without dropout: `lora_A` saves `x`
//!   itself, the storage the frozen base would have saved, shared by every
//!   adapter reading it;
//! * adapters in another dtype (peft's fp32 adapters under a bf16 base,
//!   `autocast_adapter_dtype=True`): `_cast_input_dtype` makes a copy of
//!   `x` per adapter, and `lora_A` saves that copy (`T x in` in the
//!   adapter's dtype); the compute-dtype `x` is saved by nobody;
//! * with dropout: each adapter saves its own dropped input (`T x in`, in
//!   the adapter's dtype) and the dropout mask: on the CPU, `F.dropout`
//!   multiplies by a noise tensor in the input dtype and `MulBackward0`
//!   saves it; on CUDA, `native_dropout` saves a 1-byte mask
//!   (`DropoutMask`, `kernels.rs`);
//! * `lora_B` saves `lora_A`'s `T x r` output, in the adapter's dtype.
//!
//! Measured on the CPU with real peft: `tests/fixtures/timeline/*__lora-*.json`.

use serde::Serialize;

use super::Workload;
use super::kernels::Kernels;
use super::parallel::Rank;
use super::tally::Tally;
use crate::error::{Error, Result};
use crate::units::Bytes;

/// peft's `lora_dropout`, a probability in [0, 1), kept in parts per
/// million so that a workload stays comparable (`Eq`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct LoraDropout(u32);

/// Parts per million in a probability of 1.
const PER_MILLION: f64 = 1_000_000.0;

impl LoraDropout {
    /// Reads a probability such as `0.05`; 1 and above, negative or
    /// unreadable values are refused (`nn.Dropout` accepts [0, 1], and
    /// p = 1 zeroes every adapter).
    pub fn parse(text: &str) -> Result<LoraDropout> {
        let invalid = |reason: &str| Error::InvalidValue {
            what: "--lora-dropout",
            value: text.to_string(),
            reason: reason.to_string(),
        };
        let p: f64 = text.trim().parse().map_err(|_| {
            invalid("give a probability such as `0.05` (0: peft's default, no dropout)")
        })?;
        if !(0.0..1.0).contains(&p) {
            return Err(invalid(
                "the probability must be at least 0 and below 1 (0: peft's default, no dropout)",
            ));
        }
        // In [0, 1e6): the cast cannot truncate out of range.
        Ok(LoraDropout((p * PER_MILLION).round() as u32))
    }

    /// Whether the adapters drop their input (`nn.Dropout`, not `nn.Identity`).
    pub fn is_active(self) -> bool {
        self.0 > 0
    }

    /// The probability.
    pub fn probability(self) -> f64 {
        f64::from(self.0) / PER_MILLION
    }
}

impl Serialize for LoraDropout {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_f64(self.probability())
    }
}

/// The trainable parts of the model, as activation memory sees them.
#[derive(Debug, Clone, Copy)]
pub struct Training<'a> {
    /// Whether the base weights (linears and norms) are frozen.
    pub frozen_base: bool,
    adapted: &'a [String],
    /// The LoRA rank r.
    pub rank: u64,
    /// Frozen quantized linears save their input anyway (bitsandbytes < 0.43.2).
    quantized_inputs_kept: bool,
    /// Bytes per element of what the adapters compute and save.
    pub adapter_element: u64,
    /// Whether each adapter saves its own input (a cast copy, or its dropped
    /// input) instead of sharing the compute-dtype input.
    pub own_inputs: bool,
    /// Whether the adapters drop their input (and save a mask).
    pub dropout: bool,
    /// Bytes per element of the tensor the dropout runs on (its mask's
    /// dtype on the CPU): the adapters' stored dtype, which peft casts the
    /// input to, even where autocast computes them in another.
    pub dropped_element: u64,
    /// One adapter on the fused q/k/v projection (litgpt's `LoRAQKVLinear`)
    /// instead of one per adapted projection; `None` for peft's.
    pub fused_qkv: Option<FusedQkv>,
}

/// litgpt's `LoRAQKVLinear` (`litgpt/lora.py` 0.5.13, lines 175-414): one
/// `lora_A` of `r · enabled` rows on the fused q/k/v input, `lora_B` as a
/// (grouped) `conv1d`, and `zero_pad` into the full q/k/v width.
///
/// What its autograd saves beyond peft's adapters (measured through
/// `saved_tensors_hooks`, `tools/measure_implementations.py`):
/// * one `lora_dropout` for all enabled parts (`forward`, line 405:
///   `F.linear(self.lora_dropout(x), self.lora_A)`): one dropped input and
///   one mask per layer, where peft drops the input once per adapted
///   projection;
/// * when some but not all of q, k and v are enabled, `zero_pad` (lines
///   288-326) runs `result.index_copy_(dim=-1, index=self.lora_ind,
///   source=x)`: `IndexCopyBackward0` saves its `source`, the `T x w`
///   output of `lora_B` (w the enabled parts' width, in the adapters'
///   dtype), and `index`, a fresh int64 clone of `lora_ind` of `w`
///   entries (line 286: `self._lora_ind.clone()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FusedQkv {
    /// The enabled parts' width w when `zero_pad` pads (some but not all of
    /// q, k, v enabled); 0 when all three are (`zero_pad` returns its input).
    pub padded_width: u64,
}

/// Bytes of an int64 index entry.
const INT64: u64 = 8;

impl FusedQkv {
    /// What `zero_pad`'s `index_copy_` saves for `tokens` rows with
    /// adapters of `element` bytes: the `T x w` source and the int64 index.
    pub fn padded(&self, tokens: u64, element: u64) -> Result<crate::units::Bytes> {
        let mut tally = super::tally::Tally::new();
        if self.padded_width > 0 {
            tally.tensor(&[element, tokens, self.padded_width])?;
            tally.tensor(&[INT64, self.padded_width])?;
        }
        Ok(tally.bytes())
    }
}

impl<'a> Training<'a> {
    /// The training of `workload`.
    ///
    /// litgpt's adapters compute in the model's dtype whatever their
    /// parameters' dtype (its `F.linear(x, self.lora_A)` casts nothing:
    /// under `bf16-true` both are bf16, under `bf16-mixed` autocast casts
    /// the weight), so they share the input unless they drop it.
    ///
    /// Under autocast (`--autocast`: HF Trainer's `bf16=True` over a bf16
    /// base with peft's fp32 adapters) peft still casts the input to the
    /// adapters' fp32 (`_cast_input_dtype`), drops that, and autocast casts
    /// it back for `lora_A`: each adapter saves its own half-precision copy
    /// (and the mask of the fp32 dropout), and computes in half precision.
    pub fn new(workload: &'a Workload) -> Training<'a> {
        // Under autocast over fp32 weights the adapters are fp32 like them.
        let base = if workload.autocast {
            workload.weights_dtype
        } else {
            workload.dtype
        };
        let stored = match workload.implementation {
            crate::architecture::Implementation::Litgpt => workload.dtype,
            _ => workload.lora_dtype.unwrap_or(base),
        };
        let adapter = if workload.autocast {
            workload.dtype
        } else {
            stored
        };
        let dropout = workload.lora_dropout.is_active();
        Training {
            frozen_base: workload.frozen_base,
            adapted: &workload.adapted,
            rank: workload.lora_rank,
            quantized_inputs_kept: workload.quantized_inputs_kept,
            adapter_element: adapter.bytes(),
            own_inputs: dropout || stored != workload.dtype,
            dropout,
            dropped_element: stored.bytes(),
            fused_qkv: None,
        }
    }

    /// Whether frozen quantized linears hold their input (bitsandbytes <
    /// 0.43.2), outside autograd's saved tensors
    /// ([`super::LayerActivations::held`]).
    pub fn holds_quantized_inputs(&self) -> bool {
        self.quantized_inputs_kept
    }

    /// Whether the linear `name` carries an adapter.
    pub fn is_adapted(&self, name: &str) -> bool {
        self.adapted.iter().any(|adapted| adapted == name)
    }

    /// Whether linears reading one input (`q_proj`, `k_proj`, `v_proj`)
    /// save it in the compute dtype: when trainable, or when any of them
    /// carries an adapter that shares it. (What bitsandbytes before 0.43.2
    /// holds besides is not saved: `Step::held_inputs`.)
    pub fn keeps_input(&self, names: &[&str]) -> bool {
        !self.frozen_base || (!self.own_inputs && names.iter().any(|name| self.is_adapted(name)))
    }

    /// Bytes per element of an adapter's own input, where it does not share
    /// the compute-dtype one: the cast or dropped copy in the adapter's
    /// dtype, and the dropout mask.
    pub fn own_input_element(&self, kernels: &Kernels) -> u64 {
        let mask = if self.dropout {
            kernels.dropout_mask.bytes(self.dropped_element)
        } else {
            0
        };
        self.adapter_element.saturating_add(mask)
    }

    /// How many of `names` carry an adapter (each saves a `T x r` tensor).
    pub fn adapters(&self, names: &[&str]) -> u64 {
        names.iter().filter(|name| self.is_adapted(name)).count() as u64
    }

    /// The bytes per output element an adapted linear holds at the height
    /// of its own forward, with `element` the compute dtype's bytes.
    ///
    /// peft's `Linear.forward` (`peft/tuners/lora/layer.py`, peft 0.21):
    /// `result = self.base_layer(x)` (the frozen output, `element`), then
    /// `result = result + lora_B(lora_A(dropout(x))) * scaling` and
    /// `result = result.to(torch_result_dtype)`. In that order:
    /// * `* scaling`: `lora_B`'s output and its scaled copy, both in the
    ///   adapter's dtype, with `result` alive (nothing saves `lora_B`'s
    ///   output: `MulBackward0` by a Python scalar saves no tensor);
    /// * `+`: `result`, the scaled term and the sum in the promoted dtype
    ///   (torch's type promotion: the wider of the two). On the CPU,
    ///   `TensorIteratorBase::compute_types` (`aten/src/ATen/TensorIterator.cpp`)
    ///   casts an input of another dtype to the common one into a temporary
    ///   (`op.tensor().to(common_dtype_)`), one more tensor in the promoted
    ///   dtype (the fixtures' second fp32 `aten::add` allocation); CUDA
    ///   kernels cast while loading;
    /// * `.to(...)`: the sum and its copy in the compute dtype, when the
    ///   sum was promoted.
    ///
    /// Measured: the CPU fixtures `*__full__*__lora-all-*-fp32*.json`
    /// (peak at `up_proj`'s `aten::add`: the bf16 result, the fp32 scaled
    /// term, the fp32 copy of the result and the fp32 sum).
    pub fn forward_height(&self, element: u64, cast_by_copy: bool) -> u64 {
        let adapter = self.adapter_element;
        let promoted = adapter.max(element);
        let copy = if cast_by_copy && adapter != element {
            promoted
        } else {
            0
        };
        let scaled = element + 2 * adapter;
        let sum = element + adapter + copy + promoted;
        let cast = if promoted != element {
            promoted + element
        } else {
            0
        };
        scaled.max(sum).max(cast)
    }
}

/// LoRA on the output head (peft's `target_modules` naming `lm_head`,
/// torchtune's `apply_lora_to_output`, litgpt's `lora_head`): what its
/// adapter saves, and what it holds at once beside the logits in forward and
/// beside their gradient in backward. Zero without an adapter on the head.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeadAdapter {
    /// Saved until backward: the adapter's own input (a cast copy or its
    /// dropped input, and the dropout mask) when it does not share the
    /// head's, and `lora_A`'s `T x r` output.
    pub saved: Bytes,
    /// Alive beside the logits at the height of one head call's forward:
    /// `lora_B`'s `rows x V` output, its scaled copy and the sum (see
    /// [`Training::forward_height`]), and peft's cast copy of the input
    /// when the adapter drops that copy.
    pub forward: Bytes,
    /// Alive beside the logits' gradient at the height of one head call's
    /// backward: the sum's gradient in the promoted dtype, the frozen
    /// result's and the adapter term's gradients where a dtype differs,
    /// and `* scaling`'s new gradient.
    pub backward: Bytes,
}

/// One head call's geometry: the rows one call of the head computes (all
/// tokens, or one chunk's where the head runs per chunk) and what its
/// output gradient is.
#[derive(Debug, Clone, Copy)]
pub struct HeadCall {
    /// Rows of one call (`B x chunk` where the head runs per chunk).
    pub rows: u64,
    /// Whether the logits' gradient the timeline holds is a copy (litgpt's
    /// Fabric casts the logits to fp32: the head's own output gradient is
    /// made anew per call) rather than the head's own output gradient.
    pub own_gradient: bool,
    /// Whether a sum of two dtypes casts one input into a temporary (the
    /// CPU's `TensorIterator`; CUDA kernels cast while loading).
    pub cast_by_copy: bool,
}

impl Training<'_> {
    /// The output head's adapter for `rank` (see [`HeadAdapter`]): its
    /// input `h` wide over the sequence tokens, its output `V` wide.
    ///
    /// Backward of `result + lora_B(...) * scaling` (then `.to(dtype)`)
    /// runs `ToCopyBackward0` (a gradient in the sum's promoted dtype when it
    /// was promoted), `AddBackward0` (the gradient passed to both inputs,
    /// cast by the engine to an input whose dtype differs) and
    /// `MulBackward0` (a new gradient in the adapter's dtype) before
    /// `lora_B`'s `MmBackward0`.
    ///
    /// Measured: the CPU fixtures `*__lora-allh-*.json` (peft, the head
    /// among its targets).
    pub fn head(&self, rank: &Rank, kernels: &Kernels, call: HeadCall) -> Result<HeadAdapter> {
        if !self.frozen_base || !self.is_adapted("lm_head") {
            return Ok(HeadAdapter::default());
        }
        let (element, adapter) = (rank.element, self.adapter_element);
        let (n, h, v) = (rank.sequence_tokens, rank.hidden, rank.vocab);
        let mut saved = Tally::new();
        saved.tensor_if(self.own_inputs, &[self.own_input_element(kernels), n, h])?;
        saved.tensor(&[adapter, n, self.rank])?;
        let height = self.forward_height(element, call.cast_by_copy);
        let mut forward = Tally::new();
        forward.tensor(&[height.saturating_sub(element), call.rows, v])?;
        forward.tensor_if(
            self.dropout && self.dropped_element != element,
            &[self.dropped_element, n, h],
        )?;
        // `* scaling`'s gradient, and a second adapter-dtype gradient where
        // the dtypes differ: the sum's (`ToCopyBackward0`, which frees the
        // logits' gradient once the frozen result's cast of it is made) or
        // the adapter term's cast (`AddBackward0`); where the timeline's
        // logits gradient is a copy, the head's own output gradient too.
        let beside = adapter
            .saturating_add(if adapter != element { adapter } else { 0 })
            .saturating_add(if call.own_gradient { element } else { 0 });
        let mut backward = Tally::new();
        backward.tensor(&[beside, call.rows, v])?;
        Ok(HeadAdapter {
            saved: saved.bytes(),
            forward: forward.bytes(),
            backward: backward.bytes(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;

    #[test]
    fn frozen_linears_drop_inputs_unless_adapted() {
        let mut workload = Workload {
            adapted: vec!["q_proj".to_string(), "v_proj".to_string()],
            lora_rank: 16,
            ..Workload::new(1, 8)
        };
        assert!(Training::new(&workload).keeps_input(&["o_proj"]));
        workload.frozen_base = true;
        let training = Training::new(&workload);
        assert!(training.keeps_input(&["q_proj", "k_proj", "v_proj"]));
        assert!(!training.keeps_input(&["o_proj"]));
        assert_eq!(training.adapters(&["q_proj", "k_proj", "v_proj"]), 2);
    }

    /// fp32 adapters under a bf16 base, or dropout: each adapter keeps its
    /// own input, the shared bf16 one is kept by nobody.
    #[test]
    fn cast_or_dropped_inputs_are_the_adapters_own() {
        let mut workload = Workload {
            adapted: vec!["q_proj".to_string()],
            lora_rank: 8,
            frozen_base: true,
            lora_dtype: Some(DType::Fp32),
            ..Workload::new(1, 8)
        };
        let training = Training::new(&workload);
        assert!(training.own_inputs && !training.dropout);
        assert_eq!(training.adapter_element, 4);
        assert!(!training.keeps_input(&["q_proj"]));
        workload.lora_dtype = Some(DType::Bf16);
        workload.lora_dropout = LoraDropout::parse("0.05").unwrap();
        let training = Training::new(&workload);
        assert!(training.own_inputs && training.dropout);
        assert_eq!(training.adapter_element, 2);
    }

    /// Under autocast fp32 adapters on a bf16 base compute in bf16, each
    /// from its own cast of the input; their dropout runs on peft's fp32
    /// copy (`__autocast` CPU fixtures).
    #[test]
    fn autocast_adapters_compute_in_half_from_their_own_casts() {
        let workload = Workload {
            adapted: vec!["q_proj".to_string()],
            lora_rank: 8,
            frozen_base: true,
            lora_dtype: Some(DType::Fp32),
            lora_dropout: LoraDropout::parse("0.05").unwrap(),
            autocast: true,
            ..Workload::new(1, 8)
        };
        let training = Training::new(&workload);
        assert!(training.own_inputs);
        assert_eq!(training.adapter_element, 2);
        assert_eq!(training.dropped_element, 4);
        assert!(!training.keeps_input(&["q_proj"]));
    }

    /// peft's `result + lora_B(...) * scaling`: fp32 adapters under bf16 on
    /// the CPU hold the bf16 result, the fp32 term, the fp32 copy of the
    /// result and the fp32 sum (the `up_proj` peak of the fixtures).
    #[test]
    fn adapted_forward_height_counts_promoted_temporaries() {
        let workload = Workload {
            adapted: vec!["up_proj".to_string()],
            frozen_base: true,
            lora_dtype: Some(DType::Fp32),
            ..Workload::new(1, 8)
        };
        let fp32 = Training::new(&workload);
        assert_eq!(fp32.forward_height(2, true), 2 + 4 + 4 + 4);
        assert_eq!(fp32.forward_height(2, false), 2 + 4 + 4);
        let same = Training {
            adapter_element: 2,
            dropped_element: 2,
            ..fp32
        };
        assert_eq!(same.forward_height(2, true), 3 * 2);
    }

    /// peft's fp32 adapter on a bf16 head over T = 256 tokens, V = 4096,
    /// h = 256, r = 16, dropout on CUDA: the dropped fp32 input and its
    /// 1-byte mask, `lora_A`'s fp32 output; in forward 10 - 2 bytes per
    /// logit beside the logits and the fp32 cast of the input; in backward
    /// the sum's and the scaled fp32 gradients. Without an adapter on the
    /// head, nothing.
    #[test]
    fn the_head_adapter_by_hand() {
        use crate::activation::parallel::Rank;
        use crate::architecture::Dimensions;
        let dims = Dimensions::generic(4, 256, 8, 4, 704, 4096).unwrap();
        let mut workload = Workload {
            adapted: vec!["q_proj".to_string(), "lm_head".to_string()],
            lora_rank: 16,
            frozen_base: true,
            dtype: DType::Bf16,
            lora_dtype: Some(DType::Fp32),
            lora_dropout: LoraDropout::parse("0.05").unwrap(),
            ..Workload::new(2, 128)
        };
        let rank = Rank::new(&dims, &workload).unwrap();
        let cuda = crate::activation::Platform::Cuda.kernels();
        let call = HeadCall {
            rows: 256,
            own_gradient: false,
            cast_by_copy: false,
        };
        let head = Training::new(&workload).head(&rank, &cuda, call).unwrap();
        let (t, h, v) = (256u64, 256u64, 4096u64);
        assert_eq!(head.saved.0, (4 + 1) * t * h + 4 * t * 16);
        assert_eq!(head.forward.0, 8 * t * v + 4 * t * h);
        assert_eq!(head.backward.0, 8 * t * v);
        workload.adapted.pop();
        let head = Training::new(&workload).head(&rank, &cuda, call).unwrap();
        assert_eq!(head, HeadAdapter::default());
    }

    #[test]
    fn dropout_is_a_probability_below_one() {
        assert_eq!(LoraDropout::parse("0.05").unwrap().probability(), 0.05);
        assert!(!LoraDropout::parse("0").unwrap().is_active());
        for bad in ["1", "-0.1", "x", "1.5"] {
            assert!(LoraDropout::parse(bad).is_err(), "{bad}");
        }
    }
}
