//! `tools/call` on a Streamable HTTP session, answered without rmcp's session machinery.
//!
//! rmcp serves a session's request through its session worker, then the session's service task,
//! then a task of the request's own, and sends the answer back the same way as an SSE stream.
//! For the request an MCP host repeats all day, calling a device's tool on a session it already
//! has, that is most of what a call costs the hub. This module answers that request itself
//! with one `application/json` body (which the spec lets a server choose for any request), and
//! leaves everything else to rmcp: it **declines**, giving the request back untouched, unless
//! it is exactly
//! - a `POST` of one JSON-RPC `tools/call` request with a string or integer id, whose params
//!   have only `name`, `arguments` and a `_meta` with at most a string or integer
//!   `progressToken`;
//! - with the headers rmcp would accept on a session of a version before `2026-07-28` (`Accept`
//!   both media types, `Content-Type: application/json`, a known `MCP-Protocol-Version` or none);
//! - of a device's tool in the endpoint's catalogue;
//! - on a session rmcp holds and has heard from lately (below).
//!
//! So unknown tools, offline devices, `list_devices`, batches, other protocol versions and every
//! malformed request get rmcp's own answers, and what a device's call answers is the bridge's
//! [`prepare_call`](super::prepare_call) and [`relay_call`](super::Shared::relay_call), as
//! through rmcp.
//!
//! - **Sessions stay alive.** rmcp ends a session whose worker hears nothing for its keep-alive
//!   (5 minutes). A session is answered here only within half that of the last message rmcp
//!   served for it, so a host that only calls tools still sends rmcp one call per half period.
//! - **Cancellation.** `notifications/cancelled` naming a call in flight here ends that call
//!   with the same error the bridge's handler gives; any other goes to rmcp.
//! - **Progress.** A call with a `progressToken` is answered as one JSON body if it ends before
//!   its first report (`--mcp-progress-after`, or the device's own progress). From its first
//!   report on, the answer is an event stream instead: each report as it rises, coalesced to
//!   the latest while the host reads slowly, the last one always before the call's answer,
//!   which ends the stream. (rmcp's client sends a token with every request: before, such calls
//!   went through rmcp and cost the hub three times a plain one.)

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, Response, StatusCode, header};
use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResult, JsonObject};
use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, SessionConfig};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;

use super::{Progress, Scope, Shared, Stage, prepare_call, progress};
use crate::links::upgrade::plain;

/// Largest body answered here; a larger one goes to rmcp, which takes up to 4 MiB.
const BODY_MAX: usize = 64 * 1024;

/// `Mcp-Session-Id`, as a name constant (a `&str` name is parsed and hashed at every lookup).
pub(super) static SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");

/// The protocol versions whose requests rmcp serves on a session (`2026-07-28` has none).
const SESSION_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// The direct path of one endpoint (`/mcp`, or one device's).
pub struct Direct {
    shared: Arc<Shared>,
    scope: Scope,
    sessions: Arc<LocalSessionManager>,
    /// How long after rmcp last served a session it is still answered here.
    fresh_for: Duration,
    /// When rmcp last served each session.
    served: Mutex<Served>,
    /// The calls in flight here, by session and request id, to cancel.
    in_flight: Arc<InFlightTable>,
}

/// The calls in flight on the direct path, by session and request id (its text).
type InFlightTable = Mutex<HashMap<(Arc<str>, Box<str>), CancellationToken>>;

#[derive(Default)]
struct Served {
    at: HashMap<Arc<str>, Instant>,
    /// Forgotten sessions are swept out when the table reaches this size.
    sweep_at: usize,
}

