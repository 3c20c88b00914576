//! The sizes of a model that activation memory depends on: plain data of
//! the model layer, filled by the architecture readers
//! (`crate::architecture::dimensions` reads them from a config.json with
//! the transformers class defaults).
//!
//! The numbers come from the same readers as the parameter tensors (each
//! architecture file's `blueprint` or `Sizes`), so a key missing from the
//! file takes the same default in both. What the activation formulas need
//! beyond sizes (which norm, which MLP, which dropouts, how q, k and v are
//! projected) is data: a few small enums, one value per architecture.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::error::{Error, Result};

/// What activation memory needs to know of an architecture.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Dimensions {
    /// The HuggingFace `model_type` (`llama` for a generic decoder).
    pub model_type: String,
    /// Decoder layers.
    pub layers: u64,
    /// Hidden size h.
    pub hidden: u64,
    /// Dense MLP intermediate size f (an expert's in Mixtral, whose every layer is sparse).
    pub intermediate: u64,
    /// Attention heads a.
    pub heads: u64,
    /// Key/value heads.
    pub kv_heads: u64,
    /// Head dimension d (DeepSeek: the rotary part of a query head).
    pub head_dim: u64,
    /// Vocabulary V.
    pub vocab: u64,
    /// Whether the output head shares the token embedding.
    pub tied_embeddings: bool,
    /// The norm module and what it saves.
    pub norm: NormKind,
    /// Where a layer's norms sit.
    pub layout: LayerLayout,
    /// How queries, keys and values are projected.
    pub qkv: QkvLayout,
    /// Norms applied to queries and keys inside attention.
    pub qk_norm: QkNormKind,
    /// The softmax of eager attention.
    pub softmax: EagerSoftmax,
    /// The activation of the dense MLP (and of the experts, which are gated).
    pub mlp: MlpKind,
    /// The mixture of experts, when some layers have one.
    pub experts: Option<MixtureOfExperts>,
    /// How token positions enter the model.
    pub positions: Positions,
    /// The dropouts that are active in training.
    pub dropout: Dropout,
    /// Gemma 2's tanh soft-capping of attention scores and of the logits.
    pub softcap: Softcap,
    /// Whether a layer receives the 4-D attention mask as a positional
    /// argument (GPT-2's blocks), which gradient checkpointing then saves.
    pub mask_positional: bool,
    /// The module names of the linear layers, as LoRA targets name them.
    pub linears: Linears,
    /// A BERT-style encoder's inputs and task head; `None` for a causal LM.
    pub encoder: Option<EncoderParts>,
    /// A vision-language model's images merged into the text sequence
    /// (LLaVA): what its projector and the merge save; `None` for a text
    /// model.
    pub images: Option<ImageInputs>,
    /// An encoder-decoder's two stacks (T5, BART), which the seq2seq
    /// activation model reads instead of the single-stack fields above;
    /// `None` for a model of one stack.
    pub encoder_decoder: Option<EncoderDecoder>,
    /// A state-space model's mixer (Mamba), which the state-space
    /// activation model reads instead of the attention and MLP fields
    /// above; `None` for a transformer.
    pub state_space: Option<StateSpace>,
}

/// What the state-space activation model needs of a Mamba mixer
/// (`MambaMixer` in transformers' `models/mamba/modeling_mamba.py`, or
/// `Mamba2Mixer` in `models/mamba2/modeling_mamba2.py`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct StateSpace {
    /// d_inner = `expand · hidden_size`: the mixer's channels.
    pub inner: u64,
    /// N = `state_size`: the recurrent state per channel.
    pub state: u64,
    /// K = `conv_kernel`: the depthwise convolution's width.
    pub conv_kernel: u64,
    /// R = `time_step_rank` (0 for Mamba-2, whose Δ is one value per head).
    pub time_step_rank: u64,
    /// `residual_in_fp32`: the residual stream between the layers is fp32.
    pub residual_in_fp32: bool,
    /// Mamba-2's chunked scan (`Mamba2Mixer`); `None` for Mamba's
    /// sequential scan.
    pub chunked: Option<ChunkedScan>,
}

/// What Mamba-2's mixer (`Mamba2Mixer`, `mamba2_chunk_scan`) adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ChunkedScan {
    /// H = `num_heads` (d_inner = H · `head_dim`).
    pub heads: u64,
    /// G = `n_groups`: B and C are shared by the heads of a group.
    pub groups: u64,
    /// L = `chunk_size`: the scan's block along the sequence.
    pub chunk_size: u64,
}

