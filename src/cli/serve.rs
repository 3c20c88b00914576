//! `trainmem serve`: the local web page and its JSON API.

use std::io::Write;

use super::args::ServeArgs;
use crate::error::Result;

/// Serves until interrupted; says where once it listens.
pub fn run(args: &ServeArgs) -> Result<String> {
    crate::serve::run(&args.host, args.port, |address| {
        let mut stdout = std::io::stdout().lock();
        // The line is a courtesy: a closed stdout must not stop the server.
        let _ = writeln!(
            stdout,
            "trainmem serve: listening on http://{address}/ (ctrl-c to stop)"
        );
        let _ = stdout.flush();
    })?;
    Ok(String::new())
}
