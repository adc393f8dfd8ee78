//! The cluster at scale (issue 36): N hubs on one Mosquitto, half the devices (or
//! `MCPDEV_BENCH_MQTT_DEVICES`) over MQTT, the rest
//! over WebSocket attached to each hub (from 64 source addresses each, as a fleet comes from many);
//! see the bench's opening comment for what is reported.

use std::process::Stdio;
use std::time::{Duration, Instant};

use mcpdev::links::hub_client::HubClient;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};

use super::{Proc, broker_counters, broker_losses, calls, cpu_ticks, env_or, hub_with, mosquitto, until};

/// Resident memory of a process, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// `mcpdev sim ARGS`. With `MCPDEV_BENCH_LOG_DIR`, its warnings (and each MQTT device's
/// connection) go to `<dir>/<name>.log`, so a device that never became ready can be looked up.
fn sim(name: &str, args: &[&str]) -> Proc {
    let log = std::env::var_os("MCPDEV_BENCH_LOG_DIR")
        .map(|d| std::fs::File::create(std::path::Path::new(&d).join(format!("{name}.log"))).expect("MCPDEV_BENCH_LOG_DIR is writable"));
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"))
        .args(["sim", "--quiet"])
        .args(args)
        .env("RUST_LOG", if log.is_some() { "warn,mcpdev::sim::mqtt=info" } else { "error" })
        .stdout(Stdio::null())
        .stderr(log.map_or_else(Stdio::null, Stdio::from))
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    Proc(child)
}

/// Every device a hub lists (its own and the cluster's), paging through `devices` 1,000 at a
/// time; a page that fails ends the listing there.
async fn each_device(client: &HubClient, mut each: impl FnMut(&serde_json::Value)) {
    let mut after = None::<String>;
    loop {
        let Ok(page) = client.call(json!({"op": "devices", "limit": 1000, "after": after})).await else {
            return;
        };
        page["devices"].as_array().into_iter().flatten().for_each(&mut each);
        match page["next"].as_str() {
            Some(n) => after = Some(n.to_string()),
            None => return,
        }
    }
}

/// What a hub lists ready: (in all, served by it, served by it whose onboarding failed: listed
/// `ready` without tools until the hub onboards them again).
async fn census(client: &HubClient) -> (usize, usize, usize) {
    let (mut ready, mut own, mut failed) = (0, 0, 0);
    each_device(client, |d| {
        if d["phase"] == "ready" {
            ready += 1;
            if d.get("session_id").is_some() {
                own += 1;
                failed += usize::from(d["onboarding"]["failed"] == true);
            }
        }
    })
    .await;
    (ready, own, failed)
}

/// The ids a hub lists ready (its own and the cluster's).
async fn ready_ids(client: &HubClient) -> std::collections::HashSet<String> {
    let mut ids = std::collections::HashSet::new();
    each_device(client, |d| {
        if d["phase"] == "ready"
            && let Some(id) = d["device_id"].as_str()
        {
            ids.insert(id.to_string());
        }
    })
    .await;
    ids
}

/// The `count` device ids a sim numbers up from `first` (a MAC counted as a number).
fn ids_from(first: &str, count: usize) -> impl Iterator<Item = String> + use<> {
    let base = u64::from_str_radix(&first.replace(':', ""), 16).expect("a MAC");
    (0..count as u64).map(move |i| {
        let b = (base + i).to_be_bytes();
        format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", b[2], b[3], b[4], b[5], b[6], b[7])
    })
}

