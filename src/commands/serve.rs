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
    // Before anything says the hub is ready: a signal from then on is a clean shutdown.
    let stop = super::stop_signal::install()?;
    let tls = hub_tls(&args)?;
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
        tls: tls.clone(),
        host_tls: args.tls.host_tls,
        handshake_timeout: args.limits.tls_handshake_timeout,
        remote_tokens: crate::hub::remote_tokens::default_path(),
        upstream: upstreams(&args.upstream)?,
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
        reclaim_idle: args.mcp_reclaim_idle,
        fleet_threshold: args.mcp_fleet_threshold as usize,
        task_limits: crate::bridge::tasks::Limits::new(args.mcp_max_tasks as usize, args.mcp_max_tasks_per_session as usize),
        progress_after: args.mcp_progress_after,
    };
    let mut mqtt_settings = mqtt_settings(&args.mqtt)?;
    if let Some(m) = &mut mqtt_settings {
        m.tls_listen = args.tls.mqtts_listen;
        m.plain_beside_tls = args.tls.mqtt_plain;
    }
    let stack = super::hub_stack::start(super::hub_stack::StackConfig { hub: config, bridge, mqtt: mqtt_settings, event_log: !global.quiet }).await?;
    let (running, mqtt, dashboard, events) = (stack.running, stack.mqtt, stack.dashboard, stack.events);
    let admission = &running.hub.admission;
    if admission.approve_all() {
        tracing::warn!("--approve-all: every device is admitted, whatever it is; use this on a lab bench only");
    } else if admission.has_shared_tokens() {
        tracing::warn!("shared device tokens (MCPDEV_DEVICE_TOKEN) are accepted for any Device-Id: they are not bound to a device");
    }
    let host_over_tls = tls.is_some() && args.tls.host_tls;
    if !running.host_addr.ip().is_loopback() && !host_over_tls {
        tracing::warn!(
            "the host listener on {} serves plain http to other machines: MCPDEV_MCP_TOKEN crosses the network in clear text, and remote tokens are refused; add --tls auto --host-tls",
            running.host_addr
        );
    }
    let hub_ref = &running.hub;
    let devices_url = format!("{}://{}/xiaozhi/v1/", hub_ref.ws_scheme(), running.device_addr);
    let host_url = format!("{}://{}", if tls.is_some() && args.tls.host_tls { "https" } else { "http" }, running.host_addr);
    if let Some(m) = &mqtt {
        // Ready means devices' messages reach the hub; a broker that is down is retried forever.
        if !m.wait_subscribed(std::time::Duration::from_secs(5)).await {
            tracing::warn!(broker = %m.broker, "the MQTT broker is not reachable yet; retrying in the background");
        }
    }
    if let Some(port) = misread_mqtts_port(mqtt.as_ref().map(|m| m.broker.as_str()), args.mqtt.mqtt_device_endpoint.as_deref()) {
        tracing::warn!(
            "the broker's mqtts port is {port}, and devices read an OTA mqtt endpoint as TLS only on port 8883 (esp-mqtt's rule): \
             a device that bootstraps from OTA tries plain MQTT on {port} and fails (our firmware, which has the hub's CA, refuses it as a downgrade); \
             listen on 8883 (--mqtts-listen), or forward 8883 to it and hand that out with --mqtt-device-endpoint HOST:8883"
        );
    }
    let ota_url = format!("{}://{}{}", hub_ref.http_scheme(), running.device_addr, hub::ota::OTA_PATH);
    if let Some(n) = args.demo {
        let local = format!("{}://127.0.0.1:{}/xiaozhi/v1/", hub_ref.ws_scheme(), running.device_addr.port());
        // In-process devices trust exactly this hub's certificate (its CA, or the served one).
        let demo_trust = tls.as_ref().map(|t| demo_trust(t)).transpose()?;
        for i in 0..n {
            let mut cfg = SimConfig::new(&local, format!("02:00:00:00:00:{:02x}", i + 1));
            cfg.tls = demo_trust.clone();
            // In-process devices are admitted whatever the mode: they get their own tokens.
            cfg.token = Some(admission.admit_resident(&cfg.device_id));
            cfg.extra_tools = args.demo_extra_tools as usize;
            cfg.profile = args.demo_profile;
            tokio::spawn(run_device(cfg));
        }
    }
    let reach = super::serve_report::device_urls(hub_ref.ws_scheme(), running.device_addr, hub::ota::DEVICE_PATH);
    let hub_flag = super::serve_report::hub_flag(&host_url, running.host_addr);
    let tls_info = tls.as_ref().map(|t| {
        serde_json::json!({"ca_file": t.ca.as_ref().map(|(f, _)| f), "cert_file": t.resolver.cert_file(), "fingerprint": t.fingerprint(), "host": args.tls.host_tls})
    });
    let listening = {
        let mcp = format!("{host_url}/mcp");
        let (broker, udp) = mqtt.as_ref().map(|m| (m.broker.clone(), m.udp.addr.port())).unzip();
        let hooks = mqtt.as_ref().and_then(|m| m.hooks).map(|a| format!("http://{a}"));
        // The id this hub has in a cluster (any hub on the same broker), and its given name.
        let hub_id = mqtt.as_ref().map(|m| m.hub_id.clone());
        let cluster_link = mqtt.as_ref().and_then(|m| m.link.as_ref()).map(|l| l.addr.to_string());
        let share_group = mqtt.as_ref().map(|m| m.share_group().to_string());
        serde_json::json!({"mqtt_share_group": share_group, "event": "listening", "devices": devices_url, "device_urls": reach, "host": host_url, "mcp": mcp,
            "demo_devices": args.demo.unwrap_or(0), "ota": ota_url, "mqtt": broker, "udp_port": udp, "mqtt_hooks": hooks, "hub_id": hub_id, "hub_name": args.mqtt.hub_name, "cluster_link": cluster_link,
            "approve_all": admission.approve_all(), "admitted_file": admission.file(),
            "max_device_connections": running.hub.budget.caps().max_connections, "fd_limit": running.hub.budget.fd_limit(), "tls": tls_info})
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
        let (host_urls, who) = super::serve_report::host_entry(if host_url.starts_with("https") { "https" } else { "http" }, running.host_addr);
        eprintln!("  CLI and MCP hosts    {}  {who}", host_urls.join("\n                       "));
        if let Some(t) = &tls {
            match &t.ca {
                Some((file, fp)) => {
                    eprintln!("  TLS                  the hub's own CA: {}", file.display());
                    eprintln!("                       SHA-256 {fp}");
                    eprintln!("                       (clients: MCPDEV_CA_FILE={} or MCPDEV_CA_FINGERPRINT; `mcpdev flash` provisions it)", file.display());
                }
                None => {
                    eprintln!("  TLS                  {} (re-read when it changes)", t.resolver.cert_file().display());
                    eprintln!("                       SHA-256 {}", t.fingerprint());
                }
            }
        }
        let base = &host_urls[0];
        eprintln!("  MCP endpoint         {base}/mcp  (legacy SSE: {base}/sse; one device: {base}/devices/<id>/mcp)");
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
            match args.mqtt.hub_name.as_deref() {
                Some(name) => eprintln!("  cluster hub          {name} (id {})", m.hub_id),
                None => eprintln!("  cluster hub          {}  (`devices` shows this id; --hub-name gives a name)", m.hub_id),
            }
            eprintln!("  share group          $share/{}/mcpdev/up/+  (the cluster's, from its hub secret: what its broker role grants)", m.share_group());
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
        if let Some(events) = events {
            super::serve_report::spawn_event_log(events, global.json, color);
        }
    }
    let signal = stop.wait().await?;
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

