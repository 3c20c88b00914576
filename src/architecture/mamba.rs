//! Mamba and Mamba-2, following transformers' `models/mamba/configuration_mamba.py`
//! (`MambaConfig`) and `modeling_mamba.py` (`MambaForCausalLM`, `MambaMixer`),
//! and `models/mamba2/configuration_mamba2.py` (`Mamba2Config`) and
//! `modeling_mamba2.py` (`Mamba2ForCausalLM`, `Mamba2Mixer`).
//!
//! Both are `backbone.embeddings`, `backbone.layers.{i}` (an RMS `norm` and
//! a `mixer`), `backbone.norm_f` and `lm_head` (tied by default in Mamba,
//! not in Mamba-2). With d_inner = `expand · hidden_size` and N =
//! `state_size`, a `MambaMixer` has `in_proj` [2·d_inner, h], a depthwise
//! `conv1d` [d_inner, 1, conv_kernel], `x_proj` [R + 2N, d_inner] (R =
//! `time_step_rank`, `auto`: ⌈h / 16⌉), `dt_proj` [d_inner, R] with a bias,
//! `A_log` [d_inner, N], `D` [d_inner] and `out_proj` [h, d_inner]; a
//! `Mamba2Mixer` with H = `num_heads` and G = `n_groups` has `in_proj`
//! [d_inner + conv_dim + H, h] (conv_dim = d_inner + 2·G·N), `conv1d`
//! [conv_dim, 1, conv_kernel], `dt_bias`, `A_log` and `D` [H], a gated RMS
//! `norm` [d_inner] and `out_proj`. `use_bias` adds biases to `in_proj` and
//! `out_proj`, `use_conv_bias` to `conv1d`.

use super::config::Config;
use super::decoder::{Decoder, Layers};
use super::dimensions::{
    ChunkedScan, Dimensions, Dropout, EagerSoftmax, LayerLayout, Linears, MlpKind, NormKind,
    Positions, QkNormKind, QkvLayout, Softcap, StateSpace,
};
use super::params::{Norm, Params, product, sum};
use crate::error::{Error, Result};
use crate::model::Role;

/// `time_step_rank`: a number, or `auto` for ⌈hidden / 16⌉.
fn time_step_rank(config: &Config, hidden: u64) -> Result<u64> {
    match config.string("time_step_rank", Some("auto")) {
        Ok(Some("auto")) => Ok(hidden.div_ceil(16)),
        Ok(other) => Err(Error::InvalidConfig {
            key: "time_step_rank".to_string(),
            problem: format!(
                "`{}` is not a rank; accepted: a whole number or \"auto\"",
                other.unwrap_or("null")
            ),
        }),
        Err(_) => config.size("time_step_rank", 0),
    }
}

/// The sizes both mixers share.
struct Common {
    vocab: u64,
    hidden: u64,
    inner: u64,
    state: u64,
    kernel: u64,
    layers: u64,
    bias: bool,
    conv_bias: bool,
    tied: bool,
}

impl Common {
    fn read(config: &Config, defaults: (u64, u64, u64, u64), tied: bool) -> Result<Common> {
        let (vocab, hidden, state, layers) = defaults;
        let hidden = config.size("hidden_size", hidden)?;
        Ok(Common {
            vocab: config.size("vocab_size", vocab)?,
            hidden,
            inner: product(&[config.size("expand", 2)?, hidden])?,
            state: config.size("state_size", state)?,
            kernel: config.size("conv_kernel", 4)?,
            layers: config.size("num_hidden_layers", layers)?,
            bias: config.flag("use_bias", false)?,
            conv_bias: config.flag("use_conv_bias", true)?,
            tied: config.flag("tie_word_embeddings", tied)?,
        })
    }

