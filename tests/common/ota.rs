//! The stock firmware's OTA requests (reference §3), over a raw TCP socket.

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::HubProcess;

/// One HTTP/1.1 request to the hub's device listener; the status and body.
pub async fn http(hub: &HubProcess, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, Vec<u8>) {
    let addr = hub.device_url.trim_start_matches("ws://").split('/').next().unwrap().to_string();
    let (status, _, body) = exchange(&addr, method, path, headers, body, super::ws::DEADLINE).await;
    (status, body)
}

/// One HTTP/1.1 exchange with `addr` (`Connection: close`; `Host: addr` unless `headers` name
/// one), answered within `deadline`: status, headers (lower-case names), body.
pub async fn exchange(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str, deadline: std::time::Duration) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(deadline, s.read_to_end(&mut out)).await.expect("no answer in time").unwrap();
    let split = out.windows(4).position(|w| w == b"\r\n\r\n").expect("an HTTP response");
    let head = String::from_utf8_lossy(&out[..split]).to_string();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let headers = head.lines().skip(1).filter_map(|l| l.split_once(':')).map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string())).collect();
    (status, headers, out[split + 4..].to_vec())
}

/// A stock device's Client-Id (its uuid).
pub const CLIENT_ID: &str = "5f0c2a8e-1111-4222-8333-944455556666";

/// The stock check-in (§3.1): its headers and a system-info body; asserts a 200.
pub async fn check_in(hub: &HubProcess, host: &str, device: &str) -> Value {
    check_in_as(hub, host, device, CLIENT_ID).await
}

/// [`check_in`] with another Client-Id.
pub async fn check_in_as(hub: &HubProcess, host: &str, device: &str, client_id: &str) -> Value {
    let body = json!({"version":2,"language":"zh-CN","flash_size":16777216,"minimum_free_heap_size":"123456","mac_address":device,
        "uuid":client_id,"chip_model_name":"esp32s3","chip_info":{"model":9,"cores":2,"revision":2,"features":18},
        "application":{"name":"xiaozhi","version":"2.4.2","compile_time":"","idf_version":"v5.4","elf_sha256":""},
        "partition_table":[],"ota":{"label":"ota_0"},"display":{"monochrome":false,"width":240,"height":240},
        "board":{"type":"bread-compact-wifi","name":"bread-compact-wifi","ssid":"lab","rssi":-50,"channel":1,"ip":"10.0.0.9","mac":device}});
    let headers = [
        ("Host", host),
        ("Activation-Version", "1"),
        ("Device-Id", device),
        ("Client-Id", client_id),
        ("User-Agent", "bread-compact-wifi/2.4.2"),
        ("Accept-Language", "zh-CN"),
        ("Content-Type", "application/json"),
    ];
    let (status, body) = http(hub, "POST", "/xiaozhi/ota/", &headers, &body.to_string()).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    serde_json::from_slice(&body).unwrap()
}

