//! Safetensors headers and indexes as untrusted input: one test per attack,
//! valid files of every kind, a sparse 64 GiB file read through its header
//! alone, and properties that no bytes make the parsers panic.

use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use serde_json::{Value, json};
use tempfile::TempDir;
use trainmem::checkpoint::{
    Checkpoint, MAX_CHECKPOINT_TENSORS, MAX_HEADER_BYTES, MAX_INDEX_BYTES, parse_header,
    parse_header_prefix, parse_index, read_header, read_index, read_safetensors,
};
use trainmem::{Bytes, DType, Error, Result};

/// The bytes of a safetensors file: length prefix, header text, `data` zero bytes.
fn safetensors_bytes(header: &str, data: usize) -> Vec<u8> {
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.resize(bytes.len() + data, 0);
    bytes
}

/// Writes `bytes` to `name` in `dir`.
fn write(dir: &TempDir, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.path().join(name);
    fs::write(&path, bytes).unwrap();
    path
}

/// A fresh folder under the system's temporary folder, removed on drop.
fn temp_dir() -> TempDir {
    tempfile::Builder::new()
        .prefix("trainmem-checkpoint-")
        .tempdir_in(std::env::temp_dir())
        .unwrap()
}

/// Writes one file and reads it with `read_safetensors`.
fn read_bytes(bytes: &[u8]) -> (TempDir, PathBuf, Result<Checkpoint>) {
    let dir = temp_dir();
    let path = write(&dir, "model.safetensors", bytes);
    let result = read_safetensors(&path);
    (dir, path, result)
}

/// Asserts `result` is an `Error::File` for `path` whose problem is
/// lowercase and contains every needle.
fn assert_file_error(result: Result<Checkpoint>, path: &Path, needles: &[&str]) {
    match result {
        Err(Error::File {
            path: error_path,
            problem,
        }) => {
            assert_eq!(error_path, path.display().to_string(), "{problem}");
            assert!(
                problem.chars().next().is_some_and(|c| !c.is_uppercase()),
                "problem not lowercase: {problem}"
            );
            for needle in needles {
                assert!(
                    problem.contains(needle),
                    "problem lacks `{needle}`: {problem}"
                );
            }
        }
        other => panic!("expected Error::File for {}, got {other:?}", path.display()),
    }
}

/// Writes a header and its data, and asserts reading fails with the needles.
fn assert_header_refused(header: &str, data: usize, needles: &[&str]) {
    let (_dir, path, result) = read_bytes(&safetensors_bytes(header, data));
    assert_file_error(result, &path, needles);
}

const ONE_F32: &str = r#"{"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}"#;

// ---- attacks on a single file ----

#[test]
fn file_shorter_than_the_length_prefix() {
    let (_dir, path, result) = read_bytes(&[1, 2, 3]);
    assert_file_error(
        result,
        &path,
        &["3 bytes", "shorter than the 8-byte header length"],
    );
    let (_dir, path, result) = read_bytes(&[]);
    assert_file_error(result, &path, &["0 bytes", "truncated"]);
}

#[test]
fn header_cut_short() {
    let bytes = safetensors_bytes(ONE_F32, 16);
    let (_dir, path, result) = read_bytes(&bytes[..20]);
    assert_file_error(
        result,
        &path,
        &[
            "header length",
            "larger than the file (20 bytes)",
            "truncated",
        ],
    );
}

#[test]
fn data_cut_short() {
    let bytes = safetensors_bytes(ONE_F32, 16);
    let (_dir, path, result) = read_bytes(&bytes[..bytes.len() - 5]);
    assert_file_error(
        result,
        &path,
        &[
            "describes 16 bytes of tensor data",
            "holds only 11",
            "truncated",
        ],
    );
}

#[test]
fn header_length_u64_max() {
    let mut bytes = u64::MAX.to_le_bytes().to_vec();
    bytes.extend_from_slice(b"{}");
    let (_dir, path, result) = read_bytes(&bytes);
    assert_file_error(result, &path, &["larger than the 100000000-byte limit"]);
}

