//! Devices as standard MCP servers: the bridge between MCP hosts (Claude Desktop, Cursor, SDK
//! clients) and the devices connected to the hub.
//!
//! Built on the official Rust SDK (`rmcp`), which speaks every protocol version from
//! `2024-11-05` to `2026-07-28` (`server/discover`, stateless requests) over Streamable HTTP;
//! the legacy HTTP+SSE transport, which rmcp no longer has, is in [`sse`]. The device side stays
//! `2024-11-05`: the bridge translates.
//!
//! - `/mcp` offers every connected device's tools as `<alias>.<tool>`, plus `list_devices`;
//!   above `--mcp-fleet-threshold` devices it offers the fleet tools instead ([`fleet`]);
//!   `/devices/<id>/mcp` always offers one device's tools under their own names.
//! - A session's plain `tools/call` of a device tool is answered by [`direct`], without rmcp's
//!   per-session worker and SSE stream; everything else, and anything unusual, goes to rmcp.
//! - Tools are dynamic: `tools.listChanged` is declared and every open session hears when a
//!   device connects, disconnects or changes its tools, at most once a second ([`notifier`]).
//! - Open sessions are capped in total and per peer address, on every endpoint and transport
//!   ([`sessions`]).
//! - Slow tools run as MCP Tasks (2025-11-25): a `tools/call` with `params.task` answers a task
//!   at once, polled with `tasks/get|result|list|cancel` ([`task_rpc`], kept in [`tasks`]; a
//!   task another hub of the cluster holds is asked of it); a
//!   call with a `progressToken` hears its own stages as `notifications/progress` ([`Stage`])
//!   once it has waited [`DEFAULT_PROGRESS_AFTER`] or its device reports progress: a call answered
//!   sooner is answered alone, as one JSON body on the direct path (rmcp's SDK client sends a
//!   token with every request, and a stream of reports per quick call cost the hub 3× its CPU).
//! - Device notifications become resources: `mcpdev://devices/<id>/notifications` (subscribe
//!   to get `notifications/resources/updated`), beside `mcpdev://devices/<id>` (its description).

pub mod catalogue;
pub mod direct;
pub mod fleet;
pub mod http;
mod moving;
pub mod naming;
pub mod notifier;
pub mod progress;
pub mod results;
pub mod sessions;
pub mod sse;
pub mod task_rpc;
pub mod tasks;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, JsonObject, CallToolResult, CacheScope, ContentBlock, Implementation, ListPromptsRequestMethod,
    ListPromptsResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, ServerCapabilities, ServerConfig, SubscribeRequestParams, SubscriptionFilter,
    UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};

use crate::hub::Hub;
use crate::links::DeviceHandle;
use crate::session::Phase;
use catalogue::{Catalogue, Catalogues, Offered, Rules};
pub use naming::Naming;
use notifier::Notifier;

/// Which devices an endpoint offers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    All,
    Device(String),
}

/// Settings of the MCP endpoints.
#[derive(Debug, Clone)]
pub struct BridgeConfig {
    pub call_timeout: Duration,
    pub naming: Naming,
    /// Also offer tools the device marks user-only (`audience: ["user"]`).
    pub user_tools: bool,
    pub page_size: usize,
    /// A bearer token MCP clients must send; none means loopback access is enough.
    pub token: Option<String>,
    /// Open MCP sessions allowed, in total and per peer address ([`sessions`]).
    pub max_sessions: u32,
    pub max_sessions_per_peer: u32,
    /// A session idle this long may be reclaimed for a new one when a cap is full.
    pub reclaim_idle: Duration,
    /// Devices connected above which `/mcp` offers the fleet tools instead of every device's
    /// tools ([`fleet`]).
    pub fleet_threshold: usize,
    /// Tasks held at once, in total and per session ([`tasks`]).
    pub task_limits: tasks::Limits,
    /// How long a call with a progress token waits before its stages are reported.
    pub progress_after: Duration,
}

impl Default for BridgeConfig {
    fn default() -> Self {
        Self {
            call_timeout: Duration::from_secs(60),
            naming: Naming::Prefixed,
            user_tools: false,
            page_size: 100,
            token: None,
            max_sessions: sessions::DEFAULT_TOTAL,
            max_sessions_per_peer: sessions::DEFAULT_PER_PEER,
            reclaim_idle: sessions::DEFAULT_RECLAIM_IDLE,
            fleet_threshold: fleet::DEFAULT_THRESHOLD as usize,
            task_limits: tasks::Limits::default(),
            progress_after: DEFAULT_PROGRESS_AFTER,
        }
    }
}

