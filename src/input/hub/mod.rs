//! `--model meta-llama/Llama-3.1-8B`: a Hugging Face hub id where a path or
//! a preset was expected. An id resolves, in this order, to
//! 1. the repository's snapshot in the local hub cache ([`hub_cache_dir`]),
//!    read as a model folder: config.json and the safetensors headers,
//!    through the cache's links into `blobs/` (and trainmem's header-only
//!    copies of shards, see [`cache_write`]);
//! 2. the hub itself, metadata only ([`online`]): the config.json and the
//!    safetensors headers through range requests, written into the cache so
//!    that the next lookup is 1 — unless `HF_HUB_OFFLINE` or `--offline`;
//! 3. the preset whose config.json was published in that repository (also
//!    when the hub cannot be reached or asks for a token: the answer is the
//!    same config, and a note says why the hub was not used);
//! 4. an error in one line: what the hub answered (gated, not found, timed
//!    out, unreachable), or offline the command which fetches the
//!    config.json; and the preset with the same architecture when there is one.

mod cache_dir;
mod cache_write;
mod http;
mod online;
mod settings;
mod snapshot;

use std::path::Path;

pub use cache_dir::{hub_cache_dir, hub_cache_dir_from};
pub use settings::{HubSettings, set_offline};
pub use snapshot::Snapshot;

use super::{
    PRESET_NOTE, PRESETS, Preset, folder_checkpoint, folder_reading, preset::preset_with_hub_id,
    preset_model,
};
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
        /// The endpoint it was fetched from just now, if it was.
        fetched_from: Option<String>,
    },
    /// Not in the cache: the preset whose config.json that repository published.
    Preset {
        /// The id as the hub spells it (the preset's `hub_id`).
        id: String,
        /// The preset.
        preset: &'static Preset,
        /// Why the hub was not asked or did not answer, when it was tried.
        hub_failure: Option<String>,
    },
}

