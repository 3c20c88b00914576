//! The JSON text of a safetensors header read into raw entries, leniently: a
//! field of the wrong type is kept as a [`JsonValue`] for the validator to
//! report with the tensor's name, instead of failing the whole parse with only
//! a line and column.
//!
//! Nothing here allocates much more than the text it reads: unknown fields
//! are skipped with [`IgnoredAny`], arrays keep only their integers (8 bytes
//! for at least 2 bytes of text, as the safetensors crate's `Vec<usize>`), and
//! objects below a tensor entry are skipped, not stored. serde_json's
//! recursion limit (128 levels) bounds the nesting.

use std::fmt;

use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::MAX_CHECKPOINT_TENSORS;

/// The key of the optional free-form string map in a safetensors header.
pub(super) const METADATA_KEY: &str = "__metadata__";

/// A header as written: its entries in text order.
#[derive(Debug)]
pub(super) struct RawHeader {
    /// Every key other than `__metadata__`, with its entry, in text order.
    pub entries: Vec<(String, RawEntry)>,
    /// Every `__metadata__` value given (normally none or one).
    pub metadata: Vec<JsonValue>,
    /// Whether entries past [`MAX_CHECKPOINT_TENSORS`] were skipped unstored.
    pub too_many: bool,
}

/// One tensor entry as written.
#[derive(Debug)]
pub(super) enum RawEntry {
    /// An object: its three fields where given, and the first field given twice.
    Object {
        dtype: Option<JsonValue>,
        shape: Option<JsonValue>,
        data_offsets: Option<JsonValue>,
        repeated: Option<&'static str>,
    },
    /// Something else: what it is (`a number`, `an array`, ...).
    NotObject(&'static str),
}

/// A JSON value kept only as far as the validator needs it.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum JsonValue {
    /// A non-negative integer that fits in 64 bits.
    Unsigned(u64),
    /// A negative integer.
    Negative(i64),
    /// A number with a fraction or exponent, or an integer too large for 64 bits.
    Float(f64),
    /// A string.
    Text(String),
    /// An array: its elements if all are [`JsonValue::Unsigned`], otherwise
    /// the first element that is not.
    Array(Result<Vec<u64>, Box<JsonValue>>),
    /// An object, and whether every one of its values is a string.
    Object { all_strings: bool },
    /// A boolean or null.
    Other(&'static str),
}

impl JsonValue {
    /// How a message names this value: `` `-3` (negative) ``, `an array`.
    pub fn describe(&self) -> String {
        match self {
            JsonValue::Unsigned(n) => format!("`{n}`"),
            JsonValue::Negative(n) => format!("`{n}` (negative)"),
            JsonValue::Float(f) if f.fract() == 0.0 && *f > 0.0 => {
                format!("`{f}` (too large for 64 bits)")
            }
            JsonValue::Float(f) => format!("`{f}` (not an integer)"),
            JsonValue::Text(s) => format!("the string `{:?}`", super::abbreviated(s)),
            JsonValue::Array(_) => "an array".to_string(),
            JsonValue::Object { .. } => "an object".to_string(),
            JsonValue::Other(kind) => (*kind).to_string(),
        }
    }
}

impl<'de> Deserialize<'de> for JsonValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(JsonValueVisitor)
    }
}

struct JsonValueVisitor;

impl<'de> Visitor<'de> for JsonValueVisitor {
    type Value = JsonValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any json value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<JsonValue, E> {
        Ok(JsonValue::Other("a boolean"))
    }

    fn visit_i64<E>(self, n: i64) -> Result<JsonValue, E> {
        Ok(u64::try_from(n).map_or(JsonValue::Negative(n), JsonValue::Unsigned))
    }

    fn visit_u64<E>(self, n: u64) -> Result<JsonValue, E> {
        Ok(JsonValue::Unsigned(n))
    }

    fn visit_f64<E>(self, f: f64) -> Result<JsonValue, E> {
        Ok(JsonValue::Float(f))
    }

