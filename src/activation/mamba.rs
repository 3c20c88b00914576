//! What Mamba (`MambaForCausalLM`, transformers' `models/mamba/modeling_mamba.py`)
//! saves for backward when trained on its torch path: `MambaMixer.forward`
//! without the mamba-ssm and causal-conv1d kernels, so `causal_conv1d_fn`
//! is `F.conv1d` and `mamba_selective_scan` the sequential loop over the
//! S positions. That is what runs on CPU; on CUDA transformers loads
//! mamba-ssm's fused `mamba_inner_fn`, whose `ctx.save_for_backward` keeps
//! other tensors (and recomputes the convolution and Δ in backward), which
//! is not modelled: `--platform cuda` is refused.
//!
//! Every formula was read off the saved tensors of
//! `tools/measure_activations.py` (the `mamba__*` fixtures, CPU, no
//! `attention_mask`, `use_cache` off) and reproduces all of them to the
//! byte. With P the element size, B the micro-batch, S the sequence, T =
//! B·S, h `hidden_size`, d = `expand · h`, N `state_size`, K
//! `conv_kernel`, R `time_step_rank`, one layer keeps:
//!
//! * `MambaRMSNorm`: its fp32 input (the input itself in fp32, else the
//!   `.to(float32)` copy) 4·T·h, the fp32 rsqrt 4·T, the normalised
//!   hidden cast back P·T·h; `in_proj`'s input (the norm's output) P·T·h.
//! * A = −exp(A_log.float()): exp's result and its negation, 2 · 4·d·N.
//! * `in_proj`'s output [B, 2d, S] (the convolution's input and the gate
//!   `silu(z)` reads, one storage) P·T·2d; the convolution's output before
//!   the causal slice, which SiLU keeps, P·B·d·(S + K − 1).
//! * the SiLU output x (saved by `x · D` and, in fp32, by `dt · B · x`)
//!   P·B·d·S and `x_proj`'s input, a contiguous copy of its transpose
//!   P·T·d (a view when B = 1: nothing more); `x_proj`'s output
//!   P·T·(R + 2N), which Δ's projection and the scan's C read.
//! * Δ: softplus's input and output, 2 · P·B·d·S.
//! * the discretisation in fp32: exp(A·Δ) and Δ·B, 2 · 4·B·d·S·N.
//! * the scan: the zero initial state P·B·d·N, every state in fp32
//!   4·B·d·N (the last one only saved by the output's matmul), and in
//!   half precision each state's cast to P for the matmul with C: S·P·B·d·N
//!   more; the fp32 copies half precision makes of B (4·B·S·N), of x
//!   (4·B·d·S) and of D (4·d).
//! * the output: the scan's output plus x·D (fp32) 4·B·d·S, silu(z)
//!   P·B·d·S, `out_proj`'s input P·T·d.
//!
//! Outside the layers: the token ids 8·T; `norm_f` like a layer's norm
//! but its cast back in the residual's dtype (fp32 with
//! `residual_in_fp32`, the default); `lm_head`'s input P·T·h. The logits
//! are fp32 whatever P (`lm_head(...).float()`): 4·T·V returned and 4·T·V
//! of log-softmax, int64 targets (8·(S + 1) when B = 1: a view of the
//! padded labels), a 4-byte `total_weight`.
//!
//! Gradient checkpointing (`MambaBlock` is a `GradientCheckpointingLayer`;
//! `--recompute full`) keeps each layer's input: the embedding's output
//! P·T·h for the first, then the residual stream (4·T·h with
//! `residual_in_fp32`, else P·T·h).

use super::tally::{Tally, plus, times};
use super::{
    Activations, FP32_BYTES, LayerActivations, Loss, Part, Platform, Recompute, Schedule, Workload,
};
use crate::architecture::{Dimensions, StateSpace};
use crate::error::{Error, Result};
use crate::units::Bytes;

/// Bytes of an int64 index.
const INT64: u64 = 8;

/// Tensors of the logits' size a cross-entropy backward allocates while the
/// saved log-probabilities are alive.
const LOSS_BACKWARD_COPIES: u64 = 2;

/// One micro-step of a Mamba model.
struct Shape {
    /// P.
    element: u64,
    batch: u64,
    seq: u64,
    hidden: u64,
    mixer: StateSpace,
}

impl Shape {
    fn tokens(&self) -> u64 {
        self.batch.saturating_mul(self.seq)
    }

