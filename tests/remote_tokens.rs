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
    https_with(from, port, ca, method, path, headers, "").await
}

/// [`https`] with a JSON body.
async fn https_with(from: &str, port: u16, ca: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Answer {
    let mut stream = Stream::open(from, port, ca, method, path, headers, body).await;
    stream.ended().await;
    parse(&stream.seen)
}

/// An answer read as it comes (a stream of server-sent events), over TLS.
struct Stream {
    tls: tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
    seen: Vec<u8>,
}

impl Stream {
    /// Sends one request (`Connection: close`) and returns before reading anything.
    async fn open(from: &str, port: u16, ca: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Self {
        mcpdev::tls::install_crypto_provider();
        let trust = mcpdev::tls::client::Trust { ca_files: vec![ca.into()], ..Default::default() };
        let config = mcpdev::tls::client::build(&trust, &[b"http/1.1"]).unwrap();
        let tcp = common::raw_http::connect_from(from, format!("127.0.0.1:{port}").parse().unwrap()).await;
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
        let mut tls = tokio::time::timeout(DEADLINE, tokio_rustls::TlsConnector::from(config).connect(name, tcp)).await.expect("handshake in time").unwrap();
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
        if !body.is_empty() {
            req.push_str("Content-Type: application/json\r\n");
        }
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(body);
        tls.write_all(req.as_bytes()).await.unwrap();
        Self { tls, seen: Vec::new() }
    }

    /// Reads until what came holds `what`; the whole of it.
    async fn until(&mut self, what: &str) -> String {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        while !String::from_utf8_lossy(&self.seen).contains(what) {
            let mut buf = [0u8; 8192];
            let n = tokio::time::timeout_at(deadline, self.tls.read(&mut buf)).await.unwrap_or_else(|_| panic!("no {what:?} in time: {}", String::from_utf8_lossy(&self.seen))).unwrap_or(0);
            assert!(n > 0, "the stream ended before {what:?}: {}", String::from_utf8_lossy(&self.seen));
            self.seen.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&self.seen).into_owned()
    }

    /// Reads to the end of the answer (the hub closes the connection after it); panics if it
    /// goes on past the deadline.
    async fn ended(&mut self) -> String {
        let mut rest = Vec::new();
        // A TLS peer may end without close_notify: an error at the end is an end too.
        let read = tokio::time::timeout(DEADLINE, self.tls.read_to_end(&mut rest)).await;
        self.seen.extend_from_slice(&rest);
        assert!(read.is_ok(), "the stream did not end: {}", String::from_utf8_lossy(&self.seen));
        String::from_utf8_lossy(&self.seen).into_owned()
    }
}

/// One HTTP/1.1 request in plain text.
async fn http(port: u16, method: &str, path: &str, headers: &[(&str, &str)]) -> Answer {
    let mut h = headers.to_vec();
    h.push(("Content-Type", "text/plain"));
    common::raw_http::request("127.0.0.1", format!("127.0.0.1:{port}").parse().unwrap(), method, path, &h, "").await
}

/// Waits until the hub's demo device is ready (onboarded), asking the dashboard's API with the
/// MCP token, within the deadline.
async fn demo_ready(port: u16, ca: &str) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let a = https("127.0.0.1", port, ca, "GET", "/dashboard/api/device?id=02:00:00:00:00:01", &[("Authorization", &format!("Bearer {MCP_TOKEN}"))]).await;
        if a.status == 200 && a.body.contains("\"phase\":\"ready\"") {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "the demo device was not ready in time: {a:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A hub that other machines reach, over TLS (plus `extra`), and two people's tokens made on
/// its machine.
struct TwoPeople {
    _state: tempfile::TempDir,
    first: String,
    second: String,
    hub: HubProcess,
    port: u16,
    ca: String,
}

async fn two_people(names: [&str; 2], extra: &[&str]) -> TwoPeople {
    let state = tempfile::tempdir().unwrap();
    let first = remote_token(state.path(), &["create", names[0]]).await.stdout.trim().to_string();
    let second = remote_token(state.path(), &["create", names[1]]).await.stdout.trim().to_string();
    let mut args = vec!["--tls", "auto", "--host-tls"];
    args.extend_from_slice(extra);
    let hub = remote_hub(state.path(), &args).await;
    let (port, ca) = (port_of(&hub.host_url), ca_of(state.path()));
    demo_ready(port, &ca).await;
    TwoPeople { _state: state, first, second, hub, port, ca }
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

/// Issue 44, item 3: wrong tokens are capped per peer, and a right one from the same address (a
/// neighbour behind the same NAT) is never held up. The margins hold on a busy machine: the cap
/// earns one more guess every 3 s, so what is asserted is counted against the time it took.
#[tokio::test]
async fn wrong_tokens_are_capped_per_peer_and_logged() {
    let TwoPeople { _state: _kept, first: alice, second: bob, hub, port, ca } = two_people(["alice", "bob"], &[]).await;
    let guess = |i: usize| format!("Bearer mcpdev_rt_{i:064}");
    // Wrong tokens from one address until the cap answers: 10, plus one per 3 s that passed.
    let started = std::time::Instant::now();
    let mut wrong = 0;
    let first_429 = loop {
        let a = https("127.0.0.2", port, &ca, "GET", "/api/v1/link", &[("Authorization", &guess(wrong))]).await;
        if a.status == 429 {
            break a;
        }
        assert_eq!(a.status, 401, "{a:?}");
        wrong += 1;
        assert!(wrong <= 40, "40 wrong tokens and no 429");
    };
    let earned = 10 + (started.elapsed().as_secs() / 3) as usize + 1;
    assert!((10..=earned).contains(&wrong), "{wrong} wrong tokens were checked before the cap, {earned} at most by the time taken");
    assert!(first_429.header("retry-after").is_some_and(|s| s.parse::<u64>().is_ok_and(|n| (1..=3).contains(&n))), "{first_429:?}");
    // The right tokens from the same address still work: alice's, bob's, and the MCP token.
    for token in [&alice, &bob] {
        let a = https("127.0.0.2", port, &ca, "GET", "/api/v1/link", &[("Authorization", &format!("Bearer {token}"))]).await;
        assert!(a.status != 429 && a.status != 401, "a right token from a guesser's address: {a:?}");
    }
    let a = https("127.0.0.2", port, &ca, "GET", "/dashboard/api/hub", &[("Authorization", &format!("Bearer {MCP_TOKEN}"))]).await;
    assert_eq!(a.status, 200, "{a:?}");
    // The wrong ones go on getting 429 (one may have been earned back meanwhile).
    let mut refused = false;
    for i in 0..5 {
        let a = https("127.0.0.2", port, &ca, "POST", "/mcp", &[("Authorization", &guess(100 + i))]).await;
        assert!(a.status == 429 || a.status == 401, "{a:?}");
        if a.status == 429 {
            refused = true;
            break;
        }
    }
    assert!(refused, "the guesser is still capped");
    // The refusals are counted and logged.
    let metrics = https("127.0.0.3", port, &ca, "GET", "/metrics", &[("Authorization", &format!("Bearer {MCP_TOKEN}"))]).await;
    let counted = metrics.body.lines().find(|l| l.starts_with("mcpdev_refusals_total{reason=\"token_guesses\"}")).unwrap_or_else(|| panic!("{}", metrics.body));
    let n: f64 = counted.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(n >= 2.0, "{counted}");
    logged(&hub, |log| log.contains("refused a wrong token from a peer that sent 10 wrong ones") && log.contains("127.0.0.2")).await;
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

/// Issue 44, item 1: a revoked person's every open stream and session ends at once, whatever
/// opened it (their token as a bearer, or a dashboard session that token logged in), and no
/// event reaches them after the revocation; another person's go on. A session is reached only
/// by the credential that opened it.
#[tokio::test]
async fn a_revocation_ends_every_stream_and_session_the_token_opened() {
    let TwoPeople { _state: state, first: carol, second: bob, hub, port, ca } = two_people(["carol", "bob"], &[]).await;
    let (as_carol, as_bob, as_mcp) = (format!("Bearer {carol}"), format!("Bearer {bob}"), format!("Bearer {MCP_TOKEN}"));
    let open = |headers: Vec<(&'static str, String)>, method: &'static str, path: &'static str, body: String| {
        let ca = ca.clone();
        async move {
            let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            Stream::open("127.0.0.1", port, &ca, method, path, &h, &body).await
        }
    };
    const TRAFFIC: &str = "/dashboard/api/traffic?id=02:00:00:00:00:01";

    // Carol's traffic stream by her bearer token, and one through a dashboard session she logged in.
    let mut by_bearer = open(vec![("Authorization", as_carol.clone())], "GET", TRAFFIC, String::new()).await;
    by_bearer.until("event: open").await;
    let link = https("127.0.0.1", port, &ca, "POST", "/dashboard/api/login-link", &[("Authorization", &as_carol)]).await;
    let link: serde_json::Value = serde_json::from_str(&link.body).unwrap_or_else(|_| panic!("{link:?}"));
    let path = link["url"].as_str().unwrap().split_once(&format!(":{port}")).unwrap().1.to_string();
    let logged_in = https("127.0.0.1", port, &ca, "GET", &path, &[]).await;
    let cookie = logged_in.header("set-cookie").unwrap_or_else(|| panic!("{logged_in:?}")).split(';').next().unwrap().to_string();
    let mut by_cookie = open(vec![("Cookie", cookie.clone())], "GET", TRAFFIC, String::new()).await;
    by_cookie.until("event: open").await;

    // Her MCP session (/mcp, with its GET stream) and a legacy /sse session, by her remote token:
    // one credential for everything.
    let init = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "carol", "version": "0"}}}).to_string();
    let accept = ("Accept", "application/json, text/event-stream");
    let made = https_with("127.0.0.1", port, &ca, "POST", "/mcp", &[("Authorization", &as_carol), accept], &init).await;
    assert_eq!(made.status, 200, "a remote token opens /mcp: {made:?}");
    let session = made.header("mcp-session-id").unwrap_or_else(|| panic!("{made:?}")).to_string();
    let initialized = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let on_session = |who: &str| vec![("Authorization", who.to_string()), ("Accept", "application/json, text/event-stream".to_string()), ("Mcp-Session-Id", session.clone()), ("MCP-Protocol-Version", "2025-11-25".to_string())];
    let h = on_session(&as_carol);
    let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
    assert_eq!(https_with("127.0.0.1", port, &ca, "POST", "/mcp", &h, &initialized).await.status, 202);
    let mut mcp_stream = open(on_session(&as_carol).into_iter().filter(|(k, _)| *k != "Accept").chain([("Accept", "text/event-stream".to_string())]).collect(), "GET", "/mcp", String::new()).await;
    mcp_stream.until("\r\n\r\n").await;
    assert!(mcp_stream.until("HTTP/1.1").await.starts_with("HTTP/1.1 200"), "{}", String::from_utf8_lossy(&mcp_stream.seen));
    let mut sse = open(vec![("Authorization", as_carol.clone())], "GET", "/sse", String::new()).await;
    sse.until("event: endpoint").await;

    // A stranger with a victim's session id: another person, or the MCP token's holder, gets the
    // answer for an unknown session.
    let list = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();
    for who in [&as_bob, &as_mcp] {
        let h = on_session(who);
        let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let a = https_with("127.0.0.1", port, &ca, "POST", "/mcp", &h, &list).await;
        assert_eq!(a.status, 404, "{a:?}");
    }

    // Bob watches too; a host's call carries a secret, and every stream sees it.
    let mut bobs = open(vec![("Authorization", as_bob.clone())], "GET", TRAFFIC, String::new()).await;
    bobs.until("event: open").await;
    let call = |word: &str| serde_json::json!({"device": "02:00:00:00:00:01", "tool": "self.screen.set_theme", "words": [format!("theme={word}")]}).to_string();
    https_with("127.0.0.1", port, &ca, "POST", "/dashboard/api/call", &[("Authorization", &as_mcp)], &call("secret=hunter2")).await;
    for stream in [&mut by_bearer, &mut by_cookie, &mut bobs] {
        stream.until("secret=hunter2").await;
    }

    // Revoked: every stream and session of carol's ends at once, and nothing more reaches her.
    let revoked = remote_token(state.path(), &["revoke", "carol"]).await;
    assert_eq!(revoked.code, 0, "{revoked:?}");
    for (what, stream) in [("traffic by bearer", &mut by_bearer), ("traffic by session", &mut by_cookie), ("/mcp GET stream", &mut mcp_stream), ("/sse", &mut sse)] {
        let all = stream.ended().await;
        assert!(all.ends_with("0\r\n\r\n") || what.starts_with('/'), "{what} ended cleanly: {all}");
    }
    https_with("127.0.0.1", port, &ca, "POST", "/dashboard/api/call", &[("Authorization", &as_mcp)], &call("secret=after-revoke")).await;
    bobs.until("secret=after-revoke").await;
    for stream in [&by_bearer, &by_cookie, &mcp_stream, &sse] {
        assert!(!String::from_utf8_lossy(&stream.seen).contains("after-revoke"));
    }
    // Her session cookie, her MCP session and her token open nothing now.
    assert_eq!(https("127.0.0.1", port, &ca, "GET", TRAFFIC, &[("Cookie", &cookie)]).await.status, 401);
    let h = on_session(&as_carol);
    let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
    assert_eq!(https_with("127.0.0.1", port, &ca, "POST", "/mcp", &h, &list).await.status, 401);
    logged(&hub, |log| log.contains("an MCP session ended: the credential that opened it was revoked")).await;
}

/// Issue 44, items 5 and 9: tasks belong to the person whose token made them, not to an address;
/// one person's flood of tasks meets their own cap and leaves room for the next person behind
/// the same address; a task is made only for a tool that exists.
#[tokio::test]
async fn tasks_belong_to_the_person_and_one_persons_flood_leaves_room_for_another() {
    // Requests without a session count on their owner: 5 tasks each here.
    let TwoPeople { _state: _kept, first: carol, second: bob, port, ca, hub: _hub } = two_people(["carol", "bob"], &["--mcp-max-tasks", "100", "--mcp-max-tasks-per-session", "5"]).await;
    const ENDPOINT: &str = "/devices/02:00:00:00:00:01/mcp";
    let ask = |from: &'static str, token: &str, body: serde_json::Value| {
        let (ca, auth) = (ca.clone(), format!("Bearer {token}"));
        async move {
            let h = [("Authorization", auth.as_str()), ("Accept", "application/json, text/event-stream"), ("MCP-Protocol-Version", "2025-11-25")];
            let a = https_with(from, port, &ca, "POST", ENDPOINT, &h, &body.to_string()).await;
            serde_json::from_str::<serde_json::Value>(&a.body).unwrap_or_else(|_| panic!("{a:?}"))
        }
    };
    let task_of = |tool: &str| serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": {}, "task": {"ttl": 60000}}});
    let get = |id: &str| serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"taskId": id}});

    // Carol floods from two addresses: five tasks, then her cap, whatever the address.
    let mut made = Vec::new();
    for i in 0..30 {
        let from = if i % 2 == 0 { "127.0.0.1" } else { "127.0.0.2" };
        let a = ask(from, &carol, task_of("self.get_device_status")).await;
        match a["result"]["task"]["taskId"].as_str() {
            Some(id) => made.push(id.to_string()),
            None => assert!(a["error"]["code"] == -32000 && a["error"]["message"].as_str().unwrap().contains("(without a session) holds 5 tasks"), "{a}"),
        }
    }
    assert_eq!(made.len(), 5, "one person's cap, from any address");
    // Bob, behind the same address, still makes tasks, and neither sees the other's.
    let bobs = ask("127.0.0.1", &bob, task_of("self.get_device_status")).await;
    let bobs = bobs["result"]["task"]["taskId"].as_str().unwrap_or_else(|| panic!("{bobs}")).to_string();
    let theirs = ask("127.0.0.1", &bob, get(&made[0])).await;
    assert_eq!(theirs["error"]["code"], -32602, "same address, another person: {theirs}");
    assert_eq!(ask("127.0.0.1", &carol, get(&bobs)).await["error"]["code"], -32602);
    // Carol reaches her task from the other address: it is hers, not the address's.
    assert_eq!(ask("127.0.0.2", &carol, get(&made[0])).await["result"]["taskId"], made[0].as_str());
    // A task is made only for a tool that exists: a clear JSON-RPC error, and no place taken.
    let none = ask("127.0.0.1", &bob, task_of("no.such.tool")).await;
    assert_eq!(none["error"]["code"], -32602, "{none}");
    assert!(none["error"]["message"].as_str().unwrap().contains("No task was created"), "{none}");
    let listed = ask("127.0.0.1", &bob, serde_json::json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/list", "params": {}})).await;
    assert_eq!(listed["result"]["tasks"].as_array().map(Vec::len), Some(1), "{listed}");
}