    fn visit_str<E>(self, s: &str) -> Result<JsonValue, E> {
        Ok(JsonValue::Text(s.to_owned()))
    }

    fn visit_string<E>(self, s: String) -> Result<JsonValue, E> {
        Ok(JsonValue::Text(s))
    }

    fn visit_unit<E>(self) -> Result<JsonValue, E> {
        Ok(JsonValue::Other("null"))
    }

    fn visit_none<E>(self) -> Result<JsonValue, E> {
        Ok(JsonValue::Other("null"))
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<JsonValue, D::Error> {
        JsonValue::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<JsonValue, A::Error> {
        let mut integers = Vec::new();
        while let Some(element) = seq.next_element::<JsonValue>()? {
            if let JsonValue::Unsigned(n) = element {
                integers.push(n);
            } else {
                // Keep the first offender; read past the rest without storing it.
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                return Ok(JsonValue::Array(Err(Box::new(element))));
            }
        }
        Ok(JsonValue::Array(Ok(integers)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<JsonValue, A::Error> {
        let mut all_strings = true;
        while map.next_key::<IgnoredAny>()?.is_some() {
            let value = map.next_value::<StringOrNot>()?;
            all_strings &= value.0;
        }
        Ok(JsonValue::Object { all_strings })
    }
}

/// Whether a value is a string, read without storing it.
struct StringOrNot(bool);

impl<'de> Deserialize<'de> for StringOrNot {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StringOrNotVisitor)
    }
}

struct StringOrNotVisitor;

impl<'de> Visitor<'de> for StringOrNotVisitor {
    type Value = StringOrNot;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any json value")
    }

    fn visit_str<E>(self, _: &str) -> Result<StringOrNot, E> {
        Ok(StringOrNot(true))
    }

    fn visit_bool<E>(self, _: bool) -> Result<StringOrNot, E> {
        Ok(StringOrNot(false))
    }

    fn visit_i64<E>(self, _: i64) -> Result<StringOrNot, E> {
        Ok(StringOrNot(false))
    }

    fn visit_u64<E>(self, _: u64) -> Result<StringOrNot, E> {
        Ok(StringOrNot(false))
    }

    fn visit_f64<E>(self, _: f64) -> Result<StringOrNot, E> {
        Ok(StringOrNot(false))
    }

    fn visit_unit<E>(self) -> Result<StringOrNot, E> {
        Ok(StringOrNot(false))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<StringOrNot, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(StringOrNot(false))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StringOrNot, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(StringOrNot(false))
    }
}

/// The fields of a tensor entry; any other key is skipped, as the
/// safetensors crate's `TensorInfo` does.
enum FieldName {
    Dtype,
    Shape,
    DataOffsets,
    Unknown,
}

impl<'de> Deserialize<'de> for FieldName {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(FieldNameVisitor)
    }
}

struct FieldNameVisitor;

impl<'de> Visitor<'de> for FieldNameVisitor {
    type Value = FieldName;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E>(self, name: &str) -> Result<FieldName, E> {
        Ok(match name {
            "dtype" => FieldName::Dtype,
            "shape" => FieldName::Shape,
            "data_offsets" => FieldName::DataOffsets,
            _ => FieldName::Unknown,
        })
    }
}

impl<'de> Deserialize<'de> for RawEntry {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(RawEntryVisitor)
    }
}

struct RawEntryVisitor;

impl<'de> Visitor<'de> for RawEntryVisitor {
    type Value = RawEntry;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a tensor entry")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawEntry, A::Error> {
        let (mut dtype, mut shape, mut data_offsets) = (None, None, None);
        let mut repeated = None;
        while let Some(field) = map.next_key::<FieldName>()? {
            let (slot, name) = match field {
                FieldName::Dtype => (&mut dtype, "dtype"),
                FieldName::Shape => (&mut shape, "shape"),
                FieldName::DataOffsets => (&mut data_offsets, "data_offsets"),
                FieldName::Unknown => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            let value = map.next_value::<JsonValue>()?;
            if slot.is_some() {
                repeated.get_or_insert(name);
            } else {
                *slot = Some(value);
            }
        }
        Ok(RawEntry::Object {
            dtype,
            shape,
            data_offsets,
            repeated,
        })
    }

