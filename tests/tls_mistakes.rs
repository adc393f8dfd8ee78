//! The TLS mistakes of a first hour (issue 47), each told plainly before a device finds out:
//! - the name given to `--allowed-host` is in the hub's `--tls auto` certificate (docs/tls.md,
//!   set-up 3, works as written), and a name that is not is shown as people write it;
//! - `serve` warns at start about an expired certificate, or one without a name it is reached by;
//! - `ws://` or `http://` at a TLS port gets "this port speaks TLS: use wss://…" (from the hub, and
//!   from any TLS server), and `sim` stops instead of retrying forever.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::pki::Pki;
use common::ws::DEADLINE;
use common::{HubProcess, Outcome};

fn port_of(url: &str) -> u16 {
    url.rsplit(':').next().unwrap().split('/').next().unwrap().parse().unwrap()
}

/// `mcpdev ARGS` with `env` and a state directory of its own, to completion.
async fn cli(args: &[&str], env: &[(&str, &str)]) -> Outcome {
    let own = tempfile::tempdir().unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"));
    cmd.args(args).env("MCPDEV_STATE_DIR", own.path()).env("NO_COLOR", "1").env_remove("MCPDEV_HUB").env_remove("MCPDEV_CA_FILE").stdin(Stdio::null()).kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output()).await.expect("the command ended in time, without retrying forever").unwrap();
    Outcome { code: out.status.code().unwrap_or(-1), stdout: String::from_utf8_lossy(&out.stdout).into_owned(), stderr: String::from_utf8_lossy(&out.stderr).into_owned() }
}

/// A TLS handshake with the hub's `port` for the name `name`, verified with the CA file `ca`.
async fn handshake(port: u16, name: &str, ca: &Path) -> Result<(), String> {
    mcpdev::tls::install_crypto_provider();
    let trust = mcpdev::tls::client::Trust { ca_files: vec![ca.to_path_buf()], ..Default::default() };
    let config = mcpdev::tls::client::build(&trust, &[b"http/1.1"]).unwrap();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let server_name = rustls::pki_types::ServerName::try_from(name.to_string()).unwrap();
    match tokio::time::timeout(DEADLINE, tokio_rustls::TlsConnector::from(config).connect(server_name, tcp)).await.expect("handshake in time") {
        Ok(_) => Ok(()),
        Err(e) => Err(mcpdev::tls::client::explain(&e).unwrap_or_else(|| e.to_string())),
    }
}

