//! A hub id looked up on the Hugging Face hub, metadata only, and written
//! into the local cache ([`super::cache_write`]) for the next lookup:
//!
//! 1. `GET {endpoint}/api/models/{id}/revision/{revision}`: the commit hash,
//!    whether the repository is gated, and its files (`siblings`);
//! 2. `GET {endpoint}/{id}/resolve/{commit}/config.json`, and the
//!    `model.safetensors.index.json` when the repository has one;
//! 3. for each safetensors shard (the index's, or `model.safetensors`), two
//!    range requests: `bytes=0-7`, the header's little-endian length, then
//!    the header itself, checked as a local file's header is (the same cap,
//!    and the data must end where the hub says the file ends). The tensor
//!    data is never asked for.
//!
//! The URL layout is huggingface_hub's (`constants.py`: `HUGGINGFACE_CO_URL_TEMPLATE`
//! = `{endpoint}/{repo_id}/resolve/{revision}/{filename}`; `HfApi.model_info`
//! = `{endpoint}/api/models/{repo_id}/revision/{revision}`).

use serde::Deserialize;

use super::cache_write::RepositoryWriter;
use super::http::{Answer, Client, Failure};
use super::settings::HubSettings;
use super::snapshot::{Snapshot, is_plain_name};
use crate::checkpoint::{
    self, LENGTH_PREFIX_BYTES, MAX_CHECKPOINT_TENSORS, MAX_HEADER_BYTES, MAX_INDEX_BYTES,
    is_plain_file_name, parse_header, parse_index,
};
use crate::error::{Error, Result};

/// The longest revision answer read: its `siblings` list about 60 bytes per
/// file, so room for a quarter of a million files.
const MAX_API_BYTES: u64 = 16 << 20;

/// The most header bytes fetched for one model, all shards together: the
/// largest released checkpoints' headers hold about 20 MB (140,000 tensors
/// at about 150 bytes each).
const MAX_FETCHED_HEADER_BYTES: u64 = 256 << 20;

/// The files of the repository that trainmem reads.
const CONFIG: &str = "config.json";
const INDEX: &str = "model.safetensors.index.json";
const SINGLE_FILE: &str = "model.safetensors";
const SAFETENSORS: &str = ".safetensors";

/// The revision answer, as far as trainmem reads it.
#[derive(Deserialize)]
struct RevisionInfo {
    sha: String,
    #[serde(default)]
    siblings: Option<Vec<Sibling>>,
}

#[derive(Deserialize)]
struct Sibling {
    rfilename: String,
}

/// A lookup of `owner/name`.
struct Lookup<'a> {
    settings: &'a HubSettings,
    client: Client,
    id: String,
}