/// Says which expected devices a hub does not list ready (at most 10), and how it lists each.
async fn say_missing(client: &HubClient, expected: impl Iterator<Item = String>) {
    let mut rows = std::collections::HashMap::new();
    each_device(client, |d| {
        if let Some(id) = d["device_id"].as_str() {
            rows.insert(id.to_string(), d.clone());
        }
    })
    .await;
    let missing: Vec<String> = expected.filter(|id| rows.get(id).is_none_or(|d| d["phase"] != "ready")).collect();
    println!("not ready through hub 1: {} devices", missing.len());
    for id in missing.iter().take(10) {
        match rows.get(id) {
            Some(d) => println!("  {id}: listed {}", json!({"phase": d["phase"], "transport": d["transport"], "hub": d["hub"], "onboarding": d["onboarding"]})),
            None => println!("  {id}: not listed"),
        }
    }
}

/// `mcpdev ARGS` against a hub: the time to its first line on stdout, and to its end.
async fn timed(
    host: &str,
    runtime: &std::path::Path,
    args: &[&str],
) -> (Duration, Duration, usize) {
    let start = Instant::now();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"))
        .args(args)
        .env("MCPDEV_HUB", host)
        .env("MCPDEV_RUNTIME_DIR", runtime)
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let (mut first, mut n) = (None, 0);
    while let Ok(Some(_)) = lines.next_line().await {
        first.get_or_insert_with(|| start.elapsed());
        n += 1;
    }
    let _ = child.wait().await;
    (first.unwrap_or_default(), start.elapsed(), n)
}

