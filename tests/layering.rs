//! Imports point down (issue 23, item 5): `src/model/` takes nothing from
//! the layers above it (only itself and the ground: units, dtype, error),
//! and the typed request (`src/request/`) takes nothing from the renderers.
//! The test reads the sources and names the file and line of each import
//! that points up. A second scan finds the words of a command line built
//! or parsed where only typed values may go (issue 23, item 1): the Python
//! binding and the launch-config readers.

use std::fs;
use std::path::{Path, PathBuf};

/// A folder of `src/` and the top-level modules of the crate its files may
/// name with `crate::`; `None` allows any but those in the second list.
struct Rule {
    folder: &'static str,
    allowed: Option<&'static [&'static str]>,
    refused: &'static [&'static str],
}

const RULES: &[Rule] = &[
    Rule {
        folder: "model",
        allowed: Some(&["model", "units", "dtype", "error"]),
        refused: &[],
    },
    Rule {
        folder: "request",
        allowed: None,
        refused: &["render", "cli", "serve"],
    },
    // The API does not call the command line: both build the typed request.
    Rule {
        folder: "serve",
        allowed: None,
        refused: &["cli"],
    },
];

fn rust_files(folder: &Path, out: &mut Vec<PathBuf>) {
    files_ending(folder, "rs", out);
}

/// The files under `folder`, at any depth, whose extension is `ext`, in order.
fn files_ending(folder: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(folder)
        .unwrap_or_else(|e| panic!("{}: {e}", folder.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            files_ending(&path, ext, out);
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
}

/// The code of a line, without its `//` comment (doc comments included).
fn code(line: &str) -> &str {
    line.find("//").map_or(line, |at| &line[..at])
}

/// The top-level modules `text` names after `crate::`: `crate::a::b` names
/// `a`; `crate::{a::x, b}` names `a` and `b`.
fn named_modules(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().last();
        rest = &rest[at + "crate::".len()..];
        // `$crate::` or a longer identifier ending in `crate` is not ours.
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0usize;
            let mut item = String::new();
            let mut first = true;
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        first = true;
                        continue;
                    }
                    _ => {}
                }
                if depth == 0 && first && (c.is_alphanumeric() || c == '_') {
                    item.push(c);
                } else if !item.is_empty() {
                    out.push(std::mem::take(&mut item));
                    first = false;
                }
            }
            if !item.is_empty() {
                out.push(item);
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.push(name);
            }
        }
    }
    out
}

/// Each import of `rule`'s folder that points where it may not, as
/// `file:line: text`.
fn violations(root: &Path, rule: &Rule) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(&root.join("src").join(rule.folder), &mut files);
    let mut out = Vec::new();
    for file in files {
        let text = fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (index, line) in lines.iter().enumerate() {
            // A `use crate::{` group may run over several lines.
            let mut statement = code(line).to_string();
            if statement.contains("crate::{") {
                for next in lines.iter().skip(index + 1) {
                    if statement.contains('}') {
                        break;
                    }
                    statement.push_str(code(next));
                }
            }
            for module in named_modules(&statement) {
                let allowed = match rule.allowed {
                    Some(allowed) => allowed.contains(&module.as_str()),
                    None => !rule.refused.contains(&module.as_str()),
                };
                if !allowed {
                    out.push(format!(
                        "{}:{}: `crate::{module}` from src/{}/: {}",
                        file.strip_prefix(root).unwrap_or(&file).display(),
                        index + 1,
                        rule.folder,
                        line.trim()
                    ));
                }
            }
        }
    }
    out
}

#[test]
fn imports_point_down() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let found: Vec<String> = RULES
        .iter()
        .flat_map(|rule| violations(root, rule))
        .collect();
    assert!(
        found.is_empty(),
        "imports that point up:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scan_sees_each_spelling_of_an_import() {
    assert_eq!(
        named_modules("use crate::finetune::Quantization;"),
        ["finetune"]
    );
    assert_eq!(
        named_modules("use crate::{error::Result, architecture::{Task, X}, units};"),
        ["error", "architecture", "units"]
    );
    assert_eq!(
        named_modules("pub traced: Option<crate::activation::ActivationTrace>,"),
        ["activation"]
    );
    assert!(named_modules("$crate::x").is_empty());
    let model = &RULES[0];
    let allowed = |m: &str| model.allowed.unwrap().contains(&m);
    assert!(!allowed("architecture") && !allowed("finetune") && allowed("units"));
}

