//! Hostile-device and churn soak of the hub (issue 10): a command, not a timed test.
//!
//! `cargo bench --bench soak` (`SOAK_CALLS=20000` for a short run; default 1,000,000) starts the
//! release `mcpdev serve --demo 8 --mcp-timeout 5s` as a separate process (in a scratch directory,
//! without the user's `MCPDEV_*` settings, killed with the bench), then, against its device listener:
//!
//! - **churners** (4): well-behaved devices (raw WebSocket clients in this file) that disconnect after
//!   a random 0.2–2 s and reconnect at once, over and over;
//! - **misbehavers**, one of each kind, each reconnecting whenever the hub drops it:
//!   - `stop-reading`: onboards, then never reads again and sends JSON-RPC requests with 900 KB
//!     method names (the hub answers each with an error that may echo the name back);
//!   - `flood`: answers calls but sends a stream of junk text frames as fast as the hub takes them;
//!   - `oversize`: answers calls, and sends a 2 MiB text frame every second;
//!   - `bad-utf8`: answers calls, and sends a text frame of invalid UTF-8 every second.
//!
//! `SOAK_CHURN` sets the number of churners (default 4), `SOAK_HOSTILE` which misbehavers run
//! (default `stop-reading,flood,oversize,bad-utf8`; `none` for none).
//!
//! Meanwhile `SOAK_CLIENTS` (default 32) MCP clients (the official Rust SDK's, one keep-alive
//! session each) call `tools/call` through `/mcp`: 80% to the 8 demo devices (well-behaved: every
//! call must succeed), 10% to churners, 10% to misbehavers. A call with no answer within
//! `CALL_TIMEOUT` is **lost**; an answer that is an error is an **error**. Both are counted per
//! class: errors from churners (away for a moment) and misbehavers are expected, a lost call or an
//! error to a well-behaved device is not. Prints calls made, lost, errors, p50/p99 of answered
//! calls to well-behaved devices, and the hub's RSS (`VmRSS` of /proc/PID/status) and open
//! descriptors (/proc/PID/fd) when the clients have connected, after the first 5% of the calls
//! (the baseline: buffers, threads and allocator arenas at their working size) and at the end.
//! Targets: 0 lost and end RSS within 10% of the baseline. Exits 1 when a target is missed. Runs on
//! 127.0.0.1 only.

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

const BIN: &str = env!("CARGO_BIN_EXE_mcpdev");
const DEMO: usize = 8;
/// The hub gives up on a device after this (`serve --mcp-timeout`)...
const HUB_TIMEOUT: &str = "5s";
/// ...so a call with no answer after this is lost, not slow.
const CALL_TIMEOUT: Duration = Duration::from_secs(15);
const ECHO: &str = "self.soak.echo";

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;
type Client = rmcp::service::RunningService<rmcp::RoleClient, ClientConfig>;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Churn,
    StopReading,
    Flood,
    Oversize,
    BadUtf8,
}

const MISBEHAVERS: [(&str, Kind); 4] = [("stop-reading", Kind::StopReading), ("flood", Kind::Flood), ("oversize", Kind::Oversize), ("bad-utf8", Kind::BadUtf8)];

/// `SOAK_HOSTILE`: a comma-separated choice of misbehaver kinds (default all, `none` for none), to
/// tell which kind causes a loss.
fn misbehavers() -> anyhow::Result<Vec<Kind>> {
    let Ok(list) = std::env::var("SOAK_HOSTILE") else { return Ok(MISBEHAVERS.iter().map(|(_, k)| *k).collect()) };
    list.split(',').map(str::trim).filter(|n| !n.is_empty() && *n != "none").map(|n| {
        MISBEHAVERS.iter().find(|(name, _)| *name == n).map(|(_, k)| *k).ok_or_else(|| anyhow::anyhow!("SOAK_HOSTILE: unknown kind {n:?}; use some of stop-reading,flood,oversize,bad-utf8 or none"))
    }).collect()
}