/// Fetches the metadata of `owner/name` at `revision` (`main` when not
/// given) from the hub and writes it into `cache`: the snapshot written.
pub fn fetch(
    settings: &HubSettings,
    owner: &str,
    name: &str,
    revision: Option<&str>,
    cache: &std::path::Path,
) -> Result<Snapshot> {
    let mut lookup = Lookup {
        settings,
        client: Client::new(settings),
        id: format!("{owner}/{name}"),
    };
    let wanted = revision.unwrap_or("main");
    let info = lookup.revision(wanted)?;
    let commit = info.sha;
    if !is_plain_name(&commit) {
        return Err(lookup.error(format!(
            "the hub named the commit `{}`; expected a commit hash of hexadecimal digits",
            checkpoint::abbreviated(&commit)
        )));
    }
    let listed = |file: &str| {
        info.siblings
            .as_ref()
            .is_none_or(|siblings| siblings.iter().any(|s| s.rfilename == file))
    };
    let writer = RepositoryWriter::new(cache, owner, name, &commit);
    let written = |error: std::io::Error| Error::File {
        path: writer.folder.display().to_string(),
        problem: format!(
            "cannot write the fetched metadata into the hub cache: {}",
            checkpoint::io_problem(&error)
        ),
    };
    let known_files = info.siblings.is_some();
    let config = if listed(CONFIG) {
        lookup.file(&commit, CONFIG, crate::input::MAX_CONFIG_BYTES, known_files)?
    } else {
        None
    };
    let index = if listed(INDEX) {
        lookup.file(&commit, INDEX, MAX_INDEX_BYTES, false)?
    } else {
        None
    };
    let shards: Vec<String> = match &index {
        Some(index) => parse_index(&index.body)
            .map_err(|problem| lookup.error(format!("its `{INDEX}`: {problem}")))?
            .shards
            .into_keys()
            .collect(),
        None => match &info.siblings {
            Some(siblings) => {
                let mut shards: Vec<String> = siblings
                    .iter()
                    .map(|s| s.rfilename.clone())
                    .filter(|file| file.ends_with(SAFETENSORS) && is_plain_file_name(file))
                    .take(checkpoint::MAX_SHARDS + 1)
                    .collect();
                if shards.len() > checkpoint::MAX_SHARDS {
                    return Err(lookup.error(format!(
                        "it lists more than {} safetensors files; expected at most {}",
                        checkpoint::MAX_SHARDS,
                        checkpoint::MAX_SHARDS
                    )));
                }
                shards.sort();
                shards
            }
            None => vec![SINGLE_FILE.to_string()],
        },
    };
    if config.is_none() && shards.is_empty() {
        return Err(lookup.error(format!(
            "the repository holds no `{CONFIG}` and no safetensors files; pass a config.json or a .safetensors file instead"
        )));
    }
    let mut header_bytes = 0u64;
    let mut tensors = 0usize;
    for shard in &shards {
        let Some((prefix, count)) =
            lookup.header(&commit, shard, index.is_some() || known_files)?
        else {
            continue;
        };
        header_bytes = header_bytes.saturating_add(prefix.len() as u64);
        tensors = tensors.saturating_add(count);
        if header_bytes > MAX_FETCHED_HEADER_BYTES {
            return Err(lookup.error(format!(
                "its safetensors headers together exceed {MAX_FETCHED_HEADER_BYTES} bytes; the largest real checkpoints' headers hold about 20 MB"
            )));
        }
        if tensors > MAX_CHECKPOINT_TENSORS {
            return Err(lookup.error(checkpoint::too_many_tensors()));
        }
        writer.header_copy(shard, &prefix).map_err(written)?;
    }
    for (file, answer) in [(INDEX, &index), (CONFIG, &config)] {
        if let Some(answer) = answer {
            writer
                .file(file, &blob_name(answer), &answer.body)
                .map_err(written)?;
        }
    }
    writer.reference(wanted).map_err(written)?;
    Ok(Snapshot {
        repository: writer
            .folder
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default(),
        folder: writer.snapshot(),
        revision: commit,
    })
}

/// The blob's name: the hub's etag (the git or LFS hash huggingface_hub
/// names it by), else the SHA-256 of the bytes.
fn blob_name(answer: &Answer) -> String {
    match answer.etag.as_deref().filter(|etag| is_plain_name(etag)) {
        Some(etag) => etag.to_string(),
        None => ring::digest::digest(&ring::digest::SHA256, &answer.body)
            .as_ref()
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect(),
    }
}