/// Ways of making or reading a command line's words: clap parsing an argv
/// (`try_parse_from`, `try_get_matches_from`, `update_from`'s `_from`
/// spellings), the in-process run of one (`run_args`), and the operating
/// system's argument strings a command line is made of (`OsString`,
/// `args_os`).
const ARGV_RUST: &[&str] = &[
    "run_args",
    "parse_from",
    "get_matches_from",
    "update_from",
    "OsString",
    "args_os",
];

/// The same in the Python package: the engine's old argv door
/// (`_engine.run`, `run_args`), the binary run with words (`subprocess`,
/// `shlex`), an argv by name.
const ARGV_PYTHON: &[&str] = &["run_args", "_engine.run", "subprocess", "shlex", "argv"];

/// Each line of the files under `folder` with extension `ext` whose code
/// (comments left out: `//` in Rust, `#` in Python) names one of `words`,
/// as `file:line: text`.
fn argv_lines(root: &Path, folder: &str, ext: &str, words: &[&str]) -> Vec<String> {
    let mut files = Vec::new();
    files_ending(&root.join(folder), ext, &mut files);
    let mut out = Vec::new();
    for file in files {
        let text = fs::read_to_string(&file).unwrap();
        for (index, line) in text.lines().enumerate() {
            let code = if ext == "py" {
                line.find('#').map_or(line, |at| &line[..at])
            } else {
                code(line)
            };
            if let Some(word) = words.iter().find(|word| code.contains(*word)) {
                out.push(format!(
                    "{}:{}: `{word}`: {}",
                    file.strip_prefix(root).unwrap_or(&file).display(),
                    index + 1,
                    line.trim()
                ));
            }
        }
    }
    out
}

/// Issue 23: argv exists only at the shell. The Python binding and the
/// launch-config readers build typed values (a dict read through serde,
/// flag settings merged into the typed request), never the words of a
/// command line for clap to parse again.
#[test]
fn no_argv_outside_the_shell() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = argv_lines(root, "python/src", "rs", ARGV_RUST);
    found.extend(argv_lines(root, "src/launch", "rs", ARGV_RUST));
    found.extend(argv_lines(root, "python/trainmem", "py", ARGV_PYTHON));
    assert!(
        found.is_empty(),
        "a command line built or parsed outside the shell:\n{}",
        found.join("\n")
    );
}

/// The scan sees each spelling, and not the words in a comment.
#[test]
fn the_argv_scan_sees_each_spelling() {
    let folder = std::env::temp_dir().join(format!("layering-argv-{}", std::process::id()));
    fs::create_dir_all(&folder).unwrap();
    fs::write(
        folder.join("a.rs"),
        "// run_args in a comment is prose\n\
         let words: Vec<OsString> = vec![];\n\
         Cli::try_parse_from(&words);\n\
         command.try_get_matches_from_mut(words);\n\
         trainmem::cli::run_args(&words);\n\
         let fine = call(\"estimate\", &[], &pairs);\n",
    )
    .unwrap();
    fs::write(
        folder.join("b.py"),
        "# _engine.run in a comment\n\
         from ._engine import call\n\
         import subprocess\n\
         report = _engine.run(words)\n",
    )
    .unwrap();
    let rust = argv_lines(&folder, "", "rs", ARGV_RUST);
    let python = argv_lines(&folder, "", "py", ARGV_PYTHON);
    fs::remove_dir_all(&folder).unwrap();
    let lines = |found: &[String]| {
        found
            .iter()
            .map(|l| l.split(':').nth(1).unwrap().parse::<usize>().unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(lines(&rust), [2, 3, 4, 5], "{rust:?}");
    assert_eq!(lines(&python), [3, 4], "{python:?}");
}
