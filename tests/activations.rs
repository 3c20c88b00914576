//! Every activation fixture measured with PyTorch and transformers
//! (`tools/measure_activations.py`, `tests/fixtures/activations/*.json`)
//! against `trainmem::activation`: the dimensions read from the fixture's
//! config.json, the total (saved storages plus the returned logits) and
//! each layer's bytes, on the CPU kernels the fixtures were measured with.
//! `tools/check_activation_formulas.py` holds the same closed forms in
//! Python.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;
use trainmem::DType;
use trainmem::activation::{
    self, Attention, DropoutMask, ExpertsKernel, Kernels, Platform, Recompute, SdpaDispatch,
    Workload,
};
use trainmem::architecture::{self, Dimensions, QkvLayout, SharedExpert, Task};

/// The model types whose every fixture must be within this relative error
/// (the acceptance bar); every fixture is in fact expected to be exact.
const REQUIRED: &[&str] = &[
    "llama",
    "mistral",
    "qwen2",
    "qwen3",
    "gemma2",
    "gpt2",
    "gpt_neox",
    "mixtral",
    "qwen3_moe",
    "phi",
    "bert",
    "roberta",
    "vit",
    "clip",
    "llava",
    "t5",
    "bart",
    "whisper",
    "mamba",
    "mamba2",
];
const TOLERANCE: f64 = 0.05;

fn fixtures() -> Vec<(PathBuf, Value)> {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/activations");
    let mut paths: Vec<PathBuf> = fs::read_dir(&folder)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", folder.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .filter_map(|path| {
            let text = fs::read_to_string(&path).unwrap();
            let fixture: Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            // Only measurements: other JSON files in the folder are not fixtures.
            fixture.get("total_bytes")?;
            Some((path, fixture))
        })
        .collect()
}

fn number(fixture: &Value, key: &str) -> u64 {
    fixture[key]
        .as_u64()
        .unwrap_or_else(|| panic!("fixture key `{key}` is not a number"))
}

/// The workload and kernels a fixture was measured with.
fn workload(fixture: &Value) -> (Workload, Kernels) {
    let mut kernels = Platform::Cpu.kernels();
    let attention = match fixture["attn_implementation"].as_str().unwrap() {
        "eager" => Attention::Eager,
        "sdpa" => Attention::Sdpa,
        "sdpa-math" => {
            kernels.sdpa = SdpaDispatch::Math;
            Attention::Sdpa
        }
        "sdpa-flash" => {
            kernels.sdpa = SdpaDispatch::Flash;
            Attention::Sdpa
        }
        other => panic!("unknown attn_implementation `{other}`"),
    };
    if fixture["dropout"].get("mask").is_some() {
        // F.dropout patched to native_dropout: CUDA's 1-byte mask on CPU.
        kernels.dropout_mask = DropoutMask::Bool;
    }
    if fixture["experts_implementation"].as_str() == Some("eager") {
        kernels.experts = ExpertsKernel::Eager;
    }
    let dtype = match fixture["dtype"].as_str().unwrap() {
        "bf16" => DType::Bf16,
        "fp32" => DType::Fp32,
        other => panic!("unknown dtype `{other}`"),
    };
    let frozen = match fixture["frozen"].as_str() {
        None => false,
        Some("all_but_embeddings") => true,
        // LLaVA's vision tower (and projector): the language model trains.
        Some("vision_tower" | "vision_tower+projector") => false,
        Some(other) => panic!("unknown frozen variant `{other}`"),
    };
    let workload = Workload {
        attention,
        recompute: if fixture["gradient_checkpointing"].as_bool().unwrap() {
            Recompute::Full
        } else {
            Recompute::None
        },
        dtype,
        platform: Platform::Cpu,
        frozen_base: frozen,
        target_len: fixture["target_len"].as_u64(),
        ..Workload::new(number(fixture, "batch"), number(fixture, "seq_len"))
    };
    (workload, kernels)
}

