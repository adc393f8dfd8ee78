//! The dashboard's JSON answers (`/dashboard/api/…`) and `/metrics`.
//!
//! Rules it enforces:
//! - Every list is paged or capped on the server: [`MAX_PAGE`] devices an answer, whatever the
//!   fleet; a device's timeline and call summary are fixed-size.
//! - A tool form's words are typed and validated by [`crate::args`] exactly as `mcpdev call`
//!   does them; an invalid call is answered with the CLI's messages and never sent.
//! - Admission goes through the control API's ops; only the admission ops are reachable here.
//!   Its answer holds the waiting requests (at most
//!   [`MAX_PENDING`](crate::hub::admission::MAX_PENDING) a hub) and the approved devices (at most
//!   [`MAX_ADMITTED`](crate::hub::admission::MAX_ADMITTED)), collected from the control
//!   API's streamed `admitted`: bounded by the admission book, not by the fleet.
//! - Traffic streams: capped ([`super::streams`]), each ending when its client goes away or the
//!   credential that opened it is revoked.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::Dashboard;
use super::auth::{self, Who};
use crate::hub::principal::Lease;
use crate::links::DeviceHandle;
use crate::links::handle::LinkEvent;
use crate::session::Event;

/// Most devices one answer lists.
pub const MAX_PAGE: usize = 200;
/// Longest a call from a tool form may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// An error answer: `{"error": message}`.
pub fn error(status: StatusCode, message: &str) -> Response {
    let mut resp = (status, Json(json!({"error": message}))).into_response();
    resp.headers_mut().insert(header::CACHE_CONTROL, header::HeaderValue::from_static("no-store"));
    resp
}

fn ok(value: Value) -> Response {
    let mut resp = Json(value).into_response();
    resp.headers_mut().insert(header::CACHE_CONTROL, header::HeaderValue::from_static("no-store"));
    resp
}

/// `/metrics`: OpenMetrics for a client that asks for it (Prometheus does), else the Prometheus
/// text format 0.0.4 (what `promtool check metrics` and older scrapers read).
pub async fn metrics(State(d): State<Arc<Dashboard>>, headers: HeaderMap) -> Response {
    let snapshots = d.hub.registry.snapshots();
    crate::metrics::set_event_ring(d.hub.registry.events.held_bytes(), d.hub.registry.events.peak());
    let counts = crate::metrics::DeviceCounts::count(snapshots.iter().map(|i| (phase_word(i.phase), i.transport)));
    let text = crate::metrics::exposition(&counts);
    let open_metrics = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("application/openmetrics-text"));
    if open_metrics {
        super::text(StatusCode::OK, "application/openmetrics-text; version=1.0.0; charset=utf-8", text)
    } else {
        super::text(StatusCode::OK, "text/plain; version=0.0.4; charset=utf-8", crate::metrics::text_format(&text))
    }
}

fn phase_word(p: crate::session::Phase) -> &'static str {
    use crate::session::Phase;
    match p {
        Phase::AwaitingHello => "awaiting_hello",
        Phase::Initializing => "initializing",
        Phase::Listing => "listing",
        Phase::Ready => "ready",
        Phase::Disconnected => "disconnected",
    }
}

/// `/dashboard/api/session`: the anti-forgery token the page sends with every change.
pub async fn session(State(d): State<Arc<Dashboard>>, headers: HeaderMap) -> Response {
    let csrf = match d.auth.check(&axum::http::Method::GET, &headers, None, |h| d.hub.remote_tokens.holds(h)) {
        Ok(Who::Session { csrf, .. }) => Some(csrf),
        _ => None,
    };
    ok(json!({"csrf": csrf, "csrf_header": auth::CSRF_HEADER, "host": d.host_addr.to_string()}))
}

