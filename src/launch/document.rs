//! One launch config read from disk into a tree of values, JSON or YAML,
//! within bounds: the file must be a regular file (no FIFO that blocks), at
//! most [`MAX_BYTES`] long, and a YAML document at most [`MAX_DEPTH`] deep
//! with a bounded number of nodes and alias expansions, so that a "billion
//! laughs" is refused before it takes memory.

use std::io::Read;
use std::path::Path;

use serde_json::Value;

use crate::checkpoint::regular_file::open_regular_file;

/// The largest launch config read: real ones are a few kilobytes.
pub const MAX_BYTES: u64 = 1 << 20;
/// The deepest nesting of mappings and sequences accepted.
pub const MAX_DEPTH: usize = 32;
/// The most YAML nodes, aliases and events replayed through aliases.
const MAX_NODES: usize = 100_000;
const MAX_ALIASES: usize = 1_000;
const MAX_REPLAYED_EVENTS: usize = 100_000;

/// The file's text, refused unless it is a regular file of at most [`MAX_BYTES`].
pub fn read_text(path: &Path) -> Result<String, String> {
    let (file, length) = open_regular_file(path)?;
    if length > MAX_BYTES {
        return Err(format!(
            "{length} bytes, more than the {MAX_BYTES} a launch config may have"
        ));
    }
    let mut bytes = Vec::new();
    // One byte more than allowed tells a file that grew after the check.
    file.take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(format!(
            "more than the {MAX_BYTES} bytes a launch config may have"
        ));
    }
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text; expected a JSON or YAML file".to_string())
}

/// The document in `text`: JSON when the file name ends in `.json`, YAML
/// otherwise (YAML 1.2 reads JSON too). The top level must be a mapping.
pub fn parse(text: &str, path: &Path) -> Result<Value, String> {
    let json = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    let value = if json {
        parse_json(text)?
    } else {
        parse_yaml(text)?
    };
    if depth(&value) > MAX_DEPTH {
        return Err(format!("nested deeper than {MAX_DEPTH} levels"));
    }
    match value {
        Value::Object(_) => Ok(value),
        _ => Err("the top level is not a mapping of keys to values".to_string()),
    }
}

fn parse_json(text: &str) -> Result<Value, String> {
    // serde_json stops at 128 levels of nesting by itself.
    serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))
}

fn parse_yaml(text: &str) -> Result<Value, String> {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_depth = MAX_DEPTH;
    budget.max_nodes = MAX_NODES;
    budget.max_aliases = MAX_ALIASES;
    budget.max_anchors = MAX_ALIASES;
    budget.max_documents = 1;
    let mut aliases = serde_saphyr::options::AliasLimits::default();
    aliases.max_total_replayed_events = MAX_REPLAYED_EVENTS;
    aliases.max_replay_stack_depth = MAX_DEPTH;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options.alias_limits = aliases;
    options.with_snippet = false;
    options.emit_comments = false;
    // YAML 1.2 booleans, as in JSON: `y`, `no` and `on` stay strings (PyYAML,
    // which the launchers use, does not read `y` as true either); the key
    // tables accept `yes`/`no` where a switch is expected.
    options.strict_booleans = true;
    let value: Value = serde_saphyr::from_str_with_options(text, options).map_err(|e| {
        let message = e.to_string();
        let first = message.lines().next().unwrap_or("").trim().to_string();
        format!("invalid YAML: {first}")
    })?;
    Ok(value)
}

/// How deeply `value` nests, counted without recursion.
fn depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 1)];
    while let Some((value, level)) = stack.pop() {
        deepest = deepest.max(level);
        match value {
            Value::Array(items) => stack.extend(items.iter().map(|v| (v, level + 1))),
            Value::Object(map) => stack.extend(map.values().map(|v| (v, level + 1))),
            _ => {}
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_billion_laughs_is_refused() {
        let mut text = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
        for level in 1..10 {
            let previous = level - 1;
            text += &format!(
                "a{level}: &a{level} [*a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}]\n"
            );
        }
        let error = parse(&text, Path::new("laughs.yaml")).unwrap_err();
        assert!(error.starts_with("invalid YAML"), "{error}");
        assert!(!error.contains('\n'));
    }

    #[test]
    fn deep_nesting_is_refused() {
        let text = format!("a: {}1{}", "[".repeat(200), "]".repeat(200));
        assert!(parse(&text, Path::new("deep.yaml")).is_err());
        let json = format!("{{\"a\": {}1{}}}", "[".repeat(100), "]".repeat(100));
        assert!(parse(&json, Path::new("deep.json")).is_err());
    }

    #[test]
    fn json_and_yaml_read_alike() {
        let yaml = parse("a: 1\nb: [x, y]\nc: {d: true}\n", Path::new("c.yaml")).unwrap();
        let no = parse("downcast_bf16: no\n", Path::new("a.yaml")).unwrap();
        assert_eq!(no["downcast_bf16"], "no");
        let json = parse(
            r#"{"a": 1, "b": ["x", "y"], "c": {"d": true}}"#,
            Path::new("c.json"),
        )
        .unwrap();
        assert_eq!(yaml, json);
    }
}
