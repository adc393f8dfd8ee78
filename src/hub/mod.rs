//! The hub (`mcpdev serve`): devices connect to it, and the CLI (and MCP hosts) reach them
//! through it.
//!
//! Two listeners:
//! - the device listener (default `0.0.0.0:8000`): WebSocket `/xiaozhi/v1/`, OTA `/xiaozhi/ota/`,
//!   the vision endpoint (OTA and vision answer CORS, so a browser page can be a device: [`cors`]);
//! - the host listener (default `127.0.0.1:8001`, loopback): the control API the CLI uses, and
//!   the MCP endpoints for MCP hosts ([`crate::bridge`]).
//!   It checks `Host` and `Origin`, so a web page cannot reach the devices through a browser, and
//!   serves only the hub's user ([`owner`]): the control API needs the control token, and on
//!   Linux another local user's loopback connections are refused on every route.
//!
//! Both are served by [`listener`]: header and body deadlines, and on the device side a
//! connection [`budget`] (a cap below the descriptor limit, and caps on connections that have not
//! said hello, per peer and in total), so slow or silent peers cannot starve the hub.
//!
//! With TLS (`--tls auto`, `--tls-cert`; [`certs`]), the device listener serves `https://` and
//! `wss://` only, the host listener `https://` with `--host-tls`, and every URL the hub hands out
//! (OTA, vision, firmware, the MQTT endpoint) says so.
//!
//! With `--mqtt`, devices also come through a broker ([`crate::mqtt::hub`]).
//!
//! Devices are admitted, not merely connected ([`admission`]): by default only a device a person
//! approved, presenting its own token, gets in.

pub mod admission;
pub mod authority;
pub mod bearer;
pub mod budget;
pub mod certs;
pub mod check_layer;
pub mod conn_cap;
pub mod count_table;
pub mod control;
pub mod control_auth;
pub mod cors;
pub mod device_link;
pub mod devices;
pub mod guesses;
pub mod listener;
pub mod listing;
pub mod ota;
pub mod ota_upstream;
pub mod owner;
pub mod plain_at_tls;
pub mod registry;
pub mod relayed;
pub mod remote;
pub mod lease;
pub mod principal;
pub mod remote_tokens;
pub mod secret;
pub mod trim;
pub mod vision;
pub mod vision_upload;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware;
use axum::response::Response;
use axum::routing::any;
use tokio::net::TcpListener;

use crate::links::upgrade::plain;
use crate::wire::identity::Identity;
pub use registry::Registry;

/// How the hub runs.
#[derive(Debug, Clone)]
pub struct HubConfig {
    pub device_addr: SocketAddr,
    pub host_addr: SocketAddr,
    /// Shared device tokens accepted for any Device-Id (`MCPDEV_DEVICE_TOKEN`; not bound to a device).
    pub device_tokens: Vec<String>,
    /// Who gets in: approved devices with their own token (default), or everyone (`--approve-all`).
    pub admission: admission::AdmissionConfig,
    /// `capabilities.vision` sent in `initialize`; by default the hub's own endpoint.
    pub vision_url: Option<String>,
    pub vision_token: Option<String>,
    pub vision_dir: PathBuf,
    /// Caps on the hub's own vision folder: files and bytes kept (the oldest uploads go first).
    pub vision_max_files: usize,
    pub vision_max_bytes: u64,
    pub keepalive: Duration,
    pub onboarding_timeout: Duration,
    /// Extra `Host` names (besides loopback ones) and `Origin`s the host listener accepts.
    pub allowed_hosts: Vec<String>,
    pub allowed_origins: Vec<String>,
    pub aliases: HashMap<String, String>,
    /// Whether the MCP routes served on the host listener need a token (`MCPDEV_MCP_TOKEN`):
    /// the condition for reaching the host listener from other machines.
    pub mcp_token_set: bool,
    /// How the OTA endpoint answers.
    pub ota: ota::OtaSettings,
    /// Header and body deadlines on both listeners.
    pub limits: listener::Limits,
    /// The device listener's connection caps (its total is further kept below the fd limit).
    pub caps: budget::Caps,
    /// How long a WebSocket device may take to say hello before it is closed.
    pub hello_timeout: Duration,
    /// TLS on the device listener (and the embedded broker, and with `host_tls` the host
    /// listener); `None`: plain.
    pub tls: Option<Arc<certs::HubTls>>,
    /// Whether the host listener serves `https://` (with `tls`).
    pub host_tls: bool,
    /// A TLS handshake must be complete this long after its connection was admitted.
    pub handshake_timeout: Duration,
    /// Where the remote tokens' hashes are kept (`mcpdev remote-token`; [`remote_tokens`]).
    pub remote_tokens: PathBuf,
    /// Devices relayed to their own voice backend (`--upstream`, `--upstream-ota`, `[upstreams]`);
    /// `None`: devices talk to the hub alone.
    pub upstream: Option<Arc<relayed::Upstreams>>,
}