/// `/dashboard/api/login-link` (POST, scripts and `mcpdev dashboard`): a fresh log-in URL.
/// The link is on the authority the asker reached the hub by (a remote person's is the hub's
/// name on their network, not its loopback address), and its session lives by the remote token
/// that asked for it, if one did: directly, or through a session it opened (a session's link
/// makes a session that ends with it, so no link outlives the credential it came from).
pub async fn login_link(State(d): State<Arc<Dashboard>>, req: axum::extract::Request) -> Response {
    let (Some(who), Some(lease)) = (req.extensions().get::<Who>(), req.extensions().get::<Lease>()) else {
        return error(StatusCode::UNAUTHORIZED, "not logged in");
    };
    let holder = match who {
        Who::Bearer(crate::hub::bearer::Credential::Remote(holder)) => Some(holder.clone()),
        Who::Session { holder, .. } => holder.clone(),
        Who::Bearer(_) => None,
    };
    let host = req.headers().get(header::HOST).and_then(|h| h.to_str().ok()).filter(|h| crate::hub::authority::Authority::parse(h).is_ok());
    let url = match host {
        Some(host) => d.login_url_at(host, holder, lease),
        None => d.login_url_at(&d.own_authority(), holder, lease),
    };
    ok(json!({"url": url}))
}

/// `/dashboard/api/logout` (POST): ends this browser's session.
pub async fn logout(State(d): State<Arc<Dashboard>>, headers: HeaderMap) -> Response {
    let cookie = d.auth.log_out(&headers);
    let mut resp = ok(json!({"logged_out": true}));
    if let Ok(v) = header::HeaderValue::from_str(&cookie) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    resp
}

#[derive(Deserialize)]
pub struct ListQuery {
    #[serde(default)]
    offset: usize,
    limit: Option<usize>,
    #[serde(default)]
    q: String,
    #[serde(default)]
    state: String,
}

/// One row of the devices page.
fn row(d: &Dashboard, h: &DeviceHandle, info: &crate::session::DeviceInfo, aliases: &[(&String, &String)]) -> Value {
    let alias = aliases.iter().find(|(_, id)| **id == info.device_id).map(|(a, _)| a.as_str());
    json!({
        "id": info.device_id,
        "alias": alias,
        "transport": info.transport,
        "state": phase_word(info.phase),
        "name": info.name(),
        "tools": info.tools.len(),
        "host_tools": info.tools.offered_count(false),
        "connected_at_ms": info.connected_at_ms,
        "remote": d.timeline.remote(&info.device_id),
        "calls": h.calls.summary(),
        "onboarding_error": info.onboarding_error,
    })
}

/// `/dashboard/api/devices?offset&limit&q&state`: one page of the fleet, filtered on the server.
pub async fn devices(State(d): State<Arc<Dashboard>>, Query(q): Query<ListQuery>) -> Response {
    let limit = q.limit.unwrap_or(50).clamp(1, MAX_PAGE);
    let needle = q.q.trim().to_lowercase();
    let aliases: Vec<(&String, &String)> = d.hub.registry.aliases().iter().collect();
    let handles = d.hub.registry.handles();
    let total = handles.len();
    let mut by_state = serde_json::Map::new();
    let mut matched = 0usize;
    let mut rows = Vec::new();
    for h in &handles {
        let Some(info) = h.snapshot() else { continue };
        let state = phase_word(info.phase);
        *by_state.entry(state).or_insert(json!(0)) = json!(by_state.get(state).and_then(Value::as_u64).unwrap_or(0) + 1);
        if !q.state.is_empty() && q.state != state {
            continue;
        }
        if !needle.is_empty() {
            let alias = aliases.iter().find(|(_, id)| **id == info.device_id).map_or("", |(a, _)| a.as_str());
            let hay = [info.device_id.as_str(), alias, info.transport, state];
            if !hay.iter().any(|s| s.to_lowercase().contains(&needle)) {
                continue;
            }
        }
        if matched >= q.offset && rows.len() < limit {
            rows.push(row(&d, h, &info, &aliases));
        }
        matched += 1;
    }
    ok(json!({"total": total, "matched": matched, "offset": q.offset, "limit": limit, "by_state": by_state, "devices": rows}))
}

#[derive(Deserialize)]
pub struct DeviceQuery {
    id: String,
}

