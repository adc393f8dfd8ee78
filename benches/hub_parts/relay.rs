//! Scenario 3 of the `hub` bench: the same `tools/call` relayed through the hub against a bare
//! round trip and a forwarding floor (moved from benches/hub.rs as it was). Rules: the ways are
//! interleaved in blocks so the machine's load falls on each alike; bare above the floor is
//! reported as unreliable, never as met.

use super::*;


fn set_volume_params() -> Value {
    // The same volume every time: no `state_changed` notification follows the reply.
    json!({"name": "self.audio_speaker.set_volume", "arguments": {"volume": 50}})
}

pub(super) async fn relay_vs_bare(scratch: &Scratch, hub: &HubProcess, client: &HubClient) -> anyhow::Result<Vec<Row>> {
    let mut bare = BareDevice::start(scratch, BARE_DEVICE).await?;
    // For the floor: the bare call through a relay process that only passes frames on.
    let mut forwarded = BareDevice::start_forwarded(scratch, FORWARDED_DEVICE).await?;
    let rpc = || json!({"op": "rpc", "device": DEVICE, "method": "tools/call", "params": set_volume_params(), "timeout_ms": 10_000});
    let relay_call = || async {
        let result = timeout(DEADLINE, client.call(rpc())).await.context("relay call hung")?.map_err(|e| anyhow::anyhow!("{e}"))?;
        ensure!(result["isError"] == false, "relay call failed: {result}");
        anyhow::Ok(())
    };
    // For attribution: the same relay from a plain control socket (no HubClient tasks).
    let mut raw = RawControl::connect(&hub.host_url).await?;
    // And the hub's own link alone: an in-process hub, a device on it, `DeviceHandle::request`.
    let local = hub::start(HubConfig {
        device_addr: "127.0.0.1:0".parse()?,
        host_addr: "127.0.0.1:0".parse()?,
        admission: mcpdev::hub::admission::AdmissionConfig { approve_all: true, state_dir: None, gateway_tokens: Vec::new() },
        ..HubConfig::default()
    })
    .await?;
    let _link_device = scratch.sim(&format!("ws://{}/xiaozhi/v1/", local.device_addr), LINK_DEVICE)?;
    let (handle, _) = local.hub.registry.wait_ready(Some(LINK_DEVICE), DEADLINE).await?;
    let link_call = || async {
        let result = handle.request("tools/call", Some(set_volume_params()), DEADLINE).await?.to_value();
        ensure!(result["isError"] == false, "link call failed: {result}");
        anyhow::Ok(())
    };

    for _ in 0..RTT_WARMUP {
        bare.call().await?;
        relay_call().await?;
        raw.call(rpc()).await?;
        link_call().await?;
        forwarded.call().await?;
    }
    let [mut b, mut r, mut w, mut l, mut f]: [Vec<Duration>; 5] = Default::default();
    for _ in 0..RTT_SAMPLES / RTT_BLOCK {
        for _ in 0..RTT_BLOCK {
            let t = Instant::now();
            bare.call().await?;
            b.push(t.elapsed());
        }
        for _ in 0..RTT_BLOCK {
            let t = Instant::now();
            relay_call().await?;
            r.push(t.elapsed());
        }
        for _ in 0..RTT_BLOCK {
            let t = Instant::now();
            raw.call(rpc()).await?;
            w.push(t.elapsed());
        }
        for _ in 0..RTT_BLOCK {
            let t = Instant::now();
            link_call().await?;
            l.push(t.elapsed());
        }
        for _ in 0..RTT_BLOCK {
            let t = Instant::now();
            forwarded.call().await?;
            f.push(t.elapsed());
        }
    }
    bare.close().await;
    forwarded.close().await;
    let [b, r, w, l, f] = [b, r, w, l, f].map(Stats::of);
    let floor = f.median.as_secs_f64() / b.median.as_secs_f64();
    let ratio = r.median.as_secs_f64() / b.median.as_secs_f64();
    let ratio99 = r.p99.as_secs_f64() / b.p99.as_secs_f64();
    let over_floor = r.median.as_secs_f64() / f.median.as_secs_f64();
    let mut ratio_row = Row::new("relay vs bare", "relay / floor, median", format!("{over_floor:.2}×")).target("≤ 1.3×", over_floor <= RELAY_FLOOR_TARGET);
    if f.median < b.median {
        // A bare call cannot be slower than the same call through an extra process: the bare
        // path was disturbed this run (on a VM, mostly where the scheduler put its processes).
        ratio_row.verdict = Some("unreliable: bare > floor, rerun");
    }
    let n = RTT_SAMPLES;
    let pair = |s: &Stats| format!("{} / {}", us(s.median), us(s.p99));
    Ok(vec![
        Row::new("relay vs bare", format!("bare WebSocket, median / p99 ({n} calls)"), pair(&b)),
        Row::new("relay vs bare", format!("through the hub (HubClient rpc), median / p99 ({n} calls)"), pair(&r)),
        Row::new("relay vs bare", "relay / bare, median", format!("{ratio:.2}×")),
        ratio_row,
        Row::new("relay vs bare", "relay / bare, p99", format!("{ratio99:.2}×")),
        Row::new("relay vs bare", "relay − bare, median", us(r.median.saturating_sub(b.median))),
        Row::new("relay vs bare", "attribution: relay from a plain control socket", pair(&w)),
        Row::new("relay vs bare", "attribution: hub link alone (DeviceHandle::request)", pair(&l)),
        Row::new("relay vs bare", "floor: bare through a frame-forwarding process", format!("{} ({floor:.2}× bare)", pair(&f))),
    ])
}

