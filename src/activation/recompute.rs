//! What recomputation keeps of a layer, and what it rebuilds in backward.
//!
//! * None: everything the layer saves.
//! * Selective (Korthikanti et al. 2022, section 5): the attention core
//!   (the probabilities, the kernel's own copies of q, k and v, its
//!   log-sum-exp) is recomputed in backward; the core's inputs q, k, v are
//!   kept as its checkpoint, and the layer's other saved tensors stay.
//! * Op (torchtitan's per-op selective activation checkpointing,
//!   `torchtitan/distributed/activation_checkpoint.py` at commit b5bcd76,
//!   `_get_default_save_ops` and `SelectiveAC._wrap_block`'s
//!   `wrapped_policy`, through `create_selective_checkpoint_contexts`): the
//!   layer keeps its input and the outputs of the ops in the save list:
//!   the attention kernel's (sdpa flash / memory-efficient / cudnn: output
//!   and log-sum-exp) and every other matmul (`aten.mm` and `aten.linear`
//!   are counted per checkpointed call, and the even ones are recomputed:
//!   `meta[mm_count_key] % 2 == 0`). In a Llama layer the seven matmuls
//!   q, k, v, o, gate, up, down keep q, v, gate and down. Everything else
//!   (norms, rotary, silu, mul, the even matmuls) is rebuilt in backward:
//!   the layer's saved tensors less the kept outputs they share.
//! * Full (gradient checkpointing, transformers'
//!   `GradientCheckpointingLayer` with non-reentrant `torch.utils.checkpoint`):
//!   each layer keeps only its input (`_NoopSaveInputs`), P·n·h.
//!   Reentrant checkpointing (`use_reentrant=True`, `--recompute-reentrant`:
//!   transformers' default before it made `{"use_reentrant": False}` the
//!   default of `gradient_checkpointing_enable`; `CheckpointFunction` saves
//!   the same input) keeps the same, but its backward re-runs the whole
//!   layer (`outputs = ctx.run_function(*detached_inputs)`, then
//!   `torch.autograd.backward(outputs_with_grad, args_with_grad)`,
//!   torch/utils/checkpoint.py): the layer's output, P·n·h, stays alive
//!   through the layer's backward. The non-reentrant checkpoint stops
//!   recomputing once the last saved tensor is back (`early_stop`) and never
//!   rebuilds the output. Measured: `*__full__*__reentrant.json`, P·n·h
//!   above the same step without it.
//!
//! `--recompute-every N` checkpoints only the layers whose 1-based
//! position is a multiple of N (torchtune `training/activations.py`
//! `checkpoint_wrapper._count % every_x_layer == 0`; torchtitan's layer
//! SAC `_layer_sac_count % ac_freq == 0`, commit 1f02964); the others keep
//! everything. [`checkpointed`] says which.
//!
//! In backward a recomputed layer's saved tensors exist again, one layer
//! at a time: that is a backward transient.

use super::Recompute;
use super::layer::SavedLayer;
use super::tally::{Tally, plus};
use crate::error::Result;
use crate::units::Bytes;

/// The parts of a layer, by name, in report order.
pub const PARTS: [&str; 9] = [
    "norms",
    "attention",
    "attention core",
    "mlp",
    "experts",
    "dropout masks",
    "lora",
    "layer inputs",
    "saved op outputs",
];

/// The index in [`PARTS`] of a checkpointed layer's input.
const LAYER_INPUTS: usize = 7;

/// The index in [`PARTS`] of the outputs the per-op policy saves.
const OP_OUTPUTS: usize = 8;

/// What a layer keeps until backward, by part (in [`PARTS`] order), and
/// what backward rebuilds of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Kept {
    /// Bytes per part.
    pub parts: [Bytes; PARTS.len()],
    /// Bytes recomputed in backward for this layer.
    pub recomputed: Bytes,
}