/// What LLaVA saves for its images outside the language model's layers,
/// with its vision tower frozen (no autograd there): the projector's
/// saved tensors when it trains (`linear_1`'s input, the image features
/// of the selected layer; GELU's input; `linear_2`'s input) and
/// `masked_scatter`'s 1-byte mask [B, S, 1] when the merged embeddings
/// need a gradient. Measured by `tools/measure_activations.py`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ImageInputs {
    /// Images per sample (`--images`).
    pub per_sample: u64,
    /// Tokens each image becomes in the text sequence: rows of the
    /// projector per image.
    pub tokens: u64,
    /// Rows of the vision tower's hidden state per image (its patches and
    /// the class token).
    pub tower_tokens: u64,
    /// Whether the class token is sliced off (`vision_feature_select_strategy`
    /// `default`): `linear_1` then flattens a strided view, which copies it
    /// unless there is one image in the micro-batch.
    pub sliced: bool,
    /// The vision tower's hidden size: `linear_1`'s input width.
    pub vision_hidden: u64,
    /// The projector's width (the text model's hidden size).
    pub projector_hidden: u64,
    /// Whether the projector trains (it then saves its inputs).
    pub projector_trains: bool,
    /// Whether the text embeddings train (then the merge saves its mask
    /// even with a frozen projector).
    pub embeddings_train: bool,
}

/// Which encoder-decoder implementation an [`EncoderDecoder`] follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Seq2SeqFamily {
    /// `T5ForConditionalGeneration`: RMS norms in Python, relative position
    /// bias (an additive mask that requires grad), no biases.
    T5,
    /// `BartForConditionalGeneration`: post-norm LayerNorms, learned
    /// positions, biased linears, the embedding LayerNorm.
    Bart,
    /// `WhisperForConditionalGeneration`: two convolutions over log-mel
    /// frames, pre-norm layers, final LayerNorms, the attention output
    /// copied before its projection.
    Whisper,
}

/// The feed-forward of an encoder-decoder layer, by what it saves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Seq2SeqFeedForward {
    /// T5's `T5DenseActDense` with `relu`: the result, saved once.
    Relu,
    /// BART's `fc1`, `gelu`, `fc2`: gelu's input and fc2's input.
    Gelu,
    /// T5's `T5DenseGatedActDense` with `gelu_new` (`gated-gelu`): four
    /// tensors of `NewGELUActivation`, the product's two factors, fc2's input.
    GatedNewGelu,
    /// `gated-silu`: silu's input, the product's two factors, `wo`'s input.
    GatedSilu,
}

/// What the seq2seq activation model needs of an encoder-decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct EncoderDecoder {
    /// The implementation.
    pub family: Seq2SeqFamily,
    /// Encoder layers.
    pub encoder_layers: u64,
    /// Decoder layers.
    pub decoder_layers: u64,
    /// Encoder attention heads.
    pub encoder_heads: u64,
    /// Decoder attention heads (self- and cross-attention).
    pub decoder_heads: u64,
    /// The width of one head (T5's `d_kv`; BART: `d_model / heads`).
    pub head_dim: u64,
    /// The encoder's feed-forward width.
    pub encoder_intermediate: u64,
    /// The decoder's feed-forward width.
    pub decoder_intermediate: u64,
    /// The feed-forward kind.
    pub feed_forward: Seq2SeqFeedForward,
    /// Dropout on the embeddings and every block's output (T5's
    /// `dropout_rate`, BART's `dropout`).
    pub dropout: bool,
    /// Dropout on the attention probabilities (T5's `dropout_rate`, BART's
    /// `attention_dropout`).
    pub attention_dropout: bool,
    /// Dropout inside the feed-forward (T5's `dropout_rate`, BART's
    /// `activation_dropout`).
    pub activation_dropout: bool,
    /// Whisper's log-mel bins (`num_mel_bins`); 0 for a text encoder.
    pub mel_bins: u64,
    /// Whisper's encoder positions, fixed whatever `--seq-len` says
    /// (`max_source_positions`: 30 s of audio); `None` for a text encoder.
    pub source_positions: Option<u64>,
    /// The most decoder tokens the model takes (Whisper's
    /// `max_target_positions`, which it raises past); `None`: unbounded.
    pub target_positions: Option<u64>,
}