/// The least any relay process can cost: a device connects to this process (run as
/// `hub-bench --forwarder URL`), which connects to URL and passes text frames both ways as they
/// are: no JSON, no tasks besides one, the same WebSocket settings as the hub. It prints the URL
/// devices should use, and ends when either side closes.
pub(super) async fn forwarder(upstream: String) -> anyhow::Result<()> {
    let devices = TcpListener::bind("127.0.0.1:0").await?;
    println!("ws://{}/xiaozhi/v1/", devices.local_addr()?);
    let (stream, _) = timeout(DEADLINE, devices.accept()).await??;
    let config = mcpdev::links::upgrade::ws_config();
    let mut device = tokio_tungstenite::accept_async_with_config(stream, Some(config)).await?;
    let (mut backend, _) = tokio_tungstenite::connect_async_with_config(upstream.as_str(), Some(config), false).await?;
    loop {
        tokio::select! {
            m = device.next() => match m {
                Some(Ok(m @ Message::Text(_))) => backend.send(m).await?,
                Some(Ok(_)) => {}
                _ => return Ok(()),
            },
            m = backend.next() => match m {
                Some(Ok(m @ Message::Text(_))) => device.send(m).await?,
                Some(Ok(_)) => {}
                _ => return Ok(()),
            },
        }
    }
}

/// The control API over a plain WebSocket, one request at a time (no client-side tasks).
struct RawControl {
    ws: tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    next_id: u64,
}

impl RawControl {
    async fn connect(host_url: &str) -> anyhow::Result<Self> {
        let (ws, _) = timeout(DEADLINE, tokio_tungstenite::connect_async(control_request(host_url)?)).await??;
        Ok(Self { ws, next_id: 1 })
    }

    async fn call(&mut self, mut request: Value) -> anyhow::Result<()> {
        let id = self.next_id;
        self.next_id += 1;
        request["id"] = json!(id);
        self.ws.send(Message::text(request.to_string())).await?;
        loop {
            let msg = timeout(DEADLINE, self.ws.next()).await?.context("the hub closed the control socket")??;
            let Message::Text(t) = msg else { continue };
            let v: Value = serde_json::from_str(&t)?;
            if v["id"] == id {
                ensure!(v["ok"]["isError"] == false, "relay call failed: {v}");
                return Ok(());
            }
        }
    }
}

/// A virtual device (`mcpdev sim`) accepted by a bare WebSocket server: hello answered, then
/// `tools/call` envelopes sent straight to it.
struct BareDevice {
    ws: tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>,
    next_id: u64,
    /// The device, and the forwarder in front of it if any.
    processes: Vec<Child>,
}

impl BareDevice {
    const SESSION: &str = "bench-bare";

    async fn start(scratch: &Scratch, device_id: &str) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("ws://{}/xiaozhi/v1/", listener.local_addr()?);
        let device = scratch.sim(&url, device_id)?;
        Self::accept(listener, vec![device]).await
    }

    /// The same, with a minimal relay process in between (see [`forwarder`]).
    async fn start_forwarded(scratch: &Scratch, device_id: &str) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("ws://{}/xiaozhi/v1/", listener.local_addr()?);
        let exe = std::env::current_exe()?;
        let mut forwarder = scratch.command_for(exe.as_os_str(), &[FORWARDER_FLAG, &url], true).stdout(Stdio::piped()).spawn()?;
        let stdout = forwarder.stdout.take().context("forwarder stdout")?;
        let device_url = timeout(DEADLINE, BufReader::new(stdout).lines().next_line()).await??.context("the forwarder exited")?;
        let device = scratch.sim(&device_url, device_id)?;
        // The device first: killed before the forwarder, so it never sees it go.
        Self::accept(listener, vec![device, forwarder]).await
    }

    async fn accept(listener: TcpListener, processes: Vec<Child>) -> anyhow::Result<Self> {
        let (stream, _) = timeout(DEADLINE, listener.accept()).await??;
        // The hub's own socket settings: same buffers, Nagle left as it is.
        let ws = timeout(DEADLINE, tokio_tungstenite::accept_async_with_config(stream, Some(mcpdev::links::upgrade::ws_config()))).await??;
        let mut bare = Self { ws, next_id: 1, processes };
        let hello = bare.recv().await?;
        ensure!(hello["type"] == "hello", "expected the device's hello, got {hello}");
        bare.ws.send(Message::text(mcpdev::links::websocket::server_hello(Self::SESSION))).await?;
        let init = json!({"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}});
        bare.request("initialize", init).await?;
        Ok(bare)
    }

    async fn recv(&mut self) -> anyhow::Result<Value> {
        loop {
            match timeout(DEADLINE, self.ws.next()).await?.context("device closed")?? {
                Message::Text(t) => return Ok(serde_json::from_str(&t)?),
                Message::Close(_) => bail!("device closed"),
                _ => {}
            }
        }
    }

    /// One request; the reply's `result` (notifications in between are skipped).
    async fn request(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        let envelope = json!({"session_id": Self::SESSION, "type": "mcp", "payload": {"jsonrpc": "2.0", "id": id, "method": method, "params": params}});
        self.ws.send(Message::text(envelope.to_string())).await?;
        loop {
            let mut v = self.recv().await?;
            if v["type"] == "mcp" && v["payload"]["id"] == id {
                return Ok(v["payload"]["result"].take());
            }
        }
    }

    async fn call(&mut self) -> anyhow::Result<()> {
        let result = self.request("tools/call", set_volume_params()).await?;
        ensure!(result["isError"] == false, "bare call failed: {result}");
        Ok(())
    }

    /// Ends the device (and forwarder) before the socket, so the device never sees it drop and
    /// logs no reconnect warning. (Dropping instead also kills them, just not in that order.)
    async fn close(mut self) {
        for p in &mut self.processes {
            let _ = p.kill().await;
        }
    }
}
