//! `mcpdev sim`: run virtual devices against a backend until Ctrl-C.

use crate::cli::{GlobalArgs, SimArgs};
use crate::exit::{CodedError, Exit};
use crate::sim::client::Stopped;
use crate::sim::{SimConfig, run_device};
use crate::wire::identity::{format_mac, parse_mac};

pub async fn run(global: &GlobalArgs, args: SimArgs) -> anyhow::Result<()> {
    if let Some(path) = &args.replay {
        return replay(global, &args, path).await;
    }
    let first = parse_mac(args.device_id.as_deref().unwrap_or(crate::cli::SIM_FIRST_DEVICE)).map_err(anyhow::Error::msg)?;
    let base = u64::from_be_bytes([0, 0, first[0], first[1], first[2], first[3], first[4], first[5]]);
    for ip in &args.source_addr {
        crate::sim::check_source_addr(*ip, &args.url).map_err(|e| CodedError::new(Exit::Usage, e))?;
    }
    // The same boards across runs, as stock firmware keeps its UUID in NVS: one seed for all.
    let identities = crate::device_identity::SimIdentities::load_or_create(&crate::paths::state_dir().join(crate::device_identity::SIM_DIR))
        .inspect_err(|e| tracing::warn!("{e}; this run's devices get fresh Client-Ids and device keys"))
        .ok();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..u64::from(args.count) {
        let mac = (base + i).to_be_bytes();
        let device_id = format_mac(&[mac[2], mac[3], mac[4], mac[5], mac[6], mac[7]]);
        let mut cfg = SimConfig::new(&args.url, device_id);
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
        cfg.source_addr = (!args.source_addr.is_empty()).then(|| args.source_addr[i as usize % args.source_addr.len()]);
        if let Some(url) = &args.bootstrap.mqtt {
            let broker = crate::mqtt::conn::BrokerUrl::parse(url).map_err(anyhow::Error::msg)?;
            cfg.mqtt = Some(crate::sim::mqtt::MqttTarget::direct(broker, &cfg.device_id).map_err(anyhow::Error::msg)?);
        }
        let device_id = cfg.device_id.clone();
        tasks.spawn(async move { (device_id, run_device(cfg).await) });
    }
    if !global.quiet {
        let target = args.bootstrap.mqtt.as_deref().or(args.bootstrap.ota.as_deref()).unwrap_or(&args.url);
        eprintln!("mcpdev sim: {} virtual device(s) from {} -> {target} (Ctrl-C to stop)", args.count, format_mac(&first));
    }
    // Runs until Ctrl-C or SIGTERM, or until every device ended. A device the backend refuses
    // (not admitted, revoked) ends alone, reported, and the others run on; a URL or settings that
    // cannot work end them all (every device would meet it). One signal listener for the whole
    // run: none is missed between two task ends.
    let signalled = super::stop_signal::stop_signal();
    tokio::pin!(signalled);
    let (mut refused, mut last) = (0u64, None);
    loop {
        tokio::select! {
            done = tasks.join_next() => match done {
                Some(Ok((device_id, Err(stop)))) if !stop.usage && args.count > 1 => {
                    refused += 1;
                    let left = u64::from(args.count) - refused;
                    eprintln!("mcpdev sim: device {device_id} stopped: {}; {left} of {} still run", super::output::text(&stop.message), args.count);
                    last = Some(stop);
                }
                Some(Ok((_, Err(stop)))) => {
                    tasks.shutdown().await;
                    return Err(stopped(stop));
                }
                Some(Ok((_, Ok(())))) => {}
                Some(Err(e)) => return Err(anyhow::anyhow!("a virtual device task failed: {e}")),
                None => return last.map_or(Ok(()), |stop| Err(stopped(Stopped { message: format!("every device stopped; the last: {}", stop.message), ..stop }))),
            },
            signal = &mut signalled => {
                signal?;
                tasks.shutdown().await;
                return Err(CodedError::interrupted().into());
            }
        }
    }
}

/// The exit a device's final refusal gives the whole run.
fn stopped(stop: Stopped) -> anyhow::Error {
    let exit = if stop.auth { Exit::Auth } else if stop.usage { Exit::Usage } else { Exit::Unreachable };
    CodedError::new(exit, stop.message).into()
}

/// `sim --replay FILE`: one device playing back a recording; reconnects (after 500 ms) whenever
/// the backend drops it, until Ctrl-C.
async fn replay(global: &GlobalArgs, args: &SimArgs, path: &std::path::Path) -> anyhow::Result<()> {
    let rec = crate::sim::replay::Recording::load(path).map_err(|e| CodedError::new(Exit::Usage, e))?;
    let who = crate::sim::replay::As::new(&rec, args.device_id.as_deref());
    if !global.quiet {
        let beside = if who.device_id == rec.identity["device_id"].as_str().unwrap_or_default() { String::new() } else { format!(" (recorded as {})", rec.identity["device_id"]) };
        eprintln!("mcpdev sim: replaying {} ({} recorded requests) as {}{beside} -> {} (Ctrl-C to stop)", path.display(), rec.exchanges.len(), who.device_id, args.url);
    }
    let signalled = super::stop_signal::stop_signal();
    tokio::pin!(signalled);
    loop {
        tokio::select! {
            done = crate::sim::replay::run(&args.url, &rec, &who, args.token.as_deref(), args.replay_timing) => {
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
