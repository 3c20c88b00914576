//! `trainmem serve`, in process on a free port: the API answers exactly what
//! `trainmem estimate --format json` prints, and every kind of bad request
//! gets a 4xx with a JSON error while the server keeps answering.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::Duration;

use assert_cmd::Command;
use serde_json::{Value, json};

/// One server for the whole file, on 127.0.0.1 and a port the OS picks.
fn server() -> SocketAddr {
    static ADDRESS: OnceLock<SocketAddr> = OnceLock::new();
    *ADDRESS.get_or_init(|| {
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let (address, serving) = trainmem::serve::bind("127.0.0.1", 0).await.unwrap();
                sender.send(address).unwrap();
                serving.await.unwrap();
            });
        });
        receiver
            .recv_timeout(Duration::from_secs(30))
            .expect("the server starts")
    })
}

/// A response: status, content type and body.
#[derive(Debug)]
struct Answer {
    status: u16,
    content_type: String,
    body: String,
}

impl Answer {
    /// The `error` of a JSON error body, checking its shape.
    fn error(&self) -> String {
        assert_eq!(self.content_type, "application/json", "{self:?}");
        let value: Value = serde_json::from_str(&self.body).expect("a JSON error body");
        let object = value.as_object().expect("an object");
        assert_eq!(object.len(), 1, "{self:?}");
        let message = object["error"]
            .as_str()
            .expect("a string error")
            .to_string();
        assert!(message.starts_with("error: "), "{message}");
        assert!(!message.contains('\n'), "one line: {message}");
        message
    }
}

/// A raw HTTP/1.1 exchange over one connection.
fn exchange(head: &str, body: &[u8]) -> Answer {
    let mut stream = TcpStream::connect(server()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    stream.write_all(head.as_bytes()).unwrap();
    // The server may answer (413) before reading all of a large body.
    let _ = stream.write_all(body);
    let mut raw = Vec::new();
    let mut buffer = [0u8; 8192];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buffer[..n]),
            Err(_) if !raw.is_empty() => break,
            Err(error) => panic!("no answer: {error}"),
        }
    }
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("a complete response");
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let header = |name: &str| {
        head.lines()
            .skip(1)
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim().to_string())
    };
    let body = if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        dechunk(body)
    } else {
        body.to_string()
    };
    Answer {
        status,
        content_type: header("content-type").unwrap_or_default(),
        body,
    }
}

fn dechunk(mut text: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = text.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap();
        if size == 0 {
            break;
        }
        out.push_str(&rest[..size]);
        text = &rest[size + 2..];
    }
    out
}

