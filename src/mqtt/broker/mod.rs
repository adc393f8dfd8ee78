//! The embedded broker (`serve --mqtt embedded`): a small MQTT 3.1.1 broker in the hub's process,
//! so MQTT devices work with nothing else installed.
//!
//! It does what mcpdev's topic scheme needs and no more: QoS 0 delivery (QoS 1 and 2 publishes
//! are acknowledged, then delivered at QoS 0), `+`/`#` filters, retained messages, last wills,
//! shared subscriptions (`$share/<group>/<filter>`, round robin), client-id takeover, keepalive —
//! and the one thing general brokers need configuring for stock xiaozhi firmware, which never
//! sends SUBSCRIBE: every client is subscribed to `mcpdev/down/<its client id>` on connect (what
//! EMQX's `auto_subscribe` does with `mcpdev/down/${clientid}`).
//!
//! Hostile clients: topic names and filters are checked by MQTT 3.1.1 §4.7 ([`topic`]); a
//! PUBLISH to an invalid topic closes the connection, an invalid filter gets SUBACK failure
//! (0x80). Each client has a [`Role`] from the authentication hook ([`acl`]): a device may only
//! publish to its uplink and subscribe to its downlink. What a client can make the broker hold
//! is bounded ([`Limits`]); a client that does not read is disconnected, never waited for.
//! The routing [`state`] is I/O-free and cannot panic, so its lock is never poisoned; each
//! connection task catches its own failure, and the accept loop is supervised
//! ([`RunningBroker::stopped`]).
//!
//! The owner hears when a device's connection starts and ends ([`ClientEvent`], through
//! [`BrokerConfig::events`]): the event is queued before the CONNACK is, so it comes before
//! anything the connection publishes; a full queue drops the event, and that is logged.
//!
//! With [`BrokerConfig::tls`], the broker also listens for MQTT over TLS (`mqtts`, 8883 by
//! default): the handshake must finish within its deadline, and the 10 s for CONNECT start after
//! it, so a client that stalls either step is dropped.
//!
//! Packets are read and written with rumqttc's codec.

pub mod acl;
mod fuzz;
pub(crate) mod gate;
pub mod state;
pub mod topic;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::BytesMut;
use futures_util::FutureExt;
use rumqttc::mqttbytes::v4::{ConnAck, ConnectReturnCode, Packet};
use rumqttc::mqttbytes::{self};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{debug, error, info};

pub use acl::{Authenticate, Login, Refusal, Role};
#[doc(hidden)]
pub use fuzz::fuzz_packets;
use gate::warn_limited;
pub use state::Limits;
use state::{Next, State};

/// How the embedded broker runs.
#[derive(Clone)]
pub struct BrokerConfig {
    pub addr: SocketAddr,
    /// Decides at CONNECT who a client is (see [`acl::token_auth`] for the hub's default).
    pub authenticate: Authenticate,
    /// The largest packet accepted or sent.
    pub max_packet: usize,
    pub limits: Limits,
    /// Where device clients' connections starting and ending are told (`None`: nowhere).
    pub events: Option<mpsc::Sender<ClientEvent>>,
    /// A second listener for MQTT over TLS.
    pub tls: Option<BrokerTls>,
}

/// The embedded broker's TLS listener.
#[derive(Clone)]
pub struct BrokerTls {
    pub addr: SocketAddr,
    pub config: Arc<rustls::ServerConfig>,
    /// The handshake must be complete this long after the connection was accepted.
    pub deadline: Duration,
}

/// A device client's connection (a [`Role::Device`]) started or ended. `conn` tells one
/// connection of a client id from the next: a connection taken over ends after the new one
/// started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientEvent {
    Connected { client_id: String, conn: u64 },
    Closed { client_id: String, conn: u64 },
}

/// Queues an event without waiting; a full queue loses it, logged.
fn tell(events: Option<&mpsc::Sender<ClientEvent>>, event: ClientEvent) {
    if let Some(tx) = events
        && tx.try_send(event).is_err()
        && !tx.is_closed()
    {
        warn_limited!("embedded broker: the hub is behind on connection events; one was dropped");
    }
}

