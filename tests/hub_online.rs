//! Hub ids looked up on the hub, metadata only (issue 25, item 1): a fake hub
//! on a local port that speaks the hub's URL layout (the revision API,
//! `resolve/{commit}/{file}`, a 302 to a CDN-style path for safetensors
//! shards, answers to `Range` with 206) and refuses any whole-file download
//! of a shard; `HF_ENDPOINT` points at it and the cache is a temporary folder.
//! Then the cache it leaves is read back with the fake hub stopped, and the
//! failures (gated, not found, timeout, offline, hostile answers) each give
//! one line and exit 2.

#![cfg(unix)]

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod common;

use common::{HUB_CACHE_VARIABLES, int, run_with_env};
use serde_json::{Value, json};
use tempfile::TempDir;

/// The commit the fake hub names for every repository.
const COMMIT: &str = "0e9e39f249a16976918f6564b8830bc894c89659";
/// The etag of every config.json (a git blob hash, as the hub sends).
const CONFIG_ETAG: &str = "0bb6fd4b7f1a5fd4d3b3d2f6e0c6ad7c1fa0f2a1";
/// The published parameter count of Llama 3.1 8B.
const LLAMA_3_1_8B_PARAMETERS: u64 = 8_030_261_248;
/// Shards of the fake Llama 3.1 8B, as the real repository has.
const SHARDS: usize = 4;
/// The most bytes a hostile answer may send before the test server stops.
const HOSTILE_BYTES: u64 = 64 << 20;

/// A shard: its header prefix (length and JSON) and the length of the whole
/// file (header and data; the data is never served).
#[derive(Clone)]
struct Shard {
    prefix: Vec<u8>,
    total: u64,
}

/// A safetensors header for `tensors` (name, shape), BF16, as the
/// safetensors crate writes it (padded to 8 bytes).
fn shard(tensors: &[(String, Vec<u64>)]) -> Shard {
    let mut header = serde_json::Map::new();
    let mut offset = 0u64;
    for (name, shape) in tensors {
        let bytes = shape.iter().product::<u64>() * 2;
        header.insert(
            name.clone(),
            json!({"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + bytes]}),
        );
        offset += bytes;
    }
    let mut text = Value::Object(header).to_string();
    while !text.len().is_multiple_of(8) {
        text.push(' ');
    }
    let mut prefix = (text.len() as u64).to_le_bytes().to_vec();
    prefix.extend(text.as_bytes());
    let total = prefix.len() as u64 + offset;
    Shard { prefix, total }
}

/// Llama 3.1 8B's 291 tensors, in the order of the published checkpoint.
fn llama_3_1_8b_tensors() -> Vec<(String, Vec<u64>)> {
    let (hidden, kv, ffn, vocab) = (4096, 1024, 14336, 128256);
    let mut tensors = vec![("model.embed_tokens.weight".to_string(), vec![vocab, hidden])];
    for layer in 0..32 {
        let p = format!("model.layers.{layer}");
        for (name, shape) in [
            ("self_attn.q_proj.weight", vec![hidden, hidden]),
            ("self_attn.k_proj.weight", vec![kv, hidden]),
            ("self_attn.v_proj.weight", vec![kv, hidden]),
            ("self_attn.o_proj.weight", vec![hidden, hidden]),
            ("mlp.gate_proj.weight", vec![ffn, hidden]),
            ("mlp.up_proj.weight", vec![ffn, hidden]),
            ("mlp.down_proj.weight", vec![hidden, ffn]),
            ("input_layernorm.weight", vec![hidden]),
            ("post_attention_layernorm.weight", vec![hidden]),
        ] {
            tensors.push((format!("{p}.{name}"), shape));
        }
    }
    tensors.push(("model.norm.weight".to_string(), vec![hidden]));
    tensors.push(("lm_head.weight".to_string(), vec![vocab, hidden]));
    tensors
}

/// How a repository of the fake hub answers.
#[derive(Clone)]
enum Behaviour {
    /// As the hub: config.json, an index when there are several shards.
    Normal {
        config: String,
        shards: Vec<(String, Shard)>,
    },
    /// The revision API answers, config.json is 401 (a gated repository).
    Gated,
    /// config.json's answer never ends.
    EndlessConfig,
    /// config.json comes one byte every 100 ms, forever.
    SlowDrip,
    /// The request is read, then nothing is answered.
    Silent,
    /// The shard ignores `Range` and starts the whole file.
    IgnoresRange,
}

/// What the fake hub saw.
#[derive(Default)]
struct Seen {
    /// Every request: its path and its `Range` header.
    requests: Mutex<Vec<(String, Option<String>)>>,
    /// GETs of a `.safetensors` without a `Range`: refused with 403.
    whole_file_requests: AtomicU64,
    /// Bytes of shard files sent, all requests together.
    shard_bytes: AtomicU64,
    /// Bytes sent by the hostile answers.
    hostile_bytes: AtomicU64,
}

/// The fake hub: a thread answering on a local port until stopped.
struct FakeHub {
    endpoint: String,
    seen: Arc<Seen>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeHub {
    fn start(repositories: HashMap<String, Behaviour>) -> FakeHub {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        listener.set_nonblocking(true).unwrap();
        let seen = Arc::new(Seen::default());
        let stop = Arc::new(AtomicBool::new(false));
        let repositories = Arc::new(repositories);
        let thread = {
            let (seen, stop) = (seen.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            let (seen, repositories, stop) =
                                (seen.clone(), repositories.clone(), stop.clone());
                            std::thread::spawn(move || {
                                let _ = answer(stream, &repositories, &seen, &stop);
                            });
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(10)),
                    }
                }
            })
        };
        FakeHub {
            endpoint,
            seen,
            stop,
            thread: Some(thread),
        }
    }

    /// Stops answering and closes the port.
    fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
    }
}

