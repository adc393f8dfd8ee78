//! Scenario `tls`: what TLS costs the hub (issue 32), each figure taken without and with TLS in
//! the same run, side by side, so the machine's other load falls on both alike.
//!
//! - `handshake`: new connections opened at a steady 1,000 a second for 2 s against the device
//!   listener, each one request (`GET /xiaozhi/ota/`) then closed: plain, TLS with a full
//!   handshake each time, and TLS resuming a session (session tickets, what a device that
//!   reconnects does). Per kind: the rate reached, connect-to-answer latency (median, 99th
//!   percentile), and the hub's CPU time per connection (from /proc).
//! - `memory`: the hub's VmRSS growth per device with a fleet over `ws://`, then over `wss://`
//!   (`mcpdev sim` processes trusting the hub's CA), each fleet all ready.
//! - `mcp`: `/mcp` `tools/call` round trips over `http://` and `https://` (`--host-tls`), one
//!   rmcp client each, interleaved in blocks.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures_util::StreamExt;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;

use super::{DEADLINE, DEVICE, HubProcess, Row, Scratch, Stats, cpu_time, fleet_chunks, fleet_id, ms, proc_kb, us, watch};

const RATE: u64 = 1_000;
const CONNECTIONS: usize = 2_000;
const MCP_SAMPLES: usize = 400;
const MCP_BLOCK: usize = 20;

pub async fn run(scratch: &Scratch, fleet: usize) -> anyhow::Result<Vec<Row>> {
    let plain = HubProcess::start_with(scratch, fleet, &[]).await?;
    let tls = HubProcess::start_with(scratch, fleet, &["--tls", "auto", "--host-tls"]).await?;
    let ca = scratch.0.join("state/tls/ca.pem");
    let trust = mcpdev::tls::client::Trust { ca_files: vec![ca.clone()], ..Default::default() };
    // Each part's figures are kept even when a later part cannot run (it says why in a row).
    let mut rows = Vec::new();
    let mut keep = |part: &str, result: anyhow::Result<Vec<Row>>| match result {
        Ok(r) => rows.extend(r),
        Err(e) => rows.push(Row::new(format!("tls {part}"), "could not run", format!("{e:#}"))),
    };
    keep("handshake", handshakes(&plain, &tls, &trust).await);
    keep("mcp", mcp_calls(scratch, &plain, &tls, &trust).await);
    // The fleet's memory over wss:// is read from a hub whose host side is plain (`--tls auto`
    // alone), so the bench's watch connection needs no TLS client of its own: only the device
    // side matters here.
    let tls_devices = HubProcess::start_with(scratch, fleet, &["--tls", "auto"]).await;
    match tls_devices {
        Ok(tls_devices) => keep("memory", memory(scratch, &plain, &tls_devices, &ca, fleet).await),
        Err(e) => keep("memory", Err(e)),
    }
    Ok(rows)
}

// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Plain,
    Full,
    Resumed,
}

async fn handshakes(plain: &HubProcess, tls: &HubProcess, trust: &mcpdev::tls::client::Trust) -> anyhow::Result<Vec<Row>> {
    let port = |h: &HubProcess| h.device_url.rsplit(':').next().and_then(|p| p.split('/').next()).and_then(|p| p.parse::<u16>().ok()).context("device port");
    let resuming = mcpdev::tls::client::build(trust, &[b"http/1.1"])?;
    let mut full = (*resuming).clone();
    full.resumption = rustls::client::Resumption::disabled();
    let full = Arc::new(full);
    let mut rows = Vec::new();
    for (kind, hub, name) in [(Kind::Plain, plain, "plain"), (Kind::Full, tls, "TLS, full handshake"), (Kind::Resumed, tls, "TLS, resumed")] {
        let config = if kind == Kind::Full { full.clone() } else { resuming.clone() };
        let port = port(hub)?;
        let cpu_before = cpu_time(hub.pid)?;
        let start = Instant::now();
        let mut tasks = Vec::with_capacity(CONNECTIONS);
        let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / RATE));
        for _ in 0..CONNECTIONS {
            tick.tick().await;
            let config = config.clone();
            tasks.push(tokio::spawn(async move { one_connection(port, kind, config).await }));
        }
        let mut latencies = Vec::with_capacity(CONNECTIONS);
        let mut failed = 0;
        for t in tasks {
            match t.await? {
                Ok(d) => latencies.push(d),
                Err(_) => failed += 1,
            }
        }
        let elapsed = start.elapsed();
        let cpu = cpu_time(hub.pid)? - cpu_before;
        if latencies.is_empty() {
            bail!("no {name} connection succeeded");
        }
        let done = latencies.len();
        let s = Stats::of(latencies);
        rows.push(Row::new("tls handshake", format!("{name}: rate reached (of {RATE}/s)"), format!("{:.0}/s, {failed} failed", done as f64 / elapsed.as_secs_f64())));
        rows.push(Row::new("tls handshake", format!("{name}: connect to answer, median / p99"), format!("{} / {}", us(s.median), ms(s.p99))));
        rows.push(Row::new("tls handshake", format!("{name}: hub CPU per connection"), us(cpu / done as u32)));
    }
    Ok(rows)
}