impl Default for HubConfig {
    fn default() -> Self {
        Self {
            device_addr: "0.0.0.0:8000".parse().expect("static address"),
            host_addr: "127.0.0.1:8001".parse().expect("static address"),
            device_tokens: Vec::new(),
            admission: admission::AdmissionConfig::default(),
            vision_url: None,
            vision_token: None,
            vision_dir: vision::default_dir(),
            vision_max_files: vision::DEFAULT_MAX_FILES,
            vision_max_bytes: vision::DEFAULT_MAX_BYTES,
            keepalive: Duration::from_secs(60),
            onboarding_timeout: Duration::from_secs(10),
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            aliases: HashMap::new(),
            mcp_token_set: false,
            ota: ota::OtaSettings::default(),
            limits: listener::Limits::default(),
            caps: budget::Caps::default(),
            hello_timeout: Duration::from_secs(10),
            tls: None,
            host_tls: false,
            handshake_timeout: Duration::from_secs(10),
            remote_tokens: remote_tokens::default_path(),
            upstream: None,
        }
    }
}

pub struct Hub {
    pub config: HubConfig,
    pub registry: Registry,
    /// Which devices are let in, pending codes, per-device tokens.
    pub admission: admission::Admission,
    /// Every per-device token (device, vision) is derived from it (the admission's own secret).
    pub secret: Arc<secret::HubSecret>,
    /// The hub's own vision folder, capped.
    pub vision: vision::VisionStore,
    /// The device listener's bound address (its port goes into the default vision URL).
    device_port: u16,
    /// The device listener's bound IP, when it is bound to one (not 0.0.0.0 / ::), else this
    /// machine's address on its default route (found at start, no packet sent).
    device_ip: Option<std::net::IpAddr>,
    /// The MQTT side, when the hub runs one: set once, by whoever starts it, before the
    /// listeners serve ([`BoundHub::serve`]).
    pub mqtt: std::sync::OnceLock<Arc<dyn ota::MqttOffer>>,
    /// The other hubs on the same broker, when the hub runs MQTT ([`remote`]): set once, like `mqtt`.
    pub cluster: std::sync::OnceLock<Arc<dyn remote::Cluster>>,
    /// The MCP tasks this hub holds, for requests other hubs of the cluster forward: set once, by
    /// the bridge ([`remote::TaskDesk`]).
    pub tasks: std::sync::OnceLock<Arc<dyn remote::TaskDesk>>,
    /// The control API's token and its file.
    pub control: Arc<owner::ControlToken>,
    /// The people's tokens for remote use of the control API.
    pub remote_tokens: remote_tokens::RemoteTokens,
    /// Wrong bearer tokens per peer, capped.
    pub guesses: guesses::Guesses,
    /// The device listener's connections.
    pub budget: Arc<budget::Budget>,
}

/// A started hub with its bound addresses.
pub struct RunningHub {
    pub hub: Arc<Hub>,
    pub device_addr: SocketAddr,
    pub host_addr: SocketAddr,
}

impl Hub {
    /// Whether a connecting device is admitted: approved, with its approval's token (or a gateway
    /// credential for an approved Device-Id, or a shared token; or `--approve-all`). A device that
    /// is not approved gets a pending request of its own and its code.
    pub fn check_device_token(&self, id: &Identity, remote: Option<SocketAddr>) -> Result<(), admission::Refusal> {
        if let Some(through_gateway) = self.admission.admits_through_gateway(&id.device_id, id.token.as_deref(), id.client_id.as_deref(), remote) {
            return through_gateway;
        }
        match self.admission.admits(&id.device_id, id.token.as_deref()) {
            Err(admission::Refusal::NotAdmitted { device_id, code: None }) => {
                let r = admission::Requester { device_id: &device_id, via: admission::Via::Websocket, client_id: id.client_id.as_deref(), key_hash: None, remote, reported: None };
                let p = self.admission.request(&r)?;
                Err(admission::Refusal::NotAdmitted { device_id, code: Some(p.code) })
            }
            // The Device-Id of a device connected now: the advice is a Device-Id of its own, never
            // a re-binding that would lock the connected one out.
            Err(admission::Refusal::NoToken { device_id } | admission::Refusal::WrongToken { device_id }) if self.registry.get(&device_id).is_some() => {
                Err(admission::Refusal::Taken { device_id, resident: false })
            }
            other => other,
        }
    }