fn request(method: &str, path: &str, content_type: Option<&str>, body: &[u8]) -> Answer {
    let content_type = content_type
        .map(|t| format!("Content-Type: {t}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{content_type}Content-Length: {}\r\n\r\n",
        body.len()
    );
    exchange(&head, body)
}

fn post(body: &str) -> Answer {
    request(
        "POST",
        "/api/estimate",
        Some("application/json"),
        body.as_bytes(),
    )
}

/// What the binary prints for `args`: exit code, stdout, stderr.
fn cli(args: &[&str]) -> (i32, String, String) {
    let output = Command::cargo_bin("trainmem")
        .unwrap()
        .env("HF_HUB_OFFLINE", "1")
        .args(args)
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

/// After a bad request, a good one still gets its answer.
fn still_serving() {
    let answer = post(r#"{"params": "1B", "optimizer": "sgd"}"#);
    assert_eq!(answer.status, 200, "{answer:?}");
}

fn assert_rejected(answer: &Answer, status: u16, mentions: &str) {
    assert_eq!(answer.status, status, "{answer:?}");
    let message = answer.error();
    assert!(
        message.contains(mentions),
        "`{message}` should mention `{mentions}`"
    );
    still_serving();
}

#[test]
fn the_api_prints_what_the_cli_prints() {
    let cases: &[(Value, &[&str])] = &[
        (
            json!({"params": "7B", "optimizer": "adam", "precision": "fp32", "capacity": "80GB"}),
            &[
                "--params",
                "7B",
                "--optimizer",
                "adam",
                "--precision",
                "fp32",
                "--capacity",
                "80GB",
            ],
        ),
        (
            json!({"model": "llama-2-7b", "optimizer": "adamw", "precision": "mixed-bf16", "device": "h100-80gb"}),
            &[
                "--model",
                "llama-2-7b",
                "--optimizer",
                "adamw",
                "--precision",
                "mixed-bf16",
                "--device",
                "h100-80gb",
            ],
        ),
        (
            json!({"params": 7000000000u64, "optimizer_option": ["fused=true"], "grad_dtype": "fp32", "precision": "mixed-bf16"}),
            &[
                "--params",
                "7000000000",
                "--optimizer-option",
                "fused=true",
                "--grad-dtype",
                "fp32",
                "--precision",
                "mixed-bf16",
            ],
        ),
        (
            json!({"params": "13B", "optimizer": "adam", "precision": "bf16", "format": "json", "units": null}),
            &[
                "--params",
                "13B",
                "--optimizer",
                "adam",
                "--precision",
                "bf16",
            ],
        ),
        (
            json!({"params": "1.5B", "optimizer": "momentum", "capacity": "24GiB", "units": "gib"}),
            &[
                "--params",
                "1.5B",
                "--optimizer",
                "momentum",
                "--capacity",
                "24GiB",
                "--units",
                "gib",
            ],
        ),
        (
            json!({"model": "llama-2-7b", "lora_rank": 16, "lora_dora": true, "quantize": "nf4",
                   "double_quant": true, "freeze": ["embed"], "gpus": 2, "zero": "2"}),
            &[
                "--model",
                "llama-2-7b",
                "--lora-rank",
                "16",
                "--lora-dora",
                "--quantize",
                "nf4",
                "--double-quant",
                "--freeze",
                "embed",
                "--gpus",
                "2",
                "--zero",
                "2",
            ],
        ),
    ];
    for (request, flags) in cases {
        let answer = post(&request.to_string());
        let mut args = vec!["estimate"];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["--format", "json"]);
        let (code, stdout, stderr) = cli(&args);
        assert_eq!(code, 0, "{args:?}: {stderr}");
        assert_eq!(answer.status, 200, "{request}: {answer:?}");
        assert_eq!(answer.content_type, "application/json");
        assert_eq!(
            answer.body, stdout,
            "{request} differs from trainmem {args:?}"
        );
    }
}

#[test]
fn api_errors_are_the_cli_lines() {
    let cases: &[(Value, &[&str])] = &[
        (
            json!({"params": "7B", "optimizer": "adamm"}),
            &["--params", "7B", "--optimizer", "adamm"],
        ),
        (json!({"params": "-5"}), &["--params", "-5"]),
        (json!({"params": -5}), &["--params", "-5"]),
        (
            json!({"params": "7B", "capacity": "80"}),
            &["--params", "7B", "--capacity", "80"],
        ),
        (
            json!({"params": "7B", "precision": "fp99"}),
            &["--params", "7B", "--precision", "fp99"],
        ),
        (json!({"optimizer": "adam"}), &["--optimizer", "adam"]),
    ];
    for (request, flags) in cases {
        let answer = post(&request.to_string());
        let mut args = vec!["estimate"];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["--format", "json"]);
        let (code, stdout, stderr) = cli(&args);
        assert_eq!((code, stdout.as_str()), (2, ""), "{args:?}");
        assert_eq!(answer.status, 400, "{request}: {answer:?}");
        assert_eq!(format!("{}\n", answer.error()), stderr, "{request}");
    }
    still_serving();
}

#[test]
fn a_pasted_config_is_priced_like_its_preset() {
    let config = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/presets/llama-2-7b.json"
    ))
    .unwrap();
    let flags = [
        "--optimizer",
        "adamw",
        "--precision",
        "mixed-bf16",
        "--device",
        "h100",
    ];
    let (_, stdout, _) = cli(&[
        "estimate",
        "--model",
        "llama-2-7b",
        flags[0],
        flags[1],
        flags[2],
        flags[3],
        flags[4],
        flags[5],
        "--format",
        "json",
    ]);
    let mut expected: Value = serde_json::from_str(&stdout).unwrap();
    for config in [
        Value::String(config.clone()),
        serde_json::from_str(&config).unwrap(),
    ] {
        let request = json!({"config": config, "optimizer": "adamw", "precision": "mixed-bf16", "device": "h100"});
        let answer = post(&request.to_string());
        assert_eq!(answer.status, 200, "{answer:?}");
        let mut got: Value = serde_json::from_str(&answer.body).unwrap();
        assert_eq!(got["model"]["source"], "pasted config.json");
        assert_eq!(got["model"]["model_type"], "llama");
        for value in [&mut got, &mut expected] {
            let object = value.as_object_mut().unwrap();
            object.remove("model");
            let notes = object["notes"].as_array().unwrap();
            let kept: Vec<Value> = notes
                .iter()
                .filter(|n| !n.as_str().unwrap().starts_with("preset:"))
                .cloned()
                .collect();
            object.insert("notes".into(), Value::Array(kept));
        }
        assert_eq!(got, expected);
    }
}

