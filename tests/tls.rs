//! TLS on the hub's listeners (docs/tls.md), end to end, with the built binary: the lab set-up
//! (`--tls auto`), a certificate of the person's own (`--tls-cert/--tls-key`, renewed on disk),
//! a remote CLI and MCP host (`--host-tls`), and the adversaries: a man in the middle with
//! another certificate, an expired or wrong-name certificate, handshakes that never finish, and
//! old protocol versions or suites (`openssl s_client`).

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::ws::DEADLINE;
use common::pki::Pki;
use common::{HubProcess, Outcome};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Runs `mcpdev ARGS` with `env`, to completion.
async fn cli(hub: &HubProcess, args: &[&str], env: &[(&str, &str)]) -> Outcome {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"));
    cmd.args(args).env("MCPDEV_RUNTIME_DIR", &hub.runtime_dir).env("NO_COLOR", "1").env_remove("MCPDEV_HUB").stdin(Stdio::null()).kill_on_drop(true);
    // Never the user's own state directory (its tls/ca.pem would be trusted implicitly).
    let state = tempfile::tempdir().unwrap();
    cmd.env("MCPDEV_STATE_DIR", state.path());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output()).await.expect("command hung").unwrap();
    Outcome { code: out.status.code().unwrap_or(-1), stdout: String::from_utf8_lossy(&out.stdout).into_owned(), stderr: String::from_utf8_lossy(&out.stderr).into_owned() }
}

/// The `tls` block of the hub's `listening` line.
fn ca_file(hub: &HubProcess) -> String {
    hub.info["tls"]["ca_file"].as_str().unwrap_or_else(|| panic!("no tls.ca_file in {}", hub.info)).to_string()
}

fn port_of(url: &str) -> u16 {
    url.rsplit(':').next().unwrap().split('/').next().unwrap().parse().unwrap()
}

/// A hub with `--tls auto` and its own state directory.
async fn lab_hub(extra: &[&str], state: &Path) -> HubProcess {
    let mut args = vec!["--tls", "auto"];
    args.extend_from_slice(extra);
    let dir = state.to_string_lossy().into_owned();
    HubProcess::start_capturing(&args, &[("MCPDEV_STATE_DIR", &dir)]).await
}

/// The SHA-256 fingerprint of the certificate a fresh TLS handshake with `port` gets.
async fn served_fingerprint(port: u16) -> String {
    #[derive(Debug)]
    struct Any(Arc<rustls::crypto::CryptoProvider>);
    impl rustls::client::danger::ServerCertVerifier for Any {
        fn verify_server_cert(
            &self,
            _: &rustls::pki_types::CertificateDer<'_>,
            _: &[rustls::pki_types::CertificateDer<'_>],
            _: &rustls::pki_types::ServerName<'_>,
            _: &[u8],
            _: rustls::pki_types::UnixTime,
        ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
            Ok(rustls::client::danger::ServerCertVerified::assertion())
        }
        fn verify_tls12_signature(&self, m: &[u8], c: &rustls::pki_types::CertificateDer<'_>, d: &rustls::DigitallySignedStruct) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls12_signature(m, c, d, &self.0.signature_verification_algorithms)
        }
        fn verify_tls13_signature(&self, m: &[u8], c: &rustls::pki_types::CertificateDer<'_>, d: &rustls::DigitallySignedStruct) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls13_signature(m, c, d, &self.0.signature_verification_algorithms)
        }
        fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
            self.0.signature_verification_algorithms.supported_schemes()
        }
    }
    let provider = mcpdev::tls::provider();
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(mcpdev::tls::VERSIONS)
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Any(provider)))
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config)).connect("localhost".try_into().unwrap(), tcp).await.unwrap();
    mcpdev::tls::fingerprint(&tls.get_ref().1.peer_certificates().unwrap()[0])
}

