//! What an encoder-decoder (T5, BART, Whisper) saves for backward when
//! trained as `AutoModelForSeq2SeqLM` (Whisper: `AutoModelForSpeechSeq2Seq`)
//! on `S` input tokens and `T` label tokens: the encoder's layers over `B·S`
//! tokens (Whisper's `max_source_positions`, whatever `--seq-len` says),
//! the decoder's over `B·T` with cross-attention to the encoder's output,
//! and the loss over `B·T` rows.
//!
//! Every formula was read off the saved tensors of
//! `tools/measure_activations.py` (the `t5__*`, `bart__*` and `whisper__*`
//! `seq2seq` fixtures, CPU, no `attention_mask`, `use_cache` off) and
//! reproduces all 44 of them to the byte. Whisper's layers (pre-norm) save
//! what BART's (post-norm) do, in another order; its front keeps the
//! log-mel frames and the two convolutions' GELU inputs, each stack ends in
//! a LayerNorm, and the flash kernel's output is copied before `out_proj`. With P the activation element size, n a stack's
//! tokens, h `d_model`, w the attention width (heads · head width), f the
//! feed-forward width:
//!
//! * T5's `T5LayerNorm` (RMS in Python) keeps its input in fp32
//!   (`.to(float32).pow(2)`: 4·n·h; in fp32 the input itself), the fp32
//!   rsqrt 4·n, in half precision the input in its dtype P·n·h, and the
//!   normalised hidden cast back (`weight * hidden`: P·n·h); BART's
//!   `nn.LayerNorm` its input P·n·h and mean and rstd (2·n in the
//!   statistics' dtype).
//! * attention: the projections' input P·n·h; with eager attention (and
//!   sdpa's math fallback) copies of q, k and v, the probabilities
//!   B·a·Lq·Lk, with attention dropout its mask and the dropped
//!   probabilities; the math fallback runs in fp32 (4 bytes) whatever the
//!   model dtype. It is taken by T5's self-attention (its relative
//!   position bias is an additive mask that requires grad, which the CPU
//!   flash kernel refuses) and by any attention with dropout; the flash
//!   kernel keeps q, k, v, its output and an fp32 log-sum-exp B·a·Lq. The
//!   output projection's input P·n·w (the flash output itself). T5's
//!   causal self-attention on the math path keeps a bool mask T·T per layer.
//! * cross-attention reads the encoder's output (P·B·S·h, saved once for
//!   every decoder layer); its keys and values are B·S rows.
//! * T5's relative position buckets (int64 S·S for the encoder, T·T for the
//!   decoder) are saved once, by the first layer that computes the bias; on
//!   sdpa without dropout the cross-attention's zero bias [1, a, T, S] once.
//! * the feed-forward: its input P·n·h and by kind (see
//!   [`Seq2SeqFeedForward`]) P·n·f tensors; dropout masks.
//! * the logits and `CrossEntropyLoss` in the model dtype: P·B·T·V each,
//!   int64 targets, a scalar `total_weight`.
//!
//! Gradient checkpointing (`--recompute full`, every layer) keeps each
//! layer's input, the encoder's output, T5's position biases passed from
//! the first layer to the others (P·a·S², P·a·T² and, in the decoder, the
//! zero cross bias P·a·T·S), and with eager attention the decoder's 4-D
//! causal mask P·B·T².

use super::kernels::Kernels;
use super::tally::{Tally, plus, times};
use super::{
    Activations, FP32_BYTES, LayerActivations, Part, Platform, Recompute, Schedule, Workload,
};
use crate::activation::Attention;
use crate::architecture::{Dimensions, EncoderDecoder, Seq2SeqFamily, Seq2SeqFeedForward};
use crate::error::{Error, Result};
use crate::units::Bytes;

/// Bytes of an int64 index.
const INT64: u64 = 8;

/// Tensors of the logits' size a cross-entropy backward allocates while the
/// saved log-probabilities are alive (see `encoder_head.rs`).
const LOSS_BACKWARD_COPIES: u64 = 2;

/// One micro-step of an encoder-decoder.
struct Shape<'a> {
    model: &'a EncoderDecoder,
    family: Seq2SeqFamily,
    /// P.
    element: u64,
    batch: u64,
    /// Encoder tokens per sequence S.
    source: u64,
    /// Decoder tokens per sequence T.
    target: u64,
    hidden: u64,
    vocab: u64,
    kernels: &'a Kernels,
    eager: bool,
}

