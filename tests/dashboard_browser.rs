//! The dashboard in a real browser: Debian's Chromium, driven by playwright-core
//! (`tests/browser/dashboard.cjs`), against `mcpdev serve` over its real listeners.
//!
//! - The user's path: log in through the link `serve` printed (the cookie is HttpOnly and
//!   SameSite=Strict, the token leaves the address bar); the two demo devices appear; volume 50
//!   through the generated form changes the device (read back through the CLI); 500 shows the
//!   CLI's own range error inline and nothing reaches the device; a call made by the CLI shows up
//!   in the traffic pane within a second; a device that checks in is pending on the admission page
//!   within a second, and approving it there brings it in. The device page's screenshot is saved
//!   under target/ (`target/tmp/dashboard.png`); the committed docs/dashboard.png is never
//!   written by a test (`.ci/refresh-screenshot` copies it there).
//! - The attacker's path: a device whose tool names, descriptions and results carry HTML, script
//!   and terminal escapes is shown as inert text: no dialog, no console error, no script run, no
//!   image loaded from its markup.
//!
//! `.ci/test` installs Chromium, Node 22 and playwright-core (as for tests/browser.rs); a missing
//! one is a failure, not a skip.

mod common;

use std::path::PathBuf;

use common::fake_device::FakeDevice;
use common::browser::BrowserDriver;
use common::{HubProcess, mcpdev, repo_path, spawn_mcpdev};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

const DEV: &str = "02:00:00:00:00:01";

/// The driver (tests/browser/dashboard.cjs) running `scenario` from the log-in link on.
fn open_dashboard(login_url: &str, scenario: &str, arg: &str, profile: &std::path::Path) -> BrowserDriver {
    BrowserDriver::open("tests/browser/dashboard.cjs", profile, &[login_url, scenario, arg], "STEP ", |got| got == "failed")
}

async fn volume(hub: &HubProcess) -> u64 {
    let status = mcpdev(hub, &["call", "self.get_device_status", "-d", DEV, "--json"]).await;
    assert_eq!(status.code, 0, "{status:?}");
    let text: Value = serde_json::from_str(status.json()["content"][0]["text"].as_str().unwrap()).unwrap();
    text["audio_speaker"]["volume"].as_u64().unwrap()
}