/// What a BERT-style encoder saves outside its layers that a causal LM
/// does not: its extra embedding inputs, the embedding LayerNorm, and the
/// head and loss of its task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct EncoderParts {
    /// Whether the token-type ids are saved per token `[B, S]` (RoBERTa
    /// gathers them with its computed position ids) rather than per
    /// position `[1, S]` (BERT gathers them from its buffer).
    pub token_types_per_token: bool,
    /// Whether the position ids are computed from the input ids and saved
    /// `[B, S]` (RoBERTa's `create_position_ids_from_input_ids`); BERT's
    /// are a slice of a buffer, no activation.
    pub positions_from_ids: bool,
    /// The activation of the masked-LM head's transform: BERT's follows
    /// `hidden_act`, RoBERTa's `lm_head` calls `gelu` itself.
    pub head_activation: MlpKind,
    /// The head of the task and its loss.
    pub head: EncoderHead,
    /// The pixel values one sequence is read from (channels x height x
    /// width: ViT's patch convolution saves them); 0 for text, whose
    /// embeddings save token ids.
    pub pixels: u64,
    /// Whether a LayerNorm runs over the embeddings before the layers
    /// (CLIP's `pre_layrnorm`).
    pub pixels_norm: bool,
}

/// The head a BERT-style encoder is trained with, and its cross-entropy in
/// the model dtype (`CrossEntropyLoss` over the head's logits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EncoderHead {
    /// Masked-LM: the transform (dense, GELU, LayerNorm) and the decoder
    /// over every token, logits `[T, V]`.
    MaskedLm,
    /// BERT's sequence classifier: the pooler's dense reads a view of the
    /// first token, which keeps the whole last hidden state; tanh, dropout
    /// (`dropout`), `classifier` over `labels`.
    PooledClassifier { labels: u64, dropout: bool },
    /// RoBERTa's `RobertaClassificationHead`: dropout, dense, tanh,
    /// dropout, `out_proj` over the first token.
    DenseClassifier { labels: u64, dropout: bool },
    /// Token classification: dropout and `classifier` over every token.
    TokenClassifier { labels: u64, dropout: bool },
    /// ViT's image classifier: the final LayerNorm, then `classifier` over
    /// a view of the CLS token, which keeps the whole normalized state.
    ImageClassifier { labels: u64 },
    /// `CLIPForImageClassification`: `classifier` over the mean of the
    /// patch tokens, a new `[B, h]` tensor (the mean saves nothing, and the
    /// unused `post_layernorm` of the class token is freed with its branch).
    MeanPooledClassifier { labels: u64 },
}

/// The norm module: transformers' Python RMSNorms compute in fp32 and
/// save different intermediates; LayerNorm is one kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NormKind {
    /// `LlamaRMSNorm`: fp32 input copy, fp32 rsqrt, the normalized tensor
    /// cast back (saved for the weight's gradient).
    RmsNorm,
    /// `GemmaRMSNorm`: all fp32, scaled by `1 + weight`.
    GemmaRmsNorm,
    /// `Olmo2RMSNorm`: the weight multiplies in fp32 before the cast back.
    Olmo2RmsNorm,
    /// `nn.LayerNorm`: the input, mean and rstd.
    LayerNorm,
    /// `nn.RMSNorm` on CUDA (`aten::_fused_rms_norm`, one kernel): the
    /// input and the fp32 rstd.
    FusedRmsNorm,
}

/// Where a decoder layer's norms sit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LayerLayout {
    /// A norm before attention and one before the MLP (Llama).
    PreNorm,
    /// A norm after attention and one after the MLP (OLMo 2).
    PostNorm,
    /// Norms before and after both blocks (Gemma 2 and 3).
    Sandwich,
    /// Attention and MLP read the same input through two LayerNorms
    /// (GPT-NeoX's `use_parallel_residual`): the input is saved once.
    ParallelResidual,
    /// Attention and MLP read the output of one LayerNorm (Phi's
    /// `input_layernorm`): the norm's input and its output, which the
    /// q/k/v projections and the MLP's first linear share, are saved once.
    ParallelSharedNorm,
}

/// How queries, keys and values are projected, which decides which
/// storages the attention kernel keeps alive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum QkvLayout {
    /// Separate projections (or GPT-2's `c_attn`, whose q, k and v views
    /// add up to the same storage): the kernel's output is the output
    /// projection's input.
    Separate,
    /// One fused projection whose q and k are rotated into new tensors
    /// while v stays a view of it (Phi-3, GPT-NeoX): saving v keeps the
    /// whole projection alive.
    Fused,
    /// DeepSeek's multi-head latent attention.
    Latent(LatentDims),
}

