//! The OTA check-in and the `/activate` polls on the host, against a raw HTTP server that records
//! each request: the device key goes out as `Mcpdev-Device-Key` with both when the device has one,
//! and no such header (not even an empty one) when it has none, as a record from an older host.

use std::time::Duration as StdDuration;

use edge_nal::TcpConnect;
use hub_link::{Identity, Timing, ota};
use provisioning::HubUrl;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const KEY: &str = "0123456789abcdef-device-key";

fn identity(device_key: &str) -> Identity {
    Identity {
        device_id: "aa:bb:cc:dd:ee:07".into(),
        client_id: "3f1c0a52-0f5e-4d4e-9b3a-000000000007".into(),
        token: String::new(),
        device_key: device_key.into(),
    }
}

/// One request: its request line and headers (lower-case names).
struct Seen {
    line: String,
    headers: Vec<(String, String)>,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// Serves `answers` (status, body) to one connection each, in order, and returns what it saw.
async fn serve(listener: TcpListener, answers: Vec<(u16, &'static str)>) -> Vec<Seen> {
    let mut seen = Vec::new();
    for (status, body) in answers {
        let (mut tcp, _) = tokio::time::timeout(StdDuration::from_secs(5), listener.accept()).await.expect("a request in time").unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 1024];
        // Read the head, then the body its Content-Length announces.
        let head_end = loop {
            let n = tokio::time::timeout(StdDuration::from_secs(5), tcp.read(&mut chunk)).await.expect("request in time").unwrap();
            assert!(n > 0, "the device closed before its request ended");
            buf.extend_from_slice(&chunk[..n]);
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
        };
        let head = String::from_utf8(buf[..head_end].to_vec()).unwrap();
        let mut lines = head.split("\r\n");
        let line = lines.next().unwrap().to_string();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let length: usize = headers.iter().find(|(k, _)| k == "content-length").map(|(_, v)| v.parse().unwrap()).unwrap_or(0);
        while buf.len() < head_end + length {
            let n = tcp.read(&mut chunk).await.unwrap();
            assert!(n > 0);
            buf.extend_from_slice(&chunk[..n]);
        }
        let reason = if status == 200 { "OK" } else { "Accepted" };
        let answer = format!("HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
        tcp.write_all(answer.as_bytes()).await.unwrap();
        tcp.shutdown().await.ok();
        seen.push(Seen { line, headers });
    }
    seen
}

/// A check-in and one `/activate` poll by `id`, on the device's own thread (the firmware's code,
/// std sockets); returns the directions and the poll's status.
fn check_in_and_poll(port: u16, id: Identity) -> std::thread::JoinHandle<(ota::Directions, u16)> {
    std::thread::spawn(move || {
        futures_lite::future::block_on(async move {
            let url_text = format!("http://127.0.0.1:{port}/xiaozhi/ota/");
            let url = HubUrl::parse(&url_text).unwrap();
            let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
            let stack = edge_nal_std::Stack::new();
            let timing = Timing::default();
            let mut http = vec![0u8; 2048];
            let socket = stack.connect(addr).await.unwrap();
            let answer = ota::check_in(socket, &url, &id, "{}", "test/0", &timing, &mut http).await.map_err(|e| e.to_string()).unwrap();
            let socket = stack.connect(addr).await.unwrap();
            let status = ota::activate(socket, &url, &id, "test/0", &timing, &mut http).await.map_err(|e| e.to_string()).unwrap();
            (answer.directions, status)
        })
    })
}

const ACTIVATION: &str = r#"{"activation":{"code":"123456","challenge":"c","message":"approve me"}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_device_key_goes_with_the_check_in_and_every_activation_poll() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let dev = check_in_and_poll(port, identity(KEY));
    let seen = serve(listener, vec![(200, ACTIVATION), (202, "{}")]).await;
    let (directions, status) = dev.join().unwrap();
    assert!(matches!(directions, ota::Directions::Activate(ref a) if a.code == "123456"), "{directions:?}");
    assert_eq!(status, 202);
    assert_eq!(seen[0].line, "POST /xiaozhi/ota/ HTTP/1.1");
    assert_eq!(seen[1].line, "POST /xiaozhi/ota/activate HTTP/1.1");
    for s in &seen {
        assert_eq!(s.header("mcpdev-device-key"), Some(KEY), "{}", s.line);
        assert_eq!(s.header("device-id"), Some("aa:bb:cc:dd:ee:07"));
        assert_eq!(s.header("client-id"), Some("3f1c0a52-0f5e-4d4e-9b3a-000000000007"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_without_a_key_sends_no_key_header() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let dev = check_in_and_poll(port, identity(""));
    let seen = serve(listener, vec![(200, r#"{"websocket":{"url":"ws://127.0.0.1:1/","token":"t"}}"#), (200, "{}")]).await;
    let (directions, status) = dev.join().unwrap();
    assert_eq!(directions, ota::Directions::WebSocket { url: "ws://127.0.0.1:1/".into(), token: "t".into() });
    assert_eq!(status, 200);
    for s in &seen {
        assert_eq!(s.header("mcpdev-device-key"), None, "{}: {:?}", s.line, s.headers);
        assert_eq!(s.header("device-id"), Some("aa:bb:cc:dd:ee:07"));
    }
}
