//! A device over MQTT: one task that owns the device's session, as [`super::websocket`] does for
//! a socket. Device messages come in from whoever reads the broker (the hub's dispatcher, or the
//! CLI with `--mqtt`); messages to the device are published to its downlink topic at QoS 0.
//!
//! The link has no socket of its own, so it does not end when the broker goes away: while the
//! broker is unreachable, waiting callers end at once with [`CallError::Link`], new requests are
//! refused the same way, and the device stays (it publishes again once the broker is back).
//! Messages over the payload limit are refused in both directions without ending anything.
//!
//! MQTT says nothing when a device is switched off, so silence ends the link instead: the session
//! sends an MCP `ping` after each keepalive period without traffic, which every live device
//! answers (the stock firmware with an error, which counts), so nothing heard for
//! [`SILENT_PERIODS`] keepalive periods while the broker was up means the device is gone. It comes
//! back with its next message. A device that says `goodbye` is pinged at once and taken for gone
//! if it does not answer within [`GOODBYE_PROBE`]: one that shuts down cleanly leaves at once.
//!
//! Where the broker does tell (the hub's embedded one, [`Inbound::Closed`]), the link ends the
//! moment the device's connection closes or a new connection with its client id starts: a
//! restarted device is a new instance and gets a link and an onboarding of its own, and no
//! call waits on a device that is gone. An OTA check-in ([`Inbound::CheckedIn`]) marks the device
//! as possibly restarted: its next message onboards it again.

use std::time::Instant;

use rumqttc::AsyncClient;
use tokio::sync::watch;
use tracing::info;

use super::websocket::sleep_until;
use super::handle::{Command, Commands, DeviceEvent, DeviceHandle, InfoPublisher, Lifecycle, LinkEvent, LinkSetup, MalformedLog, Request, Waiting, deliver, end_callers, spawn_link};
use crate::session::{CallError, Output, Session};

/// Publishes at QoS 0 without waiting; `false` if the request queue is full or closed.
pub fn publish(client: &AsyncClient, topic: String, payload: impl Into<Vec<u8>>) -> bool {
    match client.try_publish(topic, rumqttc::QoS::AtMostOnce, false, payload) {
        Ok(()) => true,
        Err(e) => {
            // A broker that is gone or slow refuses every publish to every device: one key for
            // all of them keeps that to a few lines and a summary (it was a line per message).
            if crate::metrics::log_limit::allow(crate::metrics::log_limit::Kind::Device, "mqtt-publish-queue") {
                tracing::warn!("cannot queue an MQTT publish (the broker connection is down or its queue is full): {e}");
            }
            false
        }
    }
}

/// Keepalive periods without a word from the device (the broker being up) after which it is
/// taken for gone.
pub const SILENT_PERIODS: u32 = 3;

/// How long a device that said goodbye has to answer the `ping` sent at once, before it is taken
/// for gone (a device that stays, as stock firmware does after a voice session, answers it; one
/// that is shutting down, as `mcpdev sim` on Ctrl-C, does not).
pub const GOODBYE_PROBE: std::time::Duration = std::time::Duration::from_secs(3);

/// How long a device that just connected has to say hello before it is onboarded without one.
pub const BEGIN_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// What reaches a device's link besides commands.
#[derive(Debug)]
pub enum Inbound {
    /// A message the device published.
    Text(String),
    /// An audio datagram of this many bytes arrived on the UDP socket (counted, dropped).
    Audio(usize),
    /// Start onboarding without a hello (the device is reachable while idle).
    Begin,
    /// As `Begin`, after [`BEGIN_GRACE`] unless the device says hello first (it just connected).
    BeginSoon,
    /// The device checked in at the OTA endpoint (it booted): its next message onboards it again.
    CheckedIn,
    /// The broker saw the device's connection end, or a new one start: the link ends at once,
    /// for this reason.
    Closed(String),
}

/// Everything an MQTT link needs: what every link does (its `remote` shows the broker and the
/// device's client id), and the broker side.
pub struct MqttLinkSetup {
    pub link: LinkSetup,
    pub client: AsyncClient,
    /// The device's downlink topic.
    pub downlink: String,
    /// `true` while the broker connection is up.
    pub broker_up: watch::Receiver<bool>,
    /// The broker, for error messages (never with a password).
    pub broker: String,
    /// Largest message carried in either direction.
    pub max_payload: usize,
}