/// What the bridge shares between sessions.
pub struct Shared {
    pub hub: Arc<Hub>,
    pub config: BridgeConfig,
    pub notifier: Arc<Notifier>,
    /// Every endpoint's tools, kept up to date on change.
    pub catalogues: Catalogues,
    /// The open sessions of every endpoint, within their caps.
    pub sessions: Arc<sessions::SessionCaps>,
    /// The face `/mcp` shows, and the key of the fleet tools' cursors.
    pub fleet: Arc<fleet::Fleet>,
    /// The tasks hosts created, on every endpoint.
    pub tasks: Arc<tasks::Tasks>,
    /// Each Streamable HTTP session's peer (by `Mcp-Session-Id`), to notify of its tasks.
    pub task_peers: std::sync::Mutex<std::collections::HashMap<Arc<str>, rmcp::Peer<RoleServer>>>,
}

/// A stage of a device tool's call, reported to a host that sent a `progressToken`.
#[derive(Debug, Clone, PartialEq)]
pub enum Stage {
    /// Handed to the device's link.
    Sent,
    /// Still waiting for the device: the `n`th report (the first a second after sending, then
    /// every [`WAITING_EVERY`]).
    Waiting(u32),
    Answered,
    /// The device's own progress ([`progress`]): a fraction of its work, and its message.
    Device { fraction: f64, message: Option<String> },
}

/// How often a call that waits for its device says so.
pub const WAITING_EVERY: Duration = Duration::from_secs(5);

impl Stage {
    pub fn message(&self) -> &str {
        match self {
            Stage::Sent => "sent to the device",
            Stage::Waiting(_) => "waiting for the device",
            Stage::Answered => "answered by the device",
            Stage::Device { message, .. } => message.as_deref().unwrap_or("the device reports progress"),
        }
    }

    /// Where the stage stands, out of 3: sent 1, waiting just above (1.05 to 1.1), the
    /// device's own progress from 1.1 to 2.9, answered 3.
    pub fn value(&self) -> f64 {
        match self {
            Stage::Sent => 1.0,
            Stage::Waiting(n) => 1.0 + 0.1 * f64::from(*n) / f64::from(n + 1),
            Stage::Answered => 3.0,
            Stage::Device { fraction, .. } => 1.1 + fraction.clamp(0.0, 1.0) * 1.8,
        }
    }

    /// The `notifications/progress` params.
    pub fn progress(&self, token: &Value) -> Value {
        json!({"progressToken": token, "progress": self.value(), "total": 3.0, "message": self.message()})
    }
}

/// Where a call reports its stages, if anywhere.
pub type Progress = Option<Arc<dyn Fn(Stage) + Send + Sync>>;

/// How long a call waits for its device before its stages are reported (unless the device
/// reports progress of its own sooner), unless `--mcp-progress-after` says otherwise: a host
/// hears of the calls it waits for, and a call answered within this is answered alone. Below
/// what a person notices as waiting.
pub const DEFAULT_PROGRESS_AFTER: Duration = Duration::from_millis(250);

/// A call's reports, passed on only while they rise (the hub's stages and the device's own
/// progress share one scale), and only once the call is [`open`](Reporter::open): after
/// [`BridgeConfig::progress_after`], or at the device's first report of its own.
#[derive(Clone)]
struct Reporter {
    progress: Progress,
    state: Arc<std::sync::Mutex<Reports>>,
}

/// What a call has reported: the last value passed on, and whether reports are passed on yet.
#[derive(Default)]
struct Reports {
    last: f64,
    open: bool,
}

impl Reporter {
    fn new(progress: &Progress) -> Self {
        Self { progress: progress.clone(), state: Arc::default() }
    }

    /// Passes `stage` on if the call is open (a device's own report opens it) and it rises.
    fn report(&self, stage: Stage) {
        self.pass(stage, false);
    }

    /// Opens the call's reports: the first is "sent", unless something higher was passed on.
    fn open(&self) {
        self.pass(Stage::Sent, true);
    }

    fn pass(&self, stage: Stage, open: bool) {
        let Some(p) = &self.progress else { return };
        let rises = {
            let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            state.open |= open || matches!(stage, Stage::Device { .. });
            let rises = state.open && stage.value() > state.last;
            if rises {
                state.last = stage.value();
            }
            rises
        };
        if rises {
            p(stage);
        }
    }
}

