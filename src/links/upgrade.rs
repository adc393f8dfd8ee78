//! Upgrading an HTTP request on our axum listeners to a tokio-tungstenite WebSocket, so that a
//! device accepted by the hub and one accepted by `--listen` run the very same link code.

use axum::body::Body;
use axum::http::{HeaderValue, Request, Response, StatusCode, header};
use hyper_util::rt::TokioIo;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};

pub type UpgradedSocket = WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>;

/// Small buffers and a 1 MiB message limit: a hub holds thousands of devices, and each holds its
/// read buffer for as long as it is connected (a device's frames are small; a larger one is read
/// in more chunks, and the buffer grows for it).
pub fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size(1024)
        .write_buffer_size(0)
        .max_message_size(Some(1 << 20))
        .max_frame_size(Some(1 << 20))
}

/// Checks the WebSocket handshake headers. On success returns the 101 response and a future
/// that yields the socket once the client has it.
pub fn accept(req: &mut Request<Body>) -> Result<(Response<Body>, impl Future<Output = Option<UpgradedSocket>> + Send + 'static), Response<Body>> {
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
    let socket = async move {
        let upgraded = on_upgrade.await.ok()?;
        Some(WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, Some(ws_config())).await)
    };
    Ok((response, socket))
}

/// A plain-text response with a reason a person can act on.
pub fn plain(status: StatusCode, message: &str) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Body::from(format!("{message}\n")))
        .expect("static response")
}
