//! Finding a repository's snapshot in the hub cache, as
//! `huggingface_hub.try_to_load_from_cache` does: the repository's folder is
//! `models--{owner}--{name}`, a revision name is looked up in `refs/` (a file
//! holding the commit hash), and the files are in `snapshots/{hash}/`, each
//! a link into `../../blobs/`.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::checkpoint::open_regular_file;
use crate::error::{Error, Result};

/// The longest `refs/` file read: a commit hash is 40 characters.
const MAX_REF_BYTES: u64 = 256;

/// The most entries of the cache folder looked through for a repository
/// spelled in another case; a real cache holds tens to hundreds.
const MAX_CACHE_ENTRIES: usize = 100_000;

/// A snapshot folder of the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The repository's folder name: `models--meta-llama--Llama-3.1-8B`.
    pub repository: String,
    /// The commit hash, the snapshot folder's name.
    pub revision: String,
    /// The snapshot folder.
    pub folder: PathBuf,
}

/// The snapshot of `owner/name` at `revision` (`main` when not given) in
/// the cache folder `cache`; `None` when the cache holds no snapshot of the
/// repository; an error when it holds something that cannot be used.
pub fn find_snapshot(
    cache: &Path,
    owner: &str,
    name: &str,
    revision: Option<&str>,
) -> Result<Option<Snapshot>> {
    let Some(repository) = repository_folder(cache, owner, name) else {
        return Ok(None);
    };
    let repository_name = repository
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let snapshots = repository.join("snapshots");
    let wanted = revision.unwrap_or("main");
    let reference = repository.join("refs").join(wanted);
    // The commit hash, from `refs/` or as given; `None` when neither.
    let from_ref = std::fs::symlink_metadata(&reference).is_ok();
    let hash = if from_ref {
        Some(read_ref(&reference)?)
    } else {
        revision.map(str::to_string)
    };
    let found = |hash: String| Snapshot {
        repository: repository_name.clone(),
        folder: snapshots.join(&hash),
        revision: hash,
    };
    match hash {
        Some(hash) if snapshots.join(&hash).is_dir() => Ok(Some(found(hash))),
        // A revision never downloaded: not cached.
        Some(_) if !from_ref => Ok(None),
        Some(hash) => Err(file_error(
            &snapshots,
            format!(
                "holds no snapshot `{hash}` (`refs/{wanted}` names it); it holds {}",
                listed(&snapshot_names(&snapshots))
            ),
        )),
        None => {
            let mut present = snapshot_names(&snapshots);
            match present.len() {
                0 => Ok(None),
                1 => Ok(Some(found(present.remove(0)))),
                _ => Err(file_error(
                    &repository,
                    format!(
                        "has no `refs/main` and several snapshots: {}; name one with `--model {owner}/{name}@REVISION`",
                        listed(&present)
                    ),
                )),
            }
        }
    }
}

/// The repository's folder in the cache: `models--{owner}--{name}`, else the
/// one folder spelled so in another case (the hub's ids are case-blind,
/// the cache keeps what was typed).
fn repository_folder(cache: &Path, owner: &str, name: &str) -> Option<PathBuf> {
    let wanted = format!("models--{owner}--{name}");
    let exact = cache.join(&wanted);
    if exact.is_dir() {
        return Some(exact);
    }
    let entries = std::fs::read_dir(cache).ok()?;
    let mut matches = entries
        .take(MAX_CACHE_ENTRIES)
        .filter_map(|entry| entry.ok())
        .filter(|entry| {
            entry
                .file_name()
                .to_str()
                .is_some_and(|n| n.eq_ignore_ascii_case(&wanted))
        })
        .map(|entry| entry.path())
        .filter(|path| path.is_dir());
    let first = matches.next()?;
    matches.next().is_none().then_some(first)
}

/// The commit hash a `refs/` file holds, checked to be a plain folder name.
fn read_ref(path: &Path) -> Result<String> {
    let (file, _) = open_regular_file(path).map_err(|problem| file_error(path, problem))?;
    let mut bytes = Vec::new();
    file.take(MAX_REF_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| file_error(path, format!("cannot read: {e}")))?;
    let text = std::str::from_utf8(&bytes)
        .ok()
        .map(str::trim)
        .filter(|text| bytes.len() as u64 <= MAX_REF_BYTES && is_plain_name(text));
    text.map(str::to_string).ok_or_else(|| {
        file_error(
            path,
            "does not hold a revision; expected a commit hash such as `0123abcd...` (40 hexadecimal digits)",
        )
    })
}

/// A name that stays one folder down: letters, digits, `-`, `_`, `.`, not
/// starting with a dot.
pub(super) fn is_plain_name(text: &str) -> bool {
    !text.is_empty()
        && !text.starts_with('.')
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// The snapshot folders' names, sorted; none when there is no `snapshots/`.
fn snapshot_names(snapshots: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(snapshots) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .take(MAX_CACHE_ENTRIES)
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.path().is_dir())
        .map(|entry| entry.file_name().to_string_lossy().to_string())
        .collect();
    names.sort();
    names
}

/// `a`, `b` and 3 more: at most five names, quoted, for a message.
fn listed(names: &[String]) -> String {
    const SHOWN: usize = 5;
    if names.is_empty() {
        return "none".to_string();
    }
    let mut text = names
        .iter()
        .take(SHOWN)
        .map(|n| format!("`{}`", crate::checkpoint::abbreviated(n)))
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        text.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    text
}

fn file_error(path: &Path, problem: impl Into<String>) -> Error {
    Error::File {
        path: path.display().to_string(),
        problem: problem.into(),
    }
}
