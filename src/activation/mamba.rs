//! What Mamba (`MambaForCausalLM`, transformers' `models/mamba/modeling_mamba.py`)
//! saves for backward when trained on its torch path: `MambaMixer.forward`
//! without the mamba-ssm and causal-conv1d kernels, so `causal_conv1d_fn`
//! is `F.conv1d` and `mamba_selective_scan` the sequential loop over the
//! S positions. That is what runs on CPU, and on CUDA without mamba-ssm
//! (transformers' `use_kernel_func_from_hub_with_fallback` takes the hub
//! kernel if asked for, else the mamba-ssm package if it imports, else the
//! torch function). With mamba-ssm, CUDA runs its fused `mamba_inner_fn`,
//! whose `ctx.save_for_backward` keeps other tensors; that is not
//! modelled, so `--platform cuda` is refused and `--platform cpu` stands
//! for the torch path on either device.
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
//!
//! Mamba-2 (`Mamba2ForCausalLM`, `models/mamba2/modeling_mamba2.py`) runs
//! `Mamba2Mixer.forward`'s torch path the same way: `causal_conv1d_fn` and
//! `mamba2_chunk_scan`, the chunked scan in torch (on CUDA mamba-ssm's
//! fused `mamba_split_conv1d_scan_combined`, refused likewise). Its `mamba2__*`
//! fixtures are reproduced to the byte too. With H heads, G groups, L
//! `chunk_size`, c = ⌈S / L⌉ chunks and S' = c·L (the sequence padded to
//! whole chunks), conv = d + 2·G·N, a layer keeps the norm and `in_proj`'s
//! input as Mamba's; A's exp and negation 2 · 4·H; `in_proj`'s output
//! P·T·(d + conv + H); the padded convolution output P·B·conv·(S + K − 1);
//! softplus's and clamp's inputs 2 · P·B·S·H; in fp32 the whole SiLU output
//! 4·B·conv·S and Δ 4·B·S·H, in half precision the fp32 copies of x
//! (4·B·S·d), of Δ (twice, 2 · 4·B·S·H) and of the gate (4·T·d); and in
//! fp32 whatever P: D's padded input 4·B·S'·d, `segment_sum`'s bool masks
//! 2·L² and 2·(c + 1)², three [B, H, c, L, L] tensors (exp of the segment
//! sums, G, the masked G's copy), five [B, S', H, N] (B and C as the
//! einsums copy them), three [B, S', d] (x·Δ twice, C·states), two [B, H,
//! S'] (the decays), the chunk-to-chunk decay B·H·(c + 1)², the states
//! B·(c + 1)·d·N and B·c·d·N; `MambaRMSNormGated` keeps the scan's output
//! (a view of the padded one, 4·B·S'·d), silu(gate), the gated product and
//! the normalised output (3 · 4·T·d) and its rsqrt per group 4·T·G; then
//! `out_proj`'s input P·T·d.

use super::tally::{Tally, plus, times};
use super::{
    Activations, FP32_BYTES, LayerActivations, Part, Platform, Recompute, Schedule, Workload,
};
use crate::architecture::{ChunkedScan, Dimensions, StateSpace};
use crate::error::{Error, Result};
use crate::units::Bytes;

/// Bytes of an int64 index.
const INT64: u64 = 8;

/// Tensors of the logits' size a cross-entropy backward allocates while the
/// saved log-probabilities are alive.
const LOSS_BACKWARD_COPIES: u64 = 2;