/// A TLS server that a CA the CLI trusts vouches for (standing in for a public certificate the
/// system's roots accept), recording what each connection sent before the head's end.
struct Catcher {
    port: u16,
    seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    connections: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Catcher {
    /// A catcher whose certificate (for 127.0.0.1) comes from a CA made in `tls_dir`.
    async fn start(tls_dir: &Path) -> Self {
        use rustls::pki_types::pem::PemObject;
        mcpdev::tls::install_crypto_provider();
        let ca = mcpdev::hub::certs::HubCa::load_or_create(tls_dir).unwrap();
        ca.issue_leaf(&["127.0.0.1".to_string()], std::time::SystemTime::now()).unwrap();
        let chain: Vec<_> = rustls::pki_types::CertificateDer::pem_file_iter(tls_dir.join("hub.pem")).unwrap().map(Result::unwrap).collect();
        let key = rustls::pki_types::PrivateKeyDer::from_pem_file(tls_dir.join("hub.key")).unwrap();
        let mut config = rustls::ServerConfig::builder().with_no_client_auth().with_single_cert(chain, key).unwrap();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (seen, connections) = (std::sync::Arc::new(std::sync::Mutex::new(Vec::new())), std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0)));
        let (into, count) = (seen.clone(), connections.clone());
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let (acceptor, into) = (acceptor.clone(), into.clone());
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                    let mut got = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                        match tls.read(&mut buf).await {
                            Ok(n) if n > 0 => got.extend_from_slice(&buf[..n]),
                            _ => break,
                        }
                    }
                    into.lock().unwrap().push(String::from_utf8_lossy(&got).into_owned());
                });
            }
        });
        Self { port, seen, connections }
    }

    /// Whether any request that reached it carried an `Authorization` header.
    fn got_a_credential(&self) -> bool {
        self.seen.lock().unwrap().iter().any(|r| r.to_ascii_lowercase().contains("authorization:"))
    }
}