    fn visit_bool<E>(self, _: bool) -> Result<RawEntry, E> {
        Ok(RawEntry::NotObject("a boolean"))
    }

    fn visit_i64<E>(self, _: i64) -> Result<RawEntry, E> {
        Ok(RawEntry::NotObject("a number"))
    }

    fn visit_u64<E>(self, _: u64) -> Result<RawEntry, E> {
        Ok(RawEntry::NotObject("a number"))
    }

    fn visit_f64<E>(self, _: f64) -> Result<RawEntry, E> {
        Ok(RawEntry::NotObject("a number"))
    }

    fn visit_str<E>(self, _: &str) -> Result<RawEntry, E> {
        Ok(RawEntry::NotObject("a string"))
    }

    fn visit_unit<E>(self) -> Result<RawEntry, E> {
        Ok(RawEntry::NotObject("null"))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawEntry, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(RawEntry::NotObject("an array"))
    }
}

impl<'de> Deserialize<'de> for RawHeader {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(RawHeaderVisitor)
    }
}

struct RawHeaderVisitor;

impl<'de> Visitor<'de> for RawHeaderVisitor {
    type Value = RawHeader;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a json object mapping tensor names to their entries")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawHeader, A::Error> {
        let mut header = RawHeader {
            entries: Vec::new(),
            metadata: Vec::new(),
            too_many: false,
        };
        while let Some(key) = map.next_key::<String>()? {
            if key == METADATA_KEY {
                header.metadata.push(map.next_value::<JsonValue>()?);
            } else if header.entries.len() >= MAX_CHECKPOINT_TENSORS {
                map.next_value::<IgnoredAny>()?;
                header.too_many = true;
            } else {
                let entry = map.next_value::<RawEntry>()?;
                header.entries.push((key, entry));
            }
        }
        Ok(header)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(json: &str) -> RawHeader {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn keeps_text_order_and_skips_unknown_fields() {
        let header = read(
            r#"{"b": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8], "extra": {"x": [1]}},
                "__metadata__": {"format": "pt"},
                "a": {"shape": [-1, 2], "dtype": 3}}"#,
        );
        let names: Vec<&str> = header.entries.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["b", "a"]);
        assert_eq!(header.metadata, [JsonValue::Object { all_strings: true }]);
        match &header.entries[1].1 {
            RawEntry::Object {
                dtype,
                shape,
                data_offsets,
                repeated,
            } => {
                assert_eq!(*dtype, Some(JsonValue::Unsigned(3)));
                assert_eq!(
                    *shape,
                    Some(JsonValue::Array(Err(Box::new(JsonValue::Negative(-1)))))
                );
                assert_eq!(*data_offsets, None);
                assert_eq!(*repeated, None);
            }
            other => panic!("expected an object, got {other:?}"),
        }
    }

    #[test]
    fn records_entries_that_are_not_objects_and_repeated_fields() {
        let header = read(r#"{"a": [1, 2], "b": {"dtype": "F32", "dtype": "F16"}}"#);
        assert!(matches!(
            header.entries[0].1,
            RawEntry::NotObject("an array")
        ));
        assert!(matches!(
            header.entries[1].1,
            RawEntry::Object {
                repeated: Some("dtype"),
                ..
            }
        ));
    }

    #[test]
    fn describes_bad_values() {
        assert_eq!(JsonValue::Negative(-3).describe(), "`-3` (negative)");
        assert_eq!(JsonValue::Float(1.5).describe(), "`1.5` (not an integer)");
        assert_eq!(
            JsonValue::Float(1e20).describe(),
            "`100000000000000000000` (too large for 64 bits)"
        );
        assert_eq!(JsonValue::Text("3".into()).describe(), "the string `\"3\"`");
    }
}