/// `/dashboard/api/device?id=`: everything the device page shows.
pub async fn device(State(d): State<Arc<Dashboard>>, Query(q): Query<DeviceQuery>) -> Response {
    let Some(h) = d.hub.registry.get(&q.id) else {
        return error(StatusCode::NOT_FOUND, &format!("no connected device has the id {:?}", q.id));
    };
    let Some(info) = h.snapshot() else {
        return error(StatusCode::NOT_FOUND, &format!("device {} just left", q.id));
    };
    let aliases: Vec<(&String, &String)> = d.hub.registry.aliases().iter().collect();
    let mut out = serde_json::to_value(&*info).unwrap_or(Value::Null);
    if let Some(obj) = out.as_object_mut() {
        obj.insert("row".into(), row(&d, &h, &info, &aliases));
        obj.insert("timeline".into(), serde_json::to_value(d.timeline.events(&q.id)).unwrap_or(Value::Null));
    }
    ok(out)
}

/// `/dashboard/api/recording?id=`: the lines a recording of the device starts with, what the hub
/// knows of it (`sim::replay::hub_knowledge`), so a recording the page makes of a device that
/// was onboarded already replays as `watch --record`'s does.
pub async fn recording(State(d): State<Arc<Dashboard>>, Query(q): Query<DeviceQuery>) -> Response {
    let Some(info) = d.hub.registry.get(&q.id).and_then(|h| h.snapshot()) else {
        return error(StatusCode::NOT_FOUND, &format!("no connected device has the id {:?}", q.id));
    };
    let description = serde_json::to_value(&*info).unwrap_or(Value::Null);
    let ts = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
    ok(serde_json::json!({"lines": crate::sim::replay::hub_knowledge(&description, &ts)}))
}

#[derive(Deserialize)]
pub struct CallBody {
    device: String,
    tool: String,
    /// `k=v` and `k:=json` words, as `mcpdev call` takes them.
    #[serde(default)]
    words: Vec<String>,
}

/// The arguments a form's words make, or the CLI's messages saying why not.
fn arguments(d: &Dashboard, body: &CallBody) -> Result<(DeviceHandle, Value), Response> {
    let h = d.hub.registry.get(&body.device).ok_or_else(|| error(StatusCode::NOT_FOUND, &format!("no connected device has the id {:?}", body.device)))?;
    let info = h.snapshot().ok_or_else(|| error(StatusCode::NOT_FOUND, "the device just left"))?;
    let Some(tool) = info.tools.iter().find(|t| t.name == body.tool) else {
        return Err(error(StatusCode::NOT_FOUND, &format!("device {} has no tool {:?}", body.device, body.tool)));
    };
    let schema = tool.value().get("inputSchema").cloned().unwrap_or(Value::Null);
    let invalid = |errors: Vec<crate::args::ArgError>| {
        let list: Vec<Value> = errors.iter().map(|e| json!({"argument": e.argument, "message": e.message, "text": e.to_string()})).collect();
        let mut resp = (StatusCode::UNPROCESSABLE_ENTITY, Json(json!({"error": "the arguments do not fit the tool's inputSchema; nothing was sent", "errors": list}))).into_response();
        resp.headers_mut().insert(header::CACHE_CONTROL, header::HeaderValue::from_static("no-store"));
        resp
    };
    let args = crate::args::build_arguments(&schema, &body.words, None).map_err(|e| invalid(vec![e]))?;
    crate::args::validate(&schema, &args).map_err(invalid)?;
    Ok((h, args))
}

/// `/dashboard/api/validate` (POST): the arguments the words make, or why they do not fit.
pub async fn validate(State(d): State<Arc<Dashboard>>, Json(body): Json<CallBody>) -> Response {
    match arguments(&d, &body) {
        Ok((_, args)) => ok(json!({"arguments": args})),
        Err(resp) => resp,
    }
}

/// `/dashboard/api/call` (POST): validates as `validate` does, then calls the tool.
pub async fn call(State(d): State<Arc<Dashboard>>, Json(body): Json<CallBody>) -> Response {
    let (h, args) = match arguments(&d, &body) {
        Ok(pair) => pair,
        Err(resp) => return resp,
    };
    let started = std::time::Instant::now();
    match h.request("tools/call", Some(json!({"name": body.tool, "arguments": args})), CALL_TIMEOUT).await {
        Ok(result) => {
            let result: Value = serde_json::from_str(&result.into_text()).unwrap_or(Value::Null);
            ok(json!({"result": result, "latency_ms": started.elapsed().as_secs_f64() * 1000.0}))
        }
        Err(e) => error(StatusCode::BAD_GATEWAY, &format!("the call failed: {e}")),
    }
}

