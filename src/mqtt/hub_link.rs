//! The hubs' direct link: the cluster's requests and their answers ([`super::cluster_rpc`]) over
//! one TLS connection from the asking hub to the serving one, instead of through the broker.
//! A forwarded call then crosses one process fewer each way (no broker between the hubs).
//!
//! Rules it enforces:
//! - **Opt-in, and nothing new to trust.** A hub listens only where it is told
//!   (`serve --cluster-link ADDR`), and advertises that address and its link certificate's
//!   SHA-256 in its presence record, MAC'd with a key from the shared hub secret
//!   ([`Purpose::ClusterLink`]). An advertisement that does not verify is ignored and logged; the
//!   broker carries that hub's requests as before.
//! - **Both ends are proven.** The asking hub pins the certificate the (MAC'd) advertisement
//!   names; the serving hub accepts a connection only after its first frame proves the hub
//!   secret bound to this TLS session: `HMAC("hello\n<from>\n<to>\n<keying material>")`, the
//!   keying material exported from the session (RFC 8446 §7.5), so a proof cannot be replayed on
//!   another connection. The certificate's key is made at start and lives only in memory.
//! - **Deadlines and caps per peer.** A connection proves itself within [`PROVE_WITHIN`] or is
//!   closed; at most [`MAX_UNPROVEN_PER_ADDR`] unproven connections per address and
//!   [`MAX_CONNECTIONS`] in all; a frame is at most [`MAX_FRAME`] bytes (a request at most the
//!   broker path's own cap, checked by the same code). Every refusal is logged (per address,
//!   [`log_limit`]) and counted (`mcpdev_refusals_total{reason="cluster_link"}`).
//! - **Nothing is lost to the link.** A request that cannot go on it (none up yet, its queue
//!   full, the connection just dropped) goes through the broker; an answer whose link is gone
//!   goes back through the broker. The frames are the broker path's own sealed messages, opened
//!   and checked by the same code, so the link adds a path, never a second set of rules.
//! - Layering: this module knows frames, TLS and proofs; what a frame means is
//!   [`super::cluster_rpc`]'s, reached through [`Serve`] and the answer callback (no cycle).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use crate::hub::secret::{HubSecret, Purpose};
use crate::metrics::{self, Refused, log_limit};
use crate::paths::hex;

/// How long a connection has to finish TLS and prove the hub secret.
pub const PROVE_WITHIN: Duration = Duration::from_secs(5);
/// Unproven connections at once from one address.
pub const MAX_UNPROVEN_PER_ADDR: usize = 8;
/// Link connections served at once, proven or not.
pub const MAX_CONNECTIONS: usize = crate::hub::conn_cap::LINK_CONNECTIONS;
/// Largest frame either way (an answer may be larger than a request).
pub const MAX_FRAME: usize = 8 << 20;
/// Largest first frame (the proof).
const MAX_HELLO: usize = 1024;
/// Frames queued for one link; beyond, a message goes through the broker.
const QUEUE: usize = 1024;
/// ALPN of the link: nothing else speaks it.
const ALPN: &[u8] = b"mcpdev-hub-link/1";
/// The TLS exporter's label (RFC 8446 §7.5).
const EXPORTER_LABEL: &[u8] = b"EXPORTER-mcpdev-hub-link";
/// How long to connect to a peer's link before giving up (the broker carries meanwhile).
const CONNECT_WITHIN: Duration = Duration::from_secs(3);
/// Longest wait before connecting again to a peer whose link failed.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Where a hub's link is reached, and the SHA-256 of its certificate (64 hex digits).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Advert {
    pub addr: SocketAddr,
    pub fingerprint: String,
}

impl Advert {
    fn signed_text(hub: &str, addr: &SocketAddr, fingerprint: &str) -> String {
        format!("advert\n{hub}\n{addr}\n{fingerprint}")
    }

    /// The `link` field of `hub`'s presence record.
    pub fn to_json(&self, hub: &str, secret: &HubSecret) -> Value {
        let mac = secret.mac(Purpose::ClusterLink, Self::signed_text(hub, &self.addr, &self.fingerprint).as_bytes());
        json!({"addr": self.addr.to_string(), "fp": self.fingerprint, "mac": mac})
    }

