//! The README's and the book's examples are the binary's real output: every
//! ```console block of README.md and of docs/**/*.md that starts with
//! `$ trainmem ARGS` must match what that command prints.
//! `python3 tools/update_readme.py` rewrites them after a deliberate change.
//!
//! The book's generated reference pages (docs/src/reference/architectures.md
//! and launch-keys.md) are written from the library's own tables, and the
//! book's images (docs/src/images) are copies of docs/*.svg and the page screenshots;
//! they must equal what this file writes, and `TRAINMEM_UPDATE_DOCS=1 cargo
//! test --test readme` rewrites them.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use trainmem::architecture::{self, Task};
use trainmem::launch::key::{Absent, Choice, Key, Rule};
use trainmem::launch::{
    accelerate, axolotl, deepspeed, litgpt, llama_factory, torchtitan, torchtune,
    training_arguments,
};

/// The fewest examples the README and the book must have between them: a
/// guard against a change to the block syntax that would check nothing.
const MIN_EXAMPLES: usize = 30;

/// The environment variable that makes the reference test write its pages.
const UPDATE: &str = "TRAINMEM_UPDATE_DOCS";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every Markdown file under docs/, walked recursively, in a
/// stable order.
fn documents() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
            .map(|entry| entry.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            // The built book (docs/book) is output, not a source.
            if path.is_dir() && !path.ends_with("docs/book") {
                walk(&path, out);
            } else if path.extension().is_some_and(|ext| ext == "md") {
                out.push(path);
            }
        }
    }
    let mut out = vec![root().join("README.md")];
    walk(&root().join("docs"), &mut out);
    out
}

/// Each ```console block of `text` that runs trainmem: its arguments and
/// the output it shows.
fn examples(text: &str) -> Vec<(String, String)> {
    text.split("```console\n")
        .skip(1)
        .filter_map(|block| {
            let block = block.split("```").next().unwrap();
            let (command, expected) = block.split_once('\n').unwrap_or((block, ""));
            let args = command.strip_prefix("$ trainmem")?;
            Some((args.to_string(), expected.to_string()))
        })
        .collect()
}

#[test]
fn readme_and_book_examples_are_real_output() {
    let mut checked = 0;
    let mut in_book = 0;
    for path in documents() {
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.strip_prefix(root()).unwrap().display().to_string();
        for (args, expected) in examples(&text) {
            let output = Command::cargo_bin("trainmem")
                .unwrap()
                .args(args.split_whitespace())
                .output()
                .unwrap();
            assert_eq!(
                String::from_utf8(output.stdout).unwrap(),
                expected,
                "{name}: block `$ trainmem{args}` (rerun python3 tools/update_readme.py)"
            );
            checked += 1;
            if name.starts_with("docs") {
                in_book += 1;
            }
        }
    }
    assert!(checked >= MIN_EXAMPLES, "only {checked} examples found");
    assert!(in_book > 0, "no example found under docs/");
}

#[test]
fn the_walk_finds_nested_book_pages() {
    let found = documents();
    for page in ["docs/src/SUMMARY.md", "docs/src/commands/estimate.md"] {
        assert!(found.contains(&root().join(page)), "{page} not walked");
    }
}

/// Every chapter SUMMARY.md names exists, and every page under docs/src is
/// in SUMMARY.md, so `mdbook build docs` neither creates nor drops one.
#[test]
fn the_summary_names_every_page() {
    let src = root().join("docs/src");
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).unwrap();
    let named: Vec<&str> = summary
        .split("](")
        .skip(1)
        .map(|rest| rest.split(')').next().unwrap())
        .collect();
    for page in &named {
        assert!(src.join(page).is_file(), "SUMMARY.md names missing {page}");
    }
    for path in documents() {
        let Ok(relative) = path.strip_prefix(&src) else {
            continue;
        };
        let relative = relative.display().to_string();
        if relative != "SUMMARY.md" {
            assert!(
                named.contains(&relative.as_str()),
                "{relative} is not in SUMMARY.md"
            );
        }
    }
}

/// The charts the book shows are copies of docs/*.svg and docs/page-*.png
/// (which tests/plot.rs, timeline.rs and techniques.rs keep current), since
/// mdBook publishes only what is under docs/src.
#[test]
fn the_book_images_are_the_committed_charts() {
    let images = root().join("docs/src/images");
    for entry in std::fs::read_dir(&images).unwrap() {
        let path = entry.unwrap().path();
        let original = root().join("docs").join(path.file_name().unwrap());
        let copy = std::fs::read(&path).unwrap();
        if std::env::var_os(UPDATE).is_some() {
            std::fs::copy(&original, &path).unwrap();
        } else {
            assert!(
                std::fs::read(&original).is_ok_and(|bytes| bytes == copy),
                "{} differs from {}: rerun `{UPDATE}=1 cargo test --test readme`",
                path.display(),
                original.display()
            );
        }
    }
}

/// Every relative link of the README and the book leads to a file.
#[test]
fn relative_links_resolve() {
    for path in documents() {
        let text = std::fs::read_to_string(&path).unwrap();
        for rest in text.split("](").skip(1) {
            let target = rest.split(')').next().unwrap();
            let file = target.split('#').next().unwrap();
            if file.is_empty() || file.contains("://") || file.contains(' ') {
                continue;
            }
            let resolved = path.parent().unwrap().join(file);
            assert!(
                resolved.exists(),
                "{}: link `{target}` leads nowhere",
                path.display()
            );
        }
    }
}

fn flags(flags: &[(&str, &str)]) -> String {
    let words: Vec<String> = flags
        .iter()
        .map(|(flag, value)| {
            if value.is_empty() {
                flag.to_string()
            } else {
                format!("{flag} {value}")
            }
        })
        .collect();
    format!("`{}`", words.join(" "))
}

