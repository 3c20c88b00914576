//! Opening an untrusted path only when it is a regular file.
//!
//! A FIFO named `model.safetensors` or `config.json` would block `open()`
//! until a writer appears, and a device may do anything when opened. So the
//! type is checked before opening (`stat`, following links), the open itself
//! cannot block (`O_NONBLOCK`, which does not change reads of a regular
//! file), and the type is checked again on the open handle (`fstat`), in case
//! the path was swapped in between.

use std::fs::{File, FileType, Metadata, OpenOptions};
use std::path::Path;

/// Opens `path` if it is a regular file and gives its length; otherwise a
/// lowercase phrase saying what it is.
pub fn open_regular_file(path: &Path) -> Result<(File, u64), String> {
    let before = std::fs::metadata(path).map_err(|e| super::io_problem(&e))?;
    regular(&before)?;
    let file = open_without_blocking(path).map_err(|e| super::io_problem(&e))?;
    let metadata = file.metadata().map_err(|e| super::io_problem(&e))?;
    regular(&metadata)?;
    Ok((file, metadata.len()))
}

/// An error phrase unless `metadata` is a regular file's.
pub fn regular(metadata: &Metadata) -> Result<(), String> {
    if metadata.is_file() {
        Ok(())
    } else {
        Err(format!(
            "not a regular file ({}); expected a file",
            kind(&metadata.file_type())
        ))
    }
}

/// What a file that is not regular is, for messages.
pub fn kind(file_type: &FileType) -> &'static str {
    if file_type.is_dir() {
        return "a folder";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "a fifo";
        }
        if file_type.is_socket() {
            return "a socket";
        }
        if file_type.is_block_device() || file_type.is_char_device() {
            return "a device";
        }
    }
    if file_type.is_symlink() {
        return "a symbolic link";
    }
    "not a file"
}

#[cfg(unix)]
fn open_without_blocking(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

#[cfg(not(unix))]
fn open_without_blocking(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().read(true).open(path)
}
