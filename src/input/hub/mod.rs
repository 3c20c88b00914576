//! `--model meta-llama/Llama-3.1-8B`: a Hugging Face hub id where a path or
//! a preset was expected. trainmem reads only local files, so an id resolves,
//! in this order, to
//! 1. the repository's snapshot in the local hub cache ([`hub_cache_dir`]),
//!    read as a model folder: config.json and the safetensors headers,
//!    through the cache's links into `blobs/`;
//! 2. the preset whose config.json was published in that repository;
//! 3. an error that names the command which fetches the config.json, and the
//!    preset with the same architecture when there is one.

mod cache_dir;
mod snapshot;

use std::path::Path;

pub use cache_dir::{hub_cache_dir, hub_cache_dir_from};
pub use snapshot::Snapshot;

use super::{PRESET_NOTE, PRESETS, Preset, folder, preset::preset_with_hub_id, preset_model};
use crate::error::{Error, Result};
use crate::model::Model;

/// Characters of the commit hash a report shows, as `git log --oneline`.
const SHORT_REVISION: usize = 8;

/// Where a hub id's model is found, without a network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HubSource {
    /// A snapshot of the local hub cache: a model folder.
    Cached {
        /// The id as given, without its revision: `meta-llama/Llama-3.1-8B`.
        id: String,
        /// The snapshot.
        snapshot: Snapshot,
    },
    /// Not in the cache: the preset whose config.json that repository published.
    Preset {
        /// The id as the hub spells it (the preset's `hub_id`).
        id: String,
        /// The preset.
        preset: &'static Preset,
    },
}

impl HubSource {
    /// The model: the snapshot folder read as any model folder is, or the
    /// preset; either way `source` and the notes say where it came from.
    pub fn load(&self) -> Result<Model> {
        match self {
            HubSource::Cached { id, snapshot } => {
                refuse_outside_links(&snapshot.folder)?;
                let mut model = folder(&snapshot.folder).map_err(|error| match error {
                    // A snapshot with neither file: say how to fetch the config.
                    Error::File { path, problem }
                        if Path::new(&path) == snapshot.folder.as_path() =>
                    {
                        Error::File {
                            path,
                            problem: format!(
                                "{problem}; `huggingface-cli download {id} config.json --revision {}` fetches its config.json",
                                snapshot.revision
                            ),
                        }
                    }
                    other => other,
                })?;
                model.name = id.clone();
                let short: String = snapshot.revision.chars().take(SHORT_REVISION).collect();
                model.source = format!("hub cache: {} snapshot {short}", snapshot.repository);
                model.notes.push(format!(
                    "read from the local hugging face cache: {}",
                    snapshot.folder.display()
                ));
                Ok(model)
            }
            HubSource::Preset { id, preset } => {
                let mut model = preset_model(preset)?;
                let from = format!("preset {}, the published config of {id}", preset.name);
                model.notes.retain(|note| note != PRESET_NOTE);
                model.notes.push(format!(
                    "{from} (not in the local cache), embedded in trainmem"
                ));
                model.source = from;
                Ok(model)
            }
        }
    }
}

/// Refuses a snapshot whose `config.json` resolves, through its links, to
/// a file outside the repository's folder of the cache (`models--o--n/`,
/// which holds `snapshots/` and the `blobs/` their links point to): the
/// rule that shards named by an index already follow. A link that does not
/// resolve is left for reading to report.
fn refuse_outside_links(snapshot: &Path) -> Result<()> {
    let config = snapshot.join("config.json");
    let repository = snapshot.parent().and_then(Path::parent);
    let (Ok(target), Some(Ok(root))) = (
        std::fs::canonicalize(&config),
        repository.map(std::fs::canonicalize),
    ) else {
        return Ok(());
    };
    if target.starts_with(&root) {
        return Ok(());
    }
    Err(Error::File {
        path: config.display().to_string(),
        problem: format!(
            "a link to a file outside the cache's repository folder `{}`; expected a link into its `blobs/` (links are followed only within it, as for shards)",
            root.display()
        ),
    })
}

/// Whether `spec` has the shape of a hub id, `owner/name` or
/// `owner/name@revision`, rather than a path or a preset name.
pub fn is_hub_id(spec: &str) -> bool {
    parse(spec).is_some()
}

