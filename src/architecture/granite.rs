//! Granite, following transformers' `models/granite/configuration_granite.py`
//! (`GraniteConfig`) and `modeling_granite.py` (`GraniteForCausalLM`).
//!
//! `GraniteConfig` declares Llama's size keys with Llama's defaults, and
//! its multipliers and logit scaling change no shape, so Granite is Llama's
//! blueprint under its own name.

use super::config::Config;
use super::decoder::Decoder;
use super::dimensions::{Dimensions, Dropout};
use super::llama;
use crate::error::Result;

/// The tensors of `GraniteForCausalLM`: Llama's.
pub fn describe(config: &Config) -> Result<Decoder> {
    llama::blueprint(config)?.decoder()
}

/// The activation dimensions of `GraniteForCausalLM`, with
/// `attention_dropout` (default 0.0).
pub fn dimensions(config: &Config) -> Result<Dimensions> {
    Ok(Dimensions {
        dropout: Dropout::attention(config.fraction("attention_dropout", 0.0)?),
        ..llama::blueprint(config)?.dimensions("granite", None)
    })
}
