//! The hub's numbers: counted where things happen, read by `/metrics` (Prometheus text format,
//! written by the `prometheus-client` crate) and by the dashboard's hub and devices pages.
//!
//! Rules it enforces:
//! - A leaf: it refers to no other mcpdev module, so any layer can count where an event happens
//!   (a call ends in `links`, a refusal in `hub`, a broker client in `mqtt`).
//! - Counting never waits on a lock held across other work, and never allocates per event
//!   beyond a label lookup.
//! - Every label value is one of the hub's own words, from a fixed set ([`Refused`], [`Outcome`],
//!   the device states and transports): nothing a device or a peer sends becomes a label, so no
//!   peer can grow the exposition.
//! - One process runs one hub: the counters are the process's, monotonic from its start.
//! - Names follow Prometheus conventions (`promtool check metrics` passes): the process's own
//!   figures are the standard `process_*` families ([`process`]), not names of our own, and
//!   `mcpdev_build_info{version,commit}` is 1.

pub mod device;
pub mod log_limit;
pub mod process;
pub mod rate;

use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};
use serde::Serialize;

pub use device::DeviceCalls;
pub use rate::RateRing;

/// How a call through the hub ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// The tool ran and failed: a `tools/call` result with `isError: true`.
    ToolError,
    /// The device answered with a JSON-RPC error.
    DeviceError,
    Timeout,
    Disconnected,
    LinkDown,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::ToolError => "tool_error",
            Outcome::DeviceError => "device_error",
            Outcome::Timeout => "timeout",
            Outcome::Disconnected => "disconnected",
            Outcome::LinkDown => "link_down",
        }
    }
    const ALL: [Outcome; 6] = [Outcome::Ok, Outcome::ToolError, Outcome::DeviceError, Outcome::Timeout, Outcome::Disconnected, Outcome::LinkDown];
}

/// Why the hub refused a connection or a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// A `Host` header that is not loopback or allowed (DNS rebinding).
    Host,
    /// An `Origin` that is not loopback or allowed (another web site).
    Origin,
    /// Another local user's connection to the host listener.
    OtherUser,
    /// The control API without its token, or with a wrong one.
    ControlToken,
    /// A dashboard request without a session, or with a forged one.
    DashboardAuth,
    /// A state-changing dashboard request without its anti-forgery token.
    AntiForgery,
    /// A device that is not admitted (no approval, no token, a wrong token).
    NotAdmitted,
    /// A device whose identity could not be read.
    BadIdentity,
    /// A connection over one of the device listener's caps.
    ConnectionCap,
    /// A request for admission from an address that asks too fast.
    AdmissionRate,
    /// A request for admission from a network (/24, /64) that holds as many as it may.
    AdmissionNetwork,
    /// A request for admission while the hub holds as many as it keeps.
    AdmissionFull,
    /// A TLS handshake that failed or did not finish by its deadline.
    TlsHandshake,
    /// A token from a peer that sent too many wrong ones ([`crate::hub::guesses`]).
    TokenGuesses,
    /// A remote token where it is not accepted (plain http, a loopback-only listener), or the
    /// control token from another machine ([`crate::hub::bearer`]).
    TokenTransport,
    /// A connection to the cluster link that did not prove the hub secret in time, or came
    /// beyond its caps ([`crate::mqtt`] `hub_link`).
    ClusterLink,
    /// A dashboard traffic stream over a cap: in total, per principal or per address
    /// ([`crate::dashboard::streams`]).
    StreamCap,
    /// A request on an MCP session that another credential opened.
    ForeignSession,
    /// A record on the cluster's topics that does not open with the hub secret (a presence, a
    /// claim, a forwarded message, an index shard, a request), or a replayed one ([`crate::mqtt`]
    /// `cluster_seal`, `cluster_rpc`).
    ClusterRecord,
    /// A relayed device whose upstream could not be reached, refused it, or sent what the relay
    /// does not pass (an OTA answer too large, a redirect) ([`crate::hub::relayed`]).
    Upstream,
}