impl Drop for FakeHub {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Reads one request and answers it (one request per connection).
fn answer(
    stream: TcpStream,
    repositories: &HashMap<String, Behaviour>,
    seen: &Seen,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
    let mut range = None;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("range")
        {
            range = Some(value.trim().to_string());
        }
    }
    seen.requests
        .lock()
        .unwrap()
        .push((path.clone(), range.clone()));
    let mut stream = stream;
    let reply = |stream: &mut TcpStream, status: &str, headers: &[(&str, String)], body: &[u8]| {
        let mut text = format!("HTTP/1.1 {status}\r\nConnection: close\r\n");
        for (name, value) in headers {
            text.push_str(&format!("{name}: {value}\r\n"));
        }
        text.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        stream.write_all(text.as_bytes())?;
        stream.write_all(body)
    };
    let not_found = |stream: &mut TcpStream, code: &str| {
        reply(
            stream,
            "404 Not Found",
            &[("X-Error-Code", code.to_string())],
            b"{\"error\":\"not found\"}",
        )
    };

    // The CDN: shard bytes by range only.
    if let Some(rest) = path.strip_prefix("/cdn-lfs/") {
        let (id, file) = rest.rsplit_once('/').unwrap_or(("", ""));
        let Some(Behaviour::Normal { shards, .. }) = repositories.get(id) else {
            return not_found(&mut stream, "EntryNotFound");
        };
        let Some((_, shard)) = shards.iter().find(|(name, _)| name == file) else {
            return not_found(&mut stream, "EntryNotFound");
        };
        let Some((first, last)) = range
            .as_deref()
            .and_then(|r| r.strip_prefix("bytes="))
            .and_then(|r| r.split_once('-'))
            .and_then(|(a, b)| Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?)))
        else {
            seen.whole_file_requests.fetch_add(1, Ordering::Relaxed);
            return reply(
                &mut stream,
                "403 Forbidden",
                &[],
                b"whole-file downloads of a .safetensors are refused by this test hub",
            );
        };
        let last = last.min(shard.total - 1);
        let body: Vec<u8> = (first..=last)
            .map(|at| shard.prefix.get(at as usize).copied().unwrap_or(0))
            .collect();
        seen.shard_bytes
            .fetch_add(body.len() as u64, Ordering::Relaxed);
        return reply(
            &mut stream,
            "206 Partial Content",
            &[(
                "Content-Range",
                format!("bytes {first}-{last}/{}", shard.total),
            )],
            &body,
        );
    }

    // The revision API: /api/models/{owner}/{name}/revision/{revision}.
    if let Some(rest) = path.strip_prefix("/api/models/") {
        let Some((id, _revision)) = rest.split_once("/revision/") else {
            return not_found(&mut stream, "RepoNotFound");
        };
        let Some(behaviour) = repositories.get(id) else {
            return not_found(&mut stream, "RepoNotFound");
        };
        let siblings: Vec<Value> = match behaviour {
            Behaviour::Normal { shards, .. } => {
                let mut files = vec!["config.json".to_string()];
                if shards.len() > 1 {
                    files.push("model.safetensors.index.json".to_string());
                }
                files.extend(shards.iter().map(|(name, _)| name.clone()));
                files.iter().map(|f| json!({"rfilename": f})).collect()
            }
            Behaviour::IgnoresRange => vec![json!({"rfilename": "model.safetensors"})],
            _ => vec![json!({"rfilename": "config.json"})],
        };
        let gated = matches!(behaviour, Behaviour::Gated);
        let body = json!({"id": id, "sha": COMMIT, "gated": if gated { json!("manual") } else { json!(false) }, "siblings": siblings});
        return reply(
            &mut stream,
            "200 OK",
            &[("Content-Type", "application/json".to_string())],
            body.to_string().as_bytes(),
        );
    }

    // Files: /{owner}/{name}/resolve/{commit}/{file}.
    let Some((id, file)) = path
        .strip_prefix('/')
        .and_then(|p| p.split_once("/resolve/"))
        .and_then(|(id, rest)| Some((id, rest.split_once('/')?.1)))
    else {
        return not_found(&mut stream, "EntryNotFound");
    };
    let Some(behaviour) = repositories.get(id) else {
        return not_found(&mut stream, "RepoNotFound");
    };
    let hostile = |stream: &mut TcpStream, pause: Duration| -> std::io::Result<()> {
        stream.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")?;
        let chunk = if pause.is_zero() { 64 << 10 } else { 1 };
        let block = vec![b' '; chunk];
        while !stop.load(Ordering::Relaxed)
            && seen.hostile_bytes.load(Ordering::Relaxed) < HOSTILE_BYTES
        {
            stream.write_all(&block)?;
            seen.hostile_bytes
                .fetch_add(chunk as u64, Ordering::Relaxed);
            std::thread::sleep(pause);
        }
        Ok(())
    };
    match (behaviour, file) {
        (Behaviour::Gated, _) => reply(
            &mut stream,
            "401 Unauthorized",
            &[("X-Error-Code", "GatedRepo".to_string())],
            b"{\"error\":\"gated\"}",
        ),
        (Behaviour::EndlessConfig, _) => hostile(&mut stream, Duration::ZERO),
        (Behaviour::SlowDrip, _) => hostile(&mut stream, Duration::from_millis(100)),
        (Behaviour::Silent, _) => {
            std::thread::sleep(Duration::from_secs(30));
            Ok(())
        }
        (Behaviour::IgnoresRange, _) => hostile(&mut stream, Duration::ZERO),
        (Behaviour::Normal { config, .. }, "config.json") => reply(
            &mut stream,
            "200 OK",
            &[("ETag", format!("\"{CONFIG_ETAG}\""))],
            config.as_bytes(),
        ),
        (Behaviour::Normal { shards, .. }, "model.safetensors.index.json") if shards.len() > 1 => {
            let mut weight_map = serde_json::Map::new();
            for (name, shard) in shards {
                let header: Value = serde_json::from_slice(&shard.prefix[8..]).unwrap();
                for tensor in header.as_object().unwrap().keys() {
                    weight_map.insert(tensor.clone(), json!(name));
                }
            }
            let body = json!({"metadata": {"total_size": 0}, "weight_map": weight_map});
            reply(
                &mut stream,
                "200 OK",
                &[("ETag", "\"1ndexe7a9\"".to_string())],
                body.to_string().as_bytes(),
            )
        }
        (Behaviour::Normal { shards, .. }, file) if shards.iter().any(|(name, _)| name == file) => {
            reply(
                &mut stream,
                "302 Found",
                &[
                    ("Location", format!("/cdn-lfs/{id}/{file}")),
                    ("X-Linked-Etag", format!("\"{:064x}\"", file.len())),
                ],
                b"",
            )
        }
        _ => not_found(&mut stream, "EntryNotFound"),
    }
}

