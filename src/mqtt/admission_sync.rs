//! The cluster's admission records as this hub applies them, and knowing when it holds the
//! cluster's current approvals (docs/cluster.md, "Admission across the cluster").
//!
//! The rules this module enforces:
//! - **In broker order, one at a time**: every record (`mcpdev/admission/<device id>`) goes to one
//!   task, which applies it to the hub's book before it looks at the next; what the decision then
//!   asks of the hub (the broker's credential, cutting a revoked device off) is carried out in the
//!   background ([`crate::hub::admission::carry_out_import`]). A record that does not open is
//!   refused and logged (rate-limited by the caller).
//! - **Caught up, then reconciled**: once every subscription of a (re)connect is acknowledged, the
//!   hub publishes a marker `mcpdev/admission/~sync-<hub>-<random>` (not retained, MAC'd). The broker
//!   delivers it after every retained record of the subscription, so when the task reaches it the
//!   hub holds every decision the broker keeps: [`AdmissionSync::caught_up`] turns true, and stays.
//!   Dynamic security reconciles the broker's logins only then ([`super::dynsec`]): a hub that
//!   joins never deletes a login the cluster approves, and one that restarts with an old book never
//!   re-creates a revoked one. A marker that is not this hub's latest (or does not verify) is
//!   ignored.
//! - **The broker keeps the latest**: a record older than this hub's decision is answered with
//!   the hub's own; and at each marker, every decision this hub holds that the broker did not
//!   replay (a broker that lost its retained messages) is published again, so hubs that join later
//!   learn it.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use rumqttc::{AsyncClient, QoS};
use tokio::sync::{mpsc, watch};
use tracing::{info, warn};

use super::topics;
use crate::hub::Hub;
use crate::hub::admission::Imported;
use crate::hub::secret::{HubSecret, Purpose};

/// The first characters of a marker's name (no Device-Id starts so).
pub const MARKER_PREFIX: &str = "~sync-";

enum Item {
    Record { device: String, payload: Vec<u8> },
    /// A new subscription: what the broker replays from now on is counted afresh.
    Subscribed,
    /// This hub's marker came back: everything retained before it is in.
    Marker,
}

/// What a rejected record is reported to (the cluster's rate-limited log).
pub type Rejected = Arc<dyn Fn(&str, &str) + Send + Sync>;

pub struct AdmissionSync {
    me: String,
    tx: mpsc::UnboundedSender<Item>,
    client: AsyncClient,
    secret: Arc<HubSecret>,
    /// The random part of the latest marker this hub published.
    marker: AtomicU64,
    caught_up: watch::Receiver<bool>,
}

/// Publishes `record` (sealed) retained as `device_id`'s decision.
pub fn publish_record(client: &AsyncClient, device_id: &str, record: &str) {
    if let Err(e) = client.try_publish(format!("{}{device_id}", topics::ADMISSION), QoS::AtLeastOnce, true, record.to_string()) {
        warn!(device = %device_id, "cannot tell the cluster about an admission change: {e}");
    }
}

impl AdmissionSync {
    /// Starts the task that applies records for `hub`; `rejected` hears each record refused.
    pub fn start(me: &str, hub: Weak<Hub>, client: AsyncClient, secret: Arc<HubSecret>, rejected: Rejected) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let (caught_tx, caught_up) = watch::channel(false);
        tokio::spawn(apply(rx, hub, client.clone(), rejected, caught_tx));
        Self { me: me.to_string(), tx, client, secret, marker: AtomicU64::new(0), caught_up }
    }

    /// Turns true once this hub holds every decision the broker keeps (and stays true).
    pub fn caught_up(&self) -> watch::Receiver<bool> {
        self.caught_up.clone()
    }

    /// A (re)connect is about to subscribe.
    pub fn subscribing(&self) {
        let _ = self.tx.send(Item::Subscribed);
    }

    /// Every subscription is acknowledged: publishes the marker that says the replay is over.
    pub fn subscribed(&self) {
        let mut n = [0u8; 8];
        if crate::hub::secret::fill_random(&mut n).is_err() {
            return;
        }
        let n = u64::from_le_bytes(n);
        self.marker.store(n, Ordering::Release);
        let name = format!("{MARKER_PREFIX}{}-{n:016x}", self.me);
        let mac = self.secret.mac(Purpose::ClusterState, format!("sync\n{name}").as_bytes());
        if let Err(e) = self.client.try_publish(format!("{}{name}", topics::ADMISSION), QoS::AtLeastOnce, false, mac) {
            warn!("cannot queue the admission marker ({e}); the broker's logins are reconciled after the next reconnect");
        }
    }

    /// A message under `mcpdev/admission/`: a record, or a marker.
    pub fn on_message(&self, device: &str, payload: &[u8]) {
        if let Some(rest) = device.strip_prefix(MARKER_PREFIX) {
            let mine = format!("{}-{:016x}", self.me, self.marker.load(Ordering::Acquire));
            let name = format!("{MARKER_PREFIX}{rest}");
            let genuine = std::str::from_utf8(payload).is_ok_and(|mac| self.secret.verify_mac(Purpose::ClusterState, format!("sync\n{name}").as_bytes(), mac));
            if rest == mine && genuine {
                let _ = self.tx.send(Item::Marker);
            }
            return;
        }
        // A cleared record (an operator's `mosquitto_pub -r -n`) changes nothing.
        if !payload.is_empty() {
            let _ = self.tx.send(Item::Record { device: device.to_string(), payload: payload.to_vec() });
        }
    }
}

async fn apply(mut rx: mpsc::UnboundedReceiver<Item>, hub: Weak<Hub>, client: AsyncClient, rejected: Rejected, caught_up: watch::Sender<bool>) {
    // Devices whose record the broker replayed on the current subscription.
    let mut replayed: HashSet<String> = HashSet::new();
    while let Some(item) = rx.recv().await {
        let Some(hub) = hub.upgrade() else { return };
        match item {
            Item::Subscribed => replayed.clear(),
            Item::Record { device, payload } => {
                replayed.insert(device.to_ascii_lowercase());
                match hub.admission.import(&device, &payload) {
                    Ok(Imported::Older) => {
                        if let Some(mine) = hub.admission.record(&device, "") {
                            publish_record(&client, &device, &mine);
                        }
                    }
                    Ok(imported @ Imported::Applied { .. }) => {
                        let hub = hub.clone();
                        tokio::spawn(async move { crate::hub::admission::carry_out_import(&hub, &imported).await });
                    }
                    Ok(Imported::Same) => {}
                    Err(e) => rejected(&device, &e),
                }
            }
            Item::Marker => {
                let missing: Vec<String> = hub.admission.decided().into_iter().filter(|id| !replayed.contains(id)).collect();
                for id in &missing {
                    if let Some(mine) = hub.admission.record(id, "") {
                        publish_record(&client, id, &mine);
                    }
                }
                if !missing.is_empty() {
                    info!(count = missing.len(), "the broker had no record of some of this hub's admission decisions (it lost its retained messages?): published them again");
                }
                replayed = HashSet::new();
                if !*caught_up.borrow() {
                    info!("cluster: this hub holds every admission decision the broker keeps");
                    caught_up.send_replace(true);
                }
            }
        }
    }
}
