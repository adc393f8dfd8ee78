//! tools/call through the hub's MCP endpoint (`/mcp`, Streamable HTTP) from 64 concurrent MCP
//! clients (the official Rust SDK's client, one session each) to virtual devices.
//!
//! `cargo bench --bench mcp` — starts the release `mcpdev` as separate processes, waits until
//! all eight virtual devices are offered, and runs three times:
//! - devices in the hub's process (`serve --demo 8`), clients that keep their connection;
//! - the same, with rmcp's default client, which opens a connection per request;
//! - devices in a process of their own (`mcpdev sim --count 8`), as real devices are, with
//!   keep-alive clients: the targets are judged on this run.
//!
//! Each run warms up, then each client makes 1,000 (`MCP_BENCH_CALLS`) sequential calls of
//! `dev-…self.audio_speaker.set_volume` on its own device (client k → device k mod 8). Prints
//! throughput, the latency distribution of every call, the hub's CPU time per call and the
//! clients' (this process's). Targets (issue 14): at least 15,000 calls/s with p99 at most
//! 10 ms, and at most 50 µs of hub CPU per call. The clients and the devices share the
//! machine's cores with the hub. Runs on 127.0.0.1 only, stops by itself.
//!
//! `MCP_BENCH_FLEET=10000` (issue 46 item 7): the judged run is made three times on one hub,
//! with the eight devices alone, with that many more connected (in `mcpdev sim` processes of
//! their own, idle), and once they have all left again; the target there is at most 25 µs of
//! hub CPU per call with the fleet connected. `MCP_BENCH_DEVICES=1` puts every client on one
//! device.

use std::process::Stdio;
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::ServiceExt;
use serde_json::{Value, json};
use anyhow::Context as _;
use tokio::io::{AsyncBufReadExt, BufReader};

/// The `mcpdev` this bench was built with, or `MCPDEV_BENCH_BIN` (to measure another build).
fn bin() -> String {
    std::env::var("MCPDEV_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_mcpdev").to_string())
}
/// Concurrent MCP clients, unless `MCP_BENCH_CLIENTS` says otherwise. Each holds a POST
/// connection and a GET stream (and, in the run with a connection per request, sockets still
/// closing): the host listener holds up to 912 connections from one address under a descriptor
/// limit of 4,096 or more (144 under 1,024), and a refused connection fails the run.
const CLIENTS: usize = 64;

fn client_count() -> usize {
    std::env::var("MCP_BENCH_CLIENTS").ok().and_then(|n| n.parse().ok()).filter(|n| *n > 0).unwrap_or(CLIENTS)
}
/// Devices called, unless `MCP_BENCH_DEVICES` says otherwise.
const DEVICES: usize = 8;
/// Idle devices one `mcpdev sim` process of the fleet holds.
const FLEET_PER_SIM: usize = 2_500;
const WARMUP: usize = 20;
/// Calls each client makes in a timed run (`MCP_BENCH_CALLS` to change): 1,000 make a run of a
/// few seconds, long enough that one slow moment of the machine does not decide its figures.
const CALLS: usize = 1000;

fn calls() -> usize {
    std::env::var("MCP_BENCH_CALLS").ok().and_then(|n| n.parse().ok()).filter(|n| *n > 0).unwrap_or(CALLS)
}

fn called() -> usize {
    std::env::var("MCP_BENCH_DEVICES").ok().and_then(|n| n.parse().ok()).filter(|n| (1..=255).contains(n)).unwrap_or(DEVICES)
}

/// Idle devices connected beside the called ones in the judged run (`MCP_BENCH_FLEET`, none by default).
fn fleet() -> usize {
    std::env::var("MCP_BENCH_FLEET").ok().and_then(|n| n.parse().ok()).unwrap_or(0)
}

fn client_config() -> ClientConfig {
    ClientConfig::new(ClientCapabilities::default(), Implementation::new("mcpdev-bench", "0"))
}

type Client = rmcp::service::RunningService<rmcp::RoleClient, ClientConfig>;