/// The fake Llama 3.1 8B (its preset's published config.json, its 291
/// tensors in 4 shards) at `meta-llama/Llama-3.1-8B`, and the failing
/// repositories.
fn hub() -> FakeHub {
    let tensors = llama_3_1_8b_tensors();
    let per_shard = tensors.len().div_ceil(SHARDS);
    let shards = tensors
        .chunks(per_shard)
        .enumerate()
        .map(|(k, chunk)| {
            (
                format!("model-{:05}-of-{SHARDS:05}.safetensors", k + 1),
                shard(chunk),
            )
        })
        .collect();
    let config = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/presets/llama-3.1-8b.json"
    ))
    .unwrap();
    let mut hostile_length = shard(&llama_3_1_8b_tensors()[..1]);
    hostile_length.prefix[..8].copy_from_slice(&(1u64 << 63).to_le_bytes());
    let mut repositories = HashMap::new();
    repositories.insert(
        "meta-llama/Llama-3.1-8B".to_string(),
        Behaviour::Normal {
            config: config.clone(),
            shards,
        },
    );
    repositories.insert(
        "acme/huge-header".to_string(),
        Behaviour::Normal {
            config,
            shards: vec![("model.safetensors".to_string(), hostile_length)],
        },
    );
    repositories.insert("acme/gated".to_string(), Behaviour::Gated);
    repositories.insert("acme/endless".to_string(), Behaviour::EndlessConfig);
    repositories.insert("acme/slow-drip".to_string(), Behaviour::SlowDrip);
    repositories.insert("acme/silent".to_string(), Behaviour::Silent);
    repositories.insert("acme/ignores-range".to_string(), Behaviour::IgnoresRange);
    FakeHub::start(repositories)
}

