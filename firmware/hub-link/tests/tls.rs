//! The firmware's connection code (`connect::attempt`, what the chip runs) over TLS on the host,
//! against a TLS hub the test makes: `rcgen` certificates (ECDSA P-256, as `serve --tls auto`
//! makes them) served by rustls, a WebSocket (tokio-tungstenite) and an OTA endpoint behind it.
//!
//! The user's case: `wss://` and `https://` OTA to a hub whose certificate the provisioned CA
//! signed, for its IP address or its name. The adversaries: a man in the middle with another CA's
//! certificate for the same names, a certificate for other names, an expired one, a plain
//! `ws://`/`http://`/`mqtt://` for a device that has a CA (from the record or from an OTA answer),
//! and a network that trickles a record in while the device's timers fire.

#![allow(clippy::result_large_err, reason = "tungstenite handshake callbacks return an HTTP response as their error")]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration as StdDuration;

use embassy_sync::blocking_mutex::raw::NoopRawMutex;
use embassy_sync::channel::Channel;
use embassy_time::Duration;
use futures_util::{SinkExt, StreamExt};
use hub_link::connect::{Buffers, attempt};
use hub_link::tls::{TlsBuffers, Trust};
use hub_link::{Board, End, Identity, Timing};
use mcp_device::{Call, DeviceLink, McpServer, Property, Tool, ToolError, ToolOutput, Transport};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_tungstenite::tungstenite::Message;

// ---------------------------------------------------------------------------------------------
// Certificates

/// A CA as `serve --tls auto` makes one: P-256, `cA`, keyCertSign.
struct Ca {
    der: Vec<u8>,
    issuer: Issuer<'static, KeyPair>,
}

fn ca(name: &str) -> Ca {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let cert = params.self_signed(&key).unwrap();
    Ca { der: cert.der().to_vec(), issuer: Issuer::new(params, key) }
}

/// A leaf for `names` (IP literals become iPAddress entries), signed by `ca`, optionally expired.
fn leaf(ca: &Ca, names: &[&str], expired: bool) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
    params.distinguished_name.push(DnType::CommonName, "mcpdev hub");
    if expired {
        params.not_before = rcgen::date_time_ymd(2024, 1, 1);
        params.not_after = rcgen::date_time_ymd(2025, 1, 1);
    }
    let cert = params.signed_by(&key, &ca.issuer).unwrap();
    let chain = vec![cert.der().clone(), CertificateDer::from(ca.der.clone())];
    (chain, PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())))
}

fn acceptor(chain: Vec<CertificateDer<'static>>, key: PrivateKeyDer<'static>) -> TlsAcceptor {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    TlsAcceptor::from(Arc::new(config))
}

// ---------------------------------------------------------------------------------------------
// The device: the firmware's `connect::attempt` on its own thread

#[derive(Default)]
struct TestState {
    value: i64,
}

fn set_value(s: &mut TestState, call: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    s.value = call.args.int("value")?;
    Ok(true.into())
}

fn random() -> u32 {
    static STATE: AtomicU32 = AtomicU32::new(0x1234_5678);
    let x = STATE.load(Ordering::Relaxed);
    let x = x ^ (x << 13);
    let x = x ^ (x >> 17);
    let x = x ^ (x << 5);
    STATE.store(x, Ordering::Relaxed);
    x
}

