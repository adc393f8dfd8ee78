//! mcpdev as a complete MCP client (`--stdio`, `--url`): resources, prompts, tasks and
//! cancellation, against real servers (the MCP Python SDK's, `tests/fixtures/sdk_stdio_server.py`
//! on mcp 1.x with its experimental tasks; `@modelcontextprotocol/server-everything` from npm)
//! and against servers that misbehave on purpose (`tests/fixtures/hostile_stdio_server.py`).
//!
//! `.ci/test` installs them and sets `MCPDEV_TEST_MCP1_PYTHON`, `MCPDEV_TEST_NODE22` and
//! `MCPDEV_TEST_EVERYTHING`; a missing one is a failure, not a skip.

mod common;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use common::{installed, repo_path};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

/// Long enough for a Python or Node server to start on a loaded machine.
const TIMEOUT: &str = "60s";

fn python() -> PathBuf {
    installed("MCPDEV_TEST_MCP1_PYTHON", repo_path(".ci/venv-mcp1/bin/python"), "Python with the MCP SDK 1.x")
}

fn sdk_server() -> String {
    format!("{} {}", python().display(), repo_path("tests/fixtures/sdk_stdio_server.py").display())
}

fn hostile(mode: &str) -> String {
    format!("{} {} {mode}", python().display(), repo_path("tests/fixtures/hostile_stdio_server.py").display())
}

fn everything() -> String {
    let node = installed("MCPDEV_TEST_NODE22", repo_path(".ci/node22/node_modules/node/bin/node"), "Node 22");
    let server = installed(
        "MCPDEV_TEST_EVERYTHING",
        repo_path(".ci/everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js"),
        "@modelcontextprotocol/server-everything",
    );
    format!("{} {} stdio", node.display(), server.display())
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Out {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}\nstderr: {}", self.stdout, self.stderr))
    }
}

async fn run_in(dir: Option<&std::path::Path>, args: &[&str], env: &[(&str, &str)]) -> Out {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"));
    cmd.args(args).env("NO_COLOR", "1").stdin(Stdio::null()).kill_on_drop(true);
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output()).await.expect("mcpdev hung").unwrap();
    Out { code: out.status.code().unwrap_or(-1), stdout: String::from_utf8_lossy(&out.stdout).into(), stderr: String::from_utf8_lossy(&out.stderr).into() }
}

async fn run(args: &[&str]) -> Out {
    run_in(None, args, &[]).await
}

/// `args` then `--stdio SERVER --timeout 60s`.
async fn stdio(server: &str, args: &[&str]) -> Out {
    let mut all = args.to_vec();
    all.extend(["--stdio", server, "--timeout", TIMEOUT]);
    run(&all).await
}