/// `mcpdev sim` as a child, its stderr collected.
fn sim(url: &str, device: &str, env: &[(&str, &str)]) -> tokio::process::Child {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"));
    cmd.args(["sim", "--url", url, "--device-id", device]).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).kill_on_drop(true);
    let state = std::env::temp_dir().join(format!("mcpdev-tls-sim-{}", std::process::id()));
    cmd.env("MCPDEV_STATE_DIR", &state).env("NO_COLOR", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

/// Waits for a `sim` that must give up, and returns its exit code and stderr.
async fn sim_refused(url: &str, env: &[(&str, &str)]) -> (i32, String) {
    let child = sim(url, "02:00:00:00:0a:01", env);
    let out = tokio::time::timeout(DEADLINE, child.wait_with_output()).await.expect("sim kept retrying a server it cannot trust").unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// `tools list --json` of `device` through the hub, waiting for it.
async fn tools_of(hub: &HubProcess, device: &str, env: &[(&str, &str)]) -> Outcome {
    cli(hub, &["tools", "list", "-d", device, "--wait", "20s", "--json", "--hub", &hub.host_url.clone()], env).await
}

#[tokio::test]
async fn the_lab_hub_serves_wss_and_https_and_a_device_with_its_ca_gets_in() {
    let state = tempfile::tempdir().unwrap();
    let hub = lab_hub(&[], state.path()).await;
    assert!(hub.device_url.starts_with("wss://"), "{}", hub.info);
    assert!(hub.info["ota"].as_str().unwrap().starts_with("https://"), "{}", hub.info);
    // The contract with `mcpdev flash`: the CA in the state directory's tls/, everything private.
    let tls = state.path().join("tls");
    assert_eq!(PathBuf::from(ca_file(&hub)), tls.join("ca.pem"));
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&tls).unwrap().permissions().mode() & 0o777, 0o700);
        for f in ["ca.pem", "ca.key", "hub.pem", "hub.key"] {
            assert_eq!(std::fs::metadata(tls.join(f)).unwrap().permissions().mode() & 0o777, 0o600, "{f}");
        }
    }
    let ca_pem = std::fs::read(tls.join("ca.pem")).unwrap();
    let ca_der = rustls::pki_types::pem::PemObject::from_pem_slice(&ca_pem).map(|c: rustls::pki_types::CertificateDer| c.to_vec()).unwrap();
    assert_eq!(hub.info["tls"]["fingerprint"].as_str().unwrap(), mcpdev::tls::fingerprint(&ca_der), "the fingerprint printed is the CA's");

    let ca = ca_file(&hub);
    let url = format!("wss://127.0.0.1:{}/xiaozhi/v1/", port_of(&hub.device_url));
    let _device = sim(&url, "02:00:00:00:0a:02", &[("MCPDEV_CA_FILE", &ca)]);
    let listed = tools_of(&hub, "02:00:00:00:0a:02", &[]).await;
    assert_eq!(listed.code, 0, "{listed:?}");
    assert!(listed.json()["tools"].as_array().is_some_and(|t| !t.is_empty()), "{}", listed.stdout);

    // OTA over https hands out wss:// (and https:// for vision).
    mcpdev::tls::install_crypto_provider();
    let client = reqwest::Client::builder()
        .tls_backend_preconfigured((*mcpdev::tls::client::build(&mcpdev::tls::client::Trust { ca_files: vec![ca.clone().into()], ..Default::default() }, &[b"http/1.1"]).unwrap()).clone())
        .build()
        .unwrap();
    let answer: Value = client
        .post(hub.info["ota"].as_str().unwrap().replace("0.0.0.0", "127.0.0.1"))
        .header("Device-Id", "02:00:00:00:0a:03")
        .header("Client-Id", "7b94d69a-9808-4c59-9c9b-704333b38aff")
        .body(r#"{"application":{"version":"1.0.0"}}"#)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(answer["websocket"]["url"].as_str().unwrap().starts_with("wss://"), "{answer}");
}