/// How many calls the hub counted, by outcome `ok`, in `/metrics`.
async fn calls_counted(hub: &HubProcess) -> f64 {
    let token = std::fs::read_to_string(PathBuf::from(&hub.runtime_dir).join(format!("control-{}.token", hub.host_url.rsplit(':').next().unwrap()))).unwrap();
    let addr = hub.host_url.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n", token.trim());
    s.write_all(req.as_bytes()).await.unwrap();
    let mut body = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut s, &mut body).await.unwrap();
    body.lines().find(|l| l.starts_with("mcpdev_calls_total{outcome=\"ok\"}")).and_then(|l| l.rsplit(' ').next()).and_then(|v| v.parse().ok()).expect("the call counter")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_dashboard_end_to_end_in_chromium() {
    let profile = tempfile::tempdir().unwrap();
    let hub = HubProcess::start_admitting(&["--demo", "2"], &[]).await;
    assert_eq!(mcpdev(&hub, &["tools", "list", "-d", DEV, "--wait", "20s", "--json"]).await.code, 0);
    let link = hub.info["dashboard"].as_str().expect("serve prints a log-in link").to_string();
    let screenshot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dashboard.png");
    let committed = std::fs::read(repo_path("docs/dashboard.png")).ok();
    let mut b = open_dashboard(&link, "main", screenshot.to_str().unwrap(), profile.path());

    let login = b.step("login").await;
    let url = login["url"].as_str().unwrap();
    assert!(!url.contains("token"), "the token left the address bar: {url}");
    let cookie = login["cookies"].as_array().unwrap().iter().find(|c| c["name"].as_str().unwrap().starts_with("mcpdev_session_")).cloned().expect("a session cookie");
    assert_eq!((cookie["httpOnly"].clone(), cookie["sameSite"].clone()), (json!(true), json!("Strict")), "{cookie}");
    assert_eq!(login["script_cookie"], "", "the page's script cannot read the session cookie");

    let ids = b.step("devices").await["ids"].clone();
    assert_eq!(ids, json!(["02:00:00:00:00:01", "02:00:00:00:00:02"]));

    let page = b.step("device-page").await;
    assert_eq!((page["type"].as_str(), page["min"].as_str(), page["max"].as_str()), (Some("number"), Some("0"), Some("100")), "an integer range with its limits: {page}");
    // A list of every tool (user-only ones marked, as the CLI hides them) and one form at a time.
    let listed = page["listed"].as_array().unwrap();
    assert!(listed.len() >= 6, "{page}");
    let marked: Vec<&str> = listed.iter().filter(|t| t["userOnly"] == true).map(|t| t["name"].as_str().unwrap()).collect();
    assert!(marked.contains(&"self.reboot") && !marked.contains(&"self.audio_speaker.set_volume"), "user-only tools are marked: {page}");
    assert_eq!((page["formsAtFirst"].as_u64(), page["forms"].as_u64()), (Some(1), Some(1)), "one form at a time: {page}");
    assert_eq!(page["found"], json!(["self.audio_speaker.set_volume"]), "the search narrows the list: {page}");
    assert_eq!(page["placeholder"]["fits"], true, "the search placeholder is not cut off: {page}");
    let description = page["description"].as_str().unwrap();
    assert!(description.lines().any(|l| l.trim_start().starts_with("Use this tool for:")), "the description keeps its line breaks: {description:?}");
    assert_eq!(page["onboarding"], "Onboarded at the first attempt.", "a healthy device is not shown as one attempt of several: {page}");
    assert!(page["trafficTop"].as_f64().unwrap() < 2500.0, "the traffic pane is within reach: {page}");

    let fifty = b.step("volume-50").await;
    assert!(fifty["result"].as_str().unwrap().contains("true"), "{fifty}");
    assert_eq!(volume(&hub).await, 50, "the form's call changed the device");
    let calls_before = calls_counted(&hub).await;
    b.send(&format!("GO {}", json!({}))).await;

    let refused = b.step("volume-500").await;
    let cli = mcpdev(&hub, &["call", "self.audio_speaker.set_volume", "volume=500", "-d", DEV]).await;
    assert_ne!(cli.code, 0);
    let error = refused["error"].as_str().unwrap();
    assert_eq!(error, "argument 'volume': must be at most 100 (allowed 0..100), got 500");
    assert!(cli.stderr.contains(error), "the CLI's own message: {}", cli.stderr);
    assert_eq!(refused["invalid"], "true");
    assert_eq!(calls_counted(&hub).await, calls_before, "nothing was sent to the device");
    assert_eq!(volume(&hub).await, 50);

    let call = mcpdev(&hub, &["call", "self.audio_speaker.set_volume", "volume=33", "-d", DEV]).await;
    assert_eq!(call.code, 0, "{call:?}");
    b.send(&format!("GO {}", json!({}))).await;
    let traffic = b.step("traffic").await;
    assert!(traffic["ms"].as_u64().unwrap() <= 1000, "{traffic}");
    assert!(traffic["row"].as_str().unwrap().contains("tools/call"), "{traffic}");
    b.step("screenshot").await;
    let png = std::fs::read(&screenshot).unwrap();
    assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "a real screenshot");
    assert_eq!(std::fs::read(repo_path("docs/dashboard.png")).ok(), committed, "a test never writes into the tree");

    // Admission: a device knocks; it is pending on the page within a second; approving it there
    // gives it its token, with which it gets in.
    b.step("admission").await;
    const NEW: &str = "02:00:00:00:da:01";
    let mut req = tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(hub.device_url.as_str()).unwrap();
    req.headers_mut().insert("Device-Id", NEW.parse().unwrap());
    req.headers_mut().insert("Client-Id", "5f0c2a8e-1111-4222-8333-944455556666".parse().unwrap());
    let refusal = match tokio_tungstenite::connect_async(req).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => String::from_utf8_lossy(resp.body().as_deref().unwrap_or_default()).into_owned(),
        other => panic!("a new device was let in: {:?}", other.map(|_| ())),
    };
    let code: String = refusal.split("devices approve ").nth(1).unwrap_or_default().chars().take_while(char::is_ascii_digit).collect();
    assert_eq!(code.len(), 6, "{refusal}");
    b.send(&format!("GO {}", json!({"code": code}))).await;
    let approved = b.step("approved").await;
    assert!(approved["pending_ms"].as_u64().unwrap() <= 1000, "{approved}");
    assert!(approved["pending"].as_str().unwrap().contains(NEW), "{approved}");
    assert_eq!(approved["answer"]["device_id"], NEW, "{approved}");
    let text = approved["text"].as_str().unwrap();
    assert!(text.contains("give it this token") && text.contains("Authorization: Bearer") && text.contains("mcpdev sim --device-id"), "what to do with the token: {approved}");
    let headers: Vec<&str> = approved["headers"].as_array().unwrap().iter().map(|h| h.as_str().unwrap()).collect();
    assert!(!headers.iter().any(|h| h.contains('_')), "human column names: {headers:?}");
    let token = approved["answer"]["token"].as_str().expect("the approval's token").to_string();
    let _sim = spawn_mcpdev(&["sim", "--url", &hub.device_url, "--device-id", NEW], &[("MCPDEV_DEVICE_TOKEN", &token)]);
    let ready = mcpdev(&hub, &["tools", "list", "-d", NEW, "--wait", "20s", "--json"]).await;
    assert_eq!(ready.code, 0, "the approved device is in: {ready:?}");
    b.send(&format!("GO {}", json!({"device": NEW}))).await;
    b.step("in").await;
    let done = b.step("done").await;
    assert_eq!(done["dialogs"], json!([]), "{done}");
    assert_eq!(done["pageErrors"], json!([]), "{done}");
    // Chromium logs the refused form's 422 answers (validation and call) as failed loads; nothing else.
    let errors = done["consoleErrors"].as_array().unwrap();
    assert!(errors.iter().all(|e| e.as_str().unwrap().contains("status of 422")), "{done}");
    b.close().await;
}

