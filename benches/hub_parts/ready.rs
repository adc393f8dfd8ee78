//! Scenario 4 of the `hub` bench: hello to ready, one device (moved from benches/hub.rs as it
//! was). A raw WebSocket device says hello with stock-like tools and answers `initialize` and
//! `tools/list`; the time runs from its hello to the hub's `ready` event on a control `watch`.

use super::*;


/// Tools like the stock firmware's: one `tools/list` page.
fn stock_like_tools() -> Value {
    let int = |name: &str, min: i64, max: i64| json!({"type": "object", "properties": {name: {"type": "integer", "minimum": min, "maximum": max}}, "required": [name]});
    json!([
        {"name": "self.get_device_status", "description": "The device's status: speaker, screen, battery, network.", "inputSchema": {"type": "object", "properties": {}}},
        {"name": "self.audio_speaker.set_volume", "description": "Set the speaker volume.", "inputSchema": int("volume", 0, 100)},
        {"name": "self.screen.set_brightness", "description": "Set the screen brightness.", "inputSchema": int("brightness", 0, 100)},
        {"name": "self.screen.set_theme", "description": "Set the theme.", "inputSchema": {"type": "object", "properties": {"theme": {"type": "string"}}, "required": ["theme"]}},
    ])
}

pub(super) async fn hello_to_ready(scratch: &Scratch) -> anyhow::Result<Vec<Row>> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let hub = HubProcess::start(scratch).await?;
    let mut events = watch(&hub.host_url).await?;
    let tools = stock_like_tools();
    let mut samples = Vec::with_capacity(READY_RUNS);
    for i in 0..READY_WARMUP + READY_RUNS {
        let device_id = format!("02:00:00:02:{:02x}:{:02x}", i / 256, i % 256);
        let mut req = hub.device_url.as_str().into_client_request()?;
        for (k, v) in [("Device-Id", device_id.as_str()), ("Client-Id", "00000000-0000-4000-8000-000000000000"), ("Protocol-Version", "1")] {
            req.headers_mut().insert(k, v.parse()?);
        }
        let (mut ws, _) = timeout(DEADLINE, tokio_tungstenite::connect_async(req)).await??;
        let hello = json!({"type": "hello", "version": 1, "features": {"mcp": true}, "transport": "websocket", "audio_params": {"format": "opus", "sample_rate": 16000, "channels": 1, "frame_duration": 60}});
        let start = Instant::now();
        ws.send(Message::text(hello.to_string())).await?;
        let (mut device_done, mut elapsed) = (false, None);
        let deadline = tokio::time::Instant::now() + DEADLINE;
        while elapsed.is_none() {
            tokio::select! {
                frame = tokio::time::timeout_at(deadline, ws.next()), if !device_done => {
                    let Some(Ok(Message::Text(t))) = frame.context("no request from the hub in time")? else { device_done = true; continue };
                    let v: Value = serde_json::from_str(&t)?;
                    let p = &v["payload"];
                    if v["type"] != "mcp" || p.get("id").is_none() {
                        continue;
                    }
                    let result = match p["method"].as_str() {
                        Some("initialize") => json!({"protocolVersion": "2024-11-05", "capabilities": {"tools": {}}, "serverInfo": {"name": "bench-device", "version": "1"}}),
                        Some("tools/list") => json!({"tools": tools}),
                        _ => json!({}),
                    };
                    let reply = json!({"session_id": v["session_id"], "type": "mcp", "payload": {"jsonrpc": "2.0", "id": p["id"], "result": result}});
                    ws.send(Message::text(reply.to_string())).await?;
                }
                event = tokio::time::timeout_at(deadline, events.next()) => {
                    let Some(Ok(Message::Text(t))) = event.context("no ready event in time")? else { bail!("the hub closed the watch connection") };
                    let v: Value = serde_json::from_str(&t)?;
                    if v["event"]["event"] == "ready" && v["event"]["device_id"] == device_id.as_str() {
                        elapsed = Some(start.elapsed());
                    }
                }
            }
        }
        if i >= READY_WARMUP {
            samples.extend(elapsed);
        }
        ws.close(None).await.ok();
    }
    let s = Stats::of(samples);
    Ok(vec![
        Row::new("hello → ready", format!("one device, median ({READY_RUNS} runs)"), ms(s.median)).target("≤ 5 ms", s.median <= READY_MEDIAN_TARGET),
        Row::new("hello → ready", "p90 / min / max", format!("{} / {} / {}", ms(s.p90), ms(s.min), ms(s.max))),
    ])
}
