//! Typed, checked access to the keys of a config.json.
//!
//! Every value is untrusted: a size must be a whole number no larger than
//! [`MAX_SIZE`], a flag must be `true`, `false` or `null`. A key that is
//! absent takes the default of the transformers config class, which each
//! architecture passes in; the architecture files name where it comes from.

use std::cell::RefCell;

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::model::DefaultedKey;

/// The largest size accepted for any single config value (a dimension, a
/// count of heads, layers or experts): 2^32 - 1. No real model comes near it,
/// and the product of two such sizes still fits in 64 bits.
pub const MAX_SIZE: u64 = u32::MAX as u64;

/// The most routed experts a mixture-of-experts layer may have. Switch-C
/// has 2,048, the most of any released model; DeepSeek-V3 256, Kimi K2 384.
/// Experts are fused into two tensors, so nothing walks them one by one;
/// the cap refuses nonsense early and keeps products with the expert count
/// (LoRA's rank x experts adapters, the router) small.
pub const MAX_EXPERTS: u64 = 16_384;

/// The key of the routed experts each token passes through.
const TOP_K: &str = "num_experts_per_tok";

/// How much of an offending value an error message quotes.
const QUOTED_CHARACTERS: usize = 40;

thread_local! {
    /// The keys read while [`recording_defaults`] runs that the file lacked,
    /// with the default each took; `None` when nothing records.
    static DEFAULTED: RefCell<Option<Vec<DefaultedKey>>> = const { RefCell::new(None) };
}

/// Runs `read` (an architecture laying out a config.json) and returns, with
/// its answer, every key it asked for that the file lacks and the default
/// taken, in the order first asked, each once. A truncated file (only
/// `hidden_size` and `num_hidden_layers`) still builds a model from the
/// config class's defaults, as transformers does; this says which.
/// Recording is per thread; a nested call records for the outer one.
pub fn recording_defaults<T>(read: impl FnOnce() -> T) -> (T, Vec<DefaultedKey>) {
    let outer = DEFAULTED.with(|cell| cell.borrow_mut().replace(Vec::new()));
    let answer = read();
    let mine = DEFAULTED.with(|cell| {
        let mut slot = cell.borrow_mut();
        let mine = slot.take().unwrap_or_default();
        if let Some(mut outer) = outer {
            for key in &mine {
                if !outer.iter().any(|k| k.key == key.key) {
                    outer.push(key.clone());
                }
            }
            *slot = Some(outer);
        }
        mine
    });
    (answer, mine)
}

/// Notes that `key` was absent and took `default` (as transformers spells
/// it: `4096`, `false`, `none`), if something records.
fn defaulted(key: &str, default: impl std::fmt::Display) {
    DEFAULTED.with(|cell| {
        if let Some(keys) = cell.borrow_mut().as_mut()
            && !keys.iter().any(|k| k.key == key)
        {
            keys.push(DefaultedKey {
                key: key.to_string(),
                default: default.to_string(),
            });
        }
    });
}

/// An optional default as a config class writes it: the value, or `none`.
fn optional<T: std::fmt::Display>(default: Option<T>) -> String {
    default.map_or_else(|| "none".to_string(), |value| value.to_string())
}

/// A config.json object, read key by key.
pub struct Config<'a> {
    keys: &'a Map<String, Value>,
}

