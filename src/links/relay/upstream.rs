//! Opening a relayed device's upstream WebSocket, as the device would have.
//!
//! Rules it enforces:
//! - The upstream is dialled only for a device the hub admitted (the caller checks), with the
//!   device's own `Authorization`, `Device-Id`, `Client-Id` and `Protocol-Version` headers and no
//!   other credential; the token goes nowhere else and is never logged ([`DeviceHeaders`] prints
//!   it redacted).
//! - `wss://` is verified with the process's trust (the system's roots, or `MCPDEV_CA_FILE`);
//!   `ws://` only when the person allowed it (`--upstream-plain`), checked when the URL is read
//!   ([`UpstreamUrl::parse`]).
//! - Connecting, the TLS handshake and the HTTP upgrade together end within a deadline; an answer
//!   other than `101` with the right `Sec-WebSocket-Accept` is refused (a redirect included: it
//!   is never followed), and its status is what the error says.

use std::time::Duration;

use axum::http::{HeaderMap, HeaderName, HeaderValue, Request, StatusCode, Uri, header};
use base64::Engine as _;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;

/// An upstream connection after its handshake.
pub type UpstreamSocket = TokioIo<hyper::upgrade::Upgraded>;

/// The device's headers the upstream gets, as the device sent them. `Debug` never shows the token.
#[derive(Clone, Default)]
pub struct DeviceHeaders(pub Vec<(HeaderName, HeaderValue)>);

/// The headers of a device's handshake that travel to its upstream.
pub const FORWARDED: [&str; 4] = ["authorization", "device-id", "client-id", "protocol-version"];

impl DeviceHeaders {
    /// The forwarded headers out of a device's handshake.
    pub fn from_request(headers: &HeaderMap) -> Self {
        Self(FORWARDED.iter().filter_map(|name| headers.get(*name).map(|v| (HeaderName::from_static(name), v.clone()))).collect())
    }

    /// The same, with what the device gave in its query string instead of headers (a browser
    /// cannot set headers): its identity as the hub read it, the token as `Bearer`.
    pub fn for_device(headers: &HeaderMap, identity: &crate::wire::identity::Identity) -> Self {
        let mut forwarded = Self::from_request(headers);
        let has = |f: &Self, name: &HeaderName| f.0.iter().any(|(n, _)| n == name);
        let from_identity = [
            (header::AUTHORIZATION, identity.token.as_deref().map(|t| format!("Bearer {t}"))),
            (HeaderName::from_static("device-id"), Some(identity.device_id.clone())),
            (HeaderName::from_static("client-id"), identity.client_id.clone()),
            (HeaderName::from_static("protocol-version"), Some(identity.protocol_version.to_string())),
        ];
        for (name, value) in from_identity {
            if let Some(v) = value.and_then(|v| HeaderValue::from_str(&v).ok())
                && !has(&forwarded, &name)
            {
                forwarded.0.push((name, v));
            }
        }
        forwarded
    }
}

impl std::fmt::Debug for DeviceHeaders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown: Vec<_> = self.0.iter().map(|(k, v)| (k.as_str(), if *k == header::AUTHORIZATION { "[redacted]" } else { v.to_str().unwrap_or("?") })).collect();
        f.debug_tuple("DeviceHeaders").field(&shown).finish()
    }
}

/// An upstream's WebSocket URL, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamUrl {
    uri: Uri,
    tls: bool,
}

impl UpstreamUrl {
    /// Reads `url`: `wss://host[:port]/path`, or `ws://…` when `plain_ok`.
    pub fn parse(url: &str, plain_ok: bool) -> Result<Self, String> {
        let uri: Uri = url.trim().parse().map_err(|e| format!("the upstream URL {url:?} is not a URL: {e}"))?;
        let tls = match uri.scheme_str() {
            Some("wss") => true,
            Some("ws") if plain_ok => false,
            Some("ws") => return Err(format!("the upstream {url} is plain ws://: the device's token would cross the network in clear text; use wss://, or add --upstream-plain to allow it")),
            _ => return Err(format!("the upstream URL {url:?} must start with wss:// (or ws:// with --upstream-plain)")),
        };
        if uri.host().is_none_or(str::is_empty) {
            return Err(format!("the upstream URL {url:?} names no host"));
        }
        Ok(Self { uri, tls })
    }

    fn host(&self) -> &str {
        self.uri.host().unwrap_or_default()
    }

    fn port(&self) -> u16 {
        self.uri.port_u16().unwrap_or(if self.tls { 443 } else { 80 })
    }

    /// `host[:port]` as the logs say it (no path, no query: nothing secret).
    pub fn authority(&self) -> String {
        self.uri.authority().map(|a| a.to_string()).unwrap_or_default()
    }
}

impl std::fmt::Display for UpstreamUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.uri)
    }
}

/// Either a plain or a TLS connection to the upstream.
type Stream = tokio_util::either::Either<TcpStream, tokio_rustls::client::TlsStream<TcpStream>>;

/// Opens `url` with the device's `headers`, all of it within `deadline`; the error says why not.
pub async fn connect(url: &UpstreamUrl, headers: &DeviceHeaders, deadline: Duration) -> Result<UpstreamSocket, String> {
    tokio::time::timeout(deadline, open(url, headers)).await.map_err(|_| format!("the upstream {} did not complete its WebSocket handshake within {} s", url.authority(), deadline.as_secs()))?
}