/// Issue 44, item 2, and issue 47, item 6: a remote token goes only to the hub it was made for,
/// checked by that hub's CA (named in the token's file), whatever URL a file names; a
/// `mcpdev.toml` in the working directory never redirects it; and the one token opens `/mcp` too,
/// with nothing on the command line.
#[tokio::test]
async fn a_remote_token_goes_only_to_its_own_hub_whatever_a_file_names() {
    let state = tempfile::tempdir().unwrap();
    let hub = remote_hub(state.path(), &["--tls", "auto", "--host-tls"]).await;
    let port = port_of(&hub.host_url);
    demo_ready(port, &ca_of(state.path())).await;
    // Made once the hub has its CA: the file names it.
    let made = remote_token(state.path(), &["create", "alice"]).await;
    let lines: Vec<&str> = made.stdout.lines().collect();
    assert!(lines.len() == 2 && lines[1].starts_with("hub-ca-sha256 "), "{made:?}");
    let elsewhere = tempfile::tempdir().unwrap();
    let pinned = token_file(elsewhere.path(), "alice.token", &made.stdout);
    let bare = token_file(elsewhere.path(), "bare.token", lines[0]);

    // The attacker's server, vouched for by a CA this CLI trusts without being asked (the local
    // hub's own CA in its state directory, standing in for the system's roots).
    let cli_state = tempfile::tempdir().unwrap();
    let catcher = Catcher::start(&cli_state.path().join("tls")).await;
    let attacker = format!("https://127.0.0.1:{}", catcher.port);
    let repo = tempfile::tempdir().unwrap();
    std::fs::write(repo.path().join("mcpdev.toml"), format!("hub = \"{attacker}\"\n")).unwrap();
    let run = |args: Vec<String>, token_file: &Path, cwd: &Path| {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"));
        cmd.args(&args).current_dir(cwd).env("MCPDEV_STATE_DIR", cli_state.path()).env("MCPDEV_RUNTIME_DIR", cli_state.path()).env("MCPDEV_HUB_TOKEN_FILE", token_file).env("NO_COLOR", "1");
        for var in ["MCPDEV_HUB", "MCPDEV_HUB_TOKEN", "MCPDEV_CA_FILE", "MCPDEV_CA_FINGERPRINT", "MCPDEV_MCP_TOKEN"] {
            cmd.env_remove(var);
        }
        async move {
            let out = tokio::time::timeout(Duration::from_secs(60), cmd.stdin(Stdio::null()).kill_on_drop(true).output()).await.expect("command hung").unwrap();
            Outcome { code: out.status.code().unwrap_or(-1), stdout: String::from_utf8_lossy(&out.stdout).into_owned(), stderr: String::from_utf8_lossy(&out.stderr).into_owned() }
        }
    };
    let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();

    // A cloned repository's mcpdev.toml names the attacker: refused before connecting, naming the file.
    for file in [&pinned, &bare] {
        let out = run(words(&["devices"]), file, repo.path()).await;
        assert_eq!(out.code, 3, "{out:?}");
        assert!(out.stderr.contains("mcpdev.toml") && out.stderr.contains("--hub") && out.stderr.contains("nothing was sent"), "{out:?}");
    }
    assert_eq!(catcher.connections.load(std::sync::atomic::Ordering::SeqCst), 0, "nothing reached the attacker");
    // Named by the person, but with nothing naming the hub's CA: the system's roots alone never carry it.
    let out = run(words(&["devices", "--hub", &attacker]), &bare, elsewhere.path()).await;
    assert_eq!(out.code, 3, "{out:?}");
    assert!(out.stderr.contains("MCPDEV_CA_FILE") && out.stderr.contains("nothing was sent"), "{out:?}");
    assert_eq!(catcher.connections.load(std::sync::atomic::Ordering::SeqCst), 0);
    // The pinned token, pointed at the attacker by a mistyped or planted URL: the attacker's
    // certificate is not of alice's hub's CA, so no request, and no token, reaches it.
    for args in [words(&["devices", "--hub", &attacker]), words(&["tools", "list", "--url", &format!("{attacker}/mcp")]), words(&["dashboard", "--no-open", "--hub", &attacker])] {
        let out = run(args.clone(), &pinned, elsewhere.path()).await;
        assert_eq!(out.code, 3, "{args:?}: {out:?}");
        assert!(out.stderr.contains("pinned"), "{args:?}: {out:?}");
        assert!(!catcher.got_a_credential(), "{args:?}: {:?}", catcher.seen.lock().unwrap());
    }
    let out = run(words(&["tools", "list", "--url", &format!("{attacker}/mcp")]), &pinned, elsewhere.path()).await;
    assert!(out.stderr.contains("goes only to the hub whose CA its file names") && out.stderr.contains("run without MCPDEV_HUB_TOKEN_FILE"), "what to do for another server: {out:?}");
    assert!(catcher.seen.lock().unwrap().iter().all(String::is_empty), "no request at all: {:?}", catcher.seen.lock().unwrap());

    // Her own hub: the pinned file alone (no CA file, no --header) opens the CLI and /mcp.
    let own = format!("https://127.0.0.1:{port}");
    let out = run(words(&["devices", "--hub", &own, "--json"]), &pinned, elsewhere.path()).await;
    assert_eq!(out.code, 0, "{out:?}");
    let out = run(words(&["tools", "list", "--url", &format!("{own}/devices/02:00:00:00:00:01/mcp"), "--json"]), &pinned, elsewhere.path()).await;
    assert_eq!(out.code, 0, "one credential opens /mcp too: {out:?}");
    assert!(out.stdout.contains("self.get_device_status"), "{out:?}");
}

