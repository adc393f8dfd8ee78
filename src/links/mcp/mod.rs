//! The CLI as a client of any MCP server: one speaking Streamable HTTP or the legacy HTTP+SSE
//! transport (`--url`), or one run as a child over stdio (`--stdio`). The transports
//! ([`http`], [`sse`], [`stdio`]) carry raw JSON-RPC ([`wire`]); [`peer`] matches requests to
//! answers; [`McpConnection`] is the MCP session the commands use, whatever the transport.
//!
//! Rules:
//! - Every request has a deadline ([`McpFailure::Timeout`]); a request given up is cancelled on
//!   the server (`notifications/cancelled`).
//! - Results are kept as the server sent them (JSON values): a field no model of ours knows (a
//!   task's `ttl`, an extension's) reaches `--json` intact.
//! - Listings follow `nextCursor` until it ends, a cursor repeats, or [`PAGES_MAX`] pages.
//! - One message from a server is at most [`wire::MAX_MESSAGE`] bytes ([`McpFailure::TooLarge`]),
//!   held as its text; a listing's items are read from that text one at a time ([`page`]).

pub mod http;
pub mod page;
pub mod peer;
pub mod sse;
pub mod stdio;
pub mod wire;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::{Value, json};

use self::peer::Peer;
use self::stdio::StdioCommand;

/// The protocol version mcpdev asks for (the server may answer with an older one).
pub const PROTOCOL_VERSION: &str = "2025-11-25";
/// Most pages one listing reads.
pub const PAGES_MAX: usize = 1000;

/// Which transport to use for `--url`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum McpTransport {
    /// SSE when the URL path ends in `/sse`, else Streamable HTTP.
    Auto,
    Http,
    Sse,
}

/// Where an MCP server is.
#[derive(Debug, Clone)]
pub enum McpEndpoint {
    Url { url: String, headers: HashMap<String, String>, transport: McpTransport },
    Stdio(StdioCommand),
}

impl McpEndpoint {
    /// How the server is named in output (`device_id`) and errors: its URL, or `stdio:` and its command.
    pub fn name(&self) -> String {
        match self {
            McpEndpoint::Url { url, .. } => url.clone(),
            McpEndpoint::Stdio(cmd) => format!("stdio:{}", cmd.display()),
        }
    }
}

/// Why talking to an MCP server failed, in the terms the exit codes use.
#[derive(Debug, Clone, thiserror::Error)]
pub enum McpFailure {
    #[error("{0}")]
    Auth(String),
    #[error("{0}")]
    Unreachable(String),
    #[error("the server answered with an error ({code}): {message}")]
    Rpc { code: i32, message: String, data: Option<Value> },
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// A message larger than [`wire::MAX_MESSAGE`]: refused, not read.
    #[error("{0}")]
    TooLarge(String),
}

/// Longest [`McpConnection::close`] waits for each step of the ending.
pub const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// An initialized MCP session.
pub struct McpConnection {
    peer: Peer,
    init: Value,
}