/// One attention block: its queries' rows and the keys' rows.
struct Site {
    heads: u64,
    /// Query tokens per sequence.
    queries: u64,
    /// Key tokens per sequence.
    keys: u64,
    /// Whether it is self-attention (T5's carries the trainable bias).
    own: bool,
    /// Whether it is causal.
    causal: bool,
}

impl Shape<'_> {
    fn mask(&self) -> u64 {
        self.kernels.dropout_mask.bytes(self.element)
    }

    /// A norm over `tokens` rows of `d_model`, its input included.
    fn norm(&self, tokens: u64) -> Result<Bytes> {
        let (p, h) = (self.element, self.hidden);
        let mut saved = Tally::new();
        match self.family {
            Seq2SeqFamily::T5 => {
                saved.tensor(&[FP32_BYTES, tokens, h])?;
                saved.tensor(&[FP32_BYTES, tokens])?;
                saved.tensor_if(p != FP32_BYTES, &[p, tokens, h])?;
                saved.tensor(&[p, tokens, h])?;
            }
            Seq2SeqFamily::Bart | Seq2SeqFamily::Whisper => {
                saved.tensor(&[p, tokens, h])?;
                saved.tensor(&[2, self.kernels.layer_norm_stats.bytes(p), tokens])?;
            }
        }
        Ok(saved.bytes())
    }

    /// Whether attention at `site` runs sdpa's math path (in fp32).
    fn math(&self, site: &Site) -> bool {
        !self.eager
            && (self.model.attention_dropout || (self.family == Seq2SeqFamily::T5 && site.own))
    }

    /// What one attention block keeps, its input projections' input
    /// excluded (shared by q, k and v; the encoder's output for
    /// cross-attention).
    fn attention(&self, site: &Site) -> Result<Bytes> {
        let (p, b, d) = (self.element, self.batch, self.model.head_dim);
        let width = site.heads.saturating_mul(d);
        let (queries, keys) = (b.saturating_mul(site.queries), b.saturating_mul(site.keys));
        let rows = queries.saturating_add(keys.saturating_mul(2));
        let probabilities = [b, site.heads, site.queries, site.keys];
        let mut saved = Tally::new();
        if self.eager || self.math(site) {
            let e = if self.math(site) { FP32_BYTES } else { p };
            saved.tensor(&[e, rows, width])?;
            saved.tensor(&[&[e][..], &probabilities[..]].concat())?;
            if self.model.attention_dropout {
                let mask = if self.math(site) {
                    FP32_BYTES
                } else {
                    self.mask()
                };
                saved.tensor(&[&[mask + e][..], &probabilities[..]].concat())?;
            }
            saved.tensor_if(
                self.math(site) && site.causal && self.family == Seq2SeqFamily::T5,
                &[site.queries, site.keys],
            )?;
        } else {
            saved.tensor(&[p, rows, width])?;
            saved.tensor(&[FP32_BYTES, b, site.heads, site.queries])?;
            // Whisper's reshape copies the kernel's output before out_proj.
            saved.tensor_if(self.family == Seq2SeqFamily::Whisper, &[p, queries, width])?;
        }
        // The output projection's input (the flash kernel's output).
        saved.tensor(&[p, queries, width])?;
        Ok(saved.bytes())
    }

    /// A feed-forward of width `width` over `tokens` rows, its input included.
    fn feed_forward(&self, tokens: u64, width: u64) -> Result<Bytes> {
        let p = self.element;
        let dropout = self.model.activation_dropout;
        let mut saved = Tally::new();
        saved.tensor(&[p, tokens, self.hidden])?;
        let wide = match self.model.feed_forward {
            // relu's result is the output projection's input.
            Seq2SeqFeedForward::Relu => 1,
            // gelu's input and fc2's.
            Seq2SeqFeedForward::Gelu => 2,
            // NewGELU's four, the product's two factors, wo's input.
            Seq2SeqFeedForward::GatedNewGelu => 7,
            Seq2SeqFeedForward::GatedSilu => 4,
        };
        saved.tensor(&[wide * p, tokens, width])?;
        if dropout {
            saved.tensor(&[self.mask(), tokens, width])?;
            // The dropped result is a new tensor where relu's was shared.
            saved.tensor_if(
                self.model.feed_forward == Seq2SeqFeedForward::Relu,
                &[p, tokens, width],
            )?;
        }
        Ok(saved.bytes())
    }

    /// A dropout mask over `tokens` rows of `d_model`, when dropout is on.
    fn hidden_mask(&self, tokens: u64) -> Result<Bytes> {
        let mut saved = Tally::new();
        saved.tensor_if(self.model.dropout, &[self.mask(), tokens, self.hidden])?;
        Ok(saved.bytes())
    }

    /// The input one layer keeps under checkpointing, P·n·h.
    fn stream(&self, tokens: u64) -> Result<Bytes> {
        let mut saved = Tally::new();
        saved.tensor(&[self.element, tokens, self.hidden])?;
        Ok(saved.bytes())
    }

    /// An encoder layer, everything it saves.
    fn encoder_layer(&self) -> Result<Bytes> {
        let tokens = self.batch.saturating_mul(self.source);
        let site = Site {
            heads: self.model.encoder_heads,
            queries: self.source,
            keys: self.source,
            own: true,
            causal: false,
        };
        let mut saved = Tally::new();
        saved.add(self.norm(tokens)?)?;
        saved.add(self.stream(tokens)?)?;
        saved.add(self.attention(&site)?)?;
        saved.add(self.norm(tokens)?)?;
        saved.add(self.feed_forward(tokens, self.model.encoder_intermediate)?)?;
        saved.add(times(self.hidden_mask(tokens)?, 2)?)?;
        Ok(saved.bytes())
    }

    /// A decoder layer, everything it saves but the encoder's output.
    fn decoder_layer(&self) -> Result<Bytes> {
        let tokens = self.batch.saturating_mul(self.target);
        let heads = self.model.decoder_heads;
        let own = Site {
            heads,
            queries: self.target,
            keys: self.target,
            own: true,
            causal: true,
        };
        let cross = Site {
            heads,
            queries: self.target,
            keys: self.source,
            own: false,
            causal: false,
        };
        let mut saved = Tally::new();
        for site in [&own, &cross] {
            saved.add(self.norm(tokens)?)?;
            saved.add(self.stream(tokens)?)?;
            saved.add(self.attention(site)?)?;
        }
        saved.add(self.norm(tokens)?)?;
        saved.add(self.feed_forward(tokens, self.model.decoder_intermediate)?)?;
        saved.add(times(self.hidden_mask(tokens)?, 3)?)?;
        Ok(saved.bytes())
    }

    /// Before the encoder's layers: ids (and BART's position ids, the
    /// embedding LayerNorm), T5's position buckets (computed inside the
    /// first layer: none under `checkpointed`), the dropout mask.
    fn encoder_embeddings(&self, checkpointed: bool) -> Result<Bytes> {
        let tokens = self.batch.saturating_mul(self.source);
        let mut saved = Tally::new();
        saved.tensor(&[INT64, tokens])?;
        match self.family {
            Seq2SeqFamily::T5 => {
                saved.tensor_if(!checkpointed, &[INT64, self.source, self.source])?
            }
            Seq2SeqFamily::Bart => {
                saved.tensor(&[INT64, tokens])?;
                saved.add(self.norm(tokens)?)?;
            }
            Seq2SeqFamily::Whisper => return self.audio_embeddings(),
        }
        saved.add(self.hidden_mask(tokens)?)?;
        Ok(saved.bytes())
    }

    /// Whisper's front: the log-mel frames conv1 keeps (2·S per sequence,
    /// in the model dtype), GELU's input and conv2's input over the 2·S
    /// frames, GELU's input over the S positions conv2's stride leaves, the
    /// dropout mask; the frozen positions keep nothing.
    fn audio_embeddings(&self) -> Result<Bytes> {
        let (p, b, h) = (self.element, self.batch, self.hidden);
        let frames = self.source.saturating_mul(2);
        let mut saved = Tally::new();
        saved.tensor(&[p, b, self.model.mel_bins, frames])?;
        saved.tensor(&[2, p, b, h, frames])?;
        saved.tensor(&[p, b, h, self.source])?;
        saved.add(self.hidden_mask(b.saturating_mul(self.source))?)?;
        Ok(saved.bytes())
    }

    /// After the encoder's layers: T5's final norm and dropout, and the
    /// encoder's output, which every cross-attention reads.
    fn encoder_output(&self) -> Result<Bytes> {
        let tokens = self.batch.saturating_mul(self.source);
        let mut saved = Tally::new();
        match self.family {
            Seq2SeqFamily::T5 => {
                saved.add(self.norm(tokens)?)?;
                saved.add(self.hidden_mask(tokens)?)?;
            }
            Seq2SeqFamily::Whisper => saved.add(self.norm(tokens)?)?,
            Seq2SeqFamily::Bart => {}
        }
        saved.add(self.stream(tokens)?)?;
        Ok(saved.bytes())
    }

    /// Before the decoder's layers: ids, positions or buckets, the
    /// embedding LayerNorm (BART), the dropout mask, and on sdpa without
    /// dropout T5's zero cross-attention bias [1, a, T, S] (both made in
    /// the first layer: not under `checkpointed`).
    fn decoder_embeddings(&self, checkpointed: bool) -> Result<Bytes> {
        let tokens = self.batch.saturating_mul(self.target);
        let mut saved = Tally::new();
        saved.tensor(&[INT64, tokens])?;
        match self.family {
            Seq2SeqFamily::T5 => {
                saved.tensor_if(!checkpointed, &[INT64, self.target, self.target])?;
                saved.tensor_if(
                    !checkpointed && !self.eager && !self.model.attention_dropout,
                    &[
                        self.element,
                        self.model.decoder_heads,
                        self.target,
                        self.source,
                    ],
                )?;
            }
            Seq2SeqFamily::Bart => {
                saved.tensor(&[INT64, self.target])?;
                saved.add(self.norm(tokens)?)?;
            }
            // WhisperPositionalEmbedding indexes its table by [B, T] ids.
            Seq2SeqFamily::Whisper => saved.tensor(&[INT64, tokens])?,
        }
        saved.add(self.hidden_mask(tokens)?)?;
        Ok(saved.bytes())
    }

    /// After the decoder's layers: T5's final norm and dropout, and the
    /// output projection's input.
    fn decoder_head(&self) -> Result<Bytes> {
        let tokens = self.batch.saturating_mul(self.target);
        let mut saved = Tally::new();
        match self.family {
            Seq2SeqFamily::T5 => {
                saved.add(self.norm(tokens)?)?;
                saved.add(self.hidden_mask(tokens)?)?;
            }
            Seq2SeqFamily::Whisper => saved.add(self.norm(tokens)?)?,
            Seq2SeqFamily::Bart => {}
        }
        saved.add(self.stream(tokens)?)?;
        Ok(saved.bytes())
    }

    /// What gradient checkpointing keeps besides each layer's input, the
    /// encoder's output and what sits outside the layers: T5's position
    /// biases handed from the first layer of a stack to the others, and
    /// with eager attention the decoder's causal mask.
    fn checkpoint_inputs(&self) -> Result<Bytes> {
        let (p, b) = (self.element, self.batch);
        let (s, t) = (self.source, self.target);
        let mut saved = Tally::new();
        if self.family == Seq2SeqFamily::T5 {
            saved.tensor_if(
                self.model.encoder_layers > 1,
                &[p, self.model.encoder_heads, s, s],
            )?;
            saved.tensor_if(
                self.model.decoder_layers > 1,
                &[p, self.model.decoder_heads, t, t.saturating_add(s)],
            )?;
        }
        saved.tensor_if(self.eager, &[p, b, t, t])?;
        Ok(saved.bytes())
    }
}