/// The three classes of target, counted apart.
#[derive(Clone, Copy)]
enum Class {
    Good = 0,
    Churn = 1,
    Hostile = 2,
}
const CLASS_NAMES: [&str; 3] = ["well-behaved (demo)", "churning", "misbehaving"];

#[derive(Default)]
struct Tally {
    made: [AtomicU64; 3],
    ok: [AtomicU64; 3],
    errors: [AtomicU64; 3],
    lost: [AtomicU64; 3],
}

fn mac(n: usize) -> String {
    format!("02:50:00:00:00:{n:02x}")
}

fn prefixed(mac: &str, tool: &str) -> String {
    format!("dev-{}.{tool}", mac.replace(':', ""))
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.replace('_', "").parse().ok()).unwrap_or(default)
}

/// `VmRSS` in KiB and the number of open descriptors of `pid`.
fn usage(pid: u32) -> (u64, usize) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok()).unwrap_or(0);
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
    (rss, fds)
}

// ---- raw WebSocket devices ----

async fn connect(url: &str, device_id: &str) -> anyhow::Result<(Ws, String)> {
    let mut req = url.into_client_request()?;
    req.headers_mut().insert("Device-Id", device_id.parse()?);
    req.headers_mut().insert("Client-Id", "soak".parse()?);
    req.headers_mut().insert("Protocol-Version", "1".parse()?);
    let (mut ws, _) = tokio::time::timeout(Duration::from_secs(10), tokio_tungstenite::connect_async(req)).await??;
    let hello = json!({"type":"hello","version":1,"features":{"mcp":true},"transport":"websocket","audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}});
    ws.send(Message::text(hello.to_string())).await?;
    let mut session = String::new();
    // Onboarding: the server hello, initialize, tools/list; then the device is offered.
    while let Some(msg) = tokio::time::timeout(Duration::from_secs(10), ws.next()).await? {
        let Message::Text(t) = msg? else { continue };
        let v: Value = serde_json::from_str(&t)?;
        if v["type"] == "hello" {
            session = v["session_id"].as_str().unwrap_or_default().to_string();
            continue;
        }
        let listed = v["payload"]["method"] == "tools/list";
        if let Some(reply) = answer(&v["payload"]) {
            ws.send(Message::text(envelope(&session, reply))).await?;
        }
        if listed {
            return Ok((ws, session));
        }
    }
    anyhow::bail!("the hub closed before onboarding ended")
}

fn envelope(session: &str, payload: Value) -> String {
    json!({"session_id": session, "type": "mcp", "payload": payload}).to_string()
}

/// A well-behaved device's answer to a hub request (none to notifications).
fn answer(req: &Value) -> Option<Value> {
    let id = req.get("id")?.clone();
    let result = match req["method"].as_str()? {
        "initialize" => json!({"protocolVersion":"2024-11-05","capabilities":{"tools":{}},"serverInfo":{"name":"soak","version":"1"}}),
        "tools/list" => json!({"tools": [{"name": ECHO, "description": "echo n", "inputSchema": {"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}}]}),
        "tools/call" => json!({"content": [{"type":"text","text": req["params"]["arguments"]["n"].to_string()}], "isError": false}),
        "ping" => json!({}),
        _ => return Some(json!({"jsonrpc":"2.0","id":id,"error":{"code":-32601,"message":"Method not found"}})),
    };
    Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

/// Reads and answers until the link ends or `until` passes (then returns, dropping the socket).
async fn serve(ws: &mut Ws, session: &str, until: Option<Instant>) {
    loop {
        let next = match until {
            Some(t) => match tokio::time::timeout_at(t.into(), ws.next()).await {
                Ok(m) => m,
                Err(_) => return,
            },
            None => ws.next().await,
        };
        let Some(Ok(msg)) = next else { return };
        let Message::Text(t) = msg else { continue };
        let Ok(v) = serde_json::from_str::<Value>(&t) else { continue };
        if let Some(reply) = answer(&v["payload"])
            && ws.send(Message::text(envelope(session, reply))).await.is_err()
        {
            return;
        }
    }
}

/// The frames a misbehaver sends on top of (or instead of) answering.
fn hostile_frame(kind: Kind, i: u64) -> Message {
    match kind {
        Kind::StopReading => Message::text(json!({"session_id":"x","type":"mcp","payload":{"jsonrpc":"2.0","id":i,"method":"m".repeat(900_000)}}).to_string()),
        Kind::Flood => Message::text(format!("{{\"type\":\"junk\",\"n\":{i}")),
        Kind::Oversize => Message::text("x".repeat(2 << 20)),
        Kind::BadUtf8 => Message::Frame(Frame::message(vec![b'{', 0xff, 0xfe, b'}'], OpCode::Data(Data::Text), true)),
        Kind::Churn => unreachable!("churners send nothing extra"),
    }
}

/// One device of `kind` as `device_id`, reconnecting until `stop`.
async fn device(url: String, device_id: String, kind: Kind, stop: Arc<AtomicBool>, reconnects: Arc<AtomicUsize>) {
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let Ok((mut ws, session)) = connect(&url, &device_id).await else {
            tokio::time::sleep(Duration::from_millis(200)).await; // the hub refused: back off, try again
            continue;
        };
        reconnects.fetch_add(1, Ordering::Relaxed);
        match kind {
            Kind::Churn => {
                let stay = Duration::from_millis(fastrand::u64(200..2000));
                serve(&mut ws, &session, Some(Instant::now() + stay)).await;
            }
            Kind::StopReading => {
                // Never reads again; writes until the hub stops taking frames (then holds the
                // socket, retrying the flush, never buffering more) or drops the link.
                'link: while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let mut sent = tokio::time::timeout(Duration::from_secs(2), ws.send(hostile_frame(kind, i))).await;
                    while sent.is_err() && !stop.load(Ordering::Relaxed) {
                        sent = tokio::time::timeout(Duration::from_secs(2), ws.flush()).await;
                    }
                    if matches!(sent, Ok(Err(_))) {
                        break 'link;
                    }
                }
            }
            Kind::Flood | Kind::Oversize | Kind::BadUtf8 => {
                let (mut tx, mut rx) = ws.split();
                let (out_tx, mut out_rx) = tokio::sync::mpsc::channel::<Message>(64);
                let reader = {
                    let session = session.clone();
                    tokio::spawn(async move {
                        while let Some(Ok(msg)) = rx.next().await {
                            let Message::Text(t) = msg else { continue };
                            let Ok(v) = serde_json::from_str::<Value>(&t) else { continue };
                            if let Some(reply) = answer(&v["payload"])
                                && out_tx.send(Message::text(envelope(&session, reply))).await.is_err()
                            {
                                break;
                            }
                        }
                    })
                };
                let pause = if kind == Kind::Flood { Duration::ZERO } else { Duration::from_secs(1) };
                let mut next_hostile = Instant::now() + pause;
                while !stop.load(Ordering::Relaxed) && !reader.is_finished() {
                    let msg = tokio::select! {
                        m = out_rx.recv() => match m { Some(m) => m, None => break },
                        _ = tokio::time::sleep_until(next_hostile.into()) => {
                            i += 1;
                            next_hostile = Instant::now() + pause;
                            hostile_frame(kind, i)
                        }
                    };
                    if tx.send(msg).await.is_err() {
                        break;
                    }
                }
                reader.abort();
            }
        }
    }
}

// ---- MCP clients ----

fn client_config() -> ClientConfig {
    ClientConfig::new(ClientCapabilities::default(), Implementation::new("mcpdev-soak", "0"))
}

struct Targets {
    good: Vec<String>,
    churn: Vec<String>,
    hostile: Vec<String>,
}

impl Targets {
    fn pick(&self) -> (Class, &str, &'static str) {
        let (class, list, arg) = match fastrand::u32(0..10) {
            0 if !self.churn.is_empty() => (Class::Churn, &self.churn, "n"),
            1 if !self.hostile.is_empty() => (Class::Hostile, &self.hostile, "n"),
            _ => (Class::Good, &self.good, "volume"),
        };
        (class, &list[fastrand::usize(0..list.len())], arg)
    }
}

async fn call(c: &Client, tool: &str, arg: &str, n: u64) -> Result<(), String> {
    let params = CallToolRequestParams::new(tool.to_string()).with_arguments(json!({arg: n % 101}).as_object().cloned().expect("object"));
    match c.call_tool(params).await {
        Ok(r) if r.is_error == Some(true) => Err(format!("tool error: {:?}", r.content)),
        Ok(_) => Ok(()),
        Err(e) => Err(e.to_string()),
    }
}

async fn client_loop(c: Client, targets: Arc<Targets>, tally: Arc<Tally>, budget: Arc<AtomicU64>, latencies: Arc<std::sync::Mutex<Vec<Duration>>>) {
    let mut mine = Vec::new();
    let mut first_error: Option<String> = None;
    while budget.fetch_sub(1, Ordering::Relaxed) as i64 > 0 {
        let (class, tool, arg) = targets.pick();
        let k = class as usize;
        tally.made[k].fetch_add(1, Ordering::Relaxed);
        let t = Instant::now();
        match tokio::time::timeout(CALL_TIMEOUT, call(&c, tool, arg, fastrand::u64(..))).await {
            Ok(Ok(())) => {
                tally.ok[k].fetch_add(1, Ordering::Relaxed);
                if k == Class::Good as usize {
                    mine.push(t.elapsed());
                }
            }
            Ok(Err(e)) => {
                tally.errors[k].fetch_add(1, Ordering::Relaxed);
                if k == Class::Good as usize && first_error.is_none() {
                    eprintln!("soak: a call to the well-behaved {tool} failed: {e}");
                    first_error = Some(e);
                }
            }
            Err(_) => {
                tally.lost[k].fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    latencies.lock().unwrap_or_else(|e| e.into_inner()).extend(mine);
    let _ = tokio::time::timeout(Duration::from_secs(5), c.cancel()).await;
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// `mcpdev serve` with the demo devices, in a scratch directory and without the user's `MCPDEV_*`
/// settings or `mcpdev.toml`, killed with this process (`PR_SET_PDEATHSIG`) or its handle.
fn scratch() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("mcpdev-soak-{}", std::process::id()))
}

fn hub_command(clients: usize) -> tokio::process::Command {
    let scratch = scratch();
    let _ = std::fs::create_dir_all(scratch.join("config"));
    let mut cmd = tokio::process::Command::new(BIN);
    // --approve-all: the soak's own raw devices (churners, misbehavers) are admitted devices that
    // turn hostile; without it admission refuses them and no call ever reaches one.
    cmd.args(["serve", "--json", "--approve-all", "--device-addr", "127.0.0.1:0", "--host-addr", "127.0.0.1:0", "--demo", &DEMO.to_string(), "--mcp-timeout", HUB_TIMEOUT])
        // All the soak's clients come from one address: the per-address session cap (128 by
        // default) must hold them all, or the 129th client is refused before the soak begins.
        .args(["--mcp-max-sessions-per-peer", &clients.max(128).to_string()])
        .current_dir(&scratch)
        .env("XDG_CONFIG_HOME", scratch.join("config"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    for (key, _) in std::env::vars_os() {
        if key.to_str().is_some_and(|k| k.starts_with("MCPDEV_") || k == "RUST_LOG") {
            cmd.env_remove(key);
        }
    }
    // The hub's secret and approvals go to the scratch directory, not the user's own.
    cmd.env("MCPDEV_STATE_DIR", scratch.join("state")).env("MCPDEV_RUNTIME_DIR", scratch.join("run"));
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    cmd
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    mcpdev::tls::install_crypto_provider();
    let calls = env_usize("SOAK_CALLS", 1_000_000) as u64;
    let clients = env_usize("SOAK_CLIENTS", 32);
    let churners = env_usize("SOAK_CHURN", 4);
    let hostile = misbehavers()?;
    let mut hub = hub_command(clients).spawn()?;
    let pid = hub.id().expect("hub pid");
    let mut lines = BufReader::new(hub.stdout.take().expect("piped")).lines();
    let listening: Value = serde_json::from_str(&lines.next_line().await?.expect("hub exited"))?;
    let url = listening["mcp"].as_str().expect("mcp url").to_string();
    let devices_url = listening["devices"].as_str().expect("devices url").to_string();
    // The event log (a line per device event) is read and dropped, as a log reader would.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });

    let stop = Arc::new(AtomicBool::new(false));
    let reconnects = Arc::new(AtomicUsize::new(0));
    let mut kinds: Vec<(String, Kind)> = (0..churners).map(|n| (mac(n + 1), Kind::Churn)).collect();
    kinds.extend(hostile.iter().enumerate().map(|(n, k)| (mac(0x80 + n), *k)));
    let device_tasks: Vec<_> = kinds.iter().map(|(m, k)| tokio::spawn(device(devices_url.clone(), m.clone(), *k, stop.clone(), reconnects.clone()))).collect();
    let targets = Arc::new(Targets {
        good: (1..=DEMO).map(|n| format!("dev-0200000000{n:02x}.self.audio_speaker.set_volume")).collect(),
        churn: kinds.iter().filter(|(_, k)| *k == Kind::Churn).map(|(m, _)| prefixed(m, ECHO)).collect(),
        hostile: kinds.iter().filter(|(_, k)| *k != Kind::Churn).map(|(m, _)| prefixed(m, ECHO)).collect(),
    });

    // Warm-up: every demo device offered, every client connected and one call each.
    let probe = client_config().serve(StreamableHttpClientTransport::from_uri(url.clone())).await?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while probe.list_all_tools().await?.iter().filter(|t| targets.good.contains(&t.name.to_string())).count() < DEMO {
        anyhow::ensure!(Instant::now() < deadline, "the demo devices were not all offered within 30 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = probe.cancel().await;
    let mut pool = Vec::new();
    for k in 0..clients {
        let c = client_config().serve(StreamableHttpClientTransport::from_uri(url.clone())).await?;
        call(&c, &targets.good[k % DEMO], "volume", k as u64).await.map_err(|e| anyhow::anyhow!("warm-up call: {e}"))?;
        pool.push(c);
    }
    let (rss0, fds0) = usage(pid);
    println!("soak: {calls} calls from {clients} MCP clients through /mcp; {DEMO} demo devices, {churners} churning, misbehaving: {hostile:?}");
    println!("soak: hub pid {pid} at start: RSS {:.1} MiB, {fds0} open descriptors", rss0 as f64 / 1024.0);

    let tally = Arc::new(Tally::default());
    let budget = Arc::new(AtomicU64::new(calls));
    let latencies = Arc::new(std::sync::Mutex::new(Vec::with_capacity(calls as usize)));
    let started = Instant::now();
    let workers: Vec<_> = pool.into_iter().map(|c| tokio::spawn(client_loop(c, targets.clone(), tally.clone(), budget.clone(), latencies.clone()))).collect();
    // The baseline for growth: RSS once the first 5 % of the calls are made (at least 1,000), when
    // every client's buffers, the runtime's threads and the allocator's arenas have reached their
    // working size; what grows after it over the other 95 % is what the run leaks.
    let warm_calls = (calls / 20).max(1_000).min(calls);
    let warm_usage = Arc::new(std::sync::OnceLock::<(u64, usize)>::new());
    let warm_watch = {
        let (tally, warm_usage) = (tally.clone(), warm_usage.clone());
        tokio::spawn(async move {
            loop {
                let made: u64 = tally.made.iter().map(|a| a.load(Ordering::Relaxed)).sum();
                if made >= warm_calls {
                    let _ = warm_usage.set(usage(pid));
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let progress = {
        let tally = tally.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(10)).await;
                let made: u64 = tally.made.iter().map(|a| a.load(Ordering::Relaxed)).sum();
                let lost: u64 = tally.lost.iter().map(|a| a.load(Ordering::Relaxed)).sum();
                let (rss, fds) = usage(pid);
                eprintln!("soak: {:>5.0} s  {made} calls, {lost} lost, RSS {:.1} MiB, {fds} fds", started.elapsed().as_secs_f64(), rss as f64 / 1024.0);
            }
        })
    };
    for w in workers {
        if let Err(e) = w.await {
            eprintln!("soak: a client task died: {e}");
        }
    }
    let elapsed = started.elapsed();
    progress.abort();
    warm_watch.abort();
    let (rss1, fds1) = usage(pid);
    stop.store(true, Ordering::Relaxed);
    for t in device_tasks {
        t.abort();
    }

    let load = |a: &[AtomicU64; 3], k: usize| a[k].load(Ordering::Relaxed);
    let made: u64 = (0..3).map(|k| load(&tally.made, k)).sum();
    println!("soak: {made} calls in {:.1} s ({:.0}/s); {} device connections (first connects + reconnects)", elapsed.as_secs_f64(), made as f64 / elapsed.as_secs_f64(), reconnects.load(Ordering::Relaxed));
    println!("{:<22} {:>10} {:>10} {:>10} {:>8}", "target", "calls", "answered", "errors", "lost");
    for (k, name) in CLASS_NAMES.iter().enumerate() {
        println!("{name:<22} {:>10} {:>10} {:>10} {:>8}", load(&tally.made, k), load(&tally.ok, k), load(&tally.errors, k), load(&tally.lost, k));
    }
    let mut lat = std::mem::take(&mut *latencies.lock().unwrap_or_else(|e| e.into_inner()));
    lat.sort_unstable();
    println!("well-behaved calls answered: p50 {:.2?}, p99 {:.2?}, max {:.2?}", percentile(&lat, 0.5), percentile(&lat, 0.99), lat.last().copied().unwrap_or_default());
    let (rss_warm, fds_warm) = warm_usage.get().copied().unwrap_or((rss0, fds0));
    let pct = |from: u64| (rss1 as f64 - from as f64) / from.max(1) as f64 * 100.0;
    let growth = pct(rss_warm);
    let mib = |kb: u64| kb as f64 / 1024.0;
    println!(
        "hub RSS {:.1} MiB after {warm_calls} calls -> {:.1} MiB at the end ({growth:+.1}%; {:.1} MiB when the clients had connected, {:+.1}% from there), open descriptors {fds0} -> {fds_warm} -> {fds1}",
        mib(rss_warm),
        mib(rss1),
        mib(rss0),
        pct(rss0)
    );
    let lost: u64 = (0..3).map(|k| load(&tally.lost, k)).sum();
    let good_failed = load(&tally.errors, 0) + load(&tally.lost, 0);
    // A run in which no call reached a churning or misbehaving device tested nothing of them.
    let reached = |k: usize, wanted: bool| !wanted || load(&tally.ok, k) > 0;
    let exercised = reached(1, churners > 0) && reached(2, !hostile.is_empty()) && reconnects.load(Ordering::Relaxed) > 0;
    if !exercised {
        println!("no call reached a churning or misbehaving device (were they admitted?): this run says nothing about them");
    }
    let verdict = lost == 0 && good_failed == 0 && growth <= 10.0 && exercised;
    println!("targets (0 lost, 0 failed well-behaved calls, RSS within 10% after the first {warm_calls} calls): {}", if verdict { "met" } else { "MISSED" });
    let _ = hub.kill().await;
    let _ = std::fs::remove_dir_all(scratch());
    if !verdict {
        std::process::exit(1);
    }
    Ok(())
}