/// What a device's messages are sent to its link with.
pub type InboundSender = super::mailbox::Sender<Inbound>;
/// Where a device's link reads them.
pub type InboundReceiver = super::mailbox::Receiver<Inbound>;

/// The queue that carries a device's messages to its link (made first: the UDP route of the
/// server hello needs the sender before the link starts). A [`super::mailbox`], which holds no
/// buffer while empty: tokio's channel allocated a first block of 32 slots, about 1 KB for every
/// MQTT device, most of them idle.
pub fn inbound_channel() -> (InboundSender, InboundReceiver) {
    super::mailbox::channel(256)
}

/// Starts the link task; `on_end` runs in it once the link has ended (no task of its own waits
/// for that: one cost ~512 bytes per MQTT device, issue 46.3).
pub fn spawn(setup: MqttLinkSetup, inbound: InboundReceiver, on_end: impl FnOnce() + Send + 'static) -> DeviceHandle {
    let (device_id, generation) = (setup.link.identity.device_id.clone(), setup.link.generation);
    spawn_link(device_id, generation, move |commands, publisher| run(setup, commands, publisher, inbound), on_end)
}


/// What the link keeps of its setup while it runs: the broker side, without the session's
/// configuration (the session owns that) or anything only the start needs.
struct Broker {
    client: AsyncClient,
    downlink: String,
    up: watch::Receiver<bool>,
    name: String,
    max_payload: usize,
}