/// A truncated config.json (only the hidden size and the layer count)
/// still builds a model from `LlamaConfig`'s defaults, and the answer names
/// each key it took a default for, so the page can warn.
#[test]
fn a_truncated_config_names_the_keys_it_defaulted() {
    let request =
        json!({"config": {"model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 16}});
    let answer = post(&request.to_string());
    assert_eq!(answer.status, 200, "{answer:?}");
    let got: Value = serde_json::from_str(&answer.body).unwrap();
    let defaulted: Vec<(&str, &str)> = got["model"]["defaulted_keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| (k["key"].as_str().unwrap(), k["default"].as_str().unwrap()))
        .collect();
    for (key, default) in [
        ("vocab_size", "32000"),
        ("intermediate_size", "11008"),
        ("num_attention_heads", "32"),
        ("tie_word_embeddings", "false"),
    ] {
        assert!(
            defaulted.contains(&(key, default)),
            "{key} = {default} in {defaulted:?}"
        );
    }
    for given in ["hidden_size", "num_hidden_layers", "model_type"] {
        assert!(defaulted.iter().all(|(key, _)| *key != given), "{given}");
    }
    // A complete published file lacks none of the keys that size it.
    let full = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/presets/llama-3.2-1b.json"
    ))
    .unwrap();
    let answer = post(&json!({ "config": full }).to_string());
    let got: Value = serde_json::from_str(&answer.body).unwrap();
    assert_eq!(got["model"]["defaulted_keys"], json!([]));
}

#[test]
fn bad_configs_are_refused() {
    assert_rejected(&post(r#"{"config": "{"}"#), 400, "not valid JSON");
    assert_rejected(&post(r#"{"config": [1]}"#), 400, "must hold a JSON object");
    assert_rejected(
        &post(r#"{"config": {"model_type": "nope"}}"#),
        400,
        "unsupported model_type `nope`",
    );
    assert_rejected(
        &post(r#"{"config": {"model_type": "llama", "hidden_size": -1}}"#),
        400,
        "hidden_size",
    );
    assert_rejected(
        &post(r#"{"config": {"model_type": "gpt2"}, "params": "7B"}"#),
        400,
        "`params` cannot be combined with `config`",
    );
    assert_rejected(
        &post(r#"{"config": {"model_type": "gpt2"}, "optimizer": "adamm"}"#),
        400,
        "unknown optimizer `adamm`",
    );
}

#[test]
fn broken_json_is_refused() {
    assert_rejected(&post(r#"{"params": "7B""#), 400, "not valid JSON");
    assert_rejected(&post(""), 400, "not valid JSON");
}

#[test]
fn a_body_that_is_not_an_object_is_refused() {
    for body in ["[1]", "\"7B\"", "7", "null"] {
        assert_rejected(&post(body), 400, "must be a JSON object");
    }
}

#[test]
fn unknown_keys_are_refused_with_a_suggestion() {
    assert_rejected(
        &post(r#"{"paramz": "7B"}"#),
        400,
        "unknown key `paramz`; did you mean `params`?",
    );
    assert_rejected(&post(r#"{"help": true}"#), 400, "unknown key `help`");
    assert_rejected(
        &post(r#"{"grad_dtype": "fp32", "grad-dtype": "bf16", "params": "7B"}"#),
        400,
        "given twice",
    );
}

#[test]
fn duplicate_keys_are_refused() {
    // serde_json keeps the last: this would price adam, not sgd.
    assert_rejected(
        &post(r#"{"optimizer": "sgd", "params": "7B", "optimizer": "adam"}"#),
        400,
        "duplicate key `optimizer` in the request body; give each key once",
    );
    assert_rejected(
        &post(r#"{"config": {"model_type": "gpt2", "n_layer": 2, "n_layer": 48}}"#),
        400,
        "duplicate key `config.n_layer` in the request body",
    );
    let pasted = json!({"config": r#"{"model_type": "gpt2", "n_embd": 8, "n_embd": 768}"#});
    assert_rejected(
        &post(&pasted.to_string()),
        400,
        "duplicate key `n_embd` in the pasted config.json",
    );
}

#[test]
fn values_of_the_wrong_type_are_refused() {
    assert_rejected(
        &post(r#"{"params": {"n": 7}}"#),
        400,
        "takes a string or a number",
    );
    assert_rejected(&post(r#"{"params": ["7B", "8B"]}"#), 400, "takes one value");
    assert_rejected(
        &post(r#"{"params": true}"#),
        400,
        "takes a string or a number",
    );
    assert_rejected(
        &post(r#"{"params": "7B", "format": "csv"}"#),
        400,
        "JSON only",
    );
}

#[test]
fn negative_and_huge_numbers_are_refused() {
    assert_rejected(
        &post(r#"{"params": -7000000000}"#),
        400,
        "invalid parameter count",
    );
    assert_rejected(
        &post(r#"{"params": "1e30"}"#),
        400,
        "invalid parameter count",
    );
    assert_rejected(
        &post(r#"{"params": "7B", "capacity": "-80GB"}"#),
        400,
        "invalid size",
    );
}

#[test]
fn no_file_is_read_for_a_web_request() {
    for model in [
        "/etc/passwd",
        "../presets/gpt2.json",
        "presets/gpt2.json",
        "C:\\\\model",
        "config.json",
        "model.safetensors",
        "..",
    ] {
        let body = json!({"model": model}).to_string();
        assert_rejected(&post(&body), 400, "reads no files");
    }
    // An unknown name lists the presets only: paths are not accepted here.
    assert_rejected(
        &post(r#"{"model": "llama2-7b"}"#),
        400,
        "unknown model `llama2-7b`; did you mean `llama-2-7b`? (accepted: gpt2,",
    );
    // A folder of the server's working directory is not a preset.
    assert_rejected(&post(r#"{"model": "src"}"#), 400, "unknown model `src`");
    assert_rejected(
        &post(r#"{"params": "7B", "optimizer": "../adam"}"#),
        400,
        "paths are not accepted",
    );
}

#[test]
fn oversized_bodies_are_refused() {
    let padding = "x".repeat(70 * 1024);
    let body = json!({"params": "7B", "pad": padding}).to_string();
    assert_rejected(&post(&body), 413, "larger than 64 KiB");
}

#[test]
fn wrong_methods_and_content_types_are_refused() {
    assert_rejected(
        &request("GET", "/api/estimate", None, b""),
        405,
        "`GET` is not allowed",
    );
    assert_rejected(
        &request("PUT", "/api/estimate", Some("application/json"), b"{}"),
        405,
        "`PUT`",
    );
    assert_rejected(
        &request("POST", "/api/presets", Some("application/json"), b"{}"),
        405,
        "`POST`",
    );
    let body = br#"{"params": "7B"}"#;
    assert_rejected(
        &request("POST", "/api/estimate", Some("text/plain"), body),
        415,
        "content-type: application/json",
    );
    assert_rejected(
        &request("POST", "/api/estimate", None, body),
        415,
        "content-type",
    );
    assert_rejected(
        &request("GET", "/nope", None, b""),
        404,
        "no such page `/nope`",
    );
    let ok = request(
        "POST",
        "/api/estimate",
        Some("application/json; charset=utf-8"),
        body,
    );
    assert_eq!(ok.status, 200);
}

#[test]
fn the_catalogues_feed_the_menus() {
    let presets = request("GET", "/api/presets", None, b"");
    assert_eq!(presets.status, 200);
    let presets: Value = serde_json::from_str(&presets.body).unwrap();
    let names: Vec<&str> = presets
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), trainmem::input::PRESETS.len());
    assert!(names.contains(&"llama-2-7b"));
    let llama = presets
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "llama-2-7b")
        .unwrap();
    assert_eq!(llama["parameters"], 6_738_415_616u64);
    assert_eq!(llama["hub_id"], "meta-llama/Llama-2-7b-hf");

    let options = request("GET", "/api/options", None, b"");
    assert_eq!(options.status, 200);
    let options: Value = serde_json::from_str(&options.body).unwrap();
    let names = |key: &str| -> Vec<String> {
        options[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(names("optimizers").contains(&"adam".to_string()));
    assert!(names("precisions").contains(&"mixed-bf16".to_string()));
    assert!(names("devices").contains(&"h100-80gb".to_string()));
    let flags = names("flags");
    for flag in [
        "params",
        "model",
        "optimizer",
        "precision",
        "capacity",
        "device",
        "optimizer-option",
        "keep-outputs",
        "implementation",
    ] {
        assert!(flags.contains(&flag.to_string()), "{flag} in {flags:?}");
    }
    assert!(!flags.contains(&"help".to_string()));
}

#[test]
fn the_page_is_embedded() {
    let page = request("GET", "/", None, b"");
    assert_eq!(page.status, 200);
    assert!(page.content_type.starts_with("text/html"));
    assert!(page.body.contains("<title>trainmem"));
    assert!(page.body.contains("/api/estimate"));
    for remote in ["https://", "src=\"http", "href=\"http", "url(http"] {
        assert!(
            !page.body.contains(remote),
            "the page loads nothing remote: {remote}"
        );
    }
    // The tab's icon is the server's own, not a 404.
    let icon = request("GET", "/favicon.ico", None, b"");
    assert_eq!(icon.status, 200);
    assert_eq!(icon.content_type, "image/svg+xml");
    assert!(icon.body.starts_with("<svg"));
}

#[test]
fn the_api_takes_a_task_and_states_it() {
    let answer = post(
        r#"{"model": "bert-base-uncased", "task": "seq-cls:2", "micro_batch": 4, "seq_len": 128}"#,
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    let got: Value = serde_json::from_str(&answer.body).unwrap();
    assert_eq!(got["model"]["task"], "seq-cls:2");
    let answer = post(r#"{"config": {"model_type": "roberta", "num_hidden_layers": 2}}"#);
    assert_eq!(answer.status, 200, "{answer:?}");
    let got: Value = serde_json::from_str(&answer.body).unwrap();
    assert_eq!(got["model"]["task"], "masked-lm");
    assert_rejected(
        &post(r#"{"model": "bert-base-uncased", "task": "seq2seq"}"#),
        400,
        "AutoModelForSeq2SeqLM has no class for it",
    );
}

/// A pasted config.json combines with every other key: LoRA on a quantized
/// base, ZeRO over GPUs, a micro-batch and activation flags price it exactly
/// as the preset of the same config.json on the command line.
#[test]
fn a_pasted_config_takes_every_flag() {
    let config: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/presets/llama-3.2-1b.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let flags = [
        "--optimizer",
        "adamw",
        "--precision",
        "mixed-bf16",
        "--lora-rank",
        "16",
        "--quantize",
        "nf4",
        "--gpus",
        "4",
        "--zero",
        "3",
        "--micro-batch",
        "2",
        "--seq-len",
        "1024",
        "--recompute",
        "full",
        "--attention",
        "flash",
        "--device",
        "rtx-4090-24gb",
    ];
    let mut args = vec!["estimate", "--model", "llama-3.2-1b", "--format", "json"];
    args.extend_from_slice(&flags);
    let (code, stdout, stderr) = cli(&args);
    assert_eq!(code, 0, "{stderr}");
    let mut request = json!({"config": config});
    for pair in flags.chunks(2) {
        request[pair[0].trim_start_matches("--")] = json!(pair[1]);
    }
    let answer = post(&request.to_string());
    assert_eq!(answer.status, 200, "{answer:?}");
    let mut got: Value = serde_json::from_str(&answer.body).unwrap();
    let mut expected: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(got["model"]["source"], "pasted config.json");
    for value in [&mut got, &mut expected] {
        let object = value.as_object_mut().unwrap();
        object.remove("model");
        let notes: Vec<Value> = object["notes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| !n.as_str().unwrap().starts_with("preset:"))
            .cloned()
            .collect();
        object.insert("notes".into(), Value::Array(notes));
    }
    assert_eq!(got, expected);
    assert!(got["memory"]["activations"].as_u64().unwrap() > 0, "{got}");
}

mod generated {
    //! The byte-equal guarantee over generated requests: the API's answer
    //! (or its error line) is what `trainmem estimate --format json` prints
    //! (or its stderr line) for the same flags, whichever spelling the keys
    //! and numbers take.

    use super::*;
    use proptest::prelude::*;

    /// One generated flag: its long name and value, and whether JSON gives
    /// a number as a number.
    #[derive(Debug, Clone)]
    enum Given {
        Text(&'static str, String),
        Number(&'static str, u64),
        Switch(&'static str),
    }

    fn one_of(values: &'static [&'static str]) -> impl Strategy<Value = String> {
        proptest::sample::select(values).prop_map(str::to_string)
    }

    fn request() -> impl Strategy<Value = Vec<Given>> {
        let model = prop_oneof![
            one_of(&[
                "gpt2",
                "llama-3.2-1b",
                "qwen2.5-0.5b",
                "smollm2-135m",
                "mistral-7b",
                "olmo-2-7b"
            ])
            .prop_map(|m| Given::Text("model", m)),
            one_of(&["1B", "7B", "70B"]).prop_map(|p| Given::Text("params", p)),
        ];
        let optional = |s: BoxedStrategy<Vec<Given>>| prop_oneof![Just(Vec::new()), s];
        let text = |name: &'static str, values: &'static [&'static str]| {
            one_of(values)
                .prop_map(move |v| vec![Given::Text(name, v)])
                .boxed()
        };
        (
            model,
            optional(text(
                "optimizer",
                &["adam", "adamw", "sgd", "lion", "adamw-8bit", "adafactor"],
            )),
            optional(text(
                "precision",
                &["fp32", "bf16", "mixed-bf16", "mixed-fp16"],
            )),
            optional(
                (1u64..4, proptest::sample::select(&[128u64, 512, 1024][..]))
                    .prop_map(|(b, s)| {
                        vec![Given::Number("micro-batch", b), Given::Number("seq-len", s)]
                    })
                    .boxed(),
            ),
            optional(text("recompute", &["none", "full", "selective"])),
            optional(text("attention", &["eager", "sdpa", "flash"])),
            optional(
                proptest::sample::select(&[(2u64, "1"), (4, "2"), (8, "3")][..])
                    .prop_map(|(g, z)| {
                        vec![Given::Number("gpus", g), Given::Text("zero", z.to_string())]
                    })
                    .boxed(),
            ),
            optional(
                (proptest::sample::select(&[8u64, 16][..]), any::<bool>())
                    .prop_map(|(r, q)| {
                        let mut given = vec![Given::Number("lora-rank", r)];
                        if q {
                            given.push(Given::Text("quantize", "nf4".to_string()));
                        }
                        given
                    })
                    .boxed(),
            ),
            optional(text("device", &["h100-80gb", "rtx-4090-24gb", "a100-40gb"])),
            optional(text("units", &["gb", "gib"])),
            optional(Just(vec![Given::Switch("offload-activations")]).boxed()),
        )
            .prop_map(|(m, a, b, c, d, e, f, g, h, i, j)| {
                let mut all = vec![m];
                for part in [a, b, c, d, e, f, g, h, i, j] {
                    all.extend(part);
                }
                all
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

        #[test]
        fn generated_requests_answer_what_the_cli_prints(
            given in request(),
            snake in any::<bool>(),
            numbers_as_text in any::<bool>(),
        ) {
            let mut args: Vec<String> = vec!["estimate".into()];
            let mut body = serde_json::Map::new();
            for flag in &given {
                let (name, value) = match flag {
                    Given::Text(name, v) => (*name, json!(v)),
                    Given::Number(name, n) if numbers_as_text => (*name, json!(n.to_string())),
                    Given::Number(name, n) => (*name, json!(n)),
                    Given::Switch(name) => (*name, json!(true)),
                };
                args.push(format!("--{name}"));
                if let Some(text) = match &value { Value::Bool(_) => None, Value::String(s) => Some(s.clone()), v => Some(v.to_string()) } {
                    args.push(text);
                }
                let key = if snake { name.replace('-', "_") } else { name.to_string() };
                body.insert(key, value);
            }
            args.extend(["--format".into(), "json".into()]);
            let argv: Vec<&str> = args.iter().map(String::as_str).collect();
            let (code, stdout, stderr) = cli(&argv);
            let answer = post(&Value::Object(body.clone()).to_string());
            if code == 0 {
                prop_assert_eq!(answer.status, 200, "{:?} {:?}", argv, answer);
                prop_assert_eq!(&answer.body, &stdout, "{:?}", argv);
            } else {
                prop_assert_eq!(code, 2, "{:?}: {}", argv, stderr);
                prop_assert_eq!(answer.status, 400, "{:?} {:?}", argv, answer);
                prop_assert_eq!(format!("{}\n", answer.error()), stderr, "{:?}", argv);
            }
        }
    }
}

/// "What would make it fit": the API's ladder is `trainmem techniques
/// --format json` for the same request, for a preset and a pasted config.
#[test]
fn the_techniques_are_the_clis() {
    let flags = [
        "--optimizer",
        "adamw",
        "--precision",
        "mixed-bf16",
        "--device",
        "rtx-4090-24gb",
        "--micro-batch",
        "1",
        "--seq-len",
        "1024",
    ];
    let mut args = vec!["techniques", "--model", "llama-3.2-1b", "--format", "json"];
    args.extend_from_slice(&flags);
    let (code, stdout, stderr) = cli(&args);
    assert_eq!(code, 0, "{stderr}");
    let mut body = json!({"model": "llama-3.2-1b"});
    for pair in flags.chunks(2) {
        body[pair[0].trim_start_matches("--")] = json!(pair[1]);
    }
    let answer = request(
        "POST",
        "/api/techniques",
        Some("application/json"),
        body.to_string().as_bytes(),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.body, stdout);
    // Without a workload the ladder is refused by name, as on the CLI.
    let refused = request(
        "POST",
        "/api/techniques",
        Some("application/json"),
        br#"{"model": "gpt2"}"#,
    );
    assert_rejected(&refused, 400, "--micro-batch and --seq-len");
}

/// `POST /api/plan` answers what `trainmem plan --format json` prints for
/// the same keys, and refuses what the page's plan does not run: the
/// unpruned search, its own threads, a path.
#[test]
fn the_plan_is_the_clis() {
    let body = json!({"model": "llama-3.2-1b", "micro-batch": 1, "seq-len": 1024, "optimizer": "adamw", "precision": "mixed-bf16", "gpus": 2, "device": "rtx-4090-24gb", "allow": "zero,fsdp,recompute", "top": 3});
    let answer = request(
        "POST",
        "/api/plan",
        Some("application/json"),
        body.to_string().as_bytes(),
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    let (code, stdout, stderr) = cli(&[
        "plan",
        "--model",
        "llama-3.2-1b",
        "--micro-batch",
        "1",
        "--seq-len",
        "1024",
        "--optimizer",
        "adamw",
        "--precision",
        "mixed-bf16",
        "--gpus",
        "2",
        "--device",
        "rtx-4090-24gb",
        "--allow",
        "zero,fsdp,recompute",
        "--top",
        "3",
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let api: Value = serde_json::from_str(&answer.body).unwrap();
    let shell: Value = serde_json::from_str(&stdout).unwrap();
    assert!(!shell["layouts"].as_array().unwrap().is_empty());
    assert_eq!(api, shell);
    for (body, mentions) in [
        (
            json!({"model": "gpt2", "seq-len": 128, "gpus": 2, "device": "h100-80gb", "exhaustive": true}),
            "`exhaustive`",
        ),
        (
            json!({"model": "gpt2", "seq-len": 128, "gpus": 2, "device": "h100-80gb", "jobs": 8}),
            "`jobs`",
        ),
        (
            json!({"model": "../gpt2", "seq-len": 128, "gpus": 2, "device": "h100-80gb"}),
            "reads no files",
        ),
        (
            json!({"model": "gpt2", "seq-len": 128, "device": "h100-80gb"}),
            "--gpus",
        ),
    ] {
        let answer = request(
            "POST",
            "/api/plan",
            Some("application/json"),
            body.to_string().as_bytes(),
        );
        assert_rejected(&answer, 400, mentions);
    }
    still_serving();
}

/// A pasted config.json is planned as `trainmem plan --model config.json`
/// plans the file: the same layouts, the same peaks; the base flags name
/// it `config.json`.
#[test]
fn a_pasted_config_is_planned_as_its_file() {
    let config = json!({"model_type": "llama", "hidden_size": 512, "intermediate_size": 1376, "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 8, "vocab_size": 32000});
    let folder = tempfile::tempdir().unwrap();
    let file = folder.path().join("config.json");
    std::fs::write(&file, config.to_string()).unwrap();
    let body = json!({"config": config.to_string(), "micro-batch": 2, "seq-len": 512, "gpus": 4, "device": "rtx-4090-24gb", "allow": "zero,fsdp,tp,recompute", "top": 4});
    let answer = request(
        "POST",
        "/api/plan",
        Some("application/json"),
        body.to_string().as_bytes(),
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    let (code, stdout, stderr) = cli(&[
        "plan",
        "--model",
        file.to_str().unwrap(),
        "--micro-batch",
        "2",
        "--seq-len",
        "512",
        "--gpus",
        "4",
        "--device",
        "rtx-4090-24gb",
        "--allow",
        "zero,fsdp,tp,recompute",
        "--top",
        "4",
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let api: Value = serde_json::from_str(&answer.body).unwrap();
    let shell: Value = serde_json::from_str(&stdout).unwrap();
    assert!(!shell["layouts"].as_array().unwrap().is_empty());
    // Each layout's command names the model as its door does.
    let layouts = |plan: &Value| {
        let mut layouts = plan["layouts"].clone();
        for layout in layouts.as_array_mut().unwrap() {
            layout.as_object_mut().unwrap().remove("command");
        }
        layouts
    };
    assert_eq!(layouts(&api), layouts(&shell));
    assert_eq!(api["kept"], shell["kept"]);
    assert_eq!(
        api["base_flags"],
        json!([
            "--model",
            "config.json",
            "--gpus",
            "4",
            "--seq-len",
            "512",
            "--device",
            "rtx-4090-24gb"
        ])
    );
    assert!(
        api["layouts"][0]["command"]
            .as_str()
            .unwrap()
            .starts_with("trainmem estimate --model config.json --gpus 4")
    );
    still_serving();
}
