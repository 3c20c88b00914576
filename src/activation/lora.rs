//! Which linears keep their input: a frozen base and its LoRA adapters.
//!
//! A `Linear` saves its input only for its weight's gradient
//! (`MmBackward0.self`); a frozen linear does not. A norm's weight-gradient
//! operand (the normalized tensor) likewise goes with a frozen weight.
//! peft's LoRA layer computes `base(x) + lora_B(lora_A(dropout(x))) *
//! scaling`: with `lora_dropout = 0` (peft's default) `lora_A` saves `x`,
//! the same storage the frozen base would have saved, and `lora_B` saves
//! the `T x r` output of `lora_A` (peft `tuners/lora/layer.py`).

use super::Workload;

/// The trainable parts of the model, as activation memory sees them.
#[derive(Debug, Clone, Copy)]
pub struct Training<'a> {
    /// Whether the base weights (linears and norms) are frozen.
    pub frozen_base: bool,
    adapted: &'a [String],
    /// The LoRA rank r.
    pub rank: u64,
    /// Frozen quantized linears save their input anyway (bitsandbytes < 0.43.2).
    quantized_inputs_kept: bool,
}

impl<'a> Training<'a> {
    /// The training of `workload`.
    pub fn new(workload: &'a Workload) -> Training<'a> {
        Training {
            frozen_base: workload.frozen_base,
            adapted: &workload.adapted,
            rank: workload.lora_rank,
            quantized_inputs_kept: workload.quantized_inputs_kept,
        }
    }

    /// Whether the linear `name` carries an adapter.
    pub fn is_adapted(&self, name: &str) -> bool {
        self.adapted.iter().any(|adapted| adapted == name)
    }

    /// Whether linears reading one input (`q_proj`, `k_proj`, `v_proj`)
    /// keep it: when trainable, or when any of them is adapted.
    ///
    /// Before bitsandbytes 0.43.2, `MatMul4Bit` saved its input whether or
    /// not the weight trained, so every quantized linear (all but the output
    /// head, which QLoRA keeps in the compute dtype) keeps it.
    pub fn keeps_input(&self, names: &[&str]) -> bool {
        !self.frozen_base
            || names.iter().any(|name| self.is_adapted(name))
            || (self.quantized_inputs_kept && !names.contains(&"lm_head"))
    }

    /// How many of `names` carry an adapter (each saves a `T x r` tensor).
    pub fn adapters(&self, names: &[&str]) -> u64 {
        names.iter().filter(|name| self.is_adapted(name)).count() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frozen_linears_drop_inputs_unless_adapted() {
        let mut workload = Workload {
            adapted: vec!["q_proj".to_string(), "v_proj".to_string()],
            lora_rank: 16,
            ..Workload::new(1, 8)
        };
        assert!(Training::new(&workload).keeps_input(&["o_proj"]));
        workload.frozen_base = true;
        let training = Training::new(&workload);
        assert!(training.keeps_input(&["q_proj", "k_proj", "v_proj"]));
        assert!(!training.keeps_input(&["o_proj"]));
        assert_eq!(training.adapters(&["q_proj", "k_proj", "v_proj"]), 2);
    }
}