    /// Whether other machines may reach the host listener: bound to an address other than
    /// loopback, or an `--allowed-host` that names another machine. Then every MCP route needs a
    /// token, whether or not `MCPDEV_MCP_TOKEN` is set.
    pub fn reachable_from_afar(&self) -> bool {
        remote_use(&self.config).is_some()
    }

    /// The name devices reach this hub by, for URLs the hub hands out: `--public-host`, else the
    /// local address of the connection the device came in on (`local`), else the address the
    /// device listener is bound to (or this machine's address on its default route), else
    /// `127.0.0.1`. Never anything a device sent (a `Host` header, a stored check-in), so no
    /// device can redirect another one.
    pub fn public_name(&self, local: Option<std::net::IpAddr>) -> String {
        if let Some(h) = self.config.ota.public_host.as_deref().filter(|h| !h.is_empty()) {
            return h.to_string();
        }
        let ip = local.filter(|ip| !ip.is_unspecified()).or(self.device_ip).unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));
        match ip.to_canonical() {
            std::net::IpAddr::V6(v6) => format!("[{v6}]"),
            v4 => v4.to_string(),
        }
    }

    /// The WebSocket URL devices connect to, as the hub names it to people (`approve`'s hint):
    /// this hub's own port, and the name of [`Hub::public_name`].
    pub fn device_url(&self) -> String {
        format!("{}://{}:{}{}", self.ws_scheme(), self.public_name(None), self.device_port, ota::DEVICE_PATH)
    }

    /// [`Hub::device_url`] for a device whose request came from `peer`: a device on this machine
    /// that came over loopback is named the loopback address it used (where the listener takes
    /// loopback), not the LAN address people on other machines use.
    pub fn device_url_for(&self, peer: Option<std::net::IpAddr>) -> String {
        let listens_on_loopback = self.config.device_addr.ip().is_unspecified() || self.config.device_addr.ip().is_loopback();
        match peer.map(|ip| ip.to_canonical()) {
            Some(ip) if ip.is_loopback() && listens_on_loopback => {
                let host = if self.config.device_addr.ip().is_loopback() { self.config.device_addr.ip() } else { ip };
                let host = match host {
                    std::net::IpAddr::V6(v6) => format!("[{v6}]"),
                    v4 => v4.to_string(),
                };
                format!("{}://{host}:{}{}", self.ws_scheme(), self.device_port, ota::DEVICE_PATH)
            }
            _ => self.device_url(),
        }
    }

    /// `wss` when the device listener serves TLS, else `ws`.
    pub fn ws_scheme(&self) -> &'static str {
        if self.config.tls.is_some() { "wss" } else { "ws" }
    }

    /// `https` when the device listener serves TLS, else `http`.
    pub fn http_scheme(&self) -> &'static str {
        if self.config.tls.is_some() { "https" } else { "http" }
    }

    /// The vision URL and token for `device_id`, which came in on `local` (see [`Hub::public_name`]).
    /// With `--vision-url`, the external service and its configured token; otherwise the hub's
    /// own endpoint and the device's own vision token ([`secret::Purpose::Vision`]).
    pub fn vision_for(&self, device_id: &str, local: Option<std::net::IpAddr>) -> (String, String) {
        if let Some(url) = &self.config.vision_url {
            return (url.clone(), self.config.vision_token.clone().unwrap_or_default());
        }
        let url = format!("{}://{}:{}{}", self.http_scheme(), self.public_name(local), self.device_port, devices::VISION_PATH);
        (url, self.admission.vision_token(device_id))
    }
}

/// A hub whose listeners are bound but not yet served: the caller attaches what lives above the
/// hub (the MQTT side, the MCP bridge's routes), then calls [`BoundHub::serve`].
pub struct BoundHub {
    pub hub: Arc<Hub>,
    pub device_addr: SocketAddr,
    pub host_addr: SocketAddr,
    device_listener: TcpListener,
    host_listener: TcpListener,
}