    /// `hub`'s advertisement from its presence record's `link` field, if its MAC verifies.
    pub fn open(hub: &str, link: &Value, secret: &HubSecret) -> Result<Self, &'static str> {
        let (Some(addr), Some(fp), Some(mac)) = (link["addr"].as_str(), link["fp"].as_str(), link["mac"].as_str()) else {
            return Err("it lacks an address, a fingerprint or a MAC");
        };
        let addr: SocketAddr = addr.parse().map_err(|_| "its address is not IP:port")?;
        if fp.len() != 64 || !fp.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err("its fingerprint is not 64 hex digits");
        }
        if !secret.verify_mac(Purpose::ClusterLink, Self::signed_text(hub, &addr, fp).as_bytes(), mac) {
            return Err("its MAC does not verify (not made by a hub with this hub secret)");
        }
        Ok(Self { addr, fingerprint: fp.to_ascii_lowercase() })
    }
}

/// What an asking hub's first frame proves: the hub secret, bound to both hubs and to this TLS
/// session (its exported keying material).
fn hello_text(from: &str, to: &str, keying: &[u8; 32]) -> String {
    format!("hello\n{from}\n{to}\n{}", hex(keying))
}

/// 32 bytes of keying material exported from a finished TLS session.
fn export<C, D>(conn: &C) -> Option<[u8; 32]>
where
    C: std::ops::Deref<Target = rustls::ConnectionCommon<D>>,
{
    conn.export_keying_material([0u8; 32], EXPORTER_LABEL, Some(b"")).ok()
}

/// Reads one length-prefixed frame into `buf`; `Ok(false)` at a clean end before one.
async fn read_frame<R: AsyncRead + Unpin>(r: &mut R, max: usize, buf: &mut Vec<u8>) -> std::io::Result<bool> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(false),
        Err(e) => return Err(e),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > max {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, format!("a frame of {len} bytes, over {max}")));
    }
    buf.clear();
    buf.resize(len, 0);
    r.read_exact(buf).await?;
    Ok(true)
}

/// Writes every frame queued on `rx`, batching what is already there, until the queue closes.
async fn write_frames<W: AsyncWrite + Unpin>(w: &mut W, rx: &mut mpsc::Receiver<String>) -> std::io::Result<()> {
    let mut out = Vec::with_capacity(4096);
    while let Some(first) = rx.recv().await {
        let mut next = Some(first);
        while let Some(text) = next {
            out.extend_from_slice(&(text.len() as u32).to_be_bytes());
            out.extend_from_slice(text.as_bytes());
            next = if out.len() < 64 * 1024 { rx.try_recv().ok() } else { None };
        }
        w.write_all(&out).await?;
        w.flush().await?;
        out.clear();
        if out.capacity() > 1 << 20 {
            out.shrink_to(4096);
        }
    }
    Ok(())
}

/// Where a served request's answers go: back on its link while it is up, else `None` (the caller
/// sends them through the broker).
#[derive(Clone)]
pub struct LinkReply(mpsc::Sender<String>);

impl LinkReply {
    /// Queues `text`, or gives it back when the link is gone or its queue is full.
    pub fn try_send(&self, text: String) -> Result<(), String> {
        self.0.try_send(text).map_err(|e| match e {
            mpsc::error::TrySendError::Full(t) | mpsc::error::TrySendError::Closed(t) => t,
        })
    }

    /// Queues `text`, waiting for room; gives it back when the link is gone.
    pub async fn send(&self, text: String) -> Result<(), String> {
        self.0.send(text).await.map_err(|e| e.0)
    }
}

/// What serves the requests that come in on a link (the cluster's request handler, which takes
/// a request only from a live hub of the cluster, as it does through the broker).
pub trait Serve: Send + Sync + 'static {
    /// A sealed request from `peer` (proven); its answers go to `reply`.
    fn request(&self, peer: &str, payload: &[u8], reply: LinkReply);
}

/// A certificate resolver with one certificate.
#[derive(Debug)]
struct One(Arc<CertifiedKey>);