impl std::fmt::Debug for BrokerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerConfig").field("addr", &self.addr).field("max_packet", &self.max_packet).field("limits", &self.limits).finish_non_exhaustive()
    }
}

/// A started broker; it serves until the process ends.
pub struct RunningBroker {
    pub addr: SocketAddr,
    /// The TLS listener's bound address, when it has one.
    pub tls_addr: Option<SocketAddr>,
    /// `None` while the accept loop serves; `Some(why)` once it ended (already logged as an error).
    pub stopped: watch::Receiver<Option<String>>,
    /// Reaches the broker's clients from outside (a revocation).
    pub clients: Clients,
}

/// The embedded broker's clients, for the hub.
#[derive(Clone)]
pub struct Clients(Shared);

impl Clients {
    /// Disconnects `device_id`'s clients at once; see [`State::kick_device`].
    pub fn kick_device(&self, device_id: &str) -> usize {
        lock(&self.0).kick_device(device_id)
    }

    /// Waits, at most `limit`, until `client_id` (the hub's own client, which has just sent its
    /// goodbyes and DISCONNECT) is gone and every queued packet is taken by its client's writer
    /// ([`State::flushed_after`]); whether that happened. The process may end right after: what
    /// the hub said last is on its way to the devices, not lost in a queue.
    pub async fn flushed_after(&self, client_id: &str, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        while !lock(&self.0).flushed_after(client_id) {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        true
    }
}

type Shared = Arc<Mutex<State>>;

/// The state, even after a panic elsewhere poisoned the mutex: nothing in [`State`] panics, and
/// a half-done update is better than a broker that refuses everyone for good.
fn lock(state: &Shared) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

/// Binds the listener and serves in the background.
pub async fn start(cfg: BrokerConfig) -> std::io::Result<RunningBroker> {
    let listener = TcpListener::bind(cfg.addr).await?;
    let addr = listener.local_addr()?;
    let tls_listener = match &cfg.tls {
        Some(t) => Some((TcpListener::bind(t.addr).await?, t.config.clone(), t.deadline)),
        None => None,
    };
    let tls_addr = tls_listener.as_ref().map(|(l, ..)| l.local_addr()).transpose()?;
    let state: Shared = Arc::new(Mutex::new(State::new(cfg.limits.clone())));
    let cfg = Arc::new(cfg);
    let clients = Clients(state.clone());
    let accept = tokio::spawn(accept_loop(listener, None, state.clone(), cfg.clone()));
    if let Some((listener, acceptor, deadline)) = tls_listener {
        let tls_accept = tokio::spawn(accept_loop(listener, Some((acceptor, deadline)), state.clone(), cfg.clone()));
        tokio::spawn(async move {
            if let Err(e) = tls_accept.await {
                error!("embedded MQTT broker: its TLS listener stopped: {e}; mqtts clients cannot connect until the hub restarts");
            }
        });
    }
    let (stopped_tx, stopped) = watch::channel(None);
    tokio::spawn(async move {
        let why = match accept.await {
            Ok(()) => "its accept loop ended".to_string(),
            Err(e) if e.is_panic() => format!("its accept loop panicked: {}", panic_text(&e.into_panic())),
            Err(e) => format!("its accept loop was cancelled: {e}"),
        };
        error!(%addr, "embedded MQTT broker stopped: {why}; MQTT devices cannot connect until the hub restarts");
        stopped_tx.send_replace(Some(why));
    });
    info!(%addr, tls = ?tls_addr, "embedded MQTT broker listening");
    Ok(RunningBroker { addr, tls_addr, stopped, clients })
}

/// Accepts clients (over TLS when `tls` is given, each handshake within its deadline).
async fn accept_loop(listener: TcpListener, tls: Option<(Arc<rustls::ServerConfig>, Duration)>, state: Shared, cfg: Arc<BrokerConfig>) {
    loop {
        match listener.accept().await {
            Ok((stream, remote)) => {
                let _ = stream.set_nodelay(true);
                let (state, cfg, tls) = (state.clone(), cfg.clone(), tls.clone());
                let connection = async move {
                    match tls {
                        None => serve(state, cfg, stream, remote).await,
                        Some((config, deadline)) => match crate::tls::server::accept(&config, stream, deadline).await {
                            Ok(tls) => serve(state, cfg, tls, remote).await,
                            Err(e) => {
                                crate::metrics::refused(crate::metrics::Refused::TlsHandshake);
                                warn_limited!(%remote, "embedded broker: {e}");
                            }
                        },
                    }
                };
                let serving = std::panic::AssertUnwindSafe(connection).catch_unwind();
                tokio::spawn(async move {
                    if let Err(panic) = serving.await {
                        error!(%remote, panic = %panic_text(&panic), "embedded broker: a connection task failed; that client is disconnected");
                    }
                });
            }
            Err(e) => {
                warn_limited!("embedded broker: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_else(|| "(no message)".into())
}

/// Reads one packet, reading more bytes as needed.
async fn read_packet(rd: &mut (impl AsyncReadExt + Unpin), buf: &mut BytesMut, max: usize) -> Result<Packet, String> {
    loop {
        match Packet::read(buf, max) {
            Ok(p) => return Ok(p),
            Err(mqttbytes::Error::InsufficientBytes(n)) => {
                buf.reserve(n.clamp(1, max.saturating_add(8)).max(1024));
                match rd.read_buf(buf).await {
                    Ok(0) => return Err("connection closed".into()),
                    Ok(_) => {}
                    Err(e) => return Err(e.to_string()),
                }
            }
            Err(e) => return Err(format!("malformed packet: {e:?}")),
        }
    }
}

async fn refuse(wr: &mut (impl AsyncWriteExt + Unpin), code: ConnectReturnCode) {
    let mut out = BytesMut::new();
    if ConnAck::new(code, false).write(&mut out).is_ok() {
        let _ = tokio::time::timeout(Duration::from_secs(5), wr.write_all(&out)).await;
    }
}

/// Removes the client from the state if its task ends without [`Registered::end`] (a panic),
/// and tells a device's end either way.
struct Registered {
    state: Shared,
    client_id: String,
    conn: u64,
    ended: bool,
    /// Set for a device client.
    events: Option<mpsc::Sender<ClientEvent>>,
}

impl Registered {
    fn end(mut self, goodbye: bool) {
        self.ended = true;
        lock(&self.state).end(&self.client_id, self.conn, goodbye);
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        if !self.ended {
            lock(&self.state).end(&self.client_id, self.conn, true);
        }
        tell(self.events.as_ref(), ClientEvent::Closed { client_id: std::mem::take(&mut self.client_id), conn: self.conn });
    }
}

/// How long one write to a client may take before it counts as not reading.
const WRITE_DEADLINE: Duration = Duration::from_secs(30);

async fn serve<IO>(state: Shared, cfg: Arc<BrokerConfig>, stream: IO, remote: SocketAddr)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + 'static,
{
    let (mut rd, mut wr) = tokio::io::split(stream);
    let mut buf = BytesMut::with_capacity(4096);
    let connect = match tokio::time::timeout(Duration::from_secs(10), read_packet(&mut rd, &mut buf, cfg.max_packet)).await {
        Ok(Ok(Packet::Connect(c))) => c,
        Ok(Ok(_)) => return warn_limited!(%remote, "embedded broker: the first packet was not CONNECT; closing"),
        Ok(Err(why)) => return debug!(%remote, %why, "embedded broker: no CONNECT"),
        Err(_) => return debug!(%remote, "embedded broker: no CONNECT within 10 s"),
    };
    if connect.protocol != mqttbytes::Protocol::V4 {
        return refuse(&mut wr, ConnectReturnCode::RefusedProtocolVersion).await;
    }
    let login = Login::of(&connect);
    let role = match (cfg.authenticate)(&login) {
        Ok(role) => role,
        Err(refusal) => {
            warn_limited!(%remote, client = %state::short(&login.client_id), why = %refusal, "embedded broker: refused a client");
            return refuse(&mut wr, refusal.code()).await;
        }
    };
    if let Role::Device { client_id } = &role
        && *client_id != connect.client_id
    {
        warn_limited!(%remote, client = %state::short(&login.client_id), "embedded broker: refused a device whose client id is not the one it was admitted as");
        return refuse(&mut wr, ConnectReturnCode::BadClientId).await;
    }
    let client_id = if connect.client_id.is_empty() { format!("anon-{}", uuid::Uuid::new_v4().simple()) } else { connect.client_id.clone() };
    let (tx, mut rx) = mpsc::channel::<Packet>(cfg.limits.queue_for(&role));
    let (kick_tx, mut kick_rx) = oneshot::channel();
    let device = matches!(role, Role::Device { .. });
    let connected = lock(&state).connect(&client_id, &connect, role, tx, kick_tx);
    let conn = match connected {
        Ok(conn) => conn,
        Err((code, why)) => {
            warn_limited!(%remote, client = %state::short(&client_id), %why, "embedded broker: refused a client");
            return refuse(&mut wr, code).await;
        }
    };
    // Told before the writer starts, so before the client has its CONNACK.
    let events = cfg.events.clone().filter(|_| device);
    tell(events.as_ref(), ClientEvent::Connected { client_id: client_id.clone(), conn });
    let registered = Registered { state: state.clone(), client_id: client_id.clone(), conn, ended: false, events };
    debug!(%remote, client = %client_id, "embedded broker: client connected");
    let max = cfg.max_packet;
    let mut writer = tokio::spawn(async move {
        let mut out = BytesMut::with_capacity(4096);
        while let Some(p) = rx.recv().await {
            out.clear();
            if p.write(&mut out, max).is_err() {
                continue;
            }
            match tokio::time::timeout(WRITE_DEADLINE, wr.write_all(&out)).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => break,
                Err(_) => return Err("a write took longer than 30 s (it does not read)"),
            }
        }
        let _ = tokio::time::timeout(Duration::from_secs(1), wr.shutdown()).await;
        Ok(())
    });
    // A client silent for 1.5 keepalives is gone (MQTT 3.1.1 §3.1.2.10).
    let idle = match connect.keep_alive {
        0 => Duration::from_secs(24 * 3600),
        k => Duration::from_millis(u64::from(k) * 1500),
    };
    let mut goodbye = false;
    let mut writer_done = false;
    loop {
        let packet = tokio::select! {
            r = tokio::time::timeout(idle, read_packet(&mut rd, &mut buf, cfg.max_packet)) => match r {
                Ok(Ok(p)) => p,
                Ok(Err(why)) => { debug!(client = %client_id, %why, "embedded broker: connection ends"); break; }
                Err(_) => { debug!(client = %client_id, "embedded broker: keepalive expired"); break; }
            },
            _ = &mut kick_rx => { goodbye = true; break; }
            w = &mut writer => {
                writer_done = true;
                if let Ok(Err(why)) = w {
                    warn_limited!(client = %client_id, why, "embedded broker: disconnecting a client");
                }
                break;
            }
        };
        let next = lock(&state).handle(&client_id, conn, packet);
        match next {
            Next::Continue => {}
            Next::Goodbye => {
                goodbye = true;
                break;
            }
            Next::Close(why) => {
                warn_limited!(%remote, client = %client_id, why, "embedded broker: closing a client's connection");
                break;
            }
        }
    }
    registered.end(goodbye);
    // The state held the last sender: the writer drains what is queued, within its deadline.
    if !writer_done && tokio::time::timeout(WRITE_DEADLINE, &mut writer).await.is_err() {
        writer.abort();
    }
    debug!(client = %client_id, "embedded broker: client gone");
}

#[cfg(test)]
mod tests;
