//! One launch config read from disk into a tree of values, JSON, YAML or
//! TOML, within bounds: the file must be a regular file (no FIFO that
//! blocks), at most [`MAX_BYTES`] long, and a document at most
//! [`MAX_DEPTH`] deep with a bounded number of nodes (and, in YAML, of
//! alias expansions, so that a "billion laughs" is refused before it takes
//! memory).

use std::io::Read;
use std::path::Path;

use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::checkpoint::regular_file::open_regular_file;

/// The largest launch config read: real ones are a few kilobytes.
pub const MAX_BYTES: u64 = 1 << 20;
/// The deepest nesting of mappings and sequences accepted.
pub const MAX_DEPTH: usize = 32;
/// The most YAML nodes, aliases and events replayed through aliases.
const MAX_NODES: usize = 100_000;
const MAX_ALIASES: usize = 1_000;
const MAX_REPLAYED_EVENTS: usize = 100_000;

/// The refusal of a file that is not text.
pub const NOT_UTF8: &str = "not UTF-8 text; expected a JSON, YAML or TOML file";

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
    String::from_utf8(bytes).map_err(|_| NOT_UTF8.to_string())
}

/// A document read: its tree of values, and the dotted path of every key
/// of its mappings (not those inside lists) in the order the file writes
/// them, parents before their children. The tree's mappings are sorted;
/// the order is what the report follows, recorded while parsing so that
/// putting `n` keys in order costs `n` look-ups, not a search of the text
/// for each.
#[derive(Debug)]
pub struct Parsed {
    pub value: Value,
    pub order: Vec<String>,
}

/// The document in `text`: JSON when the file name ends in `.json`, TOML
/// when it ends in `.toml`, YAML otherwise (YAML 1.2 reads JSON too), or
/// TOML when it is not YAML but is TOML (a torchtitan job config under
/// another name). The top level must be a mapping, and no mapping may give
/// a key twice (YAML and JSON alike: Python's `json` would keep the last,
/// DeepSpeed refuses it, and a key written twice is a config whose author
/// meant one of two values; TOML forbids it).
pub fn parse(text: &str, path: &Path) -> Result<Parsed, String> {
    let extension = |wanted: &str| {
        path.extension()
            .is_some_and(|e| e.eq_ignore_ascii_case(wanted))
    };
    let parsed = if extension("json") {
        parse_json(text)?
    } else if extension("toml") {
        parse_toml(text)?
    } else {
        match parse_yaml(text) {
            Ok(parsed) if parsed.value.is_object() => parsed,
            yaml => match parse_toml(text) {
                Ok(parsed) => parsed,
                Err(_) => yaml?,
            },
        }
    };
    bounded(parsed)
}

/// A file another config names as its DeepSpeed config, read as DeepSpeed
/// reads it (`json.load` in `deepspeed/runtime/config.py`, which refuses a
/// key given twice), whatever its name. Nothing of its text is put in the
/// error: only where the JSON stops being valid, by line and column.
pub fn parse_companion(text: &str) -> Result<Parsed, String> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let parsed = Ordered::read(&mut deserializer)
        .and_then(|parsed| deserializer.end().map(|()| parsed))
        .map_err(|e| {
            let what = if e.to_string().starts_with(DUPLICATE) {
                "a key is written twice"
            } else {
                match e.classify() {
                    serde_json::error::Category::Eof => "not valid JSON: it ends early",
                    serde_json::error::Category::Io => "cannot be read",
                    _ => "not valid JSON",
                }
            };
            format!("{what} (line {}, column {})", e.line(), e.column())
        })?;
    bounded(parsed).map_err(|problem| match problem.as_str() {
        TOP_LEVEL => "the top level is not a JSON object".to_string(),
        _ => problem,
    })
}

/// `parsed`, unless too deep or not a mapping at the top.
fn bounded(parsed: Parsed) -> Result<Parsed, String> {
    if depth(&parsed.value) > MAX_DEPTH {
        return Err(format!("nested deeper than {MAX_DEPTH} levels"));
    }
    match parsed.value {
        Value::Object(_) => Ok(parsed),
        _ => Err(TOP_LEVEL.to_string()),
    }
}

