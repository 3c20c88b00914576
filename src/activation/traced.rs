//! Activations read from a trace instead of a rule: what
//! `trainmem.trace_activations` (python/trainmem/trace.py) saw autograd
//! save in one forward of a module, carried in its `*.inventory.json`
//! (`"activations_trace"`, see `crate::input::inventory`).
//!
//! The trace gives the saved bytes of each top-level block in the order the
//! blocks ran, what was saved before the first block, what after the last
//! one (the head and the loss), and the outputs the forward returned that
//! autograd did not save (the logits). The step timeline replays it as it
//! replays a rule's [`Schedule`]: each block's bytes are kept from its
//! forward to its backward, the bytes before the blocks until the first
//! block's backward ends, the bytes after them and the outputs as the head
//! and the logits. `memory.activations` is their sum, the trace's total.
//!
//! What a trace does not see is not guessed: the backward's temporaries
//! (the gradients of each block's output and intermediates) are not in it,
//! so [`Activations::backward_transient`] and each block's backward are 0
//! and a note says so. A trace is for the shape it ran: the micro-batch
//! must be the traced one, and recomputation, activation offloading,
//! chunked or fused losses and model parallelism, which change what a
//! forward saves, are refused rather than priced from it.

use super::{Activations, LayerActivations, Loss, Part, Recompute, Schedule, Workload};
use crate::error::{Error, Result};
pub use crate::model::activation_trace::{ActivationTrace, TracedBlock};
use crate::units::Bytes;

const WHAT: &str = "the traced activations";

/// The activations of `trace` under `workload`: the trace's bytes, when the
/// workload is the one traced.
pub fn activations(trace: &ActivationTrace, workload: &Workload) -> Result<Activations> {
    check(trace, workload)?;
    let blocks = trace
        .blocks
        .iter()
        .try_fold(Bytes::ZERO, |sum, b| sum.add(b.bytes, WHAT))?;
    let schedule = Schedule {
        stage: 0,
        in_flight: 1,
        layers: trace
            .blocks
            .iter()
            .zip(0u64..)
            .map(|(block, layer)| LayerActivations {
                layer,
                kept: block.bytes,
                ..LayerActivations::default()
            })
            .collect(),
        embeddings: trace.before_blocks,
        head: trace.after_blocks,
        logits: trace.outputs,
        has_head: true,
        widest_tensor: trace.largest_storage,
        ..Schedule::default()
    };
    Ok(Activations {
        total: trace.total()?,
        layers: vec![Part {
            name: format!("traced blocks ({})", trace.blocks.len()),
            bytes: blocks,
        }],
        outside_layers: trace.before_blocks.add(trace.after_blocks, WHAT)?,
        logits: trace.outputs,
        loss: Bytes::ZERO,
        backward_transient: Bytes::ZERO,
        loss_function: workload.loss,
        recompute: workload.recompute,
        recompute_every: workload.recompute_every,
        offload: None,
        fp8: None,
        notes: notes(trace),
        schedule,
    })
}

/// What the report says of traced activations.
pub fn notes(trace: &ActivationTrace) -> Vec<String> {
    let mut notes = vec![
        format!(
            "activations come from a trace (trainmem.trace_activations) of micro-batch {}: {} top-level blocks kept from their forward to their backward, what was saved outside them and the returned outputs; the trace's dtypes and kernels are the forward's as traced (--precision, --attention and --platform do not change them)",
            trace.micro_batch,
            trace.blocks.len()
        ),
        "backward temporaries are not known from a trace (not priced): the step's peak leaves out the gradients of each block's output and intermediates alive during its backward".to_string(),
    ];
    if trace.seq_len.is_none() {
        notes.push(
            "the traced input is not a batch of token sequences: --seq-len is not read".to_string(),
        );
    }
    notes
}

