//! Whisper, following transformers' `models/whisper/configuration_whisper.py`
//! (`WhisperConfig`) and `modeling_whisper.py` (`WhisperModel`,
//! `WhisperForConditionalGeneration`, `WhisperForAudioClassification`,
//! `WhisperForCausalLM`).
//!
//! `WhisperEncoder` reads log-mel frames: `conv1` (`Conv1d(num_mel_bins,
//! d_model, 3)`) and `conv2` (`Conv1d(d_model, d_model, 3, stride=2)`),
//! both biased, then `embed_positions` [max_source_positions, d_model], a
//! sinusoidal table created with `requires_grad_(False)` (a parameter that
//! is never trained), `layers.{i}` and `layer_norm`. `WhisperDecoder` has
//! `embed_tokens`, learned `embed_positions` [max_target_positions,
//! d_model], `layers.{i}` and `layer_norm`. Layers are pre-norm:
//! `self_attn.{k,v,q,out}_proj` (`k_proj` without a bias), its
//! `self_attn_layer_norm`, in the decoder `encoder_attn.*` and its norm,
//! then `fc1`, `fc2` and `final_layer_norm`.
//!
//! `WhisperForConditionalGeneration` (`AutoModelForSpeechSeq2Seq`) mounts
//! the model as `model` and adds `proj_out`, tied to the decoder's
//! `embed_tokens` unless `tie_word_embeddings` is false;
//! `WhisperForAudioClassification` keeps the encoder, `layer_weights`
//! (when `use_weighted_layer_sum`), `projector` and `classifier`;
//! `WhisperForCausalLM` the decoder as `model.decoder` and `proj_out`.

use super::config::{Config, exact_ratio};
use super::decoder::Decoder;
use super::dimensions::{
    Dimensions, Dropout, EagerSoftmax, EncoderDecoder, LayerLayout, Linears, MlpKind, NormKind,
    Positions, QkNormKind, QkvLayout, Seq2SeqFamily, Seq2SeqFeedForward, Softcap,
};
use super::encoder_decoder::{bart_layer, bounded, write_stack};
use super::params::{Norm, Params, sum};
use super::task::Task;
use super::tower::{refused, whole};
use crate::error::{Error, Result};
use crate::model::Role;

/// The parameter transformers creates with `requires_grad_(False)`: the
/// encoder's sinusoidal positions.
pub const FROZEN: &[&str] = &["encoder.embed_positions.weight"];

/// Log-mel frames per second of audio (the feature extractor's hop of 160
/// samples at 16 kHz).
pub const FRAMES_PER_SECOND: u64 = 100;

/// The stride of `conv2`, which halves the frames into encoder positions.
const CONV_STRIDE: u64 = 2;

/// A Whisper model's sizes, read from its config.json.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Whisper {
    /// `vocab_size`.
    pub vocab: u64,
    /// `num_mel_bins`.
    pub mels: u64,
    /// `d_model`.
    pub hidden: u64,
    /// `encoder_layers`.
    pub encoder_layers: u64,
    /// `decoder_layers`.
    pub decoder_layers: u64,
    /// `encoder_ffn_dim`.
    pub encoder_ffn: u64,
    /// `decoder_ffn_dim`.
    pub decoder_ffn: u64,
    /// `max_source_positions`: encoder positions, after `conv2`.
    pub source_positions: u64,
    /// `max_target_positions`.
    pub target_positions: u64,
    /// `tie_word_embeddings`.
    pub tied: bool,
    /// `use_weighted_layer_sum`.
    pub weighted_layer_sum: bool,
    /// `classifier_proj_size`.
    pub classifier_projection: u64,
}

impl Whisper {
    /// Reads the keys `WhisperConfig` declares, with their defaults (the
    /// `attribute_map` aliases `hidden_size`, `num_attention_heads` and
    /// `num_hidden_layers` too). Each stack's heads must divide `d_model`,
    /// as `WhisperAttention` raises otherwise.
    pub fn read(config: &Config) -> Result<Whisper> {
        let hidden = config.size_of_first(&["d_model", "hidden_size"], 384)?;
        let encoder_heads =
            config.size_of_first(&["encoder_attention_heads", "num_attention_heads"], 6)?;
        exact_ratio(hidden, encoder_heads, "encoder_attention_heads")?;
        exact_ratio(
            hidden,
            config.size("decoder_attention_heads", 6)?,
            "decoder_attention_heads",
        )?;
        Ok(Whisper {
            vocab: config.size("vocab_size", 51865)?,
            mels: config.size("num_mel_bins", 80)?,
            hidden,
            encoder_layers: bounded(
                "encoder_layers",
                config.size_of_first(&["encoder_layers", "num_hidden_layers"], 4)?,
            )?,
            decoder_layers: bounded("decoder_layers", config.size("decoder_layers", 4)?)?,
            encoder_ffn: config.size("encoder_ffn_dim", 1536)?,
            decoder_ffn: config.size("decoder_ffn_dim", 1536)?,
            source_positions: config.size("max_source_positions", 1500)?,
            target_positions: config.size("max_target_positions", 448)?,
            tied: config.flag("tie_word_embeddings", true)?,
            weighted_layer_sum: config.flag("use_weighted_layer_sum", false)?,
            classifier_projection: config.size("classifier_proj_size", 256)?,
        })
    }