impl ResolvesServerCert for One {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

/// This hub's link listener, bound before the hub joins the cluster.
pub struct Listener {
    socket: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    advert: Advert,
}

impl Listener {
    /// Binds `addr` (the address other hubs reach this one at: not a wildcard, which other hubs
    /// could not connect to) with a certificate made now.
    pub async fn bind(addr: SocketAddr) -> anyhow::Result<Self> {
        if addr.ip().is_unspecified() {
            anyhow::bail!("--cluster-link {addr}: give the address other hubs reach this one at (it is advertised to them), not a wildcard");
        }
        let key = rcgen::KeyPair::generate().map_err(|e| anyhow::anyhow!("cannot make the link's key: {e}"))?;
        let cert = rcgen::CertificateParams::new(vec!["mcpdev-hub-link".to_string()])
            .and_then(|p| p.self_signed(&key))
            .map_err(|e| anyhow::anyhow!("cannot make the link's certificate: {e}"))?;
        let fingerprint = hex(ring::digest::digest(&ring::digest::SHA256, cert.der()).as_ref());
        let pair = crate::tls::server::pair_from_pem(cert.pem().as_bytes(), key.serialize_pem().as_bytes()).map_err(|e| anyhow::anyhow!("the link's certificate: {e}"))?;
        let mut tls = rustls::ServerConfig::builder_with_provider(crate::tls::provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| anyhow::anyhow!("TLS set-up: {e}"))?
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(One(pair)));
        tls.alpn_protocols = vec![ALPN.to_vec()];
        let socket = TcpListener::bind(addr).await.map_err(|e| anyhow::anyhow!("cannot bind the cluster link {addr}: {e}"))?;
        let addr = socket.local_addr()?;
        Ok(Self { socket, tls: Arc::new(tls), advert: Advert { addr, fingerprint } })
    }

    pub fn advert(&self) -> &Advert {
        &self.advert
    }

    /// Serves the link until the process ends: each proven connection's frames go to `serve`.
    pub fn spawn(self, me: String, secret: Arc<HubSecret>, serve: std::sync::Weak<dyn Serve>) {
        let acceptor = tokio_rustls::TlsAcceptor::from(self.tls);
        let counts: Arc<Mutex<Counts>> = Arc::default();
        info!(addr = %self.advert.addr, "cluster link: listening for the other hubs");
        tokio::spawn(async move {
            loop {
                let (tcp, peer) = match self.socket.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        warn!("cluster link: accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let Some(slot) = Slot::take(&counts, peer.ip()) else {
                    refuse(peer.ip(), "too many connections at once (from this address, or in all)");
                    continue;
                };
                let (acceptor, me, secret, serve) = (acceptor.clone(), me.clone(), secret.clone(), serve.clone());
                tokio::spawn(async move { serve_connection(tcp, peer, slot, acceptor, me, secret, serve).await });
            }
        });
    }
}

/// Counts a refused connection and logs it: at most [`log_limit::PER_WINDOW`] lines a window
/// per address and as many for every address together, so a flood from many addresses writes a
/// bounded number of lines (the rest are summed up, and counted in
/// `mcpdev_log_lines_suppressed_total`). Whether a line was written.
fn refuse(ip: IpAddr, why: &str) -> bool {
    metrics::refused(Refused::ClusterLink);
    let logged = log_limit::allow(log_limit::Kind::Refusal, "cluster link (every address)") && log_limit::allow(log_limit::Kind::Refusal, &ip.to_string());
    if logged {
        warn!(remote = %ip, "cluster link: connection refused: {why}");
    }
    logged
}

#[derive(Default)]
struct Counts {
    all: usize,
    unproven: HashMap<IpAddr, usize>,
}

/// One connection's place under the caps: unproven until [`Slot::proven`], released on drop.
struct Slot {
    counts: Arc<Mutex<Counts>>,
    ip: IpAddr,
    unproven: bool,
}

impl Slot {
    fn take(counts: &Arc<Mutex<Counts>>, ip: IpAddr) -> Option<Self> {
        let mut c = lock(counts);
        let n = c.unproven.get(&ip).copied().unwrap_or(0);
        if c.all >= MAX_CONNECTIONS || n >= MAX_UNPROVEN_PER_ADDR {
            return None;
        }
        c.all += 1;
        c.unproven.insert(ip, n + 1);
        Some(Self { counts: counts.clone(), ip, unproven: true })
    }

