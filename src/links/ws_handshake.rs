//! The client's half of the WebSocket opening handshake (RFC 6455 §4.1), here rather than in
//! tungstenite, for a one-shot CLI call's start: tungstenite parses the answer with httparse,
//! whose SIMD check runs 7 `cpuid` instructions, and derives the accept key with the `sha1`
//! crate, whose SHA-NI check runs 3 more. Each traps to the hypervisor on a VM (13–50 µs each on
//! the VM of benches/README.md's start-up section). An answer head is short: a byte scan for its
//! end, lines split at `:` and a SHA-1 of 60 bytes cost next to nothing.
//!
//! Rules (what tungstenite's client handshake did, so callers see the same outcomes):
//! - The request is the caller's `Request` (tungstenite's `IntoClientRequest` made its key and
//!   its `Host`, `Connection`, `Upgrade` and version headers), written as `GET … HTTP/1.1`.
//! - The answer's head is read up to [`MAX_HEAD`] bytes; a longer one, or a connection closed
//!   before its end, ends the attempt with an error. An answer that does not begin `HTTP/1.`, or
//!   whose status line or a header line cannot be read, is httparse's error, as tungstenite gave
//!   it, as soon as its first bytes show it (a TLS server's alert to a `ws://` client:
//!   [`super::listeners::is_not_http`]).
//! - Any status but 101 is `Error::Http`: its status, its headers, and the bytes that came after
//!   the head as its body.
//! - A 101 needs `Upgrade: websocket`, `Connection: Upgrade` and the `Sec-WebSocket-Accept` the
//!   key calls for, and names a subprotocol only if the request offered it. Bytes after the head
//!   are the socket's first.

use base64::Engine;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::error::{ProtocolError, SubProtocolError};
use tokio_tungstenite::tungstenite::handshake::client::{Request, Response};
use tokio_tungstenite::tungstenite::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::Error;

/// The longest answer head read (status line and headers).
pub const MAX_HEAD: usize = 16 * 1024;

/// Sends `request` over `stream`, reads the answer, and opens the WebSocket.
pub async fn client<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, request: Request, config: WebSocketConfig) -> Result<WebSocketStream<S>, Error> {
    let key = request.headers().get("Sec-WebSocket-Key").ok_or(Error::Protocol(ProtocolError::MissingSecWebSocketKey))?;
    let accept = accept_key(key.as_bytes());
    let offered = request.headers().get("Sec-WebSocket-Protocol").cloned();
    let path = request.uri().path_and_query().map_or("/", |p| p.as_str());
    let mut head = format!("GET {path} HTTP/1.1\r\n").into_bytes();
    for (name, value) in request.headers() {
        head.extend_from_slice(name.as_str().as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"\r\n");
    stream.write_all(&head).await?;
    stream.flush().await?;

    let mut buf = Vec::with_capacity(1024);
    let end = loop {
        if let Some(end) = head_end(&buf)? {
            break end;
        }
        buf.reserve(1024);
        if stream.read_buf(&mut buf).await? == 0 {
            return Err(Error::Protocol(ProtocolError::HandshakeIncomplete));
        }
    };
    let mut response = parse_head(&buf[..end - 4])?;
    let tail = buf[end..].to_vec();
    if response.status() != StatusCode::SWITCHING_PROTOCOLS {
        *response.body_mut() = Some(tail);
        return Err(Error::Http(Box::new(response)));
    }
    verify(response.headers(), &accept, offered.as_ref())?;
    Ok(WebSocketStream::from_partially_read(stream, tail, Role::Client, Some(config)).await)
}

/// Where the answer's head ends in what was read so far (just after its blank line), or `None`
/// while more must be read; an error as soon as the bytes cannot begin an HTTP answer, or the
/// head has reached [`MAX_HEAD`] without ending.
fn head_end(buf: &[u8]) -> Result<Option<usize>, Error> {
    if !b"HTTP/1.".starts_with(&buf[..buf.len().min(7)]) {
        return Err(not_http(httparse::Error::Version));
    }
    if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
        return Ok(Some(at + 4));
    }
    if buf.len() >= MAX_HEAD {
        return Err(Error::Capacity(tokio_tungstenite::tungstenite::error::CapacityError::MessageTooLong { size: buf.len(), max_size: MAX_HEAD }));
    }
    Ok(None)
}