    /// `WhisperEncoderLayer` (`decoder` false) or `WhisperDecoderLayer`.
    fn layer(&self, decoder: bool) -> Result<Params> {
        let ffn = if decoder {
            self.decoder_ffn
        } else {
            self.encoder_ffn
        };
        bart_layer(self.hidden, ffn, decoder, false)
    }

    /// `WhisperEncoder`.
    fn encoder(&self) -> Result<Params> {
        let hidden = self.hidden;
        let mut encoder = Params::new();
        for (conv, input) in [("conv1", self.mels), ("conv2", hidden)] {
            encoder.tensor(
                format!("{conv}.weight"),
                vec![hidden, input, 3],
                Role::Embedding,
            )?;
            encoder.tensor(format!("{conv}.bias"), vec![hidden], Role::Embedding)?;
        }
        encoder.embedding("embed_positions", self.source_positions, hidden)?;
        let layer = self.layer(false)?;
        write_stack(&mut encoder, "layers", self.encoder_layers, |_| {
            Ok(layer.clone())
        })?;
        encoder.norm("layer_norm", vec![hidden], Norm::WeightAndBias)?;
        Ok(encoder)
    }

    /// `WhisperDecoder`.
    fn decoder(&self) -> Result<Params> {
        let hidden = self.hidden;
        let mut decoder = Params::new();
        decoder.embedding("embed_tokens", self.vocab, hidden)?;
        decoder.embedding("embed_positions", self.target_positions, hidden)?;
        let layer = self.layer(true)?;
        write_stack(&mut decoder, "layers", self.decoder_layers, |_| {
            Ok(layer.clone())
        })?;
        decoder.norm("layer_norm", vec![hidden], Norm::WeightAndBias)?;
        Ok(decoder)
    }

    /// `proj_out` when it is not the decoder's `embed_tokens`.
    fn head(&self, params: &mut Params) -> Result<()> {
        if !self.tied {
            params.linear("proj_out", self.hidden, self.vocab, false, Role::OutputHead)?;
        }
        Ok(())
    }

    /// The model transformers' auto class for `task` builds: seq2seq
    /// (`WhisperForConditionalGeneration`, the default), embedding
    /// (`WhisperModel`), seq-cls:N (`WhisperForAudioClassification`) and
    /// causal-lm (`WhisperForCausalLM`).
    pub fn describe(&self, task: Task) -> Result<Decoder> {
        let mut params = Params::new();
        match task {
            Task::Seq2Seq => {
                params.mount("model.encoder", self.encoder()?);
                params.mount("model.decoder", self.decoder()?);
                self.head(&mut params)?;
            }
            Task::Embedding => {
                params.mount("encoder", self.encoder()?);
                params.mount("decoder", self.decoder()?);
            }
            Task::SequenceClassification { labels } => {
                params.mount("encoder", self.encoder()?);
                if self.weighted_layer_sum {
                    params.tensor(
                        "layer_weights",
                        vec![sum(&[self.encoder_layers, 1])?],
                        Role::OutputHead,
                    )?;
                }
                params.linear(
                    "projector",
                    self.hidden,
                    self.classifier_projection,
                    true,
                    Role::OutputHead,
                )?;
                params.linear(
                    "classifier",
                    self.classifier_projection,
                    labels,
                    true,
                    Role::OutputHead,
                )?;
            }
            Task::CausalLm => {
                params.mount("model.decoder", self.decoder()?);
                self.head(&mut params)?;
            }
            Task::MaskedLm | Task::TokenClassification { .. } => {
                return Err(refused(
                    "whisper",
                    task,
                    "seq2seq (the default: WhisperForConditionalGeneration), embedding (WhisperModel), seq-cls:N (WhisperForAudioClassification) or causal-lm (WhisperForCausalLM)",
                ));
            }
        }
        Ok(whole(params))
    }

    /// The log-mel frames `WhisperEncoder` accepts: exactly
    /// `max_source_positions` times the two convolutions' strides (1 and
    /// 2), 3,000 frames (30 s) for every published checkpoint.
    pub fn frames(&self) -> Result<u64> {
        self.source_positions
            .checked_mul(CONV_STRIDE)
            .ok_or_else(|| Error::overflow("Whisper's mel frames".to_string()))
    }
}

/// The model a `whisper` config's task builds.
pub fn describe(config: &Config, task: Task) -> Result<Decoder> {
    Whisper::read(config)?.describe(task)
}