impl McpConnection {
    /// Opens the transport and does the handshake (`initialize`, `notifications/initialized`)
    /// within `timeout`.
    pub async fn connect(endpoint: &McpEndpoint, timeout: Duration) -> Result<Self, McpFailure> {
        crate::tls::install_crypto_provider();
        let protocol = Arc::new(OnceLock::new());
        // Whether the person's remote token went with the request, bound to its hub's CA.
        let pinned = std::cell::Cell::new(false);
        let opening = async {
            match endpoint {
                McpEndpoint::Stdio(cmd) => stdio::spawn(cmd),
                McpEndpoint::Url { url, headers, transport } => {
                    let (headers, tls) = with_hub_token(url, header_map(headers)?)?;
                    pinned.set(tls.is_some());
                    let sse = match transport {
                        McpTransport::Sse => true,
                        McpTransport::Http => false,
                        McpTransport::Auto => url.split(['?', '#']).next().unwrap_or(url).trim_end_matches('/').ends_with("/sse"),
                    };
                    if sse { sse::connect(url, headers, tls).await } else { http::connect(url, headers, protocol.clone(), tls) }
                }
            }
        };
        // A server that is not the token's hub fails its CA: say why, and what to do for another server.
        let explain = |e: McpFailure| match e {
            McpFailure::Auth(m) if pinned.get() => McpFailure::Auth(format!(
                "{m} (the remote token in {} goes only to the hub whose CA its file names, and this server did not prove that CA; nothing was sent. \
                 For another MCP server, run without {} and {})",
                crate::links::control_token::HUB_TOKEN_FILE_ENV,
                crate::links::control_token::HUB_TOKEN_FILE_ENV,
                crate::links::control_token::HUB_TOKEN_ENV
            )),
            other => other,
        };
        let wire = tokio::time::timeout(timeout, opening).await.map_err(|_| McpFailure::Timeout(timeout))?.map_err(explain)?;
        let peer = Peer::start(wire);
        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "mcpdev", "version": env!("CARGO_PKG_VERSION")},
        });
        let init = match peer.request("initialize", Some(params), timeout).await {
            Ok(init) if init["protocolVersion"].is_string() => init,
            Ok(_) => {
                peer.close().await;
                return Err(McpFailure::Unreachable(format!("{} answered initialize without a protocolVersion: not an MCP server", endpoint.name())));
            }
            Err(e) => {
                peer.close().await;
                return Err(match e {
                    McpFailure::Timeout(t) => McpFailure::Timeout(t),
                    other => explain(other),
                });
            }
        };
        let _ = protocol.set(init["protocolVersion"].as_str().unwrap_or(PROTOCOL_VERSION).to_string());
        peer.notify("notifications/initialized", json!({})).await;
        Ok(Self { peer, init })
    }

    /// Ends the session: the server is told (a Streamable HTTP session is `DELETE`d, a stdio
    /// server's stdin closed, then it is stopped), within [`CLOSE_WAIT`] a step.
    pub async fn close(self) {
        self.peer.close().await;
    }

    /// The server's initialize result (protocol version, capabilities, serverInfo).
    pub fn server_info(&self) -> Value {
        self.init.clone()
    }

    /// One request, its result as the server sent it.
    pub async fn request(&self, method: &str, params: Option<Value>, timeout: Duration) -> Result<Value, McpFailure> {
        self.peer.request(method, params, timeout).await
    }

    /// The next notification from the server (`None` once the connection ended).
    pub async fn next_note(&self) -> Option<Value> {
        self.peer.next_note().await
    }

    /// Every item of a paged listing (`tools/list` and `tools`, `resources/list` and
    /// `resources`, …), following `nextCursor`; with `until`, stopping after the page that holds
    /// an item it accepts.
    pub async fn list_all(&self, method: &str, key: &str, params: Value, timeout: Duration, until: Option<&dyn Fn(&Value) -> bool>) -> Result<Vec<Value>, McpFailure> {
        let mut items = Vec::new();
        let mut seen = HashSet::new();
        let mut params = params;
        for page_no in 1..=PAGES_MAX {
            let answer = self.peer.request_raw(method, Some(params.clone()), timeout).await?;
            let before = items.len();
            let next = page::read(answer.result(), key, &mut items);
            drop(answer);
            tracing::debug!(page = page_no, items = items.len() - before, "{method} page");
            let found = until.is_some_and(|f| items[before..].iter().any(f));
            match next.filter(|c| !c.is_empty()) {
                Some(next) if !found && seen.insert(next.clone()) => params["cursor"] = json!(next),
                _ => break,
            }
        }
        items.shrink_to_fit();
        Ok(items)
    }

    /// Every tool, following `nextCursor`.
    pub async fn list_all_tools(&self, timeout: Duration) -> Result<Vec<Value>, McpFailure> {
        self.list_tools_until(timeout, None).await
    }

    /// The server's tools, page by page, stopping after the page that holds a tool named `wanted`
    /// (so calling one tool of a server with 40,000 does not list them all); every page when it
    /// is `None` or not found.
    pub async fn list_tools_until(&self, timeout: Duration, wanted: Option<&str>) -> Result<Vec<Value>, McpFailure> {
        let is_wanted = |t: &Value| wanted.is_some_and(|w| t["name"] == w);
        self.list_all("tools/list", "tools", json!({}), timeout, wanted.map(|_| &is_wanted as &dyn Fn(&Value) -> bool)).await
    }

    pub async fn call_tool(&self, name: &str, arguments: Value, timeout: Duration) -> Result<Value, McpFailure> {
        let arguments = if arguments.is_object() { arguments } else { json!({}) };
        self.request("tools/call", Some(json!({"name": name, "arguments": arguments})), timeout).await
    }
}

fn header_map(headers: &HashMap<String, String>) -> Result<reqwest::header::HeaderMap, McpFailure> {
    let mut map = reqwest::header::HeaderMap::new();
    for (k, v) in headers {
        let name = reqwest::header::HeaderName::from_bytes(k.as_bytes()).map_err(|e| McpFailure::Unreachable(format!("header {k:?}: {e}")))?;
        let value = reqwest::header::HeaderValue::from_str(v).map_err(|e| McpFailure::Unreachable(format!("header {k:?}: {e}")))?;
        map.insert(name, value);
    }
    Ok(map)
}

/// `headers` for an MCP endpoint at `url`, with the person's remote token when it may go there
/// (one credential per person: the hub's `/mcp` takes it): only over `https://`, only when no
/// `Authorization` was given, and only to the hub its file names (then the TLS configuration
/// returned trusts only that hub's CA) or that the person's CA names
/// ([`crate::links::control_token::remote_for_url`]).
fn with_hub_token(url: &str, mut headers: reqwest::header::HeaderMap) -> Result<(reqwest::header::HeaderMap, Option<Arc<rustls::ClientConfig>>), McpFailure> {
    let https = url.get(..8).is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"));
    if !https || headers.contains_key(reqwest::header::AUTHORIZATION) {
        return Ok((headers, None));
    }
    let Some((token, pin)) = crate::links::control_token::remote_for_url() else { return Ok((headers, None)) };
    let value = reqwest::header::HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| McpFailure::Auth("the remote token holds characters a header cannot carry".into()))?;
    headers.insert(reqwest::header::AUTHORIZATION, value);
    let tls = match pin {
        Some(pin) => Some(crate::tls::client::pinned_http_config(pin).map_err(|e| McpFailure::Unreachable(e.0))?),
        None => None,
    };
    Ok((headers, tls))
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

/// Most redirects followed for one request.
const MAX_REDIRECTS: usize = 10;

/// The HTTP client for `url`, set up as rmcp's own (no idle connections kept; only same-origin
/// 307 and 308 redirects followed, which keep the JSON-RPC body, and never to another host,
/// which would get the session id and `--header`s). For a plain `http://` URL it has no
/// certificate store: TLS is never used there, and loading the system's certificates (some 150
/// files) cost more than the whole call.
/// An `https://` server is verified with the process's trust ([`crate::tls::client`]: the
/// system's roots, `MCPDEV_CA_FILE`, or a pinned fingerprint).
pub(crate) fn http_client(url: &str, tls: Option<Arc<rustls::ClientConfig>>) -> Result<reqwest::Client, McpFailure> {
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
        let config = match tls {
            Some(config) => config,
            None => crate::tls::client::http_config().map_err(|e| McpFailure::Unreachable(e.to_string()))?,
        };
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