/// Where the model of hub id `id` (`owner/name`, optionally `@revision`, a
/// branch, tag or commit hash) is found: the local cache that the
/// environment names ([`hub_cache_dir`]), else a preset; an error otherwise.
pub fn resolve_hub_id(id: &str) -> Result<HubSource> {
    resolve_hub_id_in(id, hub_cache_dir().as_deref())
}

/// [`resolve_hub_id`] with the cache folder given (`None`: no cache).
pub fn resolve_hub_id_in(id: &str, cache: Option<&Path>) -> Result<HubSource> {
    let invalid = |reason: String| Error::InvalidValue {
        what: "model",
        value: id.to_string(),
        reason,
    };
    let Some((owner, name, revision)) = parse(id) else {
        return Err(invalid(
            "not a hugging face hub id; accepted: `owner/name` or `owner/name@revision`, such as `meta-llama/Llama-3.1-8B`".to_string(),
        ));
    };
    if let Some(revision) = revision.filter(|r| !snapshot::is_plain_name(r)) {
        return Err(invalid(format!(
            "the revision `{revision}` is not a branch, tag or commit hash trainmem can look up; accepted: letters, digits, `-`, `_` and `.`, such as `main` or a commit hash"
        )));
    }
    let repository = format!("{owner}/{name}");
    if let Some(cache) = cache
        && let Some(snapshot) = snapshot::find_snapshot(cache, owner, name, revision)?
    {
        return Ok(HubSource::Cached {
            id: repository,
            snapshot,
        });
    }
    if revision.is_none()
        && let Some(preset) = preset_with_hub_id(&repository)
    {
        return Ok(HubSource::Preset {
            id: preset.hub_id.to_string(),
            preset,
        });
    }
    Err(invalid(not_downloaded(&repository, name, revision, cache)))
}

/// Why `owner/name` is not found, and the one command that fetches it.
fn not_downloaded(
    repository: &str,
    name: &str,
    revision: Option<&str>,
    cache: Option<&Path>,
) -> String {
    let what = match revision {
        Some(revision) => format!("revision `{revision}` is "),
        None => String::new(),
    };
    let looked = match cache {
        Some(cache) => format!(
            "{what}not in the local hugging face cache (`{}`)",
            cache.display()
        ),
        None => format!(
            "{what}not found: no local hugging face cache is set (HF_HUB_CACHE, HF_HOME or HOME)"
        ),
    };
    let (not_found, at) = match revision {
        Some(revision) => (looked, format!(" --revision {revision}")),
        None => (
            format!("{looked}, and no preset is that repository's config"),
            String::new(),
        ),
    };
    let nearest = match matching_preset(name) {
        Some(preset) => format!(
            "; or the preset `{preset}` has that architecture, from its published config.json (`--model {preset}`)"
        ),
        None => String::new(),
    };
    format!(
        "{not_found}; trainmem does not download anything: `huggingface-cli download {repository} config.json{at}` fetches its config.json into the cache{nearest}"
    )
}

/// `(owner, name, revision)` when `spec` has the shape of a hub id:
/// `owner/name` with an optional `@revision`.
fn parse(spec: &str) -> Option<(&str, &str, Option<&str>)> {
    let (repository, revision) = match spec.split_once('@') {
        Some((repository, revision)) => (repository, Some(revision)),
        None => (spec, None),
    };
    let (owner, name) = hub_id(repository)?;
    Some((owner, name, revision))
}

/// `(owner, name)` when `spec` has the shape of a hub repository id: two
/// parts of letters, digits, `-`, `_` and `.`, neither starting with a dot,
/// and not a file name trainmem reads.
fn hub_id(spec: &str) -> Option<(&str, &str)> {
    let (owner, name) = spec.split_once('/')?;
    let part = |text: &str| {
        !text.is_empty()
            && !text.starts_with('.')
            && text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    let file_like = name.ends_with(".json") || name.ends_with(".safetensors");
    (part(owner) && part(name) && !file_like).then_some((owner, name))
}

/// The preset whose name's words all appear, in order, among the words of
/// the hub name (`Meta-Llama-3.1-8B-Instruct` holds `llama`, `3.1`, `8b`);
/// the one with the most words when several do (`gpt2-xl` over `gpt2`).
fn matching_preset(name: &str) -> Option<&'static str> {
    let lower = name.to_ascii_lowercase();
    let words: Vec<&str> = lower.split(['-', '_']).collect();
    PRESETS
        .iter()
        .map(|preset| preset.name)
        .filter(|preset| is_subsequence(preset.split('-'), &words))
        .max_by_key(|preset| (preset.split('-').count(), std::cmp::Reverse(preset.len())))
}

