//! The JSON API.
//!
//! `POST /api/estimate` takes a JSON object whose keys are the flags of
//! `trainmem estimate` (`{"params": "7B", "optimizer": "adam"}`; see
//! [`crate::request`] for the keys), deserializes it straight into the
//! [`EstimateRequest`] the command line also builds, and answers what
//! `trainmem estimate --format json` prints for it: the same resolution,
//! the same estimate, the same renderer. A bad request gets the one line
//! the command would print.
//!
//! A web request must not read local files: `model` accepts preset names,
//! and hub ids (`meta-llama/Llama-3.1-8B`, looked up as `--model` looks them
//! up: the local hub cache, then the hub) from a client on the same machine
//! only; never a path. A pasted config.json comes as `config` (an object,
//! or its text), and combines with every other key.

use std::sync::{Arc, OnceLock};

use axum::Extension;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::connections::ClientAddress;
use super::failure::Failure;
use super::json::{self, Refusal as JsonRefusal};
use super::pool::{Admitted, Cancel, Pool, Refusal, Weight};

use crate::device::DEVICES;
use crate::error::Error;
use crate::estimate::estimate as price;
use crate::input::{PRESETS, preset_model};
use crate::optimizer::OPTIMIZERS;
use crate::precision::PRECISIONS;
use crate::render::{self, Format};
use crate::request::plan::{OWN_KEYS, PlanRequest};
use crate::request::{self, CONFIG, EstimateRequest, ModelSource};

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
    work: impl FnOnce(&Cancel) -> Result<String, Failure> + Send + 'static,
) -> Response {
    answered(pool, pool.run(weight, work).await)
}

/// [`isolated`] in the place [`Pool::admit`] gave.
async fn isolated_admitted(
    pool: &Pool,
    admitted: Admitted,
    work: impl FnOnce(&Cancel) -> Result<String, Failure> + Send + 'static,
) -> Response {
    answered(pool, pool.run_admitted(admitted, work).await)
}

/// The answer of work run on the pool, or why there is none.
fn answered(pool: &Pool, outcome: Result<Result<String, Failure>, Refusal>) -> Response {
    match outcome {
        Ok(Ok(body)) => json_response(body),
        Ok(Err(failure)) => failure.into_response(),
        Err(refusal) => refused(pool, refusal),
    }
}

/// The answer to work the pool did not run to its end.
fn refused(pool: &Pool, refusal: Refusal) -> Response {
    let deadline = pool.deadline().as_secs_f64();
    match refusal {
        Refusal::Full => Failure::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "error: the server is busy: every worker and place in the queue is taken; try again in a moment",
        )
        .into_response(),
        Refusal::Waited => Failure::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("error: the server is busy: no worker was free within {deadline} s; try again in a moment"),
        )
        .into_response(),
        Refusal::Overran => Failure::new(
            StatusCode::GATEWAY_TIMEOUT,
            format!("error: the estimate took longer than {deadline} s; price a smaller model, or run `trainmem estimate` on the command line"),
        )
        .into_response(),
        Refusal::Panicked => Failure::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "error: internal error: the estimate panicked; please report the request",
        )
        .into_response(),
    }
}

/// `POST /api/estimate`.
pub async fn estimate(
    State(pool): State<Arc<Pool>>,
    client: Option<Extension<ClientAddress>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let request = match accept(&headers, body).and_then(|r| hub_model(r, client)) {
        Ok(request) => request,
        Err(failure) => return failure.into_response(),
    };
    // Flags price a preset or a flat count, bounded work; a pasted config
    // can ask for any number of layers.
    let weight = match request.model {
        Some(ModelSource::Config(_) | ModelSource::Hub(_)) => Weight::Heavy,
        _ => Weight::Light,
    };
    isolated(&pool, weight, move |_| answer(&request)).await
}

/// `POST /api/techniques`: what `trainmem techniques --format json` prints
/// for the same request: the advisor's answers, each a minimal set of
/// changes applied alone, its peak exactly `estimate`'s with its flags.
/// Up to `advisor::MAX_ESTIMATES` estimates, so it counts as heavy work,
/// and stops between batches of them once it is answered at its deadline.
pub async fn techniques(
    State(pool): State<Arc<Pool>>,
    client: Option<Extension<ClientAddress>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    heavy(&pool, client, headers, body, &[], |_, request| {
        Ok(move |cancel: &Cancel| {
            let flags = &request.flags;
            let units = request::resolve::units(&flags.report, flags.capacity.capacity.as_deref())
                .map_err(|e| Failure::from_error(&e))?;
            // Stopped between estimates once the request was answered without it.
            let ladder = request::techniques::ladder_until(&request, &|| cancel.is_set())
                .map_err(|e| Failure::from_error(&e))?
                .ok_or_else(|| Failure::new(StatusCode::GATEWAY_TIMEOUT, CANCELLED))?;
            Ok(render::techniques(&ladder, Format::Json, units))
        })
    })
    .await
}

