//! What the hub asks of the cluster ([`crate::hub::remote::Cluster`]), answered by this hub's
//! node: where a device is (the index, then the hubs that list only part of theirs), requests and
//! watches forwarded to the hub that serves it ([`super::stop::forward`]), the other hubs' devices
//! offered here as stand-ins ([`crate::mqtt::proxy`]), and admission records published.
//!
//! Stand-ins are made for every ready device of the others while they all fit under
//! `--cluster-stand-ins` ([`ClusterNode::offer_later`]); once they do not, those made only to be
//! offered that no host asked for end, including any a pass still running made after that.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use super::{Answer, ClusterNode, Waiter, lock, stop};
use crate::hub::remote::{Cluster, Located, ProxyError, WatchItem};

impl Cluster for ClusterNode {
    fn me(&self) -> &str {
        &self.me
    }

    fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    fn locate(&self, selector: Option<&str>, aliases: &HashMap<String, String>) -> Located {
        lock(&self.view).locate(selector, aliases)
    }

    fn changed(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    fn forward(&self, hub: &str, op: Value, deadline: Duration) -> BoxFuture<'static, Answer> {
        stop::forward(self, hub, op, deadline, None)
    }

    fn watch(&self, hub: &str, op: Value, events: mpsc::Sender<WatchItem>) -> BoxFuture<'static, ()> {
        let started = self.start_call(hub, op, Waiter::Stream { hub: hub.to_string(), items: events.clone() });
        let (node, to) = (self.this.clone(), hub.to_string());
        async move {
            let c = match started {
                Ok(c) => c,
                Err((_, e)) => {
                    let _ = events.send(WatchItem::Error(e)).await;
                    return;
                }
            };
            // Until the local watcher goes away (or the stream ended with an error).
            events.closed().await;
            if let Some(n) = node.upgrade() {
                n.cancel(&to, c);
            }
        }
        .boxed()
    }

    fn remote_page(&self, after: Option<&str>, limit: usize) -> Vec<(String, String)> {
        let view = lock(&self.view);
        let rows = view.page(after, limit);
        rows.into_iter()
            .map(|(id, hub, row)| (id, row.listing_text(&hub, view.hub_name(&hub).as_deref())))
            .collect()
    }

    fn remote_count(&self) -> usize {
        lock(&self.view).remote_count()
    }

    fn unlisted(&self) -> Vec<(String, u64)> {
        lock(&self.view).unlisted()
    }

    fn find(
        &self,
        selector: &str,
        deadline: Duration,
    ) -> BoxFuture<'static, Result<Located, Value>> {
        let peers: Vec<(String, u64)> = self.unlisted();
        let asked: Vec<_> = peers
            .iter()
            .map(|(p, _)| {
                self.forward(
                    p,
                    json!({"op": "device", "device": selector, "wait_ms": 0}),
                    deadline,
                )
            })
            .collect();
        let selector = selector.to_string();
        async move {
            let answers = futures_util::future::join_all(asked).await;
            let (mut found, mut silent, mut ambiguous) = (Vec::new(), Vec::new(), None);
            for ((peer, unlisted), answer) in peers.into_iter().zip(answers) {
                match answer {
                    Ok(text) => {
                        if let Some(id) = serde_json::from_str::<Value>(&text).ok().and_then(|v| v["device_id"].as_str().map(str::to_string)) {
                            found.push((peer, id));
                        }
                    }
                    // There, still onboarding: its hub says so when asked.
                    Err(e) if e["kind"] == "not_ready" => found.push((peer, selector.clone())),
                    Err(e) if e["kind"] == "ambiguous" => ambiguous = Some(e),
                    Err(e) if matches!(e["kind"].as_str(), Some("not_found" | "no_devices")) => {}
                    Err(e) => silent.push(format!("hub {peer}, which serves {unlisted} devices not listed here, did not answer ({})", e["message"].as_str().unwrap_or_default())),
                }
            }
            match (found.as_slice(), ambiguous) {
                ([(hub, id)], _) => Ok(Located::Remote { hub: hub.clone(), device_id: id.clone() }),
                ([_, _, ..], _) => Ok(Located::Ambiguous(found.iter().map(|(_, id)| id.as_str()).collect::<Vec<_>>().join(", "))),
                ([], Some(e)) => Err(e),
                ([], None) if !silent.is_empty() => Err(json!({"kind": "link_down", "message": format!("{selector:?} is in no hub's index; {}", silent.join("; "))})),
                ([], None) => Ok(Located::Nowhere),
            }
        }
        .boxed()
    }

    fn peers(&self) -> Vec<String> {
        lock(&self.view).peers()
    }

    fn is_peer(&self, hub: &str) -> bool {
        hub != self.me && self.is_alive(hub)
    }

    fn proxy(
        &self,
        device_id: &str,
    ) -> BoxFuture<'static, Result<crate::links::DeviceHandle, ProxyError>> {
        let (node, device_id) = (self.this.upgrade(), device_id.to_string());
        async move {
            let Some(node) = node else {
                return Err(ProxyError::NotServed);
            };
            node.proxies.make(&node, &device_id).await
        }
        .boxed()
    }

    fn cached_proxy(&self, device_id: &str) -> Option<crate::links::DeviceHandle> {
        self.proxies.get(device_id)
    }

    fn proxies(&self) -> Vec<crate::links::DeviceHandle> {
        self.proxies.all()
    }

    fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    fn publish_admission(&self, device_id: &str, record: &str) {
        crate::mqtt::admission_sync::publish_record(&self.client, device_id, record);
    }
}

/// How long after an index arrives the proxies for `/mcp` are brought up to date.
const OFFER_DELAY: Duration = Duration::from_millis(200);

impl ClusterNode {
    /// Makes proxies for the other hubs' ready devices that have none, so that `/mcp` offers
    /// them ([`crate::mqtt::proxy`]); at most one pass at a time, [`OFFER_DELAY`] after an index came.
    pub(super) fn offer_later(&self) {
        if self.offering.swap(true, Ordering::AcqRel) {
            return;
        }
        let node = self.this.clone();
        tokio::spawn(async move {
            tokio::time::sleep(OFFER_DELAY).await;
            let Some(node) = node.upgrade() else { return };
            node.offering.store(false, Ordering::Release);
            // Only while every ready device of the others fits: beyond, stand-ins are made on
            // demand (a cap never picks which devices by arrival order).
            let wanted = lock(&node.view).remote_ready(node.proxies.max());
            let end_offers = |node: &Self| {
                node.offers_ended.fetch_add(1, Ordering::AcqRel);
                let ended = node.proxies.end_unasked_offers();
                if ended > 0 {
                    tracing::debug!(ended, "the other hubs' ready devices no longer all fit in --cluster-stand-ins: ended the stand-ins made to offer them that nobody asked for");
                }
            };
            if wanted.is_empty() {
                end_offers(&node);
            }
            // Passes overlap (each makes its stand-ins one after the other): once a later pass
            // ended the offer, this one stops, and ends what it made since.
            let epoch = node.offers_ended.load(Ordering::Acquire);
            for device_id in wanted {
                if node.offers_ended.load(Ordering::Acquire) != epoch {
                    break;
                }
                if !node.proxies.has(&device_id) {
                    let _ = node.proxies.make_as(&node, &device_id, true).await;
                }
            }
            if node.offers_ended.load(Ordering::Acquire) != epoch {
                end_offers(&node);
            }
        });
    }
}