/// The port of the broker's `mqtts://` listener when the OTA answer hands it out (no
/// `--mqtt-device-endpoint` on 8883) and it is not 8883: there, devices read the endpoint as plain MQTT.
fn misread_mqtts_port(broker: Option<&str>, device_endpoint: Option<&str>) -> Option<u16> {
    let port_of = |s: &str| s.rsplit(':').next().and_then(|p| p.trim_end_matches('/').parse::<u16>().ok());
    let port = port_of(broker?.strip_prefix("mqtts://")?)?;
    let handed_out = device_endpoint.map_or(Some(port), port_of);
    (handed_out != Some(8883)).then_some(port)
}

/// Relayed devices' upstreams (`--upstream`, `--upstream-ota`, `[upstreams]` in mcpdev.toml);
/// `None` when nothing is relayed. A wrong URL is a usage error that says which setting.
fn upstreams(args: &crate::cli::UpstreamArgs) -> anyhow::Result<Option<std::sync::Arc<crate::hub::relayed::Upstreams>>> {
    let per_device = crate::config::load().map(|c| c.upstreams).unwrap_or_default();
    if args.upstream.is_none() && args.upstream_ota.is_none() && per_device.is_empty() {
        return Ok(None);
    }
    let upstreams = crate::hub::relayed::Upstreams::new(args.upstream.as_deref(), &per_device, args.upstream_ota.as_deref(), args.upstream_plain).map_err(|e| CodedError::new(Exit::Usage, e))?;
    Ok(Some(std::sync::Arc::new(upstreams)))
}

