//! Every optimizer rule against one real `step()` of its reference
//! implementation, to the byte.
//!
//! The fixtures in `tests/fixtures/optimizers/` were written by
//! `tools/measure_optimizers.py`: ten parameter tensors (vectors, matrices,
//! a 3-D stack, a conv kernel, ...) in fp32 and in bf16, one `step()`, and
//! every tensor the optimizer then holds. For each fixture this test builds
//! the same tensors (same names, shapes; the parameter dtype as the state
//! dtype), runs trainmem's rule with the fixture's options, and checks the
//! total bytes (host counters and optimizer-wide state included) and the
//! bytes of every (parameter, key).
//!
//! Reading the fixtures: a record that aliases an earlier one (`alias_of`)
//! pins no memory of its own; a record with `storage_bytes` pins its whole
//! storage; a storage shared by several parameters' records (LAMB's stacked
//! norms) is optimizer-wide and compared with the rule's global state.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use serde_json::Value;
use trainmem::optimizer::{GlobalContext, OPTIMIZERS, Optimizer, Options};
use trainmem::{Count, DType, Role, Shape, Tensor};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/optimizers");

/// The key of optimizer-wide state (the fixture's `"param": null`).
const GLOBAL: &str = "<global>";

/// Fixture options that trainmem takes no option for, and why they do not
/// change the state (or why the fixture's value is the one trainmem models).
const IGNORED_OPTIONS: &[(&str, &str, &str)] = &[
    (
        "sgd-nesterov",
        "nesterov",
        "Nesterov keeps SGD's momentum_buffer; the name carries it",
    ),
    (
        "adam-amsgrad",
        "amsgrad",
        "the name carries it: adam-amsgrad always keeps max_exp_avg_sq",
    ),
    (
        "adafactor-hf",
        "relative_step",
        "changes the learning rate, not the state",
    ),
    (
        "galore-adamw",
        "update_proj_gap",
        "how often the projection is recomputed, not its size",
    ),
    ("galore-adamw", "scale", "a factor of the update"),
    (
        "galore-adamw",
        "proj_type",
        "`std`, the projection trainmem models",
    ),
    (
        "shampoo",
        "preconditioning_compute_steps",
        "postpones the first inverse root; every buffer is allocated at initialisation",
    ),
    ("soap", "lr", "a hyperparameter of the update"),
    ("soap", "betas", "a hyperparameter of the update"),
    ("soap", "shampoo_beta", "a hyperparameter of the update"),
    ("soap", "eps", "a hyperparameter of the update"),
    ("soap", "weight_decay", "a hyperparameter of the update"),
    (
        "soap",
        "precondition_frequency",
        "how often Q is refreshed, not its size",
    ),
    ("soap", "normalize_grads", "a hyperparameter of the update"),
    ("soap", "correct_bias", "a hyperparameter of the update"),
    ("soap", "warmup_steps", "a hyperparameter of the update"),
    (
        "soap",
        "merge_dims",
        "false, the only setting trainmem models",
    ),
    ("adamw-8bit", "optim_bits", "8 for every 8-bit class"),
    (
        "adamw-8bit",
        "block_size",
        "hard-coded 256 in bitsandbytes 0.50 (BNB_BLOCK)",
    ),
    (
        "adamw-8bit",
        "percentile_clipping",
        "keeps no state in bitsandbytes 0.50",
    ),
    ("paged-adamw-8bit", "optim_bits", "8 for every 8-bit class"),
    (
        "paged-adamw-8bit",
        "block_size",
        "hard-coded 256 in bitsandbytes 0.50 (BNB_BLOCK)",
    ),
    (
        "paged-adamw-8bit",
        "percentile_clipping",
        "keeps no state in bitsandbytes 0.50",
    ),
    (
        "paged-adamw",
        "optim_bits",
        "32: the name carries it (paged-adamw-8bit is the 8-bit one)",
    ),
    (
        "paged-adamw",
        "is_paged",
        "where the states live, not their bytes",
    ),
    (
        "galore-adamw-8bit",
        "update_proj_gap",
        "how often the projection is recomputed, not its size",
    ),
    ("galore-adamw-8bit", "scale", "a factor of the update"),
    (
        "galore-adamw-8bit",
        "proj_type",
        "`std`, the projection trainmem models",
    ),
    ("galore-adamw-8bit", "optim_bits", "8 for every 8-bit class"),
    (
        "galore-adamw-8bit",
        "block_size",
        "hard-coded 256 in bitsandbytes 0.50 (BNB_BLOCK)",
    ),
    ("lion-8bit", "optim_bits", "8 for every 8-bit class"),
    (
        "lion-8bit",
        "block_size",
        "hard-coded 256 in bitsandbytes 0.50 (BNB_BLOCK)",
    ),
    (
        "lion-8bit",
        "percentile_clipping",
        "keeps no state in bitsandbytes 0.50",
    ),
    (
        "adamw-4bit",
        "min_quant_numel",
        "hard-coded 4096 in torchao 0.18 (TORCHAO_MIN_QUANT_NUMEL)",
    ),
    (
        "adamw-fp8",
        "min_quant_numel",
        "hard-coded 4096 in torchao 0.18 (TORCHAO_MIN_QUANT_NUMEL)",
    ),
];