    /// Whether half precision (P < 4) adds the fp32 copies.
    fn half(&self) -> bool {
        self.element != FP32_BYTES
    }

    /// The bytes of the residual stream's elements after a layer.
    fn residual(&self) -> u64 {
        if self.mixer.residual_in_fp32 {
            FP32_BYTES
        } else {
            self.element
        }
    }

    /// `MambaRMSNorm` over the tokens, its cast back in `cast` bytes.
    fn norm(&self, cast: u64) -> Result<Bytes> {
        let (t, h) = (self.tokens(), self.hidden);
        let mut saved = Tally::new();
        saved.tensor(&[FP32_BYTES, t, h])?;
        saved.tensor(&[FP32_BYTES, t])?;
        saved.tensor(&[cast, t, h])?;
        Ok(saved.bytes())
    }

    /// Everything one layer saves.
    fn layer(&self) -> Result<Bytes> {
        let (p, b, s, t, h) = (
            self.element,
            self.batch,
            self.seq,
            self.tokens(),
            self.hidden,
        );
        let StateSpace {
            inner: d,
            state: n,
            conv_kernel: k,
            time_step_rank: r,
            ..
        } = self.mixer;
        let half = self.half();
        let mut saved = Tally::new();
        saved.add(self.norm(p)?)?;
        // in_proj's input.
        saved.tensor(&[p, t, h])?;
        // A: exp's result and -exp.
        saved.tensor(&[2, FP32_BYTES, d, n])?;
        // in_proj's output (conv input and gate), the padded conv output.
        saved.tensor(&[p, t, 2, d])?;
        saved.tensor(&[p, b, d, s.saturating_add(k).saturating_sub(1)])?;
        // The SiLU output x, x_proj's input copy, x_proj's output.
        saved.tensor(&[p, b, d, s])?;
        saved.tensor_if(b != 1, &[p, t, d])?;
        saved.tensor(&[p, t, r.saturating_add(n.saturating_mul(2))])?;
        // softplus's input and Δ.
        saved.tensor(&[2, p, b, d, s])?;
        // Half precision's fp32 copies of B, x and D.
        saved.tensor_if(half, &[FP32_BYTES, b, s, n])?;
        saved.tensor_if(half, &[FP32_BYTES, b, d, s])?;
        saved.tensor_if(half, &[FP32_BYTES, d])?;
        // exp(A·Δ) and Δ·B.
        saved.tensor(&[2, FP32_BYTES, b, d, s, n])?;
        // The scan's states.
        saved.tensor(&[p, b, d, n])?;
        if half {
            saved.tensor(&[FP32_BYTES, s.saturating_sub(1), b, d, n])?;
            saved.tensor(&[p, s, b, d, n])?;
        } else {
            saved.tensor(&[FP32_BYTES, s, b, d, n])?;
        }
        // The scan's output with x·D (fp32), silu(z), out_proj's input.
        saved.tensor(&[FP32_BYTES, b, d, s])?;
        saved.tensor(&[p, b, d, s])?;
        saved.tensor(&[p, t, d])?;
        Ok(saved.bytes())
    }

    /// What gradient checkpointing keeps of layer `index`: its input.
    fn checkpointed(&self, index: u64) -> Result<Bytes> {
        let e = if index == 0 {
            self.element
        } else {
            self.residual()
        };
        let mut saved = Tally::new();
        saved.tensor(&[e, self.tokens(), self.hidden])?;
        Ok(saved.bytes())
    }

    /// The widest tensor of a layer's backward: a gradient of exp(A·Δ),
    /// 4·B·d·S·N, with the gradient of the layer's output, 4·T·h.
    fn backward(&self) -> Result<Bytes> {
        let mut held = Tally::new();
        held.tensor(&[
            FP32_BYTES,
            self.batch,
            self.mixer.inner,
            self.seq,
            self.mixer.state,
        ])?;
        held.tensor(&[FP32_BYTES, self.tokens(), self.hidden])?;
        Ok(held.bytes())
    }
}