impl Shared {
    /// The devices an endpoint offers (one lookup for a device's own endpoint, whatever the
    /// fleet's size), in Device-Id order.
    fn devices(&self, scope: &Scope) -> Vec<DeviceHandle> {
        self.listing(scope, true)
    }

    /// The bridge's one device listing (everything the endpoints offer, call and describe comes
    /// from it): this hub's devices and, in a cluster, the other hubs' ready devices as local
    /// stand-ins (docs/cluster.md); a device served here is never also offered as a stand-in.
    /// `sorted`: in Device-Id order (else in no order, without sorting the fleet).
    fn listing(&self, scope: &Scope, sorted: bool) -> Vec<DeviceHandle> {
        match scope {
            Scope::All => {
                let registry = &self.hub.registry;
                let mut all = if sorted { registry.handles() } else { registry.unsorted() };
                let remote = stand_ins(&self.hub);
                if !remote.is_empty() {
                    all.extend(remote);
                    if sorted {
                        all.sort_by(|a, b| a.device_id.cmp(&b.device_id));
                    }
                }
                all
            }
            Scope::Device(id) => self.device(id).into_iter().collect(),
        }
    }

    /// Up to `limit` (at least 1) devices of the `/mcp` listing (served here, and other hubs'
    /// stand-ins) in Device-Id order after the Device-Id `after`, and the cursor of the next page
    /// when more follow. O(limit) on a single hub; in a cluster, plus a pass over the stand-ins.
    fn listing_after(&self, after: Option<&str>, limit: usize) -> (Vec<DeviceHandle>, Option<String>) {
        let limit = limit.max(1);
        let (mut page, next) = self.hub.registry.handles_after(after, limit);
        let mut remote = stand_ins(&self.hub);
        remote.retain(|p| after.is_none_or(|a| p.device_id.as_str() > a));
        if remote.is_empty() {
            return (page, next);
        }
        page.extend(remote);
        page.sort_by(|a, b| a.device_id.cmp(&b.device_id));
        let more = page.len() > limit || next.is_some();
        page.truncate(limit);
        let next = more.then(|| page.last().map(|h| h.device_id.clone())).flatten();
        (page, next)
    }

