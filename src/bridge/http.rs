//! The MCP endpoints on the hub's host listener:
//! - `/mcp` and `/devices/<id>/mcp`: Streamable HTTP (rmcp), every protocol version;
//! - `/sse` + `/messages` and `/devices/<id>/sse` + `/devices/<id>/messages`: legacy HTTP+SSE.
//!
//! `Host` and `Origin` are checked by the host listener for every route; with a token
//! configured (or a host listener other machines reach), MCP clients must also send
//! `Authorization: Bearer <token>`: the MCP token, a person's remote token (over TLS, as on the
//! control API: one credential per person), or the control token from this machine
//! ([`crate::hub::bearer`]). Every session and stream belongs to the credential that opened it
//! and ends when it is revoked ([`crate::hub::principal`]); a session is reached only by its
//! own principal's requests.
//!
//! `/devices/<id>/mcp` answers for a device that is connected, was connected since the hub
//! started, or has an alias in `mcpdev.toml`; any other id gets a 404 that says so. Its services
//! (one per device, holding that endpoint's MCP sessions) are kept up to [`PER_DEVICE_MAX`];
//! those of devices that left are dropped when room is needed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Path, Query, Request, State};
use axum::http::{Response, StatusCode, header};
use axum::routing::{any, get, post};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tower::ServiceExt as _;

use super::direct::{Direct, SESSION_ID};
use super::sessions::{Busy, Refused, SessionCaps, Slot};
use super::sse::{self, SseSessions};
use super::task_rpc;
use super::tasks::{Owner, Requestor};
use super::{Bridge, BridgeConfig, Scope, Shared};
use crate::hub::Hub;
use crate::hub::principal::{Lease, Principal};
use crate::hub::check_layer::CheckLayer;
use crate::links::upgrade::plain;
use crate::wire::identity::{format_mac, parse_mac};

type Service = StreamableHttpService<Bridge, LocalSessionManager>;

/// One MCP endpoint: rmcp's service, and the direct path for its sessions' tool calls.
#[derive(Clone)]
struct Endpoint {
    service: Service,
    direct: Arc<Direct>,
    caps: Arc<SessionCaps>,
    shared: Arc<Shared>,
    scope: Scope,
    sessions: Arc<LocalSessionManager>,
}

tokio::task_local! {
    /// The slot a new session's handler takes: rmcp makes the handler in the task that serves
    /// the `initialize`, within [`streamable`]'s scope.
    static NEW_SLOT: std::cell::Cell<Option<Slot>>;
}

/// Most per-device MCP services kept at once.
pub const PER_DEVICE_MAX: usize = 4096;

struct Endpoints {
    shared: Arc<Shared>,
    all: Endpoint,
    per_device: Mutex<HashMap<String, Endpoint>>,
    sse: Arc<SseSessions>,
}

fn endpoint(shared: &Arc<Shared>, scope: Scope) -> Endpoint {
    let sessions = Arc::new(LocalSessionManager::default());
    let direct = Arc::new(Direct::new(shared.clone(), scope.clone(), sessions.clone()));
    let (for_tasks, scope_of_tasks) = (shared.clone(), scope.clone());
    let shared = shared.clone();
    // Host and Origin are checked once, for every route, by the host listener.
    let config = StreamableHttpServerConfig::default().disable_allowed_hosts().disable_allowed_origins();
    let caps = shared.sessions.clone();
    let service = StreamableHttpService::new(
        move || Ok(Bridge::new(shared.clone(), scope.clone(), NEW_SLOT.try_with(std::cell::Cell::take).ok().flatten())),
        sessions.clone(),
        config,
    );
    Endpoint { service, direct, caps, shared: for_tasks, scope: scope_of_tasks, sessions }
}

/// The MCP routes, to merge into the host listener's router.
pub fn router(hub: Arc<Hub>, config: BridgeConfig) -> Router {
    routes(endpoints(hub, config))
}

fn endpoints(hub: Arc<Hub>, config: BridgeConfig) -> Arc<Endpoints> {
    let fleet = Arc::new(super::fleet::Fleet::new(config.fleet_threshold));
    let notifier = Arc::new(super::notifier::Notifier::default());
    notifier.spawn(&hub, fleet.clone());
    let sessions = SessionCaps::with_reclaim(config.max_sessions, config.max_sessions_per_peer, config.reclaim_idle);
    let tasks = super::tasks::Tasks::new(config.task_limits);
    tasks.spawn_sweeper();
    // Other hubs of the cluster reach the tasks held here through the hub (`task` op).
    let _ = hub.tasks.set(tasks.clone());
    let shared = Arc::new(Shared { hub, config, notifier, catalogues: Default::default(), sessions, fleet, tasks, task_peers: Default::default() });
    Arc::new(Endpoints {
        all: endpoint(&shared, Scope::All),
        shared,
        per_device: Mutex::default(),
        sse: Arc::default(),
    })
}