#[test]
fn header_length_just_over_the_cap() {
    // A sparse file long enough to hold the header: only the cap refuses it.
    let dir = temp_dir();
    let path = dir.path().join("model.safetensors");
    let file = File::create(&path).unwrap();
    let mut prefix = (MAX_HEADER_BYTES + 1).to_le_bytes().to_vec();
    prefix.push(b'{');
    fs::write(&path, &prefix).unwrap();
    file.set_len(MAX_HEADER_BYTES * 2).unwrap();
    assert_file_error(
        read_safetensors(&path),
        &path,
        &["larger than the 100000000-byte limit"],
    );
}

#[test]
fn header_length_past_the_end_of_the_file() {
    let mut bytes = 1000u64.to_le_bytes().to_vec();
    bytes.extend_from_slice(b"{}");
    let (_dir, path, result) = read_bytes(&bytes);
    assert_file_error(
        result,
        &path,
        &["header length", "larger than the file (10 bytes)"],
    );
}

#[test]
fn header_not_utf8() {
    let mut header = b"{\"w\xff\": {}}".to_vec();
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.append(&mut header);
    let (_dir, path, result) = read_bytes(&bytes);
    assert_file_error(result, &path, &["not valid utf-8", "offset 3"]);
}

#[test]
fn header_not_json() {
    assert_header_refused(
        r#"{"w": {"dtype": "F32""#,
        0,
        &["not valid json", "expected"],
    );
    assert_header_refused("{} trailing", 0, &["not valid json"]);
}

#[test]
fn header_json_not_an_object() {
    assert_header_refused("[1, 2]", 0, &["not a json object", "expected"]);
    assert_header_refused("\"F32\"", 0, &["not a json object"]);
    assert_header_refused("null", 0, &["not a json object"]);
}

#[test]
fn tensor_entry_not_an_object() {
    assert_header_refused(r#"{"w": [0, 16]}"#, 0, &["tensor `w` is an array"]);
}

#[test]
fn unknown_dtype() {
    assert_header_refused(
        r#"{"w": {"dtype": "F4", "shape": [2], "data_offsets": [0, 1]}}"#,
        1,
        &["tensor `w`", "unknown dtype `F4`", "accepted: F64, F32"],
    );
    assert_header_refused(
        r#"{"w": {"dtype": 32, "shape": [2], "data_offsets": [0, 8]}}"#,
        8,
        &["tensor `w` has `dtype` `32`", "expected a string"],
    );
}

#[test]
fn negative_dimension() {
    assert_header_refused(
        r#"{"w": {"dtype": "F32", "shape": [2, -3], "data_offsets": [0, 0]}}"#,
        0,
        &["tensor `w`", "`-3` (negative)", "non-negative integers"],
    );
}

#[test]
fn non_integer_dimension() {
    assert_header_refused(
        r#"{"w": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}}"#,
        4,
        &["tensor `w`", "`1.5` (not an integer)"],
    );
    assert_header_refused(
        r#"{"w": {"dtype": "F32", "shape": ["3"], "data_offsets": [0, 12]}}"#,
        12,
        &["the string `\"3\"`", "non-negative integers"],
    );
    assert_header_refused(
        r#"{"w": {"dtype": "F32", "shape": [1e30], "data_offsets": [0, 4]}}"#,
        4,
        &["too large for 64 bits"],
    );
    assert_header_refused(
        r#"{"w": {"dtype": "F32", "shape": 3, "data_offsets": [0, 12]}}"#,
        12,
        &["tensor `w` has `shape` `3`", "expected an array"],
    );
}

#[test]
fn shape_product_overflow() {
    assert_header_refused(
        r#"{"w": {"dtype": "U8", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}}"#,
        0,
        &["tensor `w`", "element count overflows 64 bits"],
    );
    // The element count fits; times 4 bytes it does not.
    assert_header_refused(
        r#"{"w": {"dtype": "F32", "shape": [4611686018427387904], "data_offsets": [0, 0]}}"#,
        0,
        &["tensor `w`", "byte count overflows 64 bits"],
    );
}

#[test]
fn offsets_inconsistent_with_dtype_and_shape() {
    assert_header_refused(
        r#"{"w": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 16]}}"#,
        16,
        &[
            "spanning 16 bytes",
            "takes 8 bytes (4 elements x 2 bytes)",
            "inconsistent",
        ],
    );
}

#[test]
fn offsets_reversed() {
    assert_header_refused(
        r#"{"w": {"dtype": "F32", "shape": [0], "data_offsets": [8, 0]}}"#,
        8,
        &["`[8, 0]`", "end before they begin"],
    );
}

#[test]
fn overlapping_offsets() {
    assert_header_refused(
        r#"{"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
            "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}}"#,
        24,
        &["tensor `b` begins at byte 8, inside tensor `a`", "overlap"],
    );
}

#[test]
fn gapped_offsets() {
    assert_header_refused(
        r#"{"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
            "b": {"dtype": "F32", "shape": [4], "data_offsets": [20, 36]}}"#,
        36,
        &["tensor `b` begins at byte 20", "gap of 4 bytes"],
    );
    assert_header_refused(
        r#"{"a": {"dtype": "F32", "shape": [4], "data_offsets": [4, 20]}}"#,
        20,
        &["tensor `a` comes first", "begins at byte 4", "start at 0"],
    );
}

