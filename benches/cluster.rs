//! The cluster's costs (issue 26), with real processes: Mosquitto, `mcpdev serve` hubs on it,
//! and `mcpdev sim --mqtt` devices.
//!
//! 1. A cross-hub call against a local one: 1,000 sequential `tools/call`s through the hub that
//!    serves the device, then through another hub (which forwards them over the broker):
//!    latency (p50, p90) and the CPU time both hubs spent per call (from /proc).
//! 2. Broker traffic per device at rest: Mosquitto's own byte counters (`$SYS`) over a quiet
//!    minute, with 1,000 devices onboarded on two hubs.
//! 3. Takeover: `kill -9` of the hub that serves most of the 1,000 devices; the time until the
//!    survivor serves every one of them (onboarded again, ready).
//!
//! Run: `cargo bench --bench cluster` (needs `mosquitto`; figures in benches/README.md). The hubs
//! offer each other their direct link (`--cluster-link`); `MCPDEV_BENCH_LINK=0` sends every
//! request through the broker instead.
//! `MCPDEV_BENCH_DEVICES` sets the fleet (default 1000), `MCPDEV_BENCH_REST_SECS` the quiet
//! window (default 60), and `MCPDEV_BENCH_LOG_DIR` a directory for the hubs' logs (warnings and
//! up; else they are discarded).
//!
//! **At scale** (issue 36): with `MCPDEV_BENCH_HUBS=N` (3 or more) the bench instead runs N hubs
//! on one Mosquitto with `MCPDEV_BENCH_DEVICES` devices, half of them MQTT (one `sim --mqtt`
//! process), half WebSocket (one `sim` per hub, attached to it), and reports: the time until
//! hub 1 lists every device ready; each hub's memory per device it serves; Mosquitto's memory
//! and messages per second at rest; a cross-hub call against a local one at that size (latency,
//! CPU of both hubs); `devices --ndjson` and the table through hub 1 (first line, end, the hub's
//! memory before and after); `search_devices` and a call through `/mcp` (`mcpdev call --url`) of
//! the device that arrived last; and the takeover after `kill -9` of the hub serving most MQTT
//! devices. Throughout: what every hub lists ready (paged `devices`, every hub at once every
//! `MCPDEV_BENCH_VIEW_SECS`, 5, during the ramp) against the most any hub listed in that round, so a hub whose view shrinks shows; the
//! smallest count any hub lists once all are ready; and the broker connections the hubs lost
//! (counted from their warnings), with why.

use std::process::Stdio;
use std::time::{Duration, Instant};

use mcpdev::links::hub_client::HubClient;
use rumqttc::{AsyncClient, Event, MqttOptions, Packet, QoS};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

const CALLS: usize = 1000;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    rt.block_on(run());
}

struct Proc(tokio::process::Child);

impl Proc {
    fn pid(&self) -> u32 {
        self.0.id().expect("running")
    }
}

/// utime + stime of a process, in clock ticks (100 per second on Linux).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let f: Vec<&str> = after.split_whitespace().collect();
    f.get(11).and_then(|u| u.parse::<u64>().ok()).unwrap_or(0) + f.get(12).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0)
}

async fn mosquitto(dir: &std::path::Path) -> (Proc, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let conf = dir.join("mosquitto.conf");
    // `set_tcp_nodelay`: as docs/cluster.md advises, so a hub-to-hub request is not held by Nagle's
    // algorithm behind the keepalives on the same connection.
    std::fs::write(&conf, format!("listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\nsys_interval 1\nmax_keepalive 65535\nset_tcp_nodelay {}\n", std::env::var("MCPDEV_BENCH_NODELAY").as_deref() != Ok("0"))).unwrap();
    let bin = ["/usr/sbin/mosquitto", "/usr/bin/mosquitto"].into_iter().find(|p| std::path::Path::new(p).exists()).expect("mosquitto is installed (.ci/test)");
    // Its log (why it dropped a client: "exceeded timeout", a protocol error) with the hubs' logs.
    let log = std::env::var_os("MCPDEV_BENCH_LOG_DIR").map(|d| std::fs::File::create(std::path::Path::new(&d).join("mosquitto.log")).expect("MCPDEV_BENCH_LOG_DIR is writable"));
    let child = tokio::process::Command::new(bin).arg("-c").arg(&conf).stdout(Stdio::null()).stderr(log.map_or_else(Stdio::null, Stdio::from)).kill_on_drop(true).spawn().unwrap();
    (Proc(child), port)
}