impl<'a> Config<'a> {
    /// The config.json content; it must be a JSON object.
    pub fn new(value: &'a Value) -> Result<Config<'a>> {
        match value {
            Value::Object(keys) => Ok(Config { keys }),
            other => Err(Error::InvalidConfig {
                key: "model_type".to_string(),
                problem: format!(
                    "the file holds {} instead of an object; accepted: an object such as {{\"model_type\": \"llama\", ...}}",
                    describe(other)
                ),
            }),
        }
    }

    /// The `model_type` string, if the file has one; any other JSON value
    /// there (`7`, `null`, a list) is refused by name rather than taken for
    /// an empty type.
    pub fn model_type(&self) -> Result<Option<&'a str>> {
        match self.keys.get("model_type") {
            None => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.as_str())),
            Some(other) => Err(Error::InvalidConfig {
                key: "model_type".to_string(),
                problem: format!(
                    "must be a string, got {} ({}); accepted: a model_type such as `\"llama\"`",
                    quote(other),
                    describe(other)
                ),
            }),
        }
    }

    /// The value of `key` as the file holds it, if present: a sub-config
    /// taken whole, to be read as its own config.
    pub fn raw(&self, key: &str) -> Option<&'a Value> {
        self.keys.get(key)
    }

    /// Every key of the object: a composite config whose text model reads
    /// its keys from the top level (Qwen2-VL's published files).
    pub fn to_value(&self) -> Value {
        Value::Object(self.keys.clone())
    }

    /// A size that the config class declares as `int = default`: absent takes
    /// `default`; `null` is refused like any other non-number.
    pub fn size(&self, key: &str, default: u64) -> Result<u64> {
        match self.keys.get(key) {
            None => {
                defaulted(key, default);
                Ok(default)
            }
            Some(value) => size_value(key, value),
        }
    }

    /// A size that the config class declares as `int | None = default`:
    /// absent takes `default`, `null` is `None`.
    pub fn optional_size(&self, key: &str, default: Option<u64>) -> Result<Option<u64>> {
        match self.keys.get(key) {
            None => {
                defaulted(key, optional(default));
                Ok(default)
            }
            Some(Value::Null) => Ok(None),
            Some(value) => size_value(key, value).map(Some),
        }
    }

    /// A size known under several keys (transformers' `attribute_map`
    /// aliases, legacy names): the first key present in the file wins, so
    /// list them in the order transformers lets them override each other.
    pub fn size_of_first(&self, keys: &[&str], default: u64) -> Result<u64> {
        match keys
            .iter()
            .find_map(|key| self.keys.get(*key).map(|value| (*key, value)))
        {
            None => {
                defaulted(keys.first().copied().unwrap_or_default(), default);
                Ok(default)
            }
            Some((key, value)) => size_value(key, value),
        }
    }

    /// `head_dim` when the file gives one, else `hidden_size /
    /// num_attention_heads` rounded down: transformers' attention classes
    /// read `getattr(config, "head_dim", hidden_size // num_attention_heads)`
    /// for config classes that do not declare `head_dim` themselves.
    pub fn head_dim_or_ratio(&self, hidden: u64, heads: u64, heads_key: &str) -> Result<u64> {
        match self.optional_size("head_dim", None)? {
            Some(head_dim) => Ok(head_dim),
            None => ratio(hidden, heads, heads_key),
        }
    }

    /// The number of routed experts, known under several keys as
    /// [`Config::size_of_first`] reads them, at most [`MAX_EXPERTS`]; and
    /// `num_experts_per_tok`, when given and experts exist, at most that count: the router
    /// picks the top k of E experts (`torch.topk` refuses k > E), so a
    /// config with more experts per token than experts cannot run.
    pub fn expert_count(&self, keys: &[&str], default: u64) -> Result<u64> {
        let count = self.size_of_first(keys, default)?;
        if count <= MAX_EXPERTS {
            // Without routed experts (Qwen2-MoE's `num_experts: 0` builds
            // dense layers) there is no router to read k.
            if let Some(top_k) = self.optional_size(TOP_K, None)?
                && count > 0
                && top_k > count
            {
                return Err(Error::InvalidConfig {
                    key: TOP_K.to_string(),
                    problem: format!(
                        "`{top_k}` experts per token is more than the {count} routed experts; accepted: 1 to {count} (the router picks the top k of the experts)"
                    ),
                });
            }
            return Ok(count);
        }
        let key = keys
            .iter()
            .find(|key| self.keys.contains_key(**key))
            .unwrap_or(&"num_experts");
        Err(Error::InvalidConfig {
            key: (*key).to_string(),
            problem: format!(
                "`{count}` experts is more than trainmem accepts; accepted: at most {MAX_EXPERTS} experts (the most released is 2,048, Switch-C)"
            ),
        })
    }

    /// A boolean switch: absent takes `default`; `null` counts as false, as
    /// Python's `if config.key:` treats `None`.
    pub fn flag(&self, key: &str, default: bool) -> Result<bool> {
        match self.keys.get(key) {
            None => {
                defaulted(key, default);
                Ok(default)
            }
            Some(Value::Null) => Ok(false),
            Some(Value::Bool(flag)) => Ok(*flag),
            Some(other) => Err(Error::InvalidConfig {
                key: key.to_string(),
                problem: format!(
                    "{} is {}; accepted: `true` or `false`",
                    quote(other),
                    describe(other)
                ),
            }),
        }
    }

    /// A nested object (`rope_parameters`), read key by key like the file:
    /// `None` when absent, `null` or empty, as Python's `if config.key:`.
    pub fn object(&self, key: &str) -> Result<Option<Config<'a>>> {
        match self.keys.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Object(keys)) if keys.is_empty() => Ok(None),
            Some(Value::Object(keys)) => Ok(Some(Config { keys })),
            Some(other) => Err(Error::InvalidConfig {
                key: key.to_string(),
                problem: format!(
                    "{} is {}; accepted: an object such as `{{\"rope_type\": \"default\"}}`",
                    quote(other),
                    describe(other)
                ),
            }),
        }
    }

    /// A list of sizes (layer indices such as `mlp_only_layers`); absent or
    /// `null` is the empty list.
    pub fn size_list(&self, key: &str) -> Result<Vec<u64>> {
        match self.keys.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items.iter().map(|item| size_value(key, item)).collect(),
            Some(other) => Err(Error::InvalidConfig {
                key: key.to_string(),
                problem: format!(
                    "{} is {}; accepted: a list of whole numbers such as `[0, 3]`",
                    quote(other),
                    describe(other)
                ),
            }),
        }
    }
}

