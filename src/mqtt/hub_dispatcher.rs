//! The hub's MQTT dispatcher (the task [`super::start`] spawns): it reads every message for this
//! hub, in order, and acts on it without waiting. Uplinks go to the device's link (created on the
//! first message; onboarding starts at once if that is not a hello); claims and hub presence
//! decide which hub serves which device, claims being rechecked and settled by timers the
//! dispatcher sets itself; the embedded broker's connection events start and end links first.
//! On every (re)connect it subscribes again and republishes its presence and its claims; the
//! cluster view keeps the hubs it knew until the retained replay is complete, then drops those
//! whose presence did not come back.

use super::*;

/// The next event from the embedded broker; never, for another broker.
async fn next_client_event(events: &mut Option<mpsc::Receiver<broker::ClientEvent>>) -> Option<broker::ClientEvent> {
    match events {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

impl Dispatcher {
    pub(super) async fn run(mut self, mut events: mpsc::Receiver<ConnEvent>, mut control: mpsc::Receiver<Control>, mut client_events: Option<mpsc::Receiver<broker::ClientEvent>>) {
        loop {
            tokio::select! {
                // First: a connection's start is queued before anything it publishes can reach the
                // hub's own connection, so its messages go to the link this starts.
                biased;
                ev = next_client_event(&mut client_events) => match ev {
                    Some(ev) => self.on_client_event(ev),
                    None => client_events = None,
                },
                ev = events.recv() => match ev {
                    Some(ConnEvent::Up) => self.on_up(),
                    Some(ConnEvent::Down(why)) => {
                        self.subscribed.send_replace(false);
                        if let Some(done) = self.stopped.take() {
                            let _ = done.send(());
                            return;
                        }
                        warn!(broker = %self.mqtt.broker, %why, "MQTT broker unreachable; reconnecting (devices are kept)");
                    }
                    Some(ConnEvent::Subscribed) => {
                        self.acks_due = self.acks_due.saturating_sub(1);
                        if self.acks_due == 0 {
                            self.subscribed.send_replace(true);
                            // The retained admission records are in before this comes back.
                            self.mqtt.cluster.admissions.subscribed();
                            // So are the presence records: a hub whose record did not come back is gone.
                            self.mqtt.cluster.reconcile();
                            // Devices of hubs that died while this one was away.
                            self.take_over();
                        }
                    }
                    Some(ConnEvent::Message(p)) => self.on_message(&p.topic, p.payload.to_vec(), p.retain),
                    None => return,
                },
                c = control.recv() => match c {
                    Some(Control::Settled(key)) => self.settle(&key),
                    Some(Control::ClaimCheck(key)) => self.recheck_claim(&key),
                    Some(Control::CutOff(key)) => self.drop_link(&key),
                    Some(Control::CheckedIn(key)) => {
                        if let Some(l) = self.links.get(&key) {
                            let _ = l.inbound.try_send(Inbound::CheckedIn);
                        }
                    }
                    Some(Control::Ended { key, generation }) => {
                        if self.links.get(&key).is_some_and(|l| l.generation == generation)
                            && let Some(l) = self.links.remove(&key)
                        {
                            self.mqtt.udp.forget(l.ssrc);
                        }
                    }
                    Some(Control::Shutdown(done)) => {
                        // Queued before the disconnect, so they are sent before it.
                        for (key, l) in &self.links {
                            let bye = json!({"type": "goodbye", "session_id": l.session_id}).to_string();
                            let _ = self.mqtt.client.publish(topics::downlink(key), QoS::AtMostOnce, false, bye).await;
                        }
                        let presence = format!("{}{}", topics::HUBS, self.claims.me());
                        let _ = self.mqtt.client.publish(presence, QoS::AtLeastOnce, true, Vec::<u8>::new()).await;
                        let _ = self.mqtt.client.disconnect().await;
                        self.stopped = Some(done);
                    }
                    None => return,
                },
            }
        }
    }

    fn on_up(&mut self) {
        let me = self.claims.me().to_string();
        info!(broker = %self.mqtt.broker, hub = %me, "MQTT broker connected");
        // Claims learn presence again from the replay (a takeover waits for it: `Subscribed`);
        // the cluster view keeps what it knew until the replay is complete, so the other hubs'
        // devices stay listed and reachable meanwhile.
        self.claims.forget_presence();
        self.mqtt.cluster.resync();
        let c = &self.mqtt.client;
        let cluster = self.mqtt.cluster.subscriptions();
        self.acks_due = 4 + cluster.len();
        self.mqtt.cluster.admissions.subscribing();
        // In this order: presence and claims arrive (retained) before any uplink. Every
        // subscription is QoS 0: a broker holds at most so many QoS 1 messages for a client
        // beyond those in flight (Mosquitto: 1,000 by default) and drops the rest, retained
        // ones included, so a hub subscribed at QoS 1 learned 1,020 of 19,000 claims; and QoS 0
        // keeps one order for all of them (QoS 1 messages wait for acknowledgements while QoS 0
        // uplinks pass them). Nothing is lost by it: the session is clean, so QoS 1 would not
        // survive a dropped connection either, and what the hub publishes stays QoS 1.
        for (filter, qos) in [
            (format!("{}+", topics::HUBS), QoS::AtMostOnce),
            (format!("{}+", topics::CLAIMS), QoS::AtMostOnce),
            (format!("{}{me}/+", topics::FWD), QoS::AtMostOnce),
        ]
        .into_iter()
        .chain(cluster)
        .chain([(topics::shared_uplinks(&self.mqtt.settings.group), QoS::AtMostOnce)])
        {
            if let Err(e) = c.try_subscribe(filter, qos) {
                warn!("cannot queue an MQTT subscription: {e}");
            }
        }
        self.publish_presence();
        // The devices this hub serves are claimed again, and held as any claim is until it
        // stands: while this hub was away, a survivor may have taken one over, and its retained
        // claim, which comes back first, drops this hub's link. Once this hub's later claim
        // stands (it is the last, so it wins everywhere and the survivor lets go), the device is
        // served again, and asked first if its link was dropped ([`Self::settle`]). Without the
        // hold, both hubs let go of it: nobody served a device that was still connected.
        // A device this hub owns but no longer serves (it left) is not claimed again: the claim
        // would come back as this hub's own and have it ask a device that is gone.
        for key in self.claims.mine().into_iter().filter(|k| self.links.contains_key(k)) {
            self.pending.entry(key).or_default();
        }
        let claiming: Vec<String> = self.pending.keys().cloned().collect();
        for key in claiming {
            self.publish_claim(&key);
        }
        self.republish.send_modify(|n| *n += 1);
    }

    /// This hub's presence record, sealed ([`crate::mqtt::cluster_seal`]), retained.
    fn publish_presence(&self) {
        let me = self.claims.me();
        let record = self.mqtt.cluster.presence_record(self.mqtt.link.as_ref());
        let sealed = crate::mqtt::cluster_seal::seal_presence(&self.hub.secret, me, &record);
        let _ = self.mqtt.client.try_publish(format!("{}{me}", topics::HUBS), QoS::AtLeastOnce, true, sealed);
    }

    /// Claims the devices of dead hubs that fall to this hub ([`Claims::takeover`]); each is
    /// served, and sent `initialize`, once its claim stands ([`Self::settle`]).
    fn take_over(&mut self) {
        let claiming: HashSet<String> = self.pending.keys().cloned().collect();
        let keys = self.claims.takeover(&claiming);
        if keys.is_empty() {
            return;
        }
        info!(count = keys.len(), "taking over the devices of a hub that went away");
        for key in keys {
            self.pending.insert(key.clone(), Vec::new());
            self.publish_claim(&key);
        }
    }

    /// Publishes this hub's claim for `key`, and looks again after [`CLAIM_RECHECK`]: a claim that
    /// was never queued (the client's queue was full) or was lost with the connection never comes
    /// back from the broker, and would hold the device's messages for ever.
    fn publish_claim(&mut self, key: &str) {
        self.claims_out.note(key, std::time::Instant::now());
        let topic = format!("{}{key}", topics::CLAIMS);
        let sealed = crate::mqtt::cluster_seal::seal_claim(&self.hub.secret, key, self.claims.me());
        let _ = self.mqtt.client.try_publish(topic, QoS::AtLeastOnce, true, sealed);
        self.after(CLAIM_RECHECK, Control::ClaimCheck(key.to_string()));
    }

    /// Tells the dispatcher `what` after `delay` (the dispatcher itself never waits).
    fn after(&self, delay: Duration, what: Control) {
        let control = self.control.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = control.send(what).await;
        });
    }

    /// A claim published [`CLAIM_RECHECK`] ago: still held and not come back (nobody owns the
    /// device), so it is published again; another hub's claim came back instead, so the held
    /// messages go to that hub. Settled already, or this hub's claim came back (its settle timer
    /// runs): nothing to do.
    fn recheck_claim(&mut self, key: &str) {
        if !self.pending.contains_key(key) {
            return;
        }
        match self.claims.route(key) {
            Route::Claim => {
                debug!(key, "this hub's claim did not come back from the broker; claiming again");
                self.publish_claim(key);
            }
            Route::Forward(_) => self.settle(key),
            Route::Mine => {}
        }
    }

    /// `replayed`: a retained message the broker sent because this hub subscribed (MQTT sets the
    /// flag on those only), not one published since.
    fn on_message(&mut self, topic: &str, payload: Vec<u8>, replayed: bool) {
        if let Some(key) = topic.strip_prefix(topics::UP) {
            if topics::valid_key(key) {
                self.mqtt.heard.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(key.to_string());
                self.on_uplink(key, payload);
            }
        } else if let Some(rest) = topic.strip_prefix(topics::FWD) {
            // Passed on by another hub that believes this hub owns the device.
            if let Some((to, key)) = rest.split_once('/') {
                let payload = match crate::mqtt::cluster_seal::open_forward(&self.hub.secret, to, key, &payload) {
                    Ok(message) => message.to_vec(),
                    Err(why) => return self.mqtt.cluster.refuse("fwd", &format!("a message passed on for {key:?} ({why})")),
                };
                match self.claims.route(key) {
                    Route::Mine => self.deliver(key, payload),
                    _ if self.pending.contains_key(key) => self.hold(key, payload),
                    other => debug!(key, ?other, "dropped a forwarded message for a device this hub does not serve"),
                }
            }
        } else if let Some(key) = topic.strip_prefix(topics::CLAIMS) {
            // A cleared claim (an operator's `mosquitto_pub -r -n`) changes nothing: it is not
            // sealed, and the device's hub still serves it.
            if payload.is_empty() {
                return;
            }
            let hub = match crate::mqtt::cluster_seal::open_claim(&self.hub.secret, key, &payload) {
                Ok(hub) => Some(hub),
                Err(why) => {
                    self.mqtt.cluster.refuse("claim", &format!("a claim of {key:?} ({why}); the device stays where it is"));
                    // The forgery replaced this hub's retained claim on the broker: a hub that
                    // joins later would find no owner. The owner puts its claim back.
                    if self.claims.route(key) == Route::Mine && !self.pending.contains_key(key) && self.restores.allow(key, std::time::Instant::now()) {
                        self.publish_claim(key);
                    }
                    return;
                }
            };
            self.mqtt.heard.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(key.to_string());
            let own = hub.as_deref() == Some(self.claims.me());
            if self.claims.on_claim(key, hub.as_deref()) {
                info!(key, owner = ?hub, "another hub serves this device now");
                self.drop_link(key);
            }
            debug!(key, ?hub, replayed, pending = self.pending.contains_key(key), link = self.links.contains_key(key), "claim");
            if own {
                self.on_own_claim(key, replayed);
            }
        } else if let Some(hub) = topic.strip_prefix(topics::HUBS) {
            let alive = !payload.is_empty();
            if !alive && hub == self.claims.me() {
                // Cleared while this hub is connected: a will of a connection the broker let go
                // late, or a broker client; this hub is alive, and says so again.
                if *self.subscribed.borrow() && self.stopped.is_none() {
                    info!("this hub's presence record was cleared while it is connected; publishing it again");
                    self.publish_presence();
                }
                return;
            }
            let record = if alive {
                match crate::mqtt::cluster_seal::open_presence(&self.hub.secret, hub, &payload) {
                    Ok(record) => record,
                    Err(why) => {
                        return self.mqtt.cluster.refuse_hub(
                            hub,
                            &format!(
                                "the presence of hub {:?} on this broker ({why}): it has another hub secret, or is forged; it is not a hub of this cluster, takes no share of its uplinks (share group {}), and its claims and requests are refused",
                                hub.chars().take(64).collect::<String>(),
                                self.mqtt.settings.group
                            ),
                        );
                    }
                }
            } else {
                &[][..]
            };
            self.claims.on_presence(hub, alive);
            self.mqtt.cluster.on_presence(hub, record);
            if !alive && *self.subscribed.borrow() {
                self.take_over();
            }
        } else {
            self.mqtt.cluster.on_message(topic, &payload);
        }
    }

    /// This hub's claim for `key` came back from the broker: it owns the device on every hub that
    /// has seen the claim. Held messages wait for the settle time. A claim of its own that comes
    /// back after the hub let the device go (a claim just published, or one it sent and had not
    /// seen back: [`Self::claims_out`]) is served the same way, the device asked first, since the other
    /// hubs let go of it on seeing this claim. A claim the broker replays on a new subscription
    /// that this hub did not just send (a device it served that left) is not.
    fn on_own_claim(&mut self, key: &str, replayed: bool) {
        let late = self.claims_out.take(key, std::time::Instant::now()) || !replayed;
        if !self.pending.contains_key(key) {
            if !late || self.serves(key) {
                return;
            }
            if crate::metrics::log_limit::allow(crate::metrics::log_limit::Kind::Onboarding, key) {
                info!(key, "this hub's claim came back after it had let the device go, and won: serving the device");
            }
            self.pending.insert(key.to_string(), Vec::new());
        }
        self.after(self.mqtt.settings.claim_settle, Control::Settled(key.to_string()));
    }

    fn on_uplink(&mut self, key: &str, payload: Vec<u8>) {
        // Neither claimed nor held for a device that is not admitted.
        if !self.links.contains_key(key) && topics::device_id_of(key).is_some_and(|id| !self.hub.admission.may_serve(&id)) {
            return;
        }
        if self.pending.contains_key(key) {
            return self.hold(key, payload);
        }
        match self.claims.route(key) {
            Route::Mine => self.deliver(key, payload),
            Route::Forward(owner) => {
                self.forward(&owner, key, &payload);
            }
            Route::Claim => {
                self.hold(key, payload);
                self.publish_claim(key);
            }
        }
    }

    /// Passes a message of device `key` on to `owner`, the hub that serves it, sealed.
    fn forward(&self, owner: &str, key: &str, message: &[u8]) {
        let sealed = crate::mqtt::cluster_seal::seal_forward(&self.hub.secret, owner, key, message);
        let _ = self.mqtt.client.try_publish(topics::forward(owner, key), QoS::AtMostOnce, false, sealed);
    }

    fn hold(&mut self, key: &str, payload: Vec<u8>) {
        let held = self.pending.entry(key.to_string()).or_default();
        if held.len() < 64 {
            held.push(String::from_utf8_lossy(&payload).into_owned());
        }
    }

    /// This hub's claim has stood for the settle time: serve the device, or pass its held
    /// messages to the hub whose later claim won.
    fn settle(&mut self, key: &str) {
        let Some(held) = self.pending.remove(key) else { return };
        match self.claims.route(key) {
            Route::Mine => {
                // Taken over from a hub that died, or claimed first: the device may be idle, so
                // it is asked first.
                if held.is_empty() && !self.links.contains_key(key) {
                    self.start_link(key, true);
                }
                for text in held {
                    self.deliver(key, text.into_bytes());
                }
            }
            Route::Forward(owner) => {
                for text in held {
                    self.forward(&owner, key, text.as_bytes());
                }
            }
            Route::Claim => {
                self.pending.insert(key.to_string(), held);
                self.publish_claim(key);
            }
        }
    }

    /// The device has a link here that still runs.
    fn serves(&self, key: &str) -> bool {
        self.links.get(key).is_some_and(|l| !l.inbound.is_closed())
    }

    fn deliver(&mut self, key: &str, payload: Vec<u8>) {
        let text = String::from_utf8_lossy(&payload).into_owned();
        if !self.serves(key) {
            let is_hello = serde_json::from_str::<Value>(&text).ok().is_some_and(|v| v["type"] == "hello");
            if !self.start_link(key, !is_hello) {
                return;
            }
        }
        let link = self.links.get(key).expect("started above");
        if link.inbound.try_send(Inbound::Text(text)).is_err() && crate::metrics::log_limit::allow(crate::metrics::log_limit::Kind::Device, key) {
            warn!(key, "a device sends faster than its link can handle; dropped a message");
        }
    }

    fn drop_link(&mut self, key: &str) {
        if let Some(l) = self.links.remove(key) {
            self.mqtt.udp.forget(l.ssrc);
            // Dropping the sender ends the link task, which takes the device out of the registry.
        }
    }

    /// The embedded broker saw a device's connection start or end: see [`crate::mqtt::instances`].
    fn on_client_event(&mut self, event: broker::ClientEvent) {
        let key = match &event {
            broker::ClientEvent::Connected { client_id, .. } | broker::ClientEvent::Closed { client_id, .. } => client_id.clone(),
        };
        let (_, action) = self.instances.on_event(event, self.serves(&key), std::time::Instant::now());
        match action {
            LinkAction::Nothing => {}
            LinkAction::End(why) => self.end_link(&key, why),
            LinkAction::Restart(why) => {
                if !why.is_empty() {
                    self.end_link(&key, why);
                }
                // Only a device this hub serves; a new one waits for its first message (and claim).
                if self.claims.route(&key) == Route::Mine && !self.pending.contains_key(&key) && self.start_link(&key, false)
                    && let Some(l) = self.links.get(&key)
                {
                    let _ = l.inbound.try_send(Inbound::BeginSoon);
                }
            }
        }
    }

    /// Ends a device's link now, saying why (a dropped sender would say only that the hub stopped).
    fn end_link(&mut self, key: &str, why: String) {
        if let Some(l) = self.links.get(key) {
            if crate::metrics::log_limit::allow(crate::metrics::log_limit::Kind::Disconnect, key) {
                info!(key, %why, "ending the device's MQTT link");
            }
            let _ = l.inbound.try_send(Inbound::Closed(why));
        }
        self.drop_link(key);
    }

    /// Creates the device's link and registers it; `begin` starts onboarding without a hello.
    fn start_link(&mut self, key: &str, begin: bool) -> bool {
        let Some(device_id) = topics::device_id_of(key) else {
            if crate::metrics::log_limit::allow(crate::metrics::log_limit::Kind::Refusal, key) {
                warn!(key, "an uplink topic that names no MAC; ignored");
            }
            return false;
        };
        let hub = &self.hub;
        // No link for a device that is not admitted (an external broker checks no device token;
        // a revoked device may still hold a broker connection somewhere).
        if !hub.admission.may_serve(&device_id) {
            let refusal = crate::hub::admission::Refusal::NotAdmitted { device_id: device_id.clone(), code: None };
            // One line per window for all MQTT refusals (they all come from the broker).
            hub.admission.log_refusal(Some(std::net::Ipv4Addr::UNSPECIFIED.into()), &format!("MQTT uplink of {key}"), &refusal);
            return false;
        }
        let ota = hub.registry.ota.get(&device_id);
        // From the hub's configuration only: nothing a device posted (its check-in) picks the
        // address another device's audio and photos go to.
        let host = hub.public_name(None);
        let (inbound_tx, inbound_rx) = link::inbound_channel();
        let ssrc = self.mqtt.udp.register(inbound_tx.clone());
        let session_id = uuid::Uuid::new_v4().to_string();
        let hello = udp::server_hello(&host, self.mqtt.udp.addr.port(), ssrc);
        let mut cfg = SessionConfig::new(&session_id, hello);
        (cfg.vision_url, cfg.vision_token) = hub.vision_for(&device_id, None);
        cfg.keepalive = hub.config.keepalive;
        cfg.onboarding_timeout = hub.config.onboarding_timeout;
        cfg.system_info = ota.map(|r| r.system_info);
        cfg.known_tools = hub.registry.known_tools(&device_id);
        // Only the embedded broker tells the hub about connections; through another, any hello may
        // be a new instance's.
        cfg.hello_may_be_new_instance = !matches!(self.mqtt.settings.broker, BrokerChoice::Embedded { .. });
        cfg.onboard_budget = self.instances.budget(key, std::time::Instant::now(), cfg.max_onboardings, cfg.onboarding_window);
        let generation = hub.registry.next_generation();
        let setup = MqttLinkSetup {
            link: LinkSetup {
                identity: Identity { device_id: device_id.clone(), client_id: Some(key.to_string()), token: None, protocol_version: 3 },
                session: cfg,
                events: hub.registry.events.clone(),
                tracing: hub.registry.tracing.clone(),
                generation,
                remote: Some(format!("{} as {key}", self.mqtt.broker)),
                until_hello: None,
                hello_timeout: None,
            },
            client: self.mqtt.client.clone(),
            downlink: topics::downlink(key),
            broker_up: self.mqtt.up.clone(),
            broker: self.mqtt.broker.clone(),
            max_payload: self.mqtt.settings.max_payload,
        };
        // Once the link has ended: out of the registry, and the dispatcher told (if it is behind,
        // from a task that waits for room; the link task itself never waits).
        let (registry_hub, control, key_owned) = (hub.clone(), self.control.clone(), Box::<str>::from(key));
        let on_end = move || {
            if let Some(device_id) = topics::device_id_of(&key_owned) {
                registry_hub.registry.remove(&device_id, generation);
            }
            let ended = Control::Ended { key: key_owned.into(), generation };
            if let Err(tokio::sync::mpsc::error::TrySendError::Full(ended)) = control.try_send(ended) {
                tokio::spawn(async move {
                    let _ = control.send(ended).await;
                });
            }
        };
        let handle = link::spawn(setup, inbound_rx, on_end);
        if begin {
            let _ = inbound_tx.try_send(Inbound::Begin);
        }
        let log = crate::metrics::log_limit::allow(crate::metrics::log_limit::Kind::Connect, &device_id);
        if log {
            info!(device = %device_id, key, "MQTT device attached");
        }
        if let Some(old) = hub.registry.insert(handle) {
            if log {
                info!(device = %device_id, "replacing the previous session of this device");
            }
            tokio::spawn(async move { old.close(crate::links::handle::CloseReason::Replaced).await });
        }
        self.links.insert(key.to_string(), LinkEntry { inbound: inbound_tx, generation, ssrc, session_id });
        true
    }
}
