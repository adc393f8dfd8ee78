//! The heap the firmware's connection code uses, plain and over TLS, measured on the host with a
//! counting allocator: for `benches/README.md` (firmware section).
//!
//! ```sh
//! cd firmware && cargo run --release -p hub-link --example tls_heap
//! ```
//!
//! Only the device thread's allocations count (the test hub, rustls and tokio run on others).
//! Three figures, each the peak of live heap above what was live before:
//! - the TLS handshake alone (`hub_link::tls::open`, with the record buffers it allocates on a
//!   device's first handshake);
//! - one whole `connect::attempt` over `ws://` and over `wss://`: connect, upgrade, hello, one
//!   `tools/call`, Close (the 8 KiB receive and 2 KiB header buffers are allocated before, as the
//!   firmware does at boot, and not counted);
//! - the size of the `attempt` future (what the firmware's hub task keeps in its static task
//!   storage), whose largest state now holds a `TlsConnection`.
//!
//! Pointer-sized fields are twice the ESP32-C3's here; the buffers, which dominate, are not.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use edge_nal::TcpConnect;
use embassy_sync::blocking_mutex::raw::NoopRawMutex;
use embassy_sync::channel::Channel;
use embassy_time::Duration;
use futures_util::{SinkExt, StreamExt};
use hub_link::connect::{Buffers, attempt};
use hub_link::tls::{self, RecordPos, TlsBuffers, Trust};
use hub_link::{Board, Identity, Timing};
use mcp_device::{DeviceLink, McpServer, Tool, ToolOutput, Transport};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

struct Counting;

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        track(layout.size() as isize);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        track(-(layout.size() as isize));
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        track(new_size as isize - layout.size() as isize);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

fn track(delta: isize) {
    let _ = ON.try_with(|on| {
        if on.get() {
            LIVE.with(|l| {
                let now = l.get() + delta;
                l.set(now);
                PEAK.with(|p| p.set(p.get().max(now)));
            });
        }
    });
}

#[global_allocator]
static A: Counting = Counting;

/// Runs `f` with this thread's allocations counted; the peak of live bytes above the start.
async fn peak_of<T>(f: impl Future<Output = T>) -> (T, isize) {
    LIVE.with(|l| l.set(0));
    PEAK.with(|p| p.set(0));
    ON.with(|o| o.set(true));
    let out = f.await;
    ON.with(|o| o.set(false));
    (out, PEAK.with(Cell::get))
}

fn random() -> u32 {
    static STATE: AtomicU32 = AtomicU32::new(0x0BAD_F00D);
    let x = STATE.load(Ordering::Relaxed);
    let x = x ^ (x << 13);
    let x = x ^ (x >> 17);
    let x = x ^ (x << 5);
    STATE.store(x, Ordering::Relaxed);
    x
}

/// A hub on 127.0.0.1: TLS when `acceptor` is given; hello, one call, Close, for each connection.
fn hub(acceptor: Option<tokio_rustls::TlsAcceptor>) -> u16 {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = std_listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            std_listener.set_nonblocking(true).unwrap();
            let listener = tokio::net::TcpListener::from_std(std_listener).unwrap();
            loop {
                let (tcp, _) = listener.accept().await.unwrap();
                // The bare handshake measurement closes right after the handshake: skip it.
                match &acceptor {
                    Some(a) => {
                        if let Ok(tls) = a.accept(tcp).await
                            && let Ok(ws) = tokio_tungstenite::accept_async(tls).await
                        {
                            session(ws).await;
                        }
                    }
                    None => session(tokio_tungstenite::accept_async(tcp).await.unwrap()).await,
                }
            }
        });
    });
    port
}

async fn session<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(mut ws: tokio_tungstenite::WebSocketStream<S>) {
    let _hello = ws.next().await;
    ws.send(Message::text(json!({"type":"hello","transport":"websocket","session_id":"s"}).to_string())).await.unwrap();
    let call = json!({"session_id":"s","type":"mcp","payload":{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t.ok","arguments":{}}}});
    ws.send(Message::text(call.to_string())).await.unwrap();
    while let Some(Ok(m)) = ws.next().await {
        if matches!(m, Message::Text(_)) {
            break;
        }
    }
    let _ = ws.close(None).await;
    while let Some(Ok(_)) = ws.next().await {}
}

fn main() {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    let ca_der = ca_params.self_signed(&ca_key).unwrap().der().to_vec();
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap().signed_by(&leaf_key, &issuer).unwrap();
    let chain = vec![leaf.der().clone(), CertificateDer::from(ca_der.clone())];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let plain_port = hub(None);
    let tls_port = hub(Some(acceptor));
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let trust = Trust::new(ca_der, now).unwrap();

    futures_lite::future::block_on(async {
        let stack = edge_nal_std::Stack::new();
        // 1. The handshake alone, with a device's first (allocating) record buffers.
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], tls_port));
        let socket = stack.connect(addr).await.unwrap();
        let pos = Cell::new(RecordPos::default());
        let mut bufs = TlsBuffers::default();
        let (opened, handshake_peak) = peak_of(tls::open(socket, "127.0.0.1", &trust, random, &mut bufs, &pos)).await;
        assert!(opened.is_ok(), "the handshake verifies");
        drop(opened);
        drop(bufs);

        // 2. Whole attempts.
        let mut results = Vec::new();
        let mut future_size = 0;
        for (url, trust) in
            [(format!("ws://127.0.0.1:{plain_port}/xiaozhi/v1/"), None), (format!("wss://127.0.0.1:{tls_port}/xiaozhi/v1/"), Some(&trust))]
        {
            let channel: Channel<NoopRawMutex, u32, 8> = Channel::new();
            let board =
                Board { random, reboot_requested: |_: &()| false, system_info: |_| String::new(), user_agent: "heap/0", presses: &channel, trust };
            let mut server = McpServer::new("heap", "0", ());
            server.add_tool(Tool::new("t.ok", "ok", |_: &mut (), _| Ok::<_, mcp_device::ToolError>(ToolOutput::from(true)))).unwrap();
            let mut link = DeviceLink::new(server, Transport::WebSocket { binary_version: 1 });
            let id = Identity { device_id: "aa:bb:cc:dd:ee:ff".into(), client_id: "c".into(), token: String::new(), device_key: String::new() };
            let (mut rx, mut http, mut tls) = (vec![0u8; 8192], vec![0u8; 2048], TlsBuffers::default());
            let mut bufs = Buffers { rx: &mut rx, http: &mut http, tls: &mut tls };
            let timing = Timing { hello: Duration::from_secs(5), ..Timing::default() };
            let mut greeted = false;
            let fut = attempt(&stack, &stack, &url, &id, &mut link, &board, &timing, &mut bufs, &mut greeted);
            future_size = std::mem::size_of_val(&fut);
            let (end, peak) = peak_of(fut).await;
            assert!(greeted, "{end}");
            results.push((url, peak, end.to_string()));
        }
        println!("TLS handshake alone (record buffers included): peak {handshake_peak} B");
        for (url, peak, end) in &results {
            println!("attempt {url}: peak {peak} B above the boot buffers ({end})");
        }
        println!("size of the attempt future: {future_size} B");
    });
}
