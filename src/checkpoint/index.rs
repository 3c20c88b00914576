//! The index of a sharded checkpoint, `model.safetensors.index.json`:
//! `{"metadata": {..}, "weight_map": {"tensor name": "shard file name", ..}}`.
//!
//! The index is untrusted too: its size and its number of shards are capped,
//! and a shard must be a plain file name in the index's own folder, so a
//! hostile index cannot make trainmem open any other file.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Component, Path};

use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};

use super::MAX_CHECKPOINT_TENSORS;

/// The largest index file read. Real indexes are a few hundred kilobytes
/// (about 100 bytes per tensor).
pub const MAX_INDEX_BYTES: u64 = 64 << 20;

/// The most shard files an index may name.
pub const MAX_SHARDS: usize = 100_000;

/// What an index says: for each shard file name, in sorted order, the tensors
/// `weight_map` puts in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Index {
    /// Shard file name -> tensor names, both sorted.
    pub shards: BTreeMap<String, Vec<String>>,
}

/// The index as written; `metadata` and other keys are skipped unread.
#[derive(Deserialize)]
struct RawIndex {
    weight_map: WeightMap,
}

/// `weight_map`, stored up to [`MAX_CHECKPOINT_TENSORS`] entries; past that
/// the rest is read without being stored, so a hostile index costs no more
/// memory than a real one.
struct WeightMap {
    entries: BTreeMap<String, String>,
    too_many: bool,
}

impl<'de> Deserialize<'de> for WeightMap {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(WeightMapVisitor)
    }
}

struct WeightMapVisitor;

impl<'de> Visitor<'de> for WeightMapVisitor {
    type Value = WeightMap;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map of tensor names to shard file names")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<WeightMap, A::Error> {
        let mut weight_map = WeightMap {
            entries: BTreeMap::new(),
            too_many: false,
        };
        while let Some(tensor) = map.next_key::<String>()? {
            let shard = map.next_value::<String>()?;
            if weight_map.entries.len() < MAX_CHECKPOINT_TENSORS {
                weight_map.entries.insert(tensor, shard);
            } else {
                weight_map.too_many = true;
            }
        }
        Ok(weight_map)
    }
}

/// The shape of an index, for messages.
const EXPECTED_INDEX: &str =
    r#"expected {"metadata": {..}, "weight_map": {"tensor name": "shard file name", ..}}"#;

/// Parses the bytes of an index. Never panics; any problem is a lowercase message.
pub fn parse_index(bytes: &[u8]) -> Result<Index, String> {
    let length = bytes.len() as u64;
    if length > MAX_INDEX_BYTES {
        return Err(format!(
            "the index is {length} bytes, over the {MAX_INDEX_BYTES}-byte limit for a `model.safetensors.index.json`"
        ));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| {
        format!(
            "the index is not valid utf-8 (bad byte at offset {}); expected json text",
            e.valid_up_to()
        )
    })?;
    let raw: RawIndex = serde_json::from_str(text).map_err(|e| {
        if e.is_data() {
            format!(
                "the index is not a safetensors index ({}); {EXPECTED_INDEX}",
                super::json_position(&e)
            )
        } else {
            format!("the index is not valid json ({e}); {EXPECTED_INDEX}")
        }
    })?;
    if raw.weight_map.too_many {
        return Err(super::too_many_tensors());
    }
    let weight_map = raw.weight_map.entries;
    if weight_map.is_empty() {
        return Err(format!(
            "the index's `weight_map` names no tensors; {EXPECTED_INDEX}"
        ));
    }
    let mut shards: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (tensor, shard) in weight_map {
        if !is_plain_file_name(&shard) {
            let (tensor, shard) = (super::abbreviated(&tensor), super::abbreviated(&shard));
            return Err(format!(
                "`weight_map` puts tensor `{tensor}` in `{shard}`, which is not a plain file name; expected a shard file in the index's folder such as `model-00001-of-00002.safetensors` (absolute paths, `..` and path separators are refused)"
            ));
        }
        if !shards.contains_key(&shard) && shards.len() >= MAX_SHARDS {
            return Err(format!(
                "`weight_map` names more than {MAX_SHARDS} shard files; expected at most {MAX_SHARDS}"
            ));
        }
        shards.entry(shard).or_default().push(tensor);
    }
    Ok(Index { shards })
}

/// Whether `name` names a file directly inside a folder: one normal path
/// component, no separator of any platform, not `.` or `..`, not absolute.
pub fn is_plain_file_name(name: &str) -> bool {
    let path = Path::new(name);
    let mut components = path.components();
    let single_normal = matches!(
        (components.next(), components.next()),
        (Some(Component::Normal(_)), None)
    );
    single_normal
        && !path.has_root()
        && !path.is_absolute()
        && !name.contains(['/', '\\', '\0'])
        && name != "."
        && name != ".."
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_tensors_by_shard_in_sorted_order() {
        let index = parse_index(
            br#"{"metadata": {"total_size": 16},
                 "weight_map": {"b": "model-00002-of-00002.safetensors",
                                "a": "model-00001-of-00002.safetensors",
                                "c": "model-00001-of-00002.safetensors"}}"#,
        )
        .unwrap();
        let shards: Vec<(&str, Vec<&str>)> = index
            .shards
            .iter()
            .map(|(s, t)| (s.as_str(), t.iter().map(String::as_str).collect()))
            .collect();
        assert_eq!(
            shards,
            [
                ("model-00001-of-00002.safetensors", vec!["a", "c"]),
                ("model-00002-of-00002.safetensors", vec!["b"]),
            ]
        );
    }

    #[test]
    fn accepts_only_plain_file_names() {
        for good in ["model.safetensors", "a..b.safetensors", "..x", "x.."] {
            assert!(is_plain_file_name(good), "{good}");
        }
        for bad in [
            "",
            ".",
            "..",
            "../x.safetensors",
            "a/../../x",
            "/etc/passwd",
            "sub/model.safetensors",
            "sub\\model.safetensors",
            "..\\x",
            "C:\\x",
            "./x",
            "x/",
            "a\0b",
        ] {
            assert!(!is_plain_file_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn refuses_broken_indexes() {
        let cases: &[(&[u8], &str)] = &[
            (b"{", "not valid json"),
            (b"[]", "not a safetensors index"),
            (br#"{"metadata": {}}"#, "missing field `weight_map`"),
            (br#"{"weight_map": {}}"#, "names no tensors"),
            (br#"{"weight_map": {"a": 3}}"#, "not a safetensors index"),
            (br#"{"weight_map": {"a": "../x"}}"#, "not a plain file name"),
            (b"\xff", "not valid utf-8"),
        ];
        for (bytes, needle) in cases {
            let problem = parse_index(bytes).unwrap_err();
            assert!(problem.contains(needle), "{problem}");
        }
    }
}
