//! `mcpdev serve`: the hub, optionally with virtual devices attached (`--demo`).
//!
//! SIGINT (Ctrl-C) and SIGTERM (`kill`, systemd, docker) run the same shutdown: MQTT devices get
//! a `goodbye`, WebSocket devices a close frame (1001, going away), each bounded so a device that
//! does not read cannot hold the hub up; then the control token and `--ready-file` are removed,
//! and the hub exits 130 (interrupted) whichever signal stopped it.

use crate::cli::{GlobalArgs, MqttServeArgs, ServeArgs};
use crate::exit::{CodedError, Exit};
use crate::hub::budget::Caps;
use crate::hub::listener::Limits;
use crate::hub::admission::AdmissionConfig;
use crate::hub::ota::OtaSettings;
use crate::hub::{self, HubConfig};
use crate::links::handle::CloseReason;
use crate::mqtt::conn::BrokerUrl;
use crate::mqtt::hub::{BrokerChoice, MqttSettings};
use crate::sim::{SimConfig, run_device};

pub async fn run(global: &GlobalArgs, args: ServeArgs) -> anyhow::Result<()> {
    let config = HubConfig {
        device_addr: args.device_addr,
        host_addr: args.host_addr,
        device_tokens: args.device_tokens.iter().map(|t| t.trim().to_string()).filter(|t| !t.is_empty()).collect(),
        admission: AdmissionConfig {
            approve_all: args.approve_all,
            state_dir: Some(crate::paths::state_dir()),
            gateway_tokens: args.gateway_tokens.iter().map(|t| t.trim().to_string()).filter(|t| !t.is_empty()).collect(),
        },
        vision_url: args.vision_url.clone(),
        vision_token: args.vision_token.clone(),
        vision_dir: args.vision_dir.clone().unwrap_or_else(crate::hub::vision::default_dir),
        vision_max_files: args.vision_max_files as usize,
        vision_max_bytes: u64::from(args.vision_max_mb) * 1024 * 1024,
        keepalive: args.keepalive,
        onboarding_timeout: args.onboarding_timeout,
        allowed_hosts: args.allowed_host.clone(),
        allowed_origins: args.allowed_origin.clone(),
        aliases: crate::config::aliases(),
        ota: ota_settings(&args.mqtt),
        limits: Limits { header_read_timeout: args.limits.header_timeout, body_timeout: args.limits.body_timeout },
        caps: Caps {
            max_connections: args.limits.max_device_connections as usize,
            pre_hello_per_peer: args.limits.max_pre_hello_per_peer as usize,
            pre_hello_total: args.limits.max_pre_hello as usize,
            queued_per_peer: args.limits.max_queued_per_peer.map_or(0, |n| n as usize),
            queue_timeout: args.limits.accept_queue_timeout,
        },
        hello_timeout: args.limits.hello_timeout,
        // Set from the bridge's token by the stack.
        mcp_token_set: false,
    };
    let bridge = crate::bridge::BridgeConfig {
        call_timeout: args.mcp_timeout,
        naming: args.mcp_names,
        user_tools: args.mcp_user_tools,
        page_size: args.mcp_page_size as usize,
        token: args.mcp_token.clone().filter(|t| !t.is_empty()),
        max_sessions: args.mcp_max_sessions,
        max_sessions_per_peer: args.mcp_max_sessions_per_peer,
        fleet_threshold: args.mcp_fleet_threshold as usize,
    };
    let stack = super::hub_stack::start(super::hub_stack::StackConfig { hub: config, bridge, mqtt: mqtt_settings(&args.mqtt)? }).await?;
    let (running, mqtt, dashboard) = (stack.running, stack.mqtt, stack.dashboard);
    let admission = &running.hub.admission;
    if admission.approve_all() {
        tracing::warn!("--approve-all: every device is admitted, whatever it is; use this on a lab bench only");
    } else if admission.has_shared_tokens() {
        tracing::warn!("shared device tokens (MCPDEV_DEVICE_TOKEN) are accepted for any Device-Id: they are not bound to a device");
    }
    let devices_url = format!("ws://{}/xiaozhi/v1/", running.device_addr);
    let host_url = format!("http://{}", running.host_addr);
    if let Some(m) = &mqtt {
        // Ready means devices' messages reach the hub; a broker that is down is retried forever.
        if !m.wait_subscribed(std::time::Duration::from_secs(5)).await {
            tracing::warn!(broker = %m.broker, "the MQTT broker is not reachable yet; retrying in the background");
        }
    }
    let ota_url = format!("http://{}{}", running.device_addr, hub::ota::OTA_PATH);
    if let Some(n) = args.demo {
        let local = format!("ws://127.0.0.1:{}/xiaozhi/v1/", running.device_addr.port());
        for i in 0..n {
            let mut cfg = SimConfig::new(&local, format!("02:00:00:00:00:{:02x}", i + 1));
            // In-process devices are admitted whatever the mode: they get their own tokens.
            cfg.token = Some(admission.admit_resident(&cfg.device_id));
            cfg.extra_tools = args.demo_extra_tools as usize;
            cfg.profile = args.demo_profile;
            tokio::spawn(run_device(cfg));
        }
    }
    let reach = super::serve_report::device_urls(running.device_addr, hub::ota::DEVICE_PATH);
    let hub_flag = super::serve_report::hub_flag(running.host_addr);
    let listening = {
        let mcp = format!("{host_url}/mcp");
        let (broker, udp) = mqtt.as_ref().map(|m| (m.broker.clone(), m.udp.addr.port())).unzip();
        let hooks = mqtt.as_ref().and_then(|m| m.hooks).map(|a| format!("http://{a}"));
        serde_json::json!({"event": "listening", "devices": devices_url, "device_urls": reach, "host": host_url, "mcp": mcp,
            "demo_devices": args.demo.unwrap_or(0), "ota": ota_url, "mqtt": broker, "udp_port": udp, "mqtt_hooks": hooks,
            "approve_all": admission.approve_all(), "admitted_file": admission.file(),
            "max_device_connections": running.hub.budget.caps().max_connections, "fd_limit": running.hub.budget.fd_limit()})
    };
    if let Some(path) = &args.ready_file {
        // Written whole (a reader never sees half of it), after every listener is up.
        crate::paths::write_atomic(path, format!("{listening}\n").as_bytes())
            .map_err(|e| CodedError::new(Exit::Usage, format!("cannot write --ready-file {}: {e}", path.display())))?;
    }
    if global.json {
        // The one-time dashboard link goes to stdout only, never into the --ready-file.
        let mut listening = listening;
        listening["dashboard"] = serde_json::Value::String(dashboard.login_url());
        println!("{listening}");
    } else if !global.quiet {
        eprintln!("mcpdev hub");
        eprintln!("  devices connect to   {}", reach.join("\n                       "));
        eprintln!("  CLI and MCP hosts    {host_url}  (loopback; --allowed-host for LAN)");
        eprintln!("  MCP endpoint         {host_url}/mcp  (legacy SSE: {host_url}/sse; one device: {host_url}/devices/<id>/mcp)");
        eprintln!("  OTA (device setup)   {ota_url}");
        eprintln!("  dashboard            {}  (one-time log-in link; `mcpdev dashboard` prints a fresh one)", dashboard.login_url());
        eprintln!("  device connections   {}", super::serve_report::device_ceiling(&running.hub.budget));
        if admission.approve_all() {
            eprintln!("  admission            OFF (--approve-all): every device is admitted");
        } else {
            eprintln!("  admission            on: new devices wait for `mcpdev devices approve CODE` (`mcpdev devices pending` lists them)");
        }
        if let Some(m) = &mqtt {
            eprintln!("  MQTT broker          {}  (audio UDP port {})", m.broker, m.udp.addr.port());
            if let Some(a) = m.hooks {
                eprintln!("  EMQX hooks           http://{a}{}  and {}", crate::mqtt::hooks::AUTHN_PATH, crate::mqtt::hooks::AUTHZ_PATH);
            }
        }
        if let Some(n) = args.demo {
            eprintln!("  demo                 {n} virtual device(s): 02:00:00:00:00:01 …");
        }
        eprintln!();
        eprintln!("Try, in another terminal:");
        eprintln!("  mcpdev watch{hub_flag}");
        for line in super::serve_report::try_lines(args.demo.unwrap_or(0), &hub_flag) {
            eprintln!("  {line}");
        }
        eprintln!("Point a device at {} (Ctrl-C or SIGTERM stops the hub).", reach[0]);
    }
    {
        use std::io::IsTerminal;
        let color = super::output::use_color(global.color, std::io::stderr().is_terminal());
        super::serve_report::spawn_event_log(running.hub.clone(), global.json, global.quiet, color);
    }
    let signal = super::stop_signal::stop_signal().await?;
    if !global.quiet && !global.json {
        eprintln!("shutting down ({signal})");
    }
    tracing::info!("{signal}: shutting down");
    if let Some(m) = mqtt {
        m.shutdown().await;
    }
    let left = running.hub.registry.close_all(CloseReason::Shutdown, GOODBYE_LIMIT).await;
    if left > 0 {
        tracing::warn!("{left} device(s) did not take their goodbye within {GOODBYE_LIMIT:?}; leaving them");
    }
    running.hub.control.remove();
    if let Some(path) = &args.ready_file {
        let _ = std::fs::remove_file(path);
    }
    // Stopped by a signal, as every long-running command is: 130, like a shell reports SIGINT,
    // for SIGTERM too (a script sees one code for "stopped on request").
    Err(CodedError::interrupted().into())
}

