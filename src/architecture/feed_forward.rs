//! The feed-forward blocks of the llama-style decoders, described as data:
//! dense MLPs and transformers 5's fused mixtures of experts.
//!
//! Names are relative to the block's module (`mlp`).

use super::params::{Params, product};
use crate::error::Result;
use crate::model::Role;

/// A feed-forward block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FeedForward {
    /// `gate_proj`, `up_proj` [intermediate, hidden] and `down_proj`
    /// [hidden, intermediate] (`LlamaMLP`).
    Gated { intermediate: u64, bias: bool },
    /// One fused `gate_up_proj` [2 x intermediate, hidden] and `down_proj`,
    /// without biases (`Phi3MLP`).
    FusedGated { intermediate: u64 },
    /// An up and a down projection with the given names: `c_fc`/`c_proj`
    /// (`Starcoder2MLP`), `fc1`/`fc2` (`PhiMLP`).
    Plain {
        intermediate: u64,
        bias: bool,
        up: &'static str,
        down: &'static str,
    },
    /// A mixture of experts.
    Experts(Experts),
}

/// A sparse mixture-of-experts block as transformers 5 builds it: the
/// routed experts fused into two 3-D parameters, a router, and optionally
/// shared experts that every token passes through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Experts {
    /// Routed experts.
    pub count: u64,
    /// Intermediate width of one routed expert.
    pub intermediate: u64,
    /// Experts every token uses, if any.
    pub shared: Option<SharedExperts>,
}

/// Dense experts inside a mixture-of-experts block: one gated MLP of
/// `intermediate` width (`n_shared_experts` experts side by side in
/// DeepSeek), and in Qwen MoE a scalar gate on its output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedExperts {
    /// `shared_expert` (Qwen MoE) or `shared_experts` (DeepSeek).
    pub module: &'static str,
    /// Intermediate width of the shared MLP.
    pub intermediate: u64,
    /// Whether its projections have biases (DeepSeek-V2's `mlp_bias`).
    pub bias: bool,
    /// Whether a `shared_expert_gate` [1, hidden] scales its output.
    pub gate: bool,
}

impl FeedForward {
    /// The block's parameters for a model of width `hidden`.
    pub fn params(&self, hidden: u64) -> Result<Params> {
        let mut params = Params::new();
        match self {
            FeedForward::Gated { intermediate, bias } => {
                gated(&mut params, hidden, *intermediate, *bias)?;
            }
            FeedForward::FusedGated { intermediate } => {
                params.linear(
                    "gate_up_proj",
                    hidden,
                    product(&[2, *intermediate])?,
                    false,
                    Role::Mlp,
                )?;
                params.linear("down_proj", *intermediate, hidden, false, Role::Mlp)?;
            }
            FeedForward::Plain {
                intermediate,
                bias,
                up,
                down,
            } => {
                params.linear(up, hidden, *intermediate, *bias, Role::Mlp)?;
                params.linear(down, *intermediate, hidden, *bias, Role::Mlp)?;
            }
            FeedForward::Experts(experts) => experts.add_params(&mut params, hidden)?,
        }
        Ok(params)
    }
}

impl Experts {
    fn add_params(&self, params: &mut Params, hidden: u64) -> Result<()> {
        let gate_up = product(&[2, self.intermediate])?;
        params.tensor(
            "experts.gate_up_proj",
            vec![self.count, gate_up, hidden],
            Role::Experts,
        )?;
        params.tensor(
            "experts.down_proj",
            vec![self.count, hidden, self.intermediate],
            Role::Experts,
        )?;
        params.linear("gate", hidden, self.count, false, Role::Router)?;
        if let Some(shared) = &self.shared {
            let mut mlp = Params::new();
            gated(&mut mlp, hidden, shared.intermediate, shared.bias)?;
            params.mount(shared.module, mlp);
            if shared.gate {
                params.linear("shared_expert_gate", hidden, 1, false, Role::Router)?;
            }
        }
        Ok(())
    }
}

/// `gate_proj`, `up_proj` and `down_proj`.
fn gated(params: &mut Params, hidden: u64, intermediate: u64, bias: bool) -> Result<()> {
    params.linear("gate_proj", hidden, intermediate, bias, Role::Mlp)?;
    params.linear("up_proj", hidden, intermediate, bias, Role::Mlp)?;
    params.linear("down_proj", intermediate, hidden, bias, Role::Mlp)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(block: &FeedForward) -> Vec<(String, Vec<u64>, Role)> {
        block
            .params(64)
            .unwrap()
            .iter()
            .map(|p| (p.name.clone(), p.shape.dims().to_vec(), p.role))
            .collect()
    }

    #[test]
    fn experts_are_fused_and_routers_and_shared_experts_have_their_roles() {
        let block = FeedForward::Experts(Experts {
            count: 4,
            intermediate: 32,
            shared: Some(SharedExperts {
                module: "shared_expert",
                intermediate: 96,
                bias: false,
                gate: true,
            }),
        });
        let expected: Vec<(String, Vec<u64>, Role)> = vec![
            (
                "experts.gate_up_proj".into(),
                vec![4, 64, 64],
                Role::Experts,
            ),
            ("experts.down_proj".into(), vec![4, 64, 32], Role::Experts),
            ("gate.weight".into(), vec![4, 64], Role::Router),
            (
                "shared_expert.gate_proj.weight".into(),
                vec![96, 64],
                Role::Mlp,
            ),
            (
                "shared_expert.up_proj.weight".into(),
                vec![96, 64],
                Role::Mlp,
            ),
            (
                "shared_expert.down_proj.weight".into(),
                vec![64, 96],
                Role::Mlp,
            ),
            (
                "shared_expert_gate.weight".into(),
                vec![1, 64],
                Role::Router,
            ),
        ];
        assert_eq!(listed(&block), expected);
    }

    #[test]
    fn dense_variants() {
        let fused = listed(&FeedForward::FusedGated { intermediate: 128 });
        assert_eq!(
            fused[0],
            ("gate_up_proj.weight".into(), vec![256, 64], Role::Mlp)
        );
        let plain = listed(&FeedForward::Plain {
            intermediate: 128,
            bias: true,
            up: "c_fc",
            down: "c_proj",
        });
        assert_eq!(plain.len(), 4);
        assert_eq!(plain[3], ("c_proj.bias".into(), vec![64], Role::Mlp));
        assert_eq!(
            listed(&FeedForward::Gated {
                intermediate: 8,
                bias: false
            })
            .len(),
            3
        );
    }
}
