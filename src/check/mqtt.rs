//! `check --mqtt URL --device ID`: the device reached straight through a broker, with no hub,
//! every frame under the checker's control as with `--listen`. Frames go to the device's
//! downlink and come from its uplink (src/mqtt/topics.rs); broker URL, login and reachability
//! are the CLI's direct access (src/mqtt/direct.rs).
//!
//! The uplink is subscribed without sharing, so a hub serving the same device is not disturbed;
//! its traffic (replies to the hub's own requests) is seen here too, and [`Conn`](super::conn::Conn)
//! drops replies to ids it did not send.

use std::time::Duration;

use rumqttc::{AsyncClient, QoS};
use tokio::sync::mpsc;

use super::silence::Silence;
use crate::exit::{CodedError, Exit};
use crate::mqtt::conn::ConnEvent;
use crate::mqtt::{direct, topics};

/// The raw MQTT transport of a check: publish to the downlink, read the uplink.
pub struct Link {
    client: AsyncClient,
    events: mpsc::Receiver<ConnEvent>,
    uplink: String,
    downlink: String,
    broker: String,
}

/// Who was reached: the device's id, and a line saying where (`mqtt://host:port as KEY`).
pub struct Reached {
    pub link: Link,
    pub device_id: String,
    pub remote: String,
}

/// Connects to the broker and subscribes to the device's uplink (bounded by `timeout`, 1 s to
/// 10 s). Usage errors for a bad URL or device; `Unreachable` naming the broker otherwise.
pub async fn open(url: &str, device: Option<&str>, timeout: Duration) -> Result<Reached, CodedError> {
    let target = direct::target(url, device)?;
    let mut c = direct::reach(&target.broker, timeout).await?;
    let uplink = topics::uplink(&target.key);
    let broker = target.broker.to_string();
    let unreachable = |why: String| CodedError::new(Exit::Unreachable, format!("cannot subscribe to {uplink} on the MQTT broker {broker}: {why}"));
    c.client.try_subscribe(uplink.clone(), QoS::AtMostOnce).map_err(|e| unreachable(e.to_string()))?;
    // Subscribed before the first request, so no answer can come before the subscription.
    let limit = Duration::from_secs(10).min(timeout.max(Duration::from_secs(1)));
    let subscribed = async {
        loop {
            match c.events.recv().await {
                Some(ConnEvent::Subscribed) => return Ok(()),
                Some(ConnEvent::Down(why)) => return Err(why),
                None => return Err("the connection ended".to_string()),
                Some(_) => {}
            }
        }
    };
    match tokio::time::timeout(limit, subscribed).await {
        Ok(Ok(())) => {}
        Ok(Err(why)) => return Err(unreachable(why)),
        Err(_) => return Err(unreachable(format!("no SUBACK within {limit:?}"))),
    }
    let remote = format!("{broker} as {}", target.key);
    let link = Link { client: c.client, events: c.events, downlink: topics::downlink(&target.key), uplink, broker };
    Ok(Reached { link, device_id: target.device_id, remote })
}

impl Link {
    /// Publishes one frame to the device (QoS 0, as backends do).
    pub fn send(&self, text: String) -> Result<(), String> {
        if crate::links::mqtt::publish(&self.client, self.downlink.clone(), text) { Ok(()) } else { Err(format!("cannot publish to the MQTT broker {}", self.broker)) }
    }

    /// The next message the device published, as text. A broken broker connection ends the
    /// check's link to the device (messages sent meanwhile are lost: QoS 0).
    pub async fn next_text(&mut self, deadline: tokio::time::Instant) -> Result<String, Silence> {
        loop {
            match tokio::time::timeout_at(deadline, self.events.recv()).await {
                Err(_) => return Err(Silence::Timeout),
                Ok(None) => return Err(Silence::Gone(format!("the connection to the MQTT broker {} ended", self.broker))),
                Ok(Some(ConnEvent::Message(p))) if p.topic == self.uplink => return Ok(String::from_utf8_lossy(&p.payload).into_owned()),
                Ok(Some(ConnEvent::Down(why))) => return Err(Silence::Gone(format!("lost the MQTT broker {}: {why}", self.broker))),
                Ok(Some(_)) => {}
            }
        }
    }
}