impl Kept {
    /// The layer's kept bytes.
    pub fn total(&self) -> Result<Bytes> {
        self.parts
            .iter()
            .try_fold(Bytes::ZERO, |sum, part| plus(sum, *part))
    }
}

/// Whether layer `index` (from 0) is checkpointed when every `every`-th
/// layer is: its 1-based position is a multiple of `every`.
pub fn checkpointed(index: u64, every: u64) -> bool {
    every <= 1 || index.saturating_add(1).is_multiple_of(every)
}

/// What torchtitan's per-op policy keeps of one layer besides its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OpSaved {
    /// The outputs of the saved ops: the odd matmuls and the attention kernel.
    pub outputs: Bytes,
    /// The part of `outputs` the layer saves without recomputation too (all
    /// but the output projections' results, which no op saves).
    pub shared: Bytes,
}

/// The odd matmuls and the attention kernel of a layer with separate
/// bias-free q, k, v projections of widths `q`, `kv`, `kv`, the output
/// projection (h), and the MLP's `mlp_input` projections of width f
/// followed by its output projection (h): outputs P·T·width each, and,
/// when the policy lists the attention kernel (`kernel_log_sum_exp` is its
/// fp32 log-sum-exp 4·B·a·S), the kernel's output P·T·q and that
/// log-sum-exp; a kernel the policy does not list is recomputed
/// (`None`: torchtitan's list on CPU, see `implementation/torchtitan.rs`).
pub fn op_saved(
    element: u64,
    tokens: u64,
    widths: OpWidths,
    kernel_log_sum_exp: Option<Bytes>,
) -> Result<OpSaved> {
    let mut matmuls = vec![
        (widths.queries, true),
        (widths.keys_values, true),
        (widths.keys_values, true),
        (widths.hidden, false),
    ];
    for _ in 0..widths.mlp_inputs {
        matmuls.push((widths.intermediate, true));
    }
    matmuls.push((widths.hidden, false));
    let (mut outputs, mut shared) = (Tally::new(), Tally::new());
    for (count, (width, saved_anyway)) in (1u64..).zip(matmuls) {
        if count % 2 == 1 {
            outputs.tensor(&[element, tokens, width])?;
            if saved_anyway {
                shared.tensor(&[element, tokens, width])?;
            }
        }
    }
    if let Some(log_sum_exp) = kernel_log_sum_exp {
        for tally in [&mut outputs, &mut shared] {
            tally.tensor(&[element, tokens, widths.queries])?;
            tally.add(log_sum_exp)?;
        }
    }
    Ok(OpSaved {
        outputs: outputs.bytes(),
        shared: shared.bytes(),
    })
}

/// The widths of a layer's matmul outputs, for [`op_saved`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpWidths {
    /// a·d.
    pub queries: u64,
    /// kv·d.
    pub keys_values: u64,
    /// h.
    pub hidden: u64,
    /// f.
    pub intermediate: u64,
    /// Projections reading the MLP input (2 gated, 1 otherwise).
    pub mlp_inputs: u64,
}