/// `/dashboard/api/traffic?id=`: the device's MCP traffic as server-sent events, for as long as
/// the page listens. The stream reads the hub's event ring only as fast as the page takes what it
/// wrote (nothing is queued for it beyond the event being written): a page that falls behind
/// gets a `lagged` event saying how many events it missed, and never makes the hub hold more
/// than the ring's bound. A frame over [`crate::session::VIEW_MAX_BYTES`] arrives as its size
/// and a preview. The stream ends the moment the credential that opened it is revoked (its
/// [`Lease`]: a remote token, a session logged out or evicted), with no event after that.
pub async fn traffic(State(d): State<Arc<Dashboard>>, Query(q): Query<DeviceQuery>, req: axum::extract::Request) -> Response {
    let (Some(lease), Some(principal)) = (req.extensions().get::<Lease>().cloned(), req.extensions().get::<crate::hub::principal::Principal>()) else {
        return error(StatusCode::UNAUTHORIZED, "not logged in");
    };
    let permit = match d.streams.open(principal, crate::hub::bearer::peer(&req).ip()) {
        Ok(permit) => permit,
        Err(why) => {
            crate::metrics::refused(crate::metrics::Refused::StreamCap);
            if crate::metrics::log_limit::allow(crate::metrics::log_limit::Kind::Refusal, &format!("traffic streams {}", principal.describe())) {
                tracing::warn!("dashboard traffic stream refused: {why}");
            }
            return error(StatusCode::TOO_MANY_REQUESTS, &why);
        }
    };
    let events = d.hub.registry.events.subscribe();
    let trace = d.hub.registry.tracing.watch();
    let wanted = q.id;
    let open = futures_util::stream::iter([Ok::<_, Infallible>(SseEvent::default().event("open").data("{}"))]);
    let frames = futures_util::stream::unfold((events, wanted, (permit, trace), lease), |(mut events, wanted, held, lease)| async move {
        loop {
            // Checked before every event as well as waited on: an event already in the ring when
            // the lease ended is never sent.
            if lease.is_ended() {
                return None;
            }
            let next = tokio::select! {
                biased;
                () = lease.end() => return None,
                next = events.recv() => next,
            };
            let ev = match next {
                Ok(ev) => ev,
                Err(crate::links::ring::RecvError::Lagged(n)) => {
                    return Some((Ok(SseEvent::default().event("lagged").data(n.to_string())), (events, wanted, held, lease)));
                }
                Err(_) => return None,
            };
            if *ev.device_id != *wanted || !matches!(ev.event, LinkEvent::Session(Event::Traffic { .. })) {
                continue;
            }
            if lease.is_ended() {
                return None;
            }
            let data = serde_json::to_string(&*ev).unwrap_or_default();
            return Some((Ok(SseEvent::default().event("traffic").data(data)), (events, wanted, held, lease)));
        }
    });
    Sse::new(futures_util::StreamExt::chain(open, frames)).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))).into_response()
}

/// `/dashboard/api/check` (POST `{"device"}`): `mcpdev check` on the device through this hub (no
/// tool calls, no fuzzing: the checks that change nothing), one run at a time, within
/// [`CHECK_DEADLINE`]; the report as `mcpdev check --json` gives it.
pub async fn check(State(d): State<Arc<Dashboard>>, Json(body): Json<Value>) -> Response {
    let Some(device) = body["device"].as_str().map(str::to_string) else {
        return error(StatusCode::BAD_REQUEST, "check needs {\"device\": Device-Id}");
    };
    let Ok(_one) = d.checks.clone().try_acquire_owned() else {
        return error(StatusCode::TOO_MANY_REQUESTS, "a check is running already; wait for its report");
    };
    let hub_url = format!("{}://{}", d.scheme(), d.host_addr);
    let run = async {
        let (conn, greeting) = crate::check::conn::through_hub(&hub_url, Some(&device), Duration::ZERO, Duration::from_secs(10)).await.map_err(|e| format!("{e:#}"))?;
        let opts = crate::check::Options { call: Vec::new(), max_onboarding: Duration::from_secs(10), fuzz: 0 };
        Ok::<_, String>(crate::check::run(conn, greeting, std::time::Instant::now(), &opts).await)
    };
    match tokio::time::timeout(CHECK_DEADLINE, run).await {
        Ok(Ok(report)) => ok(crate::check::report::json(&report, false)),
        Ok(Err(why)) => error(StatusCode::BAD_GATEWAY, &format!("the check could not run: {why}")),
        Err(_) => error(StatusCode::GATEWAY_TIMEOUT, &format!("the check took longer than {} s", CHECK_DEADLINE.as_secs())),
    }
}