    /// Up to `limit` devices of the whole cluster in Device-Id order after the Device-Id `after`
    /// (this hub's, and the others' from their index, a stand-in's full description where one
    /// is made), and the cursor of the next page when more follow. O(limit), whatever the cluster.
    fn cluster_after(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> (Vec<fleet::Seen>, Option<String>) {
        let registry = &self.hub.registry;
        let (local, next) = registry.handles_after(after, limit);
        let Some(c) = crate::hub::remote::of(&self.hub) else {
            return (local.into_iter().map(|h| fleet::Seen::Here(h, None)).collect(), next);
        };
        // The others' devices, not past the end of the local page when more local ones follow.
        let upto = next.clone();
        let remote = c
            .remote_page(after, limit + 1)
            .into_iter()
            .filter(|(id, _)| {
                upto.as_deref().is_none_or(|u| id.as_str() <= u) && registry.get(id).is_none()
            });
        let mut all: Vec<(String, fleet::Seen)> = local
            .into_iter()
            .map(|h| (h.device_id.clone(), fleet::Seen::Here(h, Some(c.me().to_string()))))
            .collect();
        all.extend(remote.map(|(id, row)| {
            let row: serde_json::Value = serde_json::from_str(&row).unwrap_or_default();
            let seen = match c.cached_proxy(&id) {
                Some(h) => fleet::Seen::Here(h, row["hub"].as_str().map(str::to_string)),
                None => fleet::Seen::Indexed { row },
            };
            (id, seen)
        }));
        all.sort_by(|a, b| a.0.cmp(&b.0));
        let more = all.len() > limit || next.is_some();
        all.truncate(limit);
        let next = if more {
            all.last().map(|(id, _)| id.clone())
        } else {
            None
        };
        (all.into_iter().map(|(_, s)| s).collect(), next)
    }

    /// One device of the listing, by Device-Id: served here, or another hub's stand-in.
    fn device(&self, device_id: &str) -> Option<DeviceHandle> {
        self.hub.registry.get(device_id).or_else(|| crate::hub::remote::of(&self.hub)?.cached_proxy(device_id))
    }

    /// Reads the tools an endpoint offers (kept and updated per device, not rebuilt per request).
    fn catalogue<T>(&self, scope: &Scope, f: impl FnOnce(&Catalogue) -> T) -> T {
        let rules = Rules { scope, naming: self.config.naming, user_tools: self.config.user_tools, aliases: &self.hub.config.aliases };
        let devices = catalogue::Devices {
            all: || self.listing(scope, false),
            one: |id: &str| match scope {
                Scope::Device(only) if only != id => None,
                _ => self.device(id),
            },
        };
        self.catalogues.read(&rules, devices, f)
    }

    /// The tool an endpoint offers under `name`.
    fn offered(&self, scope: &Scope, name: &str) -> Option<Offered> {
        self.catalogue(scope, |c| c.get(name))
    }

    /// Relays a device's tool call for an MCP client ([`prepare_call`] checked it first). It
    /// ends within `--mcp-timeout`, or with an error once `cancelled` completes (the session
    /// drops the device's late reply).
    async fn relay_call(&self, (device, params): (DeviceHandle, Value), cancelled: impl Future<Output = ()>, progress: &Progress) -> Result<CallToolResult, McpError> {
        let timeout = self.config.call_timeout;
        let reporter = Reporter::new(progress);
        let report = |stage| reporter.report(stage);
        // The device is asked for its own progress too, under a token of the hub's.
        let mut params = params;
        let _route = progress.as_ref().map(|_| {
            let to_host = reporter.clone();
            let route = self.notifier.progress.route(&device.device_id, Arc::new(move |r: progress::Reported| to_host.report(Stage::Device { fraction: r.fraction, message: r.message })));
            if let Some(p) = params.as_object_mut() {
                p.insert("_meta".into(), json!({"progressToken": route.token}));
            }
            route
        });
        // Bounded by the handle itself (it ends within `timeout` and a second): no timer of its own.
        let call = device.request("tools/call", Some(params), timeout);
        let waiting = async {
            if progress.is_none() {
                return std::future::pending().await;
            }
            // One timer armed at a time: the opening, then each "waiting" report.
            let sent = tokio::time::Instant::now();
            tokio::time::sleep_until(sent + self.config.progress_after).await;
            reporter.open();
            let mut next = sent + Duration::from_secs(1);
            for n in 1.. {
                tokio::time::sleep_until(next).await;
                report(Stage::Waiting(n));
                next += WAITING_EVERY;
            }
        };
        tokio::select! {
            outcome = call => {
                report(Stage::Answered);
                Ok(results::answered_by(match outcome {
                    Ok(result) => results::from_device(&result),
                    Err(e) => results::from_error(&device.device_id, &e),
                }, &device.device_id))
            }
            () = cancelled => Err(McpError::internal_error("cancelled by the client", None)),
            () = waiting => Err(McpError::internal_error("the call's progress ended", None)),
        }
    }

    /// A tool call on an endpoint, as rmcp's handler, the direct path and a task all make it:
    /// a fleet tool, `list_devices`, or a device's tool (checked, then relayed). Ends within
    /// `--mcp-timeout`, or once `cancelled` completes.
    pub async fn run_call(self: &Arc<Self>, scope: &Scope, name: &str, arguments: Option<JsonObject>, cancelled: impl Future<Output = ()>, progress: &Progress) -> Result<CallToolResult, McpError> {
        // The fleet tools answer on `/mcp` in either face: a host that listed them keeps them
        // working across a switch, and their names are no device's there.
        if *scope == Scope::All && fleet::is_fleet_tool(name) {
            return Ok(fleet::call(self, name, arguments, cancelled, progress).await);
        }
        let mut offered = self.offered(scope, name);
        // A device whose hub went away: waited for while the cluster takes it over.
        if offered.is_none()
            && let Some(device_id) = self.named_device(scope, name)
            && moving::wait_for(self, &device_id, self.config.call_timeout).await
        {
            offered = self.offered(scope, name);
        }
        let Some(offered) = offered else {
            return match self.unavailable(scope, name) {
                Some(why) => Ok(CallToolResult::error(vec![ContentBlock::text(why)])),
                None => Err(McpError::invalid_params(format!("Unknown tool: {name}"), None)),
            };
        };
        let call = match prepare_call(&offered, arguments) {
            None => return Ok(self.list_devices(scope)),
            Some(Err(refused)) => return Ok(refused),
            Some(Ok(call)) => call,
        };
        drop(offered);
        self.relay_call(call, cancelled, progress).await
    }

    /// The device a tool name is for: the endpoint's own, or the one its prefix (`dev-<hex>`, an
    /// alias) names on `/mcp`.
    fn named_device(&self, scope: &Scope, name: &str) -> Option<String> {
        let aliases = &self.hub.config.aliases;
        match scope {
            Scope::Device(id) => Some(id.clone()),
            Scope::All => {
                let (prefix, _) = name.split_once('.')?;
                match self.hub.registry.find(|h| naming::prefix_for(&h.device_id, aliases) == prefix) {
                    Some(h) => Some(h.device_id),
                    None => naming::device_for_prefix(prefix, aliases),
                }
            }
        }
    }

    /// Why a name that is in no catalogue cannot be called, when its prefix (`dev-<hex>`, an
    /// alias) or its endpoint names a device that is offline or still onboarding: a text the
    /// model can act on. `None` when no device is named, or it is ready (the tool is unknown).
    fn unavailable(&self, scope: &Scope, name: &str) -> Option<String> {
        let device_id = self.named_device(scope, name)?;
        match self.device(&device_id).map(|h| h.phase()) {
            None | Some(None) => Some(format!(
                "device {device_id} is not connected, so {name} cannot run now; nothing was sent. Call it again once the device is back (list_devices shows the connected devices)."
            )),
            Some(Some(Phase::Ready)) => None,
            Some(Some(phase)) => Some(format!(
                "device {device_id} is connected but still onboarding ({}); nothing was sent. Call {name} again in a few seconds.",
                serde_json::to_value(phase).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
            )),
        }
    }

    /// Every device of a fleet below the threshold; above it the first
    /// max(threshold, [`fleet::DEVICES_PAGE_MAX`]) by Device-Id, with `truncated` and where to
    /// look for the rest (`search_devices` pages through them): never one answer of 10,000.
    fn list_devices(&self, scope: &Scope) -> CallToolResult {
        let (handles, more) = match scope {
            Scope::All => self.listing_after(None, self.config.fleet_threshold.max(fleet::DEVICES_PAGE_MAX)),
            Scope::Device(_) => (self.devices(scope), None),
        };
        let mut devices = Vec::new();
        for h in handles {
            if let Some(info) = h.snapshot() {
                devices.push(json!({
                    "device_id": info.device_id,
                    "prefix": naming::prefix_for(&info.device_id, &self.hub.config.aliases),
                    "transport": info.transport,
                    "phase": info.phase,
                    "server_name": info.name(),
                    "tools": info.tools.offered_count(self.config.user_tools),
                    "mcp_url": format!("/devices/{}/mcp", info.device_id),
                }));
            }
        }
        let mut value = json!({"devices": devices});
        if more.is_some() {
            value["truncated"] = json!(true);
            value["more"] = json!(format!("only the first {} devices are listed; {} finds and pages through every device", devices.len(), fleet::SEARCH));
        }
        let mut result = CallToolResult::success(vec![ContentBlock::text(value.to_string())]);
        result.structured_content = Some(value);
        result
    }
}

/// A device tool's call, ready to relay: its device and the request's params. `None` for a
/// tool that is not a device's (`list_devices`); see [`prepare`].
fn prepare_call(offered: &Offered, arguments: Option<JsonObject>) -> Option<Result<(DeviceHandle, Value), CallToolResult>> {
    let device = DeviceHandle::clone(offered.device.as_deref()?);
    Some(prepare(device, offered.device_name(), offered.input_schema(), arguments))
}

/// A call of the device's tool `name`, ready to relay. The arguments are checked against the
/// tool's `inputSchema` first, since the stock firmware truncates floats and silently
/// substitutes defaults; arguments that fail are the call's answer, and nothing is sent.
fn prepare(device: DeviceHandle, name: &str, schema: &JsonObject, arguments: Option<JsonObject>) -> Result<(DeviceHandle, Value), CallToolResult> {
    let arguments = Value::Object(arguments.unwrap_or_default());
    if let Err(errors) = crate::args::validate_object(schema, &arguments) {
        let text = errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n");
        return Err(CallToolResult::error(vec![ContentBlock::text(format!("invalid arguments, nothing was sent:\n{text}"))]));
    }
    // Built by hand: `json!` would copy the arguments into a new tree.
    let mut params = JsonObject::new();
    params.insert("name".into(), Value::String(name.to_string()));
    params.insert("arguments".into(), arguments);
    Ok((device, Value::Object(params)))
}

/// How long past `--mcp-timeout` a call may take at most: the device's handle ends it within a
/// second of its timeout ([`DeviceHandle::request`]); a forwarded `tasks/result` waits this long.
const CALL_GRACE: Duration = Duration::from_secs(2);
/// Longest `resources/list` cursor accepted: a Device-Id, far shorter.
const RESOURCE_CURSOR_MAX: usize = 128;

/// One MCP session's handler (rmcp makes one per session).
#[derive(Clone)]
pub struct Bridge {
    shared: Arc<Shared>,
    scope: Scope,
    session: u64,
    /// Counts this session in `mcpdev_mcp_sessions` until it ends.
    _open: Arc<crate::metrics::SessionGuard>,
    /// The session's place within the session caps, given back when rmcp drops the handler.
    _slot: Option<Arc<sessions::Slot>>,
    /// Takes the session's peer out of the shared tables when rmcp drops the handler.
    ended: Arc<SessionEnd>,
}

/// A session's entries in [`Notifier`] and [`Shared::task_peers`], removed when the session ends:
/// each holds the session's rmcp peer, and a peer keeps its channel's buffers (about 10 KB)
/// alive (issue 46.5: 40 ended sessions held 0.6 MB until a later session swept them).
struct SessionEnd {
    shared: Arc<Shared>,
    session: u64,
    /// Its `Mcp-Session-Id`, once `initialized` registered its peer for tasks.
    http_id: std::sync::OnceLock<Arc<str>>,
}

impl Drop for SessionEnd {
    fn drop(&mut self) {
        self.shared.notifier.remove_peer(self.session);
        if let Some(id) = self.http_id.get() {
            let gone = self.shared.task_peers.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(id);
            drop(gone);
        }
    }
}

static NEXT_SESSION: AtomicU64 = AtomicU64::new(1);

impl Bridge {
    pub fn new(shared: Arc<Shared>, scope: Scope, slot: Option<sessions::Slot>) -> Self {
        let session = NEXT_SESSION.fetch_add(1, Ordering::Relaxed);
        let ended = Arc::new(SessionEnd { shared: shared.clone(), session, http_id: std::sync::OnceLock::new() });
        Self { shared, scope, session, _open: Arc::new(crate::metrics::SessionGuard::open()), _slot: slot.map(Arc::new), ended }
    }