impl Refused {
    pub fn as_str(self) -> &'static str {
        match self {
            Refused::Host => "host",
            Refused::Origin => "origin",
            Refused::OtherUser => "other_user",
            Refused::ControlToken => "control_token",
            Refused::DashboardAuth => "dashboard_auth",
            Refused::AntiForgery => "anti_forgery",
            Refused::NotAdmitted => "not_admitted",
            Refused::BadIdentity => "bad_identity",
            Refused::ConnectionCap => "connection_cap",
            Refused::AdmissionRate => "admission_rate",
            Refused::AdmissionNetwork => "admission_network",
            Refused::AdmissionFull => "admission_full",
            Refused::TlsHandshake => "tls_handshake",
            Refused::TokenGuesses => "token_guesses",
            Refused::TokenTransport => "token_transport",
            Refused::ClusterLink => "cluster_link",
            Refused::StreamCap => "stream_cap",
            Refused::ForeignSession => "foreign_session",
            Refused::ClusterRecord => "cluster_record",
            Refused::Upstream => "upstream",
        }
    }
    pub const ALL: [Refused; 20] = [
        Refused::Host,
        Refused::Origin,
        Refused::OtherUser,
        Refused::ControlToken,
        Refused::DashboardAuth,
        Refused::AntiForgery,
        Refused::NotAdmitted,
        Refused::BadIdentity,
        Refused::ConnectionCap,
        Refused::AdmissionRate,
        Refused::AdmissionNetwork,
        Refused::AdmissionFull,
        Refused::TlsHandshake,
        Refused::TokenGuesses,
        Refused::TokenTransport,
        Refused::ClusterLink,
        Refused::StreamCap,
        Refused::ForeignSession,
        Refused::ClusterRecord,
        Refused::Upstream,
    ];
}

type Label1 = [(&'static str, &'static str); 1];
type Label2 = [(&'static str, &'static str); 2];