#[test]
fn bytes_after_the_data() {
    assert_header_refused(ONE_F32, 20, &["4 bytes after the last tensor's data"]);
}

#[test]
fn missing_fields() {
    for (header, field) in [
        (r#"{"w": {"shape": [1], "data_offsets": [0, 4]}}"#, "dtype"),
        (
            r#"{"w": {"dtype": "F32", "data_offsets": [0, 4]}}"#,
            "shape",
        ),
        (r#"{"w": {"dtype": "F32", "shape": [1]}}"#, "data_offsets"),
    ] {
        assert_header_refused(header, 4, &[&format!("tensor `w` has no `{field}`")]);
    }
    assert_header_refused(
        r#"{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0]}}"#,
        4,
        &["has 1 data_offsets; expected two"],
    );
}

#[test]
fn metadata_not_a_string_map() {
    assert_header_refused(
        r#"{"__metadata__": {"format": ["pt"]}}"#,
        0,
        &["`__metadata__` has a value that is not a string"],
    );
}

#[test]
fn folder_instead_of_a_file() {
    let dir = temp_dir();
    assert_file_error(
        read_safetensors(dir.path()),
        dir.path(),
        &["not a regular file"],
    );
}

#[test]
fn missing_file() {
    let dir = temp_dir();
    let path = dir.path().join("absent.safetensors");
    assert_file_error(read_safetensors(&path), &path, &["does not exist"]);
}

// ---- valid files ----

#[test]
fn reads_several_dtypes_and_a_scalar() {
    let header = r#"{"__metadata__": {"format": "pt"},
        "embed.weight": {"dtype": "F32", "shape": [4, 3], "data_offsets": [0, 48]},
        "norm.weight": {"dtype": "BF16", "shape": [3], "data_offsets": [48, 54]},
        "position_ids": {"dtype": "I64", "shape": [1, 4], "data_offsets": [54, 86]},
        "mask": {"dtype": "BOOL", "shape": [2, 2], "data_offsets": [86, 90]},
        "quant.weight": {"dtype": "F8_E4M3", "shape": [3, 3], "data_offsets": [90, 99]},
        "quant.scale": {"dtype": "F32", "shape": [], "data_offsets": [99, 103]}}"#;
    let (_dir, path, result) = read_bytes(&safetensors_bytes(header, 103));
    let checkpoint = result.unwrap();
    let tensors: Vec<(&str, DType, &[u64])> = checkpoint
        .tensors
        .iter()
        .map(|t| (t.name.as_str(), t.dtype, t.shape.dims()))
        .collect();
    assert_eq!(
        tensors,
        [
            ("embed.weight", DType::Fp32, &[4, 3][..]),
            ("norm.weight", DType::Bf16, &[3][..]),
            ("position_ids", DType::Int64, &[1, 4][..]),
            ("mask", DType::Bool, &[2, 2][..]),
            ("quant.weight", DType::Fp8E4m3, &[3, 3][..]),
            ("quant.scale", DType::Fp32, &[][..]),
        ]
    );
    assert_eq!(checkpoint.tensors[5].shape.elements().0, 1);
    assert_eq!(checkpoint.data_bytes, Bytes(103));
    assert_eq!(checkpoint.files, [path]);
}

#[test]
fn reads_tensors_listed_out_of_data_order() {
    let header = r#"{"b": {"dtype": "U8", "shape": [2], "data_offsets": [4, 6]},
        "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}"#;
    let (_dir, _path, result) = read_bytes(&safetensors_bytes(header, 6));
    let names: Vec<String> = result
        .unwrap()
        .tensors
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["a", "b"]);
}

