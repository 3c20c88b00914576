//! The JSON API.
//!
//! `POST /api/estimate` takes an object whose keys are the flags of
//! `trainmem estimate` (`{"params": "7B", "optimizer": "adam"}`), turns it
//! into the argument vector `trainmem estimate --params=7B --optimizer=adam
//! --format=json` and runs it through the same clap parser and
//! [`crate::cli::run`]: the answer is byte for byte what the command prints,
//! and a bad request gets the line the command would print on stderr.
//!
//! A web request must not read local files: `model` accepts preset names
//! only, and no value may look like a path. A pasted config.json comes as the
//! extra key `config` and is parsed in memory by the same architecture code.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use clap::{ArgAction, CommandFactory, Parser};
use serde_json::{Map, Value, json};

use super::failure::Failure;
use super::json::{self, Refusal as JsonRefusal};
use super::pool::{Pool, Refusal, Weight};

use crate::architecture::tensors_for_task;
use crate::catalogue::{self, Named};
use crate::cli::{Cli, one_line, run};
use crate::device::DEVICES;
use crate::dtype::DType;
use crate::error::Error;
use crate::estimate::{Capacity, Setup, estimate as price};
use crate::input::{PRESETS, preset_model};
use crate::model::Model;
use crate::optimizer::{OPTIMIZERS, Optimizer, Options};
use crate::precision::{PRECISIONS, Precision};
use crate::render::{self, Format};
use crate::units::{Bytes as Size, Count, UnitSystem};

/// The command whose flags the API takes.
const COMMAND: &str = "estimate";
/// The key of a pasted config.json (not a flag: the CLI reads files instead).
const CONFIG: &str = "config";
/// The flag naming a model; from the web, a preset name only.
const MODEL: &str = "model";
/// The flag choosing the output format; the API answers JSON only.
const FORMAT: &str = "format";
/// Flags clap adds by itself, never accepted from the web.
const BUILT_IN: &[&str] = &["help", "version"];
/// The flags a pasted config combines with: those that only choose the
/// optimizer, precision and capacity, which [`config_setup`] resolves.
/// Any other flag (sharding, LoRA, batch, ...) is refused with `config`
/// until it is handled there, rather than silently ignored.
const CONFIG_FLAGS: &[&str] = &[
    "optimizer",
    "precision",
    "optimizer-option",
    "grad-dtype",
    "master-dtype",
    "state-dtype",
    "capacity",
    "device",
    "units",
    FORMAT,
];

/// A JSON body that is already text.
fn json_response(body: String) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// Runs `work` on the engine's pool, so the engine cannot stall the server,
/// a burst waits in a bounded queue, and a panic (a bug, never bad input)
/// answers 500 instead of killing the server.
async fn isolated(
    pool: &Pool,
    weight: Weight,
    work: impl FnOnce() -> Result<String, Failure> + Send + 'static,
) -> Response {
    let deadline = pool.deadline().as_secs_f64();
    match pool.run(weight, work).await {
        Ok(Ok(body)) => json_response(body),
        Ok(Err(failure)) => failure.into_response(),
        Err(Refusal::Full) => Failure::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "error: the server is busy: every worker and place in the queue is taken; try again in a moment",
        )
        .into_response(),
        Err(Refusal::Waited) => Failure::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("error: the server is busy: no worker was free within {deadline} s; try again in a moment"),
        )
        .into_response(),
        Err(Refusal::Overran) => Failure::new(
            StatusCode::GATEWAY_TIMEOUT,
            format!("error: the estimate took longer than {deadline} s; price a smaller model, or run `trainmem estimate` on the command line"),
        )
        .into_response(),
        Err(Refusal::Panicked) => Failure::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "error: internal error: the estimate panicked; please report the request",
        )
        .into_response(),
    }
}

