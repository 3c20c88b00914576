//! JSON Schemas of the machine-readable reports, for tools that consume
//! them. Hand-written beside the report structs (not derived from them), and
//! checked against real output by `tests/schema.rs`.

/// The JSON Schema (draft 2020-12) of `trainmem estimate --format json`.
pub const ESTIMATE: &str = include_str!("schema/estimate.json");
