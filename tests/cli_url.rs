//! `mcpdev tools list / call / init --url` against a third-party MCP server built with the
//! official Python SDK, over Streamable HTTP and the legacy SSE transport.

mod common;

use std::path::PathBuf;
use std::process::Stdio;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

fn python() -> PathBuf {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let p = std::env::var_os("MCPDEV_TEST_MCP2_PYTHON").map(PathBuf::from).unwrap_or_else(|| repo.join(".ci/venv-mcp2/bin/python"));
    assert!(p.exists(), "{} is missing: run .ci/test, which installs the Python MCP SDK", p.display());
    p
}

/// Starts the Python server; returns it (killed on drop) and its base URL.
async fn start(transport: &str) -> (tokio::process::Child, String) {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop/python_mcp_server.py");
    let mut child = tokio::process::Command::new(python())
        .arg(&script)
        .arg(transport)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(std::time::Duration::from_secs(60), lines.next_line())
        .await
        .expect("the Python server did not start in time")
        .unwrap()
        .expect("the Python server exited: run .ci/test to install the Python MCP SDK");
    let port = line.strip_prefix("ready ").expect("ready line").trim().to_string();
    (child, format!("http://127.0.0.1:{port}"))
}

fn mcpdev(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcpdev")).args(args).env("NO_COLOR", "1").output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

async fn exercise(url: &str) {
    let url = url.to_string();
    tokio::task::spawn_blocking(move || {
        let (code, out, err) = mcpdev(&["tools", "list", "--url", &url, "--json"]);
        assert_eq!(code, 0, "{err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        let mut names: Vec<&str> = v["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
        names.sort();
        assert_eq!(names, ["add", "explode", "lookup_zip"]);
        let (code, table, _) = mcpdev(&["tools", "list", "--url", &url]);
        assert_eq!(code, 0);
        assert!(table.contains("a: int") && table.contains("zip: string"), "{table}");

        // Typed by the server's schema: integers become integers, a string ZIP stays a string.
        let (code, out, err) = mcpdev(&["call", "add", "a=2", "b=40", "--url", &url]);
        assert_eq!((code, out.trim()), (0, "42"), "{err}");
        let (code, out, _) = mcpdev(&["call", "lookup_zip", "zip=01234", "--url", &url]);
        assert_eq!((code, out.trim()), (0, "zip='01234' type=str"));
        let (code, out, _) = mcpdev(&["call", "add", "a=2", "b=40", "--url", &url, "--json"]);
        assert_eq!(code, 0);
        assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["content"][0]["text"], "42");

        // Failure classes: tool error 5, invalid call 7 (nothing sent), unknown tool 7.
        let (code, out, err) = mcpdev(&["call", "explode", "--url", &url]);
        assert_eq!(code, 5, "{out} {err}");
        assert!(out.contains("Error executing tool explode"), "the SDK reports the failure as isError: {out}");
        let (code, _, err) = mcpdev(&["call", "add", "a=two", "b=1", "--url", &url]);
        assert_eq!(code, 7);
        assert!(err.contains("argument 'a'"), "{err}");
        let (code, _, err) = mcpdev(&["call", "ad", "--url", &url]);
        assert_eq!(code, 7);
        assert!(err.contains("did you mean 'add'"), "{err}");

        let (code, out, _) = mcpdev(&["init", "--url", &url, "--json"]);
        assert_eq!(code, 0);
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["serverInfo"]["name"], "third-party-python-server");
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_python_sdk_server_over_streamable_http() {
    let (_server, base) = start("http").await;
    exercise(&format!("{base}/mcp")).await;
}

#[tokio::test]
async fn a_python_sdk_server_over_legacy_sse() {
    let (_server, base) = start("sse").await;
    exercise(&format!("{base}/sse")).await;
}

#[test]
fn an_unreachable_server_and_bad_headers_have_their_exit_codes() {
    let (code, _, err) = mcpdev(&["tools", "list", "--url", "http://127.0.0.1:9/mcp"]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("cannot reach the MCP server"), "{err}");
    let (code, _, err) = mcpdev(&["tools", "list", "--url", "http://127.0.0.1:9/mcp", "-H", "no-colon"]);
    assert_eq!(code, 2, "{err}");
}

/// A server that redirects every request elsewhere, and one that records what reaches it.
async fn serve(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

#[tokio::test]
async fn a_redirect_to_another_host_is_not_followed_and_gets_no_headers() {
    use axum::http::{HeaderMap, StatusCode, header};
    use std::sync::{Arc, Mutex};
    let reached: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
    let seen = reached.clone();
    let other = serve(axum::Router::new().fallback(move |headers: HeaderMap| {
        let seen = seen.clone();
        async move {
            seen.lock().unwrap().push(headers.get("x-secret").and_then(|v| v.to_str().ok()).map(str::to_string));
            StatusCode::NOT_FOUND
        }
    }))
    .await;
    let target = format!("{other}/mcp");
    let redirecting = serve(axum::Router::new().fallback(move || {
        let target = target.clone();
        async move { (StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, target)]) }
    }))
    .await;
    let url = format!("{redirecting}/mcp");
    let (code, _, err) = tokio::task::spawn_blocking(move || mcpdev(&["tools", "list", "--url", &url, "-H", "X-Secret: s3cret"])).await.unwrap();
    assert_ne!(code, 0, "a redirect is not an answer: {err}");
    assert!(err.contains("MCP server"), "the error names what failed: {err}");
    assert!(reached.lock().unwrap().is_empty(), "the other host got requests: {:?}", reached.lock().unwrap());
}

/// The JSON-RPC requests a proxy saw that were about tools (`tools/list`, `tools/call <tool>`).
fn tool_requests(served: &[String]) -> Vec<&str> {
    served.iter().map(String::as_str).filter(|m| m.starts_with("tools/")).collect()
}

async fn cli(args: &[&str]) -> (i32, String, String) {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || mcpdev(&args.iter().map(String::as_str).collect::<Vec<_>>())).await.unwrap()
}

/// Issue 24: `call --url` against mcpdev's own hub reads only the named device's tools (one
/// `list_device_tools`, then `call_device_tool`), whatever the device's place in the sort order
/// and whatever the hub's face; `tools list --url` still reads every page. Against a server
/// that is not an mcpdev hub (a device's own endpoint, which pages one tool at a time here), it
/// reads pages until the one that holds the tool, no further. Counted by a proxy in front of
/// the hub: what the hub was asked.
#[tokio::test]
async fn call_url_reaches_a_hubs_device_without_listing_the_fleet() {
    let hub = common::HubProcess::start(&["--mcp-page-size", "1"], &[]).await;
    let _sims = common::spawn_mcpdev(&["sim", "--quiet", "--url", &hub.device_url, "--count", "5"], &[]);
    let last = "02:00:00:00:00:05";
    for d in ["02:00:00:00:00:01", last] {
        assert_eq!(common::mcpdev(&hub, &["hello", "-d", d, "--wait", "20s"]).await.code, 0);
    }
    let proxy = common::mcp_proxy::Proxy::start(&hub.host_url).await;
    let url = format!("{}/mcp", proxy.url);

    let (code, out, err) = cli(&["tools", "list", "--url", &url, "--json"]).await;
    assert_eq!(code, 0, "{err}");
    let listed = serde_json::from_str::<Value>(&out).unwrap()["tools"].as_array().unwrap().len();
    assert_eq!(listed, 1 + 5 * 4, "list_devices and every device's tools");
    assert_eq!(tool_requests(&proxy.served()), vec!["tools/list"; listed], "one tool a page, every page");

    // The device that sorts last, and the first: the same two requests, no listing.
    for (prefix, volume) in [("dev-020000000005", "9"), ("dev-020000000001", "8")] {
        let before = proxy.served().len();
        let (code, out, err) = cli(&["call", &format!("{prefix}.self.audio_speaker.set_volume"), &format!("volume={volume}"), "--url", &url]).await;
        assert_eq!((code, out.trim()), (0, "true"), "{err}");
        let (code, out, err) = cli(&["call", &format!("{prefix}.self.get_device_status"), "--url", &url, "--json"]).await;
        assert_eq!(code, 0, "{err}");
        let status: Value = serde_json::from_str(serde_json::from_str::<Value>(&out).unwrap()["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(status["audio_speaker"]["volume"].to_string(), volume, "the named device ran it: {out}");
        let asked = proxy.served()[before..].to_vec();
        let pair = ["tools/call list_device_tools", "tools/call call_device_tool"];
        assert_eq!(tool_requests(&asked), [pair, pair].concat(), "{prefix}");
    }
    // Arguments the schema refuses: typed from the device's own listing, nothing is called.
    let before = proxy.served().len();
    let (code, _, err) = cli(&["call", "dev-020000000005.self.audio_speaker.set_volume", "volume=101", "--url", &url]).await;
    assert_eq!(code, 7, "exit 7, invalid call: {err}");
    assert!(err.contains("at most 100"), "{err}");
    assert_eq!(tool_requests(&proxy.served()[before..]), ["tools/call list_device_tools"]);
    // A device that is not connected: said in the hub's words.
    let (code, _, err) = cli(&["call", "dev-0200000000ff.self.get_device_status", "--url", &url]).await;
    assert_ne!(code, 0);
    assert!(err.contains("device 02:00:00:00:00:ff is not connected"), "{err}");

    // Not an mcpdev hub's /mcp: pages until the tool's, no further (the brightness tool is the
    // third of the device's four).
    let own = format!("{}/devices/{last}/mcp", proxy.url);
    let before = proxy.served().len();
    let (code, out, err) = cli(&["call", "self.screen.set_brightness", "brightness=40", "--url", &own]).await;
    assert_eq!((code, out.trim()), (0, "true"), "{err}");
    assert_eq!(tool_requests(&proxy.served()[before..]), ["tools/list", "tools/list", "tools/list", "tools/call self.screen.set_brightness"]);
}

/// `tools list --url` on a hub that shows its fleet face lists the fleet tools and says how to
/// reach one device's tools; `call --url` works the same there.
#[tokio::test]
async fn tools_list_url_explains_a_hubs_fleet_face() {
    let hub = common::HubProcess::start(&["--demo", "3", "--mcp-fleet-threshold", "2"], &[]).await;
    assert_eq!(common::mcpdev(&hub, &["hello", "-d", "02:00:00:00:00:03", "--wait", "20s"]).await.code, 0);
    let url = format!("{}/mcp", hub.host_url);
    let (code, out, err) = cli(&["tools", "list", "--url", &url]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("search_devices") && out.contains("call_device_tool"), "{out}");
    assert!(err.contains("this mcpdev hub offers its fleet tools") && err.contains("/devices/<id>/mcp"), "{err}");
    let (code, out, err) = cli(&["call", "dev-020000000003.self.get_device_status", "--url", &url]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("audio_speaker"), "{out}");
}

/// Issue 33: `call --url … --json` through an mcpdev hub names the device that answered, as the
/// hub says in the result's `_meta` (`mcpdev/device_id`), whatever the face and the endpoint; a
/// server that is not an mcpdev hub is named by its URL (the `exercise` cases above).
#[tokio::test]
async fn call_url_json_names_the_device_that_answered() {
    const DEV: &str = "02:00:00:00:00:02";
    for face in [&["--demo", "2"][..], &["--demo", "2", "--mcp-fleet-threshold", "1"]] {
        let hub = common::HubProcess::start(face, &[]).await;
        assert_eq!(common::mcpdev(&hub, &["hello", "-d", DEV, "--wait", "20s"]).await.code, 0);
        let endpoints = [(format!("{}/mcp", hub.host_url), "dev-020000000002.self.get_device_status"), (format!("{}/devices/{DEV}/mcp", hub.host_url), "self.get_device_status")];
        for (url, tool) in &endpoints {
            let (code, out, err) = cli(&["call", tool, "--url", url, "--json"]).await;
            assert_eq!(code, 0, "{face:?} {url}: {err}");
            let doc: Value = serde_json::from_str(&out).unwrap();
            assert_eq!(doc["device_id"], DEV, "{face:?} {url}: {out}");
            assert_eq!(doc["_meta"]["mcpdev/device_id"], DEV, "{face:?} {url}: {out}");
        }
        // A call the hub refused before it reached the device is named by the device it was for.
        let (code, out, err) = cli(&["call", "dev-020000000002.self.audio_speaker.set_volume", "volume=500", "--no-validate", "--url", &endpoints[0].0, "--json"]).await;
        assert_eq!(code, 5, "{out} {err}");
        assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["device_id"], DEV, "{out}");
    }
}