/// `POST /api/estimate`.
pub async fn estimate(
    State(pool): State<Arc<Pool>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    if !is_json {
        return Failure::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "error: send a JSON object with `content-type: application/json`",
        )
        .into_response();
    }
    // The body was read whole, within its size and time, by `body::read_whole`.
    let body = match body {
        Ok(body) => body,
        Err(rejection) => {
            return Failure::new(
                rejection.status(),
                format!(
                    "error: cannot read the request body: {}",
                    rejection.body_text()
                ),
            )
            .into_response();
        }
    };
    let request = match read(&body) {
        Ok(request) => request,
        Err(failure) => return failure.into_response(),
    };
    // Flags price a preset or a flat count, bounded work; a pasted config
    // can ask for any number of layers.
    let weight = match request.config {
        None => Weight::Light,
        Some(_) => Weight::Heavy,
    };
    isolated(&pool, weight, move || answer(&request)).await
}

/// The request in a body. Its cost is bounded by the body's size, so it is
/// read here rather than on the pool.
fn read(body: &[u8]) -> Result<Request, Failure> {
    let value = json::parse(body).map_err(|refusal| match refusal {
        JsonRefusal::Invalid(e) => {
            Failure::bad(format!("error: the request body is not valid JSON: {e}"))
        }
        JsonRefusal::Duplicate(key) => Failure::bad(format!(
            "error: duplicate key `{key}` in the request body; give each key once"
        )),
    })?;
    let Value::Object(object) = value else {
        return Err(Failure::bad(
            r#"error: the request body must be a JSON object of `trainmem estimate` flags, such as {"params": "7B", "optimizer": "adam"}"#,
        ));
    };
    Request::read(&object)
}

/// The estimate a request asks for.
fn answer(request: &Request) -> Result<String, Failure> {
    match &request.config {
        None => run_command(&request.arguments),
        Some(config) => estimate_config(config, request),
    }
}

/// A request read into a command line.
struct Request {
    /// `trainmem estimate --key=value ... --format=json`.
    arguments: Vec<String>,
    /// The flags given, without dashes.
    flags: Vec<&'static str>,
    /// A pasted config.json.
    config: Option<Value>,
}

impl Request {
    fn read(object: &Map<String, Value>) -> Result<Request, Failure> {
        let mut arguments = vec!["trainmem".to_string(), COMMAND.to_string()];
        let mut flags: Vec<&'static str> = Vec::new();
        let mut config = None;
        for (key, value) in object {
            let name = key.trim().replace('_', "-").to_ascii_lowercase();
            if name == CONFIG {
                config = Some(config_value(value)?);
                continue;
            }
            let flag =
                catalogue::find("key", &name, estimate_flags()).map_err(|error| match error {
                    Error::UnknownName {
                        suggestion,
                        accepted,
                        ..
                    } => Failure::from_error(&Error::UnknownName {
                        kind: "key",
                        name: key.clone(),
                        suggestion,
                        accepted: format!("{accepted}, {CONFIG}"),
                    }),
                    other => Failure::from_error(&other),
                })?;
            if flags.contains(&flag.long) {
                return Err(Failure::bad(format!(
                    "error: `{}` is given twice; give each flag once",
                    flag.long
                )));
            }
            flags.push(flag.long);
            if flag.long == FORMAT {
                match value {
                    Value::Null => {}
                    Value::String(s) if s.trim().eq_ignore_ascii_case("json") => {}
                    _ => {
                        return Err(Failure::bad(format!(
                            "error: the API answers in JSON only: `{FORMAT}` must be `json` (or left out)"
                        )));
                    }
                }
                continue;
            }
            for text in flag.values(value)? {
                let text = if flag.long == MODEL {
                    preset_only(&text)?
                } else {
                    no_path(flag.long, text)?
                };
                arguments.push(format!("--{}={text}", flag.long));
            }
            if (flag.switch || flag.bare) && value == &Value::Bool(true) {
                arguments.push(format!("--{}", flag.long));
            }
        }
        arguments.push(format!("--{FORMAT}=json"));
        Ok(Request {
            arguments,
            flags,
            config,
        })
    }
}

