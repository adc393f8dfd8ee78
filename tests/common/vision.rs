//! The vision endpoint as devices and pages reach it: the URL and token a device's `initialize`
//! carries, and multipart uploads built part by part (raw HTTP, so a test controls every header).

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::HubProcess;
use super::fake_device::FakeDevice;

/// One part of a multipart body: its field name, filename, content type and bytes.
pub struct Part<'a> {
    pub name: &'a str,
    pub filename: Option<&'a str>,
    pub content_type: Option<&'a str>,
    pub body: &'a [u8],
}

/// A text field.
pub fn text<'a>(name: &'a str, body: &'a str) -> Part<'a> {
    Part { name, filename: None, content_type: None, body: body.as_bytes() }
}

/// A file part named `name`, as a device or a browser sends a photo.
pub fn photo<'a>(name: &'a str, body: &'a [u8]) -> Part<'a> {
    Part { name, filename: Some("camera.jpg"), content_type: Some("image/jpeg"), body }
}

/// Connects `device_id` over WebSocket and returns the vision URL and token its `initialize` carries.
pub async fn vision_of(hub: &HubProcess, device_id: &str) -> (FakeDevice, String, String) {
    let mut req = tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(hub.device_url.as_str()).unwrap();
    req.headers_mut().insert("Device-Id", device_id.parse().unwrap());
    let (ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    let mut dev = FakeDevice { ws, session_id: String::new() };
    dev.send(json!({"type":"hello","version":1,"features":{"mcp":true},"transport":"websocket"})).await;
    assert_eq!(dev.recv().await["type"], "hello");
    let init = dev.recv_request("initialize").await;
    let vision = &init["params"]["capabilities"]["vision"];
    (dev, vision["url"].as_str().unwrap().to_string(), vision["token"].as_str().unwrap().to_string())
}

/// POSTs `parts` as `multipart/form-data` for `device_id` with `token`; the status and the JSON body.
pub async fn post_parts(url: &str, device_id: &str, token: &str, parts: &[Part<'_>]) -> (u16, Value) {
    let rest = url.strip_prefix("http://").unwrap();
    let (authority, path) = rest.split_once('/').unwrap();
    let boundary = "----mcpdevvisionboundary";
    let mut body = Vec::new();
    for p in parts {
        body.extend_from_slice(format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{}\"", p.name).as_bytes());
        if let Some(f) = p.filename {
            body.extend_from_slice(format!("; filename=\"{f}\"").as_bytes());
        }
        body.extend_from_slice(b"\r\n");
        if let Some(t) = p.content_type {
            body.extend_from_slice(format!("Content-Type: {t}\r\n").as_bytes());
        }
        body.extend_from_slice(b"\r\n");
        body.extend_from_slice(p.body);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    let head = format!(
        "POST /{path} HTTP/1.1\r\nHost: {authority}\r\nDevice-Id: {device_id}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut s = tokio::net::TcpStream::connect(authority).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    // The hub may answer (413) and close before reading all of a body that is too large.
    let _ = s.write_all(&body).await;
    let mut response = Vec::new();
    let _ = s.read_to_end(&mut response).await;
    let response = String::from_utf8_lossy(&response);
    let status: u16 = response.split_whitespace().nth(1).unwrap_or_else(|| panic!("no HTTP answer: {response:?}")).parse().unwrap();
    let json_body = response.split("\r\n\r\n").nth(1).unwrap_or_default();
    (status, serde_json::from_str(json_body).unwrap_or(Value::Null))
}