/// Issue 47, item 6: under `--host-tls`, a hub other machines reach needs no shared MCP token,
/// and its MCP endpoints still take none but a person's (or, from this machine, the control)
/// token: a request without one, or with a guess, is refused.
#[tokio::test]
async fn under_host_tls_a_remote_hub_needs_no_shared_mcp_token_and_mcp_still_needs_a_token() {
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().to_string_lossy().into_owned();
    let hub = HubProcess::start_capturing(&["--host-addr", "0.0.0.0:0", "--demo", "1", "--tls", "auto", "--host-tls"], &[("MCPDEV_STATE_DIR", &dir)]).await;
    let (port, ca) = (port_of(&hub.host_url), ca_of(state.path()));
    let dana = remote_token(state.path(), &["create", "dana"]).await.stdout.lines().next().unwrap().to_string();
    let init = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "dana", "version": "0"}}}).to_string();
    let accept = ("Accept", "application/json, text/event-stream");
    for (from, headers) in [("127.0.0.2", vec![accept]), ("127.0.0.3", vec![accept, ("Authorization", "Bearer a-guess")])] {
        let a = https_with(from, port, &ca, "POST", "/mcp", &headers, &init).await;
        assert_eq!(a.status, 401, "{a:?}");
    }
    let bearer = format!("Bearer {dana}");
    let a = https_with("127.0.0.4", port, &ca, "POST", "/mcp", &[accept, ("Authorization", &bearer)], &init).await;
    assert_eq!(a.status, 200, "a person's own token opens /mcp: {a:?}");
}