fn routes(endpoints: Arc<Endpoints>) -> Router {
    Router::new()
        .route("/mcp", any(all_streamable))
        .route("/devices/{id}/mcp", any(device_streamable))
        .route("/sse", get(all_sse))
        .route("/messages", post(all_messages))
        .route("/devices/{id}/sse", get(device_sse))
        .route("/devices/{id}/messages", post(device_messages))
        .layer(CheckLayer::new({
            let e = endpoints.clone();
            move |req: &mut Request| refuse_without_token(&e, req)
        }))
        .with_state(endpoints)
}

/// With a token configured (or a host listener other machines reach), a request without one gets
/// a 401; a wrong one counts against its peer's guesses, and a peer over that cap gets 429
/// ([`crate::hub::bearer`], as the control API). A request that may go on carries its
/// [`Principal`] and [`Lease`].
fn refuse_without_token(e: &Endpoints, req: &mut Request) -> Option<Response<Body>> {
    let hub = &e.shared.hub;
    let expected = e.shared.config.token.as_deref();
    let credential = if expected.is_none() && !hub.reachable_from_afar() {
        // Loopback only, no token asked for: the hub's own user (the owner check made sure).
        None
    } else {
        const WRONG: &str = "this endpoint needs Authorization: Bearer <token>: the hub's MCPDEV_MCP_TOKEN, or your own remote token over https (mcpdev reads it from MCPDEV_HUB_TOKEN_FILE)";
        match crate::hub::bearer::check(hub, req, true, expected) {
            Ok(Some(credential)) => Some(credential),
            Ok(None) => return Some(crate::hub::bearer::Refusal::Wrong.response(WRONG)),
            Err(why) => return Some(why.response(WRONG)),
        }
    };
    let lease = crate::hub::principal::lease(hub, credential.as_ref());
    if lease.is_ended() {
        return Some(crate::hub::bearer::Refusal::Wrong.response("the token was revoked"));
    }
    let principal = Principal::of(credential.as_ref(), crate::hub::bearer::peer(req).ip());
    req.extensions_mut().insert(lease);
    req.extensions_mut().insert(principal);
    None
}

/// The principal and lease [`refuse_without_token`] noted (the hub's own user for the run, in
/// in-process tests that call the routes without the layer).
fn credential_of(req: &Request) -> (Principal, Lease) {
    credential_of_parts(req.extensions())
}

fn credential_of_parts(extensions: &axum::http::Extensions) -> (Principal, Lease) {
    let principal = extensions.get::<Principal>().cloned().unwrap_or(Principal::Owner);
    let lease = extensions.get::<Lease>().cloned().unwrap_or_default();
    (principal, lease)
}

async fn all_streamable(State(e): State<Arc<Endpoints>>, req: Request) -> Response<Body> {
    streamable(e.all.clone(), req).await
}