#[tokio::test]
async fn a_man_in_the_middle_with_another_certificate_is_refused_by_sim_and_the_cli() {
    let (ours, theirs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let hub = lab_hub(&["--host-tls"], ours.path()).await;
    let attacker = lab_hub(&["--host-tls"], theirs.path()).await;
    let ca = ca_file(&hub);
    let fingerprint = hub.info["tls"]["fingerprint"].as_str().unwrap().to_string();
    let evil_device = format!("wss://127.0.0.1:{}/xiaozhi/v1/", port_of(&attacker.device_url));

    // sim: another CA's certificate is not the hub's; it says so and stops (exit 3).
    let (code, said) = sim_refused(&evil_device, &[("MCPDEV_CA_FILE", &ca)]).await;
    assert_eq!(code, 3, "{said}");
    assert!(said.contains("did not prove who it is") && said.contains("does not trust"), "{said}");
    // With the fingerprint pinned instead: refused too, and the message names the pin.
    let (code, said) = sim_refused(&evil_device, &[("MCPDEV_CA_FINGERPRINT", &fingerprint)]).await;
    assert_eq!(code, 3, "{said}");
    assert!(said.contains("pinned"), "{said}");

    // The CLI: the attacker's host listener gets no control token and no request.
    assert!(attacker.host_url.starts_with("https://"), "{}", attacker.info);
    let out = cli(&attacker, &["devices", "--hub", &attacker.host_url], &[("MCPDEV_CA_FILE", &ca), ("MCPDEV_HUB_TOKEN", "the-real-hubs-token")]).await;
    assert_eq!(out.code, 3, "{out:?}");
    assert!(out.stderr.contains("did not prove who it is"), "{out:?}");
    let out = cli(&attacker, &["devices", "--hub", &attacker.host_url], &[("MCPDEV_CA_FINGERPRINT", &fingerprint), ("MCPDEV_HUB_TOKEN", "the-real-hubs-token")]).await;
    assert_eq!(out.code, 3, "{out:?}");

    // The real hub, reached the same ways, answers.
    let out = cli(&hub, &["devices", "--json", "--hub", &hub.host_url], &[("MCPDEV_CA_FILE", &ca)]).await;
    assert_eq!(out.code, 0, "{out:?}");
    let out = cli(&hub, &["devices", "--json", "--hub", &hub.host_url], &[("MCPDEV_CA_FINGERPRINT", &fingerprint)]).await;
    assert_eq!(out.code, 0, "{out:?}");
    // And without any trust given, a CLI that does not know the hub's CA refuses it too.
    let out = cli(&hub, &["devices", "--hub", &hub.host_url], &[]).await;
    assert_eq!(out.code, 3, "{out:?}");
}

#[tokio::test]
async fn expired_and_wrong_name_certificates_are_refused_with_what_is_wrong() {
    let pki = Pki::new();
    let ca = pki.ca().to_string_lossy().into_owned();
    let (cert, key) = pki.leaf("expired", &["127.0.0.1", "localhost"], -30, -1);
    let hub = HubProcess::start(&["--tls-cert", cert.to_str().unwrap(), "--tls-key", key.to_str().unwrap()], &[]).await;
    let (code, said) = sim_refused(&format!("wss://127.0.0.1:{}/xiaozhi/v1/", port_of(&hub.device_url)), &[("MCPDEV_CA_FILE", &ca)]).await;
    assert_eq!(code, 3, "{said}");
    assert!(said.contains("expired"), "{said}");
    drop(hub);

    let (cert, key) = pki.leaf("other", &["hub.other.example"], -1, 30);
    let hub = HubProcess::start(&["--tls-cert", cert.to_str().unwrap(), "--tls-key", key.to_str().unwrap()], &[]).await;
    let (code, said) = sim_refused(&format!("wss://127.0.0.1:{}/xiaozhi/v1/", port_of(&hub.device_url)), &[("MCPDEV_CA_FILE", &ca)]).await;
    assert_eq!(code, 3, "{said}");
    assert!(said.contains("hub.other.example") && said.contains("not for 127.0.0.1"), "{said}");

    // A key that is not the certificate's is refused at start, naming the files.
    let (_, other_key) = pki.leaf("stray", &["127.0.0.1"], -1, 30);
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"))
        .args(["serve", "--device-addr", "127.0.0.1:0", "--host-addr", "127.0.0.1:0", "--tls-cert", cert.to_str().unwrap(), "--tls-key", other_key.to_str().unwrap()])
        .env("MCPDEV_STATE_DIR", pki.dir.path())
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("not the certificate's") && said.contains("stray.key"), "{said}");
}