fn timing() -> Timing {
    Timing {
        connect: Duration::from_secs(5),
        hello: Duration::from_secs(2),
        ping: Duration::from_millis(40),
        dead_after: Duration::from_secs(2),
        write: Duration::from_secs(2),
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

struct DeviceResult {
    end: String,
    downgrade: bool,
    greeted: bool,
    value: i64,
    clock: u64,
}

/// One `attempt` at `url`, with `ca` provisioned (or none), as a board flashed now would make it.
fn device(url: String, ca: Option<Vec<u8>>) -> std::thread::JoinHandle<DeviceResult> {
    std::thread::spawn(move || {
        futures_lite::future::block_on(async move {
            let trust = ca.map(|der| Trust::new(der, unix_now()).expect("a usable CA"));
            let id = Identity {
                device_id: "aa:bb:cc:dd:ee:21".into(),
                client_id: "3f1c0a52-0f5e-5d4e-9b3a-000000000021".into(),
                token: String::new(),
                device_key: "tls-test-device-key-0123".into(),
            };
            let channel: Channel<NoopRawMutex, u32, 8> = Channel::new();
            let board = Board {
                random,
                reboot_requested: |_: &TestState| false,
                system_info: |_| "{}".into(),
                user_agent: "test/0",
                presses: &channel,
                trust: trust.as_ref(),
            };
            let mut server = McpServer::new("tls-test", "0", TestState::default());
            server
                .add_tool(Tool::new("test.set_value", "Sets a value.", set_value).property(Property::integer("value").range(0, 100)))
                .unwrap();
            let mut link = DeviceLink::new(server, Transport::WebSocket { binary_version: 1 });
            let (mut rx, mut http, mut tls) = (vec![0u8; 8192], vec![0u8; 2048], TlsBuffers::default());
            let mut bufs = Buffers { rx: &mut rx, http: &mut http, tls: &mut tls };
            let stack = edge_nal_std::Stack::new();
            let mut greeted = false;
            let end = attempt(&stack, &stack, &url, &id, &mut link, &board, &timing(), &mut bufs, &mut greeted).await;
            DeviceResult {
                downgrade: matches!(end, End::Downgrade(_)),
                end: end.to_string(),
                greeted,
                value: link.server.state().value,
                clock: trust.as_ref().map_or(0, |t| t.now()),
            }
        })
    })
}

async fn finish(dev: std::thread::JoinHandle<DeviceResult>) -> DeviceResult {
    tokio::time::timeout(StdDuration::from_secs(15), tokio::task::spawn_blocking(move || dev.join().unwrap()))
        .await
        .expect("the device's attempt ends within its time limits")
        .unwrap()
}

// ---------------------------------------------------------------------------------------------
// The hub side

async fn listener() -> (TcpListener, u16) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    (l, port)
}

type Wss = tokio_tungstenite::WebSocketStream<tokio_rustls::server::TlsStream<TcpStream>>;

async fn next_json(ws: &mut Wss) -> Value {
    loop {
        let msg = tokio::time::timeout(StdDuration::from_secs(5), ws.next()).await.expect("a message in time");
        match msg.expect("stream open").expect("no error") {
            Message::Text(t) => return serde_json::from_str(&t).expect("device JSON"),
            Message::Ping(_) | Message::Pong(_) => continue,
            other => panic!("unexpected {other:?}"),
        }
    }
}

fn mcp(payload: Value) -> Message {
    Message::text(json!({"session_id":"s-1","type":"mcp","payload":payload}).to_string())
}

/// A hub session over TLS: the hello, a call, a large message (many TCP segments, while the
/// device's 40 ms Pings fall due), a second call, then Close.
async fn hub_session(mut ws: Wss) {
    let hello = next_json(&mut ws).await;
    assert_eq!(hello["type"], "hello");
    ws.send(Message::text(json!({"type":"hello","transport":"websocket","session_id":"s-1"}).to_string())).await.unwrap();
    ws.send(mcp(json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test.set_value","arguments":{"value":7}}})))
        .await
        .unwrap();
    assert_eq!(next_json(&mut ws).await["payload"]["id"], 1);
    // 6 KB of a notification the device ignores, then a call that must still parse.
    let filler = "x".repeat(6000);
    ws.send(mcp(json!({"jsonrpc":"2.0","method":"notifications/filler","params":{"x":filler}}))).await.unwrap();
    ws.send(mcp(json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test.set_value","arguments":{"value":42}}})))
        .await
        .unwrap();
    let reply = next_json(&mut ws).await;
    assert_eq!(reply["payload"]["id"], 2, "{reply}");
    assert_eq!(reply["payload"]["result"]["content"][0]["text"], "true");
    ws.close(None).await.unwrap();
    while let Some(Ok(_)) = ws.next().await {}
}

/// Accepts one TLS connection and a WebSocket on it, and runs [`hub_session`].
async fn serve_wss(listener: TcpListener, acceptor: TlsAcceptor) {
    let (tcp, _) = listener.accept().await.unwrap();
    let tls = acceptor.accept(tcp).await.expect("the device completes the TLS handshake");
    let ws = tokio_tungstenite::accept_async(tls).await.unwrap();
    hub_session(ws).await;
}

/// Accepts one connection and returns how the TLS handshake went (the device refusing shows as
/// an error here: it sends an alert or closes).
async fn tls_accept_outcome(listener: &TcpListener, acceptor: &TlsAcceptor) -> Result<(), String> {
    let (tcp, _) = listener.accept().await.unwrap();
    match acceptor.accept(tcp).await {
        Ok(mut tls) => {
            // The handshake completed on the server side: did any application data follow?
            let mut buf = [0u8; 64];
            match tokio::time::timeout(StdDuration::from_secs(2), tls.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) | Err(_) => Err("no application data".into()),
                Ok(Ok(n)) => {
                    println!("the device sent {n} bytes of application data");
                    Ok(())
                }
            }
        }
        Err(e) => Err(e.to_string()),
    }
}

/// A one-request HTTPS server: answers the first POST with `answer` (JSON), returns its path.
async fn serve_ota_once(listener: &TcpListener, acceptor: &TlsAcceptor, answer: &str) -> String {
    let (tcp, _) = listener.accept().await.unwrap();
    let mut tls = acceptor.accept(tcp).await.expect("TLS to the OTA endpoint");
    let mut req = Vec::new();
    let mut chunk = [0u8; 1024];
    let head_end = loop {
        let n = tls.read(&mut chunk).await.unwrap();
        assert!(n > 0, "the device closed before its request was complete");
        req.extend_from_slice(&chunk[..n]);
        if let Some(i) = req.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&req[..head_end]).to_string();
    let len: usize = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length: ").map(|v| v.trim().parse().unwrap()))
        .unwrap_or(0);
    while req.len() < head_end + len {
        let n = tls.read(&mut chunk).await.unwrap();
        req.extend_from_slice(&chunk[..n]);
    }
    let resp = format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}", answer.len());
    tls.write_all(resp.as_bytes()).await.unwrap();
    tls.shutdown().await.ok();
    head.lines().next().unwrap_or_default().to_string()
}

/// Nothing connects to `listener` within `within`.
async fn no_connection(listener: &TcpListener, within: StdDuration) -> bool {
    tokio::time::timeout(within, listener.accept()).await.is_err()
}

// ---------------------------------------------------------------------------------------------
// The user's cases

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wss_to_a_hub_its_ca_signed_for_its_address() {
    let ca = ca("hub CA");
    let (chain, key) = leaf(&ca, &["127.0.0.1", "hub.test"], false);
    let (listener, port) = listener().await;
    let dev = device(format!("wss://127.0.0.1:{port}/xiaozhi/v1/"), Some(ca.der.clone()));
    serve_wss(listener, acceptor(chain, key)).await;
    let r = finish(dev).await;
    assert!(r.greeted, "{}", r.end);
    assert_eq!(r.value, 42, "both calls arrived and were answered, the large message in between did not corrupt the stream");
    assert!(r.end.contains("closed the WebSocket"), "{}", r.end);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wss_by_host_name() {
    // `localhost` resolves through the system resolver, as a DHCP-given DNS does on the chip.
    let ca = ca("hub CA");
    let (chain, key) = leaf(&ca, &["localhost"], false);
    let (listener, port) = listener().await;
    let dev = device(format!("wss://localhost:{port}/xiaozhi/v1/"), Some(ca.der.clone()));
    serve_wss(listener, acceptor(chain, key)).await;
    let r = finish(dev).await;
    assert!(r.greeted && r.value == 42, "{}", r.end);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_ota_hands_out_wss_and_the_hubs_clock() {
    let ca = ca("hub CA");
    let (chain, key) = leaf(&ca, &["127.0.0.1"], false);
    let acceptor = acceptor(chain, key);
    let (ota, ota_port) = listener().await;
    let (ws, ws_port) = listener().await;
    // A week ahead of the flash time: the device's lower bound of "now" moves up to it.
    let hub_time_ms = (unix_now() + 7 * 86_400) * 1000;
    let answer = json!({"server_time":{"timestamp":hub_time_ms,"timezone_offset":0},
                        "websocket":{"url":format!("wss://127.0.0.1:{ws_port}/xiaozhi/v1/"),"token":"t"}})
    .to_string();
    let dev = device(format!("https://127.0.0.1:{ota_port}/xiaozhi/ota/"), Some(ca.der.clone()));
    let line = serve_ota_once(&ota, &acceptor, &answer).await;
    assert_eq!(line, "POST /xiaozhi/ota/ HTTP/1.1");
    serve_wss(ws, acceptor).await;
    let r = finish(dev).await;
    assert!(r.greeted && r.value == 42, "{}", r.end);
    assert!(r.clock >= hub_time_ms / 1000, "the verified hub's server_time raised the device's clock: {}", r.clock);
}

// ---------------------------------------------------------------------------------------------
// The adversaries

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_man_in_the_middle_with_another_ca_is_refused() {
    let hub_ca = ca("hub CA");
    // Same names, same subject, another CA: what an attacker on the Wi-Fi can make.
    let mitm_ca = ca("hub CA");
    let (chain, key) = leaf(&mitm_ca, &["127.0.0.1"], false);
    let (listener, port) = listener().await;
    let dev = device(format!("wss://127.0.0.1:{port}/xiaozhi/v1/"), Some(hub_ca.der.clone()));
    let outcome = tls_accept_outcome(&listener, &acceptor(chain, key)).await;
    let r = finish(dev).await;
    assert!(outcome.is_err(), "the device sent nothing through the impostor: {outcome:?}");
    assert!(!r.greeted);
    assert!(r.end.contains("not issued by the provisioned hub CA"), "{}", r.end);
    assert!(r.end.contains("127.0.0.1"), "the log names the host: {}", r.end);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_self_signed_impostor_presenting_the_hub_ca_name_is_refused() {
    // The impostor sends only its leaf (no chain), issued under the hub CA's name.
    let hub_ca = ca("hub CA");
    let mitm_ca = ca("hub CA");
    let (mut chain, key) = leaf(&mitm_ca, &["127.0.0.1"], false);
    chain.truncate(1);
    let (listener, port) = listener().await;
    let dev = device(format!("wss://127.0.0.1:{port}/xiaozhi/v1/"), Some(hub_ca.der.clone()));
    let outcome = tls_accept_outcome(&listener, &acceptor(chain, key)).await;
    let r = finish(dev).await;
    assert!(outcome.is_err());
    assert!(r.end.contains("not issued by the provisioned hub CA"), "{}", r.end);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_for_other_names_is_refused() {
    let ca = ca("hub CA");
    // Right CA, wrong names: an IP the device did not dial, and a name for an address.
    for (names, url_host) in [(&["10.9.8.7", "hub.test"][..], "127.0.0.1"), (&["127.0.0.1"][..], "localhost")] {
        let (chain, key) = leaf(&ca, names, false);
        let (listener, port) = listener().await;
        let dev = device(format!("wss://{url_host}:{port}/xiaozhi/v1/"), Some(ca.der.clone()));
        let outcome = tls_accept_outcome(&listener, &acceptor(chain, key)).await;
        let r = finish(dev).await;
        assert!(outcome.is_err());
        assert!(r.end.contains("not for the name or address"), "{names:?} for {url_host}: {}", r.end);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_certificate_is_refused() {
    let ca = ca("hub CA");
    let (chain, key) = leaf(&ca, &["127.0.0.1"], true);
    let (listener, port) = listener().await;
    let dev = device(format!("wss://127.0.0.1:{port}/xiaozhi/v1/"), Some(ca.der.clone()));
    let outcome = tls_accept_outcome(&listener, &acceptor(chain, key)).await;
    let r = finish(dev).await;
    assert!(outcome.is_err());
    assert!(r.end.contains("has expired"), "{}", r.end);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provisioned_plain_url_is_a_downgrade_and_never_dialled() {
    let ca = ca("hub CA");
    for scheme in ["ws", "http", "mqtt"] {
        let (listener, port) = listener().await;
        let dev = device(format!("{scheme}://127.0.0.1:{port}/xiaozhi/"), Some(ca.der.clone()));
        let r = finish(dev).await;
        assert!(r.downgrade, "{scheme}: {}", r.end);
        assert!(r.end.contains("downgrade") && r.end.contains(&format!("{scheme}://127.0.0.1")), "{}", r.end);
        assert!(no_connection(&listener, StdDuration::from_millis(200)).await, "{scheme}: the device dialled the plain port");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ota_answer_that_downgrades_is_refused() {
    // The hub's (or a tampered) OTA answer names plain WebSocket or plain MQTT.
    let ca = ca("hub CA");
    let (chain, key) = leaf(&ca, &["127.0.0.1"], false);
    let acceptor = acceptor(chain, key);
    let (plain, plain_port) = listener().await;
    for answer in [
        json!({"websocket":{"url":format!("ws://127.0.0.1:{plain_port}/xiaozhi/v1/"),"token":"t"}}),
        json!({"mqtt":{"endpoint":format!("127.0.0.1:{plain_port}"),"client_id":"GID_mcpdev@@@aa","publish_topic":"mcpdev/up/x"}}),
    ] {
        let (ota, ota_port) = listener().await;
        let dev = device(format!("https://127.0.0.1:{ota_port}/xiaozhi/ota/"), Some(ca.der.clone()));
        serve_ota_once(&ota, &acceptor, &answer.to_string()).await;
        let r = finish(dev).await;
        assert!(r.downgrade, "{answer}: {}", r.end);
        assert!(r.end.contains("only over TLS"), "{}", r.end);
        assert!(no_connection(&plain, StdDuration::from_millis(200)).await, "the device dialled the plain port");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_url_without_a_ca_is_refused_with_what_to_do() {
    let (listener, port) = listener().await;
    let dev = device(format!("wss://127.0.0.1:{port}/xiaozhi/v1/"), None);
    let r = finish(dev).await;
    assert!(r.end.contains("needs the hub's CA") && r.end.contains("mcpdev flash"), "{}", r.end);
    assert!(no_connection(&listener, StdDuration::from_millis(200)).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_server_on_the_tls_port_fails_cleanly() {
    // A hub without --tls on the port the device expects TLS on: an HTTP error page, no hang.
    let ca = ca("hub CA");
    let (listener, port) = listener().await;
    let dev = device(format!("wss://127.0.0.1:{port}/xiaozhi/v1/"), Some(ca.der.clone()));
    let (mut tcp, _) = listener.accept().await.unwrap();
    let mut hello = [0u8; 512];
    let _ = tcp.read(&mut hello).await;
    tcp.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n").await.unwrap();
    drop(tcp);
    let r = finish(dev).await;
    assert!(!r.greeted);
    assert!(r.end.starts_with("TLS to 127.0.0.1"), "{}", r.end);
}

/// Bytes from `from` to `to`, `chunk` at a time with `pause` between chunks: a slow network.
async fn trickle(mut from: impl tokio::io::AsyncRead + Unpin, mut to: impl tokio::io::AsyncWrite + Unpin, chunk: usize, pause: StdDuration) {
    let mut buf = vec![0u8; chunk];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).await.is_err() {
                    break;
                }
                tokio::time::sleep(pause).await;
            }
        }
    }
    let _ = to.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_that_trickle_in_while_pings_fall_due_stay_intact() {
    // Between device and hub, a proxy that passes the hub's bytes 100 at a time every 3 ms: the
    // 6 KB message takes ~180 ms while the device's 40 ms Ping timer fires; a read dropped in the
    // middle of a record would lose the record's header and corrupt the stream.
    let ca = ca("hub CA");
    let (chain, key) = leaf(&ca, &["127.0.0.1"], false);
    let (hub, hub_port) = listener().await;
    let (proxy, proxy_port) = listener().await;
    tokio::spawn(async move {
        let (down, _) = proxy.accept().await.unwrap();
        let up = TcpStream::connect(("127.0.0.1", hub_port)).await.unwrap();
        let (down_r, down_w) = down.into_split();
        let (up_r, up_w) = up.into_split();
        tokio::join!(trickle(down_r, up_w, 4096, StdDuration::ZERO), trickle(up_r, down_w, 100, StdDuration::from_millis(3)));
    });
    let dev = device(format!("wss://127.0.0.1:{proxy_port}/xiaozhi/v1/"), Some(ca.der.clone()));
    serve_wss(hub, acceptor(chain, key)).await;
    let r = finish(dev).await;
    assert!(r.greeted, "{}", r.end);
    assert_eq!(r.value, 42, "{}", r.end);
    assert!(r.end.contains("closed the WebSocket"), "{}", r.end);
}
