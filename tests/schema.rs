//! `trainmem schema`: the JSON Schema of `estimate --format json`, checked
//! against real outputs of varied setups by a small validator of the
//! keywords the schema uses (listed in `KEYWORDS`, so a keyword it does not
//! understand cannot slip past it).

mod common;

use std::collections::BTreeSet;

use common::{json_of, run};
use serde_json::{Map, Value};

/// The JSON Schema keywords the schema may use, each understood by `check`.
const KEYWORDS: [&str; 16] = [
    "$schema",
    "$defs",
    "$ref",
    "title",
    "description",
    "type",
    "required",
    "properties",
    "additionalProperties",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "enum",
    "minimum",
    "const",
];

fn schema() -> Value {
    let (code, stdout, stderr) = run(&["schema"]);
    assert_eq!(code, 0, "{stderr}");
    serde_json::from_str(&stdout).expect("the schema is JSON")
}

/// The errors of `value` against `schema` (draft 2020-12 semantics for the
/// keywords in `KEYWORDS`), each with the path where it happened.
fn check(value: &Value, schema: &Value, root: &Value, path: &str, errors: &mut Vec<String>) {
    let Some(rules) = schema.as_object() else {
        if schema == &Value::Bool(false) {
            errors.push(format!("{path}: not allowed"));
        }
        return;
    };
    if let Some(reference) = rules.get("$ref").and_then(Value::as_str) {
        let name = reference
            .strip_prefix("#/$defs/")
            .unwrap_or_else(|| panic!("unsupported $ref {reference}"));
        check(value, &root["$defs"][name], root, path, errors);
    }
    if let Some(types) = rules.get("type") {
        let types: Vec<&str> = match types {
            Value::String(one) => vec![one.as_str()],
            Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
            other => panic!("bad type {other}"),
        };
        let matches = |name: &str| match name {
            "null" => value.is_null(),
            "boolean" => value.is_boolean(),
            "object" => value.is_object(),
            "array" => value.is_array(),
            "string" => value.is_string(),
            "number" => value.is_number(),
            "integer" => value.is_u64() || value.is_i64(),
            other => panic!("unknown type {other}"),
        };
        if !types.iter().any(|t| matches(t)) {
            errors.push(format!("{path}: {value} is not {types:?}"));
            return;
        }
    }
    if let Some(allowed) = rules.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        errors.push(format!("{path}: {value} is not one of {allowed:?}"));
    }
    if rules.get("const").is_some_and(|constant| constant != value) {
        errors.push(format!("{path}: {value} is not {}", rules["const"]));
    }
    let minimum = rules.get("minimum").and_then(Value::as_f64);
    if let (Some(minimum), Some(number)) = (minimum, value.as_f64())
        && number < minimum
    {
        errors.push(format!("{path}: {number} < {minimum}"));
    }
    if let Some(object) = value.as_object() {
        check_object(object, rules, root, path, errors);
    }
    if let Some(array) = value.as_array() {
        let prefix = rules.get("prefixItems").and_then(Value::as_array);
        for (i, item) in array.iter().enumerate() {
            let item_path = format!("{path}[{i}]");
            match prefix.and_then(|p| p.get(i)) {
                Some(item_schema) => check(item, item_schema, root, &item_path, errors),
                None => {
                    if let Some(items) = rules.get("items") {
                        check(item, items, root, &item_path, errors);
                    }
                }
            }
        }
        let length = array.len() as u64;
        if rules
            .get("minItems")
            .and_then(Value::as_u64)
            .is_some_and(|min| length < min)
            || rules
                .get("maxItems")
                .and_then(Value::as_u64)
                .is_some_and(|max| length > max)
        {
            errors.push(format!("{path}: {length} items"));
        }
    }
}

fn check_object(
    object: &Map<String, Value>,
    rules: &Map<String, Value>,
    root: &Value,
    path: &str,
    errors: &mut Vec<String>,
) {
    for key in rules
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !object.contains_key(key) {
            errors.push(format!("{path}: lacks required `{key}`"));
        }
    }
    let properties = rules.get("properties").and_then(Value::as_object);
    for (key, item) in object {
        let item_path = format!("{path}.{key}");
        match properties.and_then(|p| p.get(key)) {
            Some(item_schema) => check(item, item_schema, root, &item_path, errors),
            None => {
                if let Some(additional) = rules.get("additionalProperties") {
                    check(item, additional, root, &item_path, errors);
                }
            }
        }
    }
}