impl HubSource {
    /// The model: the snapshot folder read as any model folder is, or the
    /// preset; either way `source` and the notes say where it came from.
    pub fn load(&self) -> Result<Model> {
        match self {
            HubSource::Cached {
                id,
                snapshot,
                fetched_from,
            } => {
                refuse_outside_links(&snapshot.folder)?;
                let copies = cache_write::header_copies(
                    snapshot
                        .folder
                        .parent()
                        .and_then(Path::parent)
                        .unwrap_or(Path::new("")),
                    &snapshot.revision,
                );
                let mut model = folder_reading(&snapshot.folder, |path| {
                    snapshot_checkpoint(path, &copies)
                })
                .map_err(|error| match error {
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
                if let Some(endpoint) = fetched_from {
                    model.notes.push(format!(
                        "fetched from {endpoint} (config.json and safetensors headers only) into the local cache"
                    ));
                }
                model.notes.push(format!(
                    "read from the local hugging face cache: {}",
                    snapshot.folder.display()
                ));
                Ok(model)
            }
            HubSource::Preset {
                id,
                preset,
                hub_failure,
            } => {
                let mut model = preset_model(preset)?;
                let from = format!("preset {}, the published config of {id}", preset.name);
                model.notes.retain(|note| note != PRESET_NOTE);
                model.notes.push(format!(
                    "{from} (not in the local cache), embedded in trainmem"
                ));
                if let Some(failure) = hub_failure {
                    model.notes.push(format!("the hub was not used: {failure}"));
                }
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
    resolve_hub_id_with(id, hub_cache_dir().as_deref(), &HubSettings::from_env())
}

/// [`resolve_hub_id`] with the cache folder given (`None`: no cache),
/// without the network.
pub fn resolve_hub_id_in(id: &str, cache: Option<&Path>) -> Result<HubSource> {
    let offline = HubSettings {
        offline: true,
        ..HubSettings::from_vars(|_| None)
    };
    resolve_hub_id_with(id, cache, &offline)
}

/// [`resolve_hub_id`] with the cache folder and the hub's settings given.
pub fn resolve_hub_id_with(
    id: &str,
    cache: Option<&Path>,
    settings: &HubSettings,
) -> Result<HubSource> {
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
            fetched_from: None,
        });
    }
    let preset = preset_with_hub_id(&repository).filter(|_| revision.is_none());
    let hub_failure = match cache.filter(|_| !settings.offline) {
        None => None,
        Some(cache) => match online::fetch(settings, owner, name, revision, cache) {
            Ok(snapshot) => {
                return Ok(HubSource::Cached {
                    id: repository,
                    snapshot,
                    fetched_from: Some(settings.endpoint.clone()),
                });
            }
            Err(error) if preset.is_none() => {
                return Err(match (error, matching_preset(name)) {
                    (Error::Hub { id, problem }, Some(nearest)) => Error::Hub {
                        id,
                        problem: format!("{problem}{}", nearest_preset(nearest)),
                    },
                    (error, _) => error,
                });
            }
            Err(Error::Hub { problem, .. }) => Some(problem),
            Err(other) => Some(other.to_string()),
        },
    };
    if let Some(preset) = preset {
        return Ok(HubSource::Preset {
            id: preset.hub_id.to_string(),
            preset,
            hub_failure,
        });
    }
    Err(invalid(not_downloaded(&repository, name, revision, cache)))
}

/// The note naming the preset with the architecture of a hub name.
fn nearest_preset(preset: &str) -> String {
    format!(
        "; or the preset `{preset}` has that architecture, from its published config.json (`--model {preset}`)"
    )
}

/// The checkpoint of a snapshot folder: as any model folder's, except that
/// a shard fetched by trainmem is read from its header-only copy in
/// `copies` (see [`cache_write`]) when the snapshot does not hold it.
fn snapshot_checkpoint(
    path: &Path,
    copies: &Path,
) -> Result<Option<crate::checkpoint::Checkpoint>> {
    let index = path.join("model.safetensors.index.json");
    if std::fs::symlink_metadata(&index).is_ok() {
        let copies = Some(copies).filter(|copies| copies.is_dir());
        return crate::checkpoint::read_index_with_copies(&index, copies).map(Some);
    }
    if let Some(checkpoint) = folder_checkpoint(path)? {
        return Ok(Some(checkpoint));
    }
    let Ok(entries) = std::fs::read_dir(copies) else {
        return Ok(None);
    };
    let mut names: Vec<std::path::PathBuf> = entries
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.path())
        .filter(|copy| {
            copy.to_str().is_some_and(|text| {
                text.ends_with(&format!(
                    ".safetensors{}",
                    crate::checkpoint::HEADER_COPY_SUFFIX
                ))
            })
        })
        .take(crate::checkpoint::MAX_SHARDS + 1)
        .collect();
    names.sort();
    let mut merged: Option<crate::checkpoint::Checkpoint> = None;
    for copy in names {
        let header = crate::checkpoint::read_header_copy(&copy)?;
        let all = merged.get_or_insert_with(|| crate::checkpoint::Checkpoint {
            tensors: Vec::new(),
            files: Vec::new(),
            data_bytes: crate::units::Bytes::ZERO,
        });
        all.data_bytes = all
            .data_bytes
            .add(header.data_bytes, "the checkpoint size")?;
        all.tensors.extend(header.tensors);
        if all.tensors.len() > crate::checkpoint::MAX_CHECKPOINT_TENSORS {
            return Err(Error::File {
                path: copies.display().to_string(),
                problem: crate::checkpoint::too_many_tensors(),
            });
        }
        all.files.push(copy);
    }
    Ok(merged)
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
    let nearest = matching_preset(name)
        .map(nearest_preset)
        .unwrap_or_default();
    format!(
        "{not_found}; offline (HF_HUB_OFFLINE or --offline, or no cache to write into) trainmem does not download anything: `huggingface-cli download {repository} config.json{at}` fetches its config.json into the cache{nearest}"
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
            Ok(HubSource::Preset { id, preset, .. }) => {
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
