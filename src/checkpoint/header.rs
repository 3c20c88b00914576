//! The header of a `.safetensors` file: an 8-byte little-endian length, then
//! that many bytes of JSON naming every tensor's dtype, shape and byte range
//! in the data that follows.
//!
//! The file is untrusted input, so it is checked as the safetensors crate
//! checks it (`SafeTensors::read_metadata` and `Metadata::validate` in
//! huggingface/safetensors, safetensors/src/tensor.rs): the length is capped
//! before anything is allocated, the header must fit in the file and be a
//! UTF-8 JSON object, every shape x dtype size must equal its byte range
//! (checked arithmetic), and the ranges, sorted, must tile the data region,
//! which must end exactly where the file ends.

use std::collections::HashSet;
use std::io::{self, Read};

use super::raw_header::{JsonValue, RawEntry, RawHeader};
use super::{CheckpointTensor, MAX_CHECKPOINT_TENSORS};
use crate::dtype::DType;
use crate::model::Shape;
use crate::units::Bytes;

/// Bytes of the little-endian header length that opens every file.
pub const LENGTH_PREFIX_BYTES: u64 = 8;

/// The longest header accepted: the safetensors crate's `MAX_HEADER_SIZE`.
pub const MAX_HEADER_BYTES: u64 = 100_000_000;

/// The dtype names the safetensors format defines (and trainmem knows), for
/// messages. `DType::from_safetensors` reads each of them.
pub const SAFETENSORS_DTYPES: &[&str] = &[
    "F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2", "F8_E8M0", "I64", "U64", "I32", "U32",
    "I16", "U16", "I8", "U8", "BOOL",
];

/// Dimensions a message lists before it abbreviates a shape.
const SHAPE_DIMS_SHOWN: usize = 8;

/// What a valid header says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Every tensor, in the order of its data in the file.
    pub tensors: Vec<CheckpointTensor>,
    /// The bytes of tensor data: the sum of every tensor's size, which is
    /// also the length of the data region.
    pub data_bytes: Bytes,
}

/// Parses the header at the start of `bytes`, the first bytes of a file of
/// `file_length` bytes (at least its length prefix and header; the tensor
/// data need not be there). Never panics; any problem is a lowercase message.
pub fn parse_header(bytes: &[u8], file_length: u64) -> Result<Header, String> {
    let prefix = bytes
        .get(..8)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .ok_or_else(|| {
            if file_length < LENGTH_PREFIX_BYTES {
                file_too_short(file_length)
            } else {
                format!(
                    "only {} bytes of the header were given; expected at least the 8-byte header length",
                    bytes.len()
                )
            }
        })?;
    let header_length = header_length(prefix, file_length)?;
    let json = usize::try_from(LENGTH_PREFIX_BYTES + header_length)
        .ok()
        .and_then(|end| bytes.get(8..end))
        .ok_or_else(|| {
            format!(
                "the header is cut short: only {} of its bytes follow the length prefix",
                bytes.len().saturating_sub(8)
            )
        })?;
    parse_json(json, Some(file_length))
}

/// Parses a header prefix kept without its tensor data: `bytes` is exactly
/// the 8-byte length and the header, as the hub cache's header-only copy of
/// a shard holds them (see `input::hub`). Every check of [`parse_header`]
/// applies except the one that needs the file: that the data ends it (made
/// when the prefix was fetched, against the server's total length).
pub fn parse_header_prefix(bytes: &[u8]) -> Result<Header, String> {
    let prefix = bytes
        .get(..8)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .ok_or_else(|| file_too_short(bytes.len() as u64))?;
    let header_length = header_length(prefix, bytes.len() as u64)?;
    // Cannot overflow: header_length <= MAX_HEADER_BYTES.
    if LENGTH_PREFIX_BYTES + header_length != bytes.len() as u64 {
        return Err(format!(
            "a header-only copy must hold exactly the 8-byte length and the {header_length}-byte header it names; it holds {} bytes",
            bytes.len()
        ));
    }
    parse_json(bytes.get(8..).unwrap_or_default(), None)
}