const TOP_LEVEL: &str = "the top level is not a mapping of keys to values";

fn parse_json(text: &str) -> Result<Parsed, String> {
    // serde_json stops at 128 levels of nesting by itself.
    let mut deserializer = serde_json::Deserializer::from_str(text);
    Ordered::read(&mut deserializer)
        .and_then(|parsed| deserializer.end().map(|()| parsed))
        .map_err(|e| format!("invalid JSON: {}", shown_message(&e.to_string())))
}

fn parse_yaml(text: &str) -> Result<Parsed, String> {
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
    // Keys given twice are refused by [`Ordered`], which names the whole
    // dotted key; the library's own refusal speaks of its options.
    options.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::LastWins;
    // YAML 1.2 booleans, as in JSON: `y`, `no` and `on` stay strings (PyYAML,
    // which the launchers use, does not read `y` as true either); the key
    // tables accept `yes`/`no` where a switch is expected.
    options.strict_booleans = true;
    serde_saphyr::from_str_with_options::<Ordered>(text, options)
        .map(|Ordered(parsed)| parsed)
        .map_err(|e| {
            let message = e.to_string();
            let first = message.lines().next().unwrap_or("").trim();
            format!("invalid YAML: {}", shown_message(first))
        })
}

/// A TOML document (torchtitan's job configs), read by the toml crate,
/// which refuses a key given twice and nests at most 80 levels before
/// [`bounded`] holds it to [`MAX_DEPTH`]; at most [`MAX_NODES`] values.
/// Datetimes become their text. A refusal says where the parse stopped, by
/// line and column, and the parser's message without the quoted text.
fn parse_toml(text: &str) -> Result<Parsed, String> {
    let refused = |e: toml::de::Error| {
        let at = e
            .span()
            .map(|span| {
                let before = text.get(..span.start).unwrap_or(text);
                let line = before.matches('\n').count().saturating_add(1);
                let column = before
                    .rsplit('\n')
                    .next()
                    .unwrap_or("")
                    .chars()
                    .count()
                    .saturating_add(1);
                format!(" (line {line}, column {column})")
            })
            .unwrap_or_default();
        let message = e.message().lines().next().unwrap_or("").trim();
        format!("invalid TOML: {}{at}", shown_message(message))
    };
    let deserializer = toml::de::Deserializer::parse(text).map_err(refused)?;
    let parsed = Ordered::read(deserializer).map_err(refused)?;
    if nodes(&parsed.value) > MAX_NODES {
        return Err(format!("more than {MAX_NODES} values"));
    }
    Ok(parsed)
}

/// How many values `value` holds, itself included, counted without recursion.
fn nodes(value: &Value) -> usize {
    let mut count = 0usize;
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        count = count.saturating_add(1);
        match value {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.values()),
            _ => {}
        }
    }
    count
}

/// The key under which the toml crate hands a datetime to a visitor.
const TOML_DATETIME: &str = "$__toml_private_datetime";

/// A parser's message, which may quote the text it stopped at, cut to a
/// bounded length (a million-digit scalar is not repeated in an error).
fn shown_message(message: &str) -> String {
    crate::error::cut(message, MAX_MESSAGE_CHARS).into_owned()
}

/// The longest parser message said: room for its words and a cut value.
const MAX_MESSAGE_CHARS: usize = 200;

/// The start of the message of a key given twice.
const DUPLICATE: &str = "key `";

/// A float as serde_json's own tree holds it: one that is not finite is null.
fn float(value: f64) -> Value {
    serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number)
}

/// A document and the order of its keys, deserialized in one pass.
struct Ordered(Parsed);

impl<'de> Deserialize<'de> for Ordered {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Ordered, D::Error> {
        let mut order = Vec::new();
        let value = Node {
            path: Some(String::new()),
            order: &mut order,
        }
        .deserialize(deserializer)?;
        Ok(Ordered(Parsed { value, order }))
    }
}

impl Ordered {
    fn read<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Parsed, D::Error> {
        <Ordered as Deserialize>::deserialize(deserializer).map(|Ordered(parsed)| parsed)
    }
}