/// Options a variant implies beyond the fixture's `options`, and why.
const VARIANT_OPTIONS: &[(&str, &str, &str, &str)] = &[(
    "soap",
    "reference",
    "fp32_states=true",
    "the reference SOAP (nikhilvyas/SOAP) keeps every state in fp32",
)];

/// Fixtures whose totals match but whose keys differ, and why.
const KEY_EXCEPTIONS: &[(&str, &str)] = &[
    (
        "lbfgs__bf16",
        "the bf16 run stopped after one inner iteration with no curvature pair: `t` is still a 0-d \
         tensor and `H_diag` the int 1; in the steady state trainmem prices, `H_diag` is the 0-d \
         tensor and `t` a python float (2 bytes either way)",
    ),
    ("lbfgs_history10__bf16", "as lbfgs__bf16"),
];

/// One fixture file, read.
struct Fixture {
    stem: String,
    json: Value,
}

impl Fixture {
    fn str(&self, key: &str) -> &str {
        self.json[key]
            .as_str()
            .unwrap_or_else(|| panic!("{}: `{key}` is not a string", self.stem))
    }

    fn records(&self) -> impl Iterator<Item = &Value> {
        ["state", "global_state"]
            .into_iter()
            .flat_map(|key| self.json[key].as_array().into_iter().flatten())
    }
}

fn fixtures() -> Vec<Fixture> {
    let mut fixtures: Vec<Fixture> = fs::read_dir(Path::new(FIXTURES))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .map(|path| Fixture {
            stem: path.file_stem().unwrap().to_string_lossy().into_owned(),
            json: serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap(),
        })
        .collect();
    fixtures.sort_by(|a, b| a.stem.cmp(&b.stem));
    fixtures
}