/// What a body answered here is.
enum Message<'a> {
    Call { id: &'a RawValue, name: String, arguments: Option<JsonObject>, token: Option<serde_json::Value> },
    Cancel { request_id: &'a RawValue },
}

impl Direct {
    pub fn new(shared: Arc<Shared>, scope: Scope, sessions: Arc<LocalSessionManager>) -> Self {
        let keep_alive = sessions.session_config.keep_alive.unwrap_or(SessionConfig::DEFAULT_KEEP_ALIVE);
        Self { shared, scope, sessions, fresh_for: keep_alive / 2, served: Mutex::default(), in_flight: Arc::default() }
    }

    /// Answers the request, or gives it back for rmcp.
    pub async fn answer(&self, req: Request) -> Result<Response<Body>, Request> {
        let Some(session) = self.session_of(req.method(), req.headers()).await else { return Err(req) };
        let (parts, body) = req.into_parts();
        // The host listener's body deadline bounds this read; the headers checked its length.
        let bytes = match axum::body::to_bytes(body, BODY_MAX).await {
            Ok(bytes) => bytes,
            Err(e) => return Ok(plain(StatusCode::BAD_REQUEST, &format!("the request body could not be read: {e}"))),
        };
        let answered = match parse(&bytes) {
            Some(Message::Call { id, name, arguments, token }) => self.call(&session, id, &name, arguments, token).await,
            Some(Message::Cancel { request_id }) => self.cancel(&session, request_id).then(accepted),
            None => None,
        };
        answered.ok_or_else(|| Request::from_parts(parts, Body::from(bytes)))
    }

    /// Notes that rmcp served a message of this session (`Mcp-Session-Id`), so its worker's
    /// keep-alive starts again.
    pub fn served_by_rmcp(&self, session: &HeaderValue) {
        let Ok(session) = session.to_str() else { return };
        let now = Instant::now();
        let mut served = lock(&self.served);
        if served.at.len() >= served.sweep_at {
            // Sessions rmcp has ended by now, as it ends those idle past their keep-alive.
            let gone = self.fresh_for * 2;
            served.at.retain(|_, at| now.duration_since(*at) < gone);
            served.sweep_at = (served.at.len() * 2).max(1024);
        }
        match served.at.get_mut(session) {
            Some(at) => *at = now,
            None => {
                served.at.insert(session.into(), now);
            }
        }
    }

    /// The session a request may be answered on here: its headers are what rmcp accepts, and
    /// rmcp holds the session and served it lately.
    async fn session_of(&self, method: &Method, headers: &HeaderMap) -> Option<Arc<str>> {
        if method != Method::POST || !plain_json_headers(headers) {
            return None;
        }
        let id = headers.get(&SESSION_ID)?.to_str().ok()?;
        let (session, at) = lock(&self.served).at.get_key_value(id).map(|(k, at)| (k.clone(), *at))?;
        if at.elapsed() >= self.fresh_for {
            return None;
        }
        self.sessions.sessions.read().await.contains_key(id).then_some(session)
    }

    async fn call(&self, session: &Arc<str>, id: &RawValue, name: &str, arguments: Option<JsonObject>, token: Option<serde_json::Value>) -> Option<Response<Body>> {
        let offered = self.shared.offered(&self.scope, name)?;
        let call = match prepare_call(&offered, arguments)? {
            Err(refused) => return Some(json_answer(id, Ok(refused))),
            Ok(call) => call,
        };
        drop(offered);
        let key = (session.clone(), Box::<str>::from(id.get()));
        let cancel = CancellationToken::new();
        {
            let mut in_flight = lock(&self.in_flight);
            if in_flight.contains_key(&key) {
                // The same id twice at once: rmcp's to judge.
                return None;
            }
            in_flight.insert(key.clone(), cancel.clone());
        }
        let done = InFlight { table: self.in_flight.clone(), key };
        let Some(token) = token else {
            return Some(json_answer(id, self.shared.relay_call(call, cancel.cancelled(), &None).await));
        };
        let (tx, mut reports) = progress::latest::<Stage>();
        let progress: Progress = Some(Arc::new(move |stage| {
            tx.send_replace(Some(stage));
        }));
        let shared = self.shared.clone();
        let mut answer: Answering = Box::pin(async move { shared.relay_call(call, cancel.cancelled_owned(), &progress).await });
        tokio::select! {
            biased;
            outcome = &mut answer => return Some(json_answer(id, outcome)),
            _ = reports.changed() => {}
        }
        let calling = Calling { id: id.to_owned(), token, reports, reporting: true, pending: true, answer, answered: None, _done: done };
        Some(event_stream(calling))
    }

    /// Cancels a call in flight here; false if there is none by that id on that session.
    fn cancel(&self, session: &Arc<str>, request_id: &RawValue) -> bool {
        let key = (session.clone(), Box::<str>::from(request_id.get()));
        let token = lock(&self.in_flight).get(&key).cloned();
        token.inspect(CancellationToken::cancel).is_some()
    }
}

/// Takes a call off the in-flight table however it ends (answered, or dropped with its
/// connection).
struct InFlight {
    table: Arc<InFlightTable>,
    key: (Arc<str>, Box<str>),
}

impl Drop for InFlight {
    fn drop(&mut self) {
        lock(&self.table).remove(&self.key);
    }
}

// Nothing that can panic runs under these locks.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The headers rmcp accepts on a `POST` to a session of a version before `2026-07-28`, with a
/// body small enough to read here. Anything unusual (a quality value in `Accept`, a chunked
/// body) is left to rmcp.
fn plain_json_headers(headers: &HeaderMap) -> bool {
    // Looked up by name constant: a `&str` name is parsed and hashed anew at every lookup.
    static PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
    let text = |name: &HeaderName| headers.get(name).map(|v| v.to_str().ok());
    let length_ok = text(&header::CONTENT_LENGTH).flatten().and_then(|v| v.parse::<usize>().ok()).is_some_and(|n| n <= BODY_MAX);
    let is = |v: &str, media_type: &str| v.split(';').next().unwrap_or_default().trim().eq_ignore_ascii_case(media_type);
    let json_body = text(&header::CONTENT_TYPE).flatten().is_some_and(|v| is(v, "application/json"));
    let accepts = text(&header::ACCEPT).flatten().filter(|v| !v.contains("q=")).is_some_and(|v| {
        v.split(',').any(|t| is(t, "application/json")) && v.split(',').any(|t| is(t, "text/event-stream"))
    });
    let version_ok = match text(&PROTOCOL_VERSION) {
        None => true,
        Some(v) => v.is_some_and(|v| SESSION_VERSIONS.contains(&v)),
    };
    length_ok && json_body && accepts && version_ok
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope<'a> {
    jsonrpc: &'a str,
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    method: &'a str,
    #[serde(borrow)]
    params: Option<&'a RawValue>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CallParams {
    name: String,
    arguments: Option<JsonObject>,
    /// Read to refuse any `_meta` with something else in it.
    #[serde(rename = "_meta")]
    meta: Option<Meta>,
}

/// A `_meta` with nothing the bridge would act on but a progress token.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Meta {
    #[serde(rename = "progressToken")]
    progress_token: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CancelParams<'a> {
    #[serde(rename = "requestId", borrow)]
    request_id: &'a RawValue,
    #[serde(rename = "reason")]
    _reason: Option<IgnoredAny>,
    #[serde(rename = "_meta")]
    _meta: Option<IgnoredAny>,
}