/// Runs trainmem with the cache `home/hub`, `HF_HOME` `home`, the endpoint
/// given (and online unless `extra` says otherwise).
fn run_at(
    home: &Path,
    endpoint: &str,
    extra: &[(&str, &str)],
    args: &[&str],
) -> (i32, String, String) {
    let mut env: Vec<(&str, Option<&OsStr>)> = HUB_CACHE_VARIABLES
        .iter()
        .map(|name| (*name, None))
        .collect();
    env.push(("HF_HOME", Some(home.as_os_str())));
    env.push(("HF_ENDPOINT", Some(OsStr::new(endpoint))));
    env.push(("HF_HUB_OFFLINE", None));
    env.push(("HF_TOKEN", None));
    env.push(("HF_HUB_DOWNLOAD_TIMEOUT", Some(OsStr::new("1"))));
    for (name, value) in extra {
        env.push((name, Some(OsStr::new(value))));
    }
    run_with_env(args, &env)
}

fn estimate(model: &str) -> Vec<&str> {
    vec!["estimate", "--model", model, "--format", "json"]
}

/// Exit 2, nothing on stdout, one `error:` line holding every phrase.
fn refused(outcome: (i32, String, String), phrases: &[&str]) -> String {
    let (code, stdout, stderr) = outcome;
    assert_eq!(code, 2, "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|line| !line.starts_with("fetching "))
        .collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(errors[0].starts_with("error: "), "{stderr}");
    for phrase in phrases {
        assert!(stderr.contains(phrase), "`{phrase}` not in: {stderr}");
    }
    stderr
}

/// Every file under `folder`, relative, sorted.
fn files_under(folder: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![folder.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let kind = std::fs::symlink_metadata(&path).unwrap().file_type();
            if kind.is_dir() {
                stack.push(path);
            } else {
                found.push(path.strip_prefix(folder).unwrap().display().to_string());
            }
        }
    }
    found.sort();
    found
}

