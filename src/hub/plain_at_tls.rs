//! A plain-text request (`ws://`, `http://`) at a listener with TLS, answered in plain HTTP.
//!
//! A TLS server that reads `GET / HTTP/1.1` where a ClientHello belongs answers with a TLS alert,
//! which the client reads as "httparse error: invalid HTTP version" and, being a device, retries
//! forever. The hub answers such a request instead, so that the person learns what to change.
//!
//! Rules it enforces:
//! - Only the connection's first byte is looked at (peeked, not read): a ClientHello begins with
//!   0x16, a plain request with a method's capital letter. Nothing else is taken for plain text.
//! - The request's head is read to its end, at most [`MAX_HEAD`] bytes, within the deadline the
//!   handshake has (the caller's permits are held across it, as for a handshake); then a `400`
//!   with [`HEADER`]: [`TLS`] and [`TLS_SAYS`] is written and the connection closed. No byte of
//!   the request is interpreted, so nothing in it can change the answer.
//! - The caller counts and logs it (rate-limited) as a refused handshake.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::links::listeners::{HEADER, TLS, TLS_SAYS};

/// The most of a plain request's head that is read before answering.
pub const MAX_HEAD: usize = 8192;

/// What the first bytes on a listener with TLS were.
#[derive(Debug, PartialEq, Eq)]
pub enum FirstBytes {
    /// Not plain text (a ClientHello, or anything else): the handshake goes on.
    Tls,
    /// A plain-text request, answered; the connection is done.
    AnsweredPlain,
    /// Nothing came within the deadline, or the connection ended.
    Nothing,
}

/// Looks at the connection's first byte within `deadline`, and answers a plain-text request.
pub async fn answer_plain_http(tcp: &mut TcpStream, deadline: Duration) -> FirstBytes {
    let until = tokio::time::Instant::now() + deadline;
    let mut first = [0u8; 1];
    match tokio::time::timeout_at(until, tcp.peek(&mut first)).await {
        Ok(Ok(1)) if first[0].is_ascii_uppercase() => {}
        Ok(Ok(1)) => return FirstBytes::Tls,
        _ => return FirstBytes::Nothing,
    }
    // Read the head, so that closing does not reset the connection before the answer is read.
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD {
        match tokio::time::timeout_at(until, tcp.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => head.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    let answer = format!(
        "HTTP/1.1 400 Bad Request\r\n{HEADER}: {TLS}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{TLS_SAYS}",
        TLS_SAYS.len()
    );
    let _ = tokio::time::timeout_at(until, async {
        tcp.write_all(answer.as_bytes()).await?;
        tcp.shutdown().await
    })
    .await;
    FirstBytes::AnsweredPlain
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn pair() -> (TcpStream, TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        (client, server)
    }

    #[tokio::test]
    async fn a_plain_request_is_answered_with_the_tls_url_advice() {
        let (mut client, mut server) = pair().await;
        client.write_all(b"GET /xiaozhi/v1/ HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nUpgrade: websocket\r\n\r\n").await.unwrap();
        assert_eq!(answer_plain_http(&mut server, Duration::from_secs(10)).await, FirstBytes::AnsweredPlain);
        let mut answer = String::new();
        client.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
        assert!(answer.contains("mcpdev-listener: tls\r\n") && answer.ends_with(TLS_SAYS), "{answer}");
    }

    #[tokio::test]
    async fn a_client_hello_is_left_unread_for_the_handshake() {
        let (mut client, mut server) = pair().await;
        client.write_all(&[0x16, 0x03, 0x01, 0x00, 0x05]).await.unwrap();
        assert_eq!(answer_plain_http(&mut server, Duration::from_secs(10)).await, FirstBytes::Tls);
        let mut buf = [0u8; 5];
        server.read_exact(&mut buf).await.unwrap();
        assert_eq!(buf, [0x16, 0x03, 0x01, 0x00, 0x05], "peeked, not read");
    }

    #[tokio::test]
    async fn silence_or_an_endless_head_ends_at_the_deadline() {
        let (_client, mut server) = pair().await;
        let deadline = Duration::from_millis(200);
        assert_eq!(answer_plain_http(&mut server, deadline).await, FirstBytes::Nothing);
        // A head that never ends: answered at the deadline all the same.
        let (mut client, mut server) = pair().await;
        client.write_all(b"GET / HTTP/1.1\r\nX: ").await.unwrap();
        let answered = tokio::spawn(async move { answer_plain_http(&mut server, deadline).await });
        assert_eq!(answered.await.unwrap(), FirstBytes::AnsweredPlain);
        let mut answer = String::new();
        client.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    }
}
