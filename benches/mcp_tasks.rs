//! MCP Tasks on the hub (issue 35): what a task costs beside a plain `tools/call`, and what
//! 10,000 finished tasks hold.
//!
//! `cargo bench --bench mcp_tasks` — starts `mcpdev serve --demo 1` (one virtual device in the
//! hub's process), opens one Streamable HTTP session (raw HTTP, keep-alive), and:
//! - **cost per call**, before and after in one run: rounds of `MCP_TASKS_BENCH_CALLS` (200)
//!   sequential plain calls of the device's `set_volume`, then as many as tasks (`tools/call`
//!   with `params.task`, then `tasks/result`), alternating for 5 rounds; prints wall time and the
//!   hub's CPU per call of each;
//! - **memory**: the hub's resident memory (VmRSS) before, with 10,000 finished tasks held
//!   (created from 40 sessions, each fetched; the sessions then end), and once their TTL (20 s)
//!   has passed.
//!
//! Runs on 127.0.0.1 only, stops by itself.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

/// The `mcpdev` this bench was built with, or `MCPDEV_BENCH_BIN` (to measure another build).
fn bin() -> String {
    std::env::var("MCPDEV_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_mcpdev").to_string())
}
const ACCEPT: &str = "application/json, text/event-stream";
const ROUNDS: usize = 5;
const TASKS: usize = 10_000;
const SESSIONS: usize = 40;
const TTL_MS: u64 = 20_000;

fn calls() -> usize {
    std::env::var("MCP_TASKS_BENCH_CALLS").ok().and_then(|n| n.parse().ok()).filter(|n| *n > 0).unwrap_or(200)
}

/// User + system CPU time of a process so far (`/proc/PID/stat` fields 14 and 15).
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11).and_then(|f| f.parse().ok()).unwrap_or(0) + fields.get(12).and_then(|f| f.parse().ok()).unwrap_or(0);
    // SAFETY: a plain sysconf query.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Duration::from_secs_f64(ticks as f64 / hz)
}

/// Resident memory of a process, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok()).unwrap_or(0)
}

struct Session {
    http: reqwest::Client,
    url: String,
    id: String,
    next: u64,
}