/// A flag of `trainmem estimate`, as clap declares it.
#[derive(Debug, Clone)]
struct Flag {
    /// `params`, `optimizer-option`.
    long: &'static str,
    /// A switch (`--fused`) rather than a flag with a value.
    switch: bool,
    /// May be given several times (`--optimizer-option`).
    repeatable: bool,
    /// May be given bare, its value then optional (`--double-quant`).
    bare: bool,
    /// What it means, from the help text.
    help: String,
    /// `N`, `SIZE`, `NAME`.
    value_name: Option<String>,
}

impl Named for Flag {
    fn name(&self) -> &'static str {
        self.long
    }
    fn aliases(&self) -> &'static [&'static str] {
        &[]
    }
}

impl Flag {
    /// The values a JSON value gives this flag: a string or number is one,
    /// an array several (repeatable flags only), `null` and `false` none.
    /// A switch takes `true` or `false` and gives no value, as does a flag
    /// whose value is optional when it is given `true`.
    fn values(&self, value: &Value) -> Result<Vec<String>, Failure> {
        let scalar = |value: &Value| match value {
            Value::String(s) => Ok(s.clone()),
            Value::Number(n) => Ok(n.to_string()),
            _ => Err(Failure::bad(format!(
                "error: `{}` takes a string or a number, such as {}",
                self.long,
                self.example()
            ))),
        };
        match value {
            Value::Null => Ok(Vec::new()),
            Value::Bool(_) if self.switch || self.bare => Ok(Vec::new()),
            _ if self.switch => Err(Failure::bad(format!(
                "error: `{}` is a switch: give true or false",
                self.long
            ))),
            Value::Array(items) if self.repeatable => items.iter().map(scalar).collect(),
            Value::Array(_) => Err(Failure::bad(format!(
                "error: `{}` takes one value, not a list; give it as a string such as {}",
                self.long,
                self.example()
            ))),
            other => Ok(vec![scalar(other)?]),
        }
    }

    fn example(&self) -> String {
        format!(
            "{{\"{}\": \"{}\"}}",
            self.long,
            self.value_name.as_deref().unwrap_or("VALUE")
        )
    }
}

/// The flags of `trainmem estimate`, read once from clap's definition, so
/// the API accepts a new flag as soon as the command line has it.
fn estimate_flags() -> &'static [Flag] {
    static FLAGS: OnceLock<Vec<Flag>> = OnceLock::new();
    FLAGS.get_or_init(|| {
        static COMMAND_LINE: OnceLock<clap::Command> = OnceLock::new();
        let command_line = COMMAND_LINE.get_or_init(Cli::command);
        let Some(estimate) = command_line.find_subcommand(COMMAND) else {
            return Vec::new();
        };
        estimate
            .get_arguments()
            .filter_map(|arg| {
                let long = arg.get_long()?;
                if BUILT_IN.contains(&long) {
                    return None;
                }
                Some(Flag {
                    long,
                    switch: !arg.get_action().takes_values(),
                    repeatable: matches!(arg.get_action(), ArgAction::Append),
                    bare: arg.get_num_args().is_some_and(|n| n.min_values() == 0),
                    help: arg.get_help().map(ToString::to_string).unwrap_or_default(),
                    value_name: arg
                        .get_value_names()
                        .and_then(|names| names.first())
                        .map(ToString::to_string),
                })
            })
            .collect()
    })
}