async fn call(c: &Client, tool: &str, v: usize) -> anyhow::Result<()> {
    let params = CallToolRequestParams::new(tool.to_string()).with_arguments(json!({"volume": v % 101}).as_object().cloned().expect("object"));
    let r = c.call_tool(params).await?;
    anyhow::ensure!(r.is_error != Some(true), "tool error: {r:?}");
    Ok(())
}

/// A process's user and system CPU time so far, and its minor page faults (`/proc/PID/stat`
/// fields 10, 14 and 15).
#[derive(Clone, Copy)]
struct Usage {
    user: Duration,
    sys: Duration,
    faults: u64,
}

fn cpu_time(pid: u32) -> anyhow::Result<Usage> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    // SAFETY: a plain sysconf query.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let time = |ticks: u64| Duration::from_secs_f64(ticks as f64 / hz);
    Ok(Usage { user: time(field(11)), sys: time(field(12)), faults: field(7) })
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Where the virtual devices run.
#[derive(Clone, Copy, PartialEq)]
enum Devices {
    /// In the hub's process (`serve --demo`): the hub's CPU includes theirs.
    InTheHub,
    /// In a process of their own (`mcpdev sim`), as real devices are: the hub's CPU is its own.
    OwnProcess,
    /// None: the floor server answers every call itself.
    None,
    /// In a process of their own, with this many idle devices more connected.
    Fleet(usize),
    /// In a process of their own, after this many idle devices came and left.
    FleetLeft(usize),
}

/// A hub serving [`devices`] virtual devices, all offered on `/mcp`.
struct Running {
    _hub: tokio::process::Child,
    _sim: Option<tokio::process::Child>,
    hub_pid: u32,
    url: String,
    /// The device listener's URL and the hub's state and runtime directories (its control token).
    devices_url: String,
    host: String,
    dirs: Option<(tempfile::TempDir, tempfile::TempDir)>,
}

async fn start(devices: Devices) -> anyhow::Result<Running> {
    let count = called().to_string();
    let dirs = (tempfile::tempdir()?, tempfile::tempdir()?);
    let env = [("MCPDEV_STATE_DIR", dirs.0.path().to_path_buf()), ("MCPDEV_RUNTIME_DIR", dirs.1.path().to_path_buf())];
    let mut args = vec!["serve", "--json", "--approve-all", "--device-addr", "127.0.0.1:0", "--host-addr", "127.0.0.1:0"];
    if devices == Devices::InTheHub {
        args.extend(["--demo", &count]);
    }
    let mut hub = tokio::process::Command::new(bin()).args(&args).envs(env.clone()).stdout(Stdio::piped()).stderr(Stdio::null()).kill_on_drop(true).spawn()?;
    let mut lines = BufReader::new(hub.stdout.take().expect("piped")).lines();
    let listening: Value = serde_json::from_str(&lines.next_line().await?.expect("hub exited"))?;
    let url = listening["mcp"].as_str().expect("mcp url").to_string();
    // The hub's event log is drained, so it never waits on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let sim = match devices {
        Devices::InTheHub | Devices::None => None,
        Devices::OwnProcess | Devices::Fleet(_) | Devices::FleetLeft(_) => {
            let device_url = listening["devices"].as_str().expect("devices url").to_string();
            let sim = tokio::process::Command::new(bin())
                .args(["sim", "--quiet", "--url", &device_url, "--count", &count])
                .envs(env.clone())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()?;
            Some(sim)
        }
    };

    // Until every device is onboarded and offered.
    let probe = client_config().serve(StreamableHttpClientTransport::from_uri(url.clone())).await?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let tools = probe.list_all_tools().await?;
        if tools.iter().filter(|t| t.name.ends_with(".self.audio_speaker.set_volume")).count() == called() {
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "the virtual devices were not all offered within 30 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    probe.cancel().await?;
    let hub_pid = hub.id().expect("the hub is running");
    let devices_url = listening["devices"].as_str().unwrap_or_default().to_string();
    let host = listening["host"].as_str().unwrap_or_default().trim_start_matches("http://").trim_end_matches('/').to_string();
    Ok(Running { _hub: hub, _sim: sim, hub_pid, url, devices_url, host, dirs: Some(dirs) })
}