    fn devices(&self) -> Vec<DeviceHandle> {
        self.shared.devices(&self.scope)
    }

    /// Whether this endpoint shows the fleet face now (only `/mcp` and `/sse` ever do).
    fn fleet_face(&self) -> bool {
        self.scope == Scope::All && self.shared.fleet.is_fleet(listed_count(&self.shared.hub))
    }
}

/// In a cluster, the other hubs' devices as local stand-ins, but for any device served here
/// (it is never offered twice); none outside a cluster.
fn stand_ins(hub: &Hub) -> Vec<DeviceHandle> {
    let Some(cluster) = crate::hub::remote::of(hub) else { return Vec::new() };
    let mut remote = cluster.proxies();
    remote.retain(|p| hub.registry.get(&p.device_id).is_none());
    remote
}

/// How many devices `/mcp` counts on `hub` (for its face): its own and, in a cluster, every
/// other hub's, listed in their index or not.
fn listed_count(hub: &Hub) -> usize {
    let Some(c) = crate::hub::remote::of(hub) else {
        return hub.registry.len();
    };
    let unlisted: u64 = c.unlisted().iter().map(|(_, n)| *n).sum();
    hub.registry.len() + c.remote_count() + usize::try_from(unlisted).unwrap_or(usize::MAX)
}

pub fn device_uri(device_id: &str) -> String {
    format!("mcpdev://devices/{device_id}")
}

pub fn notifications_uri(device_id: &str) -> String {
    format!("mcpdev://devices/{device_id}/notifications")
}

impl ServerHandler for Bridge {
    fn get_info(&self) -> ServerConfig {
        let name = match &self.scope {
            Scope::All => "mcpdev hub".to_string(),
            Scope::Device(id) => format!("mcpdev device {id}"),
        };
        let mut capabilities = ServerCapabilities::builder().enable_tools().enable_tool_list_changed().enable_resources().enable_resources_subscribe().build();
        let instructions = match &self.scope {
            Scope::All => {
                // Tells a client (`mcpdev call --url`) that it can reach one device's tool
                // without listing the fleet.
                let mut fleet = JsonObject::new();
                fleet.insert("tools".into(), json!(fleet::NAMES));
                capabilities.experimental = Some([(fleet::CAPABILITY.to_string(), fleet)].into_iter().collect());
                format!(
                    "Tools of voice/IoT devices connected to an mcpdev hub; each runs on a device. With more than {} devices connected, the hub offers {} (search first), {} and {} instead of every device's tools.",
                    self.shared.config.fleet_threshold,
                    fleet::SEARCH,
                    fleet::LIST_TOOLS,
                    fleet::CALL
                )
            }
            Scope::Device(_) => "The tools of one voice/IoT device connected to an mcpdev hub.".to_string(),
        };
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(name, env!("CARGO_PKG_VERSION")))
            .with_instructions(instructions)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // A Streamable HTTP session's peer, to tell it of its tasks.
        let session = context.extensions.get::<axum::http::request::Parts>().and_then(|p| p.headers.get("mcp-session-id")?.to_str().ok().map(Arc::<str>::from));
        if let Some(session) = session {
            let mut peers = self.shared.task_peers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if peers.len() >= self.shared.config.max_sessions as usize {
                peers.retain(|_, p| !p.is_transport_closed());
            }
            peers.insert(session.clone(), context.peer.clone());
            let _ = self.ended.http_id.set(session);
        }
        self.shared.notifier.add_peer(self.scope.clone(), self.session, context.peer);
    }

    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        Some(requested.supported_by(&self.get_info().capabilities))
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let key = self.shared.notifier.add_listener(self.scope.clone(), context.sink().clone());
        context.cancelled().await;
        self.shared.notifier.remove_listener(key);
        Ok(())
    }

    async fn list_tools(&self, request: Option<PaginatedRequestParams>, _cx: RequestContext<RoleServer>) -> Result<ListToolsResult, McpError> {
        let cursor = request.and_then(|r| r.cursor);
        if self.fleet_face() {
            if cursor.is_some() {
                return Err(McpError::invalid_params(
                    "this listing's cursor is of every device's tools, but the hub now offers its fleet tools (tools/list_changed said so); list again without a cursor",
                    None,
                ));
            }
            return Ok(ListToolsResult { tools: fleet::tools(), next_cursor: None, ..Default::default() }.with_ttl_ms(0).with_cache_scope(CacheScope::Public));
        }
        let page = self.shared.catalogue(&self.scope, |c| c.page(cursor.as_deref(), self.shared.config.page_size));
        let page = page.map_err(|why| McpError::invalid_params(why, None))?;
        Ok(ListToolsResult { tools: page.tools, next_cursor: page.next_cursor, ..Default::default() }.with_ttl_ms(0).with_cache_scope(CacheScope::Public))
    }

    async fn call_tool(&self, request: CallToolRequestParams, cx: RequestContext<RoleServer>) -> Result<CallToolResponse, McpError> {
        // A progress token: the call's stages go to the host, in order, on the request's stream,
        // coalesced to the latest while the host is slow ([`progress::drain`]).
        let mut sending = None;
        let progress: Progress = cx.meta.get_progress_token().map(|token| {
            let (tx, rx) = progress::latest::<Stage>();
            let peer = cx.peer.clone();
            let token = serde_json::to_value(&token).unwrap_or_default();
            sending = Some(tokio::spawn(progress::drain(rx, move |stage: Stage| {
                let (peer, params) = (peer.clone(), serde_json::from_value(stage.progress(&token)));
                async move {
                    let Ok(params) = params else { return false };
                    peer.notify_progress(params).await.is_ok()
                }
            })));
            Arc::new(move |stage| {
                tx.send_replace(Some(stage));
            }) as Arc<dyn Fn(Stage) + Send + Sync>
        });
        // notifications/cancelled: stop waiting.
        let answer = self.shared.run_call(&self.scope, &request.name, request.arguments, cx.ct.cancelled(), &progress).await;
        // Every stage is on its way before the answer ends the request's stream.
        drop(progress);
        if let Some(sending) = sending {
            let _ = tokio::time::timeout(Duration::from_secs(1), sending).await;
        }
        answer.map(Into::into)
    }

    // No prompts: answer "method not found", as the capabilities say, rather than rmcp's default
    // empty list (2026-07-28: a server that answers prompts/list MUST declare prompts in
    // server/discover).
    async fn list_prompts(&self, _request: Option<PaginatedRequestParams>, _cx: RequestContext<RoleServer>) -> Result<ListPromptsResult, McpError> {
        Err(McpError::method_not_found::<ListPromptsRequestMethod>())
    }

    /// Two resources a device, paged by Device-Id (half a tools page of devices a page): a
    /// cursor is the last Device-Id of the page before, so it stays valid while devices come and
    /// go, and a page costs its own devices, never the fleet's.
    async fn list_resources(&self, request: Option<PaginatedRequestParams>, _cx: RequestContext<RoleServer>) -> Result<ListResourcesResult, McpError> {
        let cursor = request.and_then(|r| r.cursor).filter(|c| !c.is_empty());
        if let Some(c) = &cursor
            && (c.len() > RESOURCE_CURSOR_MAX || c.chars().any(char::is_control))
        {
            return Err(McpError::invalid_params(format!("this resources/list cursor is not one the hub gave ({} bytes); start again without a cursor", c.len()), None));
        }
        let (devices, next_cursor) = match &self.scope {
            Scope::All => self.shared.listing_after(cursor.as_deref(), (self.shared.config.page_size / 2).max(1)),
            Scope::Device(_) => (self.devices(), None),
        };
        let mut resources = Vec::new();
        for h in devices {
            resources.push(
                Resource::new(device_uri(&h.device_id), format!("device {}", h.device_id))
                    .with_description("The device: hello, serverInfo, tools, counters")
                    .with_mime_type("application/json"),
            );
            resources.push(
                Resource::new(notifications_uri(&h.device_id), format!("notifications of {}", h.device_id))
                    .with_description("The latest notifications the device sent; subscribe to hear of new ones")
                    .with_mime_type("application/json"),
            );
        }
        Ok(ListResourcesResult { resources, next_cursor, ..Default::default() })
    }

    async fn read_resource(&self, request: ReadResourceRequestParams, _cx: RequestContext<RoleServer>) -> Result<ReadResourceResponse, McpError> {
        let uri = request.uri.to_string();
        // The device the URI names, looked up (not searched for among every device), if this
        // endpoint offers it.
        let named = uri.strip_prefix("mcpdev://devices/").map(|rest| rest.strip_suffix("/notifications").unwrap_or(rest));
        let offered = named.filter(|id| matches!(&self.scope, Scope::All) || matches!(&self.scope, Scope::Device(own) if own == id));
        let text = offered.and_then(|id| self.shared.device(id)).and_then(|h| {
            if uri == device_uri(&h.device_id) {
                h.snapshot().map(|info| serde_json::to_string_pretty(&info).unwrap_or_default())
            } else if uri == notifications_uri(&h.device_id) {
                Some(serde_json::to_string_pretty(&json!({"notifications": self.shared.notifier.recent(&h.device_id)})).unwrap_or_default())
            } else {
                None
            }
        });
        if let Some(text) = text {
            let contents = ResourceContents::TextResourceContents { uri: uri.clone(), mime_type: Some("application/json".into()), text, meta: None };
            return Ok(ReadResourceResult::new(vec![contents]).into());
        }
        // `data.uri` names the missing resource (SEP-2164, a SHOULD since 2026-07-28).
        Err(McpError::resource_not_found(format!("no connected device has the resource {uri}"), Some(json!({"uri": uri}))))
    }

    #[allow(deprecated)]
    async fn subscribe(&self, request: SubscribeRequestParams, cx: RequestContext<RoleServer>) -> Result<(), McpError> {
        if self.shared.notifier.subscribe(self.scope.clone(), request.uri.to_string(), self.session, cx.peer) {
            Ok(())
        } else {
            Err(McpError::invalid_request(
                format!("this session holds {} resource subscriptions, the most it may; unsubscribe from some first", notifier::MAX_SUBSCRIPTIONS),
                None,
            ))
        }
    }

    #[allow(deprecated)]
    async fn unsubscribe(&self, request: UnsubscribeRequestParams, _cx: RequestContext<RoleServer>) -> Result<(), McpError> {
        self.shared.notifier.unsubscribe(request.uri.as_ref(), self.session);
        Ok(())
    }
}