/// Tensors of a layer's widest size its backward holds at once.
const BACKWARD_WIDEST: u64 = 3;

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
        match self.mixer.chunked {
            Some(chunked) => self.chunked_layer(chunked),
            None => self.sequential_layer(),
        }
    }

    /// Everything one Mamba-2 layer saves (see the module's notes).
    fn chunked_layer(&self, scan: ChunkedScan) -> Result<Bytes> {
        let (p, b, s, t, h) = (
            self.element,
            self.batch,
            self.seq,
            self.tokens(),
            self.hidden,
        );
        let (d, n, k) = (self.mixer.inner, self.mixer.state, self.mixer.conv_kernel);
        let (heads, groups, l) = (scan.heads, scan.groups, scan.chunk_size);
        let chunks = s.div_ceil(l);
        let padded = chunks.saturating_mul(l);
        let conv = d.saturating_add(groups.saturating_mul(n).saturating_mul(2));
        let projected = d.saturating_add(conv).saturating_add(heads);
        let half = self.half();
        let f = FP32_BYTES;
        let mut saved = Tally::new();
        saved.add(self.norm(p)?)?;
        saved.tensor(&[p, t, h])?;
        // A: exp's result and -exp.
        saved.tensor(&[2, f, heads])?;
        // in_proj's output (the convolution's input), the padded conv output.
        saved.tensor(&[p, t, projected])?;
        saved.tensor(&[p, b, conv, s.saturating_add(k).saturating_sub(1)])?;
        // softplus's and clamp's inputs.
        saved.tensor(&[2, p, b, s, heads])?;
        if half {
            // x.float(), dt.float() twice, the gate's fp32 copy.
            saved.tensor(&[f, b, s, d])?;
            saved.tensor(&[2, f, b, s, heads])?;
            saved.tensor(&[f, t, d])?;
        } else {
            // The whole SiLU output (x is a view of it), Δ.
            saved.tensor(&[f, b, conv, s])?;
            saved.tensor(&[f, b, s, heads])?;
        }
        // D's padded input.
        saved.tensor(&[f, b, padded, d])?;
        // segment_sum's two bool masks, over a chunk and over the chunks.
        saved.tensor(&[2, l, l])?;
        saved.tensor(&[2, chunks.saturating_add(1), chunks.saturating_add(1)])?;
        // exp(segsum(A)), G, G·L's copy: [B, H, c, L, L] each.
        saved.tensor(&[3, f, b, heads, chunks, l, l])?;
        // C and B for G, B for B·decay, B·decay, C for C·states: [B, S', H, N].
        saved.tensor(&[5, f, b, padded, heads, n])?;
        // x·Δ's chunks for Y_diag and for the states, C·states (Y_off's factor).
        saved.tensor(&[3, f, b, padded, d])?;
        // decay_states and exp(A_cumsum): [B, H, S'].
        saved.tensor(&[2, f, b, heads, padded])?;
        // The chunk-to-chunk decay, the states with the zero initial one,
        // the states C reads.
        saved.tensor(&[
            f,
            b,
            heads,
            chunks.saturating_add(1),
            chunks.saturating_add(1),
        ])?;
        saved.tensor(&[f, b, chunks.saturating_add(1), d, n])?;
        saved.tensor(&[f, b, chunks, d, n])?;
        // MambaRMSNormGated: the scan's output (a view of the padded one),
        // silu(gate), the gated product, the rsqrt per group, the
        // normalised output; out_proj's input.
        saved.tensor(&[f, b, padded, d])?;
        saved.tensor(&[3, f, t, d])?;
        saved.tensor(&[f, t, groups])?;
        saved.tensor(&[p, t, d])?;
        Ok(saved.bytes())
    }

    /// Everything one Mamba layer saves (see the module's notes).
    fn sequential_layer(&self) -> Result<Bytes> {
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

    /// The widest tensor of a layer: Mamba's exp(A·Δ), 4·B·d·S·N;
    /// Mamba-2's largest of x·Δ's chunks 4·B·S'·d, the [B, H, c, L, L]
    /// products, the states 4·B·(c + 1)·d·N and B or C 4·B·S'·H·N.
    fn widest(&self) -> Result<Bytes> {
        let (b, s, d, n) = (self.batch, self.seq, self.mixer.inner, self.mixer.state);
        let f = FP32_BYTES;
        let Some(scan) = self.mixer.chunked else {
            return super::tally::product(&[f, b, d, s, n]);
        };
        let chunks = s.div_ceil(scan.chunk_size);
        let padded = chunks.saturating_mul(scan.chunk_size);
        let l = scan.chunk_size;
        let mut widest = Bytes::ZERO;
        for shape in [
            [f, b, padded, d, 1],
            [f, b, scan.heads, chunks, l.saturating_mul(l)],
            [f, b, chunks.saturating_add(1), d, n],
            [f, b, padded, scan.heads, n],
        ] {
            widest = widest.max(super::tally::product(&shape)?);
        }
        Ok(widest)
    }

    /// What a layer's backward holds besides its saved tensors: three
    /// tensors of its widest size (the gradients accumulated for the two
    /// widest inputs of the scan, exp(A·Δ) and Δ·B·x in Mamba, and the
    /// slice's full-size gradient being added to one of them) and the
    /// gradient of its output, 4·T·h. Read off the CPU step timelines of
    /// `tools/measure_timeline.py` (the `mamba*` fixtures), not derived.
    fn backward(&self) -> Result<Bytes> {
        let mut held = Tally::new();
        held.add(times(self.widest()?, BACKWARD_WIDEST)?)?;
        held.tensor(&[FP32_BYTES, self.tokens(), self.hidden])?;
        Ok(held.bytes())
    }
}