/// Answers a request on an endpoint: a session's tool call directly, anything else through
/// rmcp. A session ended by `DELETE` is answered 204 (rmcp says 202, which the Python SDK 1.x
/// reports as a failed termination).
async fn streamable(endpoint: Endpoint, req: Request) -> Response<Body> {
    let (principal, lease) = credential_of(&req);
    // A session is reached only by the principal that opened it: to anyone else its id is unknown.
    if let Some(id) = req.headers().get(&SESSION_ID).and_then(|v| v.to_str().ok())
        && endpoint.caps.principal_of(id).is_some_and(|owner| owner != principal)
    {
        crate::metrics::refused(crate::metrics::Refused::ForeignSession);
        if crate::metrics::log_limit::allow(crate::metrics::log_limit::Kind::Refusal, &format!("mcp session {}", peer_ip(&req))) {
            tracing::warn!(principal = %principal.describe(), "refused a request on an MCP session another credential opened");
        }
        return plain(StatusCode::NOT_FOUND, "no such MCP session: start a new one (initialize without Mcp-Session-Id)");
    }
    // The host uses its session while this request (and a stream it opens) lasts: the session is
    // not reclaimed meanwhile ([`super::sessions`]).
    let busy = req.headers().get(&SESSION_ID).and_then(|v| v.to_str().ok()).and_then(|id| endpoint.caps.busy(id));
    let (req, declare) = match tasks_first(&endpoint, req).await {
        Ok(answered) => return answered,
        Err(passed) => passed,
    };
    let req = match endpoint.direct.answer(req).await {
        Ok(answered) => return bound_to_credential(answered, &lease, busy),
        Err(req) => req,
    };
    let delete = req.method() == axum::http::Method::DELETE;
    let session = req.headers().get(&SESSION_ID).cloned();
    let peer = peer_ip(&req);
    // A POST without a session makes one (or is a sessionless request): within the caps.
    let slot = if req.method() == axum::http::Method::POST && session.is_none() {
        match endpoint.caps.acquire_or_reclaim(peer, &principal).await {
            Err(why) => return refuse_session(req, why).await,
            Ok(slot) => Some(slot),
        }
    } else {
        None
    };
    let id_cell = slot.as_ref().map(|s| (s.id_cell(), s.ended()));
    let served = NEW_SLOT.scope(std::cell::Cell::new(slot), endpoint.service.oneshot(req));
    let resp = served.await.unwrap_or_else(|never| match never {}).map(Body::new);
    if let Some((cell, ended)) = id_cell
        && let Some(id) = resp.headers().get(&SESSION_ID).and_then(|v| v.to_str().ok())
    {
        endpoint.caps.register(&cell, ended, id, peer, principal, lease.clone(), &endpoint.sessions);
    }
    let mut resp = bound_to_credential(resp, &lease, busy);
    if let Some(session) = session
        && resp.status().is_success()
        && !delete
    {
        endpoint.direct.served_by_rmcp(&session);
    }
    if delete && resp.status() == StatusCode::ACCEPTED {
        *resp.status_mut() = StatusCode::NO_CONTENT;
        *resp.body_mut() = Body::empty();
    }
    if declare && resp.status().is_success() {
        resp.headers_mut().remove(header::CONTENT_LENGTH);
        let body = std::mem::replace(resp.body_mut(), Body::empty());
        *resp.body_mut() = declared(endpoint.scope.clone(), body);
    }
    resp
}

/// A stream this request opened (a sessionless request's, or a POST answered as events, by
/// rmcp or the direct path) ends with the credential too, and keeps the session in use until
/// it ends; a session's own streams end with the session.
fn bound_to_credential(mut resp: Response<Body>, lease: &Lease, busy: Option<Busy>) -> Response<Body> {
    if !is_event_stream(&resp) {
        return resp;
    }
    let body = std::mem::take(resp.body_mut()).into_data_stream();
    let body = futures_util::StreamExt::take_until(body, lease.end_owned());
    *resp.body_mut() = Body::from_stream(futures_util::StreamExt::map(body, move |chunk| {
        let _in_use = &busy;
        chunk
    }));
    resp
}

fn is_event_stream(resp: &Response<Body>) -> bool {
    resp.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|t| t.starts_with("text/event-stream"))
}

/// Largest request body read before rmcp (rmcp's own limit).
const BODY_MAX: usize = 4 << 20;