/// How an encoder-decoder's activations were reached, for the report: the
/// tokens of each stack and what the CPU measurements leave out.
pub fn notes(dims: &Dimensions, workload: &Workload) -> Vec<String> {
    if dims.encoder_decoder.is_none() {
        return Vec::new();
    }
    let mut notes = vec![format!(
        "{}: encoder layers over the input tokens, decoder layers over the target tokens with cross-attention to the encoder's output; measured on CPU without an attention_mask (unpadded batches)",
        dims.model_type
    )];
    notes.push(format!(
        "the step time's FLOPs count the {} layers as one stack over the input tokens (the decoder's target tokens and cross-attention are not priced apart): approximate",
        dims.layers
    ));
    if workload.platform == Platform::Cuda {
        notes.push("encoder-decoder activations follow the CPU measurements with CUDA's 1-byte dropout masks and fp32 LayerNorm statistics; which sdpa kernel CUDA picks for T5's trainable position bias is not measured: approximate".to_string());
    }
    notes
}

/// Refuses what the seq2seq model does not price yet.
fn check(workload: &Workload) -> Result<()> {
    super::workload::plain_data_parallel_only(
        workload,
        "encoder-decoder activations (T5, BART, Whisper)",
    )?;
    if workload.attention == Attention::Flash {
        return Err(Error::InvalidValue {
            what: "--attention",
            value: "flash".to_string(),
            reason: "T5 has no flash-attention 2 support in transformers, and BART's is not measured; accepted for encoder-decoders: eager or sdpa".to_string(),
        });
    }
    Ok(())
}