/// Refuses a workload the trace does not describe.
fn check(trace: &ActivationTrace, workload: &Workload) -> Result<()> {
    if workload.micro_batch != trace.micro_batch {
        return Err(Error::InvalidValue {
            what: "--micro-batch",
            value: workload.micro_batch.to_string(),
            reason: format!(
                "the trace was taken with a micro-batch of {} and a trace is for its input's shape; accepted: --micro-batch {} (or trace again with the batch wanted)",
                trace.micro_batch, trace.micro_batch
            ),
        });
    }
    if let Some(seq_len) = trace.seq_len
        && workload.seq_len != seq_len
    {
        return Err(Error::InvalidValue {
            what: "--seq-len",
            value: workload.seq_len.to_string(),
            reason: format!(
                "the trace was taken with sequences of {seq_len} tokens and a trace is for its input's shape; accepted: --seq-len {seq_len}"
            ),
        });
    }
    let refused = if workload.recompute != Recompute::None {
        Some((
            "--recompute",
            format!("{:?}", workload.recompute).to_lowercase(),
        ))
    } else if workload.offload_activations {
        Some(("--offload-activations", "on".to_string()))
    } else if matches!(workload.loss, Loss::Chunked(_) | Loss::Fused) {
        Some(("--loss", workload.loss.name()))
    } else if workload.tensor_parallel > 1 {
        Some(("--tp", workload.tensor_parallel.to_string()))
    } else if workload.pipeline > 1 {
        Some(("--pp", workload.pipeline.to_string()))
    } else if workload.context_parallel > 1 {
        Some(("--cp", workload.context_parallel.to_string()))
    } else {
        None
    };
    match refused {
        Some((what, value)) => Err(Error::InvalidValue {
            what,
            value,
            reason: "a trace prices the forward it ran, which did not have it; accepted: the traced forward alone (no recomputation, offloading, chunked or fused loss, tensor, pipeline or context parallelism), or trace the module as it will run".to_string(),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace() -> ActivationTrace {
        ActivationTrace {
            micro_batch: 2,
            seq_len: None,
            blocks: vec![
                TracedBlock {
                    name: "a".to_string(),
                    bytes: Bytes(100),
                },
                TracedBlock {
                    name: "b".to_string(),
                    bytes: Bytes(30),
                },
            ],
            before_blocks: Bytes(7),
            after_blocks: Bytes(5),
            outputs: Bytes(3),
            largest_storage: Bytes(60),
        }
    }

    #[test]
    fn the_total_is_the_traced_bytes_and_each_block_is_a_layer() {
        let a = activations(&trace(), &Workload::new(2, 1)).unwrap();
        assert_eq!(a.total, Bytes(145));
        assert_eq!(a.schedule.layers.len(), 2);
        assert_eq!(a.schedule.layers[1].kept, Bytes(30));
        assert_eq!(a.schedule.layers[1].backward, Bytes::ZERO);
        assert_eq!(a.backward_transient, Bytes::ZERO);
        assert_eq!(
            (a.schedule.embeddings, a.schedule.head, a.schedule.logits),
            (Bytes(7), Bytes(5), Bytes(3))
        );
    }

    #[test]
    fn another_shape_or_technique_is_refused() {
        let error = activations(&trace(), &Workload::new(4, 1))
            .unwrap_err()
            .to_string();
        assert!(error.contains("--micro-batch `4`"), "{error}");
        assert!(error.contains("micro-batch of 2"), "{error}");
        let recompute = Workload {
            recompute: Recompute::Full,
            ..Workload::new(2, 1)
        };
        let error = activations(&trace(), &recompute).unwrap_err().to_string();
        assert!(error.contains("--recompute `full`"), "{error}");
        let sequences = ActivationTrace {
            seq_len: Some(16),
            ..trace()
        };
        let error = activations(&sequences, &Workload::new(2, 8))
            .unwrap_err()
            .to_string();
        assert!(error.contains("--seq-len `8`"), "{error}");
    }
}