/// A header padded with spaces to `length` bytes, as writers pad to 8.
fn padded(json: &str, length: usize) -> String {
    assert!(json.len() <= length, "header longer than {length}");
    format!("{json:length$}")
}

/// A header whose last tensor covers the data up to `file_length`.
fn header_filling(file_length: u64, header_length: usize) -> String {
    let data = file_length - 8 - header_length as u64;
    let big = data - 16;
    let json = format!(
        r#"{{"small": {{"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}, "huge": {{"dtype": "BF16", "shape": [{}], "data_offsets": [16, {data}]}}}}"#,
        big / 2
    );
    padded(&json, header_length)
}

/// A reader that counts the bytes it hands out.
struct Counting<R> {
    inner: R,
    bytes: u64,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }
}

#[test]
fn sparse_64_gib_file_reads_only_its_header() {
    const HEADER_LENGTH: usize = 256;
    let dir = temp_dir();

    let sparse_length = 64u64 << 30;
    let sparse = dir.path().join("sparse.safetensors");
    let mut bytes = safetensors_bytes(&header_filling(sparse_length, HEADER_LENGTH), 0);
    bytes.extend_from_slice(&[1; 16]);
    fs::write(&sparse, &bytes).unwrap();
    File::options()
        .write(true)
        .open(&sparse)
        .unwrap()
        .set_len(sparse_length)
        .unwrap();

    let small_length = 1u64 << 20;
    let small = write(
        &dir,
        "small.safetensors",
        &safetensors_bytes(
            &header_filling(small_length, HEADER_LENGTH),
            (small_length - 8 - HEADER_LENGTH as u64) as usize,
        ),
    );

    let big = read_safetensors(&sparse).unwrap();
    let little = read_safetensors(&small).unwrap();

    assert_eq!(
        big.data_bytes,
        Bytes(sparse_length - 8 - HEADER_LENGTH as u64)
    );
    assert_eq!(big.tensors[1].name, "huge");
    assert_eq!(
        big.tensors[1]
            .dtype
            .size_of(big.tensors[1].shape.elements())
            .unwrap(),
        Bytes(sparse_length - 8 - HEADER_LENGTH as u64 - 16)
    );
    assert_eq!(
        little.data_bytes,
        Bytes(small_length - 8 - HEADER_LENGTH as u64)
    );
    // Only the length prefix and the header are read, never the data: the
    // bytes are counted (a time would depend on the machine and the build).
    let mut counting = Counting {
        inner: File::open(&sparse).unwrap(),
        bytes: 0,
    };
    let header = read_header(&mut counting, sparse_length).unwrap();
    assert_eq!(counting.bytes, 8 + HEADER_LENGTH as u64);
    assert_eq!(header.tensors, big.tensors);
}

// ---- indexes ----

/// Writes a two-shard checkpoint into `dir`; returns the index path.
fn two_shards(dir: &TempDir, weight_map: Value) -> PathBuf {
    write(
        dir,
        "model-00001-of-00002.safetensors",
        &safetensors_bytes(
            r#"{"embed.weight": {"dtype": "BF16", "shape": [8, 4], "data_offsets": [0, 64]},
                "layers.0.weight": {"dtype": "BF16", "shape": [4, 4], "data_offsets": [64, 96]}}"#,
            96,
        ),
    );
    write(
        dir,
        "model-00002-of-00002.safetensors",
        &safetensors_bytes(
            r#"{"lm_head.weight": {"dtype": "F32", "shape": [8, 4], "data_offsets": [0, 128]}}"#,
            128,
        ),
    );
    let index = json!({"metadata": {"total_size": 224}, "weight_map": weight_map});
    write(
        dir,
        "model.safetensors.index.json",
        index.to_string().as_bytes(),
    )
}

