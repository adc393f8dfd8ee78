//! A bare WebSocket backend for tests: accepts a device, records its handshake headers, and
//! sends/receives text with a deadline (a deadline is a failure, never a synchronisation sleep).

use std::collections::HashMap;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};

pub const DEADLINE: Duration = Duration::from_secs(10);

pub struct Backend {
    listener: TcpListener,
}

impl Backend {
    pub async fn start() -> Self {
        Self { listener: TcpListener::bind("127.0.0.1:0").await.unwrap() }
    }

    pub fn url(&self) -> String {
        format!("ws://{}/xiaozhi/v1/", self.listener.local_addr().unwrap())
    }

    /// Accepts the next device connection.
    pub async fn accept(&self) -> Conn {
        let (stream, _) = tokio::time::timeout(DEADLINE, self.listener.accept()).await.expect("no device connected in time").unwrap();
        let mut headers = HashMap::new();
        let mut path = String::new();
        let ws = tokio_tungstenite::accept_hdr_async(stream, |req: &Request, resp: Response| {
            for (k, v) in req.headers() {
                headers.insert(k.as_str().to_ascii_lowercase(), v.to_str().unwrap_or_default().to_string());
            }
            path = req.uri().to_string();
            Ok(resp)
        })
        .await
        .unwrap();
        Conn { ws, headers, path }
    }
}

pub struct Conn {
    pub ws: WebSocketStream<TcpStream>,
    pub headers: HashMap<String, String>,
    pub path: String,
}

impl Conn {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    pub async fn send(&mut self, text: &str) {
        self.ws.send(Message::text(text)).await.unwrap();
    }

    /// The next text frame (other frames are skipped); panics after the deadline.
    pub async fn recv_text(&mut self) -> String {
        loop {
            let msg = tokio::time::timeout(DEADLINE, self.ws.next()).await.expect("no message in time");
            match msg.expect("connection closed").expect("websocket error") {
                Message::Text(t) => return t.to_string(),
                Message::Close(_) => panic!("connection closed while waiting for a message"),
                _ => {}
            }
        }
    }

    pub async fn recv_json(&mut self) -> serde_json::Value {
        let t = self.recv_text().await;
        serde_json::from_str(&t).unwrap_or_else(|e| panic!("not JSON ({e}): {t}"))
    }

    /// Waits for the peer to close the connection.
    pub async fn expect_closed(&mut self) {
        loop {
            match tokio::time::timeout(DEADLINE, self.ws.next()).await.expect("connection not closed in time") {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                Some(Ok(Message::Text(t))) => panic!("expected the connection to close, got {t}"),
                Some(Ok(_)) => {}
            }
        }
    }

    pub async fn close(mut self) {
        let _ = self.ws.close(None).await;
    }
}

/// A device's WebSocket to the hub, as [`device_upgrade`] opens it.
pub type DeviceWs = WebSocketStream<tokio_tungstenite::MaybeTlsStream<TcpStream>>;

/// Opens the hub's device WebSocket as `device` with `client_id` and, if given, `Bearer <token>`;
/// a refused upgrade is its status and body.
pub async fn device_upgrade(hub: &super::HubProcess, device: &str, client_id: &str, token: Option<&str>) -> Result<DeviceWs, (u16, String)> {
    use tokio_tungstenite::tungstenite;
    let mut req = tungstenite::client::IntoClientRequest::into_client_request(hub.device_url.as_str()).unwrap();
    req.headers_mut().insert("Device-Id", device.parse().unwrap());
    req.headers_mut().insert("Client-Id", client_id.parse().unwrap());
    if let Some(t) = token {
        req.headers_mut().insert("Authorization", format!("Bearer {t}").parse().unwrap());
    }
    match tokio::time::timeout(DEADLINE, tokio_tungstenite::connect_async(req)).await.expect("the hub answers the upgrade") {
        Ok((ws, _)) => Ok(ws),
        Err(tungstenite::Error::Http(resp)) => Err((resp.status().as_u16(), String::from_utf8_lossy(resp.body().as_deref().unwrap_or_default()).into_owned())),
        Err(e) => panic!("unexpected WebSocket error: {e}"),
    }
}

/// The refusal's status and body; a socket means the hub let the device in, which is the bug.
pub fn refused(r: Result<DeviceWs, (u16, String)>) -> (u16, String) {
    match r {
        Ok(_) => panic!("the hub let the device in"),
        Err(e) => e,
    }
}

/// Waits until the hub has closed `ws` (a close frame or the end of the stream).
pub async fn closed(ws: &mut DeviceWs) {
    let ended = tokio::time::timeout(DEADLINE, async {
        while let Some(Ok(msg)) = ws.next().await {
            if msg.is_close() {
                break;
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the hub did not close the device's session");
}
