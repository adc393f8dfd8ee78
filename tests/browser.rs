//! A browser is a device: Debian's Chromium (headless, driven by playwright-core from npm, no
//! browser download) loads a page from another origin than the hub (`tests/browser/device.html`,
//! served by a small HTTP server in this test) that does what xiaozhi-esp32-server's test page
//! does: a preflighted `fetch` POST to the hub's OTA URL, a WebSocket with query-string identity
//! and a minimal hello, answering MCP, then a photo upload to the vision URL `initialize` gave.
//! `mcpdev tools list` and `mcpdev call` reach it, and the upload lands in `--vision-dir`.
//!
//! Without CORS on the hub's OTA and vision routes the page stops at the OTA step (the browser
//! refuses the preflight's 405), as the xiaozhi page does with "OTA连接失败".
//!
//! `.ci/test` installs Chromium (Debian package) and playwright-core (pinned), and sets
//! `MCPDEV_TEST_CHROMIUM`, `MCPDEV_TEST_NODE_BROWSER` (the playwright-core package directory) and
//! `MCPDEV_TEST_NODE22`; a missing one is a failure, not a skip.

mod common;


use common::browser::BrowserDriver;
use common::{HubProcess, mcpdev};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const DEVICE: &str = "02:b0:00:00:00:01";



/// The page's origin: a server of its own on another port than the hub's.
async fn serve_page() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            tokio::spawn(serve_file(sock));
        }
    });
    format!("http://{addr}")
}