/// The request, if it is one answered here.
fn parse(body: &Bytes) -> Option<Message<'_>> {
    let envelope: Envelope<'_> = serde_json::from_slice(body).ok()?;
    if envelope.jsonrpc != "2.0" {
        return None;
    }
    match (envelope.method, envelope.id) {
        ("tools/call", Some(id)) if plain_id(id) => {
            let params: CallParams = serde_json::from_str(envelope.params?.get()).ok()?;
            let token = params.meta.and_then(|m| m.progress_token);
            if token.as_ref().is_some_and(|t| !(t.is_string() || t.is_i64() || t.is_u64())) {
                return None;
            }
            Some(Message::Call { id, name: params.name, arguments: params.arguments, token })
        }
        ("notifications/cancelled", None) => {
            let params: CancelParams<'_> = serde_json::from_str(envelope.params?.get()).ok()?;
            plain_id(params.request_id).then_some(Message::Cancel { request_id: params.request_id })
        }
        _ => None,
    }
}

/// An id as MCP has them: a string, or an integer written plainly (so that the same id is
/// the same text in a call and in its cancellation).
fn plain_id(id: &RawValue) -> bool {
    let text = id.get();
    let digits = text.strip_prefix('-').unwrap_or(text);
    text.starts_with('"') || (!digits.is_empty() && digits.len() <= 19 && digits.bytes().all(|b| b.is_ascii_digit()))
}

#[derive(Serialize)]
struct Answer<'a> {
    jsonrpc: &'static str,
    id: &'a RawValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<CallToolResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<McpError>,
}

/// The JSON-RPC answer, shaped for a session's version: no `resultType` before `2026-07-28`.
fn answer_bytes(id: &RawValue, outcome: Result<CallToolResult, McpError>) -> serde_json::Result<Vec<u8>> {
    let (result, error) = match outcome {
        Ok(mut result) => {
            result.result_type = None;
            (Some(result), None)
        }
        Err(error) => (None, Some(error)),
    };
    serde_json::to_vec(&Answer { jsonrpc: "2.0", id, result, error })
}

/// The answer as one JSON body.
fn json_answer(id: &RawValue, outcome: Result<CallToolResult, McpError>) -> Response<Body> {
    match answer_bytes(id, outcome) {
        Ok(body) => Response::builder()
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body))
            .unwrap_or_else(|_| plain(StatusCode::INTERNAL_SERVER_ERROR, "the answer could not be built")),
        Err(e) => plain(StatusCode::INTERNAL_SERVER_ERROR, &format!("the answer could not be encoded: {e}")),
    }
}

/// A device's call under way.
type Answering = std::pin::Pin<Box<dyn Future<Output = Result<CallToolResult, McpError>> + Send>>;

