//! The Streamable HTTP transport, as a client: every message is a `POST`; its answer comes as
//! JSON or as an SSE stream on that `POST`; the session is the `Mcp-Session-Id` the server
//! gives with its `initialize` answer, `DELETE`d on close.
//!
//! Rules:
//! - Requests are posted concurrently (a `tasks/cancel` does not wait behind a slow
//!   `tools/call`); notifications in order, before anything queued after them, and before the
//!   session's `DELETE`.
//! - One answer's body, or one event of a POST's SSE stream, is read up to [`MAX_MESSAGE`] bytes,
//!   no more (a stream may carry many events: progress, then the answer).
//! - A failed `POST` fails its own request with why (HTTP 401/403 as refused credentials, a
//!   certificate that did not verify in words). A stream that ends without the answer is resumed
//!   from its last event id (`GET` with `Last-Event-ID`, after the server's `retry`, capped),
//!   at most [`RESUMES`] times; one with no event id fails its request at once.
//! - No standalone `GET` stream: the client polls (`tasks/get`) and reads answers on their POST.

use std::sync::{Arc, Mutex, OnceLock};

use futures_util::StreamExt;
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::Value;
use tokio::sync::mpsc;

use super::McpFailure;
use super::wire::{Incoming, MAX_MESSAGE, QUEUE, Wire};

const SESSION: &str = "mcp-session-id";

struct Poster {
    http: reqwest::Client,
    url: String,
    headers: HeaderMap,
    session: Mutex<Option<HeaderValue>>,
    protocol: Arc<OnceLock<String>>,
    to: mpsc::Sender<Incoming>,
}

/// Opens the transport (nothing is sent until the first message). `protocol` is set once the
/// server agreed on a version, and sent as `MCP-Protocol-Version` from then on.
pub fn connect(url: &str, headers: HeaderMap, protocol: Arc<OnceLock<String>>, tls: Option<Arc<rustls::ClientConfig>>) -> Result<Wire, McpFailure> {
    let http = super::http_client(url, tls)?;
    let (in_tx, in_rx) = mpsc::channel(QUEUE);
    let poster = Arc::new(Poster { http, url: url.to_string(), headers, session: Mutex::new(None), protocol, to: in_tx });
    let (out_tx, mut out_rx) = mpsc::channel::<Value>(QUEUE);
    let p = poster.clone();
    let writer = tokio::spawn(async move {
        while let Some(msg) = out_rx.recv().await {
            match msg.get("id").filter(|_| msg.get("method").is_some()).cloned() {
                Some(id) => {
                    let p = p.clone();
                    tokio::spawn(async move {
                        if let Err(failure) = p.post(&msg, Some(&id)).await {
                            let _ = p.to.send(Incoming::Failed { id, failure }).await;
                        }
                    });
                }
                None => {
                    if let Err(e) = p.post(&msg, None).await {
                        tracing::warn!("a notification to {} was not delivered: {e}", p.url);
                    }
                }
            }
        }
    });
    let close = Box::new(move || -> super::wire::CloseFuture {
        Box::pin(async move {
            let _ = tokio::time::timeout(super::CLOSE_WAIT, writer).await;
            let session = poster.session.lock().ok().and_then(|s| s.clone());
            if let Some(id) = session {
                let delete = poster.http.delete(&poster.url).headers(poster.headers.clone()).header(SESSION, id).send();
                let _ = tokio::time::timeout(super::CLOSE_WAIT, delete).await;
            }
        })
    });
    Ok(Wire { out: out_tx, incoming: in_rx, close })
}