/// An option value as `--optimizer-option` takes it.
fn option_text(value: &Value) -> String {
    match value {
        Value::Null => "none".to_string(),
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// The `KEY=VALUE` pairs for a fixture, or why one cannot be mapped.
fn option_pairs(fixture: &Fixture, optimizer: &Optimizer) -> Result<Vec<String>, String> {
    let mut pairs = Vec::new();
    let options = fixture.json["options"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for (key, value) in &options {
        if optimizer.options.iter().any(|o| o.key == key) {
            pairs.push(format!("{key}={}", option_text(value)));
        } else if !IGNORED_OPTIONS
            .iter()
            .any(|(name, k, _)| *name == optimizer.name && k == key)
        {
            return Err(format!(
                "fixture option `{key}` is neither a {} option nor listed in IGNORED_OPTIONS",
                optimizer.name
            ));
        }
    }
    let variant = fixture.json["variant"].as_str().unwrap_or_default();
    for (name, v, pair, _) in VARIANT_OPTIONS {
        if *name == optimizer.name && *v == variant {
            pairs.push(pair.to_string());
        }
    }
    if optimizer.name == "lbfgs" {
        // trainmem prices the full history (the steady state); the fixture
        // holds the state after one step(), so price the pairs it observed.
        pairs.retain(|p| !p.starts_with("history_size="));
        pairs.push(format!("history_size={}", observed_lbfgs_pairs(fixture)));
    }
    Ok(pairs)
}

/// How many (s, y) pairs the L-BFGS fixture holds after its one step().
fn observed_lbfgs_pairs(fixture: &Fixture) -> usize {
    fixture
        .records()
        .filter(|r| {
            r["key"]
                .as_str()
                .is_some_and(|k| k.starts_with("old_dirs["))
                && r.get("shape").is_some()
        })
        .count()
}

/// The fixture's parameter tensors, keyed by the names its records use.
fn tensors(fixture: &Fixture) -> Vec<(String, Tensor)> {
    let renamed = fixture.json.get("adam_mini_names");
    fixture.json["params"]
        .as_array()
        .unwrap()
        .iter()
        .map(|param| {
            let name = param["name"].as_str().unwrap().to_string();
            let dims: Vec<u64> = param["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap())
                .collect();
            // Adam-mini's transformer-names variant ran under other names.
            let run_as = renamed
                .and_then(|r| r[&name].as_str())
                .unwrap_or(&name)
                .to_string();
            let role = Role::from_name(&run_as);
            (name, Tensor::new(run_as, Shape::new(dims).unwrap(), role))
        })
        .collect()
}

type Bytes = BTreeMap<(String, String), u64>;

/// The memory each (parameter, key) of the fixture pins.
fn expected(fixture: &Fixture) -> Bytes {
    let label = |r: &Value| match r["param"].as_str() {
        Some(param) => format!("{param}/{}", r["key"].as_str().unwrap()),
        None => r["key"].as_str().unwrap().to_string(),
    };
    let aliased: BTreeSet<String> = fixture
        .records()
        .filter_map(|r| {
            r.get("alias_of")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .collect();
    let mut bytes = Bytes::new();
    for record in fixture
        .records()
        .filter(|r| r.get("shape").is_some() && r.get("alias_of").is_none())
    {
        let storage = record.get("storage_bytes").and_then(Value::as_u64);
        let shared = storage.is_some() && aliased.contains(&label(record));
        let param = match record["param"].as_str() {
            Some(param) if !shared => param.to_string(),
            _ => GLOBAL.to_string(),
        };
        let size = storage.unwrap_or_else(|| record["bytes"].as_u64().unwrap());
        *bytes
            .entry((param, record["key"].as_str().unwrap().to_string()))
            .or_default() += size;
    }
    bytes
}

/// What trainmem's rule gives for the fixture's tensors.
fn actual(
    optimizer: &Optimizer,
    tensors: &[(String, Tensor)],
    dtype: DType,
    options: &Options,
) -> Bytes {
    let size =
        |s: &trainmem::optimizer::StateTensor| s.dtype.size_of(s.shape.elements()).unwrap().0;
    let mut bytes = Bytes::new();
    for (name, tensor) in tensors {
        for state in optimizer.states(tensor, dtype, options).unwrap() {
            *bytes
                .entry((name.clone(), state.name.to_string()))
                .or_default() += size(&state);
        }
    }
    let elements: u64 = tensors.iter().map(|(_, t)| t.shape.elements().0).sum();
    let largest = tensors
        .iter()
        .map(|(_, t)| t.shape.elements().0)
        .max()
        .unwrap_or(0);
    let context = GlobalContext {
        elements: Count(elements),
        largest: Count(largest),
        tensors: tensors.len(),
        dtype,
        options,
    };
    for state in optimizer.global_states(&context).unwrap() {
        *bytes
            .entry((GLOBAL.to_string(), state.name.to_string()))
            .or_default() += size(&state);
    }
    bytes
}

/// The differences between two byte maps, one line each.
fn differences(expected: &Bytes, actual: &Bytes) -> Vec<String> {
    let keys: BTreeSet<&(String, String)> = expected.keys().chain(actual.keys()).collect();
    keys.into_iter()
        .filter_map(|key| match (expected.get(key), actual.get(key)) {
            (Some(e), Some(a)) if e == a => None,
            (e, a) => Some(format!(
                "    {}.{}: fixture {}, trainmem {}",
                key.0,
                key.1,
                e.map_or("-".to_string(), u64::to_string),
                a.map_or("-".to_string(), u64::to_string)
            )),
        })
        .collect()
}

/// Checks one fixture; the failures, if any, as lines.
fn check(fixture: &Fixture) -> Vec<String> {
    let name = fixture.str("optimizer");
    let Ok(optimizer) = Optimizer::find(name) else {
        return vec![format!("{}: no trainmem optimizer `{name}`", fixture.stem)];
    };
    let pairs = match option_pairs(fixture, optimizer) {
        Ok(pairs) => pairs,
        Err(problem) => return vec![format!("{}: {problem}", fixture.stem)],
    };
    let options = Options::resolve(optimizer, &pairs).unwrap();
    let dtype = DType::from_name(fixture.str("param_dtype")).unwrap();
    let expected = expected(fixture);
    let actual = actual(optimizer, &tensors(fixture), dtype, &options);
    let total = fixture.json["total_bytes"].as_u64().unwrap();
    let mut failures = Vec::new();
    let fixture_sum: u64 = expected.values().sum();
    assert_eq!(
        fixture_sum, total,
        "{}: the records do not add up to total_bytes",
        fixture.stem
    );
    let actual_total: u64 = actual.values().sum();
    if actual_total != total {
        failures.push(format!(
            "{} ({} {pairs:?}): total_bytes {total}, trainmem {actual_total} ({:+})",
            fixture.stem,
            optimizer.name,
            i128::from(actual_total) - i128::from(total)
        ));
    }
    let keys_differ = differences(&expected, &actual);
    let excused = KEY_EXCEPTIONS.iter().any(|(stem, _)| *stem == fixture.stem);
    if !keys_differ.is_empty() && !excused {
        failures.push(format!(
            "{}: per-key bytes differ:\n{}",
            fixture.stem,
            keys_differ.join("\n")
        ));
    }
    failures
}

#[test]
fn every_fixture_matches_its_rule_to_the_byte() {
    let fixtures = fixtures();
    assert_eq!(
        fixtures.len(),
        90,
        "the fixture set changed: update this test"
    );
    let failures: Vec<String> = fixtures.iter().flat_map(check).collect();
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_optimizer_has_a_fixture() {
    let measured: BTreeSet<String> = fixtures()
        .iter()
        .map(|f| f.str("optimizer").to_string())
        .collect();
    let missing: Vec<&str> = OPTIMIZERS
        .iter()
        .map(|o| o.name)
        .filter(|n| !measured.contains(*n))
        .collect();
    assert!(
        missing.is_empty(),
        "optimizers without a fixture: {missing:?}"
    );
}

/// trainmem prices L-BFGS's full history; the fixtures' notes record the
/// bytes of old_dirs + old_stps once the history is full (a separate run).
#[test]
fn lbfgs_prices_the_steady_state_history() {
    for fixture in fixtures().iter().filter(|f| f.str("optimizer") == "lbfgs") {
        let notes = fixture.str("notes");
        let steady: u64 = notes
            .split("old_dirs + old_stps then take ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{}: no steady-state figure in the notes", fixture.stem));
        let optimizer = Optimizer::find("lbfgs").unwrap();
        let history = option_text(&fixture.json["options"]["history_size"]);
        let options = Options::resolve(optimizer, &[format!("history_size={history}")]).unwrap();
        let dtype = DType::from_name(fixture.str("param_dtype")).unwrap();
        let bytes = actual(optimizer, &tensors(fixture), dtype, &options);
        let history_bytes: u64 = bytes
            .iter()
            .filter(|((_, key), _)| key.starts_with("old_dirs[") || key.starts_with("old_stps["))
            .map(|(_, b)| b)
            .sum();
        assert_eq!(history_bytes, steady, "{}", fixture.stem);
    }
}

/// The lists of exceptions name only fixtures and options that exist.
#[test]
fn exception_lists_are_current() {
    let fixtures = fixtures();
    for (stem, _) in KEY_EXCEPTIONS {
        assert!(
            fixtures.iter().any(|f| f.stem == *stem),
            "KEY_EXCEPTIONS names `{stem}`"
        );
    }
    for (name, key, _) in IGNORED_OPTIONS {
        assert!(
            fixtures
                .iter()
                .any(|f| f.str("optimizer") == *name && f.json["options"].get(key).is_some()),
            "IGNORED_OPTIONS names `{name}` `{key}`, which no fixture sets"
        );
    }
}