/// Binds both listeners and builds the hub (nothing is served yet).
pub async fn bind(config: HubConfig) -> anyhow::Result<BoundHub> {
    check_remote_use(&config)?;
    crate::metrics::start();
    crate::metrics::log_limit::spawn_summaries();
    let fd_limit = budget::raise_fd_limit();
    let budget = budget::Budget::under_fd_limit(config.caps, fd_limit);
    let caps = budget.caps();
    tracing::info!(
        fd_limit = %fd_limit.map_or_else(|| "unknown".to_string(), |l| l.to_string()),
        device_connections = caps.max_connections,
        pre_hello_per_peer = caps.pre_hello_per_peer,
        pre_hello_total = caps.pre_hello_total,
        queued_per_peer = caps.queued_per_peer(),
        "open-file limit raised to the hard limit; device-side connections capped below it"
    );
    // A note at start-up, not a warning: 20,000 descriptors is plenty for most fleets. It is a
    // warning when the ceiling is near for any fleet, and when the devices near it (Budget::admit).
    if budget.limited_by_descriptors(config.caps.max_connections) {
        let note = format!(
            "the open-file limit ({}) allows {} devices at most; raise it for more (docs/hub.md, \"Descriptor limits\": LimitNOFILE, ulimit -n, fs.nr_open)",
            fd_limit.unwrap_or_default(),
            caps.max_connections
        );
        if caps.max_connections < budget::FEW_DEVICES { tracing::warn!("{note}") } else { tracing::info!("{note}") }
    }
    let device_listener = listener::bind(config.device_addr, listener::DEVICE_BACKLOG)
        .map_err(|e| bind_error("for devices", config.device_addr, "--device-addr", &e))?;
    let host_listener = listener::bind(config.host_addr, listener::HOST_BACKLOG)
        .map_err(|e| bind_error("for the CLI and MCP hosts", config.host_addr, "--host-addr", &e))?;
    let device_addr = device_listener.local_addr()?;
    let host_addr = host_listener.local_addr()?;
    let control = Arc::new(owner::ControlToken::create(host_addr)?);
    let admission = admission::Admission::load(&config.admission, &config.device_tokens)?;
    let secret = admission.secret();
    let vision = vision::VisionStore::new(config.vision_dir.clone(), config.vision_max_files, config.vision_max_bytes);
    let remote_tokens = remote_tokens::RemoteTokens::new(config.remote_tokens.clone());
    let hub = Arc::new(Hub {
        registry: Registry::new(config.aliases.clone()),
        admission,
        config,
        secret,
        vision,
        device_port: device_addr.port(),
        device_ip: Some(device_addr.ip()).filter(|ip| !ip.is_unspecified()).or_else(default_route_ip),
        mqtt: std::sync::OnceLock::new(),
        cluster: std::sync::OnceLock::new(),
        tasks: std::sync::OnceLock::new(),
        control,
        remote_tokens,
        guesses: guesses::Guesses::default(),
        budget,
    });
    Ok(BoundHub { hub, device_addr, host_addr, device_listener, host_listener })
}

/// Binds and serves a hub with no routes of its own beyond the control API (tests, benches).
pub async fn start(config: HubConfig) -> anyhow::Result<RunningHub> {
    Ok(bind(config).await?.serve(Router::new()))
}

impl BoundHub {
    /// Serves both listeners until the hub is dropped with its runtime; `host_routes` (the MCP
    /// bridge) are served on the host listener behind its Host/Origin and owner checks.
    pub fn serve(self, host_routes: Router) -> RunningHub {
        let BoundHub { hub, device_addr, host_addr, device_listener, host_listener } = self;
        let limits = hub.config.limits;
        let devices = listener::Side::Devices(hub.budget.clone());
        let tls = hub.config.tls.as_ref().map(|t| listener::Tls { config: t.http.clone(), deadline: hub.config.handshake_timeout });
        let host_tls = tls.clone().filter(|_| hub.config.host_tls);
        supervise("device listener", listener::serve(device_listener, devices::router(hub.clone()), devices, limits, "devices", tls));
        let control_route = Router::new()
            .route(crate::links::hub_client::CONTROL_PATH, any(control::link))
            .with_state(hub.clone())
            .route_layer(middleware::from_fn_with_state(hub.clone(), control_auth::require_token));
        // A device pointed at this port is told which port it wants (crate::links::listeners).
        let for_devices = || async {
            use crate::links::listeners;
            let headers = [(listeners::HEADER, listeners::HOST), (header::CONTENT_TYPE.as_str(), "text/plain; charset=utf-8")];
            (StatusCode::NOT_FOUND, headers, listeners::HOST_SAYS)
        };
        let host_app = control_route
            .route(ota::DEVICE_PATH, any(for_devices))
            .route(ota::DEVICE_PATH.trim_end_matches('/'), any(for_devices))
            .merge(host_routes)
            .layer(check_layer::CheckLayer::new({
                let hub = hub.clone();
                move |req: &mut Request| front_door(&hub, req)
            }));
        supervise("host listener", listener::serve(host_listener, host_app, listener::Side::Host(conn_cap::ConnCap::host(hub.budget.fd_limit())), limits, "host", host_tls));
        trim::spawn(hub.clone());
        spawn_remote_token_watch(&hub);
        RunningHub { hub, device_addr, host_addr }
    }
}