impl<'a> Config<'a> {
    /// A number that the config class declares as `float | None =
    /// default`: absent takes `default`, `null` is `None`; integers are
    /// accepted as Python accepts them for floats.
    pub fn optional_number(&self, key: &str, default: Option<f64>) -> Result<Option<f64>> {
        match self.keys.get(key) {
            None => {
                defaulted(key, optional(default));
                Ok(default)
            }
            Some(Value::Null) => Ok(None),
            Some(value) => match value.as_f64() {
                Some(number) if number.is_finite() => Ok(Some(number)),
                _ => Err(Error::InvalidConfig {
                    key: key.to_string(),
                    problem: format!(
                        "{} is {}; accepted: a number such as `0.1`",
                        quote(value),
                        describe(value)
                    ),
                }),
            },
        }
    }

    /// A fraction from 0 to 1 (a dropout probability, the share of a head
    /// that is rotated): absent takes `default`; `null` counts as 0, as
    /// Python's `if p:` treats `None`.
    pub fn fraction(&self, key: &str, default: f64) -> Result<f64> {
        let fraction = self.optional_number(key, Some(default))?.unwrap_or(0.0);
        if (0.0..=1.0).contains(&fraction) {
            Ok(fraction)
        } else {
            Err(Error::InvalidConfig {
                key: key.to_string(),
                problem: format!(
                    "`{fraction}` is outside 0..1; accepted: a fraction such as `0.1`"
                ),
            })
        }
    }

