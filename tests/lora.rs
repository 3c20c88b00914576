//! LoRA and quantized bases against what peft and bitsandbytes really build:
//! fixtures written by `tools/measure_lora.py` and `tools/measure_quantization.py`.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;
use trainmem::activation::LoraDropout;
use trainmem::architecture::tensors_from_config;
use trainmem::finetune::{Bias, Lora, Quantization, Targets};
use trainmem::{DType, Model, Precision};

fn fixtures(folder: &str) -> Vec<(String, Value)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(folder);
    let mut all: Vec<(String, Value)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (
                p.file_name().unwrap().to_string_lossy().to_string(),
                serde_json::from_str(&text).unwrap(),
            )
        })
        .collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all
}

fn model_of(config: &Value) -> Model {
    let mut model = Model::from_tensors("fixture", "fixture", tensors_from_config(config).unwrap());
    model.model_type = config["model_type"].as_str().map(str::to_string);
    model
}

fn lora_of(fixture: &Value) -> Lora {
    let lora = &fixture["lora"];
    let targets = match &lora["target_modules"] {
        Value::String(s) if s == "all-linear" => Targets::AllLinear,
        Value::Array(names) => Targets::Names(
            names
                .iter()
                .map(|n| n.as_str().unwrap().to_string())
                .collect(),
        ),
        other => panic!("unexpected target_modules {other}"),
    };
    Lora {
        rank: lora["r"].as_u64().unwrap(),
        targets,
        bias: Bias::parse(lora["bias"].as_str().unwrap_or("none")).unwrap(),
        modules_to_save: lora["modules_to_save"]
            .as_array()
            .map(|m| m.iter().map(|n| n.as_str().unwrap().to_string()).collect())
            .unwrap_or_default(),
        dora: lora["use_dora"].as_bool().unwrap_or(false),
        quantize_head: false,
        stable_embedding: false,
        dropout: LoraDropout::default(),
        dtype: DType::Fp32,
    }
}

