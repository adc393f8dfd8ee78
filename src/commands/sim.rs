//! `mcpdev sim`: run virtual devices against a backend until Ctrl-C.
//!
//! Rules: the URL follows `MCPDEV_DEVICE_ADDR` as `serve` reads it when neither `--url` nor
//! `MCPDEV_SIM_URL` names one. With no `--device-id`, the ids start at 02:00:00:00:00:01, moved
//! on by whole blocks so that no two `sim` runs on this machine share one
//! ([`crate::device_identity::SimIdentities::claim_slot`]), and a device the hub says is taken by
//! another (HTTP 409: a `serve --demo` device, a device connected with its token) moves on to the
//! next free id, printed; a named `--device-id` is never changed.

use crate::cli::{GlobalArgs, SimArgs};
use crate::device_identity::{DEFAULT_STRIDE, SimIdentities};
use crate::exit::{CodedError, Exit};
use crate::sim::client::Stopped;
use crate::sim::{SimConfig, run_device};
use crate::wire::identity::{format_mac, parse_mac};

/// The first id when `--device-id` names none.
const DEFAULT_FIRST: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
/// How many times one device moves on past ids that are taken.
const MAX_MOVES: u64 = 64;

pub async fn run(global: &GlobalArgs, args: SimArgs) -> anyhow::Result<()> {
    let url = device_url(args.url.as_deref())?;
    // Before the first line says what runs: a signal from then on is a clean stop.
    let stop = super::stop_signal::install()?;
    if let Some(path) = &args.replay {
        return replay(global, &args, &url, path, stop).await;
    }
    // The same boards across runs, as stock firmware keeps its UUID in NVS: one seed for all.
    let identities = SimIdentities::load_or_create(&crate::paths::state_dir().join(crate::device_identity::SIM_DIR))
        .inspect_err(|e| tracing::warn!("{e}; this run's devices get fresh Client-Ids and device keys"))
        .ok();
    let defaulted = args.device_id.is_none();
    // Held while the run lasts: no other sim here takes the same default ids.
    let mut _slot_lock = None;
    let first = match &args.device_id {
        Some(id) => parse_mac(id).map_err(anyhow::Error::msg)?,
        None => {
            let slot = match identities.as_ref().map(SimIdentities::claim_slot) {
                Some(Ok((slot, lock))) => {
                    _slot_lock = Some(lock);
                    slot
                }
                Some(Err(e)) => return Err(CodedError::new(Exit::Usage, e).into()),
                None => 0,
            };
            let b = (mac_number(&DEFAULT_FIRST) + slot * DEFAULT_STRIDE).to_be_bytes();
            [b[2], b[3], b[4], b[5], b[6], b[7]]
        }
    };
    let base = mac_number(&first);
    for ip in &args.source_addr {
        crate::sim::check_source_addr(*ip, &url).map_err(|e| CodedError::new(Exit::Usage, e))?;
    }
    let count = u64::from(args.count);
    // Set when the run stops: MQTT devices then say goodbye and disconnect from their broker.
    let (leave, leave_rx) = tokio::sync::watch::channel(false);
    let config = |i: u64, number: u64| -> anyhow::Result<SimConfig> {
        let mac = number.to_be_bytes();
        let mut cfg = SimConfig::new(&url, format_mac(&[mac[2], mac[3], mac[4], mac[5], mac[6], mac[7]]));
        match identities.as_ref().map(|ids| ids.get(&cfg.device_id)) {
            Some(Ok(id)) => (cfg.client_id, cfg.device_key) = (id.client_id, Some(id.device_key)),
            Some(Err(e)) => tracing::warn!(device = %cfg.device_id, "{e}; this run uses a fresh Client-Id and device key"),
            None => {}
        }
        cfg.token = args.token.clone();
        cfg.extra_tools = args.extra_tools as usize;
        cfg.profile = args.profile;
        cfg.protocol_version = args.protocol_version;
        cfg.ota = args.bootstrap.ota.clone();
        cfg.source_addr = (!args.source_addr.is_empty())
            .then(|| args.source_addr[i as usize % args.source_addr.len()]);
        cfg.stop = Some(leave_rx.clone());
        if let Some(url) = &args.bootstrap.mqtt {
            let broker = crate::mqtt::conn::BrokerUrl::parse(url).map_err(anyhow::Error::msg)?;
            cfg.mqtt = Some(crate::sim::mqtt::MqttTarget::direct(broker, &cfg.device_id).map_err(anyhow::Error::msg)?);
        }
        Ok(cfg)
    };
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..count {
        let cfg = config(i, base + i)?;
        tasks.spawn(async move { (i, 0, run_device(cfg).await) });
    }
    if !global.quiet {
        let target = args.bootstrap.mqtt.as_deref().or(args.bootstrap.ota.as_deref()).unwrap_or(&url);
        let chosen = if defaulted { " (--device-id names another)" } else { "" };
        eprintln!("mcpdev sim: {} virtual device(s) from {}{chosen} -> {target} (Ctrl-C to stop)", args.count, format_mac(&first));
    }
    // Runs until Ctrl-C or SIGTERM, or until every device ended. A device the backend refuses
    // (not admitted, revoked) ends alone, reported, and the others run on; a URL or settings that
    // cannot work end them all (every device would meet it). One signal listener for the whole
    // run: none is missed between two task ends.
    let signalled = stop.wait();
    tokio::pin!(signalled);
    let (mut refused, mut last) = (0u64, None);
    loop {
        tokio::select! {
            done = tasks.join_next() => match done {
                // A default id another device has: the next block's, as long as there are moves left.
                Some(Ok((i, moves, Err(refused)))) if refused.taken && defaulted && moves < MAX_MOVES => {
                    let number = base + i + (moves + 1) * count;
                    let cfg = config(i, number)?;
                    if !global.quiet {
                        let was = base + i + moves * count;
                        eprintln!("mcpdev sim: {} is taken on the hub; this device is {} instead", format_number(was), cfg.device_id);
                    }
                    tasks.spawn(async move { (i, moves + 1, run_device(cfg).await) });
                }
                Some(Ok((i, moves, Err(stop)))) if !stop.usage && count > 1 => {
                    refused += 1;
                    let left = count - refused;
                    eprintln!("mcpdev sim: device {} stopped: {}; {left} of {count} still run", format_number(base + i + moves * count), super::output::text(&stop.message));
                    last = Some(stop);
                }
                Some(Ok((_, _, Err(stop)))) => {
                    tasks.shutdown().await;
                    return Err(stopped(stop));
                }
                Some(Ok((_, _, Ok(())))) => {}
                Some(Err(e)) => return Err(anyhow::anyhow!("a virtual device task failed: {e}")),
                None => return last.map_or(Ok(()), |stop| Err(stopped(Stopped { message: format!("every device stopped; the last: {}", stop.message), ..stop }))),
            },
            signal = &mut signalled => {
                signal?;
                // MQTT devices say goodbye and disconnect (a WebSocket closes with its task).
                let _ = leave.send(true);
                let _ = tokio::time::timeout(STOP_WAIT, async { while tasks.join_next().await.is_some() {} }).await;
                tasks.shutdown().await;
                return Err(CodedError::interrupted().into());
            }
        }
    }
}