/// What a key's rule does, in one table cell.
fn rule(rule: &Rule) -> String {
    match rule {
        Rule::Count(flag) => format!("`{flag} N`"),
        Rule::Switch(set) => format!("when true: {}", flags(set)),
        Rule::Choice(table) => {
            let choices: Vec<String> = table
                .iter()
                .map(|(name, choice)| match choice {
                    Choice::Set(set) => format!("`{name}`: {}", flags(set)),
                    Choice::Nothing(why) => format!("`{name}`: nothing ({why})"),
                    Choice::NotModelled(why) => format!("`{name}`: not modelled ({why})"),
                })
                .collect();
            choices.join("; ")
        }
        Rule::Text(flag) => format!("`{flag} VALUE`"),
        Rule::Read(_) => "read with the rest of the file (see the reader's source)".to_string(),
        Rule::Include => {
            "a DeepSpeed config, a path or the config itself, read as DeepSpeed's".to_string()
        }
        Rule::NoMemory => "no effect on memory".to_string(),
        Rule::NotModelled(why) => format!("not modelled: {why}"),
    }
}

fn escape(cell: &str) -> String {
    cell.replace('|', "\\|").replace('\n', " ")
}

fn launch_keys() -> String {
    let formats: [(&str, &str, &[Key], &[Absent]); 8] = [
        (
            "HF TrainingArguments / TRL SFTConfig",
            "src/launch/training_arguments.rs",
            training_arguments::KEYS,
            training_arguments::DEFAULTS,
        ),
        ("DeepSpeed", "src/launch/deepspeed.rs", deepspeed::KEYS, &[]),
        (
            "accelerate",
            "src/launch/accelerate.rs",
            accelerate::KEYS,
            &[],
        ),
        (
            "axolotl",
            "src/launch/axolotl.rs",
            axolotl::KEYS,
            axolotl::DEFAULTS,
        ),
        ("torchtune", "src/launch/torchtune.rs", torchtune::KEYS, &[]),
        (
            "LLaMA-Factory",
            "src/launch/llama_factory.rs",
            llama_factory::KEYS,
            &[],
        ),
        (
            "torchtitan",
            "src/launch/torchtitan.rs",
            torchtitan::KEYS,
            torchtitan::DEFAULTS,
        ),
        (
            "litgpt",
            "src/launch/litgpt.rs",
            litgpt::KEYS,
            litgpt::DEFAULTS,
        ),
    ];
    let mut page = String::from(
        "# Launch keys\n\n\
         <!-- Written by tests/readme.rs from each launch reader's KEYS table: \
         TRAINMEM_UPDATE_DOCS=1 cargo test --test readme -->\n\n\
         The keys [check](../commands/check.md) reads in each format and the `estimate` \
         flags each sets. A key not listed is reported as unknown; nothing is dropped \
         silently.\n",
    );
    for (title, source, keys, defaults) in formats {
        write!(
            page,
            "\n## {title}\n\nRead by `{source}`.\n\n| key | sets |\n| --- | --- |\n"
        )
        .unwrap();
        for key in keys {
            writeln!(page, "| `{}` | {} |", key.name, escape(&rule(&key.rule))).unwrap();
        }
        if !defaults.is_empty() {
            page.push_str("\nWhen a key is absent, its default applies:\n\n| key | default | sets |\n| --- | --- | --- |\n");
            for absent in defaults {
                writeln!(
                    page,
                    "| `{}` | `{}` | {} |",
                    absent.key,
                    escape(absent.value),
                    flags(absent.flags)
                )
                .unwrap();
            }
        }
    }
    page
}

fn architectures() -> String {
    let vision_language = architecture::vision_language();
    let activations = architecture::supported_for_activations();
    let mut page = String::from(
        "# Architectures\n\n\
         <!-- Written by tests/readme.rs from trainmem::architecture::supported(): \
         TRAINMEM_UPDATE_DOCS=1 cargo test --test readme -->\n\n\
         The `model_type`s of a config.json trainmem counts, with the task each trains \
         for when `--task` is not given, and whether its activations are modelled, for at least one task (else \
         only the model states are priced, and the report says so). \
         [Models and architectures](../models.md) says how each family is counted and \
         measured.\n\n\
         | model_type | kind | default task | activations |\n| --- | --- | --- | --- |\n",
    );
    let supported = architecture::supported();
    for model_type in &supported {
        let task = architecture::default_task(model_type);
        // Named by the auto class of the default task, the one fact the
        // tables give for every type.
        let family = if vision_language.contains(model_type) {
            "vision-language (AutoModelForImageTextToText)"
        } else {
            match task {
                Some(Task::CausalLm) => "causal LM",
                Some(Task::MaskedLm) => "encoder, masked LM",
                Some(Task::Embedding) => "encoder, bare or contrastive model",
                Some(Task::Seq2Seq) => "encoder-decoder",
                _ => "other",
            }
        };
        let task = task.map_or("-".to_string(), |task| task.to_string());
        let modelled = if activations.contains(model_type) {
            "yes"
        } else {
            "no"
        };
        writeln!(page, "| `{model_type}` | {family} | {task} | {modelled} |").unwrap();
    }
    writeln!(page, "\n{} model types in all.", supported.len()).unwrap();
    page
}

#[test]
fn generated_reference_pages_match_the_code() {
    let pages = [
        ("docs/src/reference/launch-keys.md", launch_keys()),
        ("docs/src/reference/architectures.md", architectures()),
    ];
    for (page, text) in pages {
        let path = root().join(page);
        if std::env::var_os(UPDATE).is_some() {
            std::fs::write(&path, &text).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == text,
            "{page} is stale: rerun `{UPDATE}=1 cargo test --test readme`"
        );
    }
}