/// What `recompute` keeps of `layer` (`op` is what the per-op policy keeps,
/// read only for [`Recompute::Op`]; `reentrant`, only for
/// [`Recompute::Full`], adds the rebuilt output to what backward rebuilds).
pub fn kept(
    recompute: Recompute,
    reentrant: bool,
    layer: &SavedLayer,
    op: OpSaved,
) -> Result<Kept> {
    let everything = |core: Bytes, output_input: Bytes| -> Result<[Bytes; PARTS.len()]> {
        let mut attention = Tally::new();
        attention.add(layer.attention)?;
        attention.add(output_input)?;
        Ok([
            layer.norms,
            attention.bytes(),
            core,
            layer.mlp,
            layer.experts,
            layer.dropout,
            layer.lora,
            Bytes::ZERO,
            Bytes::ZERO,
        ])
    };
    // The output projection's input is the kernel's output when they share a storage.
    let separate_output = if layer.core.output_shared {
        Bytes::ZERO
    } else {
        layer.output_input
    };
    let none = everything(layer.core.saved, separate_output)?;
    match recompute {
        Recompute::None => Ok(Kept {
            parts: none,
            recomputed: Bytes::ZERO,
        }),
        Recompute::Selective => Ok(Kept {
            parts: everything(layer.core_inputs, layer.output_input)?,
            recomputed: Bytes(layer.core.saved.0.saturating_sub(layer.core_inputs.0)),
        }),
        Recompute::Op => {
            let mut parts = [Bytes::ZERO; PARTS.len()];
            parts[LAYER_INPUTS] = layer.input;
            parts[OP_OUTPUTS] = op.outputs;
            let everything = Kept {
                parts: none,
                recomputed: Bytes::ZERO,
            }
            .total()?;
            Ok(Kept {
                parts,
                recomputed: Bytes(everything.0.saturating_sub(op.shared.0)),
            })
        }
        Recompute::Full => {
            let mut parts = [Bytes::ZERO; PARTS.len()];
            parts[LAYER_INPUTS] = layer.input;
            let mut recomputed = Tally::new();
            recomputed.add(
                Kept {
                    parts: none,
                    recomputed: Bytes::ZERO,
                }
                .total()?,
            )?;
            // The layer's output has the shape of its input.
            if reentrant {
                recomputed.add(layer.input)?;
            }
            Ok(Kept {
                parts,
                recomputed: recomputed.bytes(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_part_indices_name_their_parts() {
        assert_eq!(PARTS[LAYER_INPUTS], "layer inputs");
        assert_eq!(PARTS[OP_OUTPUTS], "saved op outputs");
    }

    #[test]
    fn every_nth_layer_counts_from_one() {
        // torchtune / torchtitan: `_count += 1` before `_count % N == 0`.
        let every = |n: u64| -> Vec<u64> { (0..8).filter(|i| checkpointed(*i, n)).collect() };
        assert_eq!(every(1), (0..8).collect::<Vec<_>>());
        assert_eq!(every(2), vec![1, 3, 5, 7]);
        assert_eq!(every(3), vec![2, 5]);
        assert_eq!(every(0), (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn the_op_policy_keeps_the_odd_matmuls_and_the_kernel_by_hand() {
        // A Llama layer: q (a·d), k, v (kv·d), o (h), gate, up (f), down (h):
        // matmuls 1, 3, 5, 7 = q, v, gate, down; the kernel's output T·a·d.
        let (p, t, q, kv, h, f) = (2u64, 1000u64, 512u64, 128u64, 512u64, 1408u64);
        let lse = Bytes(4 * 8 * 1000);
        let widths = OpWidths {
            queries: q,
            keys_values: kv,
            hidden: h,
            intermediate: f,
            mlp_inputs: 2,
        };
        let saved = op_saved(p, t, widths, Some(lse)).unwrap();
        assert_eq!(
            saved.outputs.0,
            p * t * (q + kv + f + h) + p * t * q + lse.0
        );
        // down's output is saved by no op of the unrecomputed layer.
        assert_eq!(saved.shared.0, saved.outputs.0 - p * t * h);
        // A two-matmul MLP (fc1, fc2): matmuls 1, 3, 5 = q, v, fc1.
        let plain = op_saved(
            p,
            t,
            OpWidths {
                mlp_inputs: 1,
                ..widths
            },
            Some(lse),
        )
        .unwrap();
        assert_eq!(plain.outputs.0, p * t * (q + kv + f) + p * t * q + lse.0);
        assert_eq!(plain.shared, plain.outputs);
        // A kernel the policy does not list (torchtitan's on CPU) keeps
        // only the matmuls.
        let unlisted = op_saved(p, t, widths, None).unwrap();
        assert_eq!(unlisted.outputs.0, p * t * (q + kv + f + h));
        assert_eq!(unlisted.shared.0, p * t * (q + kv + f));
    }
}
