//! Remote tokens (docs/tls.md, set-up 3; docs/security.md, "Remote use"): a person on another
//! machine reaches the control API with a named token of their own, made on the hub's machine by
//! `mcpdev remote-token create`, and accepted only over TLS by a hub whose host listener other
//! machines reach. The adversaries: a wrong or revoked token, a token sent over plain http, a
//! flood of guesses, a token on the command line.
//!
//! The hub binds its host listener to 0.0.0.0 (the documented remote set-up) and every request
//! comes from loopback, as load and hostile tests must.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::raw_http::Answer;
use common::ws::DEADLINE;
use common::{HubProcess, Outcome};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

const MCP_TOKEN: &str = "the-mcp-token-of-this-test";

/// Runs `mcpdev ARGS` with `env` and a fresh state directory of its own (so that it trusts no CA
/// and knows no token it was not given), to completion.
async fn cli(args: &[&str], env: &[(&str, &str)]) -> Outcome {
    let own = tempfile::tempdir().unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"));
    cmd.args(args).env("MCPDEV_STATE_DIR", own.path()).env("MCPDEV_RUNTIME_DIR", own.path()).env("NO_COLOR", "1");
    for var in ["MCPDEV_HUB", "MCPDEV_HUB_TOKEN", "MCPDEV_HUB_TOKEN_FILE", "MCPDEV_CA_FILE", "MCPDEV_CA_FINGERPRINT"] {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.stdin(Stdio::null()).kill_on_drop(true).output()).await.expect("command hung").unwrap();
    Outcome { code: out.status.code().unwrap_or(-1), stdout: String::from_utf8_lossy(&out.stdout).into_owned(), stderr: String::from_utf8_lossy(&out.stderr).into_owned() }
}

/// `mcpdev remote-token ARGS` on the hub's machine (its state directory).
async fn remote_token(state: &Path, args: &[&str]) -> Outcome {
    let mut all = vec!["remote-token"];
    all.extend_from_slice(args);
    cli(&all, &[("MCPDEV_STATE_DIR", &state.to_string_lossy())]).await
}

/// A hub that other machines reach: `--tls auto --host-tls --host-addr 0.0.0.0:0`, one demo device.
async fn remote_hub(state: &Path, extra: &[&str]) -> HubProcess {
    let mut args = vec!["-v", "--host-addr", "0.0.0.0:0", "--demo", "1"];
    args.extend_from_slice(extra);
    let dir = state.to_string_lossy().into_owned();
    HubProcess::start_capturing(&args, &[("MCPDEV_STATE_DIR", &dir), ("MCPDEV_MCP_TOKEN", MCP_TOKEN)]).await
}

fn port_of(url: &str) -> u16 {
    url.rsplit(':').next().unwrap().split('/').next().unwrap().parse().unwrap()
}

fn ca_of(state: &Path) -> String {
    state.join("tls/ca.pem").to_string_lossy().into_owned()
}