/// The activations of one micro-batch of an encoder-decoder `dims` (whose
/// `encoder_decoder` is set) under `workload`: `workload.seq_len` encoder
/// tokens and `workload.target_len` (else the same) decoder tokens.
pub fn activations(
    dims: &Dimensions,
    model: &EncoderDecoder,
    workload: &Workload,
    kernels: &Kernels,
) -> Result<Activations> {
    check(workload)?;
    let target = workload.target_len.unwrap_or(workload.seq_len);
    if let Some(most) = model.target_positions
        && target > most
    {
        return Err(Error::InvalidValue {
            what: "--target-len",
            value: target.to_string(),
            reason: format!(
                "{} raises past max_target_positions; accepted: at most {most} decoder tokens (--target-len, else --seq-len)",
                dims.model_type
            ),
        });
    }
    let shape = Shape {
        model,
        family: model.family,
        element: workload.dtype.bytes(),
        batch: workload.micro_batch,
        source: model.source_positions.unwrap_or(workload.seq_len),
        target: workload.target_len.unwrap_or(workload.seq_len),
        hidden: dims.hidden,
        vocab: dims.vocab,
        kernels,
        eager: workload.attention == Attention::Eager,
    };
    let checkpointed = workload.recompute == Recompute::Full;
    let (source_tokens, target_tokens) = (
        shape.batch.saturating_mul(shape.source),
        shape.batch.saturating_mul(shape.target),
    );
    let encoder_layer = shape.encoder_layer()?;
    let decoder_layer = shape.decoder_layer()?;
    let (encoder_kept, decoder_kept) = if checkpointed {
        (shape.stream(source_tokens)?, shape.stream(target_tokens)?)
    } else {
        (encoder_layer, decoder_layer)
    };
    let encoder_layers = times(encoder_kept, model.encoder_layers)?;
    let decoder_layers = times(decoder_kept, model.decoder_layers)?;

    let mut before = Tally::new();
    before.add(shape.encoder_embeddings(checkpointed)?)?;
    before.add(shape.encoder_output()?)?;
    before.add(shape.decoder_embeddings(checkpointed)?)?;
    if checkpointed {
        before.add(shape.checkpoint_inputs()?)?;
    }
    let head = shape.decoder_head()?;

    let p = shape.element;
    let mut logits = Tally::new();
    logits.tensor(&[p, target_tokens, shape.vocab])?;
    let logits = logits.bytes();
    let mut loss = Tally::new();
    loss.add(logits)?;
    loss.tensor(&[INT64, target_tokens])?;
    loss.tensor(&[p])?;
    let loss = loss.bytes();
    let loss_backward = times(logits, LOSS_BACKWARD_COPIES)?;
    let recomputed = |layer: Bytes| if checkpointed { layer } else { Bytes::ZERO };
    let transient = loss_backward
        .max(recomputed(encoder_layer))
        .max(recomputed(decoder_layer));

    let outside = plus(before.bytes(), head)?;
    let mut total = Tally::new();
    for bytes in [encoder_layers, decoder_layers, outside, logits, loss] {
        total.add(bytes)?;
    }

    // The step timeline: the encoder's layers then the decoder's, each
    // holding in backward the gradient of its output and of its widest
    // tensor (approximate: not measured on the seq2seq timeline).
    let backward = |tokens: u64, width: u64| -> Result<Bytes> {
        let mut held = Tally::new();
        held.tensor(&[p, tokens, shape.hidden.saturating_add(width)])?;
        Ok(held.bytes())
    };
    let mut schedule = Schedule {
        in_flight: 1,
        has_head: true,
        embeddings: before.bytes(),
        head,
        logits,
        loss,
        loss_backward,
        logits_gradient: logits,
        widest_tensor: backward(
            target_tokens.max(source_tokens),
            model.encoder_intermediate.max(model.decoder_intermediate),
        )?,
        ..Schedule::default()
    };
    let stacks = [
        (
            model.encoder_layers,
            encoder_kept,
            recomputed(encoder_layer),
            backward(source_tokens, model.encoder_intermediate)?,
        ),
        (
            model.decoder_layers,
            decoder_kept,
            recomputed(decoder_layer),
            backward(target_tokens, model.decoder_intermediate)?,
        ),
    ];
    let mut index = 0;
    for (count, kept, rebuilt, held) in stacks {
        for _ in 0..count {
            schedule.layers.push(LayerActivations {
                layer: index,
                kept,
                recomputed: rebuilt,
                backward: held,
                ..LayerActivations::default()
            });
            index += 1;
        }
    }

    let notes = notes(dims, workload);
    Ok(Activations {
        total: total.bytes(),
        layers: [
            ("encoder layers", encoder_layers),
            ("decoder layers", decoder_layers),
        ]
        .into_iter()
        .map(|(name, bytes)| Part {
            name: name.to_string(),
            bytes,
        })
        .collect(),
        outside_layers: outside,
        logits,
        loss,
        backward_transient: transient,
        loss_function: workload.loss,
        recompute: workload.recompute,
        recompute_every: workload.recompute_every,
        offload: None,
        fp8: None,
        notes,
        schedule,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::activation::Loss;
    use crate::architecture::{Task, dimensions_for_task};
    use crate::dtype::DType;

    fn total(config: serde_json::Value, target: Option<u64>, recompute: Recompute) -> Activations {
        let dims = dimensions_for_task(&config, Some(Task::Seq2Seq)).unwrap();
        let workload = Workload {
            target_len: target,
            recompute,
            dtype: DType::Bf16,
            platform: Platform::Cpu,
            ..Workload::new(2, 64)
        };
        super::super::activations(&dims, &workload).unwrap()
    }

    #[test]
    fn the_target_length_moves_the_decoder_and_the_loss_only() {
        for model_type in ["t5", "bart"] {
            let config = json!({"model_type": model_type, "num_layers": 2, "encoder_layers": 2,
                "decoder_layers": 2, "vocab_size": 1000});
            let same = total(config.clone(), None, Recompute::None);
            let explicit = total(config.clone(), Some(64), Recompute::None);
            assert_eq!(same.total, explicit.total, "{model_type}");
            let longer = total(config.clone(), Some(128), Recompute::None);
            assert_eq!(same.layers[0], longer.layers[0], "{model_type}: encoder");
            assert!(
                longer.layers[1].bytes > same.layers[1].bytes,
                "{model_type}"
            );
            assert_eq!(longer.logits.0, 2 * same.logits.0, "{model_type}");
            let checkpointed = total(config, Some(128), Recompute::Full);
            assert!(checkpointed.total < longer.total, "{model_type}");
            assert_eq!(checkpointed.schedule.layers.len(), 4, "{model_type}");
        }
    }

    #[test]
    fn what_is_not_measured_is_refused() {
        let dims = dimensions_for_task(&json!({"model_type": "t5"}), None).unwrap();
        for workload in [
            Workload {
                tensor_parallel: 2,
                ..Workload::new(1, 8)
            },
            Workload {
                recompute: Recompute::Selective,
                ..Workload::new(1, 8)
            },
            Workload {
                attention: Attention::Flash,
                ..Workload::new(1, 8)
            },
            Workload {
                loss: Loss::Chunked(2),
                ..Workload::new(1, 8)
            },
        ] {
            assert!(super::super::activations(&dims, &workload).is_err());
        }
        for (config, key) in [
            (
                json!({"model_type": "t5", "feed_forward_proj": "gelu"}),
                "feed_forward_proj",
            ),
            (
                json!({"model_type": "bart", "activation_function": "relu"}),
                "activation_function",
            ),
        ] {
            match dimensions_for_task(&config, None) {
                Err(Error::InvalidConfig { key: found, .. }) => assert_eq!(found, key),
                other => panic!("expected {key} refused, got {other:?}"),
            }
        }
    }
}
