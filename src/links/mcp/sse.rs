//! The legacy HTTP+SSE transport, as a client: `GET` the SSE URL, wait for the `endpoint` event,
//! `POST` every message there; the server's messages arrive as `message` events.
//!
//! Rules:
//! - The endpoint is resolved against the SSE URL and must keep its origin: the session's
//!   `--header`s never go to another host.
//! - One event is read up to [`MAX_MESSAGE`](super::wire::MAX_MESSAGE) bytes, no more.
//! - A failed `POST` fails its own request, with why (HTTP 401/403 as refused credentials).

use futures_util::StreamExt;
use reqwest::header::HeaderMap;
use serde_json::Value;
use sse_stream::SseStream;
use tokio::sync::mpsc;

use super::McpFailure;
use super::http::{capped, send_failure, status_failure, with_reason};
use super::wire::{Incoming, QUEUE, Wire};

pub async fn connect(url: &str, headers: HeaderMap, tls: Option<std::sync::Arc<rustls::ClientConfig>>) -> Result<Wire, McpFailure> {
    let http = super::http_client(url, tls)?;
    let resp = http.get(url).headers(headers.clone()).header("accept", "text/event-stream").send().await.map_err(|e| send_failure(url, &e))?;
    if !resp.status().is_success() {
        return Err(with_reason(status_failure(url, resp.status().as_u16(), false), resp).await);
    }
    let mut events = SseStream::from_bytes_stream(capped(resp.bytes_stream(), true));
    let endpoint = loop {
        match events.next().await {
            Some(Ok(ev)) if ev.event.as_deref() == Some("endpoint") => break ev.data.unwrap_or_default(),
            Some(Ok(_)) => continue,
            Some(Err(e)) => return Err(McpFailure::Unreachable(format!("reading the SSE stream of {url}: {e}"))),
            None => return Err(McpFailure::Unreachable(format!("the SSE stream of {url} ended before its endpoint event"))),
        }
    };
    let base = reqwest::Url::parse(url).map_err(|e| McpFailure::Unreachable(format!("{url}: {e}")))?;
    let post_url = base.join(endpoint.trim()).map_err(|e| McpFailure::Unreachable(format!("{url} named an endpoint that is not a URL: {e}")))?;
    if post_url.origin() != base.origin() {
        return Err(McpFailure::Unreachable(format!("{url} named an endpoint on another origin ({post_url}); refused")));
    }
    let (in_tx, in_rx) = mpsc::channel(QUEUE);
    let to = in_tx.clone();
    let events_url = url.to_string();
    tokio::spawn(async move {
        let why = loop {
            match events.next().await {
                Some(Ok(ev)) => {
                    if ev.event.as_deref().is_none_or(|e| e == "message")
                        && let Some(msg) = ev.data.and_then(super::wire::message)
                        && to.send(Incoming::Message(msg)).await.is_err()
                    {
                        return;
                    }
                }
                Some(Err(e)) => break format!("the SSE stream of {events_url} failed: {e}"),
                None => break format!("{events_url} ended its SSE stream"),
            }
        };
        let failure = if why.contains("larger than the limit") { McpFailure::TooLarge(why) } else { McpFailure::Unreachable(why) };
        let _ = to.send(Incoming::Closed(failure)).await;
    });
    let (out_tx, mut out_rx) = mpsc::channel::<Value>(QUEUE);
    let writer = tokio::spawn(async move {
        while let Some(msg) = out_rx.recv().await {
            let sent = http.post(post_url.clone()).headers(headers.clone()).json(&msg).send().await;
            let failure = match sent {
                Ok(r) if r.status().is_success() => continue,
                Ok(r) => with_reason(status_failure(post_url.as_str(), r.status().as_u16(), true), r).await,
                Err(e) => send_failure(post_url.as_str(), &e),
            };
            match msg.get("id").filter(|_| msg.get("method").is_some()) {
                Some(id) => {
                    let _ = in_tx.send(Incoming::Failed { id: id.clone(), failure }).await;
                }
                None => tracing::warn!("a notification was not delivered: {failure}"),
            }
        }
    });
    let close = Box::new(move || -> super::wire::CloseFuture {
        Box::pin(async move {
            let _ = tokio::time::timeout(super::CLOSE_WAIT, writer).await;
        })
    });
    Ok(Wire { out: out_tx, incoming: in_rx, close })
}