impl Lookup<'_> {
    fn error(&self, problem: String) -> Error {
        Error::Hub {
            id: self.id.clone(),
            problem,
        }
    }

    /// `url` for `what`: the commit, a file, a shard's header.
    fn resolve_url(&self, commit: &str, file: &str) -> String {
        format!(
            "{}/{}/resolve/{commit}/{file}",
            self.settings.endpoint, self.id
        )
    }

    fn revision(&mut self, revision: &str) -> Result<RevisionInfo> {
        let url = format!(
            "{}/api/models/{}/revision/{revision}",
            self.settings.endpoint, self.id
        );
        let answer = self
            .client
            .get(&url, "the repository's revision", MAX_API_BYTES)
            .map_err(|failure| self.failed(failure, &format!("revision `{revision}`")))?;
        serde_json::from_slice(&answer.body).map_err(|e| {
            self.error(format!(
                "the hub's revision answer is not the expected json ({}); expected {{\"sha\": \"...\", \"siblings\": [..]}}",
                checkpoint::json_position(&e)
            ))
        })
    }

    /// A whole small file; `None` when the hub has no such file and
    /// `required` is false.
    fn file(
        &mut self,
        commit: &str,
        file: &str,
        cap: u64,
        required: bool,
    ) -> Result<Option<Answer>> {
        let url = self.resolve_url(commit, file);
        match self.client.get(&url, file, cap) {
            Ok(answer) => Ok(Some(answer)),
            Err(Failure::Status(404, _)) if !required => Ok(None),
            Err(failure) => Err(self.failed(failure, &format!("`{file}`"))),
        }
    }

    /// The first bytes of shard `shard` (its length prefix and header),
    /// checked as a local file's, and its tensor count; `None` when the hub
    /// has no such file and `required` is false.
    fn header(
        &mut self,
        commit: &str,
        shard: &str,
        required: bool,
    ) -> Result<Option<(Vec<u8>, usize)>> {
        let url = self.resolve_url(commit, shard);
        let what = format!("the header of `{}`", checkpoint::abbreviated(shard));
        let first = match self.client.get_range(&url, &what, 0, LENGTH_PREFIX_BYTES) {
            Ok(first) => first,
            Err(Failure::Status(404, _)) if !required => return Ok(None),
            Err(failure) => return Err(self.failed(failure, &what)),
        };
        let id = self.id.clone();
        let refused = |problem: String| Error::Hub {
            id: id.clone(),
            problem: format!("{what}: {problem}"),
        };
        let total = first.total_length.ok_or_else(|| {
            refused(
                "the range answer gave no total length (`Content-Range: bytes 0-7/TOTAL`); expected the file's size"
                    .to_string(),
            )
        })?;
        let mut prefix = first.body;
        let length = <[u8; 8]>::try_from(prefix.as_slice())
            .map(u64::from_le_bytes)
            .unwrap_or(0);
        if length > MAX_HEADER_BYTES {
            return Err(refused(format!(
                "the header length in the first 8 bytes is larger than the {MAX_HEADER_BYTES}-byte limit of the safetensors format; the file is corrupt or not a safetensors file"
            )));
        }
        // Cannot overflow: length <= MAX_HEADER_BYTES.
        if LENGTH_PREFIX_BYTES + length > total {
            return Err(refused(format!(
                "the header length in the first 8 bytes is larger than the file ({total} bytes); the file is truncated or not a safetensors file"
            )));
        }
        if length > 0 {
            let rest = self
                .client
                .get_range(&url, &what, LENGTH_PREFIX_BYTES, length)
                .map_err(|failure| self.failed(failure, &what))?;
            prefix.extend(rest.body);
        }
        let header = parse_header(&prefix, total).map_err(&refused)?;
        Ok(Some((prefix, header.tensors.len())))
    }

    /// A failed request as one line: what the status or the failure means
    /// and what to do about it.
    fn failed(&self, failure: Failure, what: &str) -> Error {
        let endpoint = &self.settings.endpoint;
        let id = &self.id;
        let problem = match failure {
            Failure::Status(401 | 403, code) if code.as_deref() != Some("RepoNotFound") => {
                let status = if self.settings.token.is_some() {
                    "the hub refused the token (HF_TOKEN) for"
                } else {
                    "the hub asks for a token for"
                };
                format!(
                    "{status} {what}: the repository is gated or private; accept the license at {endpoint}/{id} and set HF_TOKEN"
                )
            }
            Failure::Status(401 | 404, Some(code)) if code == "RepoNotFound" => format!(
                "not found on the hub ({endpoint}): no repository `{id}` (or it is private: set HF_TOKEN)"
            ),
            Failure::Status(404, Some(code)) if code == "RevisionNotFound" => {
                format!("not found on the hub ({endpoint}): {what} does not exist")
            }
            Failure::Status(404, _) => {
                format!(
                    "not found on the hub ({endpoint}): 404 for {what}; check the id and the revision"
                )
            }
            Failure::Status(status, _) => format!(
                "the hub ({endpoint}) answered {status} for {what}; try again later, or pass a config.json"
            ),
            Failure::Timeout => format!(
                "the hub ({endpoint}) did not answer {what} within {} s (HF_HUB_DOWNLOAD_TIMEOUT); try again, or pass a config.json",
                self.settings.timeout.as_secs_f64()
            ),
            Failure::Unreachable(why) => format!(
                "offline: the hub ({endpoint}) cannot be reached ({why}); connect, set HF_ENDPOINT to a mirror, or pass a config.json (`huggingface-cli download {id} config.json` fetches it)"
            ),
            Failure::Refused(why) => format!("{what} from {endpoint} refused: {why}"),
        };
        self.error(problem)
    }
}