/// `POST /api/plan`: what `trainmem plan --format json` prints for the
/// same JSON as `/api/estimate` plus the plan's keys (`allow`, `headroom`,
/// `top`, `global-batch`): the layouts of the cluster that fit, fastest
/// first. The request is read and checked as an estimate's is (no paths,
/// a hub id for a loopback client only, a pasted config.json as `config`),
/// then becomes the [`PlanRequest`] the command line builds too. `jobs` and
/// `exhaustive` are left to the command line: the search runs on one of the
/// server's workers, bounded by `plan::WORK_BUDGET`, as heavy work under
/// the server's deadline.
pub async fn plan(
    State(pool): State<Arc<Pool>>,
    client: Option<Extension<ClientAddress>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    heavy(&pool, client, headers, body, OWN_KEYS, |object, request| {
        for refused in ["jobs", "exhaustive"] {
            if object.keys().any(|k| k.trim().replace('_', "-") == refused) {
                return Err(Failure::bad(format!(
                    "error: invalid key `{refused}`: the web page's plan runs on the server's own workers; run `trainmem plan --{refused}` on the command line"
                )));
            }
        }
        let plan = PlanRequest::from_json(object, request).map_err(|e| Failure::from_error(&e))?;
        Ok(move |_: &Cancel| {
            let planned = request::plan::plan(&plan).map_err(|e| Failure::from_error(&e))?;
            let units = planned.units;
            Ok(render::plan::plan(&planned.found, Format::Json, units, plan.options.top))
        })
    })
    .await
}

/// Heavy work on a JSON request (the advisor's, the plan's): its place
/// taken before the body is parsed, so that a flood of them is shed
/// cheaply; the body read and checked as an estimate's is (less its `own`
/// keys, which only `prepare` reads); then `prepare` given the body's
/// object and its request, and the work it returns run on the pool.
async fn heavy<W>(
    pool: &Pool,
    client: Option<Extension<ClientAddress>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
    own: &[&str],
    prepare: impl FnOnce(serde_json::Map<String, Value>, EstimateRequest) -> Result<W, Failure>,
) -> Response
where
    W: FnOnce(&Cancel) -> Result<String, Failure> + Send + 'static,
{
    let admitted = match pool.admit(Weight::Heavy) {
        Ok(admitted) => admitted,
        Err(refusal) => return refused(pool, refusal),
    };
    let work = json_body(&headers, body)
        .and_then(|body| object_of(&body))
        .and_then(|object| {
            let mut estimate_keys = object.clone();
            for key in object.keys() {
                if own.contains(&key.trim().to_ascii_lowercase().replace('_', "-").as_str()) {
                    estimate_keys.remove(key);
                }
            }
            let request = hub_model(request_of(estimate_keys)?, client)?;
            prepare(object, request)
        });
    match work {
        Ok(work) => isolated_admitted(pool, admitted, work).await,
        Err(failure) => failure.into_response(),
    }
}

/// `model` as a hub id (`meta-llama/Llama-3.1-8B`, no preset has that
/// name): resolved as `--model` resolves it, through the local cache and
/// the hub, only for a client on this machine (the hub is reached, and the
/// cache written, on its behalf); refused for any other client.
fn hub_model(
    request: EstimateRequest,
    client: Option<Extension<ClientAddress>>,
) -> Result<EstimateRequest, Failure> {
    let Some(ModelSource::Hub(id)) = &request.model else {
        return Ok(request);
    };
    if client.is_some_and(|Extension(client)| client.is_loopback()) {
        return Ok(request);
    }
    Err(Failure::bad(format!(
        "error: invalid model `{}`: a hub id is looked up only for a client on the server's own machine; give a preset name, or paste its config.json as `config`",
        crate::checkpoint::abbreviated(id)
    )))
}

/// The request of a JSON body sent as JSON, read whole within its limits.
fn accept(
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<EstimateRequest, Failure> {
    read(&json_body(headers, body)?)
}

/// A body sent as JSON, read whole within its limits.
fn json_body(headers: &HeaderMap, body: Result<Bytes, BytesRejection>) -> Result<Bytes, Failure> {
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    if !is_json {
        return Err(Failure::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "error: send a JSON object with `content-type: application/json`",
        ));
    }
    // The body was read whole, within its size and time, by `body::read_whole`.
    let body = body.map_err(|rejection| {
        Failure::new(
            rejection.status(),
            format!(
                "error: cannot read the request body: {}",
                rejection.body_text()
            ),
        )
    })?;
    Ok(body)
}

/// The request in a body. Its cost is bounded by the body's size, so it is
/// read here rather than on the pool.
fn read(body: &[u8]) -> Result<EstimateRequest, Failure> {
    request_of(object_of(body)?)
}

/// The JSON object of a body, parsed by the guarded parser.
fn object_of(body: &[u8]) -> Result<serde_json::Map<String, Value>, Failure> {
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
    Ok(object)
}