    /// A string (an activation function's name): absent takes `default`,
    /// `null` is `None`.
    pub fn string(&self, key: &str, default: Option<&'a str>) -> Result<Option<&'a str>> {
        match self.keys.get(key) {
            None => {
                defaulted(key, optional(default));
                Ok(default)
            }
            Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.as_str())),
            Some(other) => Err(Error::InvalidConfig {
                key: key.to_string(),
                problem: format!(
                    "{} is {}; accepted: a string such as `\"gelu_new\"`",
                    quote(other),
                    describe(other)
                ),
            }),
        }
    }

    /// A list of strings, or one string of `|`-separated items (DeBERTa's
    /// `pos_att_type`: `"p2c|c2p"` as older configs write it), lowercased
    /// and trimmed as `DebertaV2Config` reads it; empty when absent or `null`.
    pub fn separated_list(&self, key: &str) -> Result<Vec<String>> {
        match self.keys.get(key) {
            Some(Value::String(text)) => Ok(text
                .to_lowercase()
                .split('|')
                .map(|item| item.trim().to_string())
                .collect()),
            _ => Ok(self
                .string_list(key)?
                .unwrap_or_default()
                .into_iter()
                .map(str::to_string)
                .collect()),
        }
    }

    /// A whole number that may be negative or absent, such as DeBERTa's
    /// `max_relative_positions` and `position_buckets` (-1: unset): `None`
    /// below 1, the number otherwise.
    pub fn positive_or_unset(&self, key: &str, default: i64) -> Result<Option<u64>> {
        let number = self
            .optional_number(key, Some(default as f64))?
            .unwrap_or(default as f64);
        if number < 1.0 {
            return Ok(None);
        }
        if number.fract() != 0.0 || number > MAX_SIZE as f64 {
            return Err(Error::InvalidConfig {
                key: key.to_string(),
                problem: format!(
                    "`{number}` is not a whole number from 1 to {MAX_SIZE}; accepted: such a number, or -1 for none"
                ),
            });
        }
        Ok(Some(number as u64))
    }

    /// A list of strings (Gemma 3's `layer_types`): `None` when absent or
    /// `null`.
    pub fn string_list(&self, key: &str) -> Result<Option<Vec<&'a str>>> {
        match self.keys.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| {
                    item.as_str().ok_or_else(|| Error::InvalidConfig {
                        key: key.to_string(),
                        problem: format!(
                            "{} is {}; accepted: a list of strings such as `[\"sliding_attention\", \"full_attention\"]`",
                            quote(item),
                            describe(item)
                        ),
                    })
                })
                .collect::<Result<Vec<_>>>()
                .map(Some),
            Some(other) => Err(Error::InvalidConfig {
                key: key.to_string(),
                problem: format!(
                    "{} is {}; accepted: a list of strings such as `[\"sliding_attention\", \"full_attention\"]`",
                    quote(other),
                    describe(other)
                ),
            }),
        }
    }
}

/// `numerator / denominator` rounded down, as Python's `//`; a zero
/// denominator is an error naming `denominator_key`.
pub fn ratio(numerator: u64, denominator: u64, denominator_key: &str) -> Result<u64> {
    numerator
        .checked_div(denominator)
        .ok_or_else(|| Error::InvalidConfig {
            key: denominator_key.to_string(),
            problem: "`0` cannot divide the hidden size; accepted: a positive whole number"
                .to_string(),
        })
}

/// `numerator / denominator` when it divides exactly, as the attention
/// classes that raise `ValueError` otherwise (GPT-2, BLOOM, Falcon, OPT,
/// StableLM) require.
pub fn exact_ratio(numerator: u64, denominator: u64, denominator_key: &str) -> Result<u64> {
    let quotient = ratio(numerator, denominator, denominator_key)?;
    if quotient.checked_mul(denominator) == Some(numerator) {
        Ok(quotient)
    } else {
        Err(Error::InvalidConfig {
            key: denominator_key.to_string(),
            problem: format!(
                "`{denominator}` does not divide the hidden size `{numerator}`; accepted: a divisor of the hidden size"
            ),
        })
    }
}

/// Reads one size, refusing anything but a whole number in `0..=MAX_SIZE`.
fn size_value(key: &str, value: &Value) -> Result<u64> {
    let accepted = format!("accepted: a whole number from 0 to {MAX_SIZE}");
    let problem = match value {
        Value::Number(number) => match number.as_u64() {
            Some(size) if size <= MAX_SIZE => return Ok(size),
            Some(_) => format!("{} is too large; {accepted}", quote(value)),
            None if number.is_i64() => format!("{} is negative; {accepted}", quote(value)),
            None => format!("{} is not a whole number; {accepted}", quote(value)),
        },
        other => format!("{} is {}; {accepted}", quote(other), describe(other)),
    };
    Err(Error::InvalidConfig {
        key: key.to_string(),
        problem,
    })
}

/// The value in backticks, shortened when long.
fn quote(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(QUOTED_CHARACTERS) {
        Some((cut, _)) => format!("`{}...`", &text[..cut]),
        None => format!("`{text}`"),
    }
}

