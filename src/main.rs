//! The `trainmem` binary: parse, run, print. Exit 0 on success, 2 on bad
//! input, 1 on any other failure; a closed pipe is not an error.

use std::io::{ErrorKind, Write};
use std::process::ExitCode;

use clap::Parser;
use clap::error::ErrorKind as ClapErrorKind;
use trainmem::cli::{Cli, run};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error)
            if matches!(
                error.kind(),
                ClapErrorKind::DisplayHelp | ClapErrorKind::DisplayVersion
            ) =>
        {
            return print(&error.to_string());
        }
        Err(error) => {
            eprintln!("{}", one_line(&error.render().to_string()));
            return ExitCode::from(2);
        }
    };
    match run(cli) {
        Ok(report) => print(&report),
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(2)
        }
    }
}

/// Writes the report to stdout; a reader that went away is not a failure.
fn print(text: &str) -> ExitCode {
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

/// clap's multi-line usage error as one line: the error, its tip and where help is.
fn one_line(rendered: &str) -> String {
    let mut line = String::new();
    for part in rendered.lines().map(str::trim) {
        if part.is_empty() || part.starts_with("Usage:") {
            continue;
        }
        if !line.is_empty() {
            line += if line.ends_with(':') { " " } else { "; " };
        }
        line += part;
    }
    line
}
