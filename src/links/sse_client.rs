//! A client for the legacy HTTP+SSE transport: `GET` the SSE URL, wait for the `endpoint` event,
//! POST every message there; the server's messages arrive as `message` events. Exposed to rmcp as
//! a (sink, stream) transport.

use std::collections::HashMap;

use futures_util::StreamExt;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use sse_stream::SseStream;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::PollSender;

pub type Transport = (PollSender<ClientJsonRpcMessage>, ReceiverStream<ServerJsonRpcMessage>);

pub async fn connect(url: &str, headers: &HashMap<String, String>) -> anyhow::Result<Transport> {
    let http = super::mcp_client::http_client(url)?;
    let with_headers = |mut rb: reqwest::RequestBuilder| {
        for (k, v) in headers {
            rb = rb.header(k, v);
        }
        rb
    };
    let resp = with_headers(http.get(url).header("Accept", "text/event-stream")).send().await?;
    if !resp.status().is_success() {
        anyhow::bail!("GET {url} answered {}", resp.status());
    }
    let mut events = SseStream::from_bytes_stream(resp.bytes_stream());
    let endpoint = loop {
        match events.next().await {
            Some(Ok(ev)) if ev.event.as_deref() == Some("endpoint") => break ev.data.unwrap_or_default(),
            Some(Ok(_)) => continue,
            Some(Err(e)) => anyhow::bail!("reading the SSE stream: {e}"),
            None => anyhow::bail!("the SSE stream ended before the endpoint event"),
        }
    };
    let post_url = reqwest::Url::parse(url)?.join(endpoint.trim())?;
    let (in_tx, in_rx) = mpsc::channel::<ServerJsonRpcMessage>(64);
    tokio::spawn(async move {
        while let Some(Ok(ev)) = events.next().await {
            if ev.event.as_deref().is_none_or(|e| e == "message")
                && let Some(msg) = ev.data.and_then(|d| serde_json::from_str(&d).ok())
                && in_tx.send(msg).await.is_err()
            {
                return;
            }
        }
    });
    let (out_tx, mut out_rx) = mpsc::channel::<ClientJsonRpcMessage>(64);
    let headers = headers.clone();
    tokio::spawn(async move {
        while let Some(msg) = out_rx.recv().await {
            let mut rb = http.post(post_url.clone()).json(&msg);
            for (k, v) in &headers {
                rb = rb.header(k, v);
            }
            if let Err(e) = rb.send().await.and_then(reqwest::Response::error_for_status) {
                tracing::warn!("POST to the SSE endpoint failed: {e}");
                return;
            }
        }
    });
    Ok((PollSender::new(out_tx), ReceiverStream::new(in_rx)))
}
