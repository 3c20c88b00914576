//! LoRA on transformers 5's fused MoE parameters, as peft 0.21 does it.
//!
//! transformers 5 keeps a MoE layer's experts as 3-D parameters
//! (`experts.gate_up_proj` [E, 2I, H], `experts.down_proj` [E, H, I]) and its
//! router as a parameter of its own module (`gate.weight` [E, H]). peft
//! (`tuners/lora/layer.py`, `ParamWrapper`) maps the v4 target names onto
//! them for the model types it converts (mixtral, qwen3_moe): the router
//! gets A [r, H] and B [E, r]; an expert stack [E, out, in] gets A [r·E, in]
//! and B [out, r·E]; `gate_up_proj`, which fuses two v4 projections, gets
//! rank 2r (`rank_pattern`). `all-linear` targets all three. A fused
//! projection needs both of its v4 names, and DoRA is refused, as peft does.

use super::linear::module_of;
use super::lora::Targets;
use crate::error::{Error, Result};
use crate::model::{Model, Role};

/// One parameter peft wraps, with the shapes of its adapters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParameterTarget {
    /// The adapter name prefix: `model.layers.0.mlp.experts` or `...experts.base_layer`.
    pub prefix: String,
    /// lora_A's shape.
    pub a: Vec<u64>,
    /// lora_B's shape.
    pub b: Vec<u64>,
}

/// v4 names per model type: (the fused gate+up pair, down, router).
fn v4_names(model_type: &str) -> Option<([&'static str; 2], &'static str)> {
    match model_type {
        "mixtral" => Some((["w1", "w3"], "w2")),
        "qwen3_moe" => Some((["gate_proj", "up_proj"], "down_proj")),
        _ => None,
    }
}

/// The wrapped parameters of `model` for `targets` at rank `rank`, or none
/// when peft does not convert this model type.
pub fn parameter_targets(
    model: &Model,
    targets: &Targets,
    rank: u64,
    dora: bool,
) -> Result<Vec<ParameterTarget>> {
    let Some(([gate, up], down)) = model.model_type.as_deref().and_then(v4_names) else {
        return Ok(Vec::new());
    };
    let named = |name: &str| match targets {
        Targets::AllLinear => true,
        Targets::Names(names) => names.iter().any(|n| n == name),
    };
    let (wants_gate, wants_up) = (named(gate), named(up));
    if wants_gate != wants_up {
        let (have, missing) = if wants_gate { (gate, up) } else { (up, gate) };
        return Err(Error::InvalidValue {
            what: "--lora-targets",
            value: have.to_string(),
            reason: format!(
                "peft cannot convert `{have}` without also targeting `{missing}`: transformers 5 fuses them into one gate_up_proj"
            ),
        });
    }
    let wants_router = named("gate");
    let wants_down = named(down);
    if !(wants_gate || wants_down || wants_router) {
        return Ok(Vec::new());
    }
    if dora {
        return Err(Error::InvalidValue {
            what: "--lora-dora",
            value: "on".to_string(),
            reason:
                "peft's ParamWrapper (LoRA on fused MoE experts and routers) does not support DoRA"
                    .to_string(),
        });
    }
    let mut wrapped = Vec::new();
    for tensor in &model.tensors {
        let dims = tensor.shape.dims();
        let module = module_of(&tensor.name);
        match (tensor.role, dims, tensor.name.rsplit('.').next()) {
            (Role::Router, [experts, hidden], Some("weight"))
                if wants_router && module.ends_with(".gate") =>
            {
                wrapped.push(ParameterTarget {
                    prefix: module.to_string(),
                    a: vec![rank, *hidden],
                    b: vec![*experts, rank],
                });
            }
            (Role::Experts, [experts, out, input], Some("gate_up_proj")) if wants_gate => {
                // Wrapped first, so the down projection's wrapper sits around it.
                let prefix = if wants_down {
                    format!("{module}.base_layer")
                } else {
                    module.to_string()
                };
                let fused = adapter_rows(&[2, rank, *experts])?;
                wrapped.push(ParameterTarget {
                    prefix,
                    a: vec![fused, *input],
                    b: vec![*out, fused],
                });
            }
            (Role::Experts, [experts, out, input], Some("down_proj")) if wants_down => {
                let rows = adapter_rows(&[rank, *experts])?;
                wrapped.push(ParameterTarget {
                    prefix: module.to_string(),
                    a: vec![rows, *input],
                    b: vec![*out, rows],
                });
            }
            _ => {}
        }
    }
    Ok(wrapped)
}

/// The rank of an expert stack's adapters, `rank x experts` (x 2 when fused),
/// checked: `--lora-rank` is the user's and the expert count the config's.
fn adapter_rows(factors: &[u64]) -> Result<u64> {
    factors
        .iter()
        .try_fold(1u64, |product, factor| product.checked_mul(*factor))
        .ok_or_else(|| Error::overflow("the LoRA rank times the expert count"))
}