/// A model from the web: a preset's canonical name, never a path.
fn preset_only(text: &str) -> Result<String, Failure> {
    let refuse = || {
        Failure::bad(format!(
            "error: invalid model `{text}`: the web page reads no files; give a preset name (`trainmem models`) or paste a config.json as `{CONFIG}`"
        ))
    };
    let lowered = text.to_ascii_lowercase();
    if text.contains(['/', '\\'])
        || text.contains("..")
        || lowered.ends_with(".json")
        || lowered.ends_with(".safetensors")
    {
        return Err(refuse());
    }
    let preset = catalogue::find(MODEL, text, PRESETS).map_err(|e| Failure::from_error(&e))?;
    // The CLI reads a file or folder of that name before it looks for a
    // preset: refuse rather than read it.
    if Path::new(preset.name).exists() {
        return Err(Failure::bad(format!(
            "error: preset `{}` has the name of a file in the server's folder, which the command line would read; start `trainmem serve` from another folder",
            preset.name
        )));
    }
    Ok(preset.name.to_string())
}

/// Any other value: refused if it looks like a path, in case a flag that
/// reads files is added to the command line.
fn no_path(flag: &str, text: String) -> Result<String, Failure> {
    if text.contains(['/', '\\']) || text.contains("..") {
        return Err(Failure::bad(format!(
            "error: invalid {flag} `{text}`: the web page reads no files, and paths are not accepted"
        )));
    }
    Ok(text)
}

/// The pasted config.json: an object, or its text.
fn config_value(value: &Value) -> Result<Value, Failure> {
    let config = match value {
        Value::String(text) => json::parse(text.as_bytes()).map_err(|refusal| match refusal {
            JsonRefusal::Invalid(e) => Failure::bad(format!(
                "error: the pasted config.json is not valid JSON: {e}"
            )),
            JsonRefusal::Duplicate(key) => Failure::bad(format!(
                "error: duplicate key `{key}` in the pasted config.json; give each key once"
            )),
        })?,
        other => other.clone(),
    };
    if !config.is_object() {
        return Err(Failure::bad(
            "error: the pasted config.json must hold a JSON object, such as {\"model_type\": \"llama\", ...}",
        ));
    }
    Ok(config)
}

/// What `trainmem ARGS` prints, or the line it prints on stderr.
fn run_command(arguments: &[String]) -> Result<String, Failure> {
    let cli = Cli::try_parse_from(arguments)
        .map_err(|e| Failure::bad(one_line(&e.render().to_string())))?;
    run(cli).map_err(|e| Failure::from_error(&e))
}

/// The estimate of a pasted config.json under the other flags.
///
/// The flags are first run through the real command line on a one-parameter
/// stand-in model, so they are validated exactly as `trainmem estimate`
/// validates them; the setup is then resolved with the same library calls,
/// and checked against what the command line resolved.
fn estimate_config(config: &Value, request: &Request) -> Result<String, Failure> {
    if let Some(flag) = request.flags.iter().find(|f| !CONFIG_FLAGS.contains(f)) {
        return Err(Failure::bad(format!(
            "error: `{flag}` cannot be combined with `{CONFIG}`: give the model as `params` or `model`, or drop `{flag}`"
        )));
    }
    let mut arguments = request.arguments.clone();
    arguments.insert(2, "--params=1".to_string());
    let printed = run_command(&arguments)?;
    let stand_in: Value = serde_json::from_str(&printed).map_err(|e| {
        Failure::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("error: internal error: the command printed invalid JSON: {e}"),
        )
    })?;
    let setup = config_setup(&request.arguments, &stand_in)?;
    // The same setup on the stand-in model must print exactly what the
    // command printed: if `trainmem estimate` ever computes more than
    // `estimate` + `render::estimate`, this refuses instead of diverging.
    if json_of(&Model::flat(Count(1)), &setup)? != printed {
        return Err(Failure::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "error: internal error: a pasted config.json is priced differently from `trainmem estimate` with these flags; give the model as `params` or `model`, and please report the request",
        ));
    }
    let (task, tensors) = tensors_for_task(config, None).map_err(|e| Failure::from_error(&e))?;
    let mut model = Model::from_tensors("config.json", "pasted config.json", tensors);
    model.task = Some(task);
    model.model_type = config
        .get("model_type")
        .and_then(Value::as_str)
        .map(str::to_string);
    json_of(&model, &setup)
}