/// A file only its owner reads, holding `token`.
fn token_file(dir: &Path, name: &str, token: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("{token}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

/// One HTTP/1.1 request over TLS (verified with `ca`) from the loopback address `from`.
async fn https(from: &str, port: u16, ca: &str, method: &str, path: &str, headers: &[(&str, &str)]) -> Answer {
    mcpdev::tls::install_crypto_provider();
    let trust = mcpdev::tls::client::Trust { ca_files: vec![ca.into()], ..Default::default() };
    let config = mcpdev::tls::client::build(&trust, &[b"http/1.1"]).unwrap();
    let tcp = common::raw_http::connect_from(from, format!("127.0.0.1:{port}").parse().unwrap()).await;
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = tokio::time::timeout(DEADLINE, tokio_rustls::TlsConnector::from(config).connect(name, tcp)).await.expect("handshake in time").unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: 0\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    tls.write_all(req.as_bytes()).await.unwrap();
    let mut all = Vec::new();
    // The hub closes after its answer (Connection: close); a TLS peer may end without close_notify.
    let _ = tokio::time::timeout(DEADLINE, tls.read_to_end(&mut all)).await.expect("the answer in time");
    parse(&all)
}

/// One HTTP/1.1 request in plain text.
async fn http(port: u16, method: &str, path: &str, headers: &[(&str, &str)]) -> Answer {
    let mut h = headers.to_vec();
    h.push(("Content-Type", "text/plain"));
    common::raw_http::request("127.0.0.1", format!("127.0.0.1:{port}").parse().unwrap(), method, path, &h, "").await
}

/// The hub's log once it holds what `seen` looks for (it is read from the hub's stderr as it comes).
async fn logged(hub: &HubProcess, seen: impl Fn(&str) -> bool) -> String {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let log = hub.stderr.as_ref().unwrap().lock().unwrap().clone();
        if seen(&log) {
            return log;
        }
        assert!(tokio::time::Instant::now() < deadline, "not in the hub's log: {log}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn parse(all: &[u8]) -> Answer {
    let text = String::from_utf8_lossy(all).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no answer: {text:?}"));
    let mut lines = head.split("\r\n");
    let status = lines.next().and_then(|l| l.split_whitespace().nth(1)).and_then(|s| s.parse().ok()).expect("a status line");
    let headers = lines.filter_map(|l| l.split_once(':')).map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string())).collect();
    Answer { status, headers, body: body.to_string() }
}

#[tokio::test]
async fn a_person_on_another_machine_uses_their_own_token_over_https_until_it_is_revoked() {
    let state = tempfile::tempdir().unwrap();
    let made = remote_token(state.path(), &["create", "alice"]).await;
    assert_eq!(made.code, 0, "{made:?}");
    let alice = made.stdout.trim().to_string();
    assert!(alice.starts_with("mcpdev_rt_"), "stdout is the token alone: {made:?}");
    assert!(made.stderr.contains("MCPDEV_HUB_TOKEN_FILE"), "says how to use it: {made:?}");
    let again = remote_token(state.path(), &["create", "alice"]).await;
    assert_eq!(again.code, 2, "one token per name: {again:?}");
    let bad = remote_token(state.path(), &["create", "al ice\u{1b}[2J"]).await;
    assert_eq!(bad.code, 2, "{bad:?}");
    assert!(!bad.stderr.contains('\u{1b}'), "a bad name is shown escaped: {bad:?}");
    let listed = remote_token(state.path(), &["list", "--json"]).await;
    let rows: serde_json::Value = serde_json::from_str(&listed.stdout).unwrap();
    assert_eq!(rows[0]["name"], "alice", "{listed:?}");
    let on_disk = std::fs::read_to_string(state.path().join("remote-tokens.json")).unwrap();
    for shown in [&listed.stdout, &listed.stderr, &on_disk] {
        assert!(!shown.contains(&alice[10..]), "no secret is listed or kept: {shown}");
    }

    let hub = remote_hub(state.path(), &["--tls", "auto", "--host-tls"]).await;
    assert!(hub.host_url.starts_with("https://"), "{}", hub.info);
    let port = port_of(&hub.host_url);
    let url = format!("https://127.0.0.1:{port}");
    let ca = ca_of(state.path());
    let elsewhere = tempfile::tempdir().unwrap();
    let file = token_file(elsewhere.path(), "alice.token", &alice);
    let file = file.to_string_lossy().into_owned();
    let as_alice = [("MCPDEV_HUB_TOKEN_FILE", file.as_str()), ("MCPDEV_CA_FILE", ca.as_str())];
    let out = cli(&["devices", "--hub", &url, "--json"], &as_alice).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("02:00:00:00:00:01"), "{out:?}");
    let log = logged(&hub, |log| log.contains("a remote token opened the control API") && log.contains("alice")).await;
    assert!(!log.contains(&alice[10..]), "and never the token: {log}");

    // A token file others can read is no secret: refused, nothing sent.
    let loose = token_file(elsewhere.path(), "loose.token", &alice);
    std::fs::set_permissions(&loose, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let out = cli(&["devices", "--hub", &url], &[("MCPDEV_HUB_TOKEN_FILE", &loose.to_string_lossy()), ("MCPDEV_CA_FILE", &ca)]).await;
    assert_eq!(out.code, 3, "{out:?}");
    assert!(out.stderr.contains("chmod 600"), "{out:?}");

    // The dashboard, over https: a link on the address alice reached the hub by; its cookie is
    // Secure, and its session lives as long as alice's token.
    let link = cli(&["dashboard", "--hub", &url, "--no-open", "--json"], &as_alice).await;
    assert_eq!(link.code, 0, "{link:?}");
    let link: serde_json::Value = serde_json::from_str(&link.stdout).unwrap();
    let link = link["url"].as_str().unwrap().to_string();
    let path = link.strip_prefix(&url).unwrap_or_else(|| panic!("a link on {url}: {link}"));
    let logged_in = https("127.0.0.1", port, &ca, "GET", path, &[]).await;
    let cookie = logged_in.header("set-cookie").unwrap_or_else(|| panic!("{logged_in:?}")).to_string();
    assert!(cookie.split("; ").any(|a| a == "Secure"), "under --host-tls the session cookie is Secure: {cookie}");
    let session = [("Cookie", cookie.split(';').next().unwrap())];
    assert_eq!(https("127.0.0.1", port, &ca, "GET", "/dashboard/api/devices", &session).await.status, 200);

    // A watch that alice holds open.
    let mut watch = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"));
    watch.args(["watch", "--hub", &url, "--json"]).envs(as_alice).env("MCPDEV_STATE_DIR", elsewhere.path()).env_remove("MCPDEV_HUB_TOKEN").stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
    let mut watch = watch.spawn().unwrap();
    let mut lines = tokio::io::BufReader::new(watch.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(DEADLINE, lines.next_line()).await.expect("the watch began").unwrap().unwrap();
    assert!(first.contains("watching"), "{first}");

    // Revoked on the hub's machine: the open watch ends, the session ends, the token opens nothing.
    let revoked = remote_token(state.path(), &["revoke", "alice"]).await;
    assert_eq!(revoked.code, 0, "{revoked:?}");
    let ended = tokio::time::timeout(DEADLINE, watch.wait()).await.expect("the revoked token's watch was not ended").unwrap();
    assert_eq!(ended.code(), Some(4), "the hub closed it");
    assert_eq!(https("127.0.0.1", port, &ca, "GET", "/dashboard/api/devices", &session).await.status, 401, "the session ended with the token");
    let out = cli(&["devices", "--hub", &url], &as_alice).await;
    assert_eq!(out.code, 3, "{out:?}");
    assert!(out.stderr.contains("not one of this hub's"), "{out:?}");
    let gone = remote_token(state.path(), &["revoke", "alice"]).await;
    assert_eq!(gone.code, 2, "{gone:?}");
    assert!(gone.stderr.contains("remote-token list"), "{gone:?}");
}

#[tokio::test]
async fn wrong_tokens_are_capped_per_peer_and_logged() {
    let state = tempfile::tempdir().unwrap();
    let alice = remote_token(state.path(), &["create", "alice"]).await.stdout.trim().to_string();
    let hub = remote_hub(state.path(), &["--tls", "auto", "--host-tls"]).await;
    let (port, ca) = (port_of(&hub.host_url), ca_of(state.path()));
    let guess = |i: usize| format!("Bearer mcpdev_rt_{i:064}");
    for i in 0..10 {
        let a = https("127.0.0.2", port, &ca, "GET", "/api/v1/link", &[("Authorization", &guess(i))]).await;
        assert_eq!(a.status, 401, "{a:?}");
    }
    // The peer's guesses are spent: even the right token is not checked now.
    let bearer = format!("Bearer {alice}");
    let a = https("127.0.0.2", port, &ca, "GET", "/api/v1/link", &[("Authorization", &bearer)]).await;
    assert_eq!(a.status, 429, "{a:?}");
    assert!(a.header("retry-after").is_some_and(|s| s.parse::<u64>().is_ok_and(|n| (1..=3).contains(&n))), "{a:?}");
    // /mcp's token is guessed at the same cost.
    let a = https("127.0.0.2", port, &ca, "POST", "/mcp", &[("Authorization", &format!("Bearer {MCP_TOKEN}"))]).await;
    assert_eq!(a.status, 429, "{a:?}");
    // Another peer is not held up by it, and the refusals are counted.
    let a = https("127.0.0.3", port, &ca, "GET", "/api/v1/link", &[("Authorization", &bearer)]).await;
    assert_ne!(a.status, 429, "{a:?}");
    assert_ne!(a.status, 401, "{a:?}");
    let metrics = https("127.0.0.3", port, &ca, "GET", "/metrics", &[("Authorization", &format!("Bearer {MCP_TOKEN}"))]).await;
    let counted = metrics.body.lines().find(|l| l.starts_with("mcpdev_refusals_total{reason=\"token_guesses\"}")).unwrap_or_else(|| panic!("{}", metrics.body));
    assert!(counted.ends_with(" 2"), "{counted}");
    logged(&hub, |log| log.contains("refused a token from a peer that sent 10 wrong ones") && log.contains("127.0.0.2")).await;
}

#[tokio::test]
async fn a_remote_token_never_travels_in_clear_text() {
    let state = tempfile::tempdir().unwrap();
    let alice = remote_token(state.path(), &["create", "alice"]).await.stdout.trim().to_string();

    // The CLI does not send it to a plain hub: it stops before it connects.
    let catcher = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    catcher.set_nonblocking(true).unwrap();
    let at = format!("http://{}", catcher.local_addr().unwrap());
    let out = cli(&["devices", "--hub", &at], &[("MCPDEV_HUB_TOKEN", &alice)]).await;
    assert_eq!(out.code, 3, "{out:?}");
    assert!(out.stderr.contains("goes only over TLS") && out.stderr.contains("nothing was sent"), "{out:?}");
    let out = cli(&["dashboard", "--no-open", "--hub", &at], &[("MCPDEV_HUB_TOKEN", &alice)]).await;
    assert_eq!(out.code, 3, "{out:?}");
    assert!(catcher.accept().is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock), "nothing reached the plain listener");

    // A hub serving plain http to other machines refuses it, and says it crossed in clear text.
    let plain = remote_hub(state.path(), &[]).await;
    let a = http(port_of(&plain.host_url), "GET", "/api/v1/link", &[("Authorization", &format!("Bearer {alice}"))]).await;
    assert_eq!(a.status, 403, "{a:?}");
    assert!(a.body.contains("only over TLS") && a.body.contains("clear text") && a.body.contains("revoke"), "{a:?}");
    drop(plain);

    // A TLS hub that only this machine reaches (loopback) takes no remote token either.
    let dir = state.path().to_string_lossy().into_owned();
    let local = HubProcess::start(&["--tls", "auto", "--host-tls"], &[("MCPDEV_STATE_DIR", &dir)]).await;
    let a = https("127.0.0.1", port_of(&local.host_url), &ca_of(state.path()), "GET", "/api/v1/link", &[("Authorization", &format!("Bearer {alice}"))]).await;
    assert_eq!(a.status, 403, "{a:?}");
    assert!(a.body.contains("only this machine reaches"), "{a:?}");

    // On the command line, anywhere, it is refused before anything runs.
    for args in [
        vec!["devices".to_string(), "--hub".into(), format!("https://{alice}@127.0.0.1:1")],
        vec!["call".into(), "x.y".into(), "--url".into(), "https://127.0.0.1:1/mcp".into(), "--header".into(), format!("Authorization: Bearer {alice}")],
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = cli(&args, &[]).await;
        assert_eq!(out.code, 2, "{out:?}");
        assert!(out.stderr.contains("carries a remote token") && out.stderr.contains("revoke"), "{out:?}");
        assert!(!out.stderr.contains(&alice[10..]), "the refusal does not print it again: {out:?}");
    }
}