/// The acceptance run: config and 4 shard headers fetched by ranges only,
/// parameters exact, the cache in huggingface_hub's layout, and a second run
/// with the hub stopped answers from that cache.
#[test]
fn a_hub_id_is_fetched_by_ranges_into_the_cache_and_read_back_offline() {
    let home = TempDir::new().unwrap();
    let mut hub = hub();
    let (code, stdout, stderr) = run_at(
        home.path(),
        &hub.endpoint,
        &[],
        &estimate("meta-llama/Llama-3.1-8B"),
    );
    assert_eq!(code, 0, "{stderr}");
    let online: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(int(&online["parameters"]["total"]), LLAMA_3_1_8B_PARAMETERS);
    assert_eq!(online["model"]["checkpoint"]["files"], SHARDS);
    assert_eq!(online["model"]["checkpoint"]["tensors"], 291);
    let source = online["model"]["source"].as_str().unwrap();
    assert!(
        source.starts_with("hub cache: models--meta-llama--Llama-3.1-8B snapshot 0e9e39f2"),
        "{source}"
    );
    assert!(online.to_string().contains("fetched from"), "{online}");

    // Ranges only: no shard was asked for whole, and what was sent of the
    // shards is their headers and nothing more.
    assert_eq!(hub.seen.whole_file_requests.load(Ordering::Relaxed), 0);
    let requests = hub.seen.requests.lock().unwrap().clone();
    for (path, range) in &requests {
        if path.ends_with(".safetensors") {
            assert!(range.is_some(), "{path} without a range");
        }
    }
    let header_bytes: u64 = llama_3_1_8b_tensors()
        .chunks(291usize.div_ceil(SHARDS))
        .map(|chunk| shard(chunk).prefix.len() as u64)
        .sum();
    assert_eq!(hub.seen.shard_bytes.load(Ordering::Relaxed), header_bytes);
    // The revision, config.json, the index, and per shard two ranges, each
    // through the 302: 3 + 4 x 2 x 2.
    assert_eq!(requests.len(), 3 + SHARDS * 4, "{requests:?}");

    // huggingface_hub's layout: refs/main names the commit (no newline),
    // the snapshot's files link into blobs/ named by etag, and no file
    // anywhere is a `.safetensors` (a header is not the weights).
    let repository = home.path().join("hub/models--meta-llama--Llama-3.1-8B");
    assert_eq!(
        std::fs::read_to_string(repository.join("refs/main")).unwrap(),
        COMMIT
    );
    let config_link = repository.join(format!("snapshots/{COMMIT}/config.json"));
    assert_eq!(
        std::fs::read_link(&config_link).unwrap(),
        Path::new(&format!("../../blobs/{CONFIG_ETAG}"))
    );
    let files = files_under(&repository);
    assert!(
        files.iter().all(|f| !f.ends_with(".safetensors")),
        "{files:?}"
    );
    assert!(files.iter().all(|f| !f.contains("incomplete")), "{files:?}");
    assert!(
        files.contains(&format!(
            ".trainmem/headers/{COMMIT}/model-00004-of-00004.safetensors.header"
        )),
        "{files:?}"
    );
    assert!(
        files.contains(&format!("snapshots/{COMMIT}/model.safetensors.index.json")),
        "{files:?}"
    );

    // The hub stopped: the same answer, from the cache, online or offline.
    hub.stop();
    for extra in [&[][..], &[("HF_HUB_OFFLINE", "1")][..]] {
        let (code, stdout, stderr) = run_at(
            home.path(),
            &hub.endpoint,
            extra,
            &estimate("meta-llama/Llama-3.1-8B"),
        );
        assert_eq!(code, 0, "{stderr}");
        let cached: Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(cached["parameters"], online["parameters"]);
        assert_eq!(cached["memory"]["peak"], online["memory"]["peak"]);
        assert_eq!(cached["model"]["checkpoint"], online["model"]["checkpoint"]);
        assert!(!cached.to_string().contains("fetched from"));
    }
    let (code, _, stderr) = run_at(
        home.path(),
        &hub.endpoint,
        &[],
        &["--offline", "params", "meta-llama/Llama-3.1-8B"],
    );
    assert_eq!(code, 0, "{stderr}");
}