/// Reads the remote tokens again each second when their file changed, so that a revocation
/// ends the open connections of its token (each checks again when told, [`control`]).
fn spawn_remote_token_watch(hub: &Arc<Hub>) {
    let hub = Arc::downgrade(hub);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(hub) = hub.upgrade() else { break };
            hub.remote_tokens.refresh();
        }
    });
}

/// A listener that cannot be bound: a configuration problem (exit 2) that names the flag to change.
pub fn bind_error(what: &str, addr: SocketAddr, flag: &str, e: &std::io::Error) -> anyhow::Error {
    let hint = match e.kind() {
        std::io::ErrorKind::AddrInUse => format!("another program (perhaps another hub) listens on {addr}: stop it, or choose another address with {flag}"),
        std::io::ErrorKind::PermissionDenied => format!("ports below 1024 need privileges: choose another port with {flag}"),
        _ => format!("choose another address with {flag}"),
    };
    crate::exit::CodedError::new(crate::exit::Exit::Usage, format!("cannot listen {what} on {addr} ({flag}): {e}")).with_help(hint).into()
}

/// This machine's address on its default route: a UDP socket "connected" to a documentation
/// address (RFC 5737) learns its source address; nothing is sent.
fn default_route_ip() -> Option<std::net::IpAddr> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.1:9").ok()?;
    socket.local_addr().ok().map(|a| a.ip()).filter(|ip| !ip.is_unspecified())
}

/// Runs an accept loop; its end (it only ends by panicking) is logged, not silent.
fn supervise(name: &'static str, accept_loop: impl Future<Output = ()> + Send + 'static) {
    let task = tokio::spawn(accept_loop);
    tokio::spawn(async move {
        if let Err(e) = task.await
            && !e.is_cancelled()
        {
            tracing::error!("the {name} stopped: {e}");
        }
    });
}

/// A host listener reachable from other machines needs a token on every route: the control API
/// has one always; `/mcp` must have `MCPDEV_MCP_TOKEN`. A `Host` header is no proof of where a
/// client is, so a non-loopback bind address counts as remote use too.
fn check_remote_use(config: &HubConfig) -> anyhow::Result<()> {
    if let Some((entry, why)) = config.allowed_hosts.iter().filter(|h| *h != "*").find_map(|h| {
        let bare_ip = h.parse::<std::net::IpAddr>().is_ok();
        authority::Authority::parse(h).err().filter(|_| !bare_ip).map(|why| (h, why))
    }) {
        return Err(crate::exit::CodedError::new(crate::exit::Exit::Usage, format!("--allowed-host {entry:?} is not a host[:port] (such as hub.lan or hub.lan:8001): {why}")).into());
    }
    let Some(why) = remote_use(config) else { return Ok(()) };
    // Under --host-tls, each person's remote token opens the MCP endpoints too: no shared token
    // is needed (one may still be set, for MCP hosts that hold no remote token).
    if config.mcp_token_set || (config.host_tls && config.tls.is_some()) {
        return Ok(());
    }
    Err(crate::exit::CodedError::new(
        crate::exit::Exit::Usage,
        format!(
            "{why} makes the MCP endpoints reachable from other machines, and they would need a token: serve them over TLS (--tls auto --host-tls), \
             where each person uses their own remote token (`mcpdev remote-token create NAME`), or set MCPDEV_MCP_TOKEN (one shared token)"
        ),
    )
    .into())
}

/// Why other machines may reach the host listener (its bind address, or an `--allowed-host`
/// naming another machine); `None` when only this machine may.
fn remote_use(config: &HubConfig) -> Option<String> {
    let remote_names: Vec<&str> = config.allowed_hosts.iter().map(String::as_str).filter(|h| !is_loopback_entry(h)).collect();
    if !config.host_addr.ip().to_canonical().is_loopback() {
        Some(format!("the host listener is bound to {}", config.host_addr))
    } else if !remote_names.is_empty() {
        Some(format!("--allowed-host {}", remote_names.join(", ")))
    } else {
        None
    }
}

