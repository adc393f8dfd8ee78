//! What one operation on one device costs, measured the same way with that device alone and
//! with the whole fleet connected (issue 14: every operation costs the same at 10,000 devices as
//! at 1, except listing everything).
//!
//! Each operation is run sequentially, after a warm-up, and its median and 99th percentile wall
//! time kept:
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
const RUNS: usize = 200;
const LIMIT: Duration = Duration::from_secs(20);

/// Median and 99th percentile of each operation, in the order of [`NAMES`].
pub struct OpCosts(pub [Spread; 4]);

/// One operation's wall times.
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

/// Times `op` RUNS times after WARMUP untimed runs; returns the median and the 99th percentile.
async fn median<F, Fut>(mut op: F) -> anyhow::Result<Spread>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    for i in 0..WARMUP {
        op(i).await?;
    }
    let mut times = Vec::with_capacity(RUNS);
    for i in 0..RUNS {
        let t = Instant::now();
        op(i).await?;
        times.push(t.elapsed());
    }
    times.sort();
    Ok(Spread { median: times[RUNS / 2], p99: times[RUNS * 99 / 100] })
}

/// Measures every operation on `device` through the hub at `host_url`.
pub async fn measure(host_url: &str, control: &HubClient, device: &str) -> anyhow::Result<OpCosts> {
    let prefix = mcpdev::bridge::naming::prefix_for(device, &Default::default());
    let all = session(format!("{host_url}/mcp")).await?;
    let own = session(format!("{host_url}/devices/{device}/mcp")).await?;
    let qualified = format!("{prefix}.self.audio_speaker.set_volume");
    let via_all = median(|i| set_volume(&all, &qualified, i)).await.context("/mcp tools/call")?;
    let via_own = median(|i| set_volume(&own, "self.audio_speaker.set_volume", i)).await.context("/devices/<id>/mcp tools/call")?;
    let rpc = median(|i| async move {
        let request = json!({"op": "rpc", "device": device, "method": "tools/call", "params": {"name": "self.audio_speaker.set_volume", "arguments": {"volume": i % 101}}, "timeout_ms": 10_000});
        let result = timeout(LIMIT, control.call(request)).await.context("rpc hung")?.map_err(|e| anyhow::anyhow!("{e}"))?;
        ensure!(result["isError"] == false, "rpc failed: {result}");
        Ok(())
    })
    .await
    .context("control rpc")?;
    let page = median(|_| async {
        let listed = timeout(LIMIT, all.list_tools(Some(PaginatedRequestParams::default()))).await.context("tools/list hung")??;
        ensure!(!listed.tools.is_empty(), "an empty first page");
        Ok(())
    })
    .await
    .context("/mcp tools/list")?;
    let _ = all.cancel().await;
    let _ = own.cancel().await;
    Ok(OpCosts([via_all, via_own, rpc, page]))
}