async fn serve_file(mut sock: TcpStream) {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
        match sock.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let line = String::from_utf8_lossy(&head).lines().next().unwrap_or_default().to_string();
    let path = line.split(' ').nth(1).unwrap_or("/").split('?').next().unwrap_or("/").to_string();
    let (status, kind, body) = match path.as_str() {
        "/device.html" => ("200 OK", "text/html; charset=utf-8", include_str!("browser/device.html")),
        "/device.js" => ("200 OK", "text/javascript; charset=utf-8", include_str!("browser/device.js")),
        _ => ("404 Not Found", "text/plain", "not found"),
    };
    let resp = format!("HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
    let _ = sock.write_all(resp.as_bytes()).await;
}

/// The driver (tests/browser/drive.cjs) loading the device page; the page reports each step.
fn open_browser(page_url: &str, profile: &std::path::Path) -> BrowserDriver {
    BrowserDriver::open("tests/browser/drive.cjs", profile, &[page_url], "MCPDEV ", |got| got.ends_with("-failed") || got == "ws-error")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_page_from_another_origin_is_a_device_of_the_hub() {
    let vision_dir = tempfile::tempdir().unwrap();
    let profile = tempfile::tempdir().unwrap();
    let hub = HubProcess::start(&["--vision-dir", vision_dir.path().to_str().unwrap()], &[]).await;
    let ota = hub.info["ota"].as_str().unwrap().to_string();
    let page_origin = serve_page().await;
    assert!(!ota.starts_with(&page_origin), "the page must come from another origin than the hub ({ota})");
    let page = format!("{page_origin}/device.html?ota={}&device={DEVICE}", urlencode(&ota));
    let mut browser = open_browser(&page, profile.path());

    assert_eq!(browser.step("ota").await["status"], 200);
    browser.step("hello").await;
    assert_eq!(browser.step("initialize").await["vision"], true);
    browser.step("tools-list").await;
    let vision = browser.step("vision").await;
    assert_eq!((vision["status"].clone(), vision["success"].clone()), (json!(200), json!(true)), "vision upload: {vision}");

    let list = mcpdev(&hub, &["tools", "list", "-d", DEVICE, "--wait", "10s", "--json"]).await;
    assert_eq!(list.code, 0, "{list:?}");
    let names: Vec<String> = list.json()["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect();
    assert!(names.contains(&"self.browser.set_color".to_string()), "{names:?}");

    let call = mcpdev(&hub, &["call", "self.browser.set_color", "r=12", "g=34", "b=56", "-d", DEVICE, "--json"]).await;
    assert_eq!(call.code, 0, "{call:?}");
    assert_eq!(browser.step("set-color").await["args"], json!({"r": 12, "g": 34, "b": 56}));
    let back = mcpdev(&hub, &["call", "self.browser.get_color", "-d", DEVICE, "--json"]).await;
    assert_eq!(back.code, 0, "{back:?}");
    let text = back.json()["content"][0]["text"].as_str().unwrap_or_default().to_string();
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap_or_default(), json!({"r": 12, "g": 34, "b": 56}), "{back:?}");
    // The schema the page gave is enforced before anything is sent.
    let bad = mcpdev(&hub, &["call", "self.browser.set_color", "r=300", "g=0", "b=0", "-d", DEVICE]).await;
    assert_ne!(bad.code, 0, "{bad:?}");

    let saved: Vec<_> = std::fs::read_dir(vision_dir.path()).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(saved.len(), 1, "{saved:?}");
    let photo = std::fs::read(&saved[0]).unwrap();
    assert!(photo.starts_with(&[0xff, 0xd8, 0xff]) && photo.ends_with(&[0xff, 0xd9]) && photo.len() == 125, "not the page's JPEG: {} bytes", photo.len());
    browser.close().await;
}

fn urlencode(s: &str) -> String {
    s.bytes().map(|b| if b.is_ascii_alphanumeric() || b"-._~".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") }).collect()
}

/// One raw HTTP/1.1 request; the status and the lower-cased headers of the answer.
async fn raw_http(addr: &str, method: &str, path: &str, headers: &[(&str, &str)]) -> (u16, Vec<(String, String)>) {
    let mut sock = TcpStream::connect(addr).await.unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("Content-Length: 0\r\n\r\n");
    sock.write_all(req.as_bytes()).await.unwrap();
    let mut resp = Vec::new();
    tokio::time::timeout(common::ws::DEADLINE, sock.read_to_end(&mut resp)).await.expect("no answer").unwrap();
    let text = String::from_utf8_lossy(&resp);
    let head = text.split("\r\n\r\n").next().unwrap();
    let mut lines = head.lines();
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers = lines.filter_map(|l| l.split_once(':')).map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string())).collect();
    (status, headers)
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// The same contract without a browser, route by route on the real hub: every device-facing HTTP
/// route a page calls answers a preflight; the WebSocket path and the host listener do not.
#[tokio::test]
async fn device_routes_answer_preflights_and_nothing_else_changes() {
    let hub = HubProcess::start(&[], &[]).await;
    let devices = hub.device_url.trim_start_matches("ws://").split('/').next().unwrap().to_string();
    let host = hub.host_url.trim_start_matches("http://").to_string();
    let preflight = [
        ("Origin", "http://page.example:8006"),
        ("Access-Control-Request-Method", "POST"),
        ("Access-Control-Request-Headers", "device-id,client-id,content-type,authorization"),
    ];
    for path in ["/xiaozhi/ota/", "/xiaozhi/ota", "/xiaozhi/ota/activate", "/mcp/vision/explain"] {
        let (status, h) = raw_http(&devices, "OPTIONS", path, &preflight).await;
        assert!((200..300).contains(&status), "{path}: {status} {h:?}");
        assert_eq!(header(&h, "access-control-allow-origin"), Some("*"), "{path}: {h:?}");
        let allowed = header(&h, "access-control-allow-headers").unwrap_or_default().to_ascii_lowercase();
        for need in ["device-id", "client-id", "content-type", "authorization"] {
            assert!(allowed.contains(need), "{path}: {need} not in {allowed:?}");
        }
        assert!(header(&h, "access-control-allow-methods").unwrap_or_default().contains("POST"), "{path}: {h:?}");
        assert!(header(&h, "access-control-max-age").is_some(), "{path}: {h:?}");
    }
    // The actual request's answer (here an error: no body) is readable by the page.
    let (status, h) = raw_http(&devices, "POST", "/xiaozhi/ota/", &[("Origin", "http://page.example:8006"), ("Device-Id", DEVICE)]).await;
    assert_eq!((status, header(&h, "access-control-allow-origin")), (400, Some("*")), "{h:?}");
    let (_, h) = raw_http(&devices, "POST", "/mcp/vision/explain", &[("Origin", "http://page.example:8006")]).await;
    assert_eq!(header(&h, "access-control-allow-origin"), Some("*"), "{h:?}");
    // No CORS on the WebSocket path (browsers do not preflight it).
    let (_, h) = raw_http(&devices, "OPTIONS", "/xiaozhi/v1/", &preflight).await;
    assert_eq!(header(&h, "access-control-allow-origin"), None, "{h:?}");
    // The host listener's Origin policy is unchanged: a foreign page is refused.
    let (status, h) = raw_http(&host, "OPTIONS", "/mcp", &preflight).await;
    assert_eq!((status, header(&h, "access-control-allow-origin")), (403, None), "{h:?}");
}