/// A header-only copy that is a link (out of the cache) is refused, as links
/// out of the cache's repository folder are.
#[test]
fn a_header_copy_that_is_a_link_is_refused() {
    let home = TempDir::new().unwrap();
    let hub = hub();
    let (code, _, stderr) = run_at(
        home.path(),
        &hub.endpoint,
        &[],
        &estimate("meta-llama/Llama-3.1-8B"),
    );
    assert_eq!(code, 0, "{stderr}");
    let copy = home.path().join(format!(
        "hub/models--meta-llama--Llama-3.1-8B/.trainmem/headers/{COMMIT}/model-00002-of-00004.safetensors.header"
    ));
    let outside = home.path().join("outside.header");
    std::fs::rename(&copy, &outside).unwrap();
    std::os::unix::fs::symlink(&outside, &copy).unwrap();
    refused(
        run_at(
            home.path(),
            &hub.endpoint,
            &[("HF_HUB_OFFLINE", "1")],
            &estimate("meta-llama/Llama-3.1-8B"),
        ),
        &["model-00002-of-00004.safetensors.header", "a symbolic link"],
    );
}

/// Gated, not found, no network and offline: one line each, exit 2, and
/// nothing written into the cache.
#[test]
fn hub_failures_are_one_line_and_exit_2() {
    let home = TempDir::new().unwrap();
    let hub = hub();
    let endpoint = hub.endpoint.as_str();
    refused(
        run_at(home.path(), endpoint, &[], &estimate("acme/gated")),
        &[
            "`acme/gated`",
            &format!("accept the license at {endpoint}/acme/gated and set HF_TOKEN"),
        ],
    );
    refused(
        run_at(
            home.path(),
            endpoint,
            &[],
            &estimate("acme/Llama-3.1-8B-Instruct"),
        ),
        &[
            "not found on the hub",
            "`acme/Llama-3.1-8B-Instruct`",
            "`llama-3.1-8b`",
        ],
    );
    refused(
        run_at(
            home.path(),
            "http://127.0.0.1:1",
            &[],
            &estimate("acme/tiny"),
        ),
        &[
            "offline: the hub (http://127.0.0.1:1) cannot be reached",
            "pass a config.json",
        ],
    );
    let before = hub.seen.requests.lock().unwrap().len();
    refused(
        run_at(
            home.path(),
            endpoint,
            &[("HF_HUB_OFFLINE", "1")],
            &estimate("acme/gated"),
        ),
        &[
            "offline",
            "does not download",
            "huggingface-cli download acme/gated config.json",
        ],
    );
    refused(
        run_at(
            home.path(),
            endpoint,
            &[],
            &["--offline", "params", "acme/gated"],
        ),
        &["offline", "does not download"],
    );
    assert_eq!(hub.seen.requests.lock().unwrap().len(), before);
    // A preset's repository the hub does not answer for is the preset, said so.
    let (code, stdout, stderr) = run_at(
        home.path(),
        "http://127.0.0.1:1",
        &[],
        &estimate("meta-llama/Meta-Llama-3.1-8B"),
    );
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(int(&report["parameters"]["total"]), LLAMA_3_1_8B_PARAMETERS);
    assert!(
        report.to_string().contains("the hub was not used: offline"),
        "{report}"
    );
    assert!(
        !home
            .path()
            .join("hub")
            .join("models--acme--gated")
            .join("refs")
            .exists()
    );
}