struct Metrics {
    registry: Registry,
    calls: Family<Label1, Counter>,
    call_seconds: Family<Label1, Histogram, fn() -> Histogram>,
    onboarded: Counter,
    onboarding_retries: Counter,
    onboarding_failures: Counter,
    refusals: Family<Label1, Counter>,
    broker_clients: Gauge,
    mcp_sessions: Gauge,
    mcp_sessions_reclaimed: Counter,
    log_suppressed: Family<Label1, Counter>,
    ring_bytes: Gauge,
    ring_peak_bytes: Gauge,
    devices: Family<Label2, Gauge>,
    cluster_requests: Family<Label1, Counter>,
    started: Instant,
    calls_rate: RateRing,
    onboarding_rate: RateRing,
    /// Held while the scrape-time gauges are set and the text written, so two scrapes at once
    /// do not mix their device counts. Nothing under it can panic.
    scrape: Mutex<()>,
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

impl Metrics {
    fn new() -> Self {
        let mut registry = Registry::with_prefix("mcpdev");
        let calls = Family::<Label1, Counter>::default();
        registry.register("calls", "Calls made to devices through the hub (control API, MCP, dashboard), by how they ended", calls.clone());
        // 1 ms to about 33 s; `kind`: `call` (answered while its caller waits) or `task` (an MCP
        // task, slow by design: the latency alert leaves it out).
        let call_seconds = Family::<Label1, Histogram, fn() -> Histogram>::new_with_constructor(|| Histogram::new(exponential_buckets(0.001, 2.0, 16)));
        registry.register_with_unit("call_duration", "Time from a call's sending to its end, by kind (call, or an MCP task)", Unit::Seconds, call_seconds.clone());
        for kind in ["call", "task"] {
            let _ = call_seconds.get_or_create(&[("kind", kind)]);
        }
        let onboarded = Counter::default();
        registry.register("onboarded", "Devices that finished onboarding (initialize and every tools/list page)", onboarded.clone());
        let onboarding_retries = Counter::default();
        registry.register("onboarding_retries", "Onboarding steps sent again after a failure", onboarding_retries.clone());
        let onboarding_failures = Counter::default();
        registry.register("onboarding_failures", "Devices whose every onboarding attempt failed", onboarding_failures.clone());
        let refusals = Family::<Label1, Counter>::default();
        registry.register("refusals", "Connections and requests the hub refused, by reason", refusals.clone());
        let broker_clients = Gauge::default();
        registry.register("broker_clients", "Clients connected to the embedded MQTT broker", broker_clients.clone());
        let mcp_sessions = Gauge::default();
        registry.register("mcp_sessions", "Open MCP sessions on the host listener", mcp_sessions.clone());
        let mcp_sessions_reclaimed = Counter::default();
        registry.register("mcp_sessions_reclaimed", "MCP sessions closed to make room for a new one while a cap was full (their host had left them idle)", mcp_sessions_reclaimed.clone());
        let log_suppressed = Family::<Label1, Counter>::default();
        registry.register("log_lines_suppressed", "Log lines a peer triggered that were not written one by one (summed up per device or address), by kind", log_suppressed.clone());
        let ring_bytes = Gauge::default();
        registry.register_with_unit("event_ring", "Device events held for watchers that have not read them yet (their JSON)", Unit::Bytes, ring_bytes.clone());
        let ring_peak_bytes = Gauge::default();
        registry.register_with_unit("event_ring_peak", "The most device events held at once for watchers since the hub started (their JSON)", Unit::Bytes, ring_peak_bytes.clone());
        let devices = Family::<Label2, Gauge>::default();
        registry.register("devices", "Connected devices, by state and transport", devices.clone());
        let cluster_requests = Family::<Label1, Counter>::default();
        registry.register("cluster_requests", "Requests this hub sent to other hubs of its cluster, by the path they took (its direct link, or the broker)", cluster_requests.clone());
        for path in ["link", "broker"] {
            let _ = cluster_requests.get_or_create(&[("path", path)]);
        }
        let build_info = Family::<Label2, Gauge>::default();
        registry.register("build_info", "The running mcpdev's version and the commit it was built from (1)", build_info.clone());
        build_info.get_or_create(&[("version", env!("CARGO_PKG_VERSION")), ("commit", env!("MCPDEV_COMMIT"))]).set(1);
        // Every outcome and reason is written from the start, at 0: a rate over a series that
        // appears only with its first event misses that event.
        for o in Outcome::ALL {
            let _ = calls.get_or_create(&[("outcome", o.as_str())]);
        }
        for r in Refused::ALL {
            let _ = refusals.get_or_create(&[("reason", r.as_str())]);
        }
        for k in log_limit::Kind::ALL {
            let _ = log_suppressed.get_or_create(&[("kind", k.as_str())]);
        }
        Self {
            registry,
            calls,
            call_seconds,
            onboarded,
            onboarding_retries,
            onboarding_failures,
            refusals,
            broker_clients,
            mcp_sessions,
            mcp_sessions_reclaimed,
            log_suppressed,
            ring_bytes,
            ring_peak_bytes,
            devices,
            cluster_requests,
            started: Instant::now(),
            calls_rate: RateRing::default(),
            onboarding_rate: RateRing::default(),
            scrape: Mutex::new(()),
        }
    }
}

/// Starts the clock the uptime is counted from (the hub calls it when it binds).
pub fn start() {
    LazyLock::force(&METRICS);
}

tokio::task_local! {
    /// Set while an MCP task runs its call ([`slow_by_design`]).
    static SLOW_BY_DESIGN: ();
}

/// Runs `f` as work that is slow by design (an MCP task's call): the calls it makes are timed as
/// `kind="task"`, which the p99 latency alert leaves out (docs/monitoring).
pub async fn slow_by_design<F: Future>(f: F) -> F::Output {
    SLOW_BY_DESIGN.scope((), f).await
}

/// A call through the hub ended.
pub fn call_done(outcome: Outcome, elapsed: Duration) {
    let m = &*METRICS;
    m.calls.get_or_create(&[("outcome", outcome.as_str())]).inc();
    let kind = if SLOW_BY_DESIGN.try_with(|()| ()).is_ok() { "task" } else { "call" };
    m.call_seconds.get_or_create(&[("kind", kind)]).observe(elapsed.as_secs_f64());
    m.calls_rate.add(m.started.elapsed().as_secs());
}

/// A device event, by the name it is serialized with: onboarding's ends and retries count.
pub fn device_event(name: &str) {
    let m = &*METRICS;
    match name {
        "ready" => {
            m.onboarded.inc();
            m.onboarding_rate.add(m.started.elapsed().as_secs());
        }
        "onboarding_retry" => {
            m.onboarding_retries.inc();
        }
        "onboarding_failed" => {
            m.onboarding_failures.inc();
        }
        _ => {}
    }
}

/// A request went to another hub of the cluster: on its direct link (`true`) or through the
/// broker.
pub fn cluster_request(on_link: bool) {
    METRICS.cluster_requests.get_or_create(&[("path", if on_link { "link" } else { "broker" })]).inc();
}

/// The hub refused something.
pub fn refused(reason: Refused) {
    METRICS.refusals.get_or_create(&[("reason", reason.as_str())]).inc();
}

/// `n` log lines of `kind` were held back ([`log_limit`]).
pub fn log_lines_suppressed(kind: log_limit::Kind, n: u64) {
    METRICS.log_suppressed.get_or_create(&[("kind", kind.as_str())]).inc_by(n);
}

/// What the hub's event ring holds now, and the most it held at once (bytes of JSON).
pub fn set_event_ring(held: usize, peak: usize) {
    METRICS.ring_bytes.set(i64::try_from(held).unwrap_or(i64::MAX));
    METRICS.ring_peak_bytes.set(i64::try_from(peak).unwrap_or(i64::MAX));
}

/// The embedded broker's client count changed.
pub fn set_broker_clients(n: usize) {
    METRICS.broker_clients.set(i64::try_from(n).unwrap_or(i64::MAX));
}

/// Counts one open MCP session for as long as it lives (not `Clone`: one guard, one session).
/// An idle MCP session was closed to make room for a new one.
pub fn count_mcp_session_reclaimed() {
    METRICS.mcp_sessions_reclaimed.inc();
}

pub struct SessionGuard(());

impl SessionGuard {
    pub fn open() -> Self {
        METRICS.mcp_sessions.inc();
        Self(())
    }
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        METRICS.mcp_sessions.dec();
    }
}