#[tokio::test]
async fn the_names_given_to_allowed_host_and_public_host_are_in_the_auto_certificate() {
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().to_string_lossy().into_owned();
    let hub = HubProcess::start_capturing(
        &["--tls", "auto", "--host-tls", "--allowed-host", "127.0.0.2", "--allowed-host", "hub.example:8443", "--public-host", "hub.public.example"],
        &[("MCPDEV_STATE_DIR", &dir), ("MCPDEV_MCP_TOKEN", "an-mcp-token-for-this-test")],
    )
    .await;
    let ca = state.path().join("tls/ca.pem");
    let port = port_of(&hub.host_url);
    for name in ["127.0.0.2", "hub.example", "hub.public.example", "localhost", "127.0.0.1"] {
        handshake(port, name, &ca).await.unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    // A name the hub was not given: refused, with the names it carries as people write them.
    let said = handshake(port, "127.0.0.3", &ca).await.expect_err("127.0.0.3 is not one of its names");
    assert!(said.contains("is for hub.public.example, 127.0.0.2, hub.example, localhost") && said.contains("not for 127.0.0.3"), "{said}");
    // Then this machine's name and addresses, and loopback.
    assert!(said.contains(", 127.0.0.1, ") && said.contains(", ::1"), "{said}");
    assert!(!said.contains("DnsName") && !said.contains("IpAddress") && !said.contains('"'), "{said}");
    let log = hub.stderr.as_ref().unwrap().lock().unwrap().clone();
    assert!(!log.contains("is not for") && !log.contains("expired"), "no warning for a certificate that covers its names: {log}");
}

#[tokio::test]
async fn serve_warns_at_start_about_an_expired_certificate_or_one_without_its_names() {
    let pki = Pki::new();
    let (cert, key) = pki.leaf("expired", &["127.0.0.1", "localhost"], -30, -1);
    let hub = HubProcess::start_capturing(&["--tls-cert", cert.to_str().unwrap(), "--tls-key", key.to_str().unwrap()], &[]).await;
    let log = hub.logged(|l| l.contains("expired")).await;
    let line = log.lines().find(|l| l.contains("expired")).unwrap();
    assert!(line.contains("WARN") && line.contains("expired.pem expired on 20") && line.contains("renew it"), "{line}");
    drop(hub);

    // Reached by hub.lan (--public-host) and 127.0.0.2 (--allowed-host), the certificate carries neither.
    let (cert, key) = pki.leaf("other", &["hub.other.example", "192.0.2.9"], -1, 30);
    let hub = HubProcess::start_capturing(
        &["--tls-cert", cert.to_str().unwrap(), "--tls-key", key.to_str().unwrap(), "--public-host", "hub.lan", "--allowed-host", "127.0.0.2:8001"],
        &[("MCPDEV_MCP_TOKEN", "an-mcp-token-for-this-test")],
    )
    .await;
    let log = hub.logged(|l| l.contains("is not for")).await;
    let line = log.lines().find(|l| l.contains("is not for")).unwrap();
    assert!(line.contains("WARN") && line.contains("other.pem is not for hub.lan, 127.0.0.2 (it is for hub.other.example, 192.0.2.9)"), "{line}");
    assert!(!line.contains("DnsName"), "{line}");
    drop(hub);

    // A good one: not a word.
    let (cert, key) = pki.leaf("good", &["hub.lan", "127.0.0.1"], -1, 30);
    let hub = HubProcess::start_capturing(&["--tls-cert", cert.to_str().unwrap(), "--tls-key", key.to_str().unwrap(), "--public-host", "hub.lan"], &[]).await;
    // The hub is up (its `listening` line came after the check); one request more makes sure its
    // log has caught up.
    let out = common::mcpdev(&hub, &["devices"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    let log = hub.stderr.as_ref().unwrap().lock().unwrap().clone();
    assert!(!log.contains("is not for") && !log.contains("expired"), "{log}");
}

#[tokio::test]
async fn ws_or_http_at_a_tls_port_is_told_to_use_wss_or_https_and_sim_stops() {
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().to_string_lossy().into_owned();
    let hub = HubProcess::start_capturing(&["--tls", "auto", "--host-tls"], &[("MCPDEV_STATE_DIR", &dir)]).await;
    let device_port = port_of(&hub.device_url);
    let plain = format!("ws://127.0.0.1:{device_port}/xiaozhi/v1/");

    // A virtual device at ws:// stops with the URL to use (exit 2), instead of retrying forever.
    let out = cli(&["sim", "--url", &plain, "--device-id", "02:00:00:00:0b:01"], &[]).await;
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("this port speaks TLS") && out.stderr.contains(&format!("use wss://127.0.0.1:{device_port}/xiaozhi/v1/")), "{out:?}");
    assert!(!out.stderr.contains("httparse"), "{out:?}");

    // The CLI at http:// of the TLS host listener: the same, with https://.
    let host_port = port_of(&hub.host_url);
    let out = cli(&["devices", "--hub", &format!("http://127.0.0.1:{host_port}")], &[("MCPDEV_RUNTIME_DIR", &hub.runtime_dir)]).await;
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("this port speaks TLS") && out.stderr.contains(&format!("use https://127.0.0.1:{host_port}")), "{out:?}");

    // Any client (curl, a browser): a plain answer that says so.
    let answer = common::raw_http::request("127.0.0.1", format!("127.0.0.1:{device_port}").parse().unwrap(), "GET", "/xiaozhi/ota/", &[], "").await;
    assert_eq!(answer.status, 400, "{answer:?}");
    assert!(answer.body.contains("this port speaks TLS: use wss://"), "{answer:?}");
    hub.logged(|l| l.contains("a plain-text request (ws:// or http://) on a TLS port")).await;

    // The hub still serves TLS on those ports.
    handshake(device_port, "127.0.0.1", &state.path().join("tls/ca.pem")).await.unwrap();
}

/// Another TLS server (not a hub) answers a plain request with a TLS alert: `sim` says what it
/// means, once, and stops.
#[tokio::test]
async fn a_tls_alert_in_answer_to_ws_is_read_as_a_tls_port() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = server.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = server.accept().await {
            let mut buf = [0u8; 2048];
            let _ = tcp.read(&mut buf).await;
            let _ = tcp.write_all(&[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x32]).await;
        }
    });
    let out = cli(&["sim", "--url", &format!("ws://127.0.0.1:{port}/xiaozhi/v1/"), "--device-id", "02:00:00:00:0b:02"], &[]).await;
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("this port speaks TLS") && out.stderr.contains(&format!("use wss://127.0.0.1:{port}/xiaozhi/v1/")), "{out:?}");
}