/// The fixture's `dims` that `Dimensions` also knows, and ours.
fn compare_dims(fixture: &Value, dims: &Dimensions) -> Vec<String> {
    let listed = &fixture["dims"];
    let mut ours: BTreeMap<&str, u64> = BTreeMap::from([
        // An encoder-decoder's config names the encoder's depth.
        (
            "num_hidden_layers",
            dims.encoder_decoder
                .map_or(dims.layers, |stacks| stacks.encoder_layers),
        ),
        ("hidden_size", dims.hidden),
        ("num_attention_heads", dims.heads),
        ("num_key_value_heads", dims.kv_heads),
        ("head_dim", dims.head_dim),
        ("vocab_size", dims.vocab),
        ("tie_word_embeddings", u64::from(dims.tied_embeddings)),
    ]);
    if dims.model_type == "t5" {
        // transformers 5's T5Config forces the tie (from_config, as the
        // fixture is built); trainmem prices a published untied
        // checkpoint's own lm_head (see architecture/t5.rs), which saves
        // the same tensors.
        ours.remove("tie_word_embeddings");
    }
    if dims.state_space.is_some() {
        // Mamba-2's `head_dim` is its scan's (d_inner = num_heads x
        // head_dim); a state-space model has no attention heads.
        for key in ["head_dim", "num_attention_heads", "num_key_value_heads"] {
            ours.remove(key);
        }
    }
    match &dims.experts {
        None => {
            ours.insert("intermediate_size", dims.intermediate);
        }
        Some(moe) => {
            ours.insert("num_experts_per_tok", moe.top_k);
            for key in ["num_experts", "num_local_experts", "n_routed_experts"] {
                ours.insert(key, moe.experts);
            }
            let expert_key = if dims.model_type == "mixtral" {
                "intermediate_size"
            } else {
                ours.insert("intermediate_size", dims.intermediate);
                "moe_intermediate_size"
            };
            ours.insert(expert_key, moe.intermediate);
            match moe.shared {
                SharedExpert::Gated { intermediate } => {
                    ours.insert("shared_expert_intermediate_size", intermediate);
                }
                SharedExpert::Plain { intermediate } => {
                    ours.insert("n_shared_experts", intermediate / moe.intermediate);
                }
                SharedExpert::None => {}
            }
        }
    }
    if let QkvLayout::Latent(latent) = dims.qkv {
        ours.insert("kv_lora_rank", latent.kv_lora_rank);
        ours.insert("qk_nope_head_dim", latent.qk_nope_head_dim);
        ours.insert("qk_rope_head_dim", latent.qk_rope_head_dim);
        ours.insert("v_head_dim", latent.v_head_dim);
        if let Some(rank) = latent.q_lora_rank {
            ours.insert("q_lora_rank", rank);
        }
        let dense = (0..dims.layers).take_while(|&i| !dims.is_sparse(i)).count() as u64;
        ours.insert("first_k_dense_replace", dense);
    }
    let mut differences = Vec::new();
    for (key, value) in ours {
        let expected = match &listed[key] {
            Value::Bool(flag) => Some(u64::from(*flag)),
            Value::Number(n) => n.as_u64(),
            _ => None,
        };
        if let Some(expected) = expected
            && expected != value
        {
            differences.push(format!("{key}: fixture {expected}, ours {value}"));
        }
    }
    differences
}

#[derive(Default)]
struct Summary {
    compared: usize,
    exact: usize,
    worst: f64,
}

#[test]
fn every_activation_fixture_matches_the_model() {
    let mut summaries: BTreeMap<String, Summary> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut skipped = Vec::new();
    for (path, fixture) in fixtures() {
        let id = fixture["id"].as_str().unwrap_or_default().to_string();
        let model_type = fixture["model_type"].as_str().unwrap().to_string();
        if fixture["use_cache"].as_bool() == Some(true) {
            // The Trainer trains with use_cache=False; a DynamicCache's K/V
            // copies are not activations of training.
            skipped.push(id);
            continue;
        }
        let task = fixture
            .get("task")
            .and_then(Value::as_str)
            .map(|task| Task::parse(task).unwrap());
        let mut dims = architecture::dimensions_for_task(&fixture["config"], task)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if let Some(images) = &mut dims.images {
            images.per_sample = number(&fixture, "images");
            images.projector_trains = fixture["frozen"].as_str() == Some("vision_tower");
        }
        for difference in compare_dims(&fixture, &dims) {
            failures.push(format!("{id}: dims {difference}"));
        }
        let (workload, kernels) = workload(&fixture);
        let estimate = activation::activations_with(&dims, &workload, &kernels)
            .unwrap_or_else(|e| panic!("{id}: {e}"));
        let measured = number(&fixture, "total_bytes");
        let error = (estimate.total.0 as f64 - measured as f64).abs() / measured as f64;
        let summary = summaries.entry(model_type.clone()).or_default();
        summary.compared += 1;
        summary.worst = summary.worst.max(error);
        if estimate.total.0 == measured {
            summary.exact += 1;
        } else {
            failures.push(format!(
                "{id}: total {} measured {measured} ({:+.3}%)",
                estimate.total.0,
                100.0 * (estimate.total.0 as f64 - measured as f64) / measured as f64
            ));
        }
        let parts_sum = estimate.layers.iter().map(|part| part.bytes.0).sum::<u64>()
            + estimate.outside_layers.0
            + estimate.logits.0
            + estimate.loss.0;
        assert_eq!(parts_sum, estimate.total.0, "{id}: the parts do not add up");
        assert_eq!(
            estimate.logits.0,
            number(&fixture, "logits_bytes"),
            "{id}: logits"
        );
        // An encoder-decoder's fixture adds encoder and decoder layer i
        // together in `layers`; its totals are compared above.
        let layers = if dims.encoder_decoder.is_some() {
            None
        } else {
            fixture["layers"].as_array()
        };
        for layer in layers.into_iter().flatten() {
            let index = number(layer, "layer");
            let ours = activation::layer_bytes(&dims, &workload, &kernels, index).unwrap();
            if ours.0 != number(layer, "bytes") {
                failures.push(format!(
                    "{id}: layer {index} {} measured {}",
                    ours.0,
                    number(layer, "bytes")
                ));
            }
        }
        if REQUIRED.contains(&model_type.as_str()) && error > TOLERANCE {
            failures.push(format!("{id}: outside the {TOLERANCE} acceptance bar"));
        }
    }
    println!("model_type       fixtures  exact  worst relative error");
    for (model_type, summary) in &summaries {
        println!(
            "{model_type:<16} {:>8} {:>6}  {:.2e}",
            summary.compared, summary.exact, summary.worst
        );
    }
    println!(
        "skipped {} use_cache=True fixtures: {}",
        skipped.len(),
        skipped.join(", ")
    );
    for model_type in REQUIRED {
        assert!(
            summaries.contains_key(*model_type),
            "no fixture for {model_type}"
        );
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