/// The request of a body's object: a pasted config.json parsed, paths
/// refused, the flags typed.
fn request_of(mut object: serde_json::Map<String, Value>) -> Result<EstimateRequest, Failure> {
    // A config.json pasted as text is untrusted JSON: parsed by the same
    // guarded parser as the body (duplicate keys refused).
    for (key, value) in object.iter_mut() {
        if key.trim().eq_ignore_ascii_case(CONFIG)
            && let Value::String(text) = value
        {
            *value = json::parse(text.as_bytes()).map_err(|refusal| match refusal {
                JsonRefusal::Invalid(e) => Failure::bad(format!(
                    "error: the pasted config.json is not valid JSON: {e}"
                )),
                JsonRefusal::Duplicate(key) => Failure::bad(format!(
                    "error: duplicate key `{key}` in the pasted config.json; give each key once"
                )),
            })?;
        }
    }
    for (key, value) in &object {
        if !key.trim().eq_ignore_ascii_case(CONFIG) {
            no_path(key, value)?;
        }
    }
    let request = EstimateRequest::from_json(&object).map_err(|e| Failure::from_error(&e))?;
    match request.flags.report.output.format.as_deref() {
        None => Ok(request),
        Some(format) if format.trim().eq_ignore_ascii_case("json") => Ok(request),
        Some(_) => Err(Failure::bad(
            "error: the API answers in JSON only: `format` must be `json` (or left out)",
        )),
    }
}

/// Refuses a value that looks like a path, in case a flag that reads files
/// is ever added: the web page reads no files. A bandwidth's `/s` is not a
/// path. (`model` says so itself, naming the presets.)
fn no_path(key: &str, value: &Value) -> Result<(), Failure> {
    let refuse = |text: &str| {
        let text = text.trim();
        let text = text.strip_suffix("/s").unwrap_or(text);
        text.contains(['/', '\\']) || text.contains("..")
    };
    let texts: Vec<&str> = match value {
        Value::String(text) => vec![text.as_str()],
        Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if key.trim().eq_ignore_ascii_case(request::MODEL) {
        return Ok(());
    }
    match texts.into_iter().find(|t| refuse(t)) {
        Some(text) => Err(Failure::bad(format!(
            "error: invalid {key} `{text}`: the web page reads no files, and paths are not accepted"
        ))),
        None => Ok(()),
    }
}

/// What `trainmem estimate --format json` prints for the request.
fn answer(request: &EstimateRequest) -> Result<String, Failure> {
    let (model, setup, _, units) = request.resolve().map_err(|e| Failure::from_error(&e))?;
    let estimate = price(&model, &setup).map_err(|e| Failure::from_error(&e))?;
    Ok(render::estimate(&estimate, Format::Json, units))
}

/// `GET /api/presets`: every preset with its hub id and exact parameter count.
pub async fn presets(State(pool): State<Arc<Pool>>) -> Response {
    static LISTING: OnceLock<Result<String, String>> = OnceLock::new();
    isolated(&pool, Weight::Light, |_| {
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
    isolated(&pool, Weight::Light, |_| {
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
        let flags: Vec<Value> = request::flag_list()
            .iter()
            .map(|f| {
                json!({
                    "name": f.name,
                    "help": f.help,
                    "value_name": f.value_name,
                    "switch": f.switch,
                    "repeatable": f.repeatable,
                    "default": f.default,
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

/// What stopped work would answer; no client reads it, as the request was
/// answered (504) or its client left before.
const CANCELLED: &str = "error: the work was stopped: its request was answered without it";

const ROUTES: &str = "the server answers GET /, GET /favicon.ico, POST /api/estimate, POST /api/techniques, POST /api/plan, GET /api/presets and GET /api/options";

#[cfg(test)]
mod tests {
    use super::*;

    /// A hub id is looked up for a client on this machine only; a preset
    /// goes through for anyone.
    #[test]
    fn hub_ids_only_for_loopback_clients() {
        let hub = || {
            EstimateRequest::from_json(json!({"model": "acme/tiny"}).as_object().unwrap()).unwrap()
        };
        assert_eq!(hub().model, Some(ModelSource::Hub("acme/tiny".to_string())));
        let client = |address: &str| Some(Extension(ClientAddress(address.parse().unwrap())));
        assert!(hub_model(hub(), client("127.0.0.1:5000")).is_ok());
        assert!(hub_model(hub(), client("[::1]:5000")).is_ok());
        assert!(hub_model(hub(), client("10.0.0.7:5000")).is_err());
        assert!(hub_model(hub(), None).is_err());
        let preset =
            EstimateRequest::from_json(json!({"model": "gpt2"}).as_object().unwrap()).unwrap();
        assert!(hub_model(preset, client("10.0.0.7:5000")).is_ok());
    }

    #[test]
    fn paths_are_refused_in_every_value() {
        for value in [
            json!("/etc"),
            json!("a/b"),
            json!("a\\b"),
            json!(".."),
            json!(["ok", "../x"]),
        ] {
            assert!(no_path("optimizer", &value).is_err(), "{value}");
        }
        for value in [json!("adam"), json!("450GB/s"), json!(7), json!(["q_proj"])] {
            assert!(no_path("intra-node-bandwidth", &value).is_ok(), "{value}");
        }
        // `model` names the presets in its own refusal.
        assert!(no_path("model", &json!("../x")).is_ok());
    }
}