/// Refuses what the Mamba activation model does not price.
fn check(workload: &Workload) -> Result<()> {
    if workload.platform == Platform::Cuda {
        return Err(Error::InvalidValue {
            what: "--platform",
            value: "cuda".to_string(),
            reason: "Mamba's activations are measured on transformers' torch path (CPU); on CUDA it runs mamba-ssm's fused mamba_inner_fn, whose saved tensors are not modelled; accepted: --platform cpu".to_string(),
        });
    }
    let refused = |what: &'static str, value: String| {
        Error::InvalidValue {
        what,
        value,
        reason: "Mamba's activations are modelled for plain data-parallel training of the whole model with the standard loss, and --recompute none or full on every layer".to_string(),
    }
    };
    if workload.tensor_parallel > 1 {
        return Err(refused("--tp", workload.tensor_parallel.to_string()));
    }
    if workload.pipeline > 1 {
        return Err(refused("--pp", workload.pipeline.to_string()));
    }
    if workload.context_parallel > 1 {
        return Err(refused("--cp", workload.context_parallel.to_string()));
    }
    if workload.sequence_parallel {
        return Err(refused("--sp", "on".to_string()));
    }
    if workload.frozen_base || !workload.adapted.is_empty() {
        return Err(refused(
            "fine-tuning",
            "LoRA adapters or frozen weights".to_string(),
        ));
    }
    if workload.offload_activations {
        return Err(refused("--offload-activations", "on".to_string()));
    }
    if workload.megatron_kernels {
        return Err(refused("--framework", "megatron".to_string()));
    }
    if workload.fp8.is_some() {
        return Err(refused("--precision", "fp8".to_string()));
    }
    if workload.loss != Loss::Standard {
        return Err(refused("--loss", workload.loss.name()));
    }
    if !matches!(workload.recompute, Recompute::None | Recompute::Full) {
        return Err(refused(
            "--recompute",
            format!("{:?}", workload.recompute).to_lowercase(),
        ));
    }
    if workload.recompute_every != 1 {
        return Err(refused(
            "--recompute-every",
            workload.recompute_every.to_string(),
        ));
    }
    Ok(())
}

fn shape(dims: &Dimensions, mixer: StateSpace, workload: &Workload) -> Shape {
    Shape {
        element: workload.dtype.bytes(),
        batch: workload.micro_batch,
        seq: workload.seq_len,
        hidden: dims.hidden,
        mixer,
    }
}

/// What layer `index` of a Mamba model keeps for one micro-batch.
pub fn layer_bytes(
    dims: &Dimensions,
    mixer: StateSpace,
    workload: &Workload,
    index: u64,
) -> Result<Bytes> {
    check(workload)?;
    let shape = shape(dims, mixer, workload);
    if workload.recompute == Recompute::Full {
        shape.checkpointed(index)
    } else {
        shape.layer()
    }
}

/// The activations of one micro-batch of a Mamba model `dims` (whose
/// `state_space` is `mixer`) under `workload`.
pub fn activations(
    dims: &Dimensions,
    mixer: StateSpace,
    workload: &Workload,
) -> Result<Activations> {
    check(workload)?;
    let shape = shape(dims, mixer, workload);
    let checkpointed = workload.recompute == Recompute::Full;
    let (p, t, v) = (shape.element, shape.tokens(), dims.vocab);
    let layer = shape.layer()?;
    let held = shape.backward()?;
    let mut layers = Tally::new();
    let mut schedule_layers = Vec::new();
    for index in 0..dims.layers {
        let kept = if checkpointed {
            shape.checkpointed(index)?
        } else {
            layer
        };
        layers.add(kept)?;
        schedule_layers.push(LayerActivations {
            layer: index,
            kept,
            recomputed: if checkpointed { layer } else { Bytes::ZERO },
            backward: held,
            ..LayerActivations::default()
        });
    }
    let layers = layers.bytes();

    let mut embeddings = Tally::new();
    embeddings.tensor(&[INT64, t])?;
    let embeddings = embeddings.bytes();
    let mut head = Tally::new();
    head.add(shape.norm(shape.residual())?)?;
    head.tensor(&[p, t, shape.hidden])?;
    let head = head.bytes();

    let mut logits = Tally::new();
    logits.tensor(&[FP32_BYTES, t, v])?;
    let logits = logits.bytes();
    let targets = if shape.batch == 1 {
        shape.seq.saturating_add(1)
    } else {
        t
    };
    let mut loss = Tally::new();
    loss.add(logits)?;
    loss.tensor(&[INT64, targets])?;
    loss.tensor(&[FP32_BYTES])?;
    let loss = loss.bytes();
    let loss_backward = times(logits, LOSS_BACKWARD_COPIES)?;
    let transient = if checkpointed {
        loss_backward.max(layer)
    } else {
        loss_backward
    };
    // lm_head's output in P before `.float()`, a temporary at the head.
    let mut upcast = Tally::new();
    upcast.tensor_if(shape.half(), &[p, t, v])?;

    let outside = plus(embeddings, head)?;
    let mut total = Tally::new();
    for bytes in [layers, outside, logits, loss] {
        total.add(bytes)?;
    }
    let mut widest = Tally::new();
    widest.tensor(&[FP32_BYTES, shape.batch, mixer.inner, shape.seq, mixer.state])?;
    let schedule = Schedule {
        in_flight: 1,
        has_head: true,
        embeddings,
        head,
        logits,
        logits_upcast: upcast.bytes(),
        loss,
        loss_backward,
        logits_gradient: logits,
        widest_tensor: widest.bytes(),
        layers: schedule_layers,
        ..Schedule::default()
    };
    Ok(Activations {
        total: total.bytes(),
        layers: vec![Part {
            name: "mixer layers".to_string(),
            bytes: layers,
        }],
        outside_layers: outside,
        logits,
        loss,
        backward_transient: transient,
        loss_function: workload.loss,
        recompute: workload.recompute,
        recompute_every: workload.recompute_every,
        offload: None,
        fp8: None,
        notes: notes(dims, workload),
        schedule,
    })
}

