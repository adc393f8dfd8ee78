//! The legacy HTTP+SSE transport (2024-11-05), which rmcp no longer provides: `GET …/sse` opens
//! the stream and sends an `endpoint` event; the client POSTs each message to that URL with its
//! session id; every reply and notification comes back on the stream. Each session runs the same
//! rmcp handler as Streamable HTTP, over channels. Task messages are answered by
//! [`super::task_rpc`] beside it, on the same stream (at most [`TASK_ANSWERS`] waiting at once
//! per session; more wait for room, and so do their POSTs).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{Response, StatusCode, header};
use futures_util::StreamExt;
use rmcp::ServiceExt;
use rmcp::model::ClientJsonRpcMessage;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::PollSender;

use super::Bridge;
use super::task_rpc;
use super::tasks::{Owner, Requestor};
use crate::hub::principal::{Lease, Principal};
use crate::links::upgrade::plain;

/// Messages one SSE session queues for a client that has not read them yet.
pub const OUT_QUEUE: usize = 4;

/// Task answers one SSE session may have in the making at once (`tasks/result` waits).
pub const TASK_ANSWERS: usize = 64;

/// The open SSE sessions: session id -> where its POSTed messages go.
#[derive(Default)]
pub struct SseSessions {
    inbound: Mutex<HashMap<String, Session>>,
}

/// One SSE session, as its POSTs reach it.
#[derive(Clone)]
struct Session {
    /// To rmcp's handler.
    rmcp: mpsc::Sender<ClientJsonRpcMessage>,
    /// Onto the stream: task answers and notifications, as JSON text.
    extra: mpsc::Sender<String>,
    answers: Arc<tokio::sync::Semaphore>,
    shared: Arc<super::Shared>,
    scope: super::Scope,
    who: Requestor,
    /// Whose session it is: only that principal's POSTs reach it.
    principal: Principal,
}

/// Drops a session from the table when its stream ends.
struct Unregister(Arc<SseSessions>, String);

impl Drop for Unregister {
    fn drop(&mut self) {
        self.0.inbound.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&self.1);
    }
}

/// `GET …/sse`: starts a session of `principal`; `messages_path` is where the client must POST.
/// The session (its stream) ends the moment `lease` does: the credential that opened it was
/// revoked.
pub fn open(sessions: &Arc<SseSessions>, bridge: Bridge, messages_path: &str, peer: std::net::IpAddr, principal: Principal, lease: Lease) -> Response<Body> {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let (in_tx, in_rx) = mpsc::channel::<ClientJsonRpcMessage>(64);
    let (extra_tx, extra_rx) = mpsc::channel::<String>(OUT_QUEUE);
    let scope = bridge.scope.clone();
    let session = Session {
        rmcp: in_tx,
        extra: extra_tx,
        answers: Arc::new(tokio::sync::Semaphore::new(TASK_ANSWERS)),
        shared: bridge.shared.clone(),
        scope: scope.clone(),
        who: Requestor { owner: Owner::of(&principal, peer), session: Some(id.as_str().into()), lease: lease.clone() },
        principal,
    };
    // What waits for a client that reads its stream slowly: at most OUT_QUEUE messages (each at
    // most a device's frame cap), then the session waits for it (and so do its POSTs).
    let (out_tx, out_rx) = mpsc::channel(OUT_QUEUE);
    sessions.inbound.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(id.clone(), session);
    tokio::spawn(async move {
        match bridge.serve((PollSender::new(out_tx), ReceiverStream::new(in_rx))).await {
            Ok(running) => {
                let _ = running.waiting().await;
            }
            Err(e) => tracing::debug!("SSE session ended before initialize: {e}"),
        }
    });
    let endpoint = format!("event: endpoint\ndata: {messages_path}?sessionId={id}\n\n");
    let guard = Unregister(sessions.clone(), id);
    let rmcp_messages = ReceiverStream::new(out_rx).map(move |msg| {
        let mut json = serde_json::to_string(&msg).unwrap_or_default();
        // What tasks need declared, in an initialize or tools/list answer.
        if (json.contains("\"capabilities\"") || json.contains("\"tools\":["))
            && let Ok(mut v) = serde_json::from_str::<serde_json::Value>(&json)
        {
            task_rpc::declare(&scope, &mut v);
            json = v.to_string();
        }
        json
    });
    let messages = futures_util::stream::select(rmcp_messages, ReceiverStream::new(extra_rx))
        .map(|json| Ok::<_, Infallible>(Bytes::from(format!("event: message\ndata: {json}\n\n"))));
    let keepalive = tokio_stream::StreamExt::map(
        tokio_stream::wrappers::IntervalStream::new(tokio::time::interval(Duration::from_secs(15))),
        |_| Ok::<_, Infallible>(Bytes::from_static(b": keepalive\n\n")),
    )
    .skip(1);
    let body = futures_util::stream::iter([Ok::<_, Infallible>(Bytes::from(endpoint))])
        .chain(futures_util::stream::select(messages, keepalive))
        .take_until(lease.end_owned())
        .map(move |chunk| {
            let _ = &guard;
            chunk
        });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(body))
        .expect("static response")
}

/// `POST …/messages?sessionId=…` from `principal`: hands one message to its session; the answer
/// goes on the stream. Another principal's session is answered as an unknown one.
pub async fn post(sessions: &SseSessions, session_id: Option<&str>, principal: &Principal, body: &[u8]) -> Response<Body> {
    let Some(id) = session_id else {
        return plain(StatusCode::BAD_REQUEST, "missing sessionId: POST to the URL of the endpoint event");
    };
    let found = sessions.inbound.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(id).filter(|s| s.principal == *principal).cloned();
    let Some(session) = found else {
        return plain(StatusCode::NOT_FOUND, "no such SSE session (it ended); open a new one with GET …/sse");
    };
    if let Some(msg) = task_rpc::parse(body) {
        let Ok(room) = session.answers.clone().acquire_owned().await else {
            return plain(StatusCode::NOT_FOUND, "the SSE session has ended");
        };
        let extra = session.extra.clone();
        let sink: task_rpc::Sink = Arc::new(move |method, params| {
            let extra = extra.clone();
            Box::pin(async move { extra.send(serde_json::json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string()).await.is_ok() })
        });
        tokio::spawn(async move {
            let answer = task_rpc::answer(&session.shared, &session.scope, &session.who, msg, Some(sink)).await;
            let _ = session.extra.send(answer.to_string()).await;
            drop(room);
        });
        return Response::builder().status(StatusCode::ACCEPTED).body(Body::from("Accepted")).expect("static response");
    }
    let tx = session.rmcp;
    let msg: ClientJsonRpcMessage = match serde_json::from_slice(body) {
        Ok(m) => m,
        Err(e) => return plain(StatusCode::BAD_REQUEST, &format!("not a JSON-RPC message: {e}")),
    };
    if tx.send(msg).await.is_err() {
        return plain(StatusCode::NOT_FOUND, "the SSE session has ended");
    }
    Response::builder().status(StatusCode::ACCEPTED).body(Body::from("Accepted")).expect("static response")
}