/// Reads the header from `reader`, positioned at the start of a file of
/// `file_length` bytes, reading exactly the length prefix and the header and
/// never the tensor data.
pub fn read_header<R: Read>(mut reader: R, file_length: u64) -> Result<Header, String> {
    if file_length < LENGTH_PREFIX_BYTES {
        return Err(file_too_short(file_length));
    }
    let mut prefix = [0u8; 8];
    reader
        .read_exact(&mut prefix)
        .map_err(|e| read_problem("the header length", &e))?;
    let header_length = header_length(prefix, file_length)?;
    // At most MAX_HEADER_BYTES, checked above, so this allocation is bounded.
    let length = usize::try_from(header_length)
        .map_err(|_| "the header length does not fit in memory".to_string())?;
    let mut json = vec![0u8; length];
    reader
        .read_exact(&mut json)
        .map_err(|e| read_problem("the header", &e))?;
    parse_json(&json, Some(file_length))
}

/// The header length from the first 8 bytes, checked against the cap and the
/// file length. A length that fails is not quoted: when the file is not a
/// safetensors file (a link to `/etc/passwd`) those 8 bytes are its content,
/// and a message must not print a file's content.
fn header_length(prefix: [u8; 8], file_length: u64) -> Result<u64, String> {
    let length = u64::from_le_bytes(prefix);
    if length > MAX_HEADER_BYTES {
        return Err(format!(
            "the header length in the first 8 bytes is larger than the {MAX_HEADER_BYTES}-byte limit of the safetensors format; the file is corrupt or not a safetensors file"
        ));
    }
    // Cannot overflow: length <= MAX_HEADER_BYTES.
    if LENGTH_PREFIX_BYTES + length > file_length {
        return Err(format!(
            "the header length in the first 8 bytes is larger than the file ({file_length} bytes); the file is truncated or not a safetensors file"
        ));
    }
    Ok(length)
}

fn file_too_short(file_length: u64) -> String {
    format!(
        "the file is {file_length} bytes, shorter than the 8-byte header length that starts every safetensors file; the file is truncated or not a safetensors file"
    )
}

fn read_problem(what: &str, error: &io::Error) -> String {
    if error.kind() == io::ErrorKind::UnexpectedEof {
        format!("the file ended while reading {what}; the file is truncated")
    } else {
        format!("cannot read {what}: {}", super::io_problem(error))
    }
}

/// Parses and validates the JSON text of a header, in a file of `file_length`
/// bytes (`None`: a header-only copy, whose data region is what it declares).
fn parse_json(json: &[u8], file_length: Option<u64>) -> Result<Header, String> {
    let text = std::str::from_utf8(json).map_err(|e| {
        format!(
            "the header is not valid utf-8 (bad byte at offset {} of the header); expected json text",
            e.valid_up_to()
        )
    })?;
    let raw: RawHeader = serde_json::from_str(text).map_err(|e| {
        if e.is_data() {
            format!(
                "the header is not a json object ({}); expected {{\"tensor name\": {{\"dtype\": \"F32\", \"shape\": [..], \"data_offsets\": [begin, end]}}, ..}}",
                super::json_position(&e)
            )
        } else {
            format!("the header is not valid json ({e}); expected a json object of tensors")
        }
    })?;
    let header_length = json.len() as u64;
    validate(raw, header_length, file_length)
}

/// A tensor entry that passed the checks on its own.
struct Entry {
    name: String,
    dtype: DType,
    dims: Vec<u64>,
    begin: u64,
    end: u64,
}