async fn open(url: &UpstreamUrl, headers: &DeviceHeaders) -> Result<UpstreamSocket, String> {
    let host = url.host().trim_start_matches('[').trim_end_matches(']').to_string();
    let tcp = TcpStream::connect((host.as_str(), url.port())).await.map_err(|e| format!("cannot reach the upstream {}: {e}", url.authority()))?;
    let _ = tcp.set_nodelay(true);
    let stream: Stream = if url.tls {
        crate::tls::install_crypto_provider();
        let tls = crate::tls::client::connect(tcp, &host, None).await.map_err(|e| {
            let why = crate::tls::client::explain(&e).unwrap_or_else(|| e.to_string());
            format!("the upstream {} failed TLS verification: {why}", url.authority())
        })?;
        tokio_util::either::Either::Right(tls)
    } else {
        tokio_util::either::Either::Left(tcp)
    };
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| format!("the upstream {}: {e}", url.authority()))?;
    tokio::spawn(conn.with_upgrades());
    let key = base64::engine::general_purpose::STANDARD.encode(fastrand::u128(..).to_le_bytes());
    let path = url.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut request = Request::get(path)
        .header(header::HOST, url.authority())
        .header(header::CONNECTION, "Upgrade")
        .header(header::UPGRADE, "websocket")
        .header(header::SEC_WEBSOCKET_VERSION, "13")
        .header(header::SEC_WEBSOCKET_KEY, &key)
        .body(http_body_util_empty())
        .map_err(|e| format!("the upstream request: {e}"))?;
    for (name, value) in &headers.0 {
        request.headers_mut().insert(name.clone(), value.clone());
    }
    let response = sender.send_request(request).await.map_err(|e| format!("the upstream {} ended the handshake: {e}", url.authority()))?;
    if response.status() != StatusCode::SWITCHING_PROTOCOLS {
        let status = response.status();
        let whence = response.headers().get(header::LOCATION).map(|_| " (a redirect: not followed)").unwrap_or_default();
        return Err(format!("the upstream {} refused the WebSocket: {status}{whence}", url.authority()));
    }
    let accept = response.headers().get(header::SEC_WEBSOCKET_ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or_default();
    if accept != derive_accept_key(key.as_bytes()) {
        return Err(format!("the upstream {} answered the upgrade without the right Sec-WebSocket-Accept", url.authority()));
    }
    let upgraded = hyper::upgrade::on(response).await.map_err(|e| format!("the upstream {} upgrade failed: {e}", url.authority()))?;
    Ok(TokioIo::new(upgraded))
}

/// An empty request body.
fn http_body_util_empty() -> axum::body::Body {
    axum::body::Body::empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_upstreams_need_the_opt_in_and_the_token_is_never_shown() {
        assert!(UpstreamUrl::parse("wss://api.tenclass.net/xiaozhi/v1/", false).is_ok());
        let refused = UpstreamUrl::parse("ws://192.168.1.5:8000/xiaozhi/v1/", false).unwrap_err();
        assert!(refused.contains("--upstream-plain"), "{refused}");
        assert!(UpstreamUrl::parse("ws://192.168.1.5:8000/xiaozhi/v1/", true).is_ok());
        assert!(UpstreamUrl::parse("https://x/", true).is_err());
        assert!(UpstreamUrl::parse("wss:///path", true).is_err());
        let mut map = HeaderMap::new();
        map.insert("authorization", HeaderValue::from_static("Bearer sekret-token"));
        map.insert("device-id", HeaderValue::from_static("aa:bb:cc:dd:ee:ff"));
        map.insert("x-other", HeaderValue::from_static("not forwarded"));
        let h = DeviceHeaders::from_request(&map);
        assert_eq!(h.0.len(), 2);
        let shown = format!("{h:?}");
        assert!(!shown.contains("sekret") && shown.contains("aa:bb:cc:dd:ee:ff"), "{shown}");
        // A device that gave its identity in the query string: the upstream still gets headers.
        let query = crate::wire::identity::identify(|_| None, Some("device-id=AA-BB-CC-DD-EE-01&client-id=c1&authorization=Bearer%20q-token")).unwrap();
        let h = DeviceHeaders::for_device(&HeaderMap::new(), &query);
        let get = |name: &str| h.0.iter().find(|(n, _)| n == name).map(|(_, v)| v.to_str().unwrap().to_string());
        assert_eq!(get("authorization").as_deref(), Some("Bearer q-token"));
        assert_eq!(get("device-id").as_deref(), Some("aa:bb:cc:dd:ee:01"));
        assert_eq!(get("client-id").as_deref(), Some("c1"));
        // Headers the device sent win over what the hub read.
        let h = DeviceHeaders::for_device(&map, &query);
        assert_eq!(h.0.iter().filter(|(n, _)| n == "authorization").count(), 1);
        assert_eq!(h.0.iter().find(|(n, _)| n == "authorization").map(|(_, v)| v.to_str().unwrap()), Some("Bearer sekret-token"));
    }
}