/// A `POST` of a task message is answered here ([`task_rpc`]); any other request is given back,
/// with whether its answer must declare what tasks need (an `initialize` or `tools/list` of a
/// version before `2026-07-28`, whose tasks are another extension, rmcp's).
async fn tasks_first(endpoint: &Endpoint, req: Request) -> Result<Response<Body>, (Request, bool)> {
    let version = req.headers().get("mcp-protocol-version").and_then(|v| v.to_str().ok()).unwrap_or_default();
    if req.method() != axum::http::Method::POST || version.starts_with("2026") {
        return Err((req, false));
    }
    let (parts, body) = req.into_parts();
    // The host listener's body deadline bounds this read.
    let bytes = match axum::body::to_bytes(body, BODY_MAX).await {
        Ok(b) => b,
        Err(e) => return Ok(plain(StatusCode::BAD_REQUEST, &format!("the request body could not be read (it must arrive within the body deadline, at most {BODY_MAX} bytes): {e}"))),
    };
    // One pass over the body's quoted words; a message that cannot be a task's (a plain call) is
    // given back before any lookup or parse.
    let marks = task_rpc::marks(&bytes);
    if !marks.task {
        return Err((Request::from_parts(parts, Body::from(bytes)), marks.declare));
    }
    let session = parts.headers.get(&SESSION_ID).and_then(|v| v.to_str().ok()).map(Arc::<str>::from);
    let known = match &session {
        Some(s) => endpoint.sessions.sessions.read().await.contains_key(&**s),
        None => true,
    };
    let msg = if known { task_rpc::parse(&bytes) } else { None };
    let Some(msg) = msg else {
        return Err((Request::from_parts(parts, Body::from(bytes)), marks.declare));
    };
    let peer = parts.extensions.get::<ConnectInfo<std::net::SocketAddr>>().map_or(std::net::Ipv6Addr::LOCALHOST.into(), |c| c.0.ip());
    let (principal, lease) = credential_of_parts(&parts.extensions);
    let who = Requestor { owner: Owner::of(&principal, peer), session: session.clone(), lease };
    let sink = session.and_then(|s| peer_sink(&endpoint.shared, &s));
    // A blocking tasks/result that takes an event stream hears the task's end on it, first.
    let streams = parts.headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("text/event-stream"));
    let result_of = (streams && msg["method"] == "tasks/result").then(|| msg["params"]["taskId"].as_str().map(str::to_string)).flatten();
    let answer = task_rpc::answer(&endpoint.shared, &endpoint.scope, &who, msg, sink).await;
    let note = match &result_of {
        Some(id) => task_rpc::status_note(&endpoint.shared, &who, id, &answer).await,
        None => None,
    };
    // Written straight into bytes: `to_string` and `format!` go through `fmt`, a call per token.
    let json = |v: &serde_json::Value| serde_json::to_vec(v).unwrap_or_default();
    let (kind, body) = match note {
        Some(note) => ("text/event-stream", [b"event: message\ndata: ".as_slice(), json(&note).as_slice(), b"\n\nevent: message\ndata: ".as_slice(), json(&answer).as_slice(), b"\n\n".as_slice()].concat()),
        None => ("application/json", json(&answer)),
    };
    Ok(Response::builder()
        .header(header::CONTENT_TYPE, kind)
        .body(Body::from(body))
        .unwrap_or_else(|_| plain(StatusCode::INTERNAL_SERVER_ERROR, "the answer could not be built")))
}

/// Where a Streamable HTTP session hears of its tasks: its rmcp peer (what rmcp does with a
/// notification outside a request: the session's GET stream, when the host keeps one open).
fn peer_sink(shared: &Shared, session: &str) -> Option<task_rpc::Sink> {
    let peer = shared.task_peers.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(session).cloned()?;
    Some(Arc::new(move |method, params| {
        let peer = peer.clone();
        Box::pin(async move {
            let n = rmcp::model::CustomNotification::new(method, Some(params));
            peer.send_notification(rmcp::model::ServerNotification::CustomNotification(n)).await.is_ok()
        })
    }))
}

/// rmcp's answer with [`task_rpc::declare`] applied to each message, event by event (an SSE
/// stream is passed on as its events come).
fn declared(scope: Scope, body: Body) -> Body {
    use futures_util::StreamExt as _;
    let stream = body.into_data_stream();
    let events = futures_util::stream::unfold((stream, Vec::<u8>::new(), false), move |(mut stream, mut buf, mut done)| {
        let scope = scope.clone();
        async move {
            loop {
                if let Some(end) = buf.windows(2).position(|w| w == b"\n\n") {
                    let event: Vec<u8> = buf.drain(..end + 2).collect();
                    let out = task_rpc::declare_in_body(&scope, &event).unwrap_or(event);
                    return Some((Ok::<_, axum::Error>(axum::body::Bytes::from(out)), (stream, buf, done)));
                }
                if done {
                    if buf.is_empty() {
                        return None;
                    }
                    let rest = std::mem::take(&mut buf);
                    let out = task_rpc::declare_in_body(&scope, &rest).unwrap_or(rest);
                    return Some((Ok(axum::body::Bytes::from(out)), (stream, buf, done)));
                }
                match stream.next().await {
                    Some(Ok(chunk)) => buf.extend_from_slice(&chunk),
                    Some(Err(e)) => return Some((Err(e), (stream, buf, true))),
                    None => done = true,
                }
            }
        }
    });
    Body::from_stream(events)
}