impl Session {
    async fn open(http: &reqwest::Client, url: &str) -> anyhow::Result<Self> {
        let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}});
        let resp = http.post(url).header("accept", ACCEPT).json(&init).send().await?;
        let id = resp.headers()["mcp-session-id"].to_str()?.to_string();
        resp.text().await?;
        let s = Self { http: http.clone(), url: url.to_string(), id, next: 1 };
        s.http.post(&s.url).header("accept", ACCEPT).header("mcp-session-id", &s.id).json(&json!({"jsonrpc":"2.0","method":"notifications/initialized"})).send().await?.text().await?;
        Ok(s)
    }

    async fn ask(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        self.next += 1;
        let body = json!({"jsonrpc":"2.0","id":self.next,"method":method,"params":params});
        let resp = self.http.post(&self.url).header("accept", ACCEPT).header("mcp-session-id", &self.id).json(&body).send().await?;
        let sse = resp.headers().get("content-type").is_some_and(|v| v.to_str().unwrap_or_default().starts_with("text/event-stream"));
        let text = resp.text().await?;
        let v = if sse {
            text.lines().filter_map(|l| l.strip_prefix("data:")).filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok()).find(|m| m.get("id").is_some()).unwrap_or(Value::Null)
        } else {
            serde_json::from_str(&text)?
        };
        anyhow::ensure!(v.get("error").is_none(), "{method}: {v}");
        Ok(v)
    }

    async fn plain(&mut self, tool: &str, n: usize) -> anyhow::Result<()> {
        let v = self.ask("tools/call", json!({"name": tool, "arguments": {"volume": n % 101}})).await?;
        anyhow::ensure!(v["result"]["isError"] != true, "{v}");
        Ok(())
    }

    async fn as_task(&mut self, tool: &str, n: usize, ttl: u64) -> anyhow::Result<()> {
        let created = self.ask("tools/call", json!({"name": tool, "arguments": {"volume": n % 101}, "task": {"ttl": ttl}})).await?;
        let id = created["result"]["task"]["taskId"].as_str().unwrap_or_default().to_string();
        let v = self.ask("tasks/result", json!({"taskId": id})).await?;
        anyhow::ensure!(v["result"]["isError"] != true, "{v}");
        Ok(())
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    mcpdev::tls::install_crypto_provider();
    let args = ["serve", "--json", "--approve-all", "--device-addr", "127.0.0.1:0", "--host-addr", "127.0.0.1:0", "--demo", "1", "--mcp-max-tasks", "20000", "--mcp-max-tasks-per-session", "6000"];
    let mut hub = tokio::process::Command::new(bin()).args(args).stdout(Stdio::piped()).stderr(Stdio::null()).kill_on_drop(true).spawn()?;
    let pid = hub.id().expect("running");
    let mut lines = BufReader::new(hub.stdout.take().expect("piped")).lines();
    let listening: Value = serde_json::from_str(&lines.next_line().await?.expect("hub exited"))?;
    let url = listening["mcp"].as_str().expect("mcp url").to_string();
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let http = reqwest::Client::new();
    let mut s = Session::open(&http, &url).await?;
    let deadline = Instant::now() + Duration::from_secs(30);
    let tool = loop {
        let tools = s.ask("tools/list", json!({})).await?;
        if let Some(t) = tools["result"]["tools"].as_array().and_then(|ts| ts.iter().find_map(|t| t["name"].as_str().filter(|n| n.ends_with("set_volume")))) {
            break t.to_string();
        }
        anyhow::ensure!(Instant::now() < deadline, "the virtual device was not offered within 30 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for i in 0..20 {
        s.plain(&tool, i).await?;
        s.as_task(&tool, i, 1000).await?;
    }

    let n = calls();
    let (mut plain, mut task) = ((Duration::ZERO, Duration::ZERO), (Duration::ZERO, Duration::ZERO));
    for _ in 0..ROUNDS {
        let (t0, c0) = (Instant::now(), cpu_time(pid));
        for i in 0..n {
            s.plain(&tool, i).await?;
        }
        let (t1, c1) = (Instant::now(), cpu_time(pid));
        for i in 0..n {
            s.as_task(&tool, i, 1000).await?;
        }
        let (t2, c2) = (Instant::now(), cpu_time(pid));
        plain.0 += t1 - t0;
        plain.1 += c1 - c0;
        task.0 += t2 - t1;
        task.1 += c2 - c1;
    }
    let total = (n * ROUNDS) as u32;
    println!("tools/call of one virtual device, one session, {total} calls each way, alternating rounds of {n}");
    println!("| call | wall per call | hub CPU per call |");
    println!("|---|---:|---:|");
    println!("| plain `tools/call` | {:?} | {:?} |", plain.0 / total, plain.1 / total);
    println!("| as a task (`tools/call` + `tasks/result`) | {:?} | {:?} |", task.0 / total, task.1 / total);

    // Memory: 10,000 finished tasks held, then none once their TTL has passed.
    let before = rss_kib(pid);
    let mut sessions = Vec::new();
    for _ in 0..SESSIONS {
        sessions.push(Session::open(&http, &url).await?);
    }
    for i in 0..TASKS {
        sessions[i % SESSIONS].as_task(&tool, i, TTL_MS).await?;
    }
    let held = rss_kib(pid);
    // The sessions end, so what is left is the tasks'.
    for t in &sessions {
        t.http.delete(&t.url).header("mcp-session-id", &t.id).send().await?.text().await?;
    }
    drop(sessions);
    let listed = s.ask("tasks/list", json!({})).await?;
    anyhow::ensure!(listed["result"]["tasks"].as_array().is_some_and(|t| !t.is_empty()), "no tasks held: {listed}");
    let started = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let listed = s.ask("tasks/list", json!({})).await?;
        if listed["result"]["tasks"].as_array().is_some_and(Vec::is_empty) {
            break;
        }
        anyhow::ensure!(started.elapsed() < Duration::from_secs(120), "tasks outlived their ttl");
    }
    let after = rss_kib(pid);
    // Again a few seconds on: whether the hub was still giving memory back, and the reading's noise.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let later = rss_kib(pid);
    println!();
    println!("| hub memory (VmRSS) | KiB |");
    println!("|---|---:|");
    println!("| before | {before} |");
    println!("| {TASKS} finished tasks held | {held} (+{} bytes a task) |", (held.saturating_sub(before)) * 1024 / TASKS as u64);
    println!("| their TTL passed, none held | {after} (+{} KiB on before) |", after as i64 - before as i64);
    println!("| 5 s later | {later} (+{} KiB on before) |", later as i64 - before as i64);
    Ok(())
}