/// Longest a check from the dashboard may take.
const CHECK_DEADLINE: Duration = Duration::from_secs(120);

/// The answer of one control API op, as JSON.
async fn control_op(d: &Dashboard, request: Value) -> Result<Value, Response> {
    let text = crate::hub::control::answer_once(d.hub.clone(), &request.to_string()).await;
    let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    match answer.get("ok") {
        Some(v) => Ok(v.clone()),
        None => {
            let message = answer.pointer("/error/message").and_then(Value::as_str).unwrap_or("the hub gave no answer");
            Err(error(StatusCode::BAD_REQUEST, message))
        }
    }
}

/// `/dashboard/api/admission`: the control API's `pending` and `admitted`, as they are.
pub async fn admission(State(d): State<Arc<Dashboard>>) -> Response {
    let pending = match control_op(&d, json!({"id": 1, "op": "pending"})).await {
        Ok(v) => v,
        Err(resp) => return resp,
    };
    let admitted = match control_op(&d, json!({"id": 2, "op": "admitted"})).await {
        Ok(v) => v,
        Err(resp) => return resp,
    };
    ok(json!({"pending": pending, "admitted": admitted}))
}

/// `/dashboard/api/admission/{approve|deny|revoke}` (POST `{"target"}` / `{"code"}` / `{"device"}`): the control
/// API's op of that name.
pub async fn admission_op(State(d): State<Arc<Dashboard>>, Path(op): Path<String>, Json(body): Json<Value>) -> Response {
    let request = match (op.as_str(), &body) {
        ("approve", b) if b["target"].is_string() => json!({"id": 1, "op": "approve", "target": b["target"]}),
        ("revoke", b) if b["device"].is_string() => json!({"id": 1, "op": "revoke", "device": b["device"]}),
        ("deny", b) if b["code"].is_string() => json!({"id": 1, "op": "deny", "code": b["code"]}),
        _ => return error(StatusCode::BAD_REQUEST, "admission ops: approve {\"target\": CODE or Device-Id}, deny {\"code\": CODE}, revoke {\"device\": Device-Id}"),
    };
    tracing::info!(op = %op, "admission change from the dashboard");
    match control_op(&d, request).await {
        Ok(v) => ok(v),
        Err(resp) => resp,
    }
}

/// `/dashboard/api/hub`: listeners, caps and their use, the hub's numbers.
pub async fn hub(State(d): State<Arc<Dashboard>>) -> Response {
    let caps = d.hub.budget.caps();
    let (open, pre_hello) = d.hub.budget.counts();
    let mqtt = d.hub.mqtt.get().is_some();
    ok(json!({
        "listeners": [
            {"name": "devices", "addr": d.device_addr.to_string(), "what": "WebSocket, OTA, vision"},
            {"name": "host", "addr": d.host_addr.to_string(), "what": "control API, MCP, dashboard, /metrics (loopback)"},
        ],
        "mqtt": mqtt,
        "caps": [
            {"name": "device connections", "used": open, "cap": caps.max_connections},
            {"name": "connections before hello", "used": pre_hello, "cap": caps.pre_hello_total},
            {"name": "before hello, per peer", "used": Value::Null, "cap": caps.pre_hello_per_peer},
            {"name": "traffic streams", "used": d.streams.in_use(), "cap": super::streams::MAX_STREAMS},
        ],
        "devices": d.hub.registry.len(),
        "numbers": crate::metrics::hub_numbers(),
    }))
}