/// Refuses what the Mamba activation model does not price.
fn check(mixer: StateSpace, workload: &Workload) -> Result<()> {
    if workload.platform == Platform::Cuda {
        let fused = if mixer.chunked.is_some() {
            "mamba_split_conv1d_scan_combined"
        } else {
            "mamba_inner_fn"
        };
        return Err(Error::InvalidValue {
            what: "--platform",
            value: "cuda".to_string(),
            reason: format!(
                "Mamba's activations are measured on transformers' torch path; on CUDA with mamba-ssm installed it runs the fused {fused}, whose saved tensors are not modelled; accepted: --platform cpu (also what CUDA runs without mamba-ssm)"
            ),
        });
    }
    super::workload::plain_data_parallel_only(workload, "Mamba's activations")
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
    check(mixer, workload)?;
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
    check(mixer, workload)?;
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
        widest_tensor: shape.widest()?,
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
    let scan = if dims
        .state_space
        .is_some_and(|mixer| mixer.chunked.is_some())
    {
        "mamba2_chunk_scan, the chunked scan in fp32"
    } else {
        "the sequential selective scan, which keeps every step's B x d_inner x state_size state in fp32"
    };
    let mut notes = vec![format!(
        "{}: transformers' torch path (causal_conv1d_fn, {scan}), measured on CPU without an attention_mask; the logits are fp32 (lm_head(...).float())",
        dims.model_type
    )];
    if workload.weights_dtype != workload.dtype {
        notes.push(format!(
            "{}'s saved tensors are measured with the model in {} (no autocast); under torch.autocast with {} weights the casts differ: approximate",
            dims.model_type,
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
    use crate::activation::Loss;
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
    fn mamba2_pads_the_sequence_to_whole_chunks() {
        let config = json!({"model_type": "mamba2", "num_hidden_layers": 2, "hidden_size": 64,
            "num_heads": 8, "head_dim": 16, "n_groups": 2, "state_size": 8, "chunk_size": 16,
            "vocab_size": 1000});
        let dims = dimensions_for_task(&config, None).unwrap();
        let layer = |seq| {
            super::super::activations(&dims, &cpu(2, seq))
                .unwrap()
                .layers[0]
                .bytes
                .0
        };
        // 17 tokens pad to 32: past a chunk boundary the chunked tensors jump.
        assert!(layer(17) - layer(16) > layer(18) - layer(17));
        let mut zero = config.clone();
        zero["chunk_size"] = json!(0);
        assert!(dimensions_for_task(&zero, None).is_err());
        let err = super::super::activations(&dims, &Workload::new(1, 8)).unwrap_err();
        assert!(
            err.to_string().contains("mamba_split_conv1d_scan_combined"),
            "{err}"
        );
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
