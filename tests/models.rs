//! Models from what users have: presets, config.json files, model folders,
//! safetensors files and sharded indexes, through the real binary.

use std::path::{Path, PathBuf};

mod common;

use common::{json_of, run};
use serde_json::{Value, json};

fn total(model: &str) -> u64 {
    json_of(&["params", model, "--format", "json"])["parameters"]["total"]
        .as_u64()
        .unwrap()
}

/// A fresh folder under the system temp dir, unique per test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("trainmem-models-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A valid safetensors file of zeros holding `tensors` (name, dtype, shape).
fn write_safetensors(path: &Path, tensors: &[(&str, &str, &[u64])]) {
    let mut header = serde_json::Map::new();
    let mut offset = 0u64;
    for (name, dtype, shape) in tensors {
        let width = match *dtype {
            "F32" => 4,
            "BF16" | "F16" => 2,
            _ => 1,
        };
        let bytes = shape.iter().product::<u64>() * width;
        header.insert(
            name.to_string(),
            json!({"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + bytes]}),
        );
        offset += bytes;
    }
    let mut text = serde_json::to_string(&Value::Object(header)).unwrap();
    while !text.len().is_multiple_of(8) {
        text.push(' ');
    }
    let mut file = (text.len() as u64).to_le_bytes().to_vec();
    file.extend(text.as_bytes());
    file.resize(file.len() + offset as usize, 0);
    std::fs::write(path, file).unwrap();
}

/// Issue 3's named presets and their exact counts.
#[test]
fn presets_have_exact_counts() {
    assert_eq!(total("gpt2"), 124_439_808);
    assert_eq!(total("llama-2-7b"), 6_738_415_616);
    assert_eq!(total("mixtral-8x7b"), 46_702_792_704);
}

#[test]
fn params_table_groups_by_role() {
    let (code, stdout, _) = run(&["params", "llama-2-7b"]);
    assert_eq!(code, 0);
    insta::assert_snapshot!("params_llama_2_7b", stdout);
    let (_, stdout, _) = run(&["params", "mixtral-8x7b", "--format", "markdown"]);
    insta::assert_snapshot!("params_mixtral_markdown", stdout);
}

#[test]
fn params_json_lists_tensors_on_request() {
    let without = json_of(&["params", "gpt2", "--format", "json"]);
    assert!(without.get("tensors").is_none());
    let with = json_of(&["params", "gpt2", "--format", "json", "--tensors"]);
    let tensors = with["tensors"].as_array().unwrap();
    let sum: u64 = tensors
        .iter()
        .map(|t| t["parameters"].as_u64().unwrap())
        .sum();
    assert_eq!(sum, 124_439_808);
    assert_eq!(with["model_type"], "gpt2");
}

#[test]
fn models_lists_every_preset() {
    let (code, stdout, _) = run(&["models"]);
    assert_eq!(code, 0);
    insta::assert_snapshot!("models", stdout);
}

#[test]
fn a_config_file_and_a_folder_count_the_same() {
    let dir = scratch("config");
    let config = include_str!("../presets/llama-2-7b.json");
    std::fs::write(dir.join("config.json"), config).unwrap();
    assert_eq!(
        total(dir.join("config.json").to_str().unwrap()),
        6_738_415_616
    );
    assert_eq!(total(dir.to_str().unwrap()), 6_738_415_616);
}

#[test]
fn a_safetensors_file_is_counted_from_its_header() {
    let dir = scratch("single");
    let file = dir.join("model.safetensors");
    write_safetensors(
        &file,
        &[
            ("model.embed_tokens.weight", "BF16", &[100, 16]),
            ("model.layers.0.self_attn.q_proj.weight", "BF16", &[16, 16]),
            ("model.layers.0.mlp.up_proj.weight", "BF16", &[32, 16]),
            ("model.norm.weight", "F32", &[16]),
        ],
    );
    let report = json_of(&["params", file.to_str().unwrap(), "--format", "json"]);
    assert_eq!(report["parameters"]["total"], 1600 + 256 + 512 + 16);
    assert_eq!(
        report["checkpoint"]["data_bytes"],
        (1600 + 256 + 512) * 2 + 16 * 4
    );
    let roles: Vec<&str> = report["roles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["embedding", "attention", "mlp", "norm"]);
    // Training memory follows --precision, not the stored dtype.
    let e = json_of(&[
        "estimate",
        "--model",
        file.to_str().unwrap(),
        "--precision",
        "fp32",
        "--format",
        "json",
    ]);
    assert_eq!(e["memory"]["weights"], (1600 + 256 + 512 + 16) * 4);
}

#[test]
fn a_folder_with_config_and_shards_reports_both() {
    let dir = scratch("folder");
    let config = json!({
        "model_type": "llama", "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
        "num_attention_heads": 2, "vocab_size": 100, "tie_word_embeddings": true
    });
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    write_safetensors(
        &dir.join("model-00001-of-00002.safetensors"),
        &[("model.embed_tokens.weight", "BF16", &[100, 16])],
    );
    write_safetensors(
        &dir.join("model-00002-of-00002.safetensors"),
        &[("model.norm.weight", "BF16", &[16])],
    );
    let index = json!({"metadata": {}, "weight_map": {
        "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
        "model.norm.weight": "model-00002-of-00002.safetensors"
    }});
    std::fs::write(dir.join("model.safetensors.index.json"), index.to_string()).unwrap();
    let report = json_of(&["params", dir.to_str().unwrap(), "--format", "json"]);
    // The architecture: embedding 1600, per layer q,k,v,o 4*256 + gate,up,down 3*512 + 2 norms 32, final norm 16.
    assert_eq!(report["parameters"]["total"], 1600 + 1024 + 1536 + 32 + 16);
    assert_eq!(report["checkpoint"]["files"], 2);
    assert_eq!(report["checkpoint"]["parameters"], 1616);
    let index_only = json_of(&[
        "params",
        dir.join("model.safetensors.index.json").to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(index_only["parameters"]["total"], 1616);
}

#[test]
fn bad_models_get_one_line_errors() {
    let dir = scratch("bad");
    std::fs::write(dir.join("broken.json"), "{not json").unwrap();
    std::fs::write(dir.join("array.json"), "[1, 2]").unwrap();
    std::fs::write(
        dir.join("unknown.json"),
        r#"{"model_type": "transformer-xl"}"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("negative.json"),
        r#"{"model_type": "llama", "hidden_size": -5}"#,
    )
    .unwrap();
    std::fs::write(dir.join("notes.txt"), "hello").unwrap();
    std::fs::create_dir_all(dir.join("empty")).unwrap();
    let cases = [
        ("unknown_preset", "llama2-7b".to_string()),
        (
            "missing_file",
            dir.join("nope/config.json").display().to_string(),
        ),
        (
            "invalid_json",
            dir.join("broken.json").display().to_string(),
        ),
        (
            "not_an_object",
            dir.join("array.json").display().to_string(),
        ),
        (
            "unknown_model_type",
            dir.join("unknown.json").display().to_string(),
        ),
        (
            "negative_size",
            dir.join("negative.json").display().to_string(),
        ),
        (
            "not_a_model_file",
            dir.join("notes.txt").display().to_string(),
        ),
        ("empty_folder", dir.join("empty").display().to_string()),
    ];
    for (name, model) in cases {
        let (code, stdout, stderr) = run(&["params", &model]);
        assert_eq!(code, 2, "{name}: {stderr}");
        assert!(stdout.is_empty(), "{name}");
        assert_eq!(stderr.lines().count(), 1, "{name}: {stderr}");
        let stderr = stderr.replace(&dir.display().to_string(), "[dir]");
        insta::assert_snapshot!(format!("model_error_{name}"), stderr);
    }
}

/// Issue 4: a shape-aware optimizer uses the checkpoint's real shapes:
/// Adafactor factors the matrix and the 4-D tensor, keeps the vector whole.
#[test]
fn adafactor_reads_the_real_shapes_of_a_checkpoint() {
    let dir = scratch("adafactor");
    let file = dir.join("model.safetensors");
    write_safetensors(
        &file,
        &[
            ("model.layers.0.mlp.up_proj.weight", "F32", &[256, 512]),
            ("model.layers.0.mlp.up_proj.bias", "F32", &[512]),
            ("model.layers.0.conv.weight", "F32", &[32, 16, 3, 3]),
        ],
    );
    let e = json_of(&[
        "estimate",
        "--model",
        file.to_str().unwrap(),
        "--optimizer",
        "adafactor",
        "--format",
        "json",
    ]);
    // row_var [256, 1] + col_var [1, 512]; variance [512]; row_var [32, 16, 3, 1] + col_var [32, 16, 1, 3].
    let elements = (256 + 512) + 512 + (32 * 16 * 3 + 32 * 16 * 3);
    assert_eq!(e["memory"]["optimizer_states"], elements * 4);
    // Three 0-d fp32 `step` counters on the host.
    assert_eq!(e["host"]["optimizer_states"], 3 * 4);
    // Adam on the same file keeps two full copies.
    let adam = json_of(&[
        "estimate",
        "--model",
        file.to_str().unwrap(),
        "--optimizer",
        "adam",
        "--format",
        "json",
    ]);
    assert_eq!(
        adam["memory"]["optimizer_states"],
        2 * 4 * (256 * 512 + 512 + 32 * 16 * 9)
    );
}

/// Issue 3: every malformed checkpoint is one line on stderr and exit 2
/// through the binary (the library's tests cover each attack in detail).
#[test]
fn malformed_checkpoints_exit_two() {
    let dir = scratch("malformed");
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("truncated", vec![1, 2, 3]),
        ("absurd_header_length", u64::MAX.to_le_bytes().to_vec()),
        (
            "header_past_the_end",
            [64u64.to_le_bytes().to_vec(), b"{}".to_vec()].concat(),
        ),
        (
            "invalid_utf8",
            [2u64.to_le_bytes().to_vec(), vec![0xff, 0xfe]].concat(),
        ),
        (
            "invalid_json",
            [2u64.to_le_bytes().to_vec(), b"{x".to_vec()].concat(),
        ),
        ("unknown_dtype", {
            let header = br#"{"w":{"dtype":"F7","shape":[1],"data_offsets":[0,1]}}"#;
            [
                (header.len() as u64).to_le_bytes().to_vec(),
                header.to_vec(),
                vec![0],
            ]
            .concat()
        }),
        ("offsets_inconsistent", {
            let header = br#"{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}"#;
            [
                (header.len() as u64).to_le_bytes().to_vec(),
                header.to_vec(),
                vec![0; 4],
            ]
            .concat()
        }),
        ("negative_dimension", {
            let header = br#"{"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}"#;
            [
                (header.len() as u64).to_le_bytes().to_vec(),
                header.to_vec(),
                vec![0; 8],
            ]
            .concat()
        }),
    ];
    for (name, bytes) in cases {
        let path = dir.join(format!("{name}.safetensors"));
        std::fs::write(&path, bytes).unwrap();
        let (code, stdout, stderr) = run(&["params", path.to_str().unwrap()]);
        assert_eq!(code, 2, "{name}: {stderr}");
        assert!(stdout.is_empty(), "{name}");
        assert_eq!(stderr.lines().count(), 1, "{name}: {stderr}");
        assert!(
            stderr.contains(&format!("{name}.safetensors")),
            "{name}: {stderr}"
        );
    }
    std::fs::write(
        dir.join("model.safetensors.index.json"),
        r#"{"weight_map": {"w": "missing.safetensors"}}"#,
    )
    .unwrap();
    let (code, _, stderr) = run(&[
        "params",
        dir.join("model.safetensors.index.json").to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("missing.safetensors"), "{stderr}");
}

/// `--task` builds the head of its auto class: bert-base-uncased's totals
/// are those of `tests/fixtures/params/bert__defaults__*.json` (the same
/// sizes as the published config), the report names the task.
#[test]
fn task_picks_the_head_and_is_reported() {
    let total_for = |task: &str| {
        json_of(&[
            "params",
            "bert-base-uncased",
            "--task",
            task,
            "--format",
            "json",
        ])["parameters"]["total"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(total("bert-base-uncased"), 109_514_298);
    assert_eq!(total_for("masked-lm"), 109_514_298);
    assert_eq!(total_for("seq-cls:3"), 109_484_547);
    assert_eq!(total_for("token-cls:5"), 108_895_493);
    assert_eq!(total_for("embedding"), 109_482_240);
    let params = json_of(&["params", "roberta-large", "--format", "json"]);
    assert_eq!(params["task"], "masked-lm");
    assert_eq!(
        json_of(&["params", "gpt2", "--format", "json"])["task"],
        "causal-lm"
    );
    let estimate = json_of(&[
        "estimate",
        "--model",
        "bert-base-uncased",
        "--task",
        "seq-cls:2",
        "--format",
        "json",
    ]);
    assert_eq!(estimate["model"]["task"], "seq-cls:2");
    let (code, stdout, _) = run(&["params", "roberta-large", "--task", "token-cls:9"]);
    assert_eq!(code, 0);
    assert!(
        stdout.starts_with(
            "trainmem params: roberta-large (preset roberta-large, model_type roberta, task token-cls:9)"
        ),
        "{stdout}"
    );
}

/// The vision presets: their totals are those of the measured
/// `preset__vit-base-patch16-224`, `vit__base_patch16_224__seq-cls-3` and
/// `preset__clip-vit-large-patch14` fixtures; embedding is the default.
#[test]
fn vision_presets_default_to_embedding_and_classify_images() {
    let params = json_of(&["params", "vit-base-patch16-224", "--format", "json"]);
    assert_eq!(params["task"], "embedding");
    assert_eq!(params["parameters"]["total"], 86_389_248);
    let classifier = json_of(&[
        "params",
        "vit-base-patch16-224",
        "--task",
        "seq-cls:3",
        "--format",
        "json",
    ]);
    assert_eq!(classifier["parameters"]["total"], 85_800_963);
    let clip = json_of(&["params", "clip-vit-large-patch14", "--format", "json"]);
    assert_eq!(clip["task"], "embedding");
    assert_eq!(clip["parameters"]["total"], 427_616_513);
    let (code, stdout, stderr) = run(&["params", "vit-base-patch16-224", "--task", "masked-lm"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stdout.is_empty());
    assert!(
        stderr.starts_with(
            "error: invalid --task `masked-lm`: transformers has no AutoModelForMaskedLM class for `vit`"
        ),
        "{stderr}"
    );
    assert_eq!(stderr.lines().filter(|l| l.starts_with("error")).count(), 1);
}

/// `--freeze vision_model` freezes CLIP's vision tower by name: what stays
/// trainable is every other tensor of the measured
/// `preset__clip-vit-large-patch14` fixture (the text tower, both
/// projections and `logit_scale`).
#[test]
fn clip_s_vision_tower_is_frozen_by_name() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/params/preset__clip-vit-large-patch14.json");
    let fixture: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let outside_vision: u64 = fixture["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| !t["name"].as_str().unwrap().starts_with("vision_model."))
        .map(|t| {
            t["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap())
                .product::<u64>()
        })
        .sum();
    let estimate = json_of(&[
        "estimate",
        "--model",
        "clip-vit-large-patch14",
        "--freeze",
        "vision_model",
        "--format",
        "json",
    ]);
    assert_eq!(estimate["parameters"]["total"], fixture["total"]);
    assert_eq!(estimate["parameters"]["trainable"], outside_vision);
}

/// `--image-size` builds a vision model for that resolution: the totals of
/// the measured `clip__vit_large_patch14_336__embedding` and
/// `vit__image_384__*` fixtures, and the report says what an image became.
#[test]
fn image_size_rebuilds_a_vision_model_and_says_what_an_image_becomes() {
    let measured = |id: &str| {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/params/{id}.json"));
        let fixture: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        fixture["total"].clone()
    };
    let clip = json_of(&[
        "estimate",
        "--model",
        "clip-vit-large-patch14",
        "--image-size",
        "336",
        "--format",
        "json",
    ]);
    assert_eq!(
        clip["parameters"]["total"],
        measured("clip__vit_large_patch14_336__embedding")
    );
    let vit = json_of(&[
        "params",
        "vit-base-patch16-224",
        "--image-size",
        "384",
        "--task",
        "seq-cls:3",
        "--format",
        "json",
    ]);
    assert_eq!(
        vit["parameters"]["total"],
        measured("vit__image_384__seq-cls-3")
    );
    let (code, stdout, _) = run(&["params", "vit-base-patch16-224", "--image-size", "384"]);
    assert_eq!(code, 0);
    assert!(
        stdout.contains(
            "note: input tokens: a 384 px image -> 577 tokens (576 patches of 16 px + the CLS token)"
        ),
        "{stdout}"
    );
    for (args, expected) in [
        (
            &["params", "gpt2", "--image-size", "224"][..],
            "error: invalid --image-size `224`: `gpt2` takes no images",
        ),
        (
            &["estimate", "--params", "7B", "--image-size", "224"][..],
            "error: invalid --image-size `224`: the image size is set in a config.json",
        ),
        (
            &["params", "vit-base-patch16-224", "--image-size", "100000"][..],
            "error: invalid --image-size `100000`: accepted: an image side from 1 to 65536 pixels",
        ),
    ] {
        let (code, stdout, stderr) = run(args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stdout.is_empty());
        assert!(stderr.starts_with(expected), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }
}

/// CLIP's image classifier is priced from its vision tower (257 tokens at
/// 224 px in 14 px patches); its contrastive model says it is not modelled.
#[test]
fn clip_s_image_classifier_is_priced_and_its_contrastive_model_is_named() {
    let estimate = json_of(&[
        "estimate",
        "--model",
        "clip-vit-large-patch14",
        "--task",
        "seq-cls:10",
        "--micro-batch",
        "4",
        "--platform",
        "cpu",
        "--format",
        "json",
    ]);
    assert!(estimate["activations"]["total"].as_u64().unwrap() > 0);
    let (code, _, stderr) = run(&[
        "estimate",
        "--model",
        "clip-vit-large-patch14",
        "--task",
        "seq-cls:10",
        "--micro-batch",
        "4",
        "--seq-len",
        "77",
    ]);
    assert_eq!(code, 2);
    assert!(
        stderr.starts_with(
            "error: invalid --seq-len `77`: clip-vit-large-patch14 reads each image as 257 tokens"
        ),
        "{stderr}"
    );
    let (code, stdout, _) = run(&[
        "estimate",
        "--model",
        "clip-vit-large-patch14",
        "--micro-batch",
        "4",
    ]);
    assert_eq!(code, 0);
    assert!(
        common::contains_words(
            &stdout,
            "note: activations are not estimated: CLIPModel's contrastive training of both towers is not modelled yet"
        ),
        "{stdout}"
    );
}

/// A ViT's sequence is its image's patches and the CLS token: `--seq-len`
/// follows `--image-size`, and `--images N` per sample makes B x N
/// sequences.
#[test]
fn a_vit_s_sequence_follows_its_images() {
    let activations = |extra: &[&str]| {
        let mut args = vec![
            "estimate",
            "--model",
            "vit-base-patch16-224",
            "--task",
            "seq-cls:10",
            "--platform",
            "cpu",
            "--format",
            "json",
        ];
        args.extend_from_slice(extra);
        json_of(&args)["activations"]["total"].clone()
    };
    let six = activations(&["--micro-batch", "6"]);
    assert!(six.as_u64().unwrap() > 0);
    assert_eq!(activations(&["--micro-batch", "2", "--images", "3"]), six);
    assert_eq!(
        activations(&["--micro-batch", "6", "--seq-len", "197"]),
        six
    );
    let larger = activations(&["--micro-batch", "6", "--image-size", "384"]);
    assert!(larger.as_u64() > six.as_u64());
    let (code, stdout, _) = run(&[
        "estimate",
        "--model",
        "vit-base-patch16-224",
        "--task",
        "seq-cls:10",
        "--micro-batch",
        "2",
        "--images",
        "3",
    ]);
    assert_eq!(code, 0);
    assert!(
        stdout.contains(
            "note: images: 2 samples x 3 images each = a micro-batch of 6 sequences of 197 tokens"
        ),
        "{stdout}"
    );
    for (args, expected) in [
        (
            &[
                "estimate",
                "--model",
                "vit-base-patch16-224",
                "--task",
                "seq-cls:2",
                "--micro-batch",
                "1",
                "--seq-len",
                "128",
            ][..],
            "error: invalid --seq-len `128`: vit-base-patch16-224 reads each image as 197 tokens",
        ),
        (
            &[
                "estimate",
                "--model",
                "gpt2",
                "--micro-batch",
                "1",
                "--seq-len",
                "8",
                "--images",
                "2",
            ][..],
            "error: invalid --images `2`: gpt2 takes no images",
        ),
    ] {
        let (code, stdout, stderr) = run(args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stdout.is_empty());
        assert!(stderr.starts_with(expected), "{args:?}: {stderr}");
    }
}

#[test]
fn tasks_a_model_cannot_do_exit_two_with_one_line() {
    for (args, expected) in [
        (
            &["params", "bert-base-uncased", "--task", "seq2seq"][..],
            "error: invalid --task `seq2seq`: `bert` is an encoder without a decoder",
        ),
        (
            &["params", "llama-3.2-1b", "--task", "seq-cls:2"][..],
            "error: invalid --task `seq-cls:2`: trainmem prices the decoder `llama` as AutoModelForCausalLM only",
        ),
        (
            &["estimate", "--params", "7B", "--task", "masked-lm"][..],
            "error: invalid --task `masked-lm`: the head of a task is read from a config.json",
        ),
        (
            &["estimate", "--model", "gpt2", "--task", "classify"][..],
            "error: invalid --task `classify`: accepted: causal-lm, masked-lm",
        ),
    ] {
        let (code, stdout, stderr) = run(args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stdout.is_empty());
        assert!(stderr.starts_with(expected), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let (code, _, _) = run(&["estimate", "--params", "7B", "--task", "causal-lm"]);
    assert_eq!(code, 0);
}

/// An encoder's activations: its own head and loss, priced on one rank;
/// the causal-LM techniques are refused, the bare embedding model says why
/// it has no activations.
#[test]
fn encoder_activations_follow_the_task() {
    let activations = |task: &str| {
        json_of(&[
            "estimate",
            "--model",
            "bert-base-uncased",
            "--task",
            task,
            "--micro-batch",
            "8",
            "--seq-len",
            "128",
            "--platform",
            "cpu",
            "--format",
            "json",
        ])["activations"]
            .clone()
    };
    let masked = activations("masked-lm");
    // Logits over the vocabulary, fp32 (no --precision): 4·8·128·30522.
    assert_eq!(masked["logits"], 4 * 8 * 128 * 30522u64);
    let classified = activations("seq-cls:2");
    assert_eq!(classified["logits"], 4 * 8 * 2u64);
    assert!(classified["total"].as_u64() < masked["total"].as_u64());
    let (code, _, stderr) = run(&[
        "estimate",
        "--model",
        "roberta-large",
        "--micro-batch",
        "1",
        "--seq-len",
        "64",
        "--loss",
        "chunked:8",
    ]);
    assert_eq!(code, 2);
    assert!(
        stderr
            .starts_with("error: invalid --loss `chunked:8`: not priced for the encoder `roberta`"),
        "{stderr}"
    );
    let (code, stdout, _) = run(&[
        "estimate",
        "--model",
        "bert-base-uncased",
        "--task",
        "embedding",
        "--micro-batch",
        "1",
        "--seq-len",
        "64",
    ]);
    assert_eq!(code, 0);
    assert!(
        stdout.contains("the embedding task is the bare AutoModel"),
        "{stdout}"
    );
}

/// An architecture whose parameters are counted but whose activations are
/// not modelled says so, rather than calling the architecture unknown.
#[test]
fn counted_but_unmodelled_activations_are_named() {
    let folder = scratch("modernbert");
    let config = folder.join("config.json");
    std::fs::write(
        &config,
        r#"{"model_type": "modernbert", "num_hidden_layers": 2}"#,
    )
    .unwrap();
    let (code, stdout, _) = run(&[
        "estimate",
        "--model",
        config.to_str().unwrap(),
        "--micro-batch",
        "2",
        "--seq-len",
        "64",
    ]);
    assert_eq!(code, 0);
    assert!(
        common::contains_words(
            &stdout,
            "trainmem counts the parameters of `modernbert` exactly but does not model its activations yet"
        ),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(folder);
}

/// A folder's note comparing the checkpoint with the architecture follows
/// the task: a classifier's checkpoint matches its classification model.
#[test]
fn the_checkpoint_note_follows_the_task() {
    let folder = scratch("bert-classifier");
    std::fs::write(
        folder.join("config.json"),
        r#"{"model_type": "bert", "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
            "num_attention_heads": 2, "vocab_size": 50, "max_position_embeddings": 20}"#,
    )
    .unwrap();
    // BertForSequenceClassification with 2 labels: 1,282 parameters.
    write_safetensors(
        &folder.join("model.safetensors"),
        &[("all", "F32", &[1282])],
    );
    let notes = |task: Option<&str>| {
        let mut args = vec!["params", folder.to_str().unwrap(), "--format", "json"];
        if let Some(task) = task {
            args.extend(["--task", task]);
        }
        let report = json_of(&args);
        assert_eq!(
            report["parameters"]["total"],
            if task.is_some() { 1282 } else { 1330 }
        );
        report["notes"].to_string()
    };
    assert!(notes(None).contains("the checkpoint holds 1,282 elements, the architecture 1,330"));
    assert!(!notes(Some("seq-cls:2")).contains("the checkpoint holds"));
    let _ = std::fs::remove_dir_all(folder);
}