#[tokio::test]
async fn a_renewed_certificate_is_served_without_dropping_a_connected_device() {
    let pki = Pki::new();
    let ca = pki.ca().to_string_lossy().into_owned();
    let (cert, key) = pki.leaf("hub", &["127.0.0.1"], -1, 30);
    let hub = HubProcess::start(&["--tls-cert", cert.to_str().unwrap(), "--tls-key", key.to_str().unwrap()], &[]).await;
    let port = port_of(&hub.device_url);
    let _device = sim(&format!("wss://127.0.0.1:{port}/xiaozhi/v1/"), "02:00:00:00:0b:01", &[("MCPDEV_CA_FILE", &ca)]);
    assert_eq!(tools_of(&hub, "02:00:00:00:0b:01", &[]).await.code, 0);
    let session = |out: &Outcome| out.json().as_array().unwrap().iter().find(|d| d["device_id"] == "02:00:00:00:0b:01").map(|d| d["session_id"].clone());
    let before = cli(&hub, &["devices", "--json", "--hub", &hub.host_url], &[]).await;
    let first = served_fingerprint(port).await;

    // certbot's renewal: a new key and certificate, each file replaced whole.
    let (new_cert, new_key) = pki.leaf("renewed", &["127.0.0.1"], -1, 60);
    std::fs::rename(&new_key, &key).unwrap();
    std::fs::rename(&new_cert, &cert).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let renewed = loop {
        let now = served_fingerprint(port).await;
        if now != first {
            break now;
        }
        assert!(Instant::now() < deadline, "the renewed certificate was not picked up");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let new_der: rustls::pki_types::CertificateDer = rustls::pki_types::pem::PemObject::from_pem_file(&cert).unwrap();
    assert_eq!(renewed, mcpdev::tls::fingerprint(&new_der));
    // The device connected before the renewal is still on its session.
    let after = cli(&hub, &["devices", "--json", "--hub", &hub.host_url], &[]).await;
    assert_eq!(session(&after), session(&before), "{after:?}");
    assert!(session(&after).is_some());
}

#[tokio::test]
async fn handshakes_that_never_finish_hold_pre_hello_slots_until_their_deadline() {
    let state = tempfile::tempdir().unwrap();
    let hub = lab_hub(&["--max-pre-hello-per-peer", "2", "--tls-handshake-timeout", "2s", "--accept-queue-timeout", "10s"], state.path()).await;
    let port = port_of(&hub.device_url);
    // Two peers that open a connection and send half a ClientHello, then nothing.
    let mut stalled = Vec::new();
    for _ in 0..2 {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        s.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01]).await.unwrap();
        stalled.push(s);
    }
    let opened = Instant::now();
    // A real client behind them waits for a slot: its handshake completes only once the hub
    // dropped the stalled ones at their deadline.
    let real = tokio::spawn(async move {
        let f = served_fingerprint(port).await;
        (Instant::now(), f)
    });
    let mut closed_at = Vec::new();
    for mut s in stalled {
        let mut buf = [0u8; 64];
        let n = tokio::time::timeout(DEADLINE, s.read(&mut buf)).await.expect("a stalled handshake was never closed").unwrap_or(0);
        assert_eq!(n, 0, "the hub answered half a hello");
        closed_at.push(Instant::now());
    }
    let (done, _) = tokio::time::timeout(DEADLINE, real).await.expect("the queued handshake never ran").unwrap();
    assert!(closed_at.iter().all(|c| c.duration_since(opened) >= Duration::from_millis(1500)), "closed before the deadline: {:?}", closed_at.iter().map(|c| c.duration_since(opened)).collect::<Vec<_>>());
    let first_freed = *closed_at.iter().min().unwrap();
    assert!(done + Duration::from_millis(100) >= first_freed, "the queued handshake ran while both slots were held");
    // The log is read from the hub's stderr as it comes: waited for, within the tests' deadline.
    hub.logged(|l| l.contains("no TLS handshake within 2s")).await;
}

