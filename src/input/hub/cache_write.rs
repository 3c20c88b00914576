//! Writing what was fetched into the hub cache, in huggingface_hub's layout,
//! so that the next lookup (trainmem's or huggingface_hub's) reads it there:
//!
//! ```text
//! models--{owner}--{name}/
//!   blobs/{etag}                              a fetched file (config.json, the index)
//!   snapshots/{commit}/config.json            -> ../../blobs/{etag}
//!   refs/{revision}                           the commit hash, no newline
//!   .trainmem/headers/{commit}/{shard}.header trainmem's header-only copies
//! ```
//!
//! A shard's header is not the shard: huggingface_hub takes any file in
//! `snapshots/` or any blob named by the file's etag for the whole file, and
//! would hand a truncated file to `from_pretrained`. So the header-only
//! copies live in a folder of trainmem's own beside `blobs/` and
//! `snapshots/`, which huggingface_hub never reads (as it keeps its own
//! `.no_exist/` there), named `.header`, never `.safetensors`; deleting the
//! repository from the cache (`hf cache delete`) deletes them with it.
//!
//! Every file is written to a temporary name in its folder and renamed into
//! place, so a file is either whole or absent; the ref is written last, so
//! a lookup interrupted midway leaves no ref that names a partial snapshot.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::checkpoint::HEADER_COPY_SUFFIX;

/// trainmem's folder inside a repository's folder of the cache.
const OWN_FOLDER: &str = ".trainmem";

/// The folder of the header-only copies of `commit`'s shards, inside the
/// repository's folder `models--{owner}--{name}`.
pub fn header_copies(repository: &Path, commit: &str) -> PathBuf {
    repository.join(OWN_FOLDER).join("headers").join(commit)
}

/// One repository's folder of the cache, being written.
pub struct RepositoryWriter {
    /// `models--{owner}--{name}`.
    pub folder: PathBuf,
    commit: String,
}

impl RepositoryWriter {
    /// The writer of `commit`'s snapshot of `owner/name` in `cache`.
    pub fn new(cache: &Path, owner: &str, name: &str, commit: &str) -> RepositoryWriter {
        RepositoryWriter {
            folder: cache.join(format!("models--{owner}--{name}")),
            commit: commit.to_string(),
        }
    }

    /// The snapshot folder written.
    pub fn snapshot(&self) -> PathBuf {
        self.folder.join("snapshots").join(&self.commit)
    }

    /// `blobs/{blob}` holding `bytes`, and `snapshots/{commit}/{file}` a
    /// link to it, as `hf_hub_download` leaves them.
    pub fn file(&self, file: &str, blob: &str, bytes: &[u8]) -> std::io::Result<()> {
        let blobs = self.folder.join("blobs");
        std::fs::create_dir_all(&blobs)?;
        write_atomically(&blobs.join(blob), bytes)?;
        let snapshot = self.snapshot();
        std::fs::create_dir_all(&snapshot)?;
        link_atomically(
            &Path::new("..").join("..").join("blobs").join(blob),
            &blobs.join(blob),
            &snapshot.join(file),
        )
    }

    /// The header-only copy of shard `shard`: its first `bytes`.
    pub fn header_copy(&self, shard: &str, bytes: &[u8]) -> std::io::Result<()> {
        let folder = header_copies(&self.folder, &self.commit);
        std::fs::create_dir_all(&folder)?;
        write_atomically(&folder.join(format!("{shard}{HEADER_COPY_SUFFIX}")), bytes)
    }

    /// `refs/{revision}` naming the commit, unless the revision is the
    /// commit; and a snapshot folder even when no file was written.
    pub fn reference(&self, revision: &str) -> std::io::Result<()> {
        std::fs::create_dir_all(self.snapshot())?;
        if revision == self.commit {
            return Ok(());
        }
        let refs = self.folder.join("refs");
        std::fs::create_dir_all(&refs)?;
        write_atomically(&refs.join(revision), self.commit.as_bytes())
    }
}

/// A temporary name beside `path`, unique to this process.
fn temporary(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    path.with_file_name(format!(
        ".{name}.{}.trainmem-incomplete",
        std::process::id()
    ))
}

/// `bytes` at `path`, whole or not at all: written beside it, then renamed.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let temporary = temporary(path);
    let written = (|| {
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

/// `link` pointing at `target` (relative), made beside it and renamed into
/// place; where links cannot be made, a copy of `blob` (as huggingface_hub
/// does on Windows without developer mode).
fn link_atomically(target: &Path, blob: &Path, link: &Path) -> std::io::Result<()> {
    let temporary = temporary(link);
    let _ = std::fs::remove_file(&temporary);
    #[cfg(unix)]
    let made = std::os::unix::fs::symlink(target, &temporary);
    #[cfg(not(unix))]
    let made = {
        let _ = target;
        std::fs::copy(blob, &temporary).map(|_| ())
    };
    #[cfg(unix)]
    let _ = blob;
    let placed = made.and_then(|()| std::fs::rename(&temporary, link));
    if placed.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    placed
}
