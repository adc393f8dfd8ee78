//! tools/call round trips per second over MQTT beside WebSocket, through the hub's own session
//! layer: one hub in this process, one virtual device (the firmware's MCP core) per transport,
//! calls made on the devices' handles as the control API does. MQTT goes through the embedded
//! broker, and through Mosquitto when `mosquitto` is installed (`.ci/test` installs it).
//!
//! Run: `cargo bench --bench mqtt_vs_ws` (figures in benches/README.md).

use std::process::Stdio;
use std::time::{Duration, Instant};

use mcpdev::commands::hub_stack;
use mcpdev::hub::HubConfig;
use mcpdev::mqtt::conn::BrokerUrl;
use mcpdev::mqtt::hub::{BrokerChoice, MqttSettings};
use mcpdev::sim::{SimConfig, run_device};
use serde_json::json;

const SEQUENTIAL: usize = 3000;
const CONCURRENT: usize = 16;
const CONCURRENT_CALLS: usize = 8000;

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        println!("{:<22} {:>16} {:>22} {:>12}", "transport", "sequential (/s)", "16 in flight (/s)", "p50 (µs)");
        let embedded = BrokerChoice::Embedded { listen: "127.0.0.1:0".parse().expect("address") };
        run("websocket", None).await;
        run("mqtt (embedded)", Some(embedded)).await;
        match start_mosquitto() {
            Some((child, url)) => {
                run("mqtt (mosquitto)", Some(BrokerChoice::External(BrokerUrl::parse(&url).expect("url")))).await;
                drop(child);
            }
            None => println!("mqtt (mosquitto)       not installed; skipped"),
        }
    });
}

/// One hub, one device over the transport; prints its row.
async fn run(name: &str, broker: Option<BrokerChoice>) {
    let config = HubConfig {
        device_addr: "127.0.0.1:0".parse().expect("address"),
        host_addr: "127.0.0.1:0".parse().expect("address"),
        admission: mcpdev::hub::admission::AdmissionConfig { approve_all: true, state_dir: None, gateway_tokens: Vec::new() },
        ..HubConfig::default()
    };
    let stack = hub_stack::start(hub_stack::StackConfig { hub: config, bridge: Default::default(), mqtt: broker.map(MqttSettings::new), event_log: false }).await.expect("hub starts");
    let running = stack.running;
    let device = "02:00:00:00:00:b1";
    let mut sim = SimConfig::new(format!("ws://127.0.0.1:{}/xiaozhi/v1/", running.device_addr.port()), device);
    if let Some(m) = &stack.mqtt {
        assert!(m.wait_subscribed(Duration::from_secs(10)).await, "broker reachable");
        let url = BrokerUrl::parse(&m.broker).expect("broker url");
        sim.mqtt = Some(mcpdev::sim::mqtt::MqttTarget::direct(url, device).expect("target"));
    }
    let sim_task = tokio::spawn(run_device(sim));
    let (handle, _) = running.hub.registry.wait_ready(Some(device), Duration::from_secs(20)).await.expect("device onboarded");
    let params = json!({"name": "self.audio_speaker.set_volume", "arguments": {"volume": 30}});
    let call = || handle.request("tools/call", Some(params.clone()), Duration::from_secs(10));
    for _ in 0..200 {
        call().await.expect("warm-up call");
    }
    let mut lat = Vec::with_capacity(SEQUENTIAL);
    let start = Instant::now();
    for _ in 0..SEQUENTIAL {
        let t = Instant::now();
        call().await.expect("call");
        lat.push(t.elapsed());
    }
    let sequential = SEQUENTIAL as f64 / start.elapsed().as_secs_f64();
    lat.sort();
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..CONCURRENT {
        let (h, p) = (handle.clone(), params.clone());
        tasks.spawn(async move {
            for _ in 0..CONCURRENT_CALLS / CONCURRENT {
                h.request("tools/call", Some(p.clone()), Duration::from_secs(10)).await.expect("call");
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    let concurrent = CONCURRENT_CALLS as f64 / start.elapsed().as_secs_f64();
    println!("{name:<22} {sequential:>16.0} {concurrent:>22.0} {:>12}", lat[lat.len() / 2].as_micros());
    sim_task.abort();
}

/// A Mosquitto on an ephemeral port, if the binary is there.
fn start_mosquitto() -> Option<(KillOnDrop, String)> {
    let bin = ["/usr/sbin/mosquitto", "/usr/bin/mosquitto"].into_iter().find(|p| std::path::Path::new(p).exists())?;
    let port = std::net::TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok()?.port();
    let conf = std::env::temp_dir().join(format!("mcpdev-bench-mosquitto-{port}.conf"));
    std::fs::write(&conf, format!("listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n")).ok()?;
    let child = std::process::Command::new(bin).arg("-c").arg(&conf).stdout(Stdio::null()).stderr(Stdio::null()).spawn().ok()?;
    // The hub's connection retries until the broker listens; wait_subscribed bounds it.
    Some((KillOnDrop(child), format!("mqtt://127.0.0.1:{port}")))
}

struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