/// The sizes of multi-head latent attention (`DeepseekV3Attention`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LatentDims {
    /// The query bottleneck; `None` for a plain `q_proj`.
    pub q_lora_rank: Option<u64>,
    /// The key/value bottleneck.
    pub kv_lora_rank: u64,
    /// Per-head query/key width without rotary embedding.
    pub qk_nope_head_dim: u64,
    /// Per-head query/key width with rotary embedding.
    pub qk_rope_head_dim: u64,
    /// Per-head value width.
    pub v_head_dim: u64,
}

/// Norms on queries and keys, of the model's [`NormKind`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum QkNormKind {
    /// None.
    None,
    /// Over each head's `head_dim` (Qwen3, Gemma 3).
    PerHead,
    /// Over the whole query and key projections (OLMo 2).
    WholeProjection,
}

/// The softmax of transformers' eager attention.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EagerSoftmax {
    /// `softmax(dtype=float32).to(dtype)`: an fp32 result and its cast copy.
    Fp32WithCast,
    /// `softmax` in the model dtype (GPT-2).
    ModelDtype,
}

/// The MLP's activation: how many `T x f` tensors it saves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MlpKind {
    /// `down(act(gate(x)) * up(x))`: gate, act(gate), up, their product.
    Gated,
    /// `fc2(act(fc1(x)))` with a kernel activation (GELU): fc1's output and act's.
    Gelu,
    /// GPT-2's `NewGELUActivation` in Python: four tensors, then `c_proj`'s input.
    NewGelu,
    /// CLIP's `QuickGELUActivation`, `x * sigmoid(1.702 x)` in Python: x and
    /// the sigmoid, then `fc2`'s input.
    QuickGelu,
}

/// A sparse mixture of experts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MixtureOfExperts {
    /// Routed experts E.
    pub experts: u64,
    /// Experts per token k.
    pub top_k: u64,
    /// One routed expert's intermediate size.
    pub intermediate: u64,
    /// Experts every token passes through.
    pub shared: SharedExpert,
    /// How tokens are routed.
    pub router: Router,
    /// Which layers are sparse.
    pub layers: Placement,
}

/// Experts every token passes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SharedExpert {
    /// None (Mixtral, Qwen3-MoE).
    None,
    /// A gated MLP of this intermediate size (DeepSeek's `shared_experts`).
    Plain { intermediate: u64 },
    /// A gated MLP scaled by `sigmoid(shared_expert_gate(x))` (Qwen2-MoE).
    Gated { intermediate: u64 },
}

/// How a router picks and weights experts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Router {
    /// fp32 softmax, top-k, optionally renormalized; `fp32_weights`: the
    /// routing weights reach the experts in fp32 (Mixtral) rather than the
    /// model dtype (Qwen).
    Softmax {
        renormalize: bool,
        fp32_weights: bool,
    },
    /// DeepSeek-V3: an fp32 linear, sigmoid scores, group-limited top-k,
    /// optionally renormalized, fp32 weights.
    Sigmoid { renormalize: bool },
}

/// How token positions enter the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Positions {
    /// Rotary embeddings: `tables` pairs of cos/sin [1, S, width], in fp32
    /// (OLMo 2) or the model dtype, shared by every layer. `concatenated`:
    /// the rotated and the passed-through parts of q and k are joined by
    /// `torch.cat` (partial rotary in GPT-NeoX, Phi, Phi-3), which lays the
    /// new q and k out per head, and so the flash kernel's output too: the
    /// output projection then gets a contiguous copy of it.
    Rotary {
        width: u64,
        fp32_tables: bool,
        tables: u64,
        concatenated: bool,
    },
    /// A learned position embedding (GPT-2's `wpe`).
    Learned,
}

/// The dropouts active in training (probability above zero).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Dropout {
    /// On the attention probabilities.
    pub attention: bool,
    /// On the attention and MLP outputs before the residual additions.
    pub residual: bool,
    /// On the embeddings.
    pub embedding: bool,
}

/// Gemma 2's tanh soft-capping.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Softcap {
    /// `attn_logit_softcapping` (eager attention only).
    pub attention: bool,
    /// `final_logit_softcapping`.
    pub logits: bool,
}

/// Module names of a layer's linears, the way LoRA's `target_modules` name them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Linears {
    /// The projections reading the attention input (`q_proj`, `k_proj`, `v_proj`).
    pub attention_input: Vec<&'static str>,
    /// The attention output projection (`o_proj`).
    pub attention_output: &'static str,
    /// The projections reading the MLP input (`gate_proj`, `up_proj`).
    pub mlp_input: Vec<&'static str>,
    /// The MLP output projection (`down_proj`).
    pub mlp_output: &'static str,
    /// GPT-2's `Conv1D` (`torch.addmm(bias, x, self.weight)`): backward
    /// saves the weight parameter itself, where `nn.Linear` saves the
    /// transposed view `weight.t()`.
    pub conv1d: bool,
}