/// The JSON kind of a value, for messages.
fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn problem(result: Result<impl std::fmt::Debug>) -> (String, String) {
        match result {
            Err(Error::InvalidConfig { key, problem }) => (key, problem),
            other => panic!("expected InvalidConfig, got {other:?}"),
        }
    }

    #[test]
    fn recording_names_each_absent_key_once_with_its_default() {
        let file = json!({"hidden_size": 4096, "attention_bias": null});
        let config = Config::new(&file).unwrap();
        let (read, defaulted) = recording_defaults(|| {
            (
                config.size("hidden_size", 1).unwrap(),
                config.size("intermediate_size", 11008).unwrap(),
                config.size("intermediate_size", 11008).unwrap(),
                config.flag("attention_bias", true).unwrap(),
                config.flag("tie_word_embeddings", false).unwrap(),
                config.optional_size("head_dim", None).unwrap(),
            )
        });
        assert_eq!(read, (4096, 11008, 11008, false, false, None));
        let named: Vec<(&str, &str)> = defaulted
            .iter()
            .map(|k| (k.key.as_str(), k.default.as_str()))
            .collect();
        // Present keys (`null` included) are the file's, not defaults.
        assert_eq!(
            named,
            [
                ("intermediate_size", "11008"),
                ("tie_word_embeddings", "false"),
                ("head_dim", "none")
            ]
        );
        // Outside a recording nothing is kept.
        config.size("vocab_size", 32000).unwrap();
        let (_, none) = recording_defaults(|| ());
        assert!(none.is_empty());
    }

    #[test]
    fn a_nested_recording_also_records_for_the_outer_one() {
        let file = json!({});
        let config = Config::new(&file).unwrap();
        let ((_, inner), outer) = recording_defaults(|| {
            config.size("hidden_size", 768).unwrap();
            recording_defaults(|| config.size("vocab_size", 50257).unwrap())
        });
        assert_eq!(inner.len(), 1);
        assert_eq!(
            outer.iter().map(|k| k.key.as_str()).collect::<Vec<_>>(),
            ["hidden_size", "vocab_size"]
        );
    }

    #[test]
    fn nested_objects_are_read_like_the_file() {
        let value = json!({
            "rope_parameters": {"partial_rotary_factor": 0.4}, "empty": {},
            "nothing": null, "number": 3,
        });
        let config = Config::new(&value).unwrap();
        let rope = config.object("rope_parameters").unwrap().unwrap();
        assert_eq!(rope.fraction("partial_rotary_factor", 1.0).unwrap(), 0.4);
        assert!(config.object("empty").unwrap().is_none());
        assert!(config.object("nothing").unwrap().is_none());
        assert!(config.object("absent").unwrap().is_none());
        let (key, message) = problem(config.object("number").map(|nested| nested.is_some()));
        assert_eq!(key, "number");
        assert!(message.starts_with("`3` is a number"), "{message}");
    }

    #[test]
    fn sizes_take_defaults_and_refuse_non_integers() {
        let value = json!({
            "hidden_size": 64, "text": "4096", "negative": -1, "float": 64.5,
            "whole_float": 64.0, "huge": 5_000_000_000u64, "nothing": null,
        });
        let config = Config::new(&value).unwrap();
        assert_eq!(config.size("hidden_size", 1).unwrap(), 64);
        assert_eq!(config.size("absent", 7).unwrap(), 7);
        let (key, message) = problem(config.size("text", 1));
        assert_eq!(key, "text");
        assert_eq!(
            message,
            "`\"4096\"` is a string; accepted: a whole number from 0 to 4294967295"
        );
        assert!(
            problem(config.size("negative", 1))
                .1
                .starts_with("`-1` is negative")
        );
        assert!(
            problem(config.size("float", 1))
                .1
                .starts_with("`64.5` is not a whole number")
        );
        assert!(
            problem(config.size("whole_float", 1))
                .1
                .starts_with("`64.0` is not a whole number")
        );
        assert!(
            problem(config.size("huge", 1))
                .1
                .starts_with("`5000000000` is too large")
        );
        assert!(
            problem(config.size("nothing", 1))
                .1
                .starts_with("`null` is null")
        );
    }

    #[test]
    fn optional_sizes_distinguish_absent_from_null() {
        let value = json!({"num_key_value_heads": null, "head_dim": 24});
        let config = Config::new(&value).unwrap();
        assert_eq!(
            config
                .optional_size("num_key_value_heads", Some(32))
                .unwrap(),
            None
        );
        assert_eq!(config.optional_size("absent", Some(32)).unwrap(), Some(32));
        assert_eq!(
            config
                .head_dim_or_ratio(64, 4, "num_attention_heads")
                .unwrap(),
            24
        );
    }

    #[test]
    fn first_present_alias_wins() {
        let value = json!({"n_embd": 64, "hidden_size": 72});
        let config = Config::new(&value).unwrap();
        assert_eq!(
            config
                .size_of_first(&["hidden_size", "n_embd"], 768)
                .unwrap(),
            72
        );
        assert_eq!(
            config.size_of_first(&["absent", "n_embd"], 768).unwrap(),
            64
        );
        assert_eq!(config.size_of_first(&["absent"], 768).unwrap(), 768);
    }

    #[test]
    fn flags_accept_booleans_and_null_only() {
        let value = json!({"on": true, "off": null, "text": "true"});
        let config = Config::new(&value).unwrap();
        assert!(config.flag("on", false).unwrap());
        assert!(!config.flag("off", true).unwrap());
        assert!(config.flag("absent", true).unwrap());
        let (key, message) = problem(config.flag("text", false));
        assert_eq!(key, "text");
        assert_eq!(
            message,
            "`\"true\"` is a string; accepted: `true` or `false`"
        );
    }

    #[test]
    fn lists_and_ratios_are_checked() {
        let value = json!({"layers": [0, 3], "bad": [0, "1"], "long": "x".repeat(100)});
        let config = Config::new(&value).unwrap();
        assert_eq!(config.size_list("layers").unwrap(), vec![0, 3]);
        assert!(config.size_list("absent").unwrap().is_empty());
        assert!(config.size_list("bad").is_err());
        assert!(problem(config.size("long", 0)).1.contains("...`"));
        assert_eq!(ratio(64, 4, "n_head").unwrap(), 16);
        assert_eq!(problem(ratio(64, 0, "n_head")).0, "n_head");
        assert_eq!(exact_ratio(72, 6, "n_head").unwrap(), 12);
        assert!(exact_ratio(72, 7, "n_head").is_err());
    }

    #[test]
    fn numbers_fractions_and_strings() {
        let value = json!({
            "p": 0.1, "one": 1, "none": null, "big": 1.5, "text": "0.1",
            "act": "gelu_new", "types": ["sliding_attention", "full_attention"], "bad": [1],
        });
        let config = Config::new(&value).unwrap();
        assert_eq!(config.optional_number("p", None).unwrap(), Some(0.1));
        assert_eq!(config.optional_number("none", Some(50.0)).unwrap(), None);
        assert_eq!(
            config.optional_number("absent", Some(50.0)).unwrap(),
            Some(50.0)
        );
        assert!(config.optional_number("text", None).is_err());
        assert_eq!(config.fraction("one", 0.0).unwrap(), 1.0);
        assert_eq!(config.fraction("none", 0.5).unwrap(), 0.0);
        assert_eq!(config.fraction("absent", 0.25).unwrap(), 0.25);
        assert!(
            problem(config.fraction("big", 0.0))
                .1
                .contains("outside 0..1")
        );
        assert_eq!(config.string("act", None).unwrap(), Some("gelu_new"));
        assert_eq!(config.string("absent", Some("silu")).unwrap(), Some("silu"));
        assert!(config.string("p", None).is_err());
        assert_eq!(
            config.string_list("types").unwrap(),
            Some(vec!["sliding_attention", "full_attention"])
        );
        assert_eq!(config.string_list("absent").unwrap(), None);
        assert!(config.string_list("bad").is_err());
        assert!(config.string_list("act").is_err());
    }

    #[test]
    fn a_non_object_file_is_refused() {
        assert!(Config::new(&json!([1, 2])).is_err());
        assert!(Config::new(&json!("llama")).is_err());
    }
}
