//! Opening a client WebSocket, `ws://` or `wss://`: the CLI's link to its hub (`--hub
//! https://…`) and `sim`'s devices (`--url wss://…`).
//!
//! Rules: a `wss://` server is verified with the process's one trust
//! ([`crate::tls::client`]); a certificate that does not verify ends the attempt with an I/O
//! error carrying rustls's reason, which [`crate::tls::client::explain`] puts in words. Nothing
//! is sent before the server proved who it is (the `Authorization` header travels inside TLS).
//! The opening handshake is [`super::ws_handshake`]'s.

use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::client::Request;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{self, error::UrlError};

/// A client connection, plain or TLS.
pub type ClientStream = tokio_util::either::Either<TcpStream, tokio_rustls::client::TlsStream<TcpStream>>;
/// A client WebSocket over it.
pub type ClientSocket = WebSocketStream<ClientStream>;

/// Whether `request`'s URL is `wss://` (else `ws://`), and its host and port.
fn target(request: &Request) -> Result<(bool, String, u16), tungstenite::Error> {
    let uri = request.uri();
    let tls = match uri.scheme_str() {
        Some("wss") => true,
        Some("ws") => false,
        _ => return Err(tungstenite::Error::Url(UrlError::UnsupportedUrlScheme)),
    };
    let host = uri.host().filter(|h| !h.is_empty()).ok_or(tungstenite::Error::Url(UrlError::NoHostName))?;
    Ok((tls, host.trim_start_matches('[').trim_end_matches(']').to_string(), uri.port_u16().unwrap_or(if tls { 443 } else { 80 })))
}

/// What a `wss://` server is verified with: `None` for the process's trust.
pub type Tls = Option<std::sync::Arc<rustls::ClientConfig>>;

/// Connects to `request`'s URL and completes the WebSocket handshake.
pub async fn connect(request: Request, config: WebSocketConfig, trust: Tls) -> Result<ClientSocket, tungstenite::Error> {
    let (_, host, port) = target(&request)?;
    let tcp = TcpStream::connect((host.as_str(), port)).await?;
    over(tcp, request, config, trust).await
}

/// The same over a TCP connection already made (from a chosen source address, say).
pub async fn over(tcp: TcpStream, request: Request, config: WebSocketConfig, trust: Tls) -> Result<ClientSocket, tungstenite::Error> {
    let (tls, host, _) = target(&request)?;
    let _ = tcp.set_nodelay(true);
    let stream = if tls {
        crate::tls::install_crypto_provider();
        tokio_util::either::Either::Right(crate::tls::client::connect(tcp, &host, trust).await?)
    } else {
        tokio_util::either::Either::Left(tcp)
    };
    super::ws_handshake::client(stream, request, config).await
}
