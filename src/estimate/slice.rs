//! The gradient-and-optimizer slice of seed 000: M = P x V x B.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::units::{Bytes, Count, format_ratio};

/// The memory of gradients and device-resident optimizer states, written as
/// M = P x V x B (P trainable parameters, V values kept per parameter, B bytes
/// per value). When gradients and states differ in width (mixed precision),
/// B is not one number and the slice is a sum of terms V_i x B_i.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Slice {
    /// P: trainable parameters.
    pub parameters: Count,
    /// V: values per parameter (1 for the gradient plus the optimizer's).
    pub values_per_parameter: f64,
    /// B: bytes per value, when every value has the same width.
    pub bytes_per_value: Option<u64>,
    /// M in bytes on the device: gradients and device-resident states.
    pub bytes: Bytes,
    /// States of the terms that live in CUDA unified memory instead
    /// (bitsandbytes' paged optimizers): P x V x B is `bytes + paged`.
    pub paged: Bytes,
    /// One term per value width, widest first.
    pub terms: Vec<SliceTerm>,
}

/// Values of one width inside the slice.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SliceTerm {
    /// Values of this width per parameter.
    pub values_per_parameter: f64,
    /// Their width in bytes.
    pub bytes_per_value: u64,
    /// Elements of this width in all.
    pub elements: Count,
}

impl Slice {
    /// The slice from the element counts of each value width, `bytes` of it
    /// on the device and `paged` in unified memory.
    pub fn new(
        parameters: Count,
        bytes: Bytes,
        paged: Bytes,
        elements_by_width: &BTreeMap<u64, u64>,
    ) -> Slice {
        let per_parameter = |elements: u64| {
            if parameters.0 == 0 {
                0.0
            } else {
                elements as f64 / parameters.0 as f64
            }
        };
        let terms: Vec<SliceTerm> = elements_by_width
            .iter()
            .rev()
            .filter(|(_, elements)| **elements > 0)
            .map(|(width, elements)| SliceTerm {
                values_per_parameter: per_parameter(*elements),
                bytes_per_value: *width,
                elements: Count(*elements),
            })
            .collect();
        let all_elements: u64 = terms.iter().map(|t| t.elements.0).sum();
        Slice {
            parameters,
            values_per_parameter: per_parameter(all_elements),
            bytes_per_value: match terms.as_slice() {
                [only] => Some(only.bytes_per_value),
                _ => None,
            },
            bytes,
            paged,
            terms,
        }
    }

    /// `V` as printed: `3`, or `2.5` for uneven shapes.
    pub fn values_text(&self) -> String {
        let all: u64 = self.terms.iter().map(|t| t.elements.0).sum();
        format_ratio(all, self.parameters.0)
    }

    /// The right-hand side of the equation with numbers: `13B × 3 × 2 B`, or
    /// `7B × (1 × 2 B + 2 × 4 B)` when widths differ.
    pub fn equation(&self) -> String {
        let p = self.parameters.short();
        match self.terms.as_slice() {
            [only] => format!("{p} × {} × {} B", self.values_text(), only.bytes_per_value),
            terms => {
                let parts: Vec<String> = terms
                    .iter()
                    .rev()
                    .map(|t| {
                        format!(
                            "{} × {} B",
                            format_ratio(t.elements.0, self.parameters.0),
                            t.bytes_per_value
                        )
                    })
                    .collect();
                format!("{p} × ({})", parts.join(" + "))
            }
        }
    }
}
