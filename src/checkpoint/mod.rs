//! Checkpoints: tensor names, shapes and dtypes read from safetensors headers
//! (never the tensor data), single files or sharded through an index.
//!
//! Both files are untrusted input: sizes are capped before anything is
//! allocated, every problem is an [`Error::File`] naming the file, and
//! nothing panics. [`parse_header`] and [`parse_index`] are the pure parsers
//! (for property tests and fuzzing); [`read_safetensors`] and [`read_index`]
//! open the files.

mod header;
mod index;
mod raw_header;
pub(crate) mod regular_file;

use std::collections::{HashMap, HashSet};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

pub use header::{
    Header, LENGTH_PREFIX_BYTES, MAX_HEADER_BYTES, SAFETENSORS_DTYPES, parse_header,
    parse_header_prefix, read_header,
};
pub use index::{Index, MAX_INDEX_BYTES, MAX_SHARDS, is_plain_file_name, parse_index};
pub(crate) use regular_file::{kind as file_kind, open_regular_file};

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::model::Shape;
use crate::units::Bytes;

/// The most tensors a checkpoint (one file, or every shard of an index
/// together) may hold. The largest released checkpoints hold about 140,000
/// (Kimi K2: 61 layers of 384 unfused experts, each weight with an fp8
/// scale); 2^18 leaves room above that while bounding what every estimate
/// walks (about 0.2 s and 50 MB for `estimate` in a release build).
pub const MAX_CHECKPOINT_TENSORS: usize = 1 << 18;

/// The error phrase for a checkpoint past [`MAX_CHECKPOINT_TENSORS`].
pub(crate) fn too_many_tensors() -> String {
    format!(
        "the checkpoint holds more than {MAX_CHECKPOINT_TENSORS} tensors; accepted: at most {MAX_CHECKPOINT_TENSORS} (the largest released checkpoints hold about 140,000)"
    )
}

/// What a checkpoint's headers say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// Every tensor of every shard, shard by shard (shard file names sorted),
    /// each shard's tensors in the order of their data in the file (the
    /// header's order for files the safetensors crate writes).
    pub tensors: Vec<CheckpointTensor>,
    /// The files read (one, or every shard of an index).
    pub files: Vec<PathBuf>,
    /// The bytes of tensor data the headers describe (what loading costs).
    pub data_bytes: Bytes,
}

/// One tensor of a checkpoint header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointTensor {
    /// Its name: `model.layers.0.self_attn.q_proj.weight`.
    pub name: String,
    /// Its shape.
    pub shape: Shape,
    /// The dtype it is stored in.
    pub dtype: DType,
}

/// Reads the header of one `.safetensors` file: its length prefix and JSON
/// header, never the tensor data. Tensors come in the order of their data.
pub fn read_safetensors(path: &Path) -> Result<Checkpoint> {
    let header = read_file_header(path)?;
    Ok(Checkpoint {
        tensors: header.tensors,
        files: vec![path.to_path_buf()],
        data_bytes: header.data_bytes,
    })
}

/// Reads a `model.safetensors.index.json` and the header of every shard it
/// names (shard file names sorted), checking that each tensor of
/// `weight_map` is in its shard and no tensor is in two shards.
pub fn read_index(path: &Path) -> Result<Checkpoint> {
    read_index_with_copies(path, None)
}

/// [`read_index`], where a shard absent from the index's folder is read from
/// its header-only copy `{shard}.header` in `copies` when one is given (the
/// hub cache keeps fetched headers so: see `input::hub`).
pub(crate) fn read_index_with_copies(path: &Path, copies: Option<&Path>) -> Result<Checkpoint> {
    let index_error = |problem: String| file_error(path, problem);
    let (file, length) = open_regular_file(path).map_err(&index_error)?;
    if length > MAX_INDEX_BYTES {
        return Err(index_error(format!(
            "the index is {length} bytes, over the {MAX_INDEX_BYTES}-byte limit for a `model.safetensors.index.json`"
        )));
    }
    let mut bytes = Vec::new();
    // `take` holds the cap even if the file grows after the length was read.
    file.take(MAX_INDEX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| index_error(format!("cannot read the index: {}", io_problem(&e))))?;
    let index = parse_index(&bytes).map_err(&index_error)?;

    let folder = path.parent().unwrap_or(Path::new(""));
    let mut checkpoint = Checkpoint {
        tensors: Vec::new(),
        files: Vec::with_capacity(index.shards.len()),
        data_bytes: Bytes::ZERO,
    };
    let roots = link_roots(path, folder);
    let mut shard_of: HashMap<String, &str> = HashMap::new();
    for (shard_name, names) in &index.shards {
        let shard_path = folder.join(shard_name);
        let shard = abbreviated(shard_name);
        if leaves(&shard_path, &roots) {
            return Err(index_error(format!(
                "shard `{shard}` named in `weight_map` is a link to a file outside the index's folder; expected the shard file itself in the folder (links are followed only within it)"
            )));
        }
        let copy = copies
            .filter(|_| std::fs::symlink_metadata(&shard_path).is_err())
            .map(|copies| copies.join(format!("{shard_name}{HEADER_COPY_SUFFIX}")));
        let (header, shard_path) = match copy {
            Some(copy) => (read_header_copy(&copy)?, copy),
            None => {
                let (file, length) = open_regular_file(&shard_path).map_err(|problem| {
                    index_error(format!(
                        "shard `{shard}` named in `weight_map` cannot be read at `{}`: {problem}",
                        shard_path.display()
                    ))
                })?;
                let header = read_header(&file, length)
                    .map_err(|problem| file_error(&shard_path, problem))?;
                (header, shard_path)
            }
        };
        let present: HashSet<&str> = header.tensors.iter().map(|t| t.name.as_str()).collect();
        if let Some(absent) = names.iter().find(|name| !present.contains(name.as_str())) {
            let absent = abbreviated(absent);
            return Err(index_error(format!(
                "`weight_map` puts tensor `{absent}` in shard `{shard}`, but that shard's header has no tensor `{absent}`"
            )));
        }
        for tensor in &header.tensors {
            if let Some(other) = shard_of.insert(tensor.name.clone(), shard_name) {
                return Err(index_error(format!(
                    "tensor `{}` is in both shard `{}` and shard `{shard}`; expected each tensor in one shard",
                    abbreviated(&tensor.name),
                    abbreviated(other)
                )));
            }
        }
        checkpoint.data_bytes = Bytes(
            checkpoint
                .data_bytes
                .0
                .checked_add(header.data_bytes.0)
                .ok_or_else(|| {
                    index_error(
                        "the shards together hold more than 2^64 bytes of tensor data".to_string(),
                    )
                })?,
        );
        checkpoint.tensors.extend(header.tensors);
        if checkpoint.tensors.len() > MAX_CHECKPOINT_TENSORS {
            return Err(index_error(too_many_tensors()));
        }
        checkpoint.files.push(shard_path);
    }
    Ok(checkpoint)
}