/// Everything a hostile device says carries markup, script and terminal escapes.
const XSS_IMG: &str = "<img src=x onerror=\"window.pwned=1;alert(1)\">";
const XSS_SCRIPT: &str = "</script><script>window.pwned=2;alert(2)</script>";
const ESCAPES: &str = "\u{1b}[2J\u{1b}]0;owned\u{7}\u{1b}]52;c;ZXZpbA==\u{7}\r\u{1b}[K\u{202e}";

#[tokio::test(flavor = "multi_thread")]
async fn a_hostile_devices_text_is_shown_inertly() {
    const BAD: &str = "02:00:00:00:0b:ad";
    let profile = tempfile::tempdir().unwrap();
    let hub = HubProcess::start(&[], &[]).await;
    let name = format!("evil{XSS_IMG}{ESCAPES}");
    let description = format!("{XSS_SCRIPT} {XSS_IMG} {ESCAPES}");
    let tool = json!({"name": name, "description": description, "inputSchema": {"type": "object", "properties": {}}});
    let mut device = FakeDevice::connect(&hub.device_url, BAD, vec![tool]).await;
    let listed = mcpdev(&hub, &["tools", "list", "-d", BAD, "--wait", "20s", "--json"]).await;
    assert_eq!(listed.code, 0, "{listed:?}");
    // The device answers every call with markup and escapes, and an "image" that is SVG script.
    let answering = tokio::spawn(async move {
        // No deadline here: the browser takes its time to get to the call.
        while let Some(Ok(message)) = futures_util::StreamExt::next(&mut device.ws).await {
            let tokio_tungstenite::tungstenite::Message::Text(text) = message else { continue };
            let call: Value = serde_json::from_str(&text).unwrap_or_default();
            if call["type"] != "mcp" || call["payload"]["method"] != "tools/call" {
                continue;
            }
            let call = call["payload"].clone();
            let svg = base64_svg();
            device
                .reply(&call["id"], json!({"content": [
                    {"type": "text", "text": format!("{XSS_SCRIPT}{XSS_IMG}{ESCAPES}")},
                    {"type": "image", "mimeType": "image/svg+xml", "data": svg},
                    {"type": "image", "mimeType": "image/png\" onerror=\"alert(4)", "data": "AAAA"},
                ], "isError": false}))
                .await;
        }
    });
    let link = hub.info["dashboard"].as_str().unwrap().to_string();
    let mut b = open_dashboard(&link, "hostile", BAD, profile.path());
    let seen = b.step("hostile").await;
    let done = b.step("done").await;
    b.close().await;
    answering.abort();

    assert_eq!(done["dialogs"], json!([]), "no dialog opened: {done}");
    assert_eq!(done["pageErrors"], json!([]), "{done}");
    assert_eq!(done["consoleErrors"], json!([]), "nothing was blocked or broke: {done}");
    let dom = &seen["dom"];
    assert_eq!(dom["pwned"], false, "no device script ran: {seen}");
    assert_eq!(dom["handlers"], 0, "no element carries an on… attribute: {seen}");
    assert_eq!(dom["scripts"], json!(["/assets/uPlot.iife.min.js", "/assets/app.js"]), "no script element was added: {seen}");
    assert_eq!(dom["images"], json!([]), "no image from the device's markup or its non-raster 'images': {seen}");
    assert_eq!(dom["title"], "mcpdev hub", "the window title did not change");
    // The markup is there, as text; the escapes are shown escaped, never raw.
    let names = seen["names"].as_array().unwrap();
    assert_eq!(names.len(), 1, "{seen}");
    let shown = names[0].as_str().unwrap();
    assert!(shown.starts_with("evil<img src=x onerror="), "{shown}");
    assert!(shown.contains("\\u{1b}[2J") && shown.contains("\\u{202e}"), "escapes are visible: {shown}");
    for text in [shown, seen["descriptions"][0].as_str().unwrap(), seen["result"].as_str().unwrap(), seen["traffic"].as_str().unwrap(), seen["list"].as_str().unwrap()] {
        assert!(!text.contains('\u{1b}') && !text.contains('\u{202e}') && !text.contains('\u{7}'), "a raw control character reached the page: {text:?}");
    }
    assert!(seen["result"].as_str().unwrap().contains("</script><script>window.pwned=2"), "the result is shown as text: {seen}");
}