/// One value of the tree, at `path` (`None` inside a list: keys there are
/// not recorded), its keys pushed onto `order` as they are met.
struct Node<'a> {
    path: Option<String>,
    order: &'a mut Vec<String>,
}

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = Value;

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("a JSON, YAML or TOML value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_i128<E>(self, value: i128) -> Result<Value, E> {
        Ok(match (i64::try_from(value), u64::try_from(value)) {
            (Ok(small), _) => Value::from(small),
            (_, Ok(large)) => Value::from(large),
            // As serde_json reads a number beyond 64 bits: a float.
            _ => float(value as f64),
        })
    }

    fn visit_u128<E>(self, value: u128) -> Result<Value, E> {
        Ok(match u64::try_from(value) {
            Ok(small) => Value::from(small),
            _ => float(value as f64),
        })
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        Ok(float(value))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_string()))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Node {
            path: None,
            order: &mut *self.order,
        })? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            if key == TOML_DATETIME && map.is_empty() {
                return Ok(Value::String(access.next_value::<String>()?));
            }
            let path = self.path.as_ref().map(|prefix| {
                if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                }
            });
            if map.contains_key(&key) {
                let named = path.as_deref().unwrap_or(&key);
                return Err(A::Error::custom(format!(
                    "{DUPLICATE}{}` is written twice (each key may be given once)",
                    crate::error::shown(named)
                )));
            }
            if let Some(path) = &path {
                self.order.push(path.clone());
            }
            let value = access.next_value_seed(Node {
                path,
                order: &mut *self.order,
            })?;
            map.insert(key, value);
        }
        Ok(Value::Object(map))
    }
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
    fn toml_reads_as_json_does_in_the_files_order() {
        let toml = parse(
            "b = 1\n[a]\nz = [\"x\", \"y\"]\nc = { d = true }\nwhen = 1979-05-27T07:32:00Z\n",
            Path::new("job.toml"),
        )
        .unwrap();
        assert_eq!(toml.order, ["b", "a", "a.z", "a.c", "a.c.d", "a.when"]);
        assert_eq!(toml.value["a"]["z"][1], "y");
        assert_eq!(toml.value["a"]["c"]["d"], true);
        assert_eq!(toml.value["a"]["when"], "1979-05-27T07:32:00Z");
        // Not YAML, but TOML, under another name.
        let other = parse("[training]\nseq_len = 8\n", Path::new("job.conf")).unwrap();
        assert_eq!(other.value["training"]["seq_len"], 8);
    }

    #[test]
    fn toml_refusals_say_where_and_not_what() {
        let twice = parse("[a]\nb = 1\nb = 2\n", Path::new("t.toml")).unwrap_err();
        assert!(twice.starts_with("invalid TOML"), "{twice}");
        assert!(twice.contains("line 3"), "{twice}");
        let deep = format!("a = {}1{}\n", "[".repeat(200), "]".repeat(200));
        let error = parse(&deep, Path::new("deep.toml")).unwrap_err();
        assert!(!error.contains('\n'), "{error}");
        let shallow = format!("a = {}1{}\n", "[".repeat(40), "]".repeat(40));
        assert!(parse(&shallow, Path::new("deep.toml")).is_err());
        let long = format!("a = \"{}", "x".repeat(10_000));
        let error = parse(&long, Path::new("long.toml")).unwrap_err();
        assert!(error.len() < 400, "{error}");
    }

    #[test]
    fn json_and_yaml_read_alike() {
        let yaml = parse("a: 1\nb: [x, y]\nc: {d: true}\n", Path::new("c.yaml"))
            .unwrap()
            .value;
        let no = parse("downcast_bf16: no\n", Path::new("a.yaml"))
            .unwrap()
            .value;
        assert_eq!(no["downcast_bf16"], "no");
        let json = parse(
            r#"{"a": 1, "b": ["x", "y"], "c": {"d": true}}"#,
            Path::new("c.json"),
        )
        .unwrap()
        .value;
        assert_eq!(yaml, json);
    }
}