/// The `ws_handshake` fuzz target ([`crate::fuzz`]): `data` as what a server answers, read in
/// one go. Invariants: no panic; a head is found only within [`MAX_HEAD`] and after an
/// `HTTP/1.` start; a head that parses has a three-digit status, and each header it kept is in
/// the head's text.
#[doc(hidden)]
pub fn fuzz_answer(data: &[u8]) {
    let Ok(Some(end)) = head_end(data) else { return };
    assert!(end <= data.len() && data.starts_with(b"HTTP/1.") && data[..end].ends_with(b"\r\n\r\n"));
    let Ok(response) = parse_head(&data[..end - 4]) else { return };
    assert!((100..1000).contains(&response.status().as_u16()));
    for name in response.headers().keys() {
        let text = String::from_utf8_lossy(&data[..end]).to_ascii_lowercase();
        assert!(text.contains(name.as_str()), "{name} is not in the head");
    }
    let offered = HeaderValue::from_static("mqtt, json");
    let _ = verify(response.headers(), &accept_key(b"dGhlIHNhbXBsZSBub25jZQ=="), Some(&offered));
    let _ = verify(response.headers(), "x", None);
}

/// `Sec-WebSocket-Accept` for a key: base64 of the SHA-1 of the key and RFC 6455's GUID.
fn accept_key(key: &[u8]) -> String {
    let mut input = key.to_vec();
    input.extend_from_slice(b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
    base64::engine::general_purpose::STANDARD.encode(sha1(&input))
}

/// The status line and headers (without the blank line that ends them).
fn parse_head(head: &[u8]) -> Result<Response, Error> {
    let mut lines = head.split(|&b| b == b'\n').map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let status = lines.next().unwrap_or_default();
    let code = status
        .strip_prefix(b"HTTP/1.")
        .filter(|rest| rest.len() >= 5 && rest[0].is_ascii_digit() && rest[1] == b' ' && rest[2..5].iter().all(u8::is_ascii_digit) && rest.get(5).is_none_or(|&b| b == b' '))
        .map(|rest| rest[2..5].iter().fold(0u16, |n, d| n * 10 + u16::from(d - b'0')))
        .ok_or(not_http(httparse::Error::Status))?;
    let mut headers = HeaderMap::new();
    for line in lines {
        let (name, value) = line.iter().position(|&b| b == b':').map(|at| line.split_at(at)).ok_or(not_http(httparse::Error::HeaderName))?;
        headers.append(HeaderName::from_bytes(name)?, HeaderValue::from_bytes(value[1..].trim_ascii())?);
    }
    let mut response = Response::new(None);
    *response.status_mut() = StatusCode::from_u16(code)?;
    *response.headers_mut() = headers;
    Ok(response)
}

fn not_http(e: httparse::Error) -> Error {
    Error::Protocol(ProtocolError::HttparseError(e))
}

/// A 101's headers against RFC 6455 §4.1's list (steps 2–4 and 6).
fn verify(headers: &HeaderMap, accept: &str, offered: Option<&HeaderValue>) -> Result<(), Error> {
    // Each a list of tokens (`Connection: keep-alive, Upgrade` through a proxy), case aside.
    let has = |name: &str, want: &str| {
        headers.get_all(name).iter().filter_map(|h| h.to_str().ok()).any(|h| h.split(',').any(|t| t.trim().eq_ignore_ascii_case(want)))
    };
    if !has("Upgrade", "websocket") {
        return Err(Error::Protocol(ProtocolError::MissingUpgradeWebSocketHeader));
    }
    if !has("Connection", "Upgrade") {
        return Err(Error::Protocol(ProtocolError::MissingConnectionUpgradeHeader));
    }
    if headers.get("Sec-WebSocket-Accept").is_none_or(|h| h.as_bytes() != accept.as_bytes()) {
        return Err(Error::Protocol(ProtocolError::SecWebSocketAcceptKeyMismatch));
    }
    let chosen = headers.get("Sec-WebSocket-Protocol");
    let problem = match (offered, chosen) {
        (None, Some(_)) => Some(SubProtocolError::ServerSentSubProtocolNoneRequested),
        (Some(_), None) => Some(SubProtocolError::NoSubProtocol),
        (Some(offered), Some(chosen)) if !offered.to_str().unwrap_or_default().split(',').any(|p| p.trim().as_bytes() == chosen.as_bytes()) => Some(SubProtocolError::InvalidSubProtocol),
        _ => None,
    };
    problem.map_or(Ok(()), |p| Err(Error::Protocol(ProtocolError::SecWebSocketSubProtocolError(p))))
}

/// SHA-1 (FIPS 180-4) of a short message, with no CPU feature detection: only the handshake's
/// accept key, which proves the server read this request, not a secret.
fn sha1(data: &[u8]) -> [u8; 20] {
    let mut h: [u32; 5] = [0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0];
    let mut message = data.to_vec();
    message.push(0x80);
    while message.len() % 64 != 56 {
        message.push(0);
    }
    message.extend_from_slice(&(data.len() as u64 * 8).to_be_bytes());
    for block in message.chunks_exact(64) {
        let mut w = [0u32; 80];
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A82_7999),
                20..=39 => (b ^ c ^ d, 0x6ED9_EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
                _ => (b ^ c ^ d, 0xCA62_C1D6),
            };
            let t = a.rotate_left(5).wrapping_add(f).wrapping_add(e).wrapping_add(k).wrapping_add(*wi);
            (e, d, c, b, a) = (d, c, b.rotate_left(30), a, t);
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 20];
    for (chunk, x) in out.chunks_exact_mut(4).zip(h) {
        chunk.copy_from_slice(&x.to_be_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    use tokio_tungstenite::tungstenite::Message;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn sha1_and_the_accept_key_match_the_standards_examples() {
        assert_eq!(hex(&sha1(b"abc")), "a9993e364706816aba3e25717850c26c9cd0d89d");
        assert_eq!(hex(&sha1(b"")), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        // Two blocks (FIPS 180-4's 448-bit example), and a length that fills a block's padding.
        assert_eq!(hex(&sha1(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")), "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
        assert_eq!(hex(&sha1(&[b'a'; 64])), "0098ba824b5c16427bd7a1122a5a442a25ec644d");
        // RFC 6455 §1.3.
        assert_eq!(accept_key(b"dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    }

    /// Runs the handshake against a server that answers `answer(key)` to the request it reads,
    /// `after` in the same write.
    async fn against_then(answer: impl FnOnce(&str) -> String + Send + 'static, after: &'static [u8]) -> Result<WebSocketStream<tokio::io::DuplexStream>, Error> {
        let (client_end, mut server_end) = tokio::io::duplex(64 * 1024);
        let server = tokio::spawn(async move {
            let mut seen = Vec::new();
            while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                assert!(server_end.read_buf(&mut seen).await.unwrap() > 0);
            }
            let seen = String::from_utf8(seen).unwrap();
            assert!(seen.starts_with("GET /api/v1/link?x=1 HTTP/1.1\r\n"), "{seen}");
            let key = seen.lines().find_map(|l| l.strip_prefix("sec-websocket-key: ")).unwrap().to_string();
            server_end.write_all(&[answer(&key).as_bytes(), after].concat()).await.unwrap();
            // Open for as long as the test runs: the runtime drops it at the end.
            std::future::pending::<()>().await;
        });
        let request = "ws://127.0.0.1:1/api/v1/link?x=1".into_client_request().unwrap();
        let out = tokio::time::timeout(std::time::Duration::from_secs(10), client(client_end, request, WebSocketConfig::default())).await.unwrap();
        assert!(!server.is_finished() || server.await.is_ok(), "the server side failed");
        out
    }

    async fn against(answer: impl FnOnce(&str) -> String + Send + 'static) -> Result<WebSocketStream<tokio::io::DuplexStream>, Error> {
        against_then(answer, b"").await
    }

    fn upgrade(key: &str) -> String {
        format!("HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\nsec-websocket-accept: {}\r\n\r\n", accept_key(key.as_bytes()))
    }

    #[tokio::test]
    async fn a_101_opens_the_socket_and_keeps_the_frame_that_came_with_it() {
        // The server's first frame (unmasked text "hi") arrives in the same read as the head.
        let ws = against_then(upgrade, &[0x81, 2, b'h', b'i']).await;
        let mut ws = ws.expect("handshake");
        assert_eq!(ws.next().await.unwrap().unwrap(), Message::text("hi"));
        ws.send(Message::text("back")).await.unwrap();
    }

    #[tokio::test]
    async fn a_refusal_is_an_http_error_with_its_status_headers_and_body() {
        let out = against(|_| "HTTP/1.1 401 Unauthorized\r\nx-mcpdev-listener: control\r\ncontent-length: 9\r\n\r\nno token\n".to_string()).await;
        let Err(Error::Http(response)) = out else { panic!("not an HTTP error") };
        assert_eq!(response.status(), 401);
        assert_eq!(response.headers()["x-mcpdev-listener"], "control");
        assert_eq!(response.body().as_deref(), Some(&b"no token\n"[..]));
    }

    #[tokio::test]
    async fn a_101_that_does_not_prove_it_read_the_request_fails() {
        let out = against(|_| upgrade("another key")).await;
        assert!(matches!(out, Err(Error::Protocol(ProtocolError::SecWebSocketAcceptKeyMismatch))), "{:?}", out.err());
        // Tokens in a list, as a proxy may write them, are read as tokens.
        let listed = against(|key| upgrade(key).replace("connection: upgrade", "Connection: keep-alive, Upgrade")).await;
        assert!(listed.is_ok(), "{:?}", listed.err());
        let out = against(|key| upgrade(key).replace("connection: upgrade", "connection: upgraded")).await;
        assert!(matches!(out, Err(Error::Protocol(ProtocolError::MissingConnectionUpgradeHeader))), "{:?}", out.err());
        let out = against(|key| upgrade(key).replace("upgrade: websocket\r\n", "")).await;
        assert!(matches!(out, Err(Error::Protocol(ProtocolError::MissingUpgradeWebSocketHeader))), "{:?}", out.err());
        let out = against(|key| upgrade(key).replace("\r\n\r\n", "\r\nsec-websocket-protocol: mqtt\r\n\r\n")).await;
        assert!(matches!(out, Err(Error::Protocol(ProtocolError::SecWebSocketSubProtocolError(SubProtocolError::ServerSentSubProtocolNoneRequested)))), "{:?}", out.err());
    }

    #[tokio::test]
    async fn a_head_that_is_not_http_or_never_ends_fails() {
        // A TLS alert, with the connection left open: known from its first bytes.
        let out = against(|_| "\u{15}\u{3}\u{3}\u{0}\u{2}\u{2}\u{32}".to_string()).await;
        assert!(matches!(out, Err(Error::Protocol(ProtocolError::HttparseError(httparse::Error::Version)))), "{:?}", out.err());
        assert!(super::super::listeners::is_not_http(&out.err().unwrap()));
        let out = against(|_| "HTTP/1.1 10x Switching\r\n\r\n".to_string()).await;
        assert!(matches!(out, Err(Error::Protocol(ProtocolError::HttparseError(httparse::Error::Status)))), "{:?}", out.err());
        let out = against(|_| format!("HTTP/1.1 200 OK\r\nx: {}\r\n", "y".repeat(MAX_HEAD))).await;
        assert!(matches!(out, Err(Error::Capacity(_))), "{:?}", out.err());
        let out = against(|_| "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n".to_string()).await;
        assert!(matches!(out, Err(Error::Protocol(ProtocolError::HttparseError(httparse::Error::HeaderName)))), "{:?}", out.err());
    }
}