impl Poster {
    /// Posts one message and delivers what comes back; for a request, `Err` if its answer did not.
    async fn post(&self, msg: &Value, id: Option<&Value>) -> Result<(), McpFailure> {
        let mut rb = self
            .http
            .post(&self.url)
            .headers(self.headers.clone())
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(msg.to_string());
        if let Some(s) = self.session.lock().ok().and_then(|s| s.clone()) {
            rb = rb.header(SESSION, s);
        }
        if let Some(v) = self.protocol.get() {
            rb = rb.header("mcp-protocol-version", v);
        }
        let resp = rb.send().await.map_err(|e| send_failure(&self.url, &e))?;
        if let Some(s) = resp.headers().get(SESSION)
            && let Ok(mut slot) = self.session.lock()
        {
            slot.get_or_insert_with(|| s.clone());
        }
        let status = resp.status();
        if !status.is_success() {
            let had_session = self.session.lock().is_ok_and(|s| s.is_some());
            return Err(with_reason(status_failure(&self.url, status.as_u16(), had_session), resp).await);
        }
        let sse = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).is_some_and(|t| t.starts_with("text/event-stream"));
        let mut answered = id.is_none();
        if sse {
            let mut stream = self.read_events(resp, id).await?;
            answered |= stream.answered;
            // A stream that ended before its answer is resumed where it stopped (`GET` with
            // `Last-Event-ID`), after the server's `retry`, at most RESUMES times.
            let mut resumes = 0;
            while !answered && resumes < RESUMES {
                let Some(last) = stream.last_id.clone() else { break };
                resumes += 1;
                tokio::time::sleep(stream.retry.min(RETRY_MAX)).await;
                let mut rb = self.http.get(&self.url).headers(self.headers.clone()).header("accept", "text/event-stream").header("last-event-id", last);
                if let Some(s) = self.session.lock().ok().and_then(|s| s.clone()) {
                    rb = rb.header(SESSION, s);
                }
                if let Some(v) = self.protocol.get() {
                    rb = rb.header("mcp-protocol-version", v);
                }
                let resp = rb.send().await.map_err(|e| send_failure(&self.url, &e))?;
                if !resp.status().is_success() {
                    return Err(with_reason(status_failure(&self.url, resp.status().as_u16(), true), resp).await);
                }
                let next = self.read_events(resp, id).await?;
                answered |= next.answered;
                stream = Events { last_id: next.last_id.or(stream.last_id), retry: next.retry, answered };
            }
        } else if status != reqwest::StatusCode::ACCEPTED {
            let body = read_body(resp).await.map_err(|e| stream_failure(&self.url, &e))?;
            if !body.trim_ascii().is_empty() {
                let msgs = super::wire::messages(&body).map_err(|e| McpFailure::Unreachable(format!("{} answered with something that is not JSON-RPC: {e}", self.url)))?;
                drop(body);
                for msg in msgs {
                    answered |= answers(&msg, id);
                    let _ = self.to.send(Incoming::Message(msg)).await;
                }
            }
        }
        if answered { Ok(()) } else { Err(McpFailure::Unreachable(format!("{} ended its answer without a result", self.url))) }
    }
}

/// Most times one request's stream is resumed, and the longest wait before each.
const RESUMES: usize = 3;
const RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(5);

/// What reading one SSE stream left: the last event id, the server's `retry`, whether the answer came.
struct Events {
    last_id: Option<String>,
    retry: std::time::Duration,
    answered: bool,
}

impl Poster {
    /// Delivers a stream's messages; notes whether the answer to `id` was among them.
    async fn read_events(&self, resp: reqwest::Response, id: Option<&Value>) -> Result<Events, McpFailure> {
        let mut out = Events { last_id: None, retry: std::time::Duration::from_millis(100), answered: false };
        let mut events = sse_stream::SseStream::from_bytes_stream(capped(resp.bytes_stream(), true));
        while let Some(event) = events.next().await {
            let event = event.map_err(|e| stream_failure(&self.url, &e.to_string()))?;
            if let Some(i) = event.id.filter(|i| !i.is_empty()) {
                out.last_id = Some(i);
            }
            if let Some(r) = event.retry {
                out.retry = std::time::Duration::from_millis(r);
            }
            if event.event.as_deref().is_some_and(|e| e != "message") {
                continue;
            }
            if let Some(msg) = event.data.and_then(super::wire::message) {
                out.answered |= answers(&msg, id);
                if self.to.send(Incoming::Message(msg)).await.is_err() {
                    out.answered = true;
                    return Ok(out);
                }
            }
        }
        Ok(out)
    }
}