/// The ending of a header-only copy of a shard: `model.safetensors.header`
/// holds the first bytes of `model.safetensors`, its length and header.
pub const HEADER_COPY_SUFFIX: &str = ".header";

/// Reads a header-only copy (see [`parse_header_prefix`]): a regular file,
/// not a link, of at most the length prefix and [`MAX_HEADER_BYTES`].
pub fn read_header_copy(path: &Path) -> Result<Header> {
    let error = |problem: String| file_error(path, problem);
    let link = std::fs::symlink_metadata(path).map_err(|e| error(io_problem(&e)))?;
    if !link.is_file() {
        return Err(error(format!(
            "not a regular file ({}); expected the header-only copy trainmem writes",
            file_kind(&link.file_type())
        )));
    }
    let (file, length) = open_regular_file(path).map_err(&error)?;
    let cap = LENGTH_PREFIX_BYTES + MAX_HEADER_BYTES;
    if length > cap {
        return Err(error(format!(
            "{length} bytes, over the {cap}-byte limit of a header-only copy (the 8-byte length and a header of at most {MAX_HEADER_BYTES} bytes)"
        )));
    }
    let mut bytes = Vec::new();
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| error(format!("cannot read: {}", io_problem(&e))))?;
    parse_header_prefix(&bytes).map_err(error)
}

/// The folders a file named by the index at `index` (in `folder`) may
/// resolve into, canonical: the index's folder and, when the index is itself
/// a link, the folder of its target. The Hugging Face cache needs the second:
/// every file of `snapshots/<revision>/` links into `../../blobs/`.
fn link_roots(index: &Path, folder: &Path) -> Vec<PathBuf> {
    let folder = if folder.as_os_str().is_empty() {
        Path::new(".")
    } else {
        folder
    };
    let target_folder = std::fs::canonicalize(index)
        .ok()
        .and_then(|target| target.parent().map(Path::to_path_buf));
    std::fs::canonicalize(folder)
        .ok()
        .into_iter()
        .chain(target_folder)
        .collect()
}

/// Whether `path`, resolved through any links, lies outside every root. A
/// path that does not resolve (absent, a dangling link) is left for opening
/// to report.
fn leaves(path: &Path, roots: &[PathBuf]) -> bool {
    match std::fs::canonicalize(path) {
        Ok(target) => !roots.iter().any(|root| target.starts_with(root)),
        Err(_) => false,
    }
}

/// Opens `path` and reads its safetensors header.
fn read_file_header(path: &Path) -> Result<Header> {
    let (file, length) = open_regular_file(path).map_err(|p| file_error(path, p))?;
    read_header(&file, length).map_err(|p| file_error(path, p))
}

fn file_error(path: &Path, problem: String) -> Error {
    Error::File {
        path: path.display().to_string(),
        problem,
    }
}

/// Where a JSON document stops matching the shape expected, without
/// serde_json's quote of the offending value (`invalid type: string "..."`),
/// which would print a file's content; a missing key is named, as keys are
/// part of the expected shape.
pub(crate) fn json_position(error: &serde_json::Error) -> String {
    let text = error.to_string();
    let missing = text
        .strip_prefix("missing field ")
        .and_then(|rest| rest.split(' ').next())
        .map(|field| format!("missing field {field} "))
        .unwrap_or_default();
    format!(
        "{missing}at line {}, column {}",
        error.line(),
        error.column()
    )
}

/// The most characters of a name from a file (a tensor, a shard, a dtype)
/// a message quotes: real tensor names are under 80, and a hostile header
/// could hold a name of 100 MB.
const QUOTED_CHARACTERS: usize = 100;

/// `text` for a message, cut with `...` past [`QUOTED_CHARACTERS`].
pub(crate) fn abbreviated(text: &str) -> String {
    match text.char_indices().nth(QUOTED_CHARACTERS) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_string(),
    }
}

/// An I/O error as a lowercase phrase.
pub(crate) fn io_problem(error: &io::Error) -> String {
    match error.kind() {
        io::ErrorKind::NotFound => "the file does not exist".to_string(),
        io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        _ => {
            let text = error.to_string();
            let mut chars = text.chars();
            match chars.next() {
                Some(first) => first.to_lowercase().chain(chars).collect(),
                None => text,
            }
        }
    }
}
