//! JSON from the web, read as serde_json reads it but refusing an object that
//! gives a key twice: serde_json keeps the last, so
//! `{"optimizer": "sgd", "optimizer": "adam"}` would silently price adam.

use std::cell::RefCell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Why a text is not accepted as JSON.
#[derive(Debug)]
pub enum Refusal {
    /// Not JSON at all.
    Invalid(serde_json::Error),
    /// An object gives this key twice, named with its path (`config.hidden_size`).
    Duplicate(String),
}

/// Parses `text` into a [`Value`], refusing duplicate keys at any depth.
pub fn parse(text: &[u8]) -> Result<Value, Refusal> {
    let duplicate = RefCell::new(None);
    let mut deserializer = serde_json::Deserializer::from_slice(text);
    let parsed = Unique {
        path: String::new(),
        duplicate: &duplicate,
    }
    .deserialize(&mut deserializer)
    .and_then(|value| deserializer.end().map(|()| value));
    match (parsed, duplicate.into_inner()) {
        (_, Some(key)) => Err(Refusal::Duplicate(key)),
        (Ok(value), None) => Ok(value),
        (Err(error), None) => Err(Refusal::Invalid(error)),
    }
}

/// A value at `path`; the first duplicate key found is recorded in `duplicate`.
struct Unique<'a> {
    path: String,
    duplicate: &'a RefCell<Option<String>>,
}

impl Unique<'_> {
    fn child(&self, step: &str) -> Self {
        let path = if self.path.is_empty() || step.starts_with('[') {
            format!("{}{step}", self.path)
        } else {
            format!("{}.{step}", self.path)
        };
        Unique {
            path,
            duplicate: self.duplicate,
        }
    }
}

impl<'de> DeserializeSeed<'de> for Unique<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Unique<'_> {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        Ok(Number::from_f64(value).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_string()))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Value, A::Error> {
        let mut array = Vec::new();
        while let Some(item) = items.next_element_seed(self.child(&format!("[{}]", array.len())))? {
            array.push(item);
        }
        Ok(Value::Array(array))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = entries.next_key::<String>()? {
            let child = self.child(&key);
            if object.contains_key(&key) {
                let message = format!("duplicate key `{}`", child.path);
                *self.duplicate.borrow_mut() = Some(child.path);
                return Err(de::Error::custom(message));
            }
            let value = entries.next_value_seed(child)?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn duplicate(text: &str) -> String {
        match parse(text.as_bytes()) {
            Err(Refusal::Duplicate(key)) => key,
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn values_are_read_as_serde_json_reads_them() {
        let text = r#"{"a": [1, -2, 3.5, "x", true, null, {"b": {}}], "c": 18446744073709551615}"#;
        assert_eq!(
            parse(text.as_bytes()).unwrap(),
            serde_json::from_str::<Value>(text).unwrap()
        );
        assert_eq!(parse(b" 7 ").unwrap(), json!(7));
    }

    #[test]
    fn a_key_given_twice_is_named_with_its_path() {
        assert_eq!(duplicate(r#"{"params": "7B", "params": "1B"}"#), "params");
        assert_eq!(
            duplicate(r#"{"config": {"hidden_size": 1, "hidden_size": 2}}"#),
            "config.hidden_size"
        );
        assert_eq!(duplicate(r#"[{"a": 1}, {"a": 1, "a": 1}]"#), "[1].a");
        assert_eq!(duplicate(r#"{"a": [{"b": {"c": 1, "c": 1}}]}"#), "a[0].b.c");
        // The same key in different objects is not a duplicate.
        assert!(parse(br#"{"a": {"x": 1}, "b": {"x": 1}}"#).is_ok());
    }

    #[test]
    fn broken_json_is_still_invalid() {
        for text in ["", "{", r#"{"a": 1} x"#, "[1,]", "1e400"] {
            assert!(
                matches!(parse(text.as_bytes()), Err(Refusal::Invalid(_))),
                "{text}"
            );
        }
    }
}