    fn proven(&mut self) {
        if std::mem::take(&mut self.unproven) {
            let mut c = lock(&self.counts);
            crate::hub::count_table::count_down(&mut c.unproven, &self.ip);
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.proven();
        lock(&self.counts).all -= 1;
    }
}

async fn serve_connection(
    tcp: TcpStream,
    peer: SocketAddr,
    mut slot: Slot,
    acceptor: tokio_rustls::TlsAcceptor,
    me: String,
    secret: Arc<HubSecret>,
    serve: std::sync::Weak<dyn Serve>,
) {
    let _ = tcp.set_nodelay(true);
    // TLS and the proof, within one deadline.
    let proven = tokio::time::timeout(PROVE_WITHIN, async {
        let mut tls = acceptor.accept(tcp).await.map_err(|e| format!("TLS handshake failed: {e}"))?;
        let keying = export(tls.get_ref().1).ok_or("no keying material could be exported")?;
        let mut hello = Vec::new();
        if !read_frame(&mut tls, MAX_HELLO, &mut hello).await.map_err(|e| format!("no proof: {e}"))? {
            return Err("closed before proving the hub secret".to_string());
        }
        let hello: Value = serde_json::from_slice(&hello).map_err(|_| "an unreadable proof".to_string())?;
        let (Some(from), Some(mac)) = (hello["from"].as_str(), hello["proof"].as_str()) else {
            return Err("a proof without its hub or MAC".to_string());
        };
        if !secret.verify_mac(Purpose::ClusterLink, hello_text(from, &me, &keying).as_bytes(), mac) {
            return Err("a proof that does not verify (not a hub with this hub secret, or a proof made for another connection)".to_string());
        }
        // Not "a live hub": a hub may connect before this one has seen its presence. Each
        // request is checked for that, on the link as through the broker.
        if from == me || !super::topics::valid_key(from) {
            return Err(format!("a proof naming {:?}, which is not a hub id", from.chars().take(64).collect::<String>()));
        }
        Ok::<_, String>((tls, from.to_string()))
    })
    .await;
    let (tls, from) = match proven {
        Ok(Ok(p)) => p,
        Ok(Err(why)) => {
            refuse(peer.ip(), &why);
            return;
        }
        Err(_) => {
            refuse(peer.ip(), &format!("it did not prove the hub secret within {PROVE_WITHIN:?}"));
            return;
        }
    };
    slot.proven();
    debug!(hub = %from, remote = %peer, "cluster link: a hub connected");
    let (mut rd, mut wr) = tokio::io::split(tls);
    let (tx, mut rx) = mpsc::channel::<String>(QUEUE);
    let writer = tokio::spawn(async move { write_frames(&mut wr, &mut rx).await });
    let reply = LinkReply(tx);
    let mut buf = Vec::new();
    let end = loop {
        match read_frame(&mut rd, MAX_FRAME, &mut buf).await {
            Ok(true) => match serve.upgrade() {
                Some(s) => s.request(&from, &buf, reply.clone()),
                None => break None,
            },
            Ok(false) => break None,
            Err(e) => break Some(e),
        }
    };
    if let Some(e) = end {
        warn!(hub = %from, remote = %peer, "cluster link: the connection from hub {from} ended: {e}");
    }
    // Answers still under way go through the broker once the writer's queue is gone.
    drop(reply);
    writer.abort();
}

/// Where an answer that comes on a link goes.
pub type OnAnswer = Arc<dyn Fn(&[u8]) + Send + Sync>;

/// This hub's links to the others, and where each other hub offers one.
pub struct Links {
    me: String,
    secret: Arc<HubSecret>,
    peers: Mutex<HashMap<String, Peer>>,
    /// Where an answer that comes on a link goes (the cluster's answer handler).
    on_answer: OnAnswer,
    /// The last [`Peer::generation`] given out.
    generations: std::sync::atomic::AtomicU64,
}

struct Peer {
    advert: Advert,
    /// The link's queue, while it is up.
    tx: Option<mpsc::Sender<String>>,
    connecting: bool,
    /// Failures in a row, and when the next attempt may start.
    failures: u32,
    next_try: Instant,
    /// Unique per advertisement taken (never reused, even after the hub went and came back), so a
    /// connection made for an older one never takes the place of the new one's.
    generation: u64,
}

impl Links {
    pub fn new(me: &str, secret: Arc<HubSecret>, on_answer: OnAnswer) -> Arc<Self> {
        Arc::new(Self { me: me.to_string(), secret, peers: Mutex::default(), on_answer, generations: Default::default() })
    }