/// Whether `msg` is the answer to the request `id`.
fn answers(msg: &super::wire::Message, id: Option<&Value>) -> bool {
    id.is_some_and(|id| super::wire::Head::of(msg).is_some_and(|h| h.method.is_none() && h.id.is_some_and(|i| serde_json::from_str::<Value>(i.get()).ok().as_ref() == Some(id))))
}

fn stream_failure(url: &str, why: &str) -> McpFailure {
    if why.contains(TOO_LARGE) {
        McpFailure::TooLarge(format!("{url} sent a message of more than {} MiB; mcpdev reads at most that much of one message", MAX_MESSAGE >> 20))
    } else {
        McpFailure::Unreachable(format!("reading the answer of {url} failed: {why}"))
    }
}

/// A reqwest error sending to `url`, in words.
pub(crate) fn send_failure(url: &str, e: &reqwest::Error) -> McpFailure {
    super::untrusted(url, e).unwrap_or_else(|| McpFailure::Unreachable(format!("cannot reach the MCP server at {url}: {}", super::reqwest_cause(e))))
}

/// A refusal of `url` by HTTP status.
pub(crate) fn status_failure(url: &str, status: u16, had_session: bool) -> McpFailure {
    let auth = |what: &str| McpFailure::Auth(format!("{url} {what}: send a token with --header 'Authorization: Bearer …'"));
    match status {
        401 => auth("asks for credentials (HTTP 401)"),
        403 => auth("refused the credentials (HTTP 403)"),
        404 if had_session => McpFailure::Unreachable(format!("{url} no longer knows this session (HTTP 404)")),
        s => McpFailure::Unreachable(format!("the MCP server at {url} answered HTTP {s}")),
    }
}

/// Most of a refusal's body quoted in the error.
const REASON_MAX: usize = 300;

/// A refusal with what the server said in its body (the first [`REASON_MAX`] characters).
pub(crate) async fn with_reason(failure: McpFailure, mut resp: reqwest::Response) -> McpFailure {
    let mut body = Vec::new();
    while body.len() < 4 * REASON_MAX
        && let Ok(Some(chunk)) = resp.chunk().await
    {
        body.extend_from_slice(&chunk);
    }
    let text = String::from_utf8_lossy(&body);
    let reason: String = text.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(REASON_MAX).collect();
    if reason.is_empty() {
        return failure;
    }
    match failure {
        McpFailure::Auth(m) => McpFailure::Auth(format!("{m} (it said: {reason})")),
        McpFailure::Unreachable(m) => McpFailure::Unreachable(format!("{m} (it said: {reason})")),
        other => other,
    }
}

const TOO_LARGE: &str = "message larger than the limit";

/// The whole body, refused past [`MAX_MESSAGE`].
async fn read_body(mut resp: reqwest::Response) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| super::reqwest_cause(&e))? {
        if body.len() + chunk.len() > MAX_MESSAGE {
            return Err(TOO_LARGE.into());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A byte stream that fails once more than [`MAX_MESSAGE`] bytes came: in all, or (`per_event`)
/// since the last blank line that ends an SSE event.
pub(crate) fn capped<S>(stream: S, per_event: bool) -> impl futures_util::Stream<Item = Result<bytes::Bytes, std::io::Error>> + Send + 'static
where
    S: futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Send + 'static,
{
    let mut count = 0usize;
    let mut last = 0u8;
    stream.map(move |chunk| {
        let chunk = chunk.map_err(std::io::Error::other)?;
        let end = per_event.then(|| chunk.windows(2).rposition(|w| w == b"\n\n").map(|at| at + 2).or((last == b'\n' && chunk.first() == Some(&b'\n')).then_some(1))).flatten();
        count = match end {
            Some(at) => chunk.len() - at,
            None => count + chunk.len(),
        };
        last = chunk.last().copied().unwrap_or(last);
        if count > MAX_MESSAGE { Err(std::io::Error::other(TOO_LARGE)) } else { Ok(chunk) }
    })
}
