//! Every config.json fixture measured with transformers
//! (`tools/measure_params.py`, `tests/fixtures/params/*.json`) against
//! `trainmem::architecture::tensors_for_task` (the fixture's `task`, or the
//! model type's default): the total number of parameters, the number of
//! tensors and, where the fixture lists them, every tensor's name and shape.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;
use trainmem::architecture::{Task, default_task, supported, tensors_for_task, with_image_size};

/// How many differences of each kind a failure message shows.
const SHOWN_DIFFERENCES: usize = 5;

fn fixture_paths() -> Vec<PathBuf> {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/params");
    let mut paths: Vec<PathBuf> = fs::read_dir(&folder)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", folder.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    paths.sort();
    paths
}

fn read(path: &Path) -> Value {
    let text =
        fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// (name, shape) pairs of a fixture's `tensors` list.
fn expected_tensors(fixture: &Value) -> Option<BTreeMap<String, Vec<u64>>> {
    let listed = fixture.get("tensors")?.as_array()?;
    Some(
        listed
            .iter()
            .map(|tensor| {
                let name = tensor["name"].as_str().expect("tensor name").to_string();
                let shape = tensor["shape"]
                    .as_array()
                    .expect("tensor shape")
                    .iter()
                    .map(|d| d.as_u64().expect("dimension"))
                    .collect();
                (name, shape)
            })
            .collect(),
    )
}

/// The first differences between two tensor sets, one per line.
fn differences(
    expected: &BTreeMap<String, Vec<u64>>,
    actual: &BTreeMap<String, Vec<u64>>,
) -> Vec<String> {
    let mut lines = Vec::new();
    let missing: Vec<_> = expected
        .keys()
        .filter(|name| !actual.contains_key(*name))
        .collect();
    let extra: Vec<_> = actual
        .keys()
        .filter(|name| !expected.contains_key(*name))
        .collect();
    let reshaped: Vec<_> = expected
        .iter()
        .filter_map(|(name, shape)| {
            let ours = actual.get(name)?;
            (ours != shape).then(|| format!("{name}: expected {shape:?}, got {ours:?}"))
        })
        .collect();
    for (label, items, count) in [
        (
            "missing",
            missing.iter().map(|n| n.to_string()).collect::<Vec<_>>(),
            missing.len(),
        ),
        (
            "unexpected",
            extra.iter().map(|n| n.to_string()).collect(),
            extra.len(),
        ),
        ("wrong shape", reshaped.clone(), reshaped.len()),
    ] {
        if count > 0 {
            let shown: Vec<_> = items.into_iter().take(SHOWN_DIFFERENCES).collect();
            lines.push(format!("    {count} {label}: {}", shown.join("; ")));
        }
    }
    lines
}

/// Compares one fixture; returns the number of tensors compared by name,
/// or a description of what differs.
fn check(fixture: &Value) -> Result<usize, String> {
    let config = &fixture["config"];
    let task = fixture
        .get("task")
        .and_then(Value::as_str)
        .map(|text| Task::parse(text).expect("a fixture's task"));
    let (built, tensors) = tensors_for_task(config, task).map_err(|e| format!("    error: {e}"))?;
    if let Some(task) = task {
        assert_eq!(built, task);
    }
    let mut problems = Vec::new();

    let total: u128 = tensors
        .iter()
        .map(|t| u128::from(t.shape.elements().0))
        .sum();
    let expected_total = u128::from(fixture["total"].as_u64().expect("total"));
    if total != expected_total {
        problems.push(format!(
            "    total: expected {expected_total}, got {total} (off by {})",
            total as i128 - expected_total as i128
        ));
    }
    let expected_count = fixture["tensor_count"].as_u64().expect("tensor_count") as usize;
    if tensors.len() != expected_count {
        problems.push(format!(
            "    tensor count: expected {expected_count}, got {}",
            tensors.len()
        ));
    }
    let actual: BTreeMap<String, Vec<u64>> = tensors
        .iter()
        .map(|t| (t.name.clone(), t.shape.dims().to_vec()))
        .collect();
    if actual.len() != tensors.len() {
        problems.push(format!(
            "    {} duplicate tensor names",
            tensors.len() - actual.len()
        ));
    }
    // Parameters created with requires_grad False (Whisper's sinusoidal
    // encoder positions) are counted and never trained.
    let frozen: BTreeSet<&str> = fixture
        .get("frozen")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let ours_frozen: BTreeSet<&str> = tensors
        .iter()
        .filter(|t| !t.trainable)
        .map(|t| t.name.as_str())
        .collect();
    if frozen != ours_frozen {
        problems.push(format!(
            "    frozen: expected {frozen:?}, got {ours_frozen:?}"
        ));
    }
    let mut compared = 0;
    if let Some(expected) = expected_tensors(fixture) {
        problems.extend(differences(&expected, &actual));
        compared = expected.len();
    }
    if problems.is_empty() {
        Ok(compared)
    } else {
        Err(problems.join("\n"))
    }
}

#[test]
fn every_measured_fixture_matches_transformers_exactly() {
    let paths = fixture_paths();
    assert!(
        paths.len() >= 500,
        "expected the 500 measured fixtures, found {}",
        paths.len()
    );
    let mut failures = Vec::new();
    let mut model_types = BTreeSet::new();
    let (mut listed_fixtures, mut tensors_compared, mut parameters) = (0, 0, 0u128);
    for path in &paths {
        let fixture = read(path);
        let id = fixture["id"].as_str().unwrap_or("?").to_string();
        model_types.insert(fixture["model_type"].as_str().unwrap_or("?").to_string());
        match check(&fixture) {
            Ok(compared) => {
                tensors_compared += compared;
                listed_fixtures += usize::from(fixture.get("tensors").is_some());
                parameters += u128::from(fixture["total"].as_u64().unwrap_or(0));
            }
            Err(problem) => failures.push(format!("  {id}:\n{problem}")),
        }
    }
    println!(
        "compared {} fixtures of {} model_types: totals and tensor counts of all, \
         {tensors_compared} tensors by name and shape in the {listed_fixtures} that list them, \
         {parameters} parameters in all",
        paths.len(),
        model_types.len(),
    );
    assert!(
        failures.is_empty(),
        "{} of {} fixtures differ from transformers:\n{}",
        failures.len(),
        paths.len(),
        failures.join("\n")
    );
}

#[test]
fn encoders_are_measured_for_every_task_and_default_to_masked_lm() {
    let mut tasks: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in fixture_paths() {
        let fixture = read(&path);
        let model_type = fixture["model_type"].as_str().unwrap_or("?").to_string();
        let task = match fixture.get("task").and_then(Value::as_str) {
            Some(task) => task.to_string(),
            None => default_task(&model_type)
                .expect("a supported model_type")
                .to_string(),
        };
        tasks.entry(model_type).or_default().insert(task);
    }
    for encoder in ["bert", "roberta", "deberta-v2", "modernbert"] {
        assert_eq!(
            tasks[encoder],
            BTreeSet::from(
                ["embedding", "masked-lm", "seq-cls:3", "token-cls:5"].map(str::to_string)
            ),
            "{encoder}"
        );
        assert_eq!(default_task(encoder), Some(Task::MaskedLm));
    }
    assert_eq!(default_task("llama"), Some(Task::CausalLm));
    assert_eq!(default_task("not_a_model_type"), None);
}

#[test]
fn encoder_decoders_are_measured_for_their_classes_and_default_to_seq2seq() {
    let mut tasks: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in fixture_paths() {
        let fixture = read(&path);
        if let Some(task) = fixture.get("task").and_then(Value::as_str) {
            let model_type = fixture["model_type"].as_str().unwrap_or("?").to_string();
            tasks
                .entry(model_type)
                .or_default()
                .insert(task.to_string());
        }
    }
    let t5 = &["embedding", "seq-cls:3", "seq2seq", "token-cls:5"][..];
    for (model_type, measured) in [
        ("t5", t5),
        ("mt5", t5),
        ("umt5", t5),
        (
            "bart",
            &[
                "causal-lm",
                "embedding",
                "masked-lm",
                "seq-cls:3",
                "seq2seq",
            ],
        ),
        (
            "whisper",
            &["causal-lm", "embedding", "seq-cls:3", "seq2seq"],
        ),
    ] {
        assert_eq!(
            tasks[model_type],
            measured.iter().map(|task| task.to_string()).collect(),
            "{model_type}"
        );
        assert_eq!(default_task(model_type), Some(Task::Seq2Seq));
    }
}

#[test]
fn vision_encoders_are_measured_for_their_classes_and_default_to_embedding() {
    let mut tasks: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in fixture_paths() {
        let fixture = read(&path);
        if let Some(task) = fixture.get("task").and_then(Value::as_str) {
            let model_type = fixture["model_type"].as_str().unwrap_or("?").to_string();
            tasks
                .entry(model_type)
                .or_default()
                .insert(task.to_string());
        }
    }
    for (model_type, measured) in [
        ("vit", &["embedding", "seq-cls:3"][..]),
        ("clip", &["embedding", "seq-cls:3"]),
        ("siglip", &["embedding", "seq-cls:3"]),
        ("clip_vision_model", &["embedding"]),
        ("clip_text_model", &["embedding"]),
        ("siglip_vision_model", &["embedding"]),
    ] {
        assert_eq!(
            tasks[model_type],
            measured.iter().map(|task| task.to_string()).collect(),
            "{model_type}"
        );
        assert_eq!(default_task(model_type), Some(Task::Embedding));
    }
}

#[test]
fn every_fixture_model_type_is_supported() {
    let supported = supported();
    let missing: BTreeSet<String> = fixture_paths()
        .iter()
        .map(|path| read(path)["model_type"].as_str().unwrap_or("?").to_string())
        .filter(|model_type| !supported.contains(&model_type.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "fixtures of unsupported model_types: {missing:?}"
    );
}

/// The parameters of a fixture's model as trainmem builds it.
fn total_of(config: &Value) -> u128 {
    tensors_for_task(config, None)
        .unwrap()
        .1
        .iter()
        .map(|tensor| u128::from(tensor.shape.dims().iter().product::<u64>()))
        .sum()
}

/// `--image-size` on a vision-language model is the model transformers
/// builds with that `vision_config.image_size`: LLaVA's class defaults (an
/// absent vision_config, CLIP at 336 px) at 224 px, and tiny Gemma 3 and
/// Mllama configs at other sizes, against fixtures measured at those sizes.
#[test]
fn image_size_rebuilds_vision_language_models_as_transformers_does() {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/params");
    for (base, size, measured) in [
        ("llava__defaults", 224, "llava__defaults_at_224"),
        ("gemma3__tiny", 48, "gemma3__tiny_at_48"),
        ("mllama__tiny", 32, "mllama__tiny_at_32"),
    ] {
        let base = read(&folder.join(format!("{base}.json")));
        let resized = with_image_size(&base["config"], size).unwrap();
        let measured = read(&folder.join(format!("{measured}.json")));
        assert_eq!(
            total_of(&resized),
            u128::from(measured["total"].as_u64().unwrap()),
            "{}",
            measured["id"]
        );
        assert_ne!(total_of(&resized), total_of(&base["config"]));
    }
    for model_type in ["llava", "qwen2_vl", "qwen2_5_vl", "gemma3", "mllama"] {
        assert_eq!(
            default_task(model_type),
            Some(Task::CausalLm),
            "{model_type}"
        );
    }
    let qwen = serde_json::json!({"model_type": "qwen2_vl"});
    let refused = with_image_size(&qwen, 448).unwrap_err().to_string();
    assert!(refused.contains("--image-tokens"), "{refused}");
}