fn good_weight_map() -> Value {
    json!({
        "lm_head.weight": "model-00002-of-00002.safetensors",
        "embed.weight": "model-00001-of-00002.safetensors",
        "layers.0.weight": "model-00001-of-00002.safetensors",
    })
}

#[test]
fn reads_a_two_shard_index() {
    let dir = temp_dir();
    let index = two_shards(&dir, good_weight_map());
    let checkpoint = read_index(&index).unwrap();
    let names: Vec<&str> = checkpoint.tensors.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["embed.weight", "layers.0.weight", "lm_head.weight"]);
    assert_eq!(checkpoint.data_bytes, Bytes(224));
    assert_eq!(
        checkpoint.files,
        [
            dir.path().join("model-00001-of-00002.safetensors"),
            dir.path().join("model-00002-of-00002.safetensors"),
        ]
    );
}

#[test]
fn index_not_json() {
    let dir = temp_dir();
    let path = write(&dir, "model.safetensors.index.json", b"{\"weight_map\": {");
    assert_file_error(read_index(&path), &path, &["not valid json", "weight_map"]);
    let path = write(&dir, "model.safetensors.index.json", b"{\"metadata\": {}}");
    assert_file_error(read_index(&path), &path, &["missing field `weight_map`"]);
    let path = write(
        &dir,
        "model.safetensors.index.json",
        b"{\"weight_map\": [\"a\"]}",
    );
    assert_file_error(read_index(&path), &path, &["not a safetensors index"]);
}

#[test]
fn index_too_large() {
    let dir = temp_dir();
    let path = write(&dir, "model.safetensors.index.json", b"{");
    File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(MAX_INDEX_BYTES + 1)
        .unwrap();
    assert_file_error(read_index(&path), &path, &["over the 67108864-byte limit"]);
}

#[test]
fn index_naming_a_missing_shard() {
    let dir = temp_dir();
    let mut weight_map = good_weight_map();
    weight_map["extra.weight"] = json!("model-00003-of-00003.safetensors");
    let index = two_shards(&dir, weight_map);
    assert_file_error(
        read_index(&index),
        &index,
        &["shard `model-00003-of-00003.safetensors`", "does not exist"],
    );
}

#[test]
fn index_naming_a_tensor_absent_from_its_shard() {
    let dir = temp_dir();
    let mut weight_map = good_weight_map();
    weight_map["layers.1.weight"] = json!("model-00002-of-00002.safetensors");
    let index = two_shards(&dir, weight_map);
    assert_file_error(
        read_index(&index),
        &index,
        &[
            "tensor `layers.1.weight`",
            "shard `model-00002-of-00002.safetensors`",
            "has no tensor",
        ],
    );
}

