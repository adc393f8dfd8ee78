//! The CLI reaching one device through a broker, with no hub (`--mqtt URL --device ID`): the
//! command itself is the device's backend for as long as it runs, through the same session
//! code (one [`links::mqtt`](crate::links::mqtt) task), as `--listen` is for WebSocket.
//!
//! It subscribes to the device's uplink (not shared, so a hub serving the same device is not
//! disturbed), starts onboarding at once (the device answers MCP while idle), and uses request
//! ids from a random base so that replies meant for a hub are never taken for its own.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::conn::{self, BrokerUrl, ConnEvent};
use super::{topics, udp};
use crate::exit::{CodedError, Exit};
use crate::links::DeviceHandle;
use crate::links::handle::{Lifecycle, LinkEvent, LinkSetup, Tracing};
use crate::links::mqtt::{self as link, Inbound, MqttLinkSetup};
use crate::session::{Event, SessionConfig};
use crate::wire::identity::Identity;

/// Connects to the broker, onboards the device and returns it with its description.
pub async fn open(url: &str, device: Option<&str>, timeout: Duration, wait: Option<Duration>, vision: Option<(String, String)>) -> anyhow::Result<(DeviceHandle, Value)> {
    let Target { key, device_id, broker } = target(url, device)?;
    let mut c = reach(&broker, timeout).await?;
    let uplink = topics::uplink(&key);
    c.client.try_subscribe(uplink.clone(), rumqttc::QoS::AtMostOnce)?;
    let udp = Arc::new(udp::UdpSink::bind("0.0.0.0:0".parse().expect("static address")).await?);
    let (inbound_tx, inbound_rx) = link::inbound_channel();
    let ssrc = udp.register(inbound_tx.clone());
    let session_id = uuid::Uuid::new_v4().to_string();
    let mut cfg = SessionConfig::new(&session_id, udp::server_hello("127.0.0.1", udp.addr.port(), ssrc));
    (cfg.vision_url, cfg.vision_token) = vision.unwrap_or_else(|| ("http://127.0.0.1/mcpdev-no-vision".into(), "none".into()));
    cfg.onboarding_timeout = wait.unwrap_or(timeout);
    cfg.id_base = fastrand::i64(1_000_000_000..1_900_000_000);
    let (events, mut rx) = crate::links::ring::channel(256, 16 << 20);
    let setup = MqttLinkSetup {
        link: LinkSetup {
            identity: Identity { device_id: device_id.clone(), client_id: Some(key.clone()), token: None, protocol_version: 3 },
            session: cfg,
            events,
            tracing: Arc::new(Tracing::default()),
            generation: 1,
            remote: Some(format!("{broker} as {key}")),
            until_hello: None,
            hello_timeout: None,
        },
        client: c.client.clone(),
        downlink: topics::downlink(&key),
        broker_up: c.up.clone(),
        broker: broker.to_string(),
        max_payload: 1 << 20,
    };
    let handle = link::spawn(setup, inbound_rx, || {});
    let _ = inbound_tx.send(Inbound::Begin).await;
    // Device messages in; the subscription again after a reconnect. Lives as long as the command.
    tokio::spawn(async move {
        let _udp = udp;
        while let Some(ev) = c.events.recv().await {
            match ev {
                ConnEvent::Message(p) if p.topic == uplink => {
                    let text = String::from_utf8_lossy(&p.payload).into_owned();
                    if inbound_tx.send(Inbound::Text(text)).await.is_err() {
                        return;
                    }
                }
                ConnEvent::Up => {
                    let _ = c.client.try_subscribe(uplink.clone(), rumqttc::QoS::AtMostOnce);
                }
                _ => {}
            }
        }
    });
    let ready = async {
        loop {
            match rx.recv().await {
                Ok(ev) => match &ev.event {
                    LinkEvent::Session(Event::Ready { .. } | Event::ToolsChanged { .. }) => return Ok(()),
                    // No answer at all to initialize: the device is not there (no point retrying).
                    LinkEvent::Session(Event::OnboardingRetry { error, .. }) if error.starts_with("initialize: no answer") => return Err(error.clone()),
                    // Any other failed onboarding is reported by the command, which names the step.
                    LinkEvent::Session(Event::OnboardingFailed { .. }) => return Ok(()),
                    LinkEvent::Link(Lifecycle::Disconnected { reason }) => return Err(reason.clone()),
                    _ => {}
                },
                Err(_) => return Err("the link ended".to_string()),
            }
        }
    };
    let limit = wait.unwrap_or(timeout) * 4;
    match tokio::time::timeout(limit, ready).await {
        Ok(Ok(())) => {}
        Ok(Err(why)) => {
            let msg = format!("device {device_id} did not answer over MQTT ({why}); is it connected to {broker}? (--wait gives it longer)");
            return Err(CodedError::new(Exit::Unreachable, msg).into());
        }
        Err(_) => return Err(CodedError::new(Exit::Timeout, format!("device {device_id} did not finish onboarding over MQTT within {limit:?}")).into()),
    }
    let info = handle.snapshot().ok_or_else(|| CodedError::new(Exit::Unreachable, "the device link ended"))?;
    Ok((handle, serde_json::to_value(&*info)?))
}

/// A device to reach through a broker with no hub: its key (MQTT client id), its Device-Id, and
/// the broker.
pub struct Target {
    pub key: String,
    pub device_id: String,
    pub broker: BrokerUrl,
}

/// Reads `--mqtt URL --device ID` (usage errors say what to give). A loopback embedded broker of
/// this user's hub is reached with the hub's credential.
pub fn target(url: &str, device: Option<&str>) -> Result<Target, CodedError> {
    let usage = |m: String| CodedError::new(Exit::Usage, m);
    let device = crate::config::resolve_alias(device).ok_or_else(|| usage("--mqtt needs --device: the device's MAC (its Device-Id)".into()))?;
    let key = topics::key_for(&device).map_err(usage)?;
    let device_id = topics::device_id_of(&key).expect("a key made from a MAC");
    let mut broker = BrokerUrl::parse(url).map_err(usage)?;
    let loopback = broker.host == "localhost" || broker.host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if loopback
        && broker.username.is_none()
        && broker.password.is_none()
        && let Some(password) = super::broker::acl::read_hub_credential(broker.port)
    {
        (broker.username, broker.password) = (Some(super::broker::acl::HUB_USERNAME.into()), Some(password));
    }
    Ok(Target { key, device_id, broker })
}

/// Connects to `broker` as a CLI client and waits until it is up: an `Unreachable` error naming
/// the broker when it cannot be reached within `timeout` (1 s to 10 s).
pub async fn reach(broker: &BrokerUrl, timeout: Duration) -> Result<conn::Connection, CodedError> {
    let options = broker.options(&format!("mcpdev-cli-{}", uuid::Uuid::new_v4().simple()), Duration::from_secs(30), 1 << 20);
    let mut c = conn::connect(options, None);
    let reach = Duration::from_secs(10).min(timeout.max(Duration::from_secs(1)));
    match tokio::time::timeout(reach, c.events.recv()).await {
        Ok(Some(ConnEvent::Up)) => Ok(c),
        Ok(Some(ConnEvent::Down(why))) => Err(CodedError::new(Exit::Unreachable, format!("cannot reach the MQTT broker {broker}: {why}"))),
        _ => Err(CodedError::new(Exit::Unreachable, format!("cannot reach the MQTT broker {broker} within {reach:?}"))),
    }
}
