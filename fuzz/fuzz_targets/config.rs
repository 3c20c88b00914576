//! config.json objects through the architecture readers and the estimate:
//! every one must be refused with an error or priced, never panic, and an
//! accepted one stays within the caps (layers, tensors), so that no
//! 150-byte file can cost gigabytes.
//!
//! Arbitrary bytes rarely make a config that reaches the layer stack, so
//! the input is read as a recipe: the first byte picks a `model_type`, then
//! each 9 bytes set one size key (1 byte picks the key, 8 bytes the value,
//! shifted by its low bits to reach small, real and huge sizes alike). The
//! raw bytes are also tried as JSON text.

#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value, json};
use trainmem::activation::Workload;
use trainmem::architecture::{self, MAX_TENSORS};
use trainmem::{Bytes, Model, Optimizer, Precision, Setup, estimate};

const SIZE_KEYS: &[&str] = &[
    "num_hidden_layers",
    "n_layer",
    "n_layers",
    "hidden_size",
    "n_embd",
    "d_model",
    "intermediate_size",
    "n_inner",
    "ffn_hidden_size",
    "num_attention_heads",
    "n_head",
    "n_heads",
    "num_key_value_heads",
    "num_kv_heads",
    "vocab_size",
    "head_dim",
    "num_experts",
    "num_local_experts",
    "n_routed_experts",
    "moe_intermediate_size",
    "num_experts_per_tok",
    "first_k_dense_replace",
    "decoder_sparse_step",
    "shared_expert_intermediate_size",
    "n_shared_experts",
    "q_lora_rank",
    "kv_lora_rank",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "v_head_dim",
    "max_position_embeddings",
    "n_positions",
    "sliding_window_pattern",
];

const FLAG_KEYS: &[&str] = &["qk_layernorm", "tie_word_embeddings", "multi_query"];

fn recipe(data: &[u8]) -> Option<Value> {
    let (&first, mut rest) = data.split_first()?;
    let model_types = architecture::supported();
    let mut object = Map::new();
    object.insert(
        "model_type".into(),
        json!(model_types[usize::from(first) % model_types.len()]),
    );
    while let Some((chunk, tail)) = rest.split_first_chunk::<9>() {
        let raw = u64::from_le_bytes(chunk[1..].try_into().ok()?);
        let key = usize::from(chunk[0]);
        if key >= SIZE_KEYS.len() {
            object.insert(FLAG_KEYS[key % FLAG_KEYS.len()].into(), json!(raw & 1 == 1));
        } else {
            // Low 6 bits choose the shift, so 1, 1000, 2^32 and 2^63 are all likely.
            object.insert(SIZE_KEYS[key].into(), json!(raw >> (raw & 63)));
        }
        rest = tail;
    }
    Some(Value::Object(object))
}

fn price(config: &Value) {
    let Ok(tensors) = architecture::tensors_from_config(config) else {
        return;
    };
    assert!(tensors.len() as u64 <= MAX_TENSORS, "{config}");
    let mut model = Model::from_tensors("fuzz", "fuzz", tensors);
    model.dimensions = architecture::dimensions(config).ok();
    let mut setup = Setup::new(
        Optimizer::find("adamw").unwrap(),
        *Precision::find("mixed-bf16").unwrap(),
    );
    setup.workload = Some(Workload::new(1, 4096));
    setup.overhead = Bytes(1 << 30);
    let _ = estimate(&model, &setup);
}

fuzz_target!(|data: &[u8]| {
    if let Some(config) = recipe(data) {
        price(&config);
    }
    if let Ok(config) = serde_json::from_slice::<Value>(data) {
        price(&config);
    }
});