    /// `hub`'s presence record: its advertisement (`None`: it offers no link, or it went away).
    /// A new or changed advertisement is connected to at once.
    pub fn advertised(self: &Arc<Self>, hub: &str, advert: Option<Advert>) {
        let mut peers = lock(&self.peers);
        match advert {
            None => {
                peers.remove(hub);
            }
            Some(a) => {
                let same = peers.get(hub).is_some_and(|p| p.advert == a);
                if !same {
                    let generation = self.generations.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                    peers.insert(hub.to_string(), Peer { advert: a, tx: None, connecting: false, failures: 0, next_try: Instant::now(), generation });
                    self.connect(&mut peers, hub);
                }
            }
        }
    }

    /// Sends `text` (a sealed request) to `hub` on its link; gives it back when there is none up
    /// (one is being made if the hub offers one), or its queue is full.
    pub fn send(self: &Arc<Self>, hub: &str, text: String) -> Result<(), String> {
        let mut peers = lock(&self.peers);
        let Some(peer) = peers.get_mut(hub) else { return Err(text) };
        if let Some(tx) = &peer.tx {
            return match tx.try_send(text) {
                Ok(()) => Ok(()),
                Err(mpsc::error::TrySendError::Full(t)) => Err(t),
                Err(mpsc::error::TrySendError::Closed(t)) => {
                    peer.tx = None;
                    self.connect(&mut peers, hub);
                    Err(t)
                }
            };
        }
        self.connect(&mut peers, hub);
        Err(text)
    }

