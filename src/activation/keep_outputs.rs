//! A training loop that keeps the model's outputs through backward
//! (`--keep-outputs`).
//!
//! HF Trainer's `compute_loss` returns the loss alone and torchtune deletes
//! its logits before backward, so the logits die when the loss is computed.
//! accelerate's example scripts (`examples/nlp_example.py`: `outputs =
//! model(**batch); loss = outputs.loss; accelerator.backward(loss);
//! optimizer.step(); optimizer.zero_grad()`), litgpt's `finetune/lora.py`
//! (`logits = model(input_ids); loss = chunked_cross_entropy(...);
//! fabric.backward(loss)`) and most hand-written loops hold `outputs` (or
//! `logits`) in a local variable until the step returns: one more P·T·V
//! tensor in the compute dtype is alive through backward and the optimizer
//! step. Under autocast (HF Trainer's and accelerate's `bf16=True`)
//! accelerate wraps the forward in `convert_outputs_to_fp32`, so the
//! logits the loop holds are an fp32 copy, 4·T·V. Measured on CPU by
//! `tools/measure_timeline.py` (`keep_outputs_specs`, fixtures
//! `*__keep-outputs.json`, with accelerate's own wrapper under autocast).
//!
//! `--carry-outputs`: the loop body holds them at its own scope, not in a
//! function per step (accelerate's `nlp_example.py` as written; litgpt's
//! `fit` loops, `litgpt/finetune/lora.py` 0.5.13 lines 337-377), so the
//! variable is rebound only as the next forward returns: the step before's
//! kept outputs are alive through this forward, and, with transformers,
//! through the loss its forward computes (litgpt's returns first; with
//! `log_interval` 1 its `loss` is rebound to a float each iteration). Its
//! graph dies with them, and what the graph still holds after its backward
//! with it: bitsandbytes < 0.43.2's `ctx.tensors` inputs
//! (`LayerActivations::held`). Measured on CPU (`*__carry-outputs.json`:
//! step 2 profiled too so that its outputs' free in step 3 is reported).

use super::{Activations, Workload};
use crate::units::Bytes;

/// Marks the stage's logits as kept until the end of the step and says so
/// in its notes; the timeline frees them after the optimizer step.
pub fn apply(workload: &Workload, stage: &mut Activations) {
    if !workload.keep_outputs {
        return;
    }
    stage.schedule.logits_kept = true;
    stage.schedule.loss_outside_model =
        workload.implementation != crate::architecture::Implementation::Transformers;
    // transformers 4.38-4.44 (`--loss shift-copy`) returned the fp32 upcast
    // as `outputs.logits`, and under autocast accelerate's `prepare_model`
    // wraps the forward in `convert_outputs_to_fp32`: either way the loop
    // holds an fp32 copy of the logits.
    // litgpt's Fabric already made the fp32 copy the loop holds
    // (`Schedule::outputs_cast`).
    let cast = stage.schedule.outputs_cast;
    if (workload.loss == super::Loss::ShiftCopy || workload.autocast)
        && workload.dtype.bytes() < 4
        && cast == Bytes::ZERO
    {
        stage.schedule.outputs_upcast =
            Bytes(stage.schedule.logits.0.saturating_mul(4) / workload.dtype.bytes().max(1));
    }
    stage.notes.push(if stage.schedule.logits == Bytes::ZERO {
        "keep outputs: the loop holds the model's outputs through backward, but this loss materializes no logits, so nothing more is kept".to_string()
    } else if cast > Bytes::ZERO {
        format!(
            "keep outputs: the loop holds the logits litgpt's Fabric returns, an fp32 copy ({} bytes: convert_output casts the model's outputs to the default dtype), alive through backward and the optimizer step",
            cast.0
        )
    } else if stage.schedule.outputs_upcast > Bytes::ZERO {
        format!(
            "keep outputs: the loop holds the model's outputs (accelerate's examples, hand-written loops), whose logits are an fp32 copy ({} bytes: {}), alive through backward and the optimizer step instead of dying with the loss (HF Trainer, torchtune)",
            stage.schedule.outputs_upcast.0,
            if workload.loss == super::Loss::ShiftCopy {
                "transformers 4.38-4.44 returned the upcast"
            } else {
                "accelerate's convert_outputs_to_fp32 under autocast"
            }
        )
    } else {
        format!(
            "keep outputs: the loop holds the model's outputs (accelerate's examples, litgpt, hand-written loops), so the logits ({} bytes) stay alive through backward and the optimizer step instead of dying with the loss (HF Trainer, torchtune)",
            stage.schedule.logits.0
        )
    });
    if workload.carry_outputs {
        carry(stage);
    }
}

/// The step before's outputs, alive until this forward returns.
fn carry(stage: &mut Activations) {
    let schedule = &mut stage.schedule;
    schedule.outputs_carried = [schedule.outputs_cast, schedule.outputs_upcast]
        .into_iter()
        .find(|bytes| *bytes > Bytes::ZERO)
        .unwrap_or(schedule.logits);
    // One pass in flight: the loop's variable holds its graph (a pipeline's
    // passes each die with their backward).
    let held = if schedule.in_flight <= 1 {
        schedule
            .layers
            .iter()
            .fold(schedule.head_held.0, |sum, layer| {
                sum.saturating_add(layer.held.0)
            })
    } else {
        0
    };
    schedule.held_carried = Bytes(held);
    let until = if schedule.loss_outside_model {
        "the next forward returns"
    } else {
        "the next forward and the loss inside it return"
    };
    stage.notes.push(if held > 0 {
        format!(
            "carry outputs: the loop rebinds its outputs only when the next forward returns, so the step before's ({} bytes) and the inputs its graph still holds (bitsandbytes < 0.43.2's MatMul4Bit ctx.tensors, {held} bytes) are alive until {until}",
            schedule.outputs_carried.0
        )
    } else {
        format!(
            "carry outputs: the loop rebinds its outputs only when the next forward returns, so the step before's ({} bytes) are alive until {until}",
            schedule.outputs_carried.0
        )
    });
}