#[test]
fn index_with_a_parent_folder_shard_path() {
    let dir = temp_dir();
    // A valid shard above the index's folder, which the index must not reach.
    write(&dir, "outside.safetensors", &safetensors_bytes(ONE_F32, 16));
    let inner = dir.path().join("model");
    fs::create_dir(&inner).unwrap();
    let index = inner.join("model.safetensors.index.json");
    fs::write(&index, r#"{"weight_map": {"w": "../outside.safetensors"}}"#).unwrap();
    assert_file_error(
        read_index(&index),
        &index,
        &["`../outside.safetensors`", "not a plain file name"],
    );
    fs::write(
        &index,
        r#"{"weight_map": {"w": "sub/../../outside.safetensors"}}"#,
    )
    .unwrap();
    assert_file_error(read_index(&index), &index, &["not a plain file name"]);
    fs::write(
        &index,
        r#"{"weight_map": {"w": "..\\outside.safetensors"}}"#,
    )
    .unwrap();
    assert_file_error(read_index(&index), &index, &["not a plain file name"]);
}

/// A secret-like file whose first 8 bytes, read as a header length, are
/// the integer the old message printed: `root:x:0` is 3475222254926655346.
const PASSWD_LIKE: &[u8] = b"root:x:0:0:root:/root:/bin/bash\n";

#[cfg(unix)]
#[test]
fn index_with_a_shard_linked_outside_its_folder() {
    let dir = temp_dir();
    let secret = write(&dir, "passwd", PASSWD_LIKE);
    let inner = dir.path().join("model");
    fs::create_dir(&inner).unwrap();
    std::os::unix::fs::symlink(&secret, inner.join("model.safetensors")).unwrap();
    let index = inner.join("model.safetensors.index.json");
    fs::write(&index, r#"{"weight_map": {"w": "model.safetensors"}}"#).unwrap();
    let result = read_index(&index);
    let message = format!("{result:?}");
    assert!(!message.contains("3475222254926655346"), "{message}");
    assert!(!message.contains("root"), "{message}");
    assert_file_error(
        result,
        &index,
        &["shard `model.safetensors`", "outside the index's folder"],
    );
}

#[cfg(unix)]
#[test]
fn index_with_shards_linked_inside_its_folder_or_the_hub_cache() {
    // A link within the folder is followed.
    let dir = temp_dir();
    let index = two_shards(&dir, good_weight_map());
    let first = dir.path().join("model-00001-of-00002.safetensors");
    fs::rename(&first, dir.path().join("real.bin")).unwrap();
    std::os::unix::fs::symlink("real.bin", &first).unwrap();
    assert_eq!(read_index(&index).unwrap().tensors.len(), 3);

    // The Hugging Face cache: every file of snapshots/<revision>/ links into blobs/.
    let cache = temp_dir();
    let blobs = cache.path().join("blobs");
    let snapshot = cache.path().join("snapshots").join("abc123");
    fs::create_dir_all(&snapshot).unwrap();
    for entry in fs::read_dir(dir.path()).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_symlink() {
            continue;
        }
        fs::create_dir_all(&blobs).unwrap();
        let name = entry.file_name().to_string_lossy().to_string();
        let blob = blobs.join(format!("blob-{name}"));
        fs::copy(entry.path(), &blob).unwrap();
        let linked = if name == "real.bin" {
            "model-00001-of-00002.safetensors".to_string()
        } else {
            name
        };
        std::os::unix::fs::symlink(
            Path::new("../..")
                .join("blobs")
                .join(blob.file_name().unwrap()),
            snapshot.join(linked),
        )
        .unwrap();
    }
    let checkpoint = read_index(&snapshot.join("model.safetensors.index.json")).unwrap();
    assert_eq!(checkpoint.tensors.len(), 3);
}

#[test]
fn a_header_length_from_a_foreign_file_is_not_printed() {
    let (_dir, path, result) = read_bytes(PASSWD_LIKE);
    let message = format!("{result:?}");
    assert!(!message.contains("3475222254926655346"), "{message}");
    assert_file_error(
        result,
        &path,
        &[
            "header length in the first 8 bytes",
            "not a safetensors file",
        ],
    );
    // A plausible length past the end of the file is not quoted either.
    let mut bytes = 4000u64.to_le_bytes().to_vec();
    bytes.extend_from_slice(b"{}");
    let (_dir, path, result) = read_bytes(&bytes);
    assert!(!format!("{result:?}").contains("4000"));
    assert_file_error(result, &path, &["larger than the file (10 bytes)"]);
}

#[test]
fn json_errors_do_not_quote_file_content() {
    assert_header_refused(r#""secret-token""#, 0, &["not a json object", "line 1"]);
    let (_dir, _path, result) = read_bytes(&safetensors_bytes(r#""secret-token""#, 0));
    assert!(!format!("{result:?}").contains("secret-token"));
    let problem = parse_index(br#"{"weight_map": {"a": "ok.safetensors", "b": ["secret-token"]}}"#)
        .unwrap_err();
    assert!(!problem.contains("secret-token"), "{problem}");
    let problem = parse_index(br#"{"metadata": {}}"#).unwrap_err();
    assert!(problem.contains("missing field `weight_map`"), "{problem}");
}

#[test]
fn long_names_from_a_file_are_abbreviated_in_messages() {
    let long = "x".repeat(100_000);
    for header in [
        format!(r#"{{"{long}": 0}}"#),
        format!(r#"{{"w": {{"dtype": "{long}", "shape": [1], "data_offsets": [0, 1]}}}}"#),
        format!(r#"{{"w": {{"dtype": "U8", "shape": ["{long}"], "data_offsets": [0, 1]}}}}"#),
        format!(r#"{{"{long}": {{"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}}}}"#),
    ] {
        let (_dir, _path, result) = read_bytes(&safetensors_bytes(&header, 2));
        let message = result.unwrap_err().to_string();
        assert!(message.len() < 1_000, "{} bytes", message.len());
        assert!(message.contains("xxx..."), "{message}");
    }
    let index = format!(r#"{{"weight_map": {{"{long}": "../{long}"}}}}"#);
    let problem = parse_index(index.as_bytes()).unwrap_err();
    assert!(problem.len() < 1_000, "{} bytes", problem.len());
}

#[test]
fn too_many_tensors_are_refused_without_being_stored() {
    // Entries past the cap are not even checked: `0` is not a tensor.
    let mut json = String::from("{");
    for index in 0..=MAX_CHECKPOINT_TENSORS {
        json.push_str(&format!("\"t{index}\":0,"));
    }
    json.pop();
    json.push('}');
    assert_header_refused(&json, 0, &["more than 262144 tensors"]);
    let mut index = String::from(r#"{"weight_map": {"#);
    for tensor in 0..=MAX_CHECKPOINT_TENSORS {
        index.push_str(&format!("\"t{tensor}\":\"m.safetensors\","));
    }
    index.pop();
    index.push_str("}}");
    let problem = parse_index(index.as_bytes()).unwrap_err();
    assert!(problem.contains("more than 262144 tensors"), "{problem}");
}

#[test]
fn index_with_an_absolute_shard_path() {
    let dir = temp_dir();
    let outside = write(&dir, "outside.safetensors", &safetensors_bytes(ONE_F32, 16));
    let index_path = dir.path().join("model.safetensors.index.json");
    let index = json!({"weight_map": {"w": outside.display().to_string()}});
    fs::write(&index_path, index.to_string()).unwrap();
    assert_file_error(
        read_index(&index_path),
        &index_path,
        &["not a plain file name", "absolute paths"],
    );
}

#[test]
fn index_with_a_tensor_in_two_shards() {
    let dir = temp_dir();
    write(
        &dir,
        "model-00001-of-00002.safetensors",
        &safetensors_bytes(ONE_F32, 16),
    );
    write(
        &dir,
        "model-00002-of-00002.safetensors",
        &safetensors_bytes(
            r#"{"v": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                "w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [4, 20]}}"#,
            20,
        ),
    );
    let index = write(
        &dir,
        "model.safetensors.index.json",
        br#"{"weight_map": {"w": "model-00001-of-00002.safetensors", "v": "model-00002-of-00002.safetensors"}}"#,
    );
    assert_file_error(read_index(&index), &index, &["tensor `w` is in both shard"]);
}

#[test]
fn index_with_a_broken_shard_names_the_shard() {
    let dir = temp_dir();
    let index = two_shards(&dir, good_weight_map());
    let shard = write(&dir, "model-00002-of-00002.safetensors", &[0; 4]);
    assert_file_error(read_index(&index), &shard, &["shorter than the 8-byte"]);
}

// ---- properties ----

const DTYPE_NAMES: &[&str] = &["F32", "BF16", "F16", "I64", "BOOL", "F8_E4M3", "U8", "F64"];

fn dtype_size(name: &str) -> u64 {
    DType::from_safetensors(name).unwrap().bytes()
}

/// Any JSON number, including the ones a shape must refuse.
fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        (0u64..8).prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e30f64..1e30).prop_map(Value::from),
    ]
}

/// A value for a field: mostly plausible, sometimes of the wrong kind.
fn field(plausible: impl Strategy<Value = Value>) -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        6 => plausible.prop_map(Some),
        1 => Just(None),
        1 => number().prop_map(Some),
        1 => "[a-zA-Z0-9_]{0,6}".prop_map(|s| Some(Value::from(s))),
        1 => Just(Some(json!({"nested": [1, {"a": null}]}))),
    ]
}

/// A tensor entry, well-formed or not.
fn entry() -> impl Strategy<Value = Value> {
    let dtype = prop_oneof![
        proptest::sample::select(DTYPE_NAMES).prop_map(Value::from),
        "[A-Z0-9_]{0,8}".prop_map(Value::from),
    ];
    let shape = proptest::collection::vec(number(), 0..4).prop_map(Value::from);
    let offsets = proptest::collection::vec(
        prop_oneof![(0u64..64).prop_map(Value::from), number()],
        0..4,
    )
    .prop_map(Value::from);
    (field(dtype), field(shape), field(offsets)).prop_map(|(dtype, shape, offsets)| {
        let mut object = serde_json::Map::new();
        for (key, value) in [
            ("dtype", dtype),
            ("shape", shape),
            ("data_offsets", offsets),
        ] {
            if let Some(value) = value {
                object.insert(key.to_string(), value);
            }
        }
        Value::Object(object)
    })
}

/// A JSON-ish header: an object of entries, maybe `__metadata__`, then maybe
/// cut or with a byte flipped.
fn jsonish_header() -> impl Strategy<Value = Vec<u8>> {
    let entries = proptest::collection::vec(
        (
            prop_oneof![
                "[a-c]{1,2}".prop_map(String::from),
                Just("__metadata__".to_string())
            ],
            prop_oneof![4 => entry(), 1 => number(), 1 => Just(json!({"k": "v"}))],
        ),
        0..5,
    );
    (
        entries,
        any::<u8>(),
        0usize..4,
        any::<prop::sample::Index>(),
    )
        .prop_map(|(entries, byte, damage, at)| {
            let object: serde_json::Map<String, Value> = entries.into_iter().collect();
            let mut text = Value::Object(object).to_string().into_bytes();
            let position = at.index(text.len());
            match damage {
                0 => text.truncate(position),
                1 => text[position] = byte,
                _ => {}
            }
            text
        })
}

/// Valid tensors: (dtype name, dims), laid out in order.
fn valid_tensors() -> impl Strategy<Value = Vec<(&'static str, Vec<u64>)>> {
    proptest::collection::vec(
        (
            proptest::sample::select(DTYPE_NAMES),
            proptest::collection::vec(0u64..6, 0..4),
        ),
        0..8,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn parse_header_never_panics_on_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..256), extra in any::<u64>()) {
        let _ = parse_header(&bytes, bytes.len() as u64);
        let _ = parse_header(&bytes, extra);
        let _ = parse_header_prefix(&bytes);
    }

    #[test]
    fn parse_header_never_panics_on_jsonish_headers(header in jsonish_header(), data in 0u64..128, huge in any::<bool>()) {
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(&header);
        let file_length = if huge { u64::MAX } else { bytes.len() as u64 + data };
        let _ = parse_header(&bytes, file_length);
        let _ = parse_header_prefix(&bytes);
    }

    #[test]
    fn parse_index_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256), jsonish in jsonish_header()) {
        let _ = parse_index(&bytes);
        let _ = parse_index(&jsonish);
        let mut wrapped = b"{\"weight_map\": ".to_vec();
        wrapped.extend_from_slice(&jsonish);
        wrapped.push(b'}');
        let _ = parse_index(&wrapped);
    }

    #[test]
    fn valid_headers_read_back(tensors in valid_tensors()) {
        let mut object = serde_json::Map::new();
        let mut end = 0u64;
        for (i, (dtype, dims)) in tensors.iter().enumerate() {
            let size = dims.iter().product::<u64>() * dtype_size(dtype);
            object.insert(
                format!("t{i}"),
                json!({"dtype": dtype, "shape": dims, "data_offsets": [end, end + size]}),
            );
            end += size;
        }
        let text = Value::Object(object).to_string();
        let mut bytes = (text.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(text.as_bytes());
        let header = parse_header(&bytes, bytes.len() as u64 + end).unwrap();
        prop_assert_eq!(header.data_bytes, Bytes(end));
        prop_assert_eq!(header.tensors.len(), tensors.len());
        for (read, (dtype, dims)) in header.tensors.iter().zip(&tensors) {
            prop_assert_eq!(read.shape.dims(), dims.as_slice());
            prop_assert_eq!(Some(read.dtype), DType::from_safetensors(dtype));
        }
    }
}