/// Trainable and total counts, and the trainable tensors by name and shape,
/// equal peft's on every fixture.
#[test]
fn lora_matches_peft() {
    let (mut compared, mut tensors) = (0, 0);
    let mut refused = 0;
    for (name, fixture) in fixtures("lora") {
        // The parts trainmem freezes to keep adapters where peft's
        // exclude_modules keeps them (vision-language models).
        let freeze: Vec<String> = fixture["lora"]["trainmem_freeze"]
            .as_array()
            .map(|parts| {
                parts
                    .iter()
                    .map(|p| p.as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default();
        let base = trainmem::finetune::freeze(model_of(&fixture["config"]), &freeze)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let applied = lora_of(&fixture).apply(base, None);
        if let Some(error) = fixture.get("error").and_then(Value::as_str) {
            // peft refused this configuration; so must trainmem.
            assert!(
                applied.is_err(),
                "{name}: peft refused ({error}) but trainmem accepted"
            );
            refused += 1;
            continue;
        }
        let model = applied.unwrap_or_else(|e| panic!("{name}: {e}"));
        let total = model.total_parameters().unwrap().0;
        let trainable = model.trainable_parameters().unwrap().0;
        assert_eq!(total, fixture["total"].as_u64().unwrap(), "{name}: total");
        assert_eq!(
            trainable,
            fixture["trainable"].as_u64().unwrap(),
            "{name}: trainable"
        );
        let expected: BTreeSet<(String, Vec<u64>)> = fixture["trainable_tensors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                let name = t["name"]
                    .as_str()
                    .unwrap()
                    .trim_start_matches("base_model.model.")
                    .to_string();
                let shape = t["shape"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|d| d.as_u64().unwrap())
                    .collect();
                (name, shape)
            })
            .collect();
        let actual: BTreeSet<(String, Vec<u64>)> = model
            .tensors
            .iter()
            .filter(|t| t.trainable)
            .map(|t| (t.name.clone(), t.shape.dims().to_vec()))
            .collect();
        let missing: Vec<_> = expected.difference(&actual).take(3).collect();
        let extra: Vec<_> = actual.difference(&expected).take(3).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "{name}: missing {missing:?}, extra {extra:?}"
        );
        compared += 1;
        tensors += expected.len();
    }
    println!(
        "compared {compared} peft fixtures, {tensors} trainable tensors; {refused} refused by both"
    );
    assert!(compared >= 100, "only {compared} fixtures");
}

/// Issue 5: Llama-2-7B, rank 8 on q_proj,v_proj: 4,194,304 trainable of 6,742,609,920.
#[test]
fn llama_2_7b_rank_8_on_q_and_v() {
    let preset = trainmem::input::PRESETS
        .iter()
        .find(|p| p.name == "llama-2-7b")
        .unwrap();
    let lora = Lora {
        rank: 8,
        targets: Targets::Names(vec!["q_proj".into(), "v_proj".into()]),
        bias: Bias::None,
        modules_to_save: Vec::new(),
        dora: false,
        quantize_head: false,
        stable_embedding: false,
        dropout: LoraDropout::default(),
        dtype: DType::Fp32,
    };
    let model = lora
        .apply(trainmem::input::preset_model(preset).unwrap(), None)
        .unwrap();
    assert_eq!(model.trainable_parameters().unwrap().0, 4_194_304);
    assert_eq!(model.total_parameters().unwrap().0, 6_742_609_920);
}

/// The frozen base's storage equals what bitsandbytes keeps, module by module.
#[test]
fn quantized_bases_match_bitsandbytes() {
    let mut compared = 0;
    for (name, fixture) in fixtures("quantization") {
        if fixture["kind"] != "model" {
            continue;
        }
        let config = &fixture["bnb_config"];
        let double_quant = config["bnb_4bit_use_double_quant"]
            .as_bool()
            .unwrap_or(false);
        let quantization = match fixture["method"].as_str().unwrap() {
            m if m.starts_with("nf4") => Quantization::Nf4 { double_quant },
            m if m.starts_with("fp4") => Quantization::Fp4 { double_quant },
            _ => Quantization::Int8,
        };
        let lora = Lora {
            rank: 1,
            targets: Targets::AllLinear,
            bias: Bias::None,
            modules_to_save: Vec::new(),
            dora: false,
            quantize_head: false,
            stable_embedding: false,
            dropout: LoraDropout::default(),
            dtype: DType::Fp32,
        };
        let model = lora
            .apply(model_of(&fixture["config"]), Some(quantization))
            .unwrap();
        let bf16 = *Precision::find("bf16").unwrap();
        let bytes: u64 = model
            .tensors
            .iter()
            .filter(|t| !t.name.contains(".lora_"))
            .map(|t| bf16.weight_bytes(t, &t.shape).unwrap().0)
            .sum();
        let expected = fixture["quantized_bytes"].as_u64().unwrap()
            + fixture["unquantized_bytes"].as_u64().unwrap();
        assert_eq!(bytes, expected, "{name}");
        compared += 1;
    }
    println!("compared {compared} quantized models");
    assert!(compared >= 8);
}

/// litgpt's QLoRA inventory (`--implementation litgpt --quantize nf4`):
/// Lightning's `BitsandbytesPrecision` quantizes the head too, and
/// `finetune/lora.py`'s `StableEmbedding` makes the token embedding train;
/// peft's (transformers') keeps the head in the compute dtype and the
/// embedding frozen.
#[test]
fn litgpt_qlora_quantizes_the_head_and_trains_the_embedding() {
    let model = || trainmem::input::load_model("llama-3.1-8b").unwrap();
    let lora = |litgpt: bool| Lora {
        rank: 8,
        targets: Targets::Names(vec!["q_proj".into(), "v_proj".into()]),
        bias: Bias::None,
        modules_to_save: Vec::new(),
        dora: false,
        quantize_head: litgpt,
        stable_embedding: litgpt,
        dropout: LoraDropout::default(),
        dtype: DType::Bf16,
    };
    let nf4 = Some(Quantization::Nf4 {
        double_quant: false,
    });
    let find = |m: &trainmem::Model, name: &str| {
        m.tensors.iter().find(|t| t.name == name).unwrap().clone()
    };
    let litgpt = lora(true).apply(model(), nf4).unwrap();
    assert!(find(&litgpt, "lm_head.weight").quantization.is_some());
    let embedding = find(&litgpt, "model.embed_tokens.weight");
    assert!(embedding.trainable && !embedding.optimized);
    // The optimizer, built before the swap, still holds the old embedding.
    let [replaced] = litgpt.optimizer_only.as_slice() else {
        panic!("{:?}", litgpt.optimizer_only)
    };
    assert_eq!(replaced.name, "model.embed_tokens_replaced.weight");
    assert_eq!(replaced.shape, embedding.shape);
    assert!(!replaced.trainable);
    let peft = lora(false).apply(model(), nf4).unwrap();
    assert!(find(&peft, "lm_head.weight").quantization.is_none());
    assert!(!find(&peft, "model.embed_tokens.weight").trainable);
    assert!(peft.optimizer_only.is_empty());
    // Without --quantize litgpt's embedding stays frozen (no StableEmbedding).
    let plain = lora(true).apply(model(), None).unwrap();
    assert!(!find(&plain, "model.embed_tokens.weight").trainable);
}
