//! `trainmem completions SHELL`: a completion script for the shell, generated
//! by clap_complete from the same command line the binary parses.

use clap::CommandFactory;
use clap_complete::Shell;

use super::Cli;
use super::args::CompletionsArgs;
use crate::error::{Error, Result};

/// The shells a script can be written for, by the names accepted.
const SHELLS: [(&str, Shell); 5] = [
    ("bash", Shell::Bash),
    ("zsh", Shell::Zsh),
    ("fish", Shell::Fish),
    ("elvish", Shell::Elvish),
    ("powershell", Shell::PowerShell),
];

/// The completion script of `args.shell`.
pub fn run(args: &CompletionsArgs) -> Result<String> {
    let wanted = args.shell.trim().to_ascii_lowercase();
    let shell = SHELLS
        .iter()
        .find(|(name, _)| *name == wanted)
        .map(|(_, shell)| *shell)
        .ok_or_else(|| Error::UnknownName {
            kind: "shell",
            name: args.shell.clone(),
            suggestion: None,
            accepted: SHELLS.map(|(name, _)| name).join(", "),
        })?;
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "trainmem", &mut script);
    String::from_utf8(script).map_err(|_| Error::InvalidValue {
        what: "completion script",
        value: wanted,
        reason: "clap_complete wrote text that is not UTF-8".to_string(),
    })
}