/// The JSON report of `model` under `setup`.
fn json_of(model: &Model, setup: &Setup) -> Result<String, Failure> {
    let estimate = price(model, setup).map_err(|e| Failure::from_error(&e))?;
    Ok(render::estimate(
        &estimate,
        Format::Json,
        UnitSystem::Decimal,
    ))
}

/// The setup the flags in `arguments` (already validated) choose; the
/// capacity's label is the one the command line printed for them.
fn config_setup(arguments: &[String], stand_in: &Value) -> Result<Setup, Failure> {
    let mut values: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for argument in arguments.iter().skip(2) {
        if let Some((flag, value)) = argument.trim_start_matches("--").split_once('=') {
            values.entry(flag).or_default().push(value);
        }
    }
    let one = |flag: &str| values.get(flag).and_then(|v| v.last().copied());
    let failed = |e: Error| Failure::from_error(&e);
    let optimizer = Optimizer::find(one("optimizer").unwrap_or("adam")).map_err(failed)?;
    let mut precision = *Precision::find(one("precision").unwrap_or("fp32")).map_err(failed)?;
    if let Some(name) = one("grad-dtype") {
        precision.gradients = DType::from_name(name).map_err(failed)?;
    }
    if let Some(name) = one("master-dtype") {
        precision.master_weights = match name.trim().to_ascii_lowercase().as_str() {
            "none" => None,
            _ => Some(DType::from_name(name).map_err(failed)?),
        };
    }
    if let Some(name) = one("state-dtype") {
        precision.optimizer_states = Some(DType::from_name(name).map_err(failed)?);
    }
    let pairs: Vec<String> = values
        .get("optimizer-option")
        .map(|v| v.iter().map(|s| s.to_string()).collect())
        .unwrap_or_default();
    let capacity = match stand_in.get("capacity") {
        Some(Value::Object(c)) => Some(Capacity {
            bytes: Size(c.get("bytes").and_then(Value::as_u64).unwrap_or_default()),
            label: c
                .get("label")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        }),
        _ => None,
    };
    let mut setup = Setup::new(optimizer, precision).with_capacity(capacity);
    setup.options = Options::resolve(optimizer, &pairs).map_err(failed)?;
    setup.speed = crate::cli::default_speed(one("capacity"), one("device")).map_err(failed)?;
    Ok(setup)
}

/// `GET /api/presets`: every preset with its hub id and exact parameter count.
pub async fn presets(State(pool): State<Arc<Pool>>) -> Response {
    static LISTING: OnceLock<Result<String, String>> = OnceLock::new();
    isolated(&pool, Weight::Light, || {
        LISTING
            .get_or_init(|| {
                PRESETS
                    .iter()
                    .map(|preset| {
                        let model = preset_model(preset)?;
                        Ok(json!({
                            "name": preset.name,
                            "hub_id": preset.hub_id,
                            "model_type": model.model_type,
                            "parameters": model.total_parameters()?,
                        }))
                    })
                    .collect::<Result<Vec<_>, Error>>()
                    .map(|list| render::json(&list))
                    .map_err(|e| format!("error: {e}"))
            })
            .clone()
            .map_err(|message| Failure::new(StatusCode::INTERNAL_SERVER_ERROR, message))
    })
    .await
}

/// `GET /api/options`: the catalogues and the flags, for the page's menus.
pub async fn options(State(pool): State<Arc<Pool>>) -> Response {
    isolated(&pool, Weight::Light, || {
        let optimizers: Vec<Value> = OPTIMIZERS
            .iter()
            .map(|o| json!({ "name": o.name, "title": o.title, "summary": o.summary, "options": o.options }))
            .collect();
        let precisions: Vec<Value> = PRECISIONS
            .iter()
            .map(|p| json!({ "name": p.name, "summary": p.summary }))
            .collect();
        let devices: Vec<Value> = DEVICES
            .iter()
            .map(|d| json!({ "name": d.name, "product": d.product, "vendor": d.vendor, "bytes": d.bytes }))
            .collect();
        let flags: Vec<Value> = estimate_flags()
            .iter()
            .map(|f| {
                json!({
                    "name": f.long,
                    "help": f.help,
                    "value_name": f.value_name,
                    "switch": f.switch,
                    "repeatable": f.repeatable,
                })
            })
            .collect();
        Ok(render::json(&json!({
            "optimizers": optimizers,
            "precisions": precisions,
            "devices": devices,
            "flags": flags,
        })))
    })
    .await
}

