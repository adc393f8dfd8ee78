//! A virtual device over MQTT, as stock firmware does it (reference §2): it publishes every
//! message to its publish topic at QoS 0, says hello (`version` 3, `transport:"udp"`) and checks
//! the server's `udp` block, answers MCP at any time (also before and after a voice session), and
//! ends a session on the server's `goodbye`. Unlike stock firmware it subscribes to its downlink
//! itself, so it works with any broker (Mosquitto has no auto-subscribe). It reconnects after
//! broker outages and says hello again.

use std::time::Duration;

use mcp_device::{DeviceLink, Inbound, Transport};
use tokio::time::Instant;
use tracing::{debug, info, warn};

pub use super::config::MqttTarget;
use super::config::{SimConfig, Stopped};
use super::tools::build_server_with;
use crate::mqtt::conn::{self, ConnEvent};
use crate::links::websocket::sleep_until;

/// How long a stopping device waits for its goodbye and DISCONNECT to leave.
const LEAVE_WAIT: Duration = Duration::from_secs(2);

/// Serves until the task is dropped, `cfg.stop` says stop (then it says goodbye and disconnects),
/// or the broker refuses the credentials for good.
pub async fn run_device(mut cfg: SimConfig, t: MqttTarget) -> Result<(), Stopped> {
    let mut link = DeviceLink::new(
        build_server_with(cfg.profile, &cfg.device_id, cfg.extra_tools),
        Transport::Mqtt,
    );
    let options = t.broker.options(
        &t.client_id,
        Duration::from_secs(u64::from(t.keepalive.max(5))),
        1 << 20,
    );
    let mut c = conn::connect(options, None);
    let client = c.client.clone();
    let publish = |text: String| crate::links::mqtt::publish(&client, t.publish_topic.clone(), text);
    let mut hello_deadline: Option<Instant> = None;
    let mut out = String::new();
    let mut stop = cfg.stop.take();
    loop {
        let ev = tokio::select! {
            ev = c.events.recv() => ev,
            () = stopping(&mut stop) => {
                // The hub hears the goodbye and checks at once whether the device is still there;
                // the DISCONNECT tells the broker this is no crash (no will).
                publish(link.goodbye());
                let _ = c.client.try_disconnect();
                let _ = tokio::time::timeout(LEAVE_WAIT, async { while c.events.recv().await.is_some_and(|e| !matches!(e, ConnEvent::Down(_))) {} }).await;
                info!(device = %cfg.device_id, "stopped: said goodbye and disconnected");
                return Ok(());
            }
            _ = sleep_until(hello_deadline) => {
                // The stock firmware gives up on the voice session; the simulator says hello again
                // (its hello may have gone to a broker nobody was subscribed to yet).
                warn!(device = %cfg.device_id, "no server hello within 10 s; saying hello again");
                publish(link.hello());
                hello_deadline = Some(Instant::now() + Duration::from_secs(10));
                continue;
            }
        };
        match ev {
            None => return Ok(()),
            Some(ConnEvent::Up) => {
                if let Err(e) = c.client.try_subscribe(t.subscribe_topic.clone(), rumqttc::QoS::AtMostOnce) {
                    warn!(device = %cfg.device_id, "cannot subscribe: {e}");
                }
                publish(link.hello());
                hello_deadline = Some(Instant::now() + Duration::from_secs(10));
                debug!(device = %cfg.device_id, broker = %t.broker, "connected over MQTT; hello sent");
            }
            Some(ConnEvent::Down(why)) if refused_credentials(&why) => {
                return Err(Stopped::auth(format!("the MQTT broker {} refused this device's credentials ({why})", t.broker)));
            }
            Some(ConnEvent::Down(why)) => debug!(device = %cfg.device_id, %why, "broker unreachable; reconnecting"),
            Some(ConnEvent::Message(p)) if p.topic == t.subscribe_topic => {
                let text = String::from_utf8_lossy(&p.payload);
                out.clear();
                match super::stock::on_text_as(cfg.profile, &mut link, &text, &mut out) {
                    Inbound::Hello { session_id } => {
                        hello_deadline = None;
                        info!(device = %cfg.device_id, session_id, "connected");
                    }
                    Inbound::BadHello(why) => warn!(device = %cfg.device_id, "unusable server hello: {why}"),
                    Inbound::Mcp { replied: true } => {
                        publish(out.clone());
                    }
                    Inbound::Goodbye => info!(device = %cfg.device_id, "the server ended the session (goodbye)"),
                    Inbound::Ignored(why) => debug!(device = %cfg.device_id, why, "ignored a message"),
                    _ => {}
                }
                while {
                    out.clear();
                    link.next_notification(&mut out)
                } {
                    publish(out.clone());
                }
                if std::mem::take(&mut link.server.state_mut().reboot_requested) {
                    // Back after a "reboot": a new session.
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    info!(device = %cfg.device_id, "rebooted");
                    publish(link.hello());
                    hello_deadline = Some(Instant::now() + Duration::from_secs(10));
                }
            }
            Some(ConnEvent::Message(_) | ConnEvent::Subscribed) => {}
        }
    }
}

/// Resolves once `stop` turns `true` (never without one).
async fn stopping(stop: &mut Option<tokio::sync::watch::Receiver<bool>>) {
    match stop {
        Some(rx) => {
            if rx.wait_for(|s| *s).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending().await,
    }
}

/// A CONNACK that says the user name, password or client is not allowed (return codes 4 and 5):
/// trying again with the same settings cannot help.
fn refused_credentials(why: &str) -> bool {
    why.contains("BadUserNamePassword") || why.contains("NotAuthorized")
}