    /// Starts connecting to `hub` unless a connection is up or under way, or it failed lately.
    fn connect(self: &Arc<Self>, peers: &mut HashMap<String, Peer>, hub: &str) {
        let Some(peer) = peers.get_mut(hub) else { return };
        if peer.tx.is_some() || peer.connecting || Instant::now() < peer.next_try {
            return;
        }
        peer.connecting = true;
        let (links, hub, advert, generation) = (Arc::downgrade(self), hub.to_string(), peer.advert.clone(), peer.generation);
        let (me, secret, on_answer) = (self.me.clone(), self.secret.clone(), self.on_answer.clone());
        tokio::spawn(async move {
            let made = tokio::time::timeout(CONNECT_WITHIN, open(&me, &hub, &advert, &secret)).await.unwrap_or_else(|_| Err(format!("no connection within {CONNECT_WITHIN:?}")));
            let Some(links) = links.upgrade() else { return };
            let stream = {
                let mut peers = lock(&links.peers);
                let Some(peer) = peers.get_mut(&hub).filter(|p| p.generation == generation) else { return };
                peer.connecting = false;
                match made {
                    Ok(stream) => {
                        peer.failures = 0;
                        let (tx, rx) = mpsc::channel(QUEUE);
                        peer.tx = Some(tx);
                        Some((stream, rx))
                    }
                    Err(why) => {
                        peer.failures = peer.failures.saturating_add(1);
                        let backoff = Duration::from_secs(1u64 << peer.failures.min(5)).min(MAX_BACKOFF);
                        peer.next_try = Instant::now() + backoff;
                        warn!(hub = %hub, addr = %advert.addr, "cluster link: cannot reach hub {hub}'s link ({why}); its requests go through the broker, next try in {backoff:?}");
                        None
                    }
                }
            };
            let Some((stream, mut rx)) = stream else { return };
            debug!(hub = %hub, "cluster link: connected");
            let (mut rd, mut wr) = tokio::io::split(stream);
            let mut writer = tokio::spawn(async move { write_frames(&mut wr, &mut rx).await });
            let mut buf = Vec::new();
            let answers = async {
                loop {
                    match read_frame(&mut rd, MAX_FRAME, &mut buf).await {
                        Ok(true) => on_answer(&buf),
                        Ok(false) => return "the other hub closed it".to_string(),
                        Err(e) => return e.to_string(),
                    }
                }
            };
            // The connection ends with either half: the other hub closed it, or this hub let go
            // of it (the hub went away, or advertised another link), which closes its queue.
            let end = tokio::select! {
                end = answers => end,
                w = &mut writer => match w {
                    Ok(Ok(())) => "this hub let go of it".to_string(),
                    Ok(Err(e)) => e.to_string(),
                    Err(e) => e.to_string(),
                },
            };
            writer.abort();
            if let Some(peer) = lock(&links.peers).get_mut(&hub).filter(|p| p.generation == generation) {
                peer.tx = None;
                peer.next_try = Instant::now() + Duration::from_secs(1);
            }
            info!(hub = %hub, "cluster link: the link to hub {hub} ended ({end}); its requests go through the broker until it is back");
        });
    }
}

/// Connects to `hub`'s link at `advert`, checks its certificate against the advertisement and
/// proves this hub.
async fn open(me: &str, hub: &str, advert: &Advert, secret: &HubSecret) -> Result<tokio_rustls::client::TlsStream<TcpStream>, String> {
    let pin = crate::tls::parse_fingerprint(&advert.fingerprint).ok_or("a fingerprint that is not one")?;
    let trust = crate::tls::client::Trust { pin: Some(pin), ..Default::default() };
    let config = crate::tls::client::build(&trust, &[ALPN]).map_err(|e| e.to_string())?;
    let tcp = TcpStream::connect(advert.addr).await.map_err(|e| e.to_string())?;
    let _ = tcp.set_nodelay(true);
    let name = ServerName::try_from("mcpdev-hub-link").map_err(|e| e.to_string())?;
    let mut tls = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .map_err(|e| crate::tls::client::explain(&e).unwrap_or_else(|| e.to_string()))?;
    let keying = export(tls.get_ref().1).ok_or("no keying material could be exported")?;
    let proof = secret.mac(Purpose::ClusterLink, hello_text(me, hub, &keying).as_bytes());
    let hello = json!({"from": me, "proof": proof}).to_string();
    tls.write_all(&(hello.len() as u32).to_be_bytes()).await.map_err(|e| e.to_string())?;
    tls.write_all(hello.as_bytes()).await.map_err(|e| e.to_string())?;
    tls.flush().await.map_err(|e| e.to_string())?;
    Ok(tls)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_advert_opens_only_with_the_hub_secret_and_for_its_own_hub() {
        let secret = HubSecret::from_bytes(&[7; 32]);
        let advert = Advert { addr: "127.0.0.1:7444".parse().unwrap(), fingerprint: "ab".repeat(32) };
        let v = advert.to_json("h1", &secret);
        assert_eq!(Advert::open("h1", &v, &secret), Ok(advert.clone()));
        // Another hub's name, another secret, another address: refused.
        assert!(Advert::open("h2", &v, &secret).is_err());
        assert!(Advert::open("h1", &v, &HubSecret::from_bytes(&[8; 32])).is_err());
        let mut moved = v.clone();
        moved["addr"] = json!("10.0.0.9:7444");
        assert!(Advert::open("h1", &moved, &secret).is_err());
        let mut other_cert = v.clone();
        other_cert["fp"] = json!("cd".repeat(32));
        assert!(Advert::open("h1", &other_cert, &secret).is_err());
    }

    #[tokio::test]
    async fn frames_round_trip_and_an_oversized_one_is_refused() {
        let (mut a, mut b) = tokio::io::duplex(1 << 16);
        let (tx, mut rx) = mpsc::channel(8);
        tx.send("one".to_string()).await.unwrap();
        tx.send("x".repeat(100)).await.unwrap();
        drop(tx);
        write_frames(&mut a, &mut rx).await.unwrap();
        let mut buf = Vec::new();
        assert!(read_frame(&mut b, 1000, &mut buf).await.unwrap());
        assert_eq!(buf, b"one");
        assert!(read_frame(&mut b, 10, &mut buf).await.is_err(), "a frame over the cap is an error");
    }

    /// Issue 44, item 9: a flood of unproven connections from 3,000 addresses writes a bounded
    /// number of lines, not one (or five) per address.
    #[test]
    fn a_flood_from_many_addresses_writes_a_bounded_number_of_lines() {
        let logged = (0..3000u32).filter(|i| refuse(IpAddr::V4((0x0a00_0000 + i).into()), "a test flood")).count();
        // Two windows at most, should the test straddle one.
        assert!(logged <= 2 * log_limit::PER_WINDOW as usize, "{logged} lines for 3,000 addresses");
    }
}
