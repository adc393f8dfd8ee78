//! Upgrading an HTTP request to a WebSocket. The socket is handed on raw ([`DeviceSocket`]): a
//! device's link and the control API read and write the frames themselves
//! ([`super::ws_socket`]). A device is the same whether the hub accepted it or a command with
//! `--listen` did ([`accept_one`]), so both run the very same link code.

use axum::body::Body;
use axum::http::{HeaderValue, Request, Response, StatusCode, header};
use hyper_util::rt::TokioIo;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

/// A connection after a WebSocket handshake, before any frame.
pub type DeviceSocket = TokioIo<hyper::upgrade::Upgraded>;

/// Longest a `--listen` connection may take to send its handshake.
const HANDSHAKE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

/// Small buffers and a 1 MiB message limit, for the server WebSockets read with tungstenite
/// (`check`'s device): each holds its read buffer for as long as it is connected, and the buffer
/// grows to the largest frame read.
pub fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size(1024)
        .write_buffer_size(0)
        .max_message_size(Some(1 << 20))
        .max_frame_size(Some(1 << 20))
}

/// Checks the WebSocket handshake headers. On success returns the 101 response and a future
/// that yields the connection once the client has the response.
pub fn accept_raw(req: &mut Request<Body>) -> Result<(Response<Body>, impl Future<Output = Option<DeviceSocket>> + Send + 'static + use<>), Response<Body>> {
    let h = req.headers();
    let has_token = |name: header::HeaderName, token: &str| {
        h.get_all(name).iter().any(|v| v.to_str().is_ok_and(|s| s.split(',').any(|p| p.trim().eq_ignore_ascii_case(token))))
    };
    if !has_token(header::CONNECTION, "upgrade") || !has_token(header::UPGRADE, "websocket") {
        return Err(plain(StatusCode::UPGRADE_REQUIRED, "this endpoint speaks WebSocket: send Connection: Upgrade and Upgrade: websocket"));
    }
    let Some(key) = h.get(header::SEC_WEBSOCKET_KEY) else {
        return Err(plain(StatusCode::BAD_REQUEST, "missing Sec-WebSocket-Key"));
    };
    let accept = derive_accept_key(key.as_bytes());
    let on_upgrade = hyper::upgrade::on(req);
    let response = Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(header::CONNECTION, "upgrade")
        .header(header::UPGRADE, "websocket")
        .header(header::SEC_WEBSOCKET_ACCEPT, HeaderValue::from_str(&accept).expect("base64 is a valid header value"))
        .body(Body::empty())
        .expect("static response");
    Ok((response, async move { Some(TokioIo::new(on_upgrade.await.ok()?)) }))
}

/// Serves one TCP connection's WebSocket handshake (HTTP/1.1, within [`HANDSHAKE_DEADLINE`]).
/// `check` sees the request first: what it returns comes back with the socket, and a refusal
/// is the response the client gets (then the error says why).
pub async fn accept_one<T, F>(tcp: tokio::net::TcpStream, check: F) -> anyhow::Result<(DeviceSocket, T)>
where
    T: Send + 'static,
    F: FnOnce(&Request<hyper::body::Incoming>) -> Result<T, String> + Send + 'static,
{
    let (tx, rx) = tokio::sync::oneshot::channel();
    let slot = std::sync::Mutex::new(Some((check, tx)));
    let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
        let taken = slot.lock().ok().and_then(|mut s| s.take());
        let mut response = match taken {
            None => plain(StatusCode::SERVICE_UNAVAILABLE, "this listener takes one device"),
            Some((check, tx)) => match check(&req) {
                Err(why) => {
                    let _ = tx.send(Err(why.clone()));
                    plain(StatusCode::BAD_REQUEST, &why)
                }
                Ok(value) => {
                    let mut req = req.map(Body::new);
                    match accept_raw(&mut req) {
                        Ok((response, socket)) => {
                            let _ = tx.send(Ok((socket, value)));
                            response
                        }
                        Err(refusal) => {
                            let _ = tx.send(Err("not a WebSocket handshake".to_string()));
                            refusal
                        }
                    }
                }
            },
        };
        if response.status() != StatusCode::SWITCHING_PROTOCOLS {
            response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        std::future::ready(Ok::<_, std::convert::Infallible>(response))
    });
    // One request: the connection ends with its upgrade, or with a refusal (`Connection: close`).
    let connection = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tcp), service).with_upgrades();
    let accepted = async move {
        let (socket, value) = rx.await.map_err(|_| anyhow::anyhow!("the connection ended before its handshake"))?.map_err(anyhow::Error::msg)?;
        let socket = socket.await.ok_or_else(|| anyhow::anyhow!("the connection ended during its upgrade"))?;
        Ok((socket, value))
    };
    let handshake = async move { tokio::join!(connection, accepted).1 };
    tokio::time::timeout(HANDSHAKE_DEADLINE, handshake).await.map_err(|_| anyhow::anyhow!("no WebSocket handshake within {} s", HANDSHAKE_DEADLINE.as_secs()))?
}

/// A plain-text response with a reason a person can act on.
pub fn plain(status: StatusCode, message: &str) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Body::from(format!("{message}\n")))
        .expect("static response")
}
