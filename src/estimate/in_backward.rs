//! `--optimizer-in-backward`: the optimizer step fused into backward, one
//! parameter at a time, as torchtune's `optimizer_in_bwd` does it.
//!
//! torchtune (`torchtune/training/memory.py`, 0.6.1) builds one optimizer per
//! parameter (`optim_dict = {p: config.instantiate(cfg_optimizer, [p])}` in
//! `recipes/full_finetune_distributed.py` `_setup_optimizer`) and registers
//! `p.register_post_accumulate_grad_hook(optim_step)` where `optim_step`
//! calls `optim_dict[p].step()` then `optim_dict[p].zero_grad()`: each
//! gradient is applied and freed (`set_to_none=True`) as soon as autograd
//! has accumulated it, so no full set of gradients ever exists; only the
//! gradient being produced and that parameter's step temporaries (its own
//! one-tensor step: torch's single-tensor loop on the CPU, a one-tensor
//! `foreach` list on CUDA). GaLore's per-layer updates
//! (`torchrun_main.py --optimizer galore_adamw8bit_per_layer`) are the same
//! hooks with a GaLore optimizer per parameter.
//!
//! What the real implementations refuse is refused here:
//! * gradient accumulation: `full_finetune_single_device.py` and
//!   `full_finetune_distributed.py` raise "Gradient accumulation is not
//!   supported with optimizer in bwd" (the gradients of one micro-batch are
//!   applied before the next one adds to them);
//! * DeepSpeed ZeRO and Megatron own the step and the gradient buffers
//!   (`DeepSpeedEngine.step`, Megatron's `main_grad`): neither has it;
//! * data parallelism other than FSDP2: torchtune's distributed recipe runs
//!   it under `fully_shard` only, where FSDP2's `foreach_reduce`
//!   (`torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py`) runs the
//!   post-accumulate-grad hooks on the sharded parameters after the
//!   reduce-scatter; plain DDP would step on gradients not yet reduced;
//! * optimizer offload (the step then runs on the host) and pipeline stages
//!   (torchtune's recipes have none with it).
//!
//! Gradient clipping needs every gradient at once, so it is not possible
//! with the step in backward (torchtune raises "Gradient clipping is not
//! supported with optimizer in bwd"); the note says so.

use super::setup::Setup;
use crate::error::{Error, Result};
use crate::parallel::{Framework, Offload};

const FLAG: &str = "--optimizer-in-backward";

/// Refuses `--optimizer-in-backward` where no implementation runs it.
pub fn check(setup: &Setup) -> Result<()> {
    if !setup.step.optimizer_in_backward {
        return Ok(());
    }
    let parallelism = setup.parallelism;
    let refuse = |reason: &str| {
        Err(Error::InvalidValue {
            what: "combination",
            value: FLAG.to_string(),
            reason: reason.to_string(),
        })
    };
    if setup.step.grad_accumulation > 1 {
        return refuse(
            "each gradient is applied and freed as soon as it is produced, so gradients cannot accumulate over micro-batches (torchtune refuses optimizer_in_bwd with gradient_accumulation_steps > 1); use --grad-accumulation 1",
        );
    }
    if parallelism.framework == Framework::Megatron {
        return refuse(
            "Megatron keeps gradients in persistent main_grad buffers and steps once after backward; it has no optimizer in backward",
        );
    }
    if parallelism.framework == Framework::DeepSpeed && parallelism.zero.shards_optimizer() {
        return refuse(
            "DeepSpeed ZeRO's engine owns the gradient partitions and the step; it has no optimizer in backward (use --fsdp, as torchtune does)",
        );
    }
    if parallelism.data() > 1 && parallelism.framework != Framework::Fsdp2 {
        return refuse(
            "with data parallelism it runs under FSDP2 only (torchtune's full_finetune_distributed: the hooks run on the sharded parameters after the reduce-scatter); plain DDP would step on gradients not yet reduced: use --fsdp full-shard",
        );
    }
    if parallelism.offload != Offload::None {
        return refuse("the optimizer then steps on the host after backward; use --offload none");
    }
    if parallelism.pipeline > 1 {
        return refuse(
            "no pipeline-parallel implementation steps the optimizer inside backward; use --pp 1",
        );
    }
    Ok(())
}

/// The note of a step fused into backward.
pub fn note(setup: &Setup) -> Option<String> {
    if !setup.steps_in_backward() {
        return None;
    }
    let what = if setup.step.optimizer_in_backward && setup.optimizer.name.starts_with("galore") {
        "per-layer GaLore (GaLore's torchrun_main.py --optimizer galore_adamw8bit_per_layer): one GaLore optimizer per parameter"
    } else if setup.step.optimizer_in_backward {
        "optimizer in backward (torchtune's optimizer_in_bwd): one optimizer per parameter"
    } else {
        "this optimizer updates inside backward"
    };
    Some(format!(
        "{what}, stepped in a post-accumulate-grad hook as each gradient is produced and the gradient freed at once: no full gradient copy, each step's temporaries are per parameter, and gradient clipping is not possible"
    ))
}
