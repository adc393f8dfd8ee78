//! `mcpdev sim`: run virtual devices against a backend until Ctrl-C.

use crate::cli::{GlobalArgs, SimArgs};
use crate::exit::{CodedError, Exit};
use crate::sim::{SimConfig, run_device};
use crate::wire::identity::{format_mac, parse_mac};

pub async fn run(global: &GlobalArgs, args: SimArgs) -> anyhow::Result<()> {
    if let Some(path) = &args.replay {
        return replay(global, &args, path).await;
    }
    let first = parse_mac(&args.device_id).map_err(anyhow::Error::msg)?;
    let base = u64::from_be_bytes([0, 0, first[0], first[1], first[2], first[3], first[4], first[5]]);
    for ip in &args.source_addr {
        crate::sim::check_source_addr(*ip, &args.url).map_err(|e| CodedError::new(Exit::Usage, e))?;
    }
    // The same boards across runs, as stock firmware keeps its UUID in NVS: one seed for all.
    let identities = crate::device_identity::SimIdentities::load_or_create(&crate::paths::state_dir().join(crate::device_identity::SIM_DIR))
        .inspect_err(|e| tracing::warn!("{e}; this run's devices get fresh Client-Ids and device keys"))
        .ok();
    let mut tasks = tokio::task::JoinSet::new();
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
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
        cfg.source_addr = (!args.source_addr.is_empty())
            .then(|| args.source_addr[i as usize % args.source_addr.len()]);
        cfg.stop = Some(stop_rx.clone());
        if let Some(url) = &args.bootstrap.mqtt {
            let broker = crate::mqtt::conn::BrokerUrl::parse(url).map_err(anyhow::Error::msg)?;
            cfg.mqtt = Some(crate::sim::mqtt::MqttTarget::direct(broker, &cfg.device_id).map_err(anyhow::Error::msg)?);
        }
        tasks.spawn(run_device(cfg));
    }
    if !global.quiet {
        let target = args.bootstrap.mqtt.as_deref().or(args.bootstrap.ota.as_deref()).unwrap_or(&args.url);
        eprintln!("mcpdev sim: {} virtual device(s) from {} -> {target} (Ctrl-C to stop)", args.count, args.device_id);
    }
    // Runs until Ctrl-C or SIGTERM, or until the backend refuses a device for good (every device
    // would be). One signal listener for the whole run: none is missed between two task ends.
    let signalled = super::stop_signal::stop_signal();
    tokio::pin!(signalled);
    loop {
        tokio::select! {
            done = tasks.join_next() => match done {
                Some(Ok(Err(stop))) => {
                    tasks.shutdown().await;
                    let exit = if stop.auth { Exit::Auth } else if stop.usage { Exit::Usage } else { Exit::Unreachable };
                    return Err(CodedError::new(exit, stop.message).into());
                }
                Some(Ok(Ok(()))) => {}
                Some(Err(e)) => return Err(anyhow::anyhow!("a virtual device task failed: {e}")),
                None => return Ok(()),
            },
            signal = &mut signalled => {
                signal?;
                // MQTT devices say goodbye and disconnect (a WebSocket closes with its task).
                let _ = stop.send(true);
                let _ = tokio::time::timeout(STOP_WAIT, async { while tasks.join_next().await.is_some() {} }).await;
                tasks.shutdown().await;
                return Err(CodedError::interrupted().into());
            }
        }
    }
}

/// Longest a stopping `sim` waits for its devices to leave.
const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// `sim --replay FILE`: one device playing back a recording; reconnects (after 500 ms) whenever
/// the backend drops it, until Ctrl-C.
async fn replay(global: &GlobalArgs, args: &SimArgs, path: &std::path::Path) -> anyhow::Result<()> {
    let rec = crate::sim::replay::Recording::load(path).map_err(|e| CodedError::new(Exit::Usage, e))?;
    if !global.quiet {
        eprintln!("mcpdev sim: replaying {} ({} recorded requests) as {} -> {} (Ctrl-C to stop)", path.display(), rec.exchanges.len(), rec.identity["device_id"], args.url);
    }
    let signalled = super::stop_signal::stop_signal();
    tokio::pin!(signalled);
    loop {
        tokio::select! {
            done = crate::sim::replay::run(&args.url, &rec, args.token.as_deref(), args.replay_timing) => {
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