/// One connection: TCP, TLS for the TLS kinds, one GET, its whole answer. Its wall time.
async fn one_connection(port: u16, kind: Kind, config: Arc<rustls::ClientConfig>) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    tcp.set_nodelay(true)?;
    let request = b"GET /xiaozhi/ota/ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    let mut answer = Vec::new();
    if kind == Kind::Plain {
        let mut s = tcp;
        s.write_all(request).await?;
        s.read_to_end(&mut answer).await?;
    } else {
        let mut s = tokio_rustls::TlsConnector::from(config).connect("127.0.0.1".try_into()?, tcp).await?;
        s.write_all(request).await?;
        // A peer that closes without close_notify is fine here: the answer is what counts.
        let _ = s.read_to_end(&mut answer).await;
    }
    anyhow::ensure!(answer.starts_with(b"HTTP/1.1 200"), "answered {:?}", String::from_utf8_lossy(&answer[..answer.len().min(40)]));
    Ok(start.elapsed())
}

// ---------------------------------------------------------------------------------------------

fn client_info() -> ClientConfig {
    ClientConfig::new(ClientCapabilities::default(), Implementation::new("mcpdev-bench", "0"))
}

async fn mcp_calls(scratch: &Scratch, plain: &HubProcess, tls: &HubProcess, trust: &mcpdev::tls::client::Trust) -> anyhow::Result<Vec<Row>> {
    let ca = scratch.0.join("state/tls/ca.pem");
    let _plain_device = scratch.sim(&plain.device_url, DEVICE)?;
    let _tls_device = scratch.command(&["sim", "--quiet", "--url", &tls.device_url.replace("0.0.0.0", "127.0.0.1"), "--count", "1", "--device-id", DEVICE], true).env("MCPDEV_CA_FILE", &ca).spawn()?;
    let http = reqwest::Client::builder().pool_max_idle_per_host(4).build()?;
    let https = reqwest::Client::builder().tls_backend_preconfigured((*mcpdev::tls::client::build(trust, &[b"http/1.1"])?).clone()).build()?;
    let mut clients = Vec::new();
    for (hub, client) in [(plain, http), (tls, https)] {
        let url = format!("{}/mcp", hub.host_url);
        let config = rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(url.as_str());
        let running = tokio::time::timeout(DEADLINE, client_info().serve(StreamableHttpClientTransport::with_client(client, config))).await??;
        clients.push(running);
    }
    let name = format!("dev-{}.self.audio_speaker.set_volume", DEVICE.replace(':', ""));
    let call = |i: usize| CallToolRequestParams::new(name.clone()).with_arguments(json!({"volume": i % 100}).as_object().cloned().unwrap_or_default());
    // Wait until both hubs list the device's tool.
    let deadline = Instant::now() + DEADLINE;
    for c in &clients {
        loop {
            match tokio::time::timeout(DEADLINE, c.call_tool(call(1))).await? {
                Ok(r) if r.is_error != Some(true) => break,
                _ if Instant::now() > deadline => bail!("the device did not come up on both hubs"),
                _ => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }
    let mut samples: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
    for block in 0..MCP_SAMPLES / MCP_BLOCK {
        for (k, c) in clients.iter().enumerate() {
            for i in 0..MCP_BLOCK {
                let t = Instant::now();
                let r = tokio::time::timeout(DEADLINE, c.call_tool(call(block * MCP_BLOCK + i))).await??;
                anyhow::ensure!(r.is_error != Some(true), "the call failed: {r:?}");
                samples[k].push(t.elapsed());
            }
        }
    }
    let [p, t] = samples;
    let (p, t) = (Stats::of(p), Stats::of(t));
    Ok(vec![
        Row::new("tls mcp", "/mcp tools/call over http://, median / p99", format!("{} / {}", us(p.median), us(p.p99))),
        Row::new("tls mcp", "/mcp tools/call over https://, median / p99", format!("{} / {}", us(t.median), us(t.p99))),
    ])
}

// ---------------------------------------------------------------------------------------------

async fn memory(scratch: &Scratch, plain: &HubProcess, tls: &HubProcess, ca: &std::path::Path, n: usize) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    for (hub, name) in [(plain, "ws://"), (tls, "wss://")] {
        let mut events = watch(&hub.host_url).await?;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let before = proc_kb(hub.pid, "VmRSS")?;
        let url = hub.device_url.replace("0.0.0.0", "127.0.0.1");
        let mut sims = Vec::new();
        for (first, count) in fleet_chunks(n) {
            let (id, count) = (fleet_id(first), count.to_string());
            let sim = scratch
                .command(&["sim", "--quiet", "--url", &url, "--count", &count, "--device-id", &id], true)
                .env("MCPDEV_CA_FILE", ca)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()?;
            sims.push(sim);
        }
        let start = Instant::now();
        let mut ready = std::collections::HashSet::new();
        while ready.len() < n {
            let msg = match tokio::time::timeout(Duration::from_secs(120), events.next()).await {
                Err(_) => bail!("{name}: {} of {n} devices ready after 120 s", ready.len()),
                Ok(Some(Ok(Message::Text(t)))) => t,
                Ok(Some(Ok(_))) => continue,
                Ok(_) => bail!("the hub closed the watch connection"),
            };
            let v: Value = serde_json::from_str(&msg)?;
            if v["event"]["event"] == "ready" {
                ready.insert(v["event"]["device_id"].as_str().unwrap_or_default().to_string());
            }
        }
        let took = start.elapsed();
        super::settle(&[hub.pid]).await?;
        let after = proc_kb(hub.pid, "VmRSS")?;
        rows.push(Row::new("tls memory", format!("{n} devices over {name}: hub memory per device"), format!("{:.1} KB (all ready in {:.1} s)", (after.saturating_sub(before)) as f64 / n as f64, took.as_secs_f64())));
        drop(sims);
    }
    Ok(rows)
}
