//! What one operation on one device costs, measured the same way with that device alone and
//! with the whole fleet connected (issue 14: every operation costs the same at 10,000 devices as
//! at 1, except listing everything).
//!
//! The four operations take turns, one of each per round, after a warm-up: a moment of noise on
//! the machine (this is a shared 2-core VM) then lands on all four alike instead of on whichever
//! ran at that moment. Each one's samples are kept, so the bench can pool the runs made with
//! the device alone before the fleet came and after it left, which brackets the fleet's run in
//! time. 1,000 rounds: the 99th percentile is then the tenth-worst sample, not the second.
//! - `/mcp` `tools/call` of `<prefix>.self.audio_speaker.set_volume` (the all-devices endpoint);
//! - `/devices/<id>/mcp` `tools/call` of `self.audio_speaker.set_volume` (the device's own);
//! - the control API's `rpc` op (what `mcpdev call` does through the hub);
//! - `/mcp` `tools/list`, first page (one page, not everything).

use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use mcpdev::links::hub_client::HubClient;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, PaginatedRequestParams};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::json;
use tokio::time::timeout;

const WARMUP: usize = 20;
const ROUNDS: usize = 1000;
const LIMIT: Duration = Duration::from_secs(20);

/// Each operation's wall times, in the order of [`NAMES`].
pub struct OpCosts(pub [Vec<Duration>; 4]);

impl OpCosts {
    /// Both runs' samples together.
    pub fn pooled(mut self, other: OpCosts) -> OpCosts {
        for (mine, theirs) in self.0.iter_mut().zip(other.0) {
            mine.extend(theirs);
        }
        self
    }

    /// Operation `i`'s median and 99th percentile.
    pub fn spread(&self, i: usize) -> Spread {
        let mut times = self.0[i].clone();
        times.sort();
        Spread { median: times[times.len() / 2], p99: times[times.len() * 99 / 100] }
    }
}

/// One operation's median and 99th percentile.
#[derive(Debug, Clone, Copy)]
pub struct Spread {
    pub median: Duration,
    pub p99: Duration,
}

pub const NAMES: [&str; 4] = ["/mcp tools/call", "/devices/<id>/mcp tools/call", "control rpc (mcpdev call's path)", "/mcp tools/list, first page"];

type Client = rmcp::service::RunningService<rmcp::RoleClient, ClientConfig>;

async fn session(url: String) -> anyhow::Result<Client> {
    let config = ClientConfig::new(ClientCapabilities::default(), Implementation::new("mcpdev-hub-bench", "0"));
    Ok(timeout(LIMIT, config.serve(StreamableHttpClientTransport::from_uri(url))).await.context("MCP initialize hung")??)
}

async fn set_volume(client: &Client, tool: &str, volume: usize) -> anyhow::Result<()> {
    let args = json!({"volume": volume % 101}).as_object().cloned().expect("an object");
    let r = timeout(LIMIT, client.call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args))).await.context("tools/call hung")??;
    ensure!(r.is_error != Some(true), "{tool} failed: {r:?}");
    Ok(())
}

/// Measures every operation on `device` through the hub at `host_url`.
pub async fn measure(host_url: &str, control: &HubClient, device: &str) -> anyhow::Result<OpCosts> {
    let prefix = mcpdev::bridge::naming::prefix_for(device, &Default::default());
    let all = session(format!("{host_url}/mcp")).await?;
    let own = session(format!("{host_url}/devices/{device}/mcp")).await?;
    let qualified = format!("{prefix}.self.audio_speaker.set_volume");
    let rpc = |i: usize| async move {
        let request = json!({"op": "rpc", "device": device, "method": "tools/call", "params": {"name": "self.audio_speaker.set_volume", "arguments": {"volume": i % 101}}, "timeout_ms": 10_000});
        let result = timeout(LIMIT, control.call(request)).await.context("rpc hung")?.map_err(|e| anyhow::anyhow!("{e}"))?;
        ensure!(result["isError"] == false, "rpc failed: {result}");
        anyhow::Ok(())
    };
    let page = || async {
        let listed = timeout(LIMIT, all.list_tools(Some(PaginatedRequestParams::default()))).await.context("tools/list hung")??;
        ensure!(!listed.tools.is_empty(), "an empty first page");
        anyhow::Ok(())
    };
    let mut samples: [Vec<Duration>; 4] = Default::default();
    for round in 0..WARMUP + ROUNDS {
        let mut times = [Duration::ZERO; 4];
        let t = Instant::now();
        set_volume(&all, &qualified, round).await.context("/mcp tools/call")?;
        times[0] = t.elapsed();
        let t = Instant::now();
        set_volume(&own, "self.audio_speaker.set_volume", round).await.context("/devices/<id>/mcp tools/call")?;
        times[1] = t.elapsed();
        let t = Instant::now();
        rpc(round).await.context("control rpc")?;
        times[2] = t.elapsed();
        let t = Instant::now();
        page().await.context("/mcp tools/list")?;
        times[3] = t.elapsed();
        if round >= WARMUP {
            for (kept, time) in samples.iter_mut().zip(times) {
                kept.push(time);
            }
        }
    }
    let _ = all.cancel().await;
    let _ = own.cancel().await;
    Ok(OpCosts(samples))
}