impl Linears {
    /// Llama's names.
    pub fn llama() -> Linears {
        Linears {
            attention_input: vec!["q_proj", "k_proj", "v_proj"],
            attention_output: "o_proj",
            mlp_input: vec!["gate_proj", "up_proj"],
            mlp_output: "down_proj",
            conv1d: false,
        }
    }
}

impl Dimensions {
    /// A llama-style decoder (RMSNorm, rotary, SwiGLU) of these sizes, for a
    /// bare parameter count given with architecture flags.
    pub fn generic(
        layers: u64,
        hidden: u64,
        heads: u64,
        kv_heads: u64,
        intermediate: u64,
        vocab: u64,
    ) -> Result<Dimensions> {
        if heads == 0 || !hidden.is_multiple_of(heads) {
            return Err(Error::InvalidValue {
                what: "--heads",
                value: heads.to_string(),
                reason: format!("must divide --hidden {hidden}"),
            });
        }
        if kv_heads == 0 || kv_heads > heads || !heads.is_multiple_of(kv_heads) {
            return Err(Error::InvalidValue {
                what: "--kv-heads",
                value: kv_heads.to_string(),
                reason: format!(
                    "must divide --heads {heads}: each key/value head serves a whole number of query heads"
                ),
            });
        }
        let head_dim = hidden / heads;
        Ok(Dimensions {
            model_type: "llama".to_string(),
            layers,
            hidden,
            intermediate,
            heads,
            kv_heads,
            head_dim,
            vocab,
            tied_embeddings: false,
            norm: NormKind::RmsNorm,
            layout: LayerLayout::PreNorm,
            qkv: QkvLayout::Separate,
            qk_norm: QkNormKind::None,
            softmax: EagerSoftmax::Fp32WithCast,
            mlp: MlpKind::Gated,
            experts: None,
            positions: Positions::Rotary {
                width: head_dim,
                fp32_tables: false,
                tables: 1,
                concatenated: false,
            },
            dropout: Dropout::default(),
            softcap: Softcap::default(),
            mask_positional: false,
            linears: Linears::llama(),
            encoder: None,
            images: None,
            encoder_decoder: None,
            state_space: None,
        })
    }

    /// Whether layer `index` holds the mixture of experts.
    pub fn is_sparse(&self, index: u64) -> bool {
        self.experts
            .as_ref()
            .is_some_and(|moe| moe.layers.claims(index))
    }

    /// How many of the layers `0..count` hold the mixture of experts.
    pub fn sparse_layers_below(&self, count: u64) -> u64 {
        self.experts
            .as_ref()
            .map_or(0, |moe| moe.layers.count_below(count.min(self.layers)))
    }
}

impl Dropout {
    /// Attention dropout only, from its probability (Llama's `attention_dropout`).
    pub fn attention(probability: f64) -> Dropout {
        Dropout {
            attention: probability > 0.0,
            ..Dropout::default()
        }
    }
}

/// Which layers use the alternative template (the mixture-of-experts layers).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// Layers `first..` (DeepSeek's `first_k_dense_replace`; 0 for every layer).
    From(u64),
    /// Layers whose `(index + 1)` is a multiple of `step`, except those
    /// listed (Qwen MoE's `decoder_sparse_step` and `mlp_only_layers`).
    Every { step: u64, except: BTreeSet<u64> },
}

impl Placement {
    /// How many of the layers `0..count` it claims, counted in closed form
    /// so that a hostile layer count is never walked.
    pub fn count_below(&self, count: u64) -> u64 {
        match self {
            Placement::From(first) => count.saturating_sub(*first),
            Placement::Every { step, except } => match count.checked_div(*step) {
                None => 0,
                Some(multiples) => {
                    let excepted = except
                        .iter()
                        .filter(|&&index| index < count && closes_step(index, *step))
                        .count() as u64;
                    multiples.saturating_sub(excepted)
                }
            },
        }
    }

    /// Whether layer `index` uses the alternative template.
    pub fn claims(&self, index: u64) -> bool {
        match self {
            Placement::From(first) => index >= *first,
            Placement::Every { step, except } => {
                !except.contains(&index) && closes_step(index, *step)
            }
        }
    }
}

/// Whether `index + 1` is a multiple of `step` (never for a zero step).
fn closes_step(index: u64, step: u64) -> bool {
    index
        .checked_add(1)
        .is_some_and(|n| n.checked_rem(step) == Some(0))
}