/// Longest the shutdown waits for every device to take its goodbye.
const GOODBYE_LIMIT: std::time::Duration = std::time::Duration::from_secs(3);

/// `--mqtt embedded|URL` and its companions as hub settings (`None` without `--mqtt`).
fn mqtt_settings(a: &MqttServeArgs) -> anyhow::Result<Option<MqttSettings>> {
    let Some(choice) = a.mqtt.as_deref() else { return Ok(None) };
    let broker = match choice {
        "embedded" => BrokerChoice::Embedded { listen: a.mqtt_listen },
        url => BrokerChoice::External(BrokerUrl::parse(url).map_err(|e| CodedError::new(Exit::Usage, e))?),
    };
    let mut s = MqttSettings::new(broker);
    s.group = a.mqtt_group.clone();
    s.index_max = a.cluster_index_max as usize;
    s.stand_ins = a.cluster_stand_ins as usize;
    s.max_payload = a.mqtt_max_payload as usize;
    s.udp_addr = a.udp_addr;
    s.device_endpoint = a.mqtt_device_endpoint.clone();
    s.dynsec = a.mqtt_dynsec;
    s.hooks = a.mqtt_hooks;
    s.shared_device_login = a.mqtt_shared_device_login;
    Ok(Some(s))
}

fn ota_settings(a: &MqttServeArgs) -> OtaSettings {
    OtaSettings {
        firmware: a.firmware.clone().zip(a.firmware_version.clone()),
        timezone_offset: a.timezone_offset,
        public_host: a.public_host.clone(),
    }
}