/// What `seconds` of audio become in a `whisper` config: `30 s -> 3,000
/// log-mel frames -> 1,500 encoder positions`. `WhisperEncoder` refuses
/// any other length than `max_source_positions · 2` frames (the feature
/// extractor pads or cuts every clip to 30 s), so another length is
/// refused, naming the one accepted.
pub fn audio_tokens(config: &Config, seconds: u64) -> Result<String> {
    let whisper = Whisper::read(config)?;
    let frames = whisper.frames()?;
    let given = seconds.checked_mul(FRAMES_PER_SECOND);
    if given != Some(frames) {
        let accepted = if frames.is_multiple_of(FRAMES_PER_SECOND) {
            format!("{} (seconds)", frames / FRAMES_PER_SECOND)
        } else {
            "none in whole seconds".to_string()
        };
        return Err(Error::InvalidValue {
            what: "--audio-seconds",
            value: seconds.to_string(),
            reason: format!(
                "WhisperEncoder takes exactly max_source_positions x 2 = {frames} log-mel frames ({FRAMES_PER_SECOND} per second): the feature extractor pads or cuts every clip to that length; accepted: {accepted}"
            ),
        });
    }
    Ok(format!(
        "audio: {seconds} s -> {frames} log-mel frames ({} mel bins) -> {} encoder positions (conv2's stride 2)",
        whisper.mels, whisper.source_positions
    ))
}

/// The sizes and kinds the seq2seq activation model needs for
/// `WhisperForConditionalGeneration` (`seq2seq`): the log-mel frames and
/// the two convolutions with their GELUs, pre-norm layers with
/// `nn.LayerNorm`, `gelu` (the only `activation_function` measured), the
/// final LayerNorm of each stack, and the dropouts `dropout`,
/// `attention_dropout` and `activation_dropout` (0 by default).
pub fn dimensions(config: &Config, task: Task) -> Result<Dimensions> {
    if task != Task::Seq2Seq {
        return Err(Error::InvalidValue {
            what: "--task",
            value: task.to_string(),
            reason:
                "activations of `whisper` are modelled for seq2seq (WhisperForConditionalGeneration)"
                    .to_string(),
        });
    }
    let whisper = Whisper::read(config)?;
    let activation = config
        .string("activation_function", Some("gelu"))?
        .unwrap_or("gelu");
    if activation != "gelu" {
        return Err(Error::InvalidConfig {
            key: "activation_function".to_string(),
            problem: format!(
                "`{activation}` is not measured for Whisper's activation memory; accepted: gelu"
            ),
        });
    }
    let heads = config.size_of_first(&["encoder_attention_heads", "num_attention_heads"], 6)?;
    if config.size("decoder_attention_heads", 6)? != heads {
        return Err(Error::InvalidConfig {
            key: "decoder_attention_heads".to_string(),
            problem: "a head count other than the encoder's is not measured for activation memory; accepted: the same head count in both stacks".to_string(),
        });
    }
    let head_dim = exact_ratio(whisper.hidden, heads, "encoder_attention_heads")?;
    let dropout = config.fraction("dropout", 0.0)? > 0.0;
    let attention_dropout = config.fraction("attention_dropout", 0.0)? > 0.0;
    Ok(Dimensions {
        model_type: "whisper".to_string(),
        layers: whisper
            .encoder_layers
            .saturating_add(whisper.decoder_layers),
        hidden: whisper.hidden,
        intermediate: whisper.encoder_ffn.max(whisper.decoder_ffn),
        heads,
        kv_heads: heads,
        head_dim,
        vocab: whisper.vocab,
        tied_embeddings: whisper.tied,
        norm: NormKind::LayerNorm,
        layout: LayerLayout::PreNorm,
        qkv: QkvLayout::Separate,
        qk_norm: QkNormKind::None,
        softmax: EagerSoftmax::ModelDtype,
        mlp: MlpKind::Gelu,
        experts: None,
        positions: Positions::Learned,
        dropout: Dropout {
            attention: attention_dropout,
            residual: dropout,
            embedding: dropout,
        },
        softcap: Softcap::default(),
        mask_positional: false,
        linears: Linears {
            attention_input: vec!["q_proj", "k_proj", "v_proj"],
            attention_output: "out_proj",
            mlp_input: vec!["fc1"],
            mlp_output: "fc2",
            conv1d: false,
        },
        encoder: None,
        images: None,
        encoder_decoder: Some(EncoderDecoder {
            family: Seq2SeqFamily::Whisper,
            encoder_layers: whisper.encoder_layers,
            decoder_layers: whisper.decoder_layers,
            encoder_heads: heads,
            decoder_heads: heads,
            head_dim,
            encoder_intermediate: whisper.encoder_ffn,
            decoder_intermediate: whisper.decoder_ffn,
            feed_forward: Seq2SeqFeedForward::Gelu,
            dropout,
            attention_dropout,
            activation_dropout: config.fraction("activation_dropout", 0.0)? > 0.0,
            mel_bins: whisper.mels,
            source_positions: Some(whisper.source_positions),
            target_positions: Some(whisper.target_positions),
        }),
        state_space: None,
    })
}
