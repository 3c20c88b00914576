//! `trainmem serve`: the local web page and its JSON API.

#[cfg(feature = "serve")]
use std::io::Write;

use super::args::ServeArgs;
use crate::error::Result;

/// Serves until interrupted; says where once it listens.
#[cfg(feature = "serve")]
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

/// A build without the `serve` feature has no web server: the command says
/// so instead of serving.
#[cfg(not(feature = "serve"))]
pub fn run(_args: &ServeArgs) -> Result<String> {
    Err(crate::error::Error::Missing {
        what: "web server",
        accepted: "this trainmem was built without the `serve` feature: build it with the default features (`cargo install trainmem`) to run `trainmem serve`".to_string(),
    })
}
