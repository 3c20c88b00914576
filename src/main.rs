//! The `trainmem` binary: parse, run, print. Exit 0 on success, 2 on bad
//! input, 1 on any other failure or when `check` finds the run does not
//! fit; a closed pipe is not an error.

use std::ffi::OsString;
use std::io::{ErrorKind, Write};
#[cfg(target_os = "linux")]
use std::path::Path;
use std::process::ExitCode;

use clap::error::ErrorKind as ClapErrorKind;
use clap::{CommandFactory, FromArgMatches};
use trainmem::cli::{Cli, respond, usage_error};
use trainmem::render::escape;

fn main() -> ExitCode {
    // Checked before anything is opened, which could reuse descriptor 1.
    let stdout_open = stdout_is_open();
    if let Some(columns) = terminal_columns() {
        trainmem::render::wrap::set_columns(columns);
    }
    let arguments: Vec<OsString> = std::env::args_os().collect();
    let parsed = Cli::command()
        .try_get_matches_from(&arguments)
        .and_then(|matches| Cli::from_arg_matches(&matches).map(|cli| (cli, matches)));
    let (cli, matches) = match parsed {
        Ok(parsed) => parsed,
        Err(error)
            if matches!(
                error.kind(),
                ClapErrorKind::DisplayHelp | ClapErrorKind::DisplayVersion
            ) =>
        {
            return print(&error.to_string(), stdout_open);
        }
        Err(error) => {
            eprintln!("{}", usage_error(&error, &arguments));
            return ExitCode::from(2);
        }
    };
    match respond(cli, &matches) {
        Ok(checked) => {
            for warning in &checked.warnings {
                eprintln!("warning: {}", escape(warning));
            }
            let printed = print(&checked.report, stdout_open);
            if printed == ExitCode::SUCCESS {
                ExitCode::from(checked.exit)
            } else {
                printed
            }
        }
        Err(error) => {
            eprintln!("error: {}", escape(&error.to_string()));
            ExitCode::from(2)
        }
    }
}

/// Writes the report to stdout; a reader that went away (EPIPE) is not a
/// failure, a stdout that was closed before the start (`trainmem >&-`) is:
/// the report would be lost without a word, as Rust's standard library
/// silently discards writes to a closed descriptor.
fn print(text: &str, stdout_open: bool) -> ExitCode {
    if !stdout_open {
        eprintln!("error: cannot write the report: standard output is closed");
        return ExitCode::from(1);
    }
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) if error.kind() == ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: cannot write the report: {error}");
            ExitCode::from(1)
        }
    }
}

/// Whether standard output was open when the program started. Rust's
/// runtime reopens a closed descriptor 1 on `/dev/null` read-write before
/// `main` (a shell's `>/dev/null` opens it write-only), so on Linux that
/// combination, read from `/proc`, means `trainmem >&-`.
#[cfg(target_os = "linux")]
fn stdout_is_open() -> bool {
    let on_null = std::fs::read_link("/proc/self/fd/1").is_ok_and(|p| p == Path::new("/dev/null"));
    let read_write = std::fs::read_to_string("/proc/self/fdinfo/1").is_ok_and(|info| {
        info.lines()
            .find_map(|line| line.strip_prefix("flags:"))
            .and_then(|flags| u32::from_str_radix(flags.trim(), 8).ok())
            .is_some_and(|flags| flags & O_ACCMODE == O_RDWR)
    });
    !(on_null && read_write)
}

/// The width of the terminal standard output is, if it is one; reports
/// are wrapped to [`trainmem::render::wrap::DEFAULT_COLUMNS`] otherwise.
#[cfg(unix)]
fn terminal_columns() -> Option<usize> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        return None;
    }
    // SAFETY: an all-zero `winsize` is a valid value of this plain C struct.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ writes one `winsize` into the pointed-to local.
    let read = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) };
    (read == 0 && size.ws_col > 0).then_some(usize::from(size.ws_col))
}

/// Elsewhere the width is not asked: reports keep the default width.
#[cfg(not(unix))]
fn terminal_columns() -> Option<usize> {
    None
}

/// Elsewhere a closed stdout cannot be told from `/dev/null`.
#[cfg(not(target_os = "linux"))]
fn stdout_is_open() -> bool {
    true
}

/// The access-mode bits of `open(2)` flags, and read-write among them.
#[cfg(target_os = "linux")]
const O_ACCMODE: u32 = 0o3;
#[cfg(target_os = "linux")]
const O_RDWR: u32 = 0o2;