/// The address of the peer that sent a request (loopback when the listener did not say, as in
/// in-process tests).
fn peer_ip(req: &Request) -> std::net::IpAddr {
    req.extensions().get::<ConnectInfo<std::net::SocketAddr>>().map_or(std::net::Ipv6Addr::LOCALHOST.into(), |c| c.0.ip())
}

/// A new session over a cap: 503, `Retry-After`, and a JSON-RPC error answering the request's
/// id when it has one the hub can read.
async fn refuse_session(req: Request, why: Refused) -> Response<Body> {
    let id = match axum::body::to_bytes(req.into_body(), 64 * 1024).await {
        Ok(body) => serde_json::from_slice::<serde_json::Value>(&body).ok().and_then(|v| v.get("id").cloned()).unwrap_or_default(),
        Err(_) => serde_json::Value::Null,
    };
    let body = serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32000, "message": why.0}});
    Response::builder()
        .status(StatusCode::SERVICE_UNAVAILABLE)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::RETRY_AFTER, "5")
        .body(Body::from(body.to_string()))
        .expect("static response")
}

/// A device by id, unique prefix or alias; a device that is not connected is accepted if it was
/// connected since the hub started or has an alias (so a host can be configured before the
/// device boots), and refused with a 404 otherwise.
fn device_scope(e: &Endpoints, id: &str) -> Result<String, Response<Body>> {
    let registry = &e.shared.hub.registry;
    let err = match registry.select(Some(id)) {
        Ok(h) => return Ok(h.device_id),
        Err(err) => err,
    };
    let known = registry.aliases().get(id).cloned().map(|d| d.to_ascii_lowercase()).or_else(|| parse_mac(id).ok().map(|mac| format_mac(&mac)));
    match known {
        Some(device_id) if registry.was_seen(&device_id) || registry.aliases().values().any(|d| d.eq_ignore_ascii_case(&device_id)) => Ok(device_id),
        Some(device_id) => Err(plain(
            StatusCode::NOT_FOUND,
            &format!("device {device_id} is not connected and has not connected since the hub started; connect it first, or give it an alias in mcpdev.toml to configure its endpoint ahead"),
        )),
        None => Err(plain(StatusCode::NOT_FOUND, &format!("{err}"))),
    }
}

/// The device's MCP endpoint, made on first use; `None` when [`PER_DEVICE_MAX`] are in use.
fn per_device(e: &Endpoints, device_id: String) -> Option<Endpoint> {
    // Nothing that can panic runs under this lock.
    let mut services = e.per_device.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(svc) = services.get(&device_id) {
        return Some(svc.clone());
    }
    if services.len() >= PER_DEVICE_MAX {
        let registry = &e.shared.hub.registry;
        services.retain(|id, _| registry.get(id).is_some());
        if services.len() >= PER_DEVICE_MAX {
            return None;
        }
    }
    let endpoint = endpoint(&e.shared, Scope::Device(device_id.clone()));
    services.insert(device_id, endpoint.clone());
    Some(endpoint)
}

/// A device no local selector matches but another hub of the cluster serves: its proxy is made
/// (with its tools) before the endpoint is used ([`crate::hub::remote::Cluster::proxy`]); a 503
/// that says so when the hub that serves it does not answer.
async fn remote_device(e: &Endpoints, id: &str) -> Option<Result<String, Response<Body>>> {
    let hub = &e.shared.hub;
    if hub.registry.select(Some(id)).is_ok() {
        return None;
    }
    let cluster = crate::hub::remote::of(hub)?;
    match cluster.proxy(id).await {
        Ok(h) => Some(Ok(h.device_id)),
        Err(crate::hub::remote::ProxyError::Unanswered(why)) => {
            Some(Err(plain(StatusCode::SERVICE_UNAVAILABLE, &why)))
        }
        Err(crate::hub::remote::ProxyError::NotServed) => None,
    }
}

async fn device_streamable(State(e): State<Arc<Endpoints>>, Path(id): Path<String>, req: Request) -> Response<Body> {
    let scope = match remote_device(&e, &id).await {
        Some(found) => found,
        None => device_scope(&e, &id),
    };
    let device_id = match scope {
        Ok(d) => d,
        Err(resp) => return resp,
    };
    match per_device(&e, device_id) {
        Some(svc) => streamable(svc, req).await,
        None => {
            tracing::warn!("{PER_DEVICE_MAX} per-device MCP endpoints are in use; refusing another");
            plain(StatusCode::SERVICE_UNAVAILABLE, &format!("{PER_DEVICE_MAX} per-device MCP endpoints are in use; use /mcp, or retry when devices have left"))
        }
    }
}