/// The hub's TLS from `--tls auto` or `--tls-cert/--tls-key` (`None`: plain). The certificate made
/// by `auto` carries `--public-host`, every `--allowed-host`, this machine's name and every
/// address it is reached by. Either certificate is then checked as a client would check it
/// (`tls::coverage`): one that has expired, or lacks a name the hub is reached by, is a warning at
/// start, before a device finds out.
fn hub_tls(args: &ServeArgs) -> anyhow::Result<Option<std::sync::Arc<crate::hub::certs::HubTls>>> {
    use crate::hub::certs::{TlsSource, leaf_names, prepare};
    let source = match (&args.tls.tls_cert, &args.tls.tls_key, args.tls.tls) {
        (Some(cert), Some(key), _) => TlsSource::Files { cert: cert.clone(), key: key.clone() },
        (_, _, crate::cli::TlsMode::Auto) => TlsSource::Auto { dir: crate::paths::hub_tls_dir() },
        _ => {
            if args.tls.host_tls {
                return Err(CodedError::new(Exit::Usage, "--host-tls needs a certificate: add --tls auto, or --tls-cert FILE --tls-key FILE").into());
            }
            return Ok(None);
        }
    };
    let mut addresses = super::serve_report::lan_addresses();
    for bound in [args.device_addr.ip(), args.host_addr.ip()] {
        if !bound.is_unspecified() {
            addresses.push(bound);
        }
    }
    let reached_by = reached_by(args);
    let names = leaf_names(args.mqtt.public_host.as_deref(), &reached_by, &addresses);
    let tls = prepare(&source, &names)?;
    let checked = if matches!(source, TlsSource::Auto { .. }) { names } else { reached_by };
    for finding in crate::tls::coverage::findings(tls.resolver.cert_file(), &tls.resolver.chain(), &checked, std::time::SystemTime::now()) {
        tracing::warn!("{finding}");
    }
    Ok(Some(tls))
}

/// The names people are told to reach the hub by: `--public-host`, then each `--allowed-host`
/// (its host, without a port; `*` is no name), each once.
fn reached_by(args: &ServeArgs) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let hosts = args.mqtt.public_host.iter().chain(args.allowed_host.iter()).filter(|h| h.as_str() != "*");
    for host in hosts {
        let bare = crate::hub::authority::Authority::parse(host).map_or_else(|_| host.clone(), |a| a.host_text());
        let bare = bare.trim_start_matches('[').trim_end_matches(']').to_string();
        if !bare.is_empty() && !names.contains(&bare) {
            names.push(bare);
        }
    }
    names
}

/// What `--demo`'s in-process devices verify the hub with: its own CA when it has one, else the
/// certificate it serves, pinned.
fn demo_trust(t: &crate::hub::certs::HubTls) -> anyhow::Result<std::sync::Arc<rustls::ClientConfig>> {
    let pin = crate::tls::parse_fingerprint(&t.fingerprint()).ok_or_else(|| anyhow::anyhow!("the hub's certificate has no fingerprint"))?;
    let trust = crate::tls::client::Trust { pin: Some(pin), ..Default::default() };
    crate::tls::client::build(&trust, crate::tls::server::HTTP1).map_err(Into::into)
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
    s.cluster_link = a.cluster_link;
    s.max_payload = a.mqtt_max_payload as usize;
    s.udp_addr = a.udp_addr;
    s.device_endpoint = a.mqtt_device_endpoint.clone();
    s.dynsec = a.mqtt_dynsec;
    s.hooks = a.mqtt_hooks;
    s.shared_device_login = a.mqtt_shared_device_login;
    s.hub_name = a.hub_name.clone();
    Ok(Some(s))
}

fn ota_settings(a: &MqttServeArgs) -> OtaSettings {
    OtaSettings {
        firmware: a.firmware.clone().zip(a.firmware_version.clone()),
        timezone_offset: a.timezone_offset,
        public_host: a.public_host.clone(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_mqtts_port_devices_would_read_as_plain_is_named() {
        use super::misread_mqtts_port as misread;
        assert_eq!(misread(Some("mqtts://127.0.0.1:44223"), None), Some(44223));
        assert_eq!(misread(Some("mqtts://0.0.0.0:8883"), None), None);
        assert_eq!(misread(Some("mqtts://127.0.0.1:44223"), Some("hub.lan:8883")), None, "8883 is handed out, forwarded");
        assert_eq!(misread(Some("mqtts://127.0.0.1:44223"), Some("hub.lan:9999")), Some(44223));
        assert_eq!(misread(Some("mqtt://127.0.0.1:1883"), None), None, "plain MQTT is read as plain");
        assert_eq!(misread(None, None), None);
    }
}