/// How a Mamba model's activations were reached, for the report.
pub fn notes(dims: &Dimensions, workload: &Workload) -> Vec<String> {
    if dims.state_space.is_none() {
        return Vec::new();
    }
    let mut notes = vec![
        "mamba: transformers' torch path (causal_conv1d_fn, the sequential selective scan, which keeps every step's B x d_inner x state_size state in fp32), measured on CPU without an attention_mask; the logits are fp32 (lm_head(...).float())".to_string(),
    ];
    if workload.weights_dtype != workload.dtype {
        notes.push(format!(
            "mamba's saved tensors are measured with the model in {} (no autocast); under torch.autocast with {} weights the casts differ: approximate",
            workload.dtype,
            workload.weights_dtype
        ));
    }
    notes
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::architecture::dimensions_for_task;
    use crate::dtype::DType;

    fn cpu(batch: u64, seq: u64) -> Workload {
        Workload {
            platform: Platform::Cpu,
            dtype: DType::Bf16,
            ..Workload::new(batch, seq)
        }
    }

    #[test]
    fn the_scan_grows_with_the_sequence_and_checkpointing_keeps_the_inputs() {
        let dims = dimensions_for_task(
            &json!({"model_type": "mamba", "num_hidden_layers": 4,
            "hidden_size": 64, "vocab_size": 1000}),
            None,
        )
        .unwrap();
        let short = super::super::activations(&dims, &cpu(2, 64)).unwrap();
        let long = super::super::activations(&dims, &cpu(2, 128)).unwrap();
        let longer = super::super::activations(&dims, &cpu(2, 192)).unwrap();
        // Linear in S: every step of the scan keeps its states.
        let (a, b, c) = (
            short.layers[0].bytes.0,
            long.layers[0].bytes.0,
            longer.layers[0].bytes.0,
        );
        assert_eq!(b - a, c - b);
        assert!(b - a > a / 2);
        let full = Workload {
            recompute: Recompute::Full,
            ..cpu(2, 64)
        };
        let checkpointed = super::super::activations(&dims, &full).unwrap();
        // The first layer keeps the bf16 embedding, the others the fp32 residual.
        assert_eq!(
            checkpointed.layers[0].bytes.0,
            2 * 128 * 64 + 3 * 4 * 128 * 64
        );
        assert_eq!(checkpointed.schedule.layers.len(), 4);
    }

    #[test]
    fn cuda_and_unmeasured_setups_are_refused() {
        let dims = dimensions_for_task(&json!({"model_type": "mamba"}), None).unwrap();
        for workload in [
            Workload::new(1, 8),
            Workload {
                tensor_parallel: 2,
                ..cpu(1, 8)
            },
            Workload {
                recompute: Recompute::Selective,
                ..cpu(1, 8)
            },
            Workload {
                loss: Loss::Chunked(2),
                ..cpu(1, 8)
            },
        ] {
            assert!(super::super::activations(&dims, &workload).is_err());
        }
        for (key, value) in [("hidden_act", json!("gelu")), ("use_mambapy", json!(true))] {
            let mut config = json!({"model_type": "mamba"});
            config[key] = value;
            assert!(dimensions_for_task(&config, None).is_err(), "{key}");
        }
    }
}
