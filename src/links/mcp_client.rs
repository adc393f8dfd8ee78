//! The CLI as a client of any MCP server (`--url`): Streamable HTTP through rmcp, or the legacy
//! HTTP+SSE transport (which rmcp no longer has) through [`sse_client`](super::sse_client).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, PaginatedRequestParams};
use rmcp::service::{RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;

/// Which transport to use for `--url`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum McpTransport {
    /// SSE when the URL path ends in `/sse`, else Streamable HTTP.
    Auto,
    Http,
    Sse,
}

/// Why talking to an MCP server failed, in the terms the exit codes use.
#[derive(Debug, thiserror::Error)]
pub enum McpFailure {
    #[error("{0}")]
    Auth(String),
    #[error("{0}")]
    Unreachable(String),
    #[error("the server answered with an error ({code}): {message}")]
    Rpc { code: i32, message: String, data: Option<Value> },
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

/// Longest [`McpConnection::close`] waits for the server.
pub const CLOSE_WAIT: Duration = Duration::from_secs(2);

pub struct McpConnection {
    client: RunningService<RoleClient, ClientConfig>,
}

fn client_info() -> ClientConfig {
    ClientConfig::new(ClientCapabilities::default(), Implementation::new("mcpdev", env!("CARGO_PKG_VERSION")))
}

/// `Name: value` pairs from `--header`.
pub fn parse_headers(headers: &[String]) -> Result<HashMap<String, String>, String> {
    headers
        .iter()
        .map(|h| {
            h.split_once(':')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .filter(|(k, _)| !k.is_empty())
                .ok_or_else(|| format!("--header {h:?} is not `Name: value`"))
        })
        .collect()
}

/// A server whose certificate did not verify, in words (exit 3, as a refused credential).
fn untrusted(url: &str, e: &(dyn std::error::Error + 'static)) -> Option<McpFailure> {
    crate::tls::client::explain(e).map(|what| McpFailure::Auth(format!("{url} did not prove who it is: {what}")))
}

fn failure(url: &str, e: impl std::fmt::Display) -> McpFailure {
    let text = e.to_string();
    if text.contains("401") || text.contains("403") || text.to_ascii_lowercase().contains("unauthorized") || text.contains("Forbidden") {
        McpFailure::Auth(format!("{url} refused the credentials: {text} (--header 'Authorization: Bearer …')"))
    } else {
        McpFailure::Unreachable(format!("cannot reach the MCP server at {url}: {text}"))
    }
}

/// Why the MCP handshake failed, in words: rmcp's own message names Rust types
/// (`Transport [rmcp::transport::worker::WorkerTransport<…>]`), so the cause is read from the
/// error inside it.
fn init_failure(url: &str, e: &rmcp::service::ClientInitializeError) -> McpFailure {
    use rmcp::service::ClientInitializeError as E;
    match e {
        E::TransportError { error, .. } => transport_failure(url, &*error.error),
        E::JsonRpcError(err) => McpFailure::Rpc { code: err.code.0, message: err.message.to_string(), data: err.data.clone() },
        E::ConnectionClosed(_) => McpFailure::Unreachable(format!("{url} closed the connection during the MCP handshake")),
        other => McpFailure::Unreachable(format!("{url} did not complete the MCP handshake: {}", plain_words(&other.to_string()))),
    }
}

fn transport_failure(url: &str, e: &(dyn std::error::Error + Send + Sync + 'static)) -> McpFailure {
    use rmcp::transport::streamable_http_client::StreamableHttpError as H;
    if let Some(refused) = untrusted(url, e) {
        return refused;
    }
    let auth = |what: &str| McpFailure::Auth(format!("{url} {what}: send a token with --header 'Authorization: Bearer …'"));
    match e.downcast_ref::<H<reqwest::Error>>() {
        Some(H::AuthRequired(_)) => auth("asks for credentials (HTTP 401)"),
        Some(H::InsufficientScope(_)) => auth("refused the credentials (HTTP 403, insufficient scope)"),
        Some(H::HttpStatus(s)) if matches!(s.status, 401 | 403) => auth(&format!("refused the request (HTTP {})", s.status)),
        Some(H::HttpStatus(s)) => McpFailure::Unreachable(format!("{url} answered HTTP {}", s.status)),
        Some(H::Client(r)) => untrusted(url, r).unwrap_or_else(|| McpFailure::Unreachable(format!("cannot reach the MCP server at {url}: {}", reqwest_cause(r)))),
        Some(H::UnexpectedServerResponse(text)) if text.contains("403") => McpFailure::Auth(format!("{url} refused the request: {}", plain_words(text))),
        Some(H::UnexpectedServerResponse(text)) if text.contains("401") => auth(&format!("refused the request ({})", plain_words(text))),
        Some(other) => McpFailure::Unreachable(format!("the MCP server at {url} failed: {}", plain_words(&other.to_string()))),
        None => failure(url, plain_words(&e.to_string())),
    }
}

/// Most redirects followed for one request.
const MAX_REDIRECTS: usize = 10;

/// The HTTP client for `url`, set up as rmcp's own (no idle connections kept; only same-origin
/// 307 and 308 redirects followed, which keep the JSON-RPC body, and never to another host,
/// which would get the session id and `--header`s). For a plain `http://` URL it has no
/// certificate store: TLS is never used there, and loading the system's certificates (some 150
/// files) cost more than the whole call.
/// An `https://` server is verified with the process's trust ([`crate::tls::client`]: the
/// system's roots, `MCPDEV_CA_FILE`, or a pinned fingerprint).
pub(crate) fn http_client(url: &str) -> Result<reqwest::Client, McpFailure> {
    let redirects = reqwest::redirect::Policy::custom(|attempt| {
        let keeps_body = matches!(attempt.status(), reqwest::StatusCode::TEMPORARY_REDIRECT | reqwest::StatusCode::PERMANENT_REDIRECT);
        let same_origin = attempt.previous().first().is_some_and(|first| first.origin() == attempt.url().origin());
        if !keeps_body || !same_origin {
            attempt.stop()
        } else if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
        } else {
            attempt.follow()
        }
    });
    let mut builder = reqwest::Client::builder().pool_max_idle_per_host(0).redirect(redirects);
    if url.get(..7).is_some_and(|scheme| scheme.eq_ignore_ascii_case("http://")) {
        builder = builder.tls_certs_only([]);
    } else {
        crate::tls::install_crypto_provider();
        let config = crate::tls::client::http_config().map_err(|e| McpFailure::Unreachable(e.to_string()))?;
        builder = builder.tls_backend_preconfigured((*config).clone());
    }
    builder.build().map_err(|e| McpFailure::Unreachable(format!("cannot set up an HTTP client for {url}: {e}")))
}

/// The innermost cause of a reqwest error ("Connection refused (os error 111)", a DNS failure),
/// without reqwest's own wrapping.
fn reqwest_cause(e: &reqwest::Error) -> String {
    let mut cause: &dyn std::error::Error = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    let inner = cause.to_string();
    if e.is_connect() { format!("cannot connect ({inner})") } else if e.is_timeout() { "timed out".to_string() } else { inner }
}

/// A message with any `Name [rust::type::Path<…>]` or `<…>` generic noise taken out.
fn plain_words(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '[' | '<' => depth += 1,
            ']' | '>' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl McpConnection {
    pub async fn connect(url: &str, headers: &HashMap<String, String>, transport: McpTransport, timeout: Duration) -> Result<Self, McpFailure> {
        let sse = match transport {
            McpTransport::Sse => true,
            McpTransport::Http => false,
            McpTransport::Auto => url.split(['?', '#']).next().unwrap_or(url).trim_end_matches('/').ends_with("/sse"),
        };
        crate::tls::install_crypto_provider();
        let connecting = async {
            if sse {
                let t = super::sse_client::connect(url, headers).await.map_err(|e| untrusted(url, e.as_ref()).unwrap_or_else(|| failure(url, e)))?;
                client_info().serve(t).await.map_err(|e| init_failure(url, &e))
            } else {
                let mut custom = HashMap::new();
                for (k, v) in headers {
                    let name = reqwest::header::HeaderName::from_bytes(k.as_bytes()).map_err(|e| McpFailure::Unreachable(format!("header {k:?}: {e}")))?;
                    let value = reqwest::header::HeaderValue::from_str(v).map_err(|e| McpFailure::Unreachable(format!("header {k:?}: {e}")))?;
                    custom.insert(name, value);
                }
                let config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(custom);
                let transport = StreamableHttpClientTransport::with_client(http_client(url)?, config);
                client_info().serve(transport).await.map_err(|e| init_failure(url, &e))
            }
        };
        let client = tokio::time::timeout(timeout, connecting).await.map_err(|_| McpFailure::Timeout(timeout))??;
        Ok(Self { client })
    }

    /// Ends the session, telling the server (a Streamable HTTP session is `DELETE`d), within
    /// [`CLOSE_WAIT`]: a one-shot client leaves no session open behind it for the server to count
    /// against its caps until it expires.
    pub async fn close(mut self) {
        let _ = self.client.close_with_timeout(CLOSE_WAIT).await;
    }

    /// The server's initialize result (protocol version, capabilities, serverInfo).
    pub fn server_info(&self) -> Value {
        self.client.peer_info().map(|i| serde_json::to_value(&*i).unwrap_or(Value::Null)).unwrap_or(Value::Null)
    }

    /// Every tool, following `nextCursor`; a cursor seen before ends the loop.
    pub async fn list_all_tools(&self, timeout: Duration) -> Result<Vec<Value>, McpFailure> {
        self.list_tools_until(timeout, None).await
    }

    /// The server's tools, page by page, stopping after the page that holds a tool named `wanted`
    /// (so calling one tool of a server with 40,000 does not list them all); every page when it
    /// is `None` or not found.
    pub async fn list_tools_until(&self, timeout: Duration, wanted: Option<&str>) -> Result<Vec<Value>, McpFailure> {
        let mut tools = Vec::new();
        let mut seen = HashSet::new();
        let mut cursor: Option<String> = None;
        loop {
            let params = cursor.clone().map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
            let page = tokio::time::timeout(timeout, self.client.list_tools(params)).await.map_err(|_| McpFailure::Timeout(timeout))?.map_err(service_failure)?;
            tools.extend(page.tools.iter().filter_map(|t| serde_json::to_value(t).ok()));
            tracing::debug!(page = seen.len() + 1, tools = page.tools.len(), "tools/list page");
            if wanted.is_some_and(|name| page.tools.iter().any(|t| t.name == name)) {
                return Ok(tools);
            }
            match page.next_cursor.filter(|c| !c.is_empty()) {
                Some(next) if seen.insert(next.clone()) && seen.len() < 1000 => cursor = Some(next),
                _ => return Ok(tools),
            }
        }
    }

    pub async fn call_tool(&self, name: &str, arguments: Value, timeout: Duration) -> Result<Value, McpFailure> {
        let mut params = CallToolRequestParams::new(name.to_string());
        if let Value::Object(map) = arguments {
            params = params.with_arguments(map);
        }
        let result = tokio::time::timeout(timeout, self.client.call_tool(params)).await.map_err(|_| McpFailure::Timeout(timeout))?.map_err(service_failure)?;
        Ok(serde_json::to_value(result).unwrap_or(Value::Null))
    }
}

fn service_failure(e: ServiceError) -> McpFailure {
    match e {
        ServiceError::McpError(err) => McpFailure::Rpc { code: err.code.0, message: err.message.to_string(), data: err.data },
        ServiceError::Timeout { timeout } => McpFailure::Timeout(timeout),
        ServiceError::TransportSend(e) => transport_failure("the MCP server", &*e.error),
        other => McpFailure::Unreachable(format!("the MCP connection failed: {}", plain_words(&other.to_string()))),
    }
}