/// A MAC as a number, to count up from.
fn mac_number(mac: &[u8; 6]) -> u64 {
    u64::from_be_bytes([0, 0, mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]])
}

fn format_number(number: u64) -> String {
    let b = number.to_be_bytes();
    format_mac(&[b[2], b[3], b[4], b[5], b[6], b[7]])
}

/// The exit a device's final refusal gives the whole run.
fn stopped(stop: Stopped) -> anyhow::Error {
    let exit = if stop.auth { Exit::Auth } else if stop.usage { Exit::Usage } else { Exit::Unreachable };
    CodedError::new(exit, stop.message).into()
}
/// Longest a stopping `sim` waits for its devices to leave.
const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// `sim --replay FILE`: one device playing back a recording; reconnects (after 500 ms) whenever
/// the backend drops it, until Ctrl-C.
async fn replay(global: &GlobalArgs, args: &SimArgs, url: &str, path: &std::path::Path, stop: super::stop_signal::Stop) -> anyhow::Result<()> {
    let rec = crate::sim::replay::Recording::load(path).map_err(|e| CodedError::new(Exit::Usage, e))?;
    let who = crate::sim::replay::As::new(&rec, args.device_id.as_deref());
    if !global.quiet {
        let beside = if who.device_id == rec.identity["device_id"].as_str().unwrap_or_default() { String::new() } else { format!(" (recorded as {})", rec.identity["device_id"]) };
        eprintln!("mcpdev sim: replaying {} ({} recorded requests) as {}{beside} -> {} (Ctrl-C to stop)", path.display(), rec.exchanges.len(), who.device_id, url);
    }
    let signalled = stop.wait();
    tokio::pin!(signalled);
    loop {
        tokio::select! {
            done = crate::sim::replay::run(url, &rec, &who, args.token.as_deref(), args.replay_timing) => {
                if let Err(e) = done {
                    tracing::warn!("replay connection failed: {e:#}");
                }
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
            signal = &mut signalled => {
                signal?;
                return Err(CodedError::interrupted().into());
            }
        }
    }
}

/// The device URL: `--url` (or `MCPDEV_SIM_URL`), else the device listener `MCPDEV_DEVICE_ADDR`
/// names, as `serve` reads it (an unspecified address is this machine's loopback), else :8000.
fn device_url(given: Option<&str>) -> Result<String, CodedError> {
    if let Some(url) = given {
        return Ok(url.to_string());
    }
    let addr = match std::env::var("MCPDEV_DEVICE_ADDR") {
        Ok(v) => v.parse::<std::net::SocketAddr>().map_err(|_| CodedError::new(Exit::Usage, format!("MCPDEV_DEVICE_ADDR={v:?} is not an address like 0.0.0.0:8000")))?,
        Err(_) => return Ok("ws://127.0.0.1:8000/xiaozhi/v1/".into()),
    };
    let host = match addr.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => "127.0.0.1".to_string(),
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => "[::1]".to_string(),
        std::net::IpAddr::V4(ip) => ip.to_string(),
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
    };
    Ok(format!("ws://{host}:{}/xiaozhi/v1/", addr.port()))
}