/// The link task: set up here, in plain code, so that the future holds only what it keeps using
/// (an `async fn` would keep its arguments, a copy of the session's configuration included, for
/// the device's lifetime), with one timer for all its deadlines, as [`super::websocket`] does.
fn run(setup: MqttLinkSetup, mut commands: Commands, mut publisher: InfoPublisher, mut inbound: InboundReceiver) -> impl Future<Output = ()> + Send + 'static {
    let MqttLinkSetup { link, client, downlink, broker_up, broker, max_payload } = setup;
    let LinkSetup { identity, session: session_config, events, tracing, remote, .. } = link;
    let mut broker = Broker { client, downlink, up: broker_up, name: broker, max_payload };
    let device_id = publisher.device_id().clone();
    let silence_limit = session_config.keepalive * SILENT_PERIODS;
    let client_id = identity.client_id.clone();
    let mut session = Session::new(identity, "mqtt", session_config, Instant::now());
    session.set_address(remote.clone());
    publisher.update(session.shared_info(), Instant::now());
    let connected = LinkEvent::Link(Lifecycle::Connected { transport: "mqtt", client_id: client_id.map(Into::into), remote: remote.map(Into::into) });
    crate::metrics::device_event(connected.name());
    let _ = events.send(std::sync::Arc::new(DeviceEvent { device_id: device_id.clone(), event: connected }));
    async move {
        let emit = |event: LinkEvent| {
            crate::metrics::device_event(event.name());
            let _ = events.send(std::sync::Arc::new(DeviceEvent { device_id: device_id.clone(), event }));
        };
        let mut malformed = MalformedLog::new(&device_id);
        let mut waiting = Waiting::new();
        let max = broker.max_payload;
        // The last word from the device, or the broker coming back (nothing can be heard before).
        let mut heard = Instant::now();
        // It said goodbye and has not been heard from since.
        let mut leaving = false;
        let reason = loop {
            session.trace = tracing.enabled();
            let deadline = session.next_deadline().map(tokio::time::Instant::from_std);
            let gone_at = tokio::time::Instant::from_std(heard + silence_limit);
            // One timer for every deadline: which one came is sorted out when it fires.
            let timer = [deadline, publisher.refresh_at(), Some(gone_at)].into_iter().flatten().min();
            let outputs = tokio::select! {
                msg = inbound.recv() => {
                    if let Some(Inbound::Text(_) | Inbound::Audio(_)) = msg {
                        heard = Instant::now();
                        leaving = false;
                    }
                    match msg {
                        Some(Inbound::Text(text)) if text.len() > max => session.on_oversize(&text, max),
                        Some(Inbound::Text(text)) => {
                            // Read per frame: a watcher that just subscribed sees the very next one.
                            session.trace = tracing.enabled();
                            let mut out = session.on_text(&text, Instant::now());
                            if session.take_goodbye() {
                                out.extend(session.probe(Instant::now()));
                                heard = Instant::now().checked_sub(silence_limit.saturating_sub(GOODBYE_PROBE)).unwrap_or(heard);
                                leaving = true;
                            }
                            out
                        }
                        Some(Inbound::Audio(n)) => { session.on_binary(n); Vec::new() }
                        Some(Inbound::Begin) => session.begin(Instant::now()),
                        Some(Inbound::BeginSoon) => { session.begin_at(Instant::now() + BEGIN_GRACE); continue; }
                        Some(Inbound::CheckedIn) => { session.may_have_restarted(); continue; }
                        Some(Inbound::Closed(why)) => break why,
                        None => break "the hub stopped serving this device".to_string(),
                    }
                }
                cmd = commands.recv() => match cmd.map(|c| *c) {
                    Some(Command::Request(request)) => {
                        let Request { ticket, method, params, timeout, reply } = request;
                        if !*broker.up.borrow() {
                            let _ = reply.send(Err(CallError::Link(format!("the MQTT broker {} is unreachable (reconnecting)", broker.name))));
                            continue;
                        }
                        waiting.insert(ticket, reply);
                        session.trace = tracing.enabled();
                        let mut out = session.request(ticket, &method, params, timeout, Instant::now());
                        let oversize = out.iter().find_map(|o| match o {
                            Output::Send(t) if t.len() > max => Some(t.len()),
                            _ => None,
                        });
                        if let Some(len) = oversize {
                            // Nothing was sent, so the device hears of no cancel either.
                            session.cancel(ticket, Instant::now());
                            out.retain(|o| !matches!(o, Output::Send(_)));
                            let why = format!("the request is {len} bytes, over the {max}-byte MQTT payload limit (--mqtt-max-payload); nothing was sent");
                            out.push(Output::Reply { ticket, outcome: Err(CallError::Link(why)) });
                        }
                        out
                    }
                    Some(Command::Cancel(ticket)) => { waiting.remove(&ticket); session.cancel(ticket, Instant::now()) }
                    Some(Command::Close(why)) => break why.says().to_string(),
                    None => break super::handle::HANDLES_DROPPED.to_string(),
                },
                changed = broker.up.changed() => {
                    if changed.is_err() {
                        break "the broker connection was shut down".to_string();
                    }
                    if *broker.up.borrow_and_update() {
                        heard = Instant::now();
                        continue;
                    }
                    session.fail_callers(CallError::Link(format!("the connection to the MQTT broker {} was lost before the device answered", broker.name)))
                }
                _ = sleep_until(timer) => {
                    let now = tokio::time::Instant::now();
                    if gone_at <= now {
                        if !*broker.up.borrow() {
                            heard = Instant::now();
                            continue;
                        }
                        if leaving {
                            break format!("the device said goodbye and did not answer a ping within {} s (it shut down)", GOODBYE_PROBE.as_secs());
                        }
                        break format!("nothing heard from the device for {} s (switched off or out of reach)", silence_limit.as_secs());
                    }
                    // Otherwise the session's deadline, or the counters' refresh (published below).
                    if deadline.is_some_and(|d| d <= now) { session.on_tick(Instant::now()) } else { Vec::new() }
                }
            };
            publisher.update(session.shared_info(), Instant::now());
            carry_out(outputs, &broker, &mut waiting, &mut malformed, &emit);
        };
        end_callers(session.on_disconnect(), &mut waiting);
        if crate::metrics::log_limit::allow(crate::metrics::log_limit::Kind::Disconnect, &device_id) {
            info!(device = %device_id, %reason, "MQTT device link ended");
        }
        publisher.gone();
        emit(LinkEvent::Link(Lifecycle::Disconnected { reason }));
    }
}

fn carry_out(outputs: Vec<Output>, broker: &Broker, waiting: &mut Waiting, malformed: &mut MalformedLog<'_>, emit: &impl Fn(LinkEvent)) {
    for o in outputs {
        // While the broker is down there is nowhere to send; keepalives and onboarding requests
        // then time out like unanswered ones.
        if let Some(text) = deliver(o, waiting, malformed, emit)
            && *broker.up.borrow()
        {
            publish(&broker.client, broker.downlink.clone(), text);
        }
    }
}