/// The device states the hub reports, in order.
pub const STATES: [&str; 5] = ["awaiting_hello", "initializing", "listing", "ready", "disconnected"];
/// The transports the hub reports; anything else is counted as `other`.
pub const TRANSPORTS: [&str; 3] = ["websocket", "mqtt", "other"];

/// Devices by state and transport, as counted at one moment.
#[derive(Debug, Default, Clone, Serialize)]
pub struct DeviceCounts(pub Vec<(String, String, u64)>);

impl DeviceCounts {
    /// Counts `(state, transport)` pairs; unknown words are counted under `other` (transport)
    /// or not at all (state).
    pub fn count<'a>(devices: impl Iterator<Item = (&'a str, &'a str)>) -> Self {
        let mut n = [[0u64; TRANSPORTS.len()]; STATES.len()];
        for (state, transport) in devices {
            let Some(s) = STATES.iter().position(|x| *x == state) else { continue };
            let t = TRANSPORTS.iter().position(|x| *x == transport).unwrap_or(TRANSPORTS.len() - 1);
            n[s][t] += 1;
        }
        let mut out = Vec::new();
        for (s, row) in n.iter().enumerate() {
            for (t, count) in row.iter().enumerate() {
                out.push((STATES[s].to_string(), TRANSPORTS[t].to_string(), *count));
            }
        }
        Self(out)
    }
}

/// The exposition, with the devices as counted now.
pub fn exposition(devices: &DeviceCounts) -> String {
    let m = &*METRICS;
    let _scrape = m.scrape.lock().unwrap_or_else(|e| e.into_inner());
    for (s, state) in STATES.iter().enumerate() {
        for (t, transport) in TRANSPORTS.iter().enumerate() {
            let count = devices.0.get(s * TRANSPORTS.len() + t).map_or(0, |c| c.2);
            m.devices.get_or_create(&[("state", state), ("transport", transport)]).set(i64::try_from(count).unwrap_or(i64::MAX));
        }
    }
    let mut text = String::with_capacity(8 * 1024);
    // Writing to a String cannot fail.
    let _ = encode_registry(&mut text, &m.registry);
    process::read().write_open_metrics(&mut text);
    let _ = encode_eof(&mut text);
    text
}