pub async fn run() {
    let n = env_or("MCPDEV_BENCH_HUBS", 3) as usize;
    let devices = env_or("MCPDEV_BENCH_DEVICES", 6000) as usize;
    // How many of them come over MQTT (default half): a machine whose open-file limit is below
    // the MQTT devices cannot hold them in one Mosquitto and one `sim --mqtt`.
    let mqtt = (env_or("MCPDEV_BENCH_MQTT_DEVICES", devices as u64 / 2) as usize).min(devices);
    let rest = Duration::from_secs(env_or("MCPDEV_BENCH_REST_SECS", 60));
    mcpdev::hub::budget::raise_fd_limit();
    let dir = tempfile::tempdir().unwrap();
    // SAFETY: set before any thread of this process reads the environment concurrently.
    unsafe { std::env::set_var("MCPDEV_RUNTIME_DIR", dir.path()) };
    let (broker, port) = mosquitto(dir.path()).await;
    let url = format!("mqtt://127.0.0.1:{port}");
    let mut hubs = Vec::new();
    for i in 0..n {
        hubs.push(hub_with(&url, &dir.path().join(format!("h{i}")), &[]).await);
    }
    let clients: Vec<HubClient> =
        futures_util::future::join_all(hubs.iter().map(|h| HubClient::connect(&h.1)))
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let base: Vec<u64> = hubs.iter().map(|h| rss_kib(h.0.pid())).collect();
    let broker_base = rss_kib(broker.pid());
    println!(
        "## {n} hubs, {devices} devices ({} MQTT, {} WebSocket), Mosquitto on loopback, hub links {}, debug={}",
        mqtt,
        devices - mqtt,
        if std::env::var("MCPDEV_BENCH_LINK").as_deref() == Ok("0") { "off (MCPDEV_BENCH_LINK=0)" } else { "on" },
        cfg!(debug_assertions)
    );

    // Devices: MQTT ids 0f:00:…, WebSocket ids 0f:<hub+1>:… (the last one of the last hub
    // arrives last).
    let started = Instant::now();
    let _mqtt = sim("sim-mqtt", &[
        "--mqtt",
        &url,
        "--device-id",
        "0f:00:00:00:00:00",
        "--count",
        &mqtt.to_string(),
    ]);
    let ws_each = (devices - mqtt) / n;
    let mut _ws = Vec::new();
    let mut last_ws = String::new();
    for (i, h) in hubs.iter().enumerate() {
        let first = format!("0f:{:02x}:00:00:00:00", i + 1);
        // A real fleet comes from many addresses: each hub's devices from 64 of their own
        // (127.0.<hub+1>.1–64), so the per-address caps before hello pace no one source.
        let sources = (1..=64).map(|k| format!("127.0.{}.{k}", i + 1)).collect::<Vec<_>>().join(",");
        _ws.push(sim(&format!("sim-ws-{}", i + 1), &[
            "--url",
            &h.2,
            "--device-id",
            &first,
            "--count",
            &ws_each.to_string(),
            "--source-addr",
            &sources,
        ]));
        last_ws = format!(
            "0f:{:02x}:00:00:{:02x}:{:02x}",
            i + 1,
            (ws_each - 1) / 256,
            (ws_each - 1) % 256
        );
    }
    let total = mqtt + ws_each * n;
    // Until every device is listed ready through hub 1, or the count has not grown for 2 minutes
    // (then what is missing is said, and the rest is measured at that size). Progress on stderr
    // every 30 s, so a slow ramp shows where it is.
    // Hub 1 every second; every `MCPDEV_BENCH_VIEW_SECS` (5) a round through every hub at once
    // (a listing costs each hub about what `devices` costs it: below): a hub that lists fewer
    // than the most any hub listed in the round, or fewer than it did the round before, has a
    // view that shrank.
    let view_every = Duration::from_secs(env_or("MCPDEV_BENCH_VIEW_SECS", 5).max(1));
    let (mut said, mut best, mut grew) = (Instant::now(), 0, Instant::now());
    let (mut views, mut viewed) = (Views::new(n), Instant::now());
    let listed = loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (ready, own, _) = if viewed.elapsed() >= view_every {
            viewed = Instant::now();
            let round = futures_util::future::join_all(clients.iter().map(census)).await;
            views.round(&round, started.elapsed());
            round[0]
        } else {
            census(&clients[0]).await
        };
        if said.elapsed() >= Duration::from_secs(30) {
            said = Instant::now();
            eprintln!("[{:.0?}] {ready} of {total} ready through hub 1 ({own} its own); broker connections lost so far: {}", started.elapsed(), broker_losses().len());
        }
        if ready > best {
            (best, grew) = (ready, Instant::now());
        }
        if ready >= total || grew.elapsed() >= Duration::from_secs(120) || started.elapsed() >= Duration::from_secs(1800) {
            break ready;
        }
    };
    if listed >= total {
        println!("all {total} ready, listed through hub 1: {:.1?} after the first sim started", started.elapsed());
    } else {
        println!(
            "NOT all ready: {listed} of {total} listed ready through hub 1 {:.1?} after the first sim started ({best} at most, reached {:.1?} earlier); measured on at that size",
            started.elapsed(),
            grew.elapsed()
        );
        let ws = (0..n).flat_map(|i| ids_from(&format!("0f:{:02x}:00:00:00:00", i + 1), ws_each));
        say_missing(&clients[0], ids_from("0f:00:00:00:00:00", mqtt).chain(ws)).await;
    }
    views.say("during the ramp");
    let losses = broker_losses();
    say_losses("during the ramp", &losses);
    tokio::time::sleep(Duration::from_secs(10)).await;
    // Once all are ready: every hub, a few rounds.
    let mut views = Views::new(n);
    for _ in 0..3 {
        let round = futures_util::future::join_all(clients.iter().map(census)).await;
        views.round(&round, started.elapsed());
    }
    let fewest = views.fewest.0;
    println!(
        "{}: the fewest devices any hub listed ready {fewest} of {total} ({} missing; hub {}), over 3 rounds through all {n} hubs",
        if listed >= total { "once all were ready" } else { "after the ramp (NOT all ready)" },
        total.saturating_sub(fewest),
        views.fewest.1 + 1
    );
    let mut own = Vec::new();
    for (i, c) in clients.iter().enumerate() {
        let (_, mine, failed) = census(c).await;
        let kib = rss_kib(hubs[i].0.pid());
        println!(
            "hub {}: serves {mine} ({failed} with a failed onboarding), RSS {} MB ({} MB before), {:.2} KB a device it serves, {:.2} KB a device of the cluster",
            i + 1,
            kib / 1024,
            base[i] / 1024,
            (kib - base[i]) as f64 / mine.max(1) as f64 * 1.024,
            (kib - base[i]) as f64 / total as f64 * 1.024
        );
        own.push(mine);
    }

    // At rest: the broker's memory and traffic.
    let before = broker_counters(port).await;
    let cpu0: Vec<u64> = hubs.iter().map(|h| cpu_ticks(h.0.pid())).collect();
    tokio::time::sleep(rest).await;
    let after = broker_counters(port).await;
    let cpu1: Vec<u64> = hubs.iter().map(|h| cpu_ticks(h.0.pid())).collect();
    let secs = rest.as_secs_f64();
    println!(
        "at rest over {rest:?}: Mosquitto RSS {} MB ({} MB empty), {:.0} messages/s in, {:.0} out, {:.0} KB/s in; hubs' CPU {}",
        rss_kib(broker.pid()) / 1024,
        broker_base / 1024,
        (after[2] - before[2]) as f64 / secs,
        (after[3] - before[3]) as f64 / secs,
        (after[0] - before[0]) as f64 / secs / 1024.0,
        cpu0.iter()
            .zip(&cpu1)
            .map(|(a, b)| format!("{:.1}%", (b - a) as f64 / secs))
            .collect::<Vec<_>>()
            .join(" ")
    );

    // Cross-hub vs local, at this size: a WebSocket device of hub 1, and one of hub 2, through hub 1.
    let local_dev = "0f:01:00:00:00:00";
    let remote_dev = "0f:02:00:00:00:00";
    let pids = [hubs[0].0.pid(), hubs[1].0.pid()];
    let at_rest = [0, 1].map(|i| (cpu1[i] - cpu0[i]) as f64 / secs);
    println!("| path (through hub 1) | p50 | p90 | CPU of hub 1 / call | CPU of hub 2 / call |  (CPU less each hub's at rest)");
    println!("|---|---:|---:|---:|---:|");
    let (p50, p90, cpu) = calls(&clients[0], local_dev, pids, at_rest).await;
    println!(
        "| local ({local_dev}) | {p50:.2?} | {p90:.2?} | {:.0} µs | {:.0} µs |",
        cpu[0], cpu[1]
    );
    let (p50, p90, cpu) = calls(&clients[0], remote_dev, pids, at_rest).await;
    println!(
        "| cross-hub ({remote_dev} on hub 2) | {p50:.2?} | {p90:.2?} | {:.0} µs | {:.0} µs |",
        cpu[0], cpu[1]
    );

    // Listings through hub 1.
    let host = hubs[0].1.clone();
    for args in [
        &["devices", "--ndjson"][..],
        &["devices"][..],
        &["devices", "--json"][..],
    ] {
        let before = rss_kib(hubs[0].0.pid());
        let (first, end, lines) = timed(&host, dir.path(), args).await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        println!(
            "`mcpdev {}` through hub 1: first line {first:.1?}, end {end:.2?}, {lines} lines; hub 1 RSS {} MB before, {} MB 3 s after",
            args.join(" "),
            before / 1024,
            rss_kib(hubs[0].0.pid()) / 1024
        );
    }

    // /mcp: search and call of the device that arrived last (the last WebSocket device of the
    // last hub), through hub 1.
    let prefix = mcpdev::bridge::naming::prefix_for(&last_ws, &Default::default());
    let mcp = format!("{host}/mcp");
    let query = format!("query={last_ws}");
    let (_, search, _) = timed(
        &host,
        dir.path(),
        &["call", "search_devices", &query, "--url", &mcp, "--json"],
    )
    .await;
    let name = format!("{prefix}.self.get_device_status");
    let (_, call, _) = timed(&host, dir.path(), &["call", &name, "--url", &mcp, "--json"]).await;
    println!(
        "/mcp through hub 1, the device that arrived last ({last_ws}, on hub {n}): `call search_devices` {search:.2?}, `call {name}` {call:.2?} (each a whole CLI run: connect, initialize, the calls, DELETE)"
    );

    // Failover: kill -9 of the hub with the most MQTT devices (WebSocket ones reconnect to their URL's hub).
    let victim = (1..n).max_by_key(|i| own[*i]).unwrap_or(1);
    let survivor = if victim == 0 { 1 } else { 0 };
    let mut moving = Vec::new();
    each_device(&clients[victim], |d| {
        if d.get("session_id").is_some() && d["transport"] == "mqtt" {
            moving.extend(d["device_id"].as_str().map(str::to_string));
        }
    })
    .await;
    // The survivors share the MQTT devices between them: the cluster's listing says when each of
    // the dead hub's is back (ready again, on a survivor).
    hubs[victim].0.0.kill().await.unwrap();
    let t = Instant::now();
    until(
        Duration::from_secs(600),
        "the survivors serve every MQTT device of the dead hub",
        async || {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let back = ready_ids(&clients[survivor]).await;
            moving.iter().all(|id| back.contains(id))
        },
    )
    .await;
    println!(
        "failover: kill -9 of hub {} ({} MQTT devices); every one listed ready through hub {} again {:.1?} later (polled every 0.5 s)",
        victim + 1,
        moving.len(),
        survivor + 1,
        t.elapsed()
    );
    say_losses("in the whole run (before the kill)", &broker_losses());
}