#[tokio::test]
async fn resources_and_prompts_of_an_sdk_stdio_server() {
    let s = sdk_server();
    let out = stdio(&s, &["resources", "list"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("test://hello") && out.stdout.contains("a greeting"), "{}", out.stdout);
    assert!(out.stderr.contains("3 resource(s) on stdio:"), "{}", out.stderr);

    let doc = stdio(&s, &["resources", "list", "--json"]).await.json();
    assert!(doc["device_id"].as_str().unwrap().starts_with("stdio:"), "{doc}");
    let uris: Vec<&str> = doc["resources"].as_array().unwrap().iter().map(|r| r["uri"].as_str().unwrap()).collect();
    assert_eq!(uris, ["test://hello", "test://hostile", "test://blob"]);

    let out = stdio(&s, &["resources", "read", "test://hello"]).await;
    assert_eq!((out.code, out.stdout.as_str()), (0, "hello, world\n"), "{}", out.stderr);
    let doc = stdio(&s, &["resources", "read", "test://greet/ada", "--json"]).await.json();
    assert_eq!(doc["contents"][0]["text"], "hello ada");

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("blob.bin");
    let out = stdio(&s, &["resources", "read", "test://blob", "--out", file.to_str().unwrap()]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(std::fs::read(&file).unwrap(), b"\x00\x01binary\xff");
    let out = stdio(&s, &["resources", "read", "test://blob"]).await;
    assert!(out.stdout.contains("9 bytes; --out FILE saves it") && !out.stdout.contains('\0'), "{}", out.stdout);
    let out = stdio(&s, &["resources", "read", "test://missing"]).await;
    assert_eq!(out.code, 5, "a server's error is a tool error: {}", out.stderr);

    let doc = stdio(&s, &["resources", "templates", "--json"]).await.json();
    assert_eq!(doc["resourceTemplates"][0]["uriTemplate"], "test://greet/{name}");

    let out = stdio(&s, &["prompts", "list"]).await;
    assert!(out.stdout.contains("name: string, [times: string]"), "{}", out.stdout);
    // Typed as a string, as the prompt declares: 007 stays 007.
    let out = stdio(&s, &["prompts", "get", "greet", "name=007", "times=2"]).await;
    assert_eq!((out.code, out.stdout.as_str()), (0, "[user]\nhello 007 hello 007\n"), "{}", out.stderr);
    let doc = stdio(&s, &["prompts", "get", "greet", "--args-json", r#"{"name":"Ada"}"#, "--json"]).await.json();
    assert_eq!(doc["messages"][0]["content"]["text"], "hello Ada");
    // Refused before anything is sent: a missing required argument, a misspelt one, a misspelt prompt.
    let out = stdio(&s, &["prompts", "get", "greet"]).await;
    assert_eq!(out.code, 7, "{}", out.stderr);
    assert!(out.stderr.contains("nothing was sent") && out.stderr.contains("name"), "{}", out.stderr);
    let out = stdio(&s, &["prompts", "get", "greet", "nmae=x"]).await;
    assert_eq!(out.code, 7);
    assert!(out.stderr.contains("did you mean 'name'") && out.stderr.contains("this prompt"), "{}", out.stderr);
    let out = stdio(&s, &["prompts", "get", "gret"]).await;
    assert_eq!(out.code, 7);
    assert!(out.stderr.contains("did you mean 'greet'"), "{}", out.stderr);
}

#[tokio::test]
async fn a_servers_text_is_data_escaped_for_the_terminal() {
    let s = sdk_server();
    for args in [&["resources", "list"][..], &["resources", "read", "test://hostile"], &["prompts", "list"], &["prompts", "get", "hostile"]] {
        let out = stdio(&s, args).await;
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
        assert!(!out.stdout.contains(['\x1b', '\x07']), "{args:?} let a terminal escape through: {:?}", out.stdout);
        assert!(out.stdout.contains(r"\e]0;owned\x07") && out.stdout.contains("<script>alert(1)</script>"), "{args:?}: shown, as text: {}", out.stdout);
        let mut json = args.to_vec();
        json.push("--json");
        let out = stdio(&s, &json).await;
        assert!(!out.stdout.contains(['\x1b', '\x07']), "{args:?} --json: {:?}", out.stdout);
        assert!(out.json().to_string().contains("\\u001b]0;owned\\u0007"), "--json keeps the exact text: {}", out.stdout);
    }
}

#[tokio::test]
async fn call_task_shows_status_on_stderr_and_the_result_on_stdout() {
    let s = sdk_server();
    let out = stdio(&s, &["call", "slow", "seconds=0.6", "--task", "--json"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let doc = out.json();
    assert_eq!(doc["content"][0]["text"], "slept 0.6s", "{doc}");
    assert!(doc["_meta"]["io.modelcontextprotocol/related-task"]["taskId"].is_string(), "the result names its task: {doc}");
    assert!(out.stderr.contains(": working") && out.stderr.contains(": completed"), "status while it runs: {}", out.stderr);
    // A tool that does not run as tasks is refused before anything is sent.
    let out = stdio(&s, &["call", "echo", "text=x", "--task"]).await;
    assert_eq!(out.code, 7, "{}", out.stderr);
    assert!(out.stderr.contains("taskSupport"), "{}", out.stderr);
    // A server that keeps no tasks: refused, nothing sent.
    let out = stdio(&hostile("plain"), &["call", "argv", "--task"]).await;
    assert_eq!(out.code, 7, "{}", out.stderr);
    let out = stdio(&hostile("plain"), &["tasks", "list"]).await;
    assert_eq!(out.code, 7, "{}", out.stderr);
    assert!(out.stderr.contains("keeps no tasks"), "{}", out.stderr);
}

/// The SDK server over Streamable HTTP or SSE (`ready <port>`), killed on drop.
async fn http_server(transport: &str, marker: &std::path::Path) -> (tokio::process::Child, String) {
    let mut child = tokio::process::Command::new(python())
        .arg(repo_path("tests/fixtures/sdk_stdio_server.py"))
        .arg(transport)
        .env("MARKER", marker)
        .env("PYTHONWARNINGS", "ignore")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line()).await.expect("server start").unwrap().expect("server exited");
    let port = line.strip_prefix("ready ").expect("ready line").trim().to_string();
    let path = if transport == "sse" { "sse" } else { "mcp" };
    (child, format!("http://127.0.0.1:{port}/{path}"))
}

#[tokio::test]
async fn tasks_outlive_the_command_that_made_them_over_streamable_http() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("marker");
    let (_server, url) = http_server("http", &marker).await;
    let u = |args: &[&str]| {
        let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        all.extend(["--url".into(), url.clone()]);
        async move { run(&all.iter().map(String::as_str).collect::<Vec<_>>()).await }
    };
    let task_id = |stderr: &str| stderr.split("task ").nth(1).and_then(|r| r.split(':').next()).unwrap_or_else(|| panic!("no task named: {stderr}")).to_string();
    // The deadline passes: the task is left to run, and named.
    let out = u(&["call", "slow", "seconds=60", "--task", "--task-ttl", "10m", "--timeout", "300ms"]).await;
    assert_eq!(out.code, 6, "{}", out.stderr);
    let running = task_id(&out.stderr);
    assert!(out.stderr.contains(&format!("mcpdev tasks result {running}")), "{}", out.stderr);
    let doc = u(&["tasks", "get", &running, "--json"]).await.json();
    assert_eq!((doc["taskId"].as_str(), doc["status"].as_str()), (Some(running.as_str()), Some("working")), "{doc}");
    assert_eq!(doc["ttl"], 600_000, "--task-ttl reached the server, and every field of the task reaches --json: {doc}");
    // tasks/result waits for the end.
    let out = u(&["call", "slow", "seconds=2", "--task", "--timeout", "300ms"]).await;
    assert_eq!(out.code, 6, "{}", out.stderr);
    let short = task_id(&out.stderr);
    let out = u(&["tasks", "result", &short]).await;
    assert_eq!((out.code, out.stdout.as_str()), (0, "slept 2.0s\n"), "{}", out.stderr);
    // One more, so the listing spans two pages (2 a page).
    assert_eq!(u(&["call", "slow", "seconds=0.1", "--task", "-q"]).await.code, 0);
    let doc = u(&["tasks", "list", "--json"]).await.json();
    let listed: Vec<&str> = doc["tasks"].as_array().unwrap().iter().map(|t| t["taskId"].as_str().unwrap()).collect();
    assert_eq!(listed.len(), 3, "every page: {doc}");
    assert!(listed.contains(&short.as_str()) && listed.contains(&running.as_str()), "{doc}");
    let doc = u(&["tasks", "cancel", &running, "--json"]).await.json();
    assert_eq!(doc["status"], "cancelled", "{doc}");
    assert!(wait_for_line(&marker, "cancelled task").await, "the server's task saw its cancellation");
    let out = u(&["tasks", "get", "no-such-task"]).await;
    assert_eq!(out.code, 5, "an unknown task is the server's error: {}", out.stderr);
}

#[tokio::test]
async fn resources_and_prompts_over_streamable_http_and_sse() {
    let dir = tempfile::tempdir().unwrap();
    for transport in ["http", "sse"] {
        let (_server, url) = http_server(transport, &dir.path().join("m")).await;
        let out = run(&["resources", "read", "test://hello", "--url", &url]).await;
        assert_eq!((out.code, out.stdout.as_str()), (0, "hello, world\n"), "{transport}: {}", out.stderr);
        let out = run(&["prompts", "get", "greet", "name=Ada", "--url", &url, "--json"]).await;
        assert_eq!(out.json()["messages"][0]["content"]["text"], "hello Ada", "{transport}");
        let out = run(&["call", "slow", "seconds=0.2", "--task", "--url", &url]).await;
        assert_eq!((out.code, out.stdout.as_str()), (0, "slept 0.2s\n"), "{transport}: {}", out.stderr);
    }
}

/// Reads `path` until it holds `line` (the server wrote it), up to a minute.
async fn wait_for_line(path: &std::path::Path, line: &str) -> bool {
    for _ in 0..600 {
        if std::fs::read_to_string(path).is_ok_and(|t| t.lines().any(|l| l == line)) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

fn interrupt(child: &tokio::process::Child) {
    let pid = child.id().expect("running") as i32;
    // SAFETY: a signal to our own child.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
}

#[tokio::test]
async fn ctrl_c_cancels_a_plain_call_and_a_task_on_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("marker");
    let env = format!("MARKER={}", marker.display());
    let s = sdk_server();

    let mut call = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"))
        .args(["call", "hang", "--stdio", &s, "--stdio-env", &env, "--timeout", TIMEOUT])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    assert!(wait_for_line(&marker, "started hang").await, "the call never reached the server");
    interrupt(&call);
    let status = tokio::time::timeout(Duration::from_secs(30), call.wait()).await.expect("mcpdev did not end").unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(wait_for_line(&marker, "cancelled hang").await, "notifications/cancelled did not reach the server");

    let mut task = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"))
        .args(["call", "slow", "seconds=60", "--task", "--stdio", &s, "--stdio-env", &env, "--timeout", "120s"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut err = BufReader::new(task.stderr.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(60), err.next_line()).await.expect("no status").unwrap().unwrap();
    assert!(first.contains(": working"), "{first}");
    interrupt(&task);
    let status = tokio::time::timeout(Duration::from_secs(30), task.wait()).await.expect("mcpdev did not end").unwrap();
    assert_eq!(status.code(), Some(130));
    let mut rest = String::new();
    while let Ok(Some(l)) = err.next_line().await {
        rest.push_str(&l);
        rest.push('\n');
    }
    assert!(rest.contains("cancelled (now cancelled)"), "{rest}");
    assert!(wait_for_line(&marker, "cancelled task").await, "tasks/cancel did not reach the server");
}

#[tokio::test]
async fn a_stdio_server_gets_its_words_unshelled_and_a_clean_environment() {
    let script = repo_path("tests/fixtures/hostile_stdio_server.py");
    let line = format!("{} {} plain 'two words' '$(touch pwned)' ';' \"a\\\"b\"", python().display(), script.display());
    let out = run_in(None, &["call", "argv", "--stdio", &line, "--stdio-env", "GIVEN=yes", "--stdio-env", "PASSED", "--json"], &[("MCPDEV_SECRET_TOKEN", "s3cret"), ("PASSED", "on")]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let seen: Value = serde_json::from_str(out.json()["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(seen["argv"], serde_json::json!(["plain", "two words", "$(touch pwned)", ";", "a\"b"]));
    assert_eq!(seen["env"]["GIVEN"], "yes");
    assert_eq!(seen["env"]["PASSED"], "on");
    assert!(seen["env"].get("MCPDEV_SECRET_TOKEN").is_none(), "our environment leaked: {}", seen["env"]);
    assert!(seen["env"].get("PATH").is_some());
    // A secret's value on the command line is visible to `ps`: mcpdev says how to avoid it.
    let out = run(&["call", "argv", "--stdio", &hostile("plain"), "--stdio-env", "MY_API_KEY=k"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("--stdio-env MY_API_KEY=… on the command line is visible to other users"), "{}", out.stderr);
    assert!(!out.stderr.contains("=k"), "the warning does not repeat the secret: {}", out.stderr);

    // `--stdio` alone: mcpdev.toml's [stdio], with its env.
    let dir = tempfile::tempdir().unwrap();
    let toml = format!("[stdio]\ncommand = {:?}\nenv = {{ FROM_TOML = \"1\" }}\n", format!("{} {} plain", python().display(), script.display()));
    std::fs::write(dir.path().join("mcpdev.toml"), toml).unwrap();
    let out = run_in(Some(dir.path()), &["call", "argv", "--stdio", "--json"], &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let seen: Value = serde_json::from_str(out.json()["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(seen["env"]["FROM_TOML"], "1");
    let empty = tempfile::tempdir().unwrap();
    let out = run_in(Some(empty.path()), &["tools", "list", "--stdio"], &[("XDG_CONFIG_HOME", empty.path().to_str().unwrap())]).await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("[stdio]"), "{}", out.stderr);
}

#[tokio::test]
async fn stdio_servers_that_misbehave_get_typed_errors_in_bounded_time() {
    // Never answers: the deadline, as for a device (exit 6).
    let out = run(&["tools", "list", "--stdio", &hostile("silent"), "--timeout", "1s"]).await;
    assert_eq!(out.code, 6, "{}", out.stderr);
    assert!(out.stderr.contains("did not answer within 1s"), "{}", out.stderr);
    // Endless lines that are not JSON-RPC: skipped, and the deadline still holds.
    let out = run(&["tools", "list", "--stdio", &hostile("flood-lines"), "--timeout", "1s"]).await;
    assert_eq!(out.code, 6, "{}", out.stderr);
    // One line that never ends: refused past 64 MiB, the server ended (exit 5).
    let out = run(&["tools", "list", "--stdio", &hostile("flood-line"), "--timeout", TIMEOUT]).await;
    assert_eq!(out.code, 5, "{}", out.stderr);
    assert!(out.stderr.contains("more than 64 MiB"), "{}", out.stderr);
    // Exits at once: unreachable (exit 4), with what it said on stderr.
    let out = run(&["tools", "list", "--stdio", &hostile("exit"), "--timeout", TIMEOUT]).await;
    assert_eq!(out.code, 4, "{}", out.stderr);
    assert!(out.stderr.contains("exited (exit status: 3)") && out.stderr.contains("MY_API_KEY is not set"), "{}", out.stderr);
    // A command that is not there.
    let out = run(&["tools", "list", "--stdio", "no-such-mcp-server-here --flag", "--timeout", "5s"]).await;
    assert_eq!(out.code, 4, "{}", out.stderr);
    assert!(out.stderr.contains("cannot start the stdio server") && out.stderr.contains("PATH"), "{}", out.stderr);
    let out = run(&["tools", "list", "--stdio", "python3 'open", "--timeout", "5s"]).await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    // A 1 GB resource: refused at 64 MiB, never read whole.
    let out = run(&["resources", "read", "big://1g", "--stdio", &hostile("big-resource"), "--timeout", TIMEOUT]).await;
    assert_eq!(out.code, 5, "{}", out.stderr);
    assert!(out.stderr.contains("more than 64 MiB"), "{}", out.stderr);
    // The commands need a server.
    let out = run(&["resources", "list"]).await;
    assert_eq!(out.code, 2, "{}", out.stderr);
}

#[tokio::test]
async fn server_everything_from_npm_over_stdio() {
    let e = everything();
    let doc = stdio(&e, &["resources", "list", "--json"]).await.json();
    let uri = doc["resources"][0]["uri"].as_str().expect("a resource").to_string();
    let out = stdio(&e, &["resources", "read", &uri]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stdout.trim().is_empty());
    let doc = stdio(&e, &["resources", "read", "demo://resource/dynamic/text/7", "--json"]).await.json();
    assert!(doc["contents"][0]["text"].as_str().is_some_and(|t| t.contains('7')), "{doc}");
    let doc = stdio(&e, &["resources", "templates", "--json"]).await.json();
    assert!(doc["resourceTemplates"].as_array().is_some_and(|t| !t.is_empty()), "{doc}");
    let out = stdio(&e, &["prompts", "get", "args-prompt", "city=Paris", "state=Texas"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("Paris"), "{}", out.stdout);
    let out = stdio(&e, &["prompts", "get", "args-prompt", "state=Texas"]).await;
    assert_eq!(out.code, 7, "city is required: {}", out.stderr);
    let out = stdio(&e, &["call", "get-sum", "a=2", "b=3", "--json"]).await;
    assert!(out.json()["content"][0]["text"].as_str().is_some_and(|t| t.contains('5')), "{}", out.stdout);
    let out = stdio(&e, &["call", "simulate-research-query", "topic=rust", "--task"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("Research") && out.stderr.contains(": completed"), "{}\n{}", out.stdout, out.stderr);
}