/// The host listener's checks, in one layer (each layer costs every request a few allocations):
/// another local user's connection is refused first ([`owner::refuse_other_user`]); then, as
/// DNS-rebinding and cross-site protection, the `Host` must be a loopback name (or allowed), and
/// an `Origin`, when present, a loopback origin (or allowed). Otherwise 403.
fn front_door(hub: &Hub, req: &Request) -> Option<Response> {
    if let Some(refusal) = owner::refuse_other_user(req) {
        crate::metrics::refused(crate::metrics::Refused::OtherUser);
        return Some(refusal);
    }
    refuse(&hub.config, req.headers())
}

/// The 403 for a request whose `Host` or `Origin` is not allowed, if it is not.
pub fn refuse(config: &HubConfig, headers: &axum::http::HeaderMap) -> Option<Response> {
    let get = |name| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(host) = get(header::HOST)
        && !host_allowed(host, &config.allowed_hosts)
    {
        crate::metrics::refused(crate::metrics::Refused::Host);
        let hint = match authority::Authority::parse(host) {
            Ok(a) => format!("Host {host:?} is not allowed; start the hub with --allowed-host {}", a.host_text()),
            Err(why) => format!("Host {host:?} is not a host[:port]: {why}"),
        };
        return Some(plain(StatusCode::FORBIDDEN, &hint));
    }
    if let Some(origin) = get(header::ORIGIN)
        && !origin_allowed(origin, &config.allowed_origins)
    {
        crate::metrics::refused(crate::metrics::Refused::Origin);
        let hint = format!("Origin {origin:?} is not allowed; start the hub with --allowed-origin {origin}");
        return Some(plain(StatusCode::FORBIDDEN, &hint));
    }
    None
}

/// Whether an allowed-host entry (`--allowed-host`) names this machine.
fn is_loopback_entry(entry: &str) -> bool {
    authority::Authority::parse(entry).is_ok_and(|a| a.is_loopback()) || entry.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.to_canonical().is_loopback())
}

/// Whether a `Host` header is allowed: an authority ([`authority`]) naming this machine, or one an
/// `--allowed-host` entry names (`*`: any well-formed one). Junk around a loopback name is junk.
pub fn host_allowed(host: &str, allowed: &[String]) -> bool {
    authority::Authority::parse(host).is_ok_and(|a| a.is_loopback() || allowed.iter().any(|e| e == "*" || a.matches(e)))
}

/// Whether an `Origin` is allowed: one of `allowed` as written (`*`: any), or `http(s)://` with an
/// authority naming this machine.
pub fn origin_allowed(origin: &str, allowed: &[String]) -> bool {
    if allowed.iter().any(|a| a == origin || a == "*") {
        return true;
    }
    authority::origin(origin).is_ok_and(|(scheme, a)| matches!(scheme.as_str(), "http" | "https") && a.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_and_origin_rules() {
        for ok in ["127.0.0.1:8001", "localhost:8001", "[::1]:8001", "localhost", "127.0.0.5"] {
            assert!(host_allowed(ok, &[]), "{ok}");
        }
        for bad in ["evil.example:8001", "192.168.1.5:8001", "example.com", "[::1].evil.example:8001", "127.0.0.1.evil.example", "localhost:8001@evil.example", "[fe80::1%25lo]:8001", "localhost:99999"] {
            assert!(!host_allowed(bad, &[]), "{bad}");
        }
        assert!(host_allowed("hub.lan:8001", &["hub.lan".into()]));
        assert!(!host_allowed("hub.lan.evil.example:8001", &["hub.lan".into()]));
        assert!(!host_allowed("hub.lan:8001/x", &["*".into()]), "any host, but a host");
        assert!(!origin_allowed("http://[::1].evil.example:8001", &[]));
        assert!(!origin_allowed("http://localhost.evil.example", &[]));
        assert!(origin_allowed("http://localhost:6274", &[]));
        assert!(origin_allowed("http://127.0.0.1", &[]));
        assert!(!origin_allowed("https://evil.example", &[]));
        assert!(!origin_allowed("null", &[]));
        assert!(origin_allowed("https://app.example", &["https://app.example".into()]));
    }
}