/// The exposition in the Prometheus text format 0.0.4, for scrapers that do not ask for
/// OpenMetrics (and `promtool check metrics`): the same samples; a counter's `HELP` and `TYPE`
/// name its samples' `_total` name, and the OpenMetrics-only `UNIT` and `EOF` lines go.
pub fn text_format(open_metrics: &str) -> String {
    let counters: std::collections::HashSet<&str> =
        open_metrics.lines().filter_map(|l| l.strip_prefix("# TYPE ")).filter_map(|l| l.strip_suffix(" counter")).collect();
    let mut out = String::with_capacity(open_metrics.len() + 256);
    for line in open_metrics.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        let meta = line.strip_prefix("# HELP ").map(|r| ("# HELP ", r)).or_else(|| line.strip_prefix("# TYPE ").map(|r| ("# TYPE ", r)));
        match meta {
            Some((kind, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                let name = if counters.contains(name) { format!("{name}_total") } else { name.to_string() };
                out.push_str(kind);
                out.push_str(&name);
                out.push(' ');
                out.push_str(tail);
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// What the dashboard's hub page shows.
#[derive(Debug, Serialize)]
pub struct HubNumbers {
    pub uptime_s: u64,
    pub resident_bytes: u64,
    pub calls: Vec<(&'static str, u64)>,
    pub refusals: Vec<(&'static str, u64)>,
    pub onboarded: u64,
    pub onboarding_retries: u64,
    pub onboarding_failures: u64,
    pub broker_clients: i64,
    pub mcp_sessions: i64,
    /// Calls per second, one value a second, oldest first, over the last [`rate::SECONDS`].
    pub calls_per_s: Vec<u64>,
    /// Devices that finished onboarding per second, likewise.
    pub onboarded_per_s: Vec<u64>,
}

pub fn hub_numbers() -> HubNumbers {
    let m = &*METRICS;
    let now = m.started.elapsed().as_secs();
    HubNumbers {
        uptime_s: now,
        resident_bytes: process::read().resident_bytes.unwrap_or(0),
        calls: Outcome::ALL.iter().map(|o| (o.as_str(), m.calls.get_or_create(&[("outcome", o.as_str())]).get())).collect(),
        refusals: Refused::ALL.iter().map(|r| (r.as_str(), m.refusals.get_or_create(&[("reason", r.as_str())]).get())).collect(),
        onboarded: m.onboarded.get(),
        onboarding_retries: m.onboarding_retries.get(),
        onboarding_failures: m.onboarding_failures.get(),
        broker_clients: m.broker_clients.get(),
        mcp_sessions: m.mcp_sessions.get(),
        calls_per_s: m.calls_rate.series(now),
        onboarded_per_s: m.onboarding_rate.series(now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exposition names every family with its help and type, and counts move.
    #[test]
    fn the_exposition_carries_every_family_and_counts_move() {
        let before = exposition(&DeviceCounts::default());
        let calls = |text: &str| -> f64 {
            text.lines().find(|l| l.starts_with("mcpdev_calls_total{outcome=\"ok\"}")).and_then(|l| l.rsplit(' ').next()).and_then(|v| v.parse().ok()).unwrap()
        };
        call_done(Outcome::Ok, Duration::from_millis(3));
        refused(Refused::Origin);
        let after = exposition(&DeviceCounts::count([("ready", "websocket"), ("ready", "websocket"), ("listing", "bogus")].into_iter()));
        assert!(calls(&after) >= calls(&before) + 1.0, "{after}");
        for family in ["# TYPE mcpdev_calls counter", "# TYPE mcpdev_call_duration_seconds histogram", "# TYPE mcpdev_refusals counter", "# TYPE mcpdev_devices gauge", "# TYPE mcpdev_onboarding_retries counter", "# TYPE mcpdev_broker_clients gauge", "# TYPE mcpdev_mcp_sessions gauge"] {
            assert!(after.contains(family), "{family} missing from\n{after}");
        }
        assert!(after.contains("mcpdev_devices{state=\"ready\",transport=\"websocket\"} 2"), "{after}");
        assert!(after.contains("mcpdev_devices{state=\"listing\",transport=\"other\"} 1"), "{after}");
        assert!(after.ends_with("# EOF\n") && after.matches("# EOF").count() == 1, "{after}");
        assert!(after.contains("\nprocess_resident_memory_bytes ") && after.contains("\nprocess_cpu_seconds_total "), "the standard process families: {after}");
        assert!(!after.contains("mcpdev_resident_memory") && !after.contains("mcpdev_uptime"), "no names of our own for them: {after}");
        let build = format!("mcpdev_build_info{{version=\"{}\",commit=\"{}\"}} 1", env!("CARGO_PKG_VERSION"), env!("MCPDEV_COMMIT"));
        assert!(after.contains(&build), "{build} in {after}");
        let text = text_format(&after);
        assert!(text.contains("# TYPE mcpdev_calls_total counter\nmcpdev_calls_total{"), "{text}");
        assert!(!text.contains("# EOF") && !text.contains("# UNIT"), "{text}");
    }
}