/// `n` idle devices more on the hub, in `mcpdev sim` processes of their own (Device-Ids from
/// 02:00:00:02:00:00, apart from the called ones); returns once the hub counts them all ready.
async fn connect_fleet(hub: &Running, n: usize) -> anyhow::Result<Vec<tokio::process::Child>> {
    let (state, runtime) = hub.dirs.as_ref().context("the hub's directories")?;
    let mut sims = Vec::new();
    for first in (0..n).step_by(FLEET_PER_SIM) {
        let id = format!("{:012x}", 0x0200_0002_0000u64 + first as u64);
        let id = id.as_bytes().chunks(2).map(|c| std::str::from_utf8(c).unwrap_or("00")).collect::<Vec<_>>().join(":");
        let count = FLEET_PER_SIM.min(n - first).to_string();
        sims.push(
            tokio::process::Command::new(bin())
                .args(["sim", "--quiet", "--url", &hub.devices_url, "--count", &count, "--device-id", &id])
                .env("MCPDEV_STATE_DIR", state.path())
                .env("MCPDEV_RUNTIME_DIR", runtime.path())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()?,
        );
    }
    wait_for_ready(hub, |ready| ready >= n + called(), "all connected").await?;
    Ok(sims)
}

/// Polls the dashboard's device count (every 500 ms, for up to 10 minutes) until `done(ready)`.
async fn wait_for_ready(hub: &Running, done: impl Fn(usize) -> bool, what: &str) -> anyhow::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (_, runtime) = hub.dirs.as_ref().context("the hub's directories")?;
    let port = hub.host.rsplit(':').next().unwrap_or_default();
    let token = std::fs::read_to_string(runtime.path().join(format!("control-{port}.token")))?.trim().to_string();
    let started = Instant::now();
    loop {
        let mut s = tokio::net::TcpStream::connect(&hub.host).await?;
        let req = format!("GET /dashboard/api/devices?limit=1&state=ready HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n", hub.host);
        s.write_all(req.as_bytes()).await?;
        let mut out = Vec::new();
        s.read_to_end(&mut out).await?;
        let body = out.windows(4).position(|w| w == b"\r\n\r\n").map_or(&out[..0], |at| &out[at + 4..]);
        let ready = serde_json::from_slice::<Value>(body).ok().and_then(|v| v["matched"].as_u64()).unwrap_or(0) as usize;
        if done(ready) {
            eprintln!("{what}: {ready} devices ready after {:.1} s", started.elapsed().as_secs_f64());
            return Ok(());
        }
        anyhow::ensure!(started.elapsed() < Duration::from_secs(600), "{what}: still {ready} devices ready after 10 minutes");
        tokio::time::sleep(Duration::from_millis(500)).await; // polling interval, bounded by the deadline
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    if std::env::var_os(FLOOR_SERVER).is_some() {
        return floor_server().await;
    }
    mcpdev::tls::install_crypto_provider();
    let (n, fleet) = (called(), fleet());
    println!("tools/call through /mcp: {} concurrent MCP clients (rmcp, Streamable HTTP), {n} virtual devices called", client_count());
    println!("| devices | connections | calls | seconds | calls/s | p50 | p99 | max | hub CPU per call | of it, kernel | hub page faults per call | clients' CPU per call |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let hub = start(Devices::InTheHub).await?;
    run(&hub, Devices::InTheHub, Connections::KeepAlive).await?;
    // rmcp's default client opens a connection per request; what that costs, for comparison.
    run(&hub, Devices::InTheHub, Connections::PerRequest).await?;
    drop(hub);
    // The targets: keep-alive clients (MCP hosts keep their connection), and the hub's own CPU.
    let hub = start(Devices::OwnProcess).await?;
    let Figures { throughput, p99, cpu_per_call } = run(&hub, Devices::OwnProcess, Connections::KeepAlive).await?;
    // The same hub with a fleet connected beside the called devices, then once it has left.
    let mut at_fleet = None;
    if fleet > 0 {
        let sims = connect_fleet(&hub, fleet).await?;
        at_fleet = Some(run(&hub, Devices::Fleet(fleet), Connections::KeepAlive).await?.cpu_per_call);
        drop(sims);
        wait_for_ready(&hub, |ready| ready <= n, "the fleet left").await?;
        run(&hub, Devices::FleetLeft(fleet), Connections::KeepAlive).await?;
    }
    drop(hub);
    // The floor: what an HTTP server costs that only parses each request and answers it.
    let floor = start_floor().await?;
    run(&floor, Devices::None, Connections::KeepAlive).await?;
    println!(
        "targets (issue 14; devices in their own process, keep-alive clients): >= 15000 calls/s: {}; p99 <= 10 ms: {}; hub CPU <= 50 µs per call: {}",
        if throughput >= 15_000.0 { "met" } else { "MISSED" },
        if p99 <= Duration::from_millis(10) { "met" } else { "MISSED" },
        if cpu_per_call <= 50.0 { "met" } else { "MISSED" }
    );
    if let Some(cpu) = at_fleet {
        println!("target (issue 46.7; {fleet} more devices connected): hub CPU <= 25 µs per call: {} ({cpu:.1} µs; {cpu_per_call:.1} µs with the {n} called devices alone)", if cpu <= 25.0 { "met" } else { "MISSED" });
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq)]
enum Connections {
    /// Each client keeps its connection (reqwest's pool).
    KeepAlive,
    /// A new connection for every request: rmcp's default client (`from_uri`).
    PerRequest,
}

struct Figures {
    throughput: f64,
    p99: Duration,
    cpu_per_call: f64,
}

fn transport(url: &str, connections: Connections) -> StreamableHttpClientTransport<reqwest::Client> {
    match connections {
        Connections::PerRequest => StreamableHttpClientTransport::from_uri(url.to_string()),
        Connections::KeepAlive => {
            let http = reqwest::Client::builder().build().expect("an HTTP client");
            StreamableHttpClientTransport::with_client(http, StreamableHttpClientTransportConfig::with_uri(url.to_string()))
        }
    }
}

/// This process's user + system CPU time so far (the 64 clients').
fn own_cpu_time() -> Duration {
    // SAFETY: getrusage fills the struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// Warms up, then times [`calls`] sequential calls from each of `CLIENTS` sessions; prints a row.
async fn run(hub: &Running, devices: Devices, connections: Connections) -> anyhow::Result<Figures> {
    let Running { url, hub_pid, .. } = hub;
    let hub_pid = *hub_pid;
    let mut clients = Vec::new();
    for k in 0..client_count() {
        let c = client_config().serve(transport(url, connections)).await?;
        let tool = match devices {
            Devices::None => "floor".to_string(),
            _ => format!("dev-0200000000{:02x}.self.audio_speaker.set_volume", k % called() + 1),
        };
        clients.push((c, tool));
    }
    // All at once, so that no client's connection has sat idle past the hub's header timeout
    // (10 s) when the timed run starts.
    let warmups = clients.iter().map(|(c, tool)| async move {
        for i in 0..WARMUP {
            call(c, tool, i).await?;
        }
        Ok::<_, anyhow::Error>(())
    });
    for r in futures_util::future::join_all(warmups).await {
        r?;
    }

    let cpu_before = cpu_time(hub_pid)?;
    let own_before = own_cpu_time();
    let started = Instant::now();
    let mut tasks = Vec::new();
    let calls = calls();
    for (c, tool) in clients.iter() {
        tasks.push(async move {
            let mut latencies = Vec::with_capacity(calls);
            for i in 0..calls {
                let t = Instant::now();
                call(c, tool, i).await?;
                latencies.push(t.elapsed());
            }
            Ok::<_, anyhow::Error>(latencies)
        });
    }
    let results = futures_util::future::join_all(tasks).await;
    let elapsed = started.elapsed();
    let after = cpu_time(hub_pid)?;
    let hub_cpu = (after.user + after.sys) - (cpu_before.user + cpu_before.sys);
    let sys_per_call = (after.sys - cpu_before.sys).as_secs_f64() * 1e6 / (calls * client_count()) as f64;
    let faults_per_call = (after.faults - cpu_before.faults) as f64 / (calls * client_count()) as f64;
    let own_cpu = own_cpu_time() - own_before;
    let mut all: Vec<Duration> = Vec::new();
    for r in results {
        all.extend(r?);
    }
    all.sort();
    let total = all.len();
    let throughput = total as f64 / elapsed.as_secs_f64();
    let (p50, p99, max) = (percentile(&all, 0.50), percentile(&all, 0.99), *all.last().expect("calls"));
    let cpu_per_call = hub_cpu.as_secs_f64() * 1e6 / total as f64;
    let own_per_call = own_cpu.as_secs_f64() * 1e6 / total as f64;
    let label = match connections {
        Connections::KeepAlive => "kept alive",
        Connections::PerRequest => "one per request",
    };
    let where_ = match devices {
        Devices::InTheHub => "in the hub".to_string(),
        Devices::OwnProcess => "own process".to_string(),
        Devices::None => "floor: HTTP + JSON only".to_string(),
        Devices::Fleet(n) => format!("own process, {n} more connected"),
        Devices::FleetLeft(n) => format!("own process, after {n} more left"),
    };
    println!(
        "| {where_} | {label} | {total} | {:.2} | {throughput:.0} | {:.2} ms | {:.2} ms | {:.2} ms | {cpu_per_call:.1} µs | {sys_per_call:.1} µs | {faults_per_call:.2} | {own_per_call:.0} µs |",
        elapsed.as_secs_f64(),
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        max.as_secs_f64() * 1e3
    );
    for (c, _) in clients {
        let _ = c.cancel().await;
    }
    Ok(Figures { throughput, p99, cpu_per_call })
}

/// Set (to anything) to run this binary as the floor server.
const FLOOR_SERVER: &str = "MCP_BENCH_FLOOR_SERVER";

/// This binary again, as the floor server (a process of its own, so its CPU is measured alone).
async fn start_floor() -> anyhow::Result<Running> {
    let mut server = tokio::process::Command::new(std::env::current_exe()?)
        .env(FLOOR_SERVER, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()?;
    let mut lines = BufReader::new(server.stdout.take().expect("piped")).lines();
    let url = lines.next_line().await?.context("the floor server exited")?;
    let hub_pid = server.id().expect("the floor server is running");
    Ok(Running { _hub: server, _sim: None, hub_pid, url, devices_url: String::new(), host: String::new(), dirs: None })
}

/// The floor: an axum server on the hub's runtime settings that reads each JSON-RPC request,
/// parses it, and answers it at once (initialize, notifications, and every `tools/call` with
/// the result a device gives). No session, no device, no checks: what any HTTP MCP endpoint
/// costs before it does anything.
async fn floor_server() -> anyhow::Result<()> {
    use axum::http::{StatusCode, header};
    use axum::response::IntoResponse;
    async fn answer(body: axum::body::Bytes) -> axum::response::Response {
        let Ok(request) = serde_json::from_slice::<Value>(&body) else { return StatusCode::BAD_REQUEST.into_response() };
        let Some(id) = request.get("id") else { return StatusCode::ACCEPTED.into_response() };
        let result = match request["method"].as_str() {
            Some("initialize") => json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "floor", "version": "0"}}),
            _ => json!({"content": [{"type": "text", "text": "true"}], "isError": false}),
        };
        let body = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
        ([(header::CONTENT_TYPE, "application/json"), (header::HeaderName::from_static("mcp-session-id"), "floor")], body).into_response()
    }
    let app = axum::Router::new().route("/mcp", axum::routing::post(answer).delete(|| async { StatusCode::NO_CONTENT }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("http://{}/mcp", listener.local_addr()?);
    // Replies go out at once, as the hub's do (TCP_NODELAY).
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app).await?;
    Ok(())
}