/// What every hub listed ready, round by round.
struct Views {
    last: Vec<usize>,
    /// The largest shortfall of one hub against the most any hub listed in the same round:
    /// (shortfall, hub, it listed, the most, when).
    behind: (usize, usize, usize, usize, Duration),
    /// The largest drop of one hub's count from one round to the next: (drop, hub, from, to, when).
    dropped: (usize, usize, usize, usize, Duration),
    /// The fewest any hub listed in any round, and which hub.
    fewest: (usize, usize),
}

impl Views {
    fn new(n: usize) -> Self {
        Self { last: vec![0; n], behind: Default::default(), dropped: Default::default(), fewest: (usize::MAX, 0) }
    }

    fn round(&mut self, round: &[(usize, usize, usize)], at: Duration) {
        let most = round.iter().map(|r| r.0).max().unwrap_or(0);
        for (i, (ready, _, _)) in round.iter().copied().enumerate() {
            if most - ready > self.behind.0 {
                self.behind = (most - ready, i, ready, most, at);
            }
            if self.last[i].saturating_sub(ready) > self.dropped.0 {
                self.dropped = (self.last[i] - ready, i, self.last[i], ready, at);
            }
            if ready < self.fewest.0 {
                self.fewest = (ready, i);
            }
            self.last[i] = ready;
        }
    }

    fn say(&self, when: &str) {
        let (short, hub, listed, most, at) = self.behind;
        let (drop, dhub, from, to, dat) = self.dropped;
        let dropped = if drop == 0 { "none".to_string() } else { format!("{drop} (hub {}, {from} to {to}, at {dat:.0?})", dhub + 1) };
        println!(
            "views {when}: the largest shortfall of one hub against the most any hub listed ready in the same round: {short} (hub {} listed {listed}, another {most}, at {at:.0?}); the largest drop of one hub's count between two rounds: {dropped}",
            hub + 1
        );
    }
}

/// The broker connections lost, per hub and why.
fn say_losses(when: &str, losses: &[(usize, String)]) {
    let mut why: std::collections::BTreeMap<&str, usize> = Default::default();
    let mut per_hub: std::collections::BTreeMap<usize, usize> = Default::default();
    for (hub, w) in losses {
        *why.entry(w.as_str()).or_default() += 1;
        *per_hub.entry(*hub).or_default() += 1;
    }
    println!(
        "broker connections lost {when}: {} (per hub: {per_hub:?}; why: {why:?})",
        losses.len()
    );
}
