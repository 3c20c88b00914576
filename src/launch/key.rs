//! One row of a format's key table: a documented key and the `estimate`
//! flags its value sets.

use serde_json::{Map, Value};

use super::{Deferred, Setting, setting};

/// A documented key (dotted for nested ones: `zero_optimization.stage`).
#[derive(Debug)]
pub struct Key {
    pub name: &'static str,
    pub rule: Rule,
}

/// What a project does when a key is absent: the key, its default value,
/// and the flags that value sets.
#[derive(Debug)]
pub struct Absent {
    pub key: &'static str,
    pub value: &'static str,
    pub flags: &'static [(&'static str, &'static str)],
}

/// What a key's value sets.
#[derive(Debug)]
pub enum Rule {
    /// A whole number ≥ 1 given to a flag; `"auto"` leaves it to the
    /// companion file.
    Count(&'static str),
    /// A true/false: when true, these flags (an empty value is a bare switch);
    /// when false, nothing.
    Switch(&'static [(&'static str, &'static str)]),
    /// A name looked up, case-insensitively, in a table.
    Choice(&'static [(&'static str, Choice)]),
    /// The value given to a flag as it is (a model id, a list of modules).
    Text(&'static str),
    /// Read by a function of the value and the whole document.
    Read(fn(&Value, &Map<String, Value>) -> Result<Effect, String>),
    /// A DeepSpeed config: a path, or the config itself as a mapping.
    Include,
    /// Known, and does not change memory.
    NoMemory,
    /// Changes memory in a way trainmem does not model.
    NotModelled(&'static str),
}

/// What one name of a [`Rule::Choice`] does.
#[derive(Debug)]
pub enum Choice {
    Set(&'static [(&'static str, &'static str)]),
    /// Accepted, sets nothing (the default), with why.
    Nothing(&'static str),
    NotModelled(&'static str),
}

/// What a key did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    Set(Vec<Setting>),
    /// Accepted; sets nothing, for the reason given.
    Nothing(String),
    NoMemory,
    NotModelled(String),
    Include,
    Defer(Deferred, &'static str),
}

impl Effect {
    /// The flags of a table row.
    pub fn flags(flags: &[(&'static str, &'static str)]) -> Effect {
        Effect::Set(flags.iter().map(|(f, v)| setting(f, v)).collect())
    }
}

impl Rule {
    /// What `value` sets, or why it is not accepted.
    pub fn read(&self, value: &Value, document: &Map<String, Value>) -> Result<Effect, String> {
        match self {
            Rule::Count(flag) => match count(value)? {
                Some(n) => Ok(Effect::Set(vec![setting(flag, &n.to_string())])),
                None => Ok(Effect::Nothing(
                    "auto: the Trainer fills it in from its own arguments".to_string(),
                )),
            },
            Rule::Switch(flags) => Ok(if truth(value)? {
                Effect::flags(flags)
            } else {
                Effect::Nothing("off".to_string())
            }),
            Rule::Choice(table) => choose(value, table),
            Rule::Text(flag) => match value {
                Value::String(text) if !text.trim().is_empty() => {
                    Ok(Effect::Set(vec![setting(flag, text.trim())]))
                }
                Value::Array(items) => {
                    let names = items
                        .iter()
                        .map(|item| item.as_str().map(str::trim).filter(|s| !s.is_empty()))
                        .collect::<Option<Vec<_>>>()
                        .ok_or("expected a list of names")?;
                    if names.is_empty() {
                        return Err("expected at least one name".to_string());
                    }
                    Ok(Effect::Set(vec![setting(flag, &names.join(","))]))
                }
                _ => Err("expected a name".to_string()),
            },
            Rule::Read(read) => read(value, document),
            Rule::Include => Ok(Effect::Include),
            Rule::NoMemory => Ok(Effect::NoMemory),
            Rule::NotModelled(why) => Ok(Effect::NotModelled(why.to_string())),
        }
    }
}

/// A whole number ≥ 1, or `None` for `"auto"`.
pub fn count(value: &Value) -> Result<Option<u64>, String> {
    let number = match value {
        Value::Number(n) => n.as_u64(),
        Value::String(text) if text.trim().eq_ignore_ascii_case("auto") => return Ok(None),
        Value::String(text) => text.trim().parse::<u64>().ok(),
        _ => None,
    };
    match number {
        Some(n) if n >= 1 => Ok(Some(n)),
        _ => Err("expected a whole number ≥ 1".to_string()),
    }
}

/// The whole number ≥ 1 of `key`, read by another key's rule: the problem
/// names `key` (`lora_r: ...`), so that the report blames it and not the
/// key being read. `"auto"` is not a count here.
pub fn count_of(key: &str, value: &Value) -> Result<u64, String> {
    match count(value) {
        Ok(Some(n)) => Ok(n),
        _ => Err(format!("{key}: expected a whole number ≥ 1")),
    }
}

/// A true/false, also written as a string.
pub fn truth(value: &Value) -> Result<bool, String> {
    match value {
        Value::Bool(b) => Ok(*b),
        Value::Null => Ok(false),
        Value::String(text) => match text.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" => Ok(true),
            "false" | "no" | "off" | "" => Ok(false),
            _ => Err("expected true or false".to_string()),
        },
        _ => Err("expected true or false".to_string()),
    }
}

/// A true/false that may be absent: `absent` when it is, `null` false.
pub fn truth_or(value: Option<&Value>, absent: bool) -> Result<bool, String> {
    value.map(truth).transpose().map(|b| b.unwrap_or(absent))
}

/// Whether `document` switches `key` on (absent, `null` and false are off).
pub fn on(document: &Map<String, Value>, key: &str) -> Result<bool, String> {
    truth_or(document.get(key), false)
}

/// Whether `document` gives `key` a value (absent and `null` give none).
pub fn given(document: &Map<String, Value>, key: &str) -> bool {
    !matches!(document.get(key), None | Some(Value::Null))
}

/// A scalar as text, for looking up names.
pub fn name_of(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.trim().to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// The row of `table` that names `value`.
pub fn choose(value: &Value, table: &[(&'static str, Choice)]) -> Result<Effect, String> {
    let accepted = || {
        table
            .iter()
            .map(|(name, _)| *name)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let name = name_of(value).ok_or_else(|| format!("expected one of {}", accepted()))?;
    let row = table
        .iter()
        .find(|(known, _)| known.eq_ignore_ascii_case(&name))
        .ok_or_else(|| format!("unknown value; accepted: {}", accepted()))?;
    Ok(match &row.1 {
        Choice::Set(flags) => Effect::flags(flags),
        Choice::Nothing(why) => Effect::Nothing(why.to_string()),
        Choice::NotModelled(why) => Effect::NotModelled(why.to_string()),
    })
}

/// Sample packing (axolotl's `sample_packing`, TRL's and LLaMA-Factory's
/// `packing`, torchtune's `dataset.packed`): several samples fill each
/// sequence, so a sequence is priced at the full packed length (`length`
/// says which); attention runs on the packed samples through the kernel's
/// variable-length path (flash-attention's `flash_attn_varlen_func`,
/// torchtune's flex attention with a block-causal mask), which saves what
/// the flash kernel saves: q, k, v, the output and a log-sum-exp, no
/// S x S mask or scores (`--attention flash`). When the config names its
/// attention (`attention` holds those keys), that key decides it.
pub fn packing(
    value: &Value,
    document: &Map<String, Value>,
    attention: &[&str],
    length: &str,
) -> Result<Effect, String> {
    if !truth(value)? {
        return Ok(Effect::Nothing("off".to_string()));
    }
    let named = attention.iter().any(|key| match document.get(*key) {
        None | Some(Value::Null) | Some(Value::Bool(false)) => false,
        Some(Value::String(text)) => !text.trim().eq_ignore_ascii_case("auto"),
        Some(_) => true,
    });
    if named {
        Ok(Effect::Nothing(format!(
            "priced at {length}, which packing fills; attention as the config names it"
        )))
    } else {
        Ok(Effect::flags(&[("--attention", "flash")]))
    }
}
