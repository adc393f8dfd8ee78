//! One HTTP/1.1 request and the head of its response, over any connected stream (plain TCP or
//! TLS), with `edge-http`'s header parser. The WebSocket upgrade and the OTA check-in use it.
//!
//! Rules: the response head must fit `buf` (else an error, never a partial parse); the head is
//! read exactly, so bytes after it (the first WebSocket frame) stay in the stream.

use edge_http::io::{Body, Error};
use edge_http::{ConnectionType, ResponseHeaders};
use embedded_io_async::{Read, Write};

/// How many response headers are parsed (the rest is an error).
pub const MAX_HEADERS: usize = 16;

/// Sends `method path` with `headers` and `body` (a `Content-Length` is added when `body` is not
/// empty), then reads the response head into `buf`. Returns the head, and the part of `buf` after
/// it with how many body bytes are already in it.
pub async fn request<'b, S: Read + Write>(
    stream: &mut S,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    buf: &'b mut [u8],
) -> Result<(ResponseHeaders<'b, MAX_HEADERS>, &'b mut [u8], usize), Error<S::Error>> {
    let io = |e| Error::Io(e);
    for part in [method, " ", path, " HTTP/1.1\r\n"] {
        stream.write_all(part.as_bytes()).await.map_err(io)?;
    }
    for (name, value) in headers {
        for part in [*name, ": ", *value, "\r\n"] {
            stream.write_all(part.as_bytes()).await.map_err(io)?;
        }
    }
    if !body.is_empty() {
        let len = alloc::string::ToString::to_string(&body.len());
        for part in ["Content-Length: ", &len, "\r\n"] {
            stream.write_all(part.as_bytes()).await.map_err(io)?;
        }
    }
    stream.write_all(b"\r\n").await.map_err(io)?;
    stream.write_all(body).await.map_err(io)?;
    stream.flush().await.map_err(io)?;
    let mut head = ResponseHeaders::new();
    let (rest, read) = head.receive(buf, &mut *stream, true).await?;
    Ok((head, rest, read))
}

/// Reads a response body (by its `Content-Length`, chunks, or until the server closes) into
/// `out`, at most `max` bytes; what goes beyond is left unread.
pub async fn read_body<S: Read>(
    head: &ResponseHeaders<'_, MAX_HEADERS>,
    rest: &mut [u8],
    read: usize,
    stream: &mut S,
    out: &mut alloc::vec::Vec<u8>,
    max: usize,
) -> Result<(), Error<S::Error>> {
    let (_, body_type) = head.resolve::<S::Error>(ConnectionType::Close)?;
    let mut body = Body::new(body_type, rest, read, stream);
    let mut chunk = [0u8; 256];
    loop {
        let n = body.read(&mut chunk).await?;
        if n == 0 || out.len() + n > max {
            return Ok(());
        }
        out.extend_from_slice(&chunk[..n]);
    }
}