    /// The model around one layer template.
    fn decoder(&self, mixer: Params) -> Result<Decoder> {
        let mut before_layers = Params::new();
        before_layers.embedding("backbone.embeddings", self.vocab, self.hidden)?;
        let mut layer = Params::new();
        layer.norm("norm", vec![self.hidden], Norm::Weight)?;
        layer.mount("mixer", mixer);
        let mut after_layers = Params::new();
        after_layers.norm("backbone.norm_f", vec![self.hidden], Norm::Weight)?;
        after_layers.output_head(self.vocab, self.hidden, self.tied, false)?;
        Ok(Decoder {
            before_layers,
            layers: Layers::uniform("backbone.layers", self.layers, "num_hidden_layers", layer),
            after_layers,
        })
    }

    /// The depthwise `conv1d` over `channels`.
    fn conv(&self, mixer: &mut Params, channels: u64) -> Result<()> {
        mixer.tensor("conv1d.weight", vec![channels, 1, self.kernel], Role::Other)?;
        if self.conv_bias {
            mixer.tensor("conv1d.bias", vec![channels], Role::Other)?;
        }
        Ok(())
    }
}

/// `MambaForCausalLM`.
pub fn describe(config: &Config) -> Result<Decoder> {
    let common = Common::read(config, (50280, 768, 16, 32), true)?;
    let (hidden, inner, state) = (common.hidden, common.inner, common.state);
    let rank = time_step_rank(config, hidden)?;
    let mut mixer = Params::new();
    mixer.tensor("A_log", vec![inner, state], Role::Other)?;
    mixer.tensor("D", vec![inner], Role::Other)?;
    common.conv(&mut mixer, inner)?;
    mixer.linear(
        "in_proj",
        hidden,
        product(&[2, inner])?,
        common.bias,
        Role::Mlp,
    )?;
    mixer.linear(
        "x_proj",
        inner,
        sum(&[rank, product(&[2, state])?])?,
        false,
        Role::Mlp,
    )?;
    mixer.linear("dt_proj", rank, inner, true, Role::Mlp)?;
    mixer.linear("out_proj", inner, hidden, common.bias, Role::Mlp)?;
    common.decoder(mixer)
}

/// The sizes the state-space activation model needs for
/// `MambaForCausalLM` trained on its torch path (`MambaMixer.forward`
/// without the mamba-ssm kernels: `causal_conv1d_fn` and
/// `mamba_selective_scan`'s sequential loop). `hidden_act` other than `silu` and `use_mambapy` (another scan) are not
/// measured and are refused.
pub fn dimensions(config: &Config) -> Result<Dimensions> {
    let common = Common::read(config, (50280, 768, 16, 32), true)?;
    silu_only(config)?;
    if config.flag("use_mambapy", false)? {
        return Err(Error::InvalidConfig {
            key: "use_mambapy".to_string(),
            problem: "`true`: mambapy's parallel scan is not measured; accepted for activation memory: false (transformers' sequential scan)".to_string(),
        });
    }
    let mixer = StateSpace {
        inner: common.inner,
        state: common.state,
        conv_kernel: common.kernel,
        time_step_rank: time_step_rank(config, common.hidden)?,
        residual_in_fp32: config.flag("residual_in_fp32", true)?,
        chunked: None,
    };
    Ok(common.dimensions("mamba", mixer, vec!["in_proj", "x_proj", "dt_proj"]))
}

/// The sizes the state-space activation model needs for
/// `Mamba2ForCausalLM` on its torch path (`Mamba2Mixer.forward` without
/// the mamba-ssm kernels: `causal_conv1d_fn` and `mamba2_chunk_scan`, the
/// chunked scan in torch). `hidden_act` other than `silu` is refused.
pub fn dimensions_mamba2(config: &Config) -> Result<Dimensions> {
    describe_mamba2(config)?;
    let common = Common::read(config, (32768, 4096, 128, 64), false)?;
    silu_only(config)?;
    let chunk_size = config.size("chunk_size", 256)?;
    if chunk_size == 0 {
        return Err(Error::InvalidConfig {
            key: "chunk_size".to_string(),
            problem: "`0` cannot split the sequence; accepted: a whole number of tokens, 1 or more"
                .to_string(),
        });
    }
    let mixer = StateSpace {
        inner: common.inner,
        state: common.state,
        conv_kernel: common.kernel,
        time_step_rank: 0,
        residual_in_fp32: config.flag("residual_in_fp32", true)?,
        chunked: Some(ChunkedScan {
            heads: config.size("num_heads", 128)?,
            groups: config.size("n_groups", 8)?,
            chunk_size,
        }),
    };
    Ok(common.dimensions("mamba2", mixer, vec!["in_proj"]))
}