/// Checks a parsed header as the safetensors crate's `Metadata::validate`
/// and `read_metadata` do.
fn validate(
    raw: RawHeader,
    header_length: u64,
    file_length: Option<u64>,
) -> Result<Header, String> {
    if raw.too_many {
        return Err(format!(
            "the header names more than {MAX_CHECKPOINT_TENSORS} tensors; accepted: at most {MAX_CHECKPOINT_TENSORS} (the largest released checkpoints hold about 140,000)"
        ));
    }
    check_metadata(&raw.metadata)?;
    let mut names = HashSet::with_capacity(raw.entries.len());
    for (name, _) in &raw.entries {
        if !names.insert(name.as_str()) {
            let name = super::abbreviated(name);
            return Err(format!(
                "tensor `{name}` appears twice in the header; expected each name once"
            ));
        }
    }
    drop(names);

    let mut entries = raw
        .entries
        .into_iter()
        .map(|(name, entry)| check_entry(name, entry))
        .collect::<Result<Vec<Entry>, String>>()?;
    // As the crate does: order by offsets (writers may list tensors by name),
    // stable so that empty tensors at one offset keep their text order.
    entries.sort_by_key(|e| (e.begin, e.end));

    let mut data_end = 0u64;
    let mut previous: Option<&str> = None;
    for entry in &entries {
        if entry.begin != data_end {
            return Err(not_contiguous(entry, previous, data_end));
        }
        data_end = entry.end;
        previous = Some(&entry.name);
    }

    // A header-only copy: the data region is the one the header declares.
    let file_length = file_length.unwrap_or_else(|| {
        LENGTH_PREFIX_BYTES
            .saturating_add(header_length)
            .saturating_add(data_end)
    });
    let data_region = file_length
        .checked_sub(LENGTH_PREFIX_BYTES)
        .and_then(|rest| rest.checked_sub(header_length))
        .ok_or_else(|| {
            format!(
                "the header ({header_length} bytes) does not fit in the file ({file_length} bytes)"
            )
        })?;
    if data_end > data_region {
        return Err(format!(
            "the header describes {data_end} bytes of tensor data but the file holds only {data_region} after the header; the file is truncated"
        ));
    }
    if data_end < data_region {
        return Err(format!(
            "the file has {} bytes after the last tensor's data; expected the tensor data to end the file, as the safetensors crate requires",
            data_region - data_end
        ));
    }

    let tensors = entries
        .into_iter()
        .map(|e| {
            let shape = Shape::new(e.dims).map_err(|err| err.to_string())?;
            Ok(CheckpointTensor {
                name: e.name,
                shape,
                dtype: e.dtype,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Header {
        tensors,
        data_bytes: Bytes(data_end),
    })
}

/// `__metadata__`, if given once, must be an object of strings; its content is not used.
fn check_metadata(metadata: &[JsonValue]) -> Result<(), String> {
    match metadata {
        [] | [JsonValue::Object { all_strings: true }] => Ok(()),
        [JsonValue::Object { all_strings: false }] => Err(
            "`__metadata__` has a value that is not a string; expected an object of strings"
                .to_string(),
        ),
        [other] => Err(format!(
            "`__metadata__` is {}; expected an object of strings",
            other.describe()
        )),
        _ => {
            Err("`__metadata__` appears twice in the header; expected it at most once".to_string())
        }
    }
}

/// Checks one entry on its own: fields present and well typed, a known dtype,
/// and a byte range whose length is the shape's element count x the dtype's
/// size (checked).
fn check_entry(full_name: String, entry: RawEntry) -> Result<Entry, String> {
    let name = super::abbreviated(&full_name);
    let (dtype, shape, data_offsets) = match entry {
        RawEntry::NotObject(kind) => {
            return Err(format!(
                "tensor `{name}` is {kind}; expected an object with `dtype`, `shape` and `data_offsets`"
            ));
        }
        RawEntry::Object {
            repeated: Some(field),
            ..
        } => {
            return Err(format!(
                "tensor `{name}` gives `{field}` twice; expected each field once"
            ));
        }
        RawEntry::Object {
            dtype,
            shape,
            data_offsets,
            repeated: None,
        } => (dtype, shape, data_offsets),
    };
    let missing = |field: &str| {
        format!(
            "tensor `{name}` has no `{field}`; expected `dtype`, `shape` and `data_offsets` in every tensor"
        )
    };
    let dtype_text = match dtype.ok_or_else(|| missing("dtype"))? {
        JsonValue::Text(text) => text,
        other => {
            return Err(format!(
                "tensor `{name}` has `dtype` {}; expected a string such as `F32`",
                other.describe()
            ));
        }
    };
    let dtype = DType::from_safetensors(&dtype_text).ok_or_else(|| {
        format!(
            "tensor `{name}` has unknown dtype `{}`; accepted: {}",
            super::abbreviated(&dtype_text),
            SAFETENSORS_DTYPES.join(", ")
        )
    })?;
    let dims = match shape.ok_or_else(|| missing("shape"))? {
        JsonValue::Array(Ok(dims)) => dims,
        JsonValue::Array(Err(bad)) => {
            return Err(format!(
                "tensor `{name}` has shape dimension {}; expected `shape` to be an array of non-negative integers",
                bad.describe()
            ));
        }
        other => {
            return Err(format!(
                "tensor `{name}` has `shape` {}; expected an array of non-negative integers",
                other.describe()
            ));
        }
    };
    let (begin, end) = match data_offsets.ok_or_else(|| missing("data_offsets"))? {
        JsonValue::Array(Ok(offsets)) => match offsets.as_slice() {
            [begin, end] => (*begin, *end),
            other => {
                return Err(format!(
                    "tensor `{name}` has {} data_offsets; expected two, `[begin, end]`",
                    other.len()
                ));
            }
        },
        JsonValue::Array(Err(bad)) => {
            return Err(format!(
                "tensor `{name}` has data offset {}; expected `data_offsets` to be `[begin, end]`, two non-negative integers",
                bad.describe()
            ));
        }
        other => {
            return Err(format!(
                "tensor `{name}` has `data_offsets` {}; expected `[begin, end]`, two non-negative integers",
                other.describe()
            ));
        }
    };
    if begin > end {
        return Err(format!(
            "tensor `{name}` has data_offsets `[{begin}, {end}]` that end before they begin; expected begin <= end"
        ));
    }
    let elements = dims
        .iter()
        .try_fold(1u64, |product, d| product.checked_mul(*d))
        .ok_or_else(|| {
            format!(
                "tensor `{name}` has shape {} whose element count overflows 64 bits; expected a shape a file can hold",
                shape_text(&dims)
            )
        })?;
    let bytes = elements.checked_mul(dtype.bytes()).ok_or_else(|| {
        format!(
            "tensor `{name}` has shape {} of {dtype_text} whose byte count overflows 64 bits; expected a shape a file can hold",
            shape_text(&dims)
        )
    })?;
    if end - begin != bytes {
        return Err(format!(
            "tensor `{name}` has data_offsets `[{begin}, {end}]` spanning {} bytes, but shape {} of {dtype_text} takes {bytes} bytes ({elements} elements x {} bytes); the offsets are inconsistent with the dtype and shape",
            end - begin,
            shape_text(&dims),
            dtype.bytes()
        ));
    }
    Ok(Entry {
        name: full_name,
        dtype,
        dims,
        begin,
        end,
    })
}

/// The message for a tensor that does not begin where the previous one ends.
fn not_contiguous(entry: &Entry, previous: Option<&str>, data_end: u64) -> String {
    let (name, begin) = (super::abbreviated(&entry.name), entry.begin);
    match previous.map(super::abbreviated) {
        None => format!(
            "tensor `{name}` comes first in the data but begins at byte {begin}; expected the data_offsets to start at 0 with no gap"
        ),
        Some(previous) if begin < data_end => format!(
            "tensor `{name}` begins at byte {begin}, inside tensor `{previous}` which ends at byte {data_end}: the data_offsets overlap; expected each tensor to begin where the previous one ends"
        ),
        Some(previous) => format!(
            "tensor `{name}` begins at byte {begin} but tensor `{previous}` before it ends at byte {data_end}: the data_offsets leave a gap of {} bytes; expected each tensor to begin where the previous one ends",
            begin - data_end
        ),
    }
}

/// A shape for a message, abbreviated past a few dimensions.
fn shape_text(dims: &[u64]) -> String {
    match dims.get(..SHAPE_DIMS_SHOWN) {
        Some(shown) if dims.len() > SHAPE_DIMS_SHOWN => {
            let shown: Vec<String> = shown.iter().map(u64::to_string).collect();
            format!("[{}, .. ({} dimensions)]", shown.join(", "), dims.len())
        }
        _ => format!("{dims:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file's first bytes: the length prefix and the header text.
    fn file(json: &str) -> Vec<u8> {
        let mut bytes = (json.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(json.as_bytes());
        bytes
    }

    fn parse(json: &str, data: u64) -> Result<Header, String> {
        let bytes = file(json);
        parse_header(&bytes, bytes.len() as u64 + data)
    }

    /// A header-only copy parses as the whole file's header does; a copy
    /// with bytes past its header, or a length of 2^63, is refused.
    #[test]
    fn a_header_only_copy_is_checked_but_for_the_data() {
        let json = r#"{"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}"#;
        let copy = file(json);
        assert_eq!(parse_header_prefix(&copy), parse(json, 16));
        let mut longer = copy.clone();
        longer.push(b' ');
        assert!(
            parse_header_prefix(&longer)
                .unwrap_err()
                .contains("exactly")
        );
        let mut huge = copy;
        huge[..8].copy_from_slice(&(1u64 << 63).to_le_bytes());
        assert!(parse_header_prefix(&huge).unwrap_err().contains("limit"));
        let gap = r#"{"a": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}}"#;
        assert!(parse_header_prefix(&file(gap)).is_err());
    }

    #[test]
    fn every_listed_dtype_is_known() {
        for name in SAFETENSORS_DTYPES {
            assert!(DType::from_safetensors(name).is_some(), "{name}");
        }
    }

    #[test]
    fn reads_tensors_in_data_order() {
        let header = parse(
            r#"{"__metadata__": {"format": "pt"},
                "b": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [16, 28]},
                "a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                "s": {"dtype": "I64", "shape": [], "data_offsets": [28, 36]}}"#,
            36,
        )
        .unwrap();
        let names: Vec<&str> = header.tensors.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "s"]);
        assert_eq!(header.tensors[1].dtype, DType::Bf16);
        assert_eq!(header.tensors[1].shape.dims(), [2, 3]);
        assert_eq!(header.tensors[2].shape.dims(), [] as [u64; 0]);
        assert_eq!(header.data_bytes, Bytes(36));
    }

    #[test]
    fn accepts_an_empty_header_and_empty_tensors() {
        assert_eq!(parse("{}", 0).unwrap().tensors, []);
        let header = parse(
            r#"{"e": {"dtype": "F32", "shape": [0, 5], "data_offsets": [0, 0]},
                "f": {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]},
                "g": {"dtype": "U8", "shape": [3], "data_offsets": [0, 3]}}"#,
            3,
        )
        .unwrap();
        assert_eq!(header.tensors.len(), 3);
        assert_eq!(header.data_bytes, Bytes(3));
    }

    #[test]
    fn refuses_what_the_crate_refuses() {
        let cases: &[(&str, u64, &str)] = &[
            ("[]", 0, "not a json object"),
            ("{", 0, "not valid json"),
            (r#"{"a": 1}"#, 0, "tensor `a` is a number"),
            (
                r#"{"a": {"dtype": "F32", "shape": [1]}}"#,
                0,
                "no `data_offsets`",
            ),
            (
                r#"{"a": {"dtype": "F4", "shape": [1], "data_offsets": [0, 1]}}"#,
                1,
                "unknown dtype `F4`",
            ),
            (
                r#"{"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}}"#,
                4,
                "end before they begin",
            ),
            (
                r#"{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8]}}"#,
                4,
                "has 3 data_offsets",
            ),
            (
                r#"{"__metadata__": {"a": 1}}"#,
                0,
                "`__metadata__` has a value that is not a string",
            ),
            (r#"{"__metadata__": []}"#, 0, "`__metadata__` is an array"),
            (
                r#"{"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
                    "a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}}"#,
                2,
                "appears twice",
            ),
            (
                r#"{"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}"#,
                5,
                "4 bytes after the last tensor",
            ),
        ];
        for (json, data, needle) in cases {
            let problem = parse(json, *data).unwrap_err();
            assert!(problem.contains(needle), "{json}: {problem}");
        }
    }

    #[test]
    fn caps_the_header_length_before_allocating() {
        let mut bytes = u64::MAX.to_le_bytes().to_vec();
        bytes.push(b'{');
        let problem = parse_header(&bytes, u64::MAX).unwrap_err();
        assert!(problem.contains("100000000-byte limit"), "{problem}");
    }

    #[test]
    fn abbreviates_long_shapes() {
        assert_eq!(shape_text(&[1, 2]), "[1, 2]");
        assert_eq!(
            shape_text(&[1; 10]),
            "[1, 1, 1, 1, 1, 1, 1, 1, .. (10 dimensions)]"
        );
    }
}