async fn all_sse(State(e): State<Arc<Endpoints>>, req: Request) -> Response<Body> {
    open_sse(&e, Scope::All, "/messages", &req)
}

async fn device_sse(State(e): State<Arc<Endpoints>>, Path(id): Path<String>, req: Request) -> Response<Body> {
    let scope = match remote_device(&e, &id).await {
        Some(found) => found,
        None => device_scope(&e, &id),
    };
    match scope {
        Ok(device_id) => {
            let path = format!("/devices/{device_id}/messages");
            open_sse(&e, Scope::Device(device_id), &path, &req)
        }
        Err(resp) => resp,
    }
}

/// A legacy SSE session, within the session caps, for the principal of `req` and ending with its
/// credential.
fn open_sse(e: &Endpoints, scope: Scope, messages_path: &str, req: &Request) -> Response<Body> {
    let peer = peer_ip(req);
    let (principal, lease) = credential_of(req);
    match e.shared.sessions.acquire(peer, &principal) {
        Ok(slot) => sse::open(&e.sse, Bridge::new(e.shared.clone(), scope, Some(slot)), messages_path, peer, principal, lease),
        Err(why) => {
            let mut resp = plain(StatusCode::SERVICE_UNAVAILABLE, &why.0);
            resp.headers_mut().insert(header::RETRY_AFTER, axum::http::HeaderValue::from_static("5"));
            resp
        }
    }
}

#[derive(serde::Deserialize)]
struct SessionQuery {
    #[serde(rename = "sessionId", alias = "session_id")]
    session_id: Option<String>,
}

async fn all_messages(State(e): State<Arc<Endpoints>>, Query(q): Query<SessionQuery>, req: Request) -> Response<Body> {
    messages(&e, q, req).await
}

async fn device_messages(State(e): State<Arc<Endpoints>>, Query(q): Query<SessionQuery>, req: Request) -> Response<Body> {
    messages(&e, q, req).await
}

/// A legacy SSE session's POSTed message, from the principal that opened the session only.
async fn messages(e: &Endpoints, q: SessionQuery, req: Request) -> Response<Body> {
    let (principal, _) = credential_of(&req);
    // The host listener's body deadline bounds this read.
    let body = match axum::body::to_bytes(req.into_body(), BODY_MAX).await {
        Ok(b) => b,
        Err(e) => return plain(StatusCode::BAD_REQUEST, &format!("the request body could not be read (at most {BODY_MAX} bytes): {e}")),
    };
    sse::post(&e.sse, q.session_id.as_deref(), &principal, &body).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hub::{HubConfig, start};

    async fn ask(router: &Router, path: &str) -> StatusCode {
        let req = Request::builder().method("POST").uri(path).header(header::CONTENT_TYPE, "application/json").body(Body::from("{}")).unwrap();
        router.clone().oneshot(req).await.unwrap().status()
    }

    #[tokio::test]
    async fn unknown_devices_make_no_service_and_known_ones_one_each() {
        let mut aliases = HashMap::new();
        aliases.insert("lamp".to_string(), "02:00:00:00:00:aa".to_string());
        let config = HubConfig { device_addr: "127.0.0.1:0".parse().unwrap(), host_addr: "127.0.0.1:0".parse().unwrap(), aliases, ..Default::default() };
        let running = start(config).await.unwrap();
        let endpoints = endpoints(running.hub.clone(), BridgeConfig::default());
        let router = routes(endpoints.clone());
        for i in 0..200u32 {
            let mac = format!("12:34:56:78:{:02x}:{:02x}", i / 256, i % 256);
            assert_eq!(ask(&router, &format!("/devices/{mac}/mcp")).await, StatusCode::NOT_FOUND);
        }
        assert_eq!(ask(&router, "/devices/not-a-device/mcp").await, StatusCode::NOT_FOUND);
        assert_eq!(endpoints.per_device.lock().unwrap().len(), 0);
        // A device configured with an alias has its endpoint before it connects, once.
        for _ in 0..3 {
            assert_ne!(ask(&router, "/devices/lamp/mcp").await, StatusCode::NOT_FOUND);
            assert_ne!(ask(&router, "/devices/02:00:00:00:00:aa/mcp").await, StatusCode::NOT_FOUND);
        }
        assert_eq!(endpoints.per_device.lock().unwrap().len(), 1);
    }
}