/// Refuses an activation other than SiLU, whose saved tensors are measured.
fn silu_only(config: &Config) -> Result<()> {
    let activation = config.string("hidden_act", Some("silu"))?;
    if activation != Some("silu") {
        return Err(Error::InvalidConfig {
            key: "hidden_act".to_string(),
            problem: format!(
                "`{}`: the saved tensors of this activation are not measured for Mamba; accepted for activation memory: silu",
                activation.unwrap_or("null")
            ),
        });
    }
    Ok(())
}

impl Common {
    /// The dimensions of a model of these sizes around `mixer`: no
    /// attention (one head of width 0 stands for it: no attention FLOPs,
    /// no head split).
    fn dimensions(
        &self,
        model_type: &str,
        mixer: StateSpace,
        mlp_input: Vec<&'static str>,
    ) -> Dimensions {
        let common = self;
        Dimensions {
            model_type: model_type.to_string(),
            layers: common.layers,
            hidden: common.hidden,
            intermediate: common.inner,
            heads: 1,
            kv_heads: 1,
            head_dim: 0,
            vocab: common.vocab,
            tied_embeddings: common.tied,
            norm: NormKind::RmsNorm,
            layout: LayerLayout::PreNorm,
            qkv: QkvLayout::Separate,
            qk_norm: QkNormKind::None,
            softmax: EagerSoftmax::ModelDtype,
            mlp: MlpKind::Gated,
            experts: None,
            positions: Positions::Learned,
            dropout: Dropout::default(),
            softcap: Softcap::default(),
            mask_positional: false,
            linears: Linears {
                attention_input: vec![],
                attention_output: "",
                mlp_input,
                mlp_output: "out_proj",
                conv1d: false,
            },
            encoder: None,
            images: None,
            encoder_decoder: None,
            state_space: Some(mixer),
        }
    }
}

/// `Mamba2ForCausalLM`. `hidden_size · expand` must equal `num_heads ·
/// head_dim`, and `n_groups` divide it, as `Mamba2Config` and
/// `MambaRMSNormGated` require.
pub fn describe_mamba2(config: &Config) -> Result<Decoder> {
    let common = Common::read(config, (32768, 4096, 128, 64), false)?;
    let (hidden, inner, state) = (common.hidden, common.inner, common.state);
    let heads = config.size("num_heads", 128)?;
    let head_dim = config.size("head_dim", 64)?;
    if product(&[heads, head_dim])? != inner {
        return Err(Error::InvalidConfig {
            key: "num_heads".to_string(),
            problem: format!(
                "`{heads}` heads of {head_dim} make {}, not hidden_size x expand = {inner}; accepted: num_heads x head_dim = hidden_size x expand",
                heads.saturating_mul(head_dim)
            ),
        });
    }
    let groups = config.size("n_groups", 8)?;
    if groups == 0 || !inner.is_multiple_of(groups) {
        return Err(Error::InvalidConfig {
            key: "n_groups".to_string(),
            problem: format!(
                "`{groups}` groups cannot split {inner} channels; accepted: a divisor of hidden_size x expand"
            ),
        });
    }
    let conv_dim = sum(&[inner, product(&[2, groups, state])?])?;
    let mut mixer = Params::new();
    mixer.tensor("dt_bias", vec![heads], Role::Other)?;
    mixer.tensor("A_log", vec![heads], Role::Other)?;
    mixer.tensor("D", vec![heads], Role::Other)?;
    common.conv(&mut mixer, conv_dim)?;
    mixer.linear(
        "in_proj",
        hidden,
        sum(&[inner, conv_dim, heads])?,
        common.bias,
        Role::Mlp,
    )?;
    mixer.norm("norm", vec![inner], Norm::Weight)?;
    mixer.linear("out_proj", inner, hidden, common.bias, Role::Mlp)?;
    common.decoder(mixer)
}