/// A hub process; its host URL.
async fn hub(broker: &str, state: &std::path::Path) -> (Proc, String) {
    let (p, host, _) = hub_with(broker, state, &[]).await;
    (p, host)
}

/// Every broker connection a hub lost (its warning "MQTT broker unreachable"): the hub's number
/// (1 for state `h0`; 0 for another) and why.
static LOSSES: std::sync::Mutex<Vec<(usize, String)>> = std::sync::Mutex::new(Vec::new());

/// The broker connections the hubs lost so far, as [`LOSSES`] holds them.
fn broker_losses() -> Vec<(usize, String)> {
    LOSSES.lock().unwrap().clone()
}

/// A hub process with `extra` arguments, sharing the bench's hub secret; its host and device URLs.
async fn hub_with(broker: &str, state: &std::path::Path, extra: &[&str]) -> (Proc, String, String) {
    share_secret(state);
    // `MCPDEV_BENCH_LOG_DIR`: each hub's log (warnings and up) goes to a file there, named after
    // its state directory, so a run that fails says why. Read here either way, to count the
    // broker connections the hub lost.
    let log = std::env::var_os("MCPDEV_BENCH_LOG_DIR").map(|d| {
        let name = state.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "hub".into());
        std::fs::File::create(std::path::Path::new(&d).join(format!("{name}.log"))).expect("MCPDEV_BENCH_LOG_DIR is writable")
    });
    // `MCPDEV_BENCH_HUB<N>_WRAP`: a command hub N (state `h<N-1>`) runs under, to profile it
    // (`heaptrack -o /tmp/h0`, `perf record -g -o /tmp/h0.data --`) or to try a setting on some
    // hubs of one run and not the others (`env MIMALLOC_ALLOW_THP=0`).
    let number = state
        .file_name()
        .and_then(|n| n.to_str()?.strip_prefix('h')?.parse::<usize>().ok());
    let wrap: Vec<String> = number
        .and_then(|i| std::env::var(format!("MCPDEV_BENCH_HUB{}_WRAP", i + 1)).ok())
        .map(|w| w.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default();
    let mut command = match wrap.split_first() {
        Some((first, rest)) => {
            let mut c = tokio::process::Command::new(first);
            c.args(rest).arg(env!("CARGO_BIN_EXE_mcpdev"));
            c
        }
        None => tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev")),
    };
    let mut child = command
        .args([
            "serve",
            "--json",
            "--approve-all",
            "--device-addr",
            "127.0.0.1:0",
            "--host-addr",
            "127.0.0.1:0",
            "--mqtt",
            broker,
        ])
        .args(extra)
        // The hubs' direct link for their requests (docs/cluster.md), unless `MCPDEV_BENCH_LINK=0`
        // (every request through the broker, as before `--cluster-link`).
        .args(if std::env::var("MCPDEV_BENCH_LINK").as_deref() == Ok("0") { &[][..] } else { &["--cluster-link", "127.0.0.1:0"][..] })
        .env("MCPDEV_STATE_DIR", state)
        .env("RUST_LOG", "warn")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // Its warnings: to the log file, and each lost broker connection counted ([`broker_losses`]).
    let mut warnings = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut log = log;
    tokio::spawn(async move {
        while let Ok(Some(line)) = warnings.next_line().await {
            if line.contains("MQTT broker unreachable") {
                let why = line.split_once("why=").map_or("", |(_, w)| w).trim().chars().take(80).collect();
                LOSSES.lock().unwrap().push((number.map_or(0, |i| i + 1), why));
            }
            if let Some(f) = log.as_mut() {
                let _ = std::io::Write::write_all(f, format!("{line}\n").as_bytes());
            }
        }
    });
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // The hub's first JSON line (a profiler it runs under may write its own lines first).
    let line = loop {
        let line = lines.next_line().await.unwrap().expect("the hub starts");
        if line.starts_with('{') {
            break line;
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let v: Value = serde_json::from_str(&line).unwrap();
    (
        Proc(child),
        v["host"].as_str().unwrap().to_string(),
        v["devices"].as_str().unwrap_or_default().to_string(),
    )
}

/// The devices a hub lists as its own and ready, and all it lists.
async fn listing(client: &HubClient) -> (Vec<String>, usize) {
    let rows = client.call(json!({"op": "devices"})).await.map(|v| v.as_array().cloned().unwrap_or_default()).unwrap_or_default();
    let own = rows.iter().filter(|d| d.get("session_id").is_some() && d["phase"] == "ready").filter_map(|d| d["device_id"].as_str().map(str::to_string)).collect();
    (own, rows.iter().filter(|d| d["phase"] == "ready").count())
}

async fn until(limit: Duration, what: &str, mut ok: impl AsyncFnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !ok().await {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    start.elapsed()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// `CALLS` sequential calls of `device` through `client`: p50, p90, and the CPU time each of the
/// two hubs spent per call, less what it spends at rest (`at_rest`, ticks a second, measured
/// before: a hub serving 17,000 devices spends 6 % of a core on their keepalives, which a slow
/// series of calls would otherwise be charged with).
async fn calls(client: &HubClient, device: &str, pids: [u32; 2], at_rest: [f64; 2]) -> (Duration, Duration, [f64; 2]) {
    let req = json!({"op": "rpc", "device": device, "method": "tools/call", "params": {"name": "self.audio_speaker.set_volume", "arguments": {"volume": 30}}, "timeout_ms": 10000});
    for _ in 0..100 {
        client.call(req.clone()).await.expect("warm-up call");
    }
    let cpu0 = pids.map(cpu_ticks);
    let started = Instant::now();
    let mut times = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let t = Instant::now();
        client.call(req.clone()).await.expect("call");
        times.push(t.elapsed());
    }
    let cpu1 = pids.map(cpu_ticks);
    let elapsed = started.elapsed().as_secs_f64();
    times.sort();
    // Ticks are 10 ms: per call in µs.
    let per_call = [0, 1].map(|i| ((cpu1[i] - cpu0[i]) as f64 - at_rest[i] * elapsed).max(0.0) * 10_000.0 / CALLS as f64);
    (percentile(&times, 0.5), percentile(&times, 0.9), per_call)
}

/// Mosquitto's `$SYS/broker/bytes/{received,sent}` and `…/messages/{received,sent}` now.
async fn broker_counters(port: u16) -> [u64; 4] {
    let mut o = MqttOptions::new(format!("bench-sys-{}", std::process::id()), "127.0.0.1", port);
    o.set_keep_alive(Duration::from_secs(30));
    let (client, mut events) = AsyncClient::new(o, 64);
    client.subscribe("$SYS/broker/+/+", QoS::AtMostOnce).await.unwrap();
    let names = ["$SYS/broker/bytes/received", "$SYS/broker/bytes/sent", "$SYS/broker/messages/received", "$SYS/broker/messages/sent"];
    let mut got = [None; 4];
    let deadline = Instant::now() + Duration::from_secs(10);
    while got.iter().any(Option::is_none) && Instant::now() < deadline {
        if let Ok(Ok(Event::Incoming(Packet::Publish(p)))) = tokio::time::timeout(Duration::from_secs(3), events.poll()).await
            && let Some(i) = names.iter().position(|n| *n == p.topic)
        {
            got[i] = String::from_utf8_lossy(&p.payload).trim().parse().ok();
        }
    }
    let _ = client.disconnect().await;
    got.map(|v| v.expect("mosquitto publishes its counters ($SYS, sys_interval 1)"))
}

/// The hub secret every hub of the bench's clusters shares (docs/cluster.md).
fn share_secret(state: &std::path::Path) {
    std::fs::create_dir_all(state).unwrap();
    let path = state.join("hub-secret");
    std::fs::write(&path, "5b".repeat(32)).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
}

async fn run() {
    if env_or("MCPDEV_BENCH_HUBS", 0) >= 3 {
        return scale::run().await;
    }
    let devices = env_or("MCPDEV_BENCH_DEVICES", 1000) as usize;
    let rest = Duration::from_secs(env_or("MCPDEV_BENCH_REST_SECS", 60));
    // A thousand broker connections: Mosquitto and the simulator inherit this limit.
    mcpdev::hub::budget::raise_fd_limit();
    let dir = tempfile::tempdir().unwrap();
    // The hubs write their control tokens here, where this process's clients read them.
    // SAFETY: set before any thread of this process reads the environment concurrently.
    unsafe { std::env::set_var("MCPDEV_RUNTIME_DIR", dir.path()) };
    let (_broker, port) = mosquitto(dir.path()).await;
    let url = format!("mqtt://127.0.0.1:{port}");
    let states = [dir.path().join("a"), dir.path().join("b")];
    let (hub_a, url_a) = hub(&url, &states[0]).await;
    let (hub_b, url_b) = hub(&url, &states[1]).await;
    let (ca, cb) = (HubClient::connect(&url_a).await.unwrap(), HubClient::connect(&url_b).await.unwrap());
    let mut hubs = [hub_a, hub_b];

    // 1. cross-hub vs local, with one device.
    let _one = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"))
        .args(["sim", "--mqtt", &url, "--device-id", "0e:00:00:00:00:01", "--quiet"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    until(Duration::from_secs(30), "the device onboards", async || listing(&ca).await.1 == 1 && listing(&cb).await.1 == 1).await;
    let a_serves = !listing(&ca).await.0.is_empty();
    let (local, remote, pids) = if a_serves { (&ca, &cb, [hubs[0].pid(), hubs[1].pid()]) } else { (&cb, &ca, [hubs[1].pid(), hubs[0].pid()]) };
    println!("## cross-hub vs local tools/call ({CALLS} sequential calls, Mosquitto on loopback, debug={})", cfg!(debug_assertions));
    println!("| path | p50 | p90 | CPU of the serving hub / call | CPU of the asking hub / call |");
    println!("|---|---:|---:|---:|---:|");
    // One device: the hubs are idle between calls, nothing to subtract.
    let (p50, p90, cpu) = calls(local, "0e:00:00:00:00:01", pids, [0.0; 2]).await;
    println!("| local (through the serving hub) | {p50:.2?} | {p90:.2?} | {:.0} µs | - |", cpu[0]);
    let (p50, p90, cpu) = calls(remote, "0e:00:00:00:00:01", pids, [0.0; 2]).await;
    println!("| cross-hub (through the other hub: its link, or the broker with MCPDEV_BENCH_LINK=0) | {p50:.2?} | {p90:.2?} | {:.0} µs | {:.0} µs |", cpu[0], cpu[1]);

    // 2. 1,000 devices at rest (plus the one above).
    let _fleet = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"))
        .args(["sim", "--mqtt", &url, "--device-id", "0e:00:00:00:10:00", "--count", &devices.to_string(), "--quiet"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let onboard = until(Duration::from_secs(300), "the fleet onboards", async || listing(&ca).await.1 > devices).await;
    let (own_a, _) = listing(&ca).await;
    let (own_b, _) = listing(&cb).await;
    println!("\n## {devices} devices ({} on hub A, {} on hub B), onboarded in {onboard:.1?}", own_a.len(), own_b.len());
    // Let the hubs' confirmation re-lists, index updates and /mcp stand-ins pass.
    tokio::time::sleep(Duration::from_secs(30)).await;
    let before = broker_counters(port).await;
    let cpu0 = [cpu_ticks(hubs[0].pid()), cpu_ticks(hubs[1].pid())];
    tokio::time::sleep(rest).await;
    let after = broker_counters(port).await;
    let cpu1 = [cpu_ticks(hubs[0].pid()), cpu_ticks(hubs[1].pid())];
    let per = |i: usize| (after[i] - before[i]) as f64 / (devices + 1) as f64 / rest.as_secs_f64() * 60.0;
    println!("broker traffic at rest over {rest:?}, per device per minute: {:.0} B in, {:.0} B out, {:.2} messages in, {:.2} messages out", per(0), per(1), per(2), per(3));
    println!("(everything on the broker: devices' MQTT keepalives, the hubs' MCP pings every --keepalive (60 s) and their answers, the hubs' own keepalives; index publishes: none at rest)");
    println!("hub CPU at rest: A {:.1}% B {:.1}% of one core", (cpu1[0] - cpu0[0]) as f64 / rest.as_secs_f64(), (cpu1[1] - cpu0[1]) as f64 / rest.as_secs_f64());

    // 3. kill -9 of the hub with more devices.
    let (victim, survivor, moving) = if own_a.len() >= own_b.len() { (0, &cb, own_a.len()) } else { (1, &ca, own_b.len()) };
    let gone = if victim == 0 { &own_a } else { &own_b };
    let moved = takeover(&mut hubs[victim], survivor, gone).await;
    println!("\n## takeover: kill -9 of the hub serving {moving} devices; the survivor serves them all (ready again) {moved}");

    // 3b. A third hub joins; the hub that now serves every device is killed: the newcomer takes
    // all of them over.
    let (hub_c, url_c) = hub(&url, &dir.path().join("c")).await;
    let cc = HubClient::connect(&url_c).await.unwrap();
    until(Duration::from_secs(60), "the new hub sees the cluster", async || listing(&cc).await.1 > devices).await;
    let _keep = hub_c;
    let all: Vec<String> = own_a.iter().chain(&own_b).cloned().collect();
    let moved = takeover(&mut hubs[1 - victim], &cc, &all).await;
    println!("## takeover: a hub joins, then kill -9 of the hub serving all {} devices; the new hub serves them all (ready again) {moved}", devices + 1);
}

/// `kill -9` of `victim`; how long until `survivor` serves the devices `moving` it served, with
/// the times of the first and of half of them (where the time goes). Read from the survivor's
/// `ready` events (listing 1,000 devices every few ms would take the survivor's CPU from the
/// takeover it measures); should its watch lag, the rest is polled.
async fn takeover(victim: &mut Proc, survivor: &HubClient, moving: &[String]) -> String {
    let mut events = survivor.watch(None, false).await.expect("watch the survivor");
    // Its first answer: the watch is set up before the kill.
    tokio::time::timeout(Duration::from_secs(10), events.recv()).await.expect("the watch starts").expect("the watch starts");
    let wanted: std::collections::HashSet<&str> = moving.iter().map(String::as_str).collect();
    let mut seen = std::collections::HashSet::new();
    victim.0.kill().await.unwrap();
    let killed = Instant::now();
    let mut marks = Vec::new();
    while seen.len() < wanted.len() {
        let Ok(ev) = tokio::time::timeout(Duration::from_secs(120), events.recv()).await else {
            let (own, _) = listing(survivor).await;
            let missing: Vec<&&str> = wanted.iter().filter(|id| !own.iter().any(|o| o == **id)).take(10).collect();
            panic!("the takeover did not end within 120 s: {} of {} ready events seen; not served by the survivor now: {} (first: {missing:?})", seen.len(), wanted.len(), wanted.len() - own.iter().filter(|o| wanted.contains(o.as_str())).count());
        };
        let ev = ev.expect("the watch goes on");
        // The event itself, whether or not it comes in its envelope.
        let ev = if ev["event"].is_object() { ev["event"].clone() } else { ev };
        if ev["event"] == "lagged" {
            marks.push(format!("(watch lagged at {}: polled)", seen.len()));
            until(Duration::from_secs(120), "the survivor serves every device", async || {
                let (own, _) = listing(survivor).await;
                wanted.iter().all(|id| own.iter().any(|o| o == id))
            })
            .await;
            break;
        }
        if ev["event"] == "ready"
            && let Some(id) = ev["device_id"].as_str()
            && wanted.contains(id)
            && seen.insert(id.to_string())
            && (seen.len() == 1 || seen.len() == wanted.len() / 2)
        {
            marks.push(format!("{} {:.2?}", if seen.len() == 1 { "first" } else { "half" }, killed.elapsed()));
        }
    }
    format!("{:.2?} after the kill ({})", killed.elapsed(), marks.join(", "))
}

#[path = "cluster_parts/scale.rs"]
mod scale;
