//! The dashboard's devices page at 10,000 devices (issue 25): `mcpdev serve` in one process,
//! `mcpdev sim` processes with 2,500 devices each, and Debian's Chromium (driven by playwright-core,
//! `tests/browser/dashboard.cjs`, scenario `measure`) loading the devices page: the time from
//! navigation to the first rendered rows, and the bytes moved (the page, its script and style,
//! the first page of devices). Also the devices API's own answer time and size at that fleet.
//!
//! ```sh
//! cargo bench --bench dashboard            # 10,000 devices
//! MCPDEV_BENCH_DEVICES=2000 cargo bench --bench dashboard
//! ```
//! Needs what `.ci/test` installs for the browser tests (Chromium, Node 22, playwright-core).
//! Figures in benches/README.md.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

const DEVICES_PER_SIM: usize = 2_500;
const LOADS: usize = 5;

fn repo(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn tool(var: &str, fallback: PathBuf) -> PathBuf {
    std::env::var_os(var).map(PathBuf::from).filter(|p| p.exists()).unwrap_or(fallback)
}

/// `GET path` on the host listener with the control token: status, body, and how long it took.
async fn get(host: &str, token: &str, path: &str) -> (u16, String, Duration) {
    let started = Instant::now();
    let mut s = tokio::net::TcpStream::connect(host).await.expect("the hub listens");
    let req = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    let took = started.elapsed();
    let split = out.windows(4).position(|w| w == b"\r\n\r\n").expect("an HTTP answer");
    let status = String::from_utf8_lossy(&out[..split]).split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, String::from_utf8_lossy(&out[split + 4..]).into_owned(), took)
}

