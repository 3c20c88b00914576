//! Imports point down (issue 23, item 5): `src/model/` takes nothing from
//! the layers above it (only itself and the ground: units, dtype, error),
//! and the typed request (`src/request/`) takes nothing from the renderers.
//! The test reads the sources and names the file and line of each import
//! that points up.

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
    let mut entries: Vec<_> = fs::read_dir(folder)
        .unwrap_or_else(|e| panic!("{}: {e}", folder.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
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