#[tokio::test]
async fn openssl_sees_tls_1_2_and_1_3_only_with_forward_secret_suites() {
    let state = tempfile::tempdir().unwrap();
    let hub = lab_hub(&[], state.path()).await;
    let port = port_of(&hub.device_url);
    let ca = ca_file(&hub);
    let s_client = |args: Vec<String>| {
        let mut cmd = std::process::Command::new("openssl");
        cmd.args(["s_client", "-connect", &format!("127.0.0.1:{port}"), "-CAfile", &ca, "-verify_return_error", "-brief"]).args(args);
        let out = cmd.stdin(Stdio::null()).output().expect("openssl is installed");
        (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
    };
    let (ok, said) = s_client(vec!["-tls1_3".into()]);
    assert!(ok && said.contains("TLSv1.3") && said.contains("Verification: OK"), "{said}");
    let (ok, said) = s_client(vec!["-tls1_2".into()]);
    assert!(ok && said.contains("TLSv1.2") && said.contains("ECDHE"), "{said}");
    for old in ["-tls1_1", "-tls1"] {
        let (ok, said) = s_client(vec![old.into(), "-cipher".into(), "ALL:@SECLEVEL=0".into()]);
        assert!(!ok, "{old} was accepted: {said}");
    }
    // TLS 1.2 suites without forward secrecy (static RSA, plain PSK) are never chosen.
    for suite in ["AES128-SHA", "AES256-GCM-SHA384", "AES128-GCM-SHA256"] {
        let (ok, said) = s_client(vec!["-tls1_2".into(), "-cipher".into(), suite.into()]);
        assert!(!ok, "{suite} was accepted: {said}");
    }
}

/// A Python of a venv `.ci/test` makes (`$var`), else `.ci/<venv>/bin/python`; missing fails.
fn python(var: &str, venv: &str) -> PathBuf {
    common::installed(var, common::repo_path(&format!(".ci/{venv}/bin/python")), &format!("the Python of .ci/{venv}"))
}

#[tokio::test]
async fn a_remote_cli_and_the_mcp_python_sdk_reach_the_hub_over_https() {
    let state = tempfile::tempdir().unwrap();
    let hub = lab_hub(&["--host-tls", "--demo", "1"], state.path()).await;
    assert!(hub.host_url.starts_with("https://"), "{}", hub.info);
    let ca = ca_file(&hub);
    let mcp = format!("{}/mcp", hub.host_url);
    let tool = "dev-020000000001.self.audio_speaker.set_volume";
    // The CLI, as an MCP client of the hub's /mcp over https.
    let out = cli(&hub, &["call", tool, "volume=33", "--url", &mcp, "--json"], &[("MCPDEV_CA_FILE", &ca)]).await;
    assert_eq!(out.code, 0, "{out:?}");
    let out = cli(&hub, &["call", tool, "volume=33", "--url", &mcp], &[]).await;
    assert_eq!(out.code, 3, "a CLI that does not know the CA refuses the hub: {out:?}");
    assert!(out.stderr.contains("did not prove who it is"), "{out:?}");

    // The official MCP SDK (httpx) with the hub's CA in SSL_CERT_FILE.
    let commands = serde_json::json!([{"op": "call", "name": tool, "arguments": {"volume": 41}}, {"op": "call", "name": "dev-020000000001.self.get_device_status"}]).to_string();
    let out = tokio::process::Command::new(python("MCPDEV_TEST_MCP2_PYTHON", "venv-mcp2"))
        .arg(common::repo_path("tests/interop/mcp_client.py"))
        .args(["--url", &mcp, "--transport", "http", "--commands", &commands])
        .env("SSL_CERT_FILE", &ca)
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    assert!(lines.first().is_some_and(|c| c["op"] == "connect" && c.get("error").is_none()), "{lines:?} {}", String::from_utf8_lossy(&out.stderr));
    let status = lines.iter().find(|l| l["name"] == "dev-020000000001.self.get_device_status").unwrap_or_else(|| panic!("{lines:?}"));
    assert!(status["result"].to_string().contains("41"), "the SDK's call changed the device: {status}");
}

#[tokio::test]
async fn xiaozhi_sdk_devices_connect_over_wss_with_the_hubs_ca() {
    let state = tempfile::tempdir().unwrap();
    let hub = lab_hub(&[], state.path()).await;
    let ca = ca_file(&hub);
    let url = format!("wss://127.0.0.1:{}/xiaozhi/v1/", port_of(&hub.device_url));
    let mut cmd = tokio::process::Command::new(python("MCPDEV_TEST_PYTHON", "venv"));
    cmd.arg(common::repo_path("tests/interop/xiaozhi_sdk_device.py")).args(["--url", &url, "--mac", "aa:bb:cc:00:0c:01"]);
    cmd.env("SSL_CERT_FILE", &ca).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit()).kill_on_drop(true);
    let mut child = cmd.spawn().unwrap();
    let mut stdout = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(child.stdout.take().unwrap()));
    let line = tokio::time::timeout(Duration::from_secs(60), stdout.next_line()).await.expect("the SDK device did not connect").unwrap();
    assert_eq!(line.as_deref(), Some("ready"));
    let listed = tools_of(&hub, "aa:bb:cc:00:0c:01", &[]).await;
    assert_eq!(listed.code, 0, "{listed:?}");
    assert!(listed.stdout.contains("set_volume"), "{}", listed.stdout);
    // Without the CA, the SDK's own check refuses the hub: it never connects.
    let mut cmd = tokio::process::Command::new(python("MCPDEV_TEST_PYTHON", "venv"));
    cmd.arg(common::repo_path("tests/interop/xiaozhi_sdk_device.py")).args(["--url", &url, "--mac", "aa:bb:cc:00:0c:02"]);
    cmd.env("SSL_CERT_FILE", "/nonexistent-ca.pem").stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output()).await.expect("the SDK device kept trying").unwrap();
    assert!(!String::from_utf8_lossy(&out.stdout).contains("ready"), "connected without the CA");
}