/// Hostile or stalled answers end, bounded in bytes and by the timeout: a
/// header length of 2^63, an endless config.json, one that drips a byte at a
/// time, one that never answers, a shard that ignores the range.
#[test]
fn hostile_hubs_are_bounded_in_bytes_and_time() {
    let home = TempDir::new().unwrap();
    let hub = hub();
    let endpoint = hub.endpoint.as_str();
    refused(
        run_at(home.path(), endpoint, &[], &estimate("acme/huge-header")),
        &["model.safetensors", "larger than the 100000000-byte limit"],
    );
    // Only the 8-byte length of that shard was fetched.
    let ranges: Vec<Option<String>> = hub
        .seen
        .requests
        .lock()
        .unwrap()
        .iter()
        .filter(|(path, _)| path.contains("huge-header") && path.contains("cdn"))
        .map(|(_, range)| range.clone())
        .collect();
    assert_eq!(ranges, [Some("bytes=0-7".to_string())]);
    refused(
        run_at(home.path(), endpoint, &[], &estimate("acme/endless")),
        &["config.json", "1048576-byte limit"],
    );
    refused(
        run_at(home.path(), endpoint, &[], &estimate("acme/slow-drip")),
        &["did not answer", "HF_HUB_DOWNLOAD_TIMEOUT"],
    );
    refused(
        run_at(home.path(), endpoint, &[], &estimate("acme/silent")),
        &["did not answer `config.json` within 1 s"],
    );
    refused(
        run_at(home.path(), endpoint, &[], &estimate("acme/ignores-range")),
        &["ignored the byte range"],
    );
    // The endless and ignoring answers were cut at their caps, not read on:
    // far fewer bytes than the test hub would have sent.
    assert!(hub.seen.hostile_bytes.load(Ordering::Relaxed) < HOSTILE_BYTES);
    let repository = home.path().join("hub");
    let written = if repository.exists() {
        files_under(&repository)
    } else {
        Vec::new()
    };
    assert!(written.iter().all(|f| !f.contains("refs")), "{written:?}");
}

/// `trainmem serve`: `POST /api/estimate` with a hub id as `model`, from a
/// client on the same machine, is resolved as `--model` resolves it (here
/// fetched from the fake hub), with the same parameters.
#[test]
fn the_server_resolves_a_hub_id_for_a_loopback_client() {
    use std::io::Read;
    let home = TempDir::new().unwrap();
    let hub = hub();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_trainmem"))
        .args(["serve", "--port", "0"])
        .env_remove("HF_HUB_CACHE")
        .env_remove("HF_HUB_OFFLINE")
        .env("HF_HOME", home.path())
        .env("HF_ENDPOINT", &hub.endpoint)
        .env("HF_HUB_DOWNLOAD_TIMEOUT", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let address = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap()
        .to_string();
    let post = |body: &str| {
        let mut stream = TcpStream::connect(&address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        write!(
            stream,
            "POST /api/estimate HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    };
    let answer = post(r#"{"model": "meta-llama/Llama-3.1-8B"}"#);
    let _ = child.kill();
    let _ = child.wait();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let body: Value = serde_json::from_str(answer.split_once("\r\n\r\n").unwrap().1).unwrap();
    assert_eq!(int(&body["parameters"]["total"]), LLAMA_3_1_8B_PARAMETERS);
    assert!(
        body["model"]["source"]
            .as_str()
            .unwrap()
            .starts_with("hub cache: models--meta-llama--Llama-3.1-8B"),
        "{body}"
    );
    assert_eq!(hub.seen.whole_file_requests.load(Ordering::Relaxed), 0);
}