/// A call with a progress token whose first report came before its answer.
struct Calling {
    id: Box<RawValue>,
    token: serde_json::Value,
    reports: tokio::sync::watch::Receiver<Option<Stage>>,
    /// Whether the call can still report (it holds the sender until it ends).
    reporting: bool,
    /// Whether a report came that is not sent yet.
    pending: bool,
    answer: Answering,
    /// The answer, once the call has ended, until it is sent.
    answered: Option<Vec<u8>>,
    _done: InFlight,
}

/// The call's answer as an event stream: its reports as they rise (the latest waiting while
/// the host reads slowly), then its answer, which ends the stream. Dropped with the host's
/// connection, it drops the call, as a JSON answer's request would.
fn event_stream(calling: Calling) -> Response<Body> {
    let events = futures_util::stream::unfold(Some(calling), |calling| async move {
        let mut calling = calling?;
        loop {
            // A report waiting goes out first: the last one comes before the answer.
            let waiting = if std::mem::take(&mut calling.pending) { calling.reports.borrow_and_update().clone() } else { None };
            if let Some(stage) = waiting {
                let note = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": stage.progress(&calling.token)});
                return Some((Ok::<_, std::convert::Infallible>(event(&note.to_string().into_bytes())), Some(calling)));
            }
            if let Some(answer) = calling.answered.take() {
                return Some((Ok(event(&answer)), None));
            }
            tokio::select! {
                biased;
                // `changed` marks the report seen: it is read by `pending`.
                changed = calling.reports.changed(), if calling.reporting => match changed {
                    Ok(()) => calling.pending = true,
                    Err(_) => calling.reporting = false,
                },
                outcome = &mut calling.answer => {
                    calling.answered = Some(answer_bytes(&calling.id, outcome).unwrap_or_default());
                    // The report the call made as it ended ("answered"), not yet woken for
                    // (`has_changed` would say nothing now that the call has dropped its sender).
                    calling.pending |= calling.reports.borrow().has_changed();
                }
            }
        }
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(events))
        .unwrap_or_else(|_| plain(StatusCode::INTERNAL_SERVER_ERROR, "the answer could not be built"))
}

/// One server-sent event carrying `message`.
fn event(message: &[u8]) -> Bytes {
    let mut event = Vec::with_capacity(message.len() + 8);
    event.extend_from_slice(b"data: ");
    event.extend_from_slice(message);
    event.extend_from_slice(b"\n\n");
    Bytes::from(event)
}

fn accepted() -> Response<Body> {
    let mut resp = Response::new(Body::empty());
    *resp.status_mut() = StatusCode::ACCEPTED;
    resp
}

/// The `mcp_direct` fuzz target ([`crate::fuzz`]): a request's headers (lines `name: value`,
/// up to a blank line) and body, through what decides whether the direct path takes it.
/// Invariants: no panic; a body taken as a call is a JSON-RPC `tools/call` request whose id is
/// a string or an integer and whose params name that tool; one taken as a cancellation is a
/// `notifications/cancelled` notification naming such an id.
#[doc(hidden)]
pub fn fuzz_request(data: &[u8]) {
    let (head, body) = match data.windows(2).position(|w| w == b"\n\n") {
        Some(at) => (&data[..at], &data[at + 2..]),
        None => (&[][..], data),
    };
    let mut headers = HeaderMap::new();
    for line in head.split(|b| *b == b'\n') {
        let Some(colon) = line.iter().position(|b| *b == b':') else { continue };
        if let (Ok(name), Ok(value)) = (axum::http::HeaderName::from_bytes(&line[..colon]), HeaderValue::from_bytes(line[colon + 1..].trim_ascii())) {
            headers.append(name, value);
        }
    }
    let _ = plain_json_headers(&headers);
    let body = Bytes::copy_from_slice(body);
    let whole = || serde_json::from_slice::<serde_json::Value>(&body).expect("a body taken is JSON");
    let is_id = |id: &serde_json::Value| id.is_string() || id.is_i64() || id.is_u64();
    match parse(&body) {
        Some(Message::Call { id, name, .. }) => {
            let v = whole();
            assert_eq!(v["method"], "tools/call");
            assert_eq!(v["params"]["name"], name.as_str());
            let parsed: serde_json::Value = serde_json::from_str(id.get()).expect("the id is JSON");
            assert!(is_id(&parsed) && v["id"] == parsed, "{}", id.get());
        }
        Some(Message::Cancel { request_id }) => {
            let v = whole();
            assert_eq!(v["method"], "notifications/cancelled");
            assert!(v.get("id").is_none());
            let parsed: serde_json::Value = serde_json::from_str(request_id.get()).expect("the id is JSON");
            assert!(is_id(&parsed) && v["params"]["requestId"] == parsed, "{}", request_id.get());
        }
        None => {}
    }
}

#[cfg(test)]
#[path = "direct_tests.rs"]
mod tests;
