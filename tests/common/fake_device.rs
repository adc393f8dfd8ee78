//! A scripted device for the hub tests: it connects with the xiaozhi headers, says hello,
//! answers onboarding with the tools it is given, and then does whatever the test makes it do
//! (never answer, answer late, disconnect, send garbage).

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::ws::DEADLINE;

pub struct FakeDevice {
    pub ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    pub session_id: String,
}

/// A tool declaration with one required integer 0..100 argument `n`.
pub fn tool(name: &str) -> Value {
    json!({"name": name, "description": format!("{name} (fake)"), "inputSchema": {"type":"object","properties":{"n":{"type":"integer","minimum":0,"maximum":100}},"required":["n"]}})
}

impl FakeDevice {
    /// Connects as `device_id`, completes hello and onboarding with `tools`.
    pub async fn connect(url: &str, device_id: &str, tools: Vec<Value>) -> Self {
        Self::connect_with_receive_buffer(url, device_id, tools, None).await
    }

    /// As [`Self::connect`], with the socket's receive buffer set (small: the hub's writes to a
    /// device that does not read fill it soon).
    pub async fn connect_with_receive_buffer(url: &str, device_id: &str, tools: Vec<Value>, receive_buffer: Option<u32>) -> Self {
        let mut req = url.into_client_request().unwrap();
        req.headers_mut().insert("Device-Id", device_id.parse().unwrap());
        req.headers_mut().insert("Client-Id", "fake-client".parse().unwrap());
        req.headers_mut().insert("Protocol-Version", "1".parse().unwrap());
        let addr = tokio::net::lookup_host(req.uri().authority().unwrap().as_str()).await.unwrap().next().unwrap();
        let socket = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4() } else { tokio::net::TcpSocket::new_v6() }.unwrap();
        if let Some(size) = receive_buffer {
            socket.set_recv_buffer_size(size).unwrap();
        }
        let stream = socket.connect(addr).await.expect("fake device connects");
        let (ws, _) = tokio_tungstenite::client_async(req, MaybeTlsStream::Plain(stream)).await.expect("fake device upgrades");
        let mut dev = Self { ws, session_id: String::new() };
        dev.send(json!({"type":"hello","version":1,"features":{"mcp":true},"transport":"websocket","audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}})).await;
        let hello = dev.recv().await;
        assert_eq!(hello["type"], "hello");
        assert_eq!(hello["transport"], "websocket");
        dev.session_id = hello["session_id"].as_str().unwrap().to_string();
        let init = dev.recv_request("initialize").await;
        dev.reply(&init["id"], json!({"protocolVersion":"2024-11-05","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}})).await;
        let list = dev.recv_request("tools/list").await;
        dev.reply(&list["id"], json!({"tools": tools})).await;
        dev
    }

    pub async fn send(&mut self, v: Value) {
        self.ws.send(Message::text(v.to_string())).await.unwrap();
    }

    pub async fn send_raw(&mut self, m: Message) {
        self.ws.send(m).await.unwrap();
    }

    /// The next JSON text message from the hub.
    pub async fn recv(&mut self) -> Value {
        self.recv_within(DEADLINE).await
    }

    /// The next JSON text message from the hub, which may be quiet for up to `within` (a device
    /// that waits for what a slow client does next).
    pub async fn recv_within(&mut self, within: std::time::Duration) -> Value {
        loop {
            let m = tokio::time::timeout(within, self.ws.next()).await.expect("hub sent nothing in time");
            match m.expect("hub closed").expect("websocket error") {
                Message::Text(t) => return serde_json::from_str(&t).unwrap(),
                Message::Close(_) => panic!("hub closed the connection"),
                _ => {}
            }
        }
    }

    /// The next MCP request with this method (notifications in between are skipped); its payload.
    pub async fn recv_request(&mut self, method: &str) -> Value {
        loop {
            let m = self.recv().await;
            if m["type"] == "mcp" && m["payload"]["method"] == method && m["payload"].get("id").is_some() {
                return m["payload"].clone();
            }
        }
    }

    pub async fn reply(&mut self, id: &Value, result: Value) {
        let sid = self.session_id.clone();
        self.send(json!({"session_id": sid, "type":"mcp","payload":{"jsonrpc":"2.0","id":id,"result":result}})).await;
    }

    /// Waits until the hub closes this connection.
    pub async fn expect_closed(&mut self) {
        loop {
            match tokio::time::timeout(DEADLINE, self.ws.next()).await.expect("not closed in time") {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                Some(Ok(_)) => {}
            }
        }
    }
}