/// Any other path.
pub async fn not_found(uri: Uri) -> Response {
    Failure::new(
        StatusCode::NOT_FOUND,
        format!("error: no such page `{}`; {}", uri.path(), ROUTES),
    )
    .into_response()
}

/// A known path with the wrong method.
pub async fn method_not_allowed(method: Method, uri: Uri) -> Response {
    Failure::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!(
            "error: `{method}` is not allowed on `{}`; {}",
            uri.path(),
            ROUTES
        ),
    )
    .into_response()
}

const ROUTES: &str =
    "the server answers GET /, POST /api/estimate, GET /api/presets and GET /api/options";

#[cfg(test)]
mod tests {
    use super::*;

    fn flag(switch: bool, repeatable: bool) -> Flag {
        Flag {
            long: "example",
            switch,
            repeatable,
            bare: false,
            help: String::new(),
            value_name: Some("N".to_string()),
        }
    }

    #[test]
    fn json_values_become_flag_values() {
        let value = flag(false, false);
        assert_eq!(value.values(&json!("7B")).unwrap(), ["7B"]);
        assert_eq!(
            value.values(&json!(7_000_000_000u64)).unwrap(),
            ["7000000000"]
        );
        assert!(value.values(&json!(null)).unwrap().is_empty());
        assert!(value.values(&json!(["a", "b"])).is_err());
        assert!(value.values(&json!(true)).is_err());
        assert!(value.values(&json!({"a": 1})).is_err());
        let repeatable = flag(false, true);
        assert_eq!(repeatable.values(&json!(["a", 1])).unwrap(), ["a", "1"]);
        assert!(repeatable.values(&json!([["a"]])).is_err());
        let switch = flag(true, false);
        assert!(switch.values(&json!(true)).unwrap().is_empty());
        assert!(switch.values(&json!(false)).unwrap().is_empty());
        assert!(switch.values(&json!("yes")).is_err());
        let bare = Flag {
            bare: true,
            ..flag(false, false)
        };
        assert!(bare.values(&json!(true)).unwrap().is_empty());
        assert_eq!(bare.values(&json!("off")).unwrap(), ["off"]);
    }

    #[test]
    fn requests_become_the_command_line() {
        let object = json!({"params": 7, "optimizer_option": ["fused=true"], "format": "json", "units": null});
        let request = Request::read(object.as_object().unwrap()).unwrap();
        assert_eq!(
            request.arguments,
            [
                "trainmem",
                "estimate",
                "--optimizer-option=fused=true",
                "--params=7",
                "--format=json"
            ]
        );
    }

    #[test]
    fn paths_never_reach_the_command_line() {
        for path in ["/etc", "a/b", "a\\b", "..", "x.json", "X.SAFETENSORS"] {
            assert!(preset_only(path).is_err(), "{path}");
        }
        assert_eq!(preset_only("LLAMA-2-7B").unwrap(), "llama-2-7b");
        assert!(no_path("optimizer", "../adam".to_string()).is_err());
        assert!(no_path("optimizer", "adam".to_string()).is_ok());
    }

    #[test]
    fn clap_errors_are_one_line() {
        let rendered = "error: a value is required\n\nUsage: trainmem estimate\n\nFor more information, try '--help'.\n";
        assert_eq!(
            one_line(rendered),
            "error: a value is required; For more information, try '--help'."
        );
    }
}
