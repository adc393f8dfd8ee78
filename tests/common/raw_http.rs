//! HTTP/1.1 to the hub's host listener over a raw socket bound to a chosen loopback address, so
//! a test can be several peers on one machine (127.0.0.2, 127.0.0.3 …) and see exactly what the
//! hub answered.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use super::ws::DEADLINE;

/// `ip:port` of a `http://…` or `ws://…` URL.
pub fn addr_of(url: &str) -> SocketAddr {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.split('/').next().unwrap().parse().unwrap()
}

/// A TCP connection to `to` from the loopback address `from` (another "peer" on this machine).
pub async fn connect_from(from: &str, to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    tokio::time::timeout(DEADLINE, socket.connect(to)).await.expect("connect in time").unwrap()
}

/// What the hub answered.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    /// Header lines, names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC message in the body (plain JSON, or the first non-empty `data:` line of an
    /// SSE body).
    pub fn json(&self) -> serde_json::Value {
        let text = self.body.lines().filter_map(|l| l.strip_prefix("data:")).find(|d| !d.trim().is_empty()).unwrap_or(&self.body);
        serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {self:?}"))
    }
}

/// Writes the head (`Host` added) and body of one request on `tcp`; the head lines are `extra`.
pub async fn send(tcp: &mut TcpStream, method: &str, path: &str, extra: &[(&str, &str)], body: &str) {
    let to = tcp.peer_addr().unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {to}\r\nContent-Length: {}\r\n", body.len());
    for (k, v) in extra {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    tcp.write_all(req.as_bytes()).await.unwrap();
}

/// Reads the status line and headers of an answer (the body is left on the socket).
pub async fn read_head(tcp: &mut TcpStream) -> (u16, Vec<(String, String)>) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !head.ends_with(b"\r\n\r\n") {
        match tokio::time::timeout_at(deadline, tcp.read(&mut byte)).await.expect("an answer in time") {
            Ok(1) => head.push(byte[0]),
            other => panic!("the connection ended in the head ({other:?}): {:?}", String::from_utf8_lossy(&head)),
        }
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let mut lines = text.split("\r\n");
    let status = lines.next().and_then(|l| l.split_whitespace().nth(1)).and_then(|s| s.parse().ok()).expect("a status line");
    let headers = lines.filter_map(|l| l.split_once(':')).map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string())).collect();
    (status, headers)
}

/// One request from `from` with `Connection: close`; the whole answer.
pub async fn request(from: &str, to: SocketAddr, method: &str, path: &str, extra: &[(&str, &str)], body: &str) -> Answer {
    let mut tcp = connect_from(from, to).await;
    let mut headers = extra.to_vec();
    headers.push(("Connection", "close"));
    send(&mut tcp, method, path, &headers, body).await;
    let (status, headers) = read_head(&mut tcp).await;
    let mut rest = Vec::new();
    tokio::time::timeout(DEADLINE, tcp.read_to_end(&mut rest)).await.expect("the body in time").unwrap();
    let chunked = headers.iter().any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked { dechunk(&rest) } else { rest };
    Answer { status, headers, body: String::from_utf8_lossy(&body).into_owned() }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = data.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(String::from_utf8_lossy(&data[..eol]).trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        let start = eol + 2;
        out.extend_from_slice(&data[start..(start + size).min(data.len())]);
        data = &data[(start + size + 2).min(data.len())..];
    }
    out
}

/// The headers of an MCP POST (Streamable HTTP).
pub const MCP_HEADERS: [(&str, &str); 2] = [("Accept", "application/json, text/event-stream"), ("Content-Type", "application/json")];

/// An `initialize` request with this id.
pub fn initialize(id: u32) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"t","version":"1"}}}}}}"#)
}