#[tokio::test]
async fn the_embedded_broker_serves_mqtts_and_the_hub_reaches_mosquitto_over_mqtts() {
    // The embedded broker: mqtts for devices, plain only on loopback.
    let state = tempfile::tempdir().unwrap();
    let hub = lab_hub(&["--mqtt", "embedded", "--mqtt-listen", "127.0.0.1:0", "--mqtts-listen", "127.0.0.1:0"], state.path()).await;
    let broker = hub.info["mqtt"].as_str().unwrap().to_string();
    assert!(broker.starts_with("mqtts://"), "{}", hub.info);
    let ca = ca_file(&hub);
    let mut device = common::spawn_mcpdev(&["sim", "--mqtt", &broker, "--device-id", "02:00:00:00:0d:01"], &[("MCPDEV_CA_FILE", &ca), ("MCPDEV_STATE_DIR", &state.path().join("sim").to_string_lossy())]);
    let listed = tools_of(&hub, "02:00:00:00:0d:01", &[]).await;
    assert_eq!(listed.code, 0, "{listed:?}");
    device.child.kill().await.unwrap();

    // Mosquitto with a TLS listener, its certificate from a CA of the test's own.
    let pki = Pki::new();
    let (cert, key) = pki.leaf("mosquitto", &["127.0.0.1", "localhost"], -1, 30);
    let tls_port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    // Run as root (CI), Mosquitto would drop to its own user, who cannot read the test's 0600 key.
    let extra = format!("user root\nlistener {tls_port} 127.0.0.1\ncafile {}\ncertfile {}\nkeyfile {}\n", pki.ca().display(), cert.display(), key.display());
    let mosquitto = common::mqtt::Mosquitto::start_with(&extra).await;
    let ca = pki.ca().to_string_lossy().into_owned();
    let url = format!("mqtts://127.0.0.1:{tls_port}");
    let hub = HubProcess::start(&["--mqtt", &url], &[("MCPDEV_CA_FILE", &ca)]).await;
    let _device = common::spawn_mcpdev(&["sim", "--mqtt", &mosquitto.url(), "--device-id", "02:00:00:00:0d:02"], &[]);
    let listed = tools_of(&hub, "02:00:00:00:0d:02", &[]).await;
    assert_eq!(listed.code, 0, "the hub reaches its devices through Mosquitto over mqtts: {listed:?}");
    // A hub that does not trust the broker's CA says why it cannot connect.
    let untrusting = HubProcess::start_capturing(&["--mqtt", &url], &[]).await;
    let deadline = Instant::now() + DEADLINE;
    loop {
        let log = untrusting.stderr.as_ref().unwrap().lock().unwrap().clone();
        if log.contains("does not trust") {
            break;
        }
        assert!(Instant::now() < deadline, "no word of the untrusted broker: {log}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