fn base64_svg() -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(b"<svg xmlns=\"http://www.w3.org/2000/svg\" onload=\"alert(3)\"><script>alert(3)</script></svg>")
}

/// Every page at 800, 1280 and 1920 px, in the light and the dark theme, as a user sees it: no
/// element outside its card or its table cell (a table too wide scrolls), no two overlapping, no
/// page wider than the window, no value (an id, an address, a code, a time) broken across lines,
/// a theme button that names the other theme, one time format with UTC on hover, and an empty
/// list that says what would appear.
/// The pages carry what makes them long: a device's tools with a refused call, a pending request
/// and an approval's outcome, the hub's caps and plots.
#[tokio::test(flavor = "multi_thread")]
async fn every_page_fits_its_window_at_three_widths_in_both_themes() {
    let profile = tempfile::tempdir().unwrap();
    let hub = HubProcess::start_admitting(&["--demo", "2"], &[]).await;
    assert_eq!(mcpdev(&hub, &["tools", "list", "-d", DEV, "--wait", "20s", "--json"]).await.code, 0);
    assert_eq!(mcpdev(&hub, &["devices", "approve", "aa:bb:cc:00:77:01"]).await.code, 0, "an admitted device for the table");
    for (i, id) in ["02:00:00:00:da:11", "02:00:00:00:da:12"].iter().enumerate() {
        let mut req = tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(hub.device_url.as_str()).unwrap();
        req.headers_mut().insert("Device-Id", id.parse().unwrap());
        req.headers_mut().insert("Client-Id", format!("5f0c2a8e-1111-4222-8333-94445555666{i}").parse().unwrap());
        assert!(tokio_tungstenite::connect_async(req).await.is_err(), "a new device waits for approval");
    }
    let link = hub.info["dashboard"].as_str().unwrap().to_string();
    let mut b = open_dashboard(&link, "layout", DEV, profile.path());
    let seen = b.step("layout").await;
    let done = b.step("done").await;
    b.close().await;
    assert_eq!(seen["checked"].as_array().unwrap().len(), 24, "four pages, three widths, two themes: {seen}");
    assert!(seen["checked"].as_array().unwrap().iter().any(|c| c.as_str().unwrap().ends_with("dark")), "{seen}");
    assert_eq!(seen["count"], 0, "layout problems:\n{}", seen["problems"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect::<Vec<_>>().join("\n"));
    assert_eq!(done["pageErrors"], json!([]), "{done}");
}