/// Whether every item of `wanted` appears in `words`, in order.
fn is_subsequence<'a>(wanted: impl IntoIterator<Item = &'a str>, words: &[&str]) -> bool {
    let mut rest = words.iter();
    wanted
        .into_iter()
        .all(|word| rest.by_ref().any(|candidate| *candidate == word))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hub_names_match_presets_by_family_and_size() {
        for (name, preset) in [
            ("Llama-3.1-8B", Some("llama-3.1-8b")),
            ("Meta-Llama-3.1-8B-Instruct", Some("llama-3.1-8b")),
            ("Llama-2-7b-hf", Some("llama-2-7b")),
            ("Qwen2.5-7B-Instruct", Some("qwen2.5-7b")),
            ("Mixtral-8x7B-Instruct-v0.1", Some("mixtral-8x7b")),
            ("gemma-2-9b-it", Some("gemma-2-9b")),
            ("Phi-3-mini-4k-instruct", Some("phi-3-mini")),
            ("gpt2-xl", Some("gpt2-xl")),
            ("gpt2", Some("gpt2")),
            ("DeepSeek-V3", Some("deepseek-v3")),
            ("Qwen3-30B-A3B", Some("qwen3-30b-a3b")),
            ("OLMo-2-1124-7B", Some("olmo-2-7b")),
            ("Mistral-Nemo-Base-2407", None),
            ("Meta-Llama-3-8B", None),
            ("bert-base-uncased", Some("bert-base-uncased")),
            ("roberta-large", Some("roberta-large")),
            ("flan-t5-xl", Some("flan-t5-xl")),
            ("electra-small-discriminator", None),
        ] {
            assert_eq!(matching_preset(name), preset, "{name}");
        }
    }

    #[test]
    fn a_revision_follows_an_at_sign() {
        assert_eq!(
            parse("acme/tiny@main"),
            Some(("acme", "tiny", Some("main")))
        );
        assert_eq!(parse("acme/tiny"), Some(("acme", "tiny", None)));
        assert_eq!(parse("acme@x/tiny"), None);
        assert!(is_hub_id("acme/tiny@v1.0"));
        assert!(!is_hub_id("tiny@v1.0"));
    }

    /// Without a cache: a preset's repository resolves to it, any other id
    /// is an error naming the download command.
    #[test]
    fn without_a_cache_only_presets_resolve() {
        match resolve_hub_id_in("meta-llama/llama-3.1-8b", None) {
            Ok(HubSource::Preset { id, preset }) => {
                assert_eq!(id, "meta-llama/Llama-3.1-8B");
                assert_eq!(preset.name, "llama-3.1-8b");
            }
            other => panic!("{other:?}"),
        }
        let error = resolve_hub_id_in("meta-llama/Llama-3.1-8B@main", None)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(
                "`huggingface-cli download meta-llama/Llama-3.1-8B config.json --revision main`"
            ),
            "{error}"
        );
        let error = resolve_hub_id_in("acme/tiny", None)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("no local hugging face cache is set"),
            "{error}"
        );
        assert!(
            error.contains("`huggingface-cli download acme/tiny config.json`"),
            "{error}"
        );
        let error = resolve_hub_id_in("tiny", None).unwrap_err().to_string();
        assert!(error.contains("not a hugging face hub id"), "{error}");
    }

    #[test]
    fn only_owner_slash_name_is_a_hub_id() {
        assert_eq!(
            hub_id("meta-llama/Llama-3.1-8B"),
            Some(("meta-llama", "Llama-3.1-8B"))
        );
        for not_hub in [
            "llama-3.1-8b",
            "./x",
            "a/b/c",
            "/abs",
            "dir/config.json",
            "dir/model.safetensors",
            "../x",
            "a/",
            "a b/c",
        ] {
            assert_eq!(hub_id(not_hub), None, "{not_hub}");
        }
    }
}