/// Every object key used as a keyword in the schema (property names and
/// `$defs` names are not keywords).
fn keywords_used(schema: &Value, used: &mut BTreeSet<String>) {
    match schema {
        Value::Object(map) => {
            for (key, inner) in map {
                used.insert(key.clone());
                match key.as_str() {
                    "properties" | "$defs" => {
                        for named in inner.as_object().unwrap().values() {
                            keywords_used(named, used);
                        }
                    }
                    "enum" | "const" | "required" => {}
                    _ => keywords_used(inner, used),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| keywords_used(i, used)),
        _ => {}
    }
}

/// A dozen varied setups: a flat count, presets with a micro-batch, LoRA
/// with a quantized base, ZeRO-3 on 8 GPUs, pipeline and tensor parallel,
/// experts, FSDP with offload, a shape-aware optimizer, a safetensors file.
fn outputs() -> Vec<Value> {
    let setups: [&[&str]; 19] = [
        &["--params", "7B"],
        &[
            "--params",
            "7B",
            "--optimizer",
            "adamw",
            "--precision",
            "mixed-bf16",
            "--device",
            "h100-80gb",
        ],
        &[
            "--params",
            "13B",
            "--optimizer",
            "sgd",
            "--precision",
            "bf16",
            "--capacity",
            "80GiB",
        ],
        &[
            "--model",
            "llama-3.1-8b",
            "--optimizer",
            "adamw",
            "--precision",
            "mixed-bf16",
            "--micro-batch",
            "1",
            "--seq-len",
            "4096",
            "--device",
            "h100-80gb",
        ],
        &[
            "--model",
            "llama-2-7b",
            "--lora-rank",
            "8",
            "--lora-targets",
            "q_proj,v_proj",
            "--precision",
            "bf16",
            "--quantize",
            "nf4",
            "--double-quant",
        ],
        &[
            "--model",
            "llama-3.1-8b",
            "--precision",
            "mixed-bf16",
            "--gpus",
            "8",
            "--zero",
            "3",
            "--micro-batch",
            "2",
            "--seq-len",
            "2048",
            "--device",
            "h100",
        ],
        &[
            "--model",
            "llama-3.1-70b",
            "--precision",
            "mixed-bf16",
            "--gpus",
            "16",
            "--nodes",
            "2",
            "--tp",
            "4",
            "--pp",
            "4",
            "--micro-batch",
            "1",
            "--seq-len",
            "4096",
            "--sequence-parallel",
            "--framework",
            "megatron",
        ],
        &[
            "--params",
            "7.5B",
            "--precision",
            "mixed-fp16",
            "--gpus",
            "64",
            "--zero",
            "1",
        ],
        &[
            "--model",
            "mixtral-8x7b",
            "--precision",
            "bf16",
            "--gpus",
            "8",
            "--ep",
            "8",
            "--zero",
            "2",
            "--micro-batch",
            "1",
            "--seq-len",
            "1024",
            "--recompute",
            "full",
        ],
        &[
            "--model",
            "qwen2.5-7b",
            "--optimizer",
            "adamw-8bit",
            "--precision",
            "mixed-bf16",
            "--gpus",
            "8",
            "--fsdp",
            "full-shard",
            "--offload",
            "optimizer",
            "--micro-batch",
            "1",
            "--seq-len",
            "2048",
            "--attention",
            "eager",
        ],
        &[
            "--model",
            "gpt2",
            "--optimizer",
            "galore-adamw",
            "--optimizer-option",
            "rank=64",
            "--micro-batch",
            "4",
            "--seq-len",
            "1024",
            "--recompute",
            "selective",
            "--overhead",
            "0",
        ],
        &[
            "--params",
            "7B",
            "--layers",
            "32",
            "--hidden",
            "4096",
            "--heads",
            "32",
            "--ffn",
            "11008",
            "--vocab",
            "32000",
            "--micro-batch",
            "1",
            "--seq-len",
            "2048",
        ],
        &[
            "--model",
            "llama-3.1-8b",
            "--gpus",
            "8",
            "--zero",
            "3",
            "--offload",
            "optimizer+params",
            "--precision",
            "mixed-bf16",
            "--state-dtype",
            "bf16",
        ],
        &[
            "--model",
            "llama-3.2-1b",
            "--micro-batch",
            "1",
            "--seq-len",
            "1024",
            "--offload-activations",
        ],
        // Issue 24: the loop's kept outputs, litgpt's modules, torchao's NF4
        // and FSDP1's per-unit init.
        &[
            "--model",
            "llama-3.2-1b",
            "--micro-batch",
            "1",
            "--seq-len",
            "1024",
            "--keep-outputs",
            "--implementation",
            "litgpt",
            "--lora-rank",
            "8",
            "--quantize",
            "nf4-torchao",
        ],
        // torchtune's QLoRA setup under torchao 0.1, replayed before the step.
        &[
            "--model",
            "llama-3.2-1b",
            "--micro-batch",
            "1",
            "--seq-len",
            "512",
            "--implementation",
            "torchtune",
            "--lora-rank",
            "8",
            "--quantize",
            "nf4-torchao-0.1",
        ],
        &[
            "--model",
            "llama-3.2-1b",
            "--gpus",
            "2",
            "--fsdp",
            "full-shard",
            "--framework",
            "fsdp1",
            "--init",
            "per-unit",
        ],
        &[
            "--model",
            "llama-3.2-1b",
            "--micro-batch",
            "1",
            "--seq-len",
            "1024",
            "--precision",
            "te-fp8",
            "--framework",
            "megatron",
            "--gpus",
            "2",
            "--cp",
            "2",
        ],
        &[
            "--model",
            "llama-3.2-1b",
            "--micro-batch",
            "1",
            "--seq-len",
            "1024",
            "--precision",
            "fp8-rowwise",
        ],
    ];
    let mut outputs: Vec<Value> = setups
        .iter()
        .map(|setup| {
            let mut args = vec!["estimate"];
            args.extend_from_slice(setup);
            args.extend(["--format", "json"]);
            json_of(&args)
        })
        .collect();
    // A checkpoint read from its header: `model.checkpoint` is an object.
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("model.safetensors");
    let header = r#"{"model.embed_tokens.weight":{"dtype":"BF16","shape":[8,4],"data_offsets":[0,64]},"model.layers.0.mlp.up_proj.weight":{"dtype":"F32","shape":[4,4],"data_offsets":[64,128]}}"#;
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend(header.as_bytes());
    bytes.extend([0u8; 128]);
    std::fs::write(&path, bytes).unwrap();
    outputs.push(json_of(&[
        "estimate",
        "--model",
        path.to_str().unwrap(),
        "--format",
        "json",
    ]));
    outputs
}

fn errors_of(value: &Value, schema: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    check(value, schema, schema, "$", &mut errors);
    errors
}

#[test]
fn the_schema_is_draft_2020_12_in_keywords_the_checker_knows() {
    let schema = schema();
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    let description = schema["description"].as_str().unwrap();
    assert!(description.contains("integer"), "{description}");
    let mut used = BTreeSet::new();
    keywords_used(&schema, &mut used);
    let unknown: Vec<_> = used
        .iter()
        .filter(|k| !KEYWORDS.contains(&k.as_str()))
        .collect();
    assert!(
        unknown.is_empty(),
        "keywords the checker ignores: {unknown:?}"
    );
    // Later fields must not break consumers.
    assert_eq!(schema["additionalProperties"], true);
    assert_eq!(schema["$defs"]["memory"]["additionalProperties"], true);
}

#[test]
fn real_outputs_validate() {
    let schema = schema();
    let outputs = outputs();
    assert!(outputs.len() >= 12);
    for (i, output) in outputs.iter().enumerate() {
        let errors = errors_of(output, &schema);
        assert!(errors.is_empty(), "setup {i}: {errors:#?}");
    }
    // The setups reach the optional and nullable parts.
    assert!(outputs.iter().any(|o| o.get("quantized").is_some()));
    assert!(outputs.iter().any(|o| o.get("activations").is_some()));
    assert!(outputs.iter().any(|o| o["model"]["checkpoint"].is_object()));
    assert!(outputs.iter().any(|o| o["capacity"].is_null()));
    assert!(outputs.iter().any(|o| o["fits"].is_boolean()));
}

/// Every key the outputs hold at the top level and in `memory` is listed;
/// the keys every output holds are required, and only those.
#[test]
fn the_schema_lists_and_requires_the_keys_outputs_hold() {
    let schema = schema();
    let outputs = outputs();
    for (level, key) in [
        ("top level", None),
        ("memory", Some("memory")),
        ("host", Some("host")),
    ] {
        let rules = match key {
            None => &schema,
            Some(_) => &schema["$defs"]["memory"],
        };
        let keys = |o: &Value| -> BTreeSet<String> {
            let object = match key {
                None => o,
                Some(name) => &o[name],
            };
            object.as_object().unwrap().keys().cloned().collect()
        };
        let seen: BTreeSet<String> = outputs.iter().flat_map(keys).collect();
        let always: BTreeSet<String> = seen
            .iter()
            .filter(|k| outputs.iter().all(|o| keys(o).contains(*k)))
            .cloned()
            .collect();
        let listed: BTreeSet<String> = rules["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        let required: BTreeSet<String> = rules["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k.as_str().unwrap().to_string())
            .collect();
        let unlisted: Vec<_> = seen.difference(&listed).collect();
        assert!(
            unlisted.is_empty(),
            "{level}: not in the schema: {unlisted:?}"
        );
        assert_eq!(required, always, "{level}: required keys");
    }
}

/// The checker and the schema refuse what is wrong: a byte count as text,
/// a missing key, a stage that does not exist.
#[test]
fn a_wrong_output_is_refused() {
    let schema = schema();
    let good = json_of(&["estimate", "--params", "7B", "--format", "json"]);
    let mut text_bytes = good.clone();
    text_bytes["memory"]["total"] = Value::from("112 GB");
    let mut float_bytes = good.clone();
    float_bytes["memory"]["peak"] = Value::from(1.5);
    let mut missing = good.clone();
    missing.as_object_mut().unwrap().remove("fits");
    let mut stage = good.clone();
    stage["parallelism"]["zero"] = Value::from("4");
    let mut negative = good.clone();
    negative["overhead"] = Value::from(-1);
    for (what, bad) in [
        ("text bytes", text_bytes),
        ("fractional bytes", float_bytes),
        ("missing fits", missing),
        ("zero stage 4", stage),
        ("negative overhead", negative),
    ] {
        assert!(!errors_of(&bad, &schema).is_empty(), "{what} passed");
    }
    // A key added later passes.
    let mut added = good;
    added["memory"]["new_piece"] = Value::from(0);
    added["new_section"] = Value::from("x");
    assert_eq!(errors_of(&added, &schema), Vec::<String>::new());
}
