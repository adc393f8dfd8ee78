//! `mcpdev tools list / call / init --url` against a third-party MCP server built with the
//! official Python SDK, over Streamable HTTP and the legacy SSE transport.

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