fn device_id(index: usize) -> String {
    let id = format!("{:012x}", 0x0200_0002_0000u64 + index as u64);
    id.as_bytes().chunks(2).map(|c| std::str::from_utf8(c).unwrap()).collect::<Vec<_>>().join(":")
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::var("MCPDEV_BENCH_DEVICES").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let state = tempfile::tempdir().unwrap();
    let runtime = tempfile::tempdir().unwrap();
    let env = [("MCPDEV_STATE_DIR", state.path().to_str().unwrap().to_string()), ("MCPDEV_RUNTIME_DIR", runtime.path().to_str().unwrap().to_string())];
    let bin = env!("CARGO_BIN_EXE_mcpdev");
    let mut hub = tokio::process::Command::new(bin)
        .args(["serve", "--json", "--quiet", "--approve-all", "--device-addr", "127.0.0.1:0", "--host-addr", "127.0.0.1:0"])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the hub");
    let mut lines = BufReader::new(hub.stdout.take().unwrap()).lines();
    let listening: Value = serde_json::from_str(&lines.next_line().await.unwrap().expect("the listening line")).unwrap();
    let device_url = listening["devices"].as_str().unwrap().to_string();
    let host = listening["host"].as_str().unwrap().trim_start_matches("http://").to_string();
    let login = listening["dashboard"].as_str().unwrap().to_string();
    // Keep reading the hub's stdout so it never blocks on it.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let token = std::fs::read_to_string(runtime.path().join(format!("control-{}.token", host.rsplit(':').next().unwrap()))).unwrap().trim().to_string();

    let started = Instant::now();
    let mut sims = Vec::new();
    for first in (0..n).step_by(DEVICES_PER_SIM) {
        let count = DEVICES_PER_SIM.min(n - first).to_string();
        sims.push(
            tokio::process::Command::new(bin)
                .args(["sim", "--quiet", "--url", &device_url, "--count", &count, "--device-id", &device_id(first)])
                .envs(env.iter().map(|(k, v)| (k, v)))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .expect("start sim"),
        );
    }
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let (_, body, _) = get(&host, &token, "/dashboard/api/devices?limit=1&state=ready").await;
        let ready = serde_json::from_str::<Value>(&body).ok().and_then(|v| v["matched"].as_u64()).unwrap_or(0) as usize;
        if ready >= n {
            break;
        }
        assert!(Instant::now() < deadline, "only {ready} of {n} devices ready after 10 minutes");
        tokio::time::sleep(Duration::from_millis(500)).await; // polling interval, bounded by the deadline
    }
    eprintln!("{n} devices ready in {:.1} s", started.elapsed().as_secs_f64());

    // The devices API alone: the first page, and a search that scans the whole fleet.
    let mut api = Vec::new();
    for path in ["/dashboard/api/devices?limit=50", "/dashboard/api/devices?limit=50&q=00:02:27:0f"] {
        let mut times = Vec::new();
        let mut size = 0;
        for _ in 0..20 {
            let (status, body, took) = get(&host, &token, path).await;
            assert_eq!(status, 200);
            size = body.len();
            times.push(took.as_secs_f64() * 1000.0);
        }
        times.sort_by(f64::total_cmp);
        api.push((path, times[times.len() / 2], times[times.len() * 9 / 10], size));
    }

    let node = tool("MCPDEV_TEST_NODE22", repo(".ci/node22/node_modules/node/bin/node"));
    let playwright = tool("MCPDEV_TEST_NODE_BROWSER", repo(".ci/browser/node_modules/playwright-core"));
    let chromium = tool("MCPDEV_TEST_CHROMIUM", PathBuf::from("/usr/bin/chromium"));
    let profile = tempfile::tempdir().unwrap();
    let mut driver = tokio::process::Command::new(node)
        .arg(repo("tests/browser/dashboard.cjs"))
        .arg(playwright)
        .arg(chromium)
        .arg(profile.path())
        .arg(&login)
        .arg("measure")
        .arg(LOADS.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("run the browser driver");
    // Its stdin stays open while it measures (it stops when its stdin closes).
    let mut said = Vec::new();
    let mut out = BufReader::new(driver.stdout.take().unwrap()).lines();
    let report: Value = loop {
        let line = tokio::time::timeout(Duration::from_secs(300), out.next_line()).await.expect("the driver measured in time").unwrap();
        let Some(line) = line else { panic!("no measurement; the driver said:\n{}", said.join("\n")) };
        said.push(line.clone());
        if let Some(v) = line.strip_prefix("STEP ").and_then(|l| serde_json::from_str::<Value>(l).ok()) {
            assert_ne!(v["step"], "failed", "{v}");
            if v["step"] == "measure" {
                break v;
            }
        }
    };
    drop(driver.stdin.take());
    let _ = driver.wait().await;
    let runs = report["runs"].as_array().unwrap();
    println!("devices page at {n} devices, Chromium {LOADS} loads (the first cold):");
    println!("| load | first render | transferred | decoded | rows | shown |");
    println!("|---|---:|---:|---:|---:|---|");
    for (i, r) in runs.iter().enumerate() {
        println!(
            "| {} | {:.0} ms | {:.1} KB | {:.1} KB | {} | {} |",
            if i == 0 { "cold".to_string() } else { format!("reload {i}") },
            r["first_render_ms"].as_f64().unwrap_or(0.0),
            r["transferred"].as_f64().unwrap_or(0.0) / 1000.0,
            r["decoded"].as_f64().unwrap_or(0.0) / 1000.0,
            r["rows"],
            r["count"].as_str().unwrap_or_default()
        );
    }
    println!("cold load, by resource:");
    for r in runs[0]["resources"].as_array().unwrap() {
        println!("  {} {} B transferred, {} B decoded, {:.0} ms", r["name"].as_str().unwrap_or_default(), r["transferred"], r["decoded"], r["ms"].as_f64().unwrap_or(0.0));
    }
    println!("devices API at {n} devices (20 requests each):");
    for (path, p50, p90, size) in api {
        println!("  {path}: median {p50:.1} ms, p90 {p90:.1} ms, {size} B");
    }
    for mut s in sims {
        let _ = s.kill().await;
    }
    let _ = hub.kill().await;
}
