//! Devices as standard MCP servers: the bridge between MCP hosts (Claude Desktop, Cursor, SDK
//! clients) and the devices connected to the hub.
//!
//! Built on the official Rust SDK (`rmcp`), which speaks every protocol version from
//! `2024-11-05` to `2026-07-28` (`server/discover`, stateless requests) over Streamable HTTP;
//! the legacy HTTP+SSE transport, which rmcp no longer has, is in [`sse`]. The device side stays
//! `2024-11-05`: the bridge translates.
//!
//! - `/mcp` offers every connected device's tools as `<alias>.<tool>`, plus `list_devices`;
//!   `/devices/<id>/mcp` offers one device's tools under their own names.
//! - Tools are dynamic: `tools.listChanged` is declared and every open session hears when a
//!   device connects, disconnects or changes its tools.
//! - Device notifications become resources: `mcpdev://devices/<id>/notifications` (subscribe
//!   to get `notifications/resources/updated`), beside `mcpdev://devices/<id>` (its description).

pub mod http;
pub mod naming;
pub mod notifier;
pub mod results;
pub mod sse;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CacheScope, ContentBlock, Implementation, ListPromptsRequestMethod,
    ListPromptsResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, ServerCapabilities, ServerConfig, SubscribeRequestParams, SubscriptionFilter, Tool,
    UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};

use crate::hub::Hub;
use crate::links::DeviceHandle;
pub use naming::Naming;
use notifier::Notifier;

/// Which devices an endpoint offers.
#[derive(Debug, Clone, PartialEq, Eq)]
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
}

impl Default for BridgeConfig {
    fn default() -> Self {
        Self { call_timeout: Duration::from_secs(60), naming: Naming::Prefixed, user_tools: false, page_size: 100, token: None }
    }
}

/// What the bridge shares between sessions.
pub struct Shared {
    pub hub: Arc<Hub>,
    pub config: BridgeConfig,
    pub notifier: Arc<Notifier>,
}

/// One MCP session's handler (rmcp makes one per session).
#[derive(Clone)]
pub struct Bridge {
    shared: Arc<Shared>,
    scope: Scope,
    session: u64,
}

static NEXT_SESSION: AtomicU64 = AtomicU64::new(1);

impl Bridge {
    pub fn new(shared: Arc<Shared>, scope: Scope) -> Self {
        Self { shared, scope, session: NEXT_SESSION.fetch_add(1, Ordering::Relaxed) }
    }

    fn devices(&self) -> Vec<DeviceHandle> {
        let all = self.shared.hub.registry.handles();
        match &self.scope {
            Scope::All => all,
            Scope::Device(id) => all.into_iter().filter(|h| &h.device_id == id).collect(),
        }
    }

    /// Every tool this endpoint offers, in a stable order: (exposed name, device, device's tool).
    async fn catalogue(&self) -> Vec<(String, Option<DeviceHandle>, Value)> {
        let mut out: Vec<(String, Option<DeviceHandle>, Value)> = Vec::new();
        if self.scope == Scope::All {
            out.push(("list_devices".into(), None, list_devices_tool()));
        }
        let aliases = &self.shared.hub.config.aliases;
        for handle in self.devices() {
            let Some(info) = handle.snapshot().await else { continue };
            let prefix = naming::prefix_for(&handle.device_id, aliases);
            for tool in info.tools.iter().filter(|t| self.shared.config.user_tools || !t.user_only) {
                let plain = self.scope != Scope::All
                    || (self.shared.config.naming == Naming::Plain && !out.iter().any(|(n, _, _)| *n == tool.name));
                let name = if plain && naming::is_valid(&tool.name) { Some(tool.name.clone()) } else { naming::qualify(&prefix, &tool.name) };
                match name {
                    Some(name) => out.push((name, Some(handle.clone()), tool.value())),
                    None => tracing::warn!(device = %handle.device_id, tool = %tool.name, "tool name does not fit MCP's name rules; not offered"),
                }
            }
        }
        out
    }

    /// The tool behind a name, looking only at the device its name points to (the device's own
    /// name on a per-device endpoint, `<prefix>.<tool>` on `/mcp`), so a call costs the same with
    /// one device or thousands. `None` leaves it to the full catalogue (plain names, `list_devices`).
    async fn find_by_prefix(&self, name: &str) -> Option<(String, Option<DeviceHandle>, Value)> {
        let aliases = &self.shared.hub.config.aliases;
        let (handle, tool_name) = match &self.scope {
            Scope::Device(_) => (self.devices().into_iter().next()?, name),
            Scope::All => {
                let (prefix, tool) = name.split_once('.')?;
                let handle = self.devices().into_iter().find(|h| naming::prefix_for(&h.device_id, aliases) == prefix)?;
                (handle, tool)
            }
        };
        let info = handle.snapshot().await?;
        let tool = info.tools.iter().find(|t| t.name == tool_name && (self.shared.config.user_tools || !t.user_only))?;
        Some((name.to_string(), Some(handle), tool.value()))
    }

    async fn list_devices(&self) -> CallToolResult {
        let mut devices = Vec::new();
        for h in self.devices() {
            if let Some(info) = h.snapshot().await {
                devices.push(json!({
                    "device_id": info.device_id,
                    "prefix": naming::prefix_for(&info.device_id, &self.shared.hub.config.aliases),
                    "transport": info.transport,
                    "phase": info.phase,
                    "server_name": info.server_name(),
                    "tools": info.tools.len(),
                    "mcp_url": format!("/devices/{}/mcp", info.device_id),
                }));
            }
        }
        let value = json!({"devices": devices});
        let mut result = CallToolResult::success(vec![ContentBlock::text(value.to_string())]);
        result.structured_content = Some(value);
        result
    }
}

fn list_devices_tool() -> Value {
    json!({
        "name": "list_devices",
        "description": "List the devices connected to this mcpdev hub: id, tool prefix, transport, state and tool count.",
        "inputSchema": {"type": "object", "properties": {}},
        "annotations": {"readOnlyHint": true, "idempotentHint": true},
    })
}

pub fn device_uri(device_id: &str) -> String {
    format!("mcpdev://devices/{device_id}")
}

pub fn notifications_uri(device_id: &str) -> String {
    format!("mcpdev://devices/{device_id}/notifications")
}

fn to_tool(name: &str, device_tool: &Value) -> Option<Tool> {
    let mut v = device_tool.clone();
    v["name"] = json!(name);
    // xiaozhi's user-only marker is not a standard tool annotation: keep it out of `annotations`.
    if v.pointer("/annotations/audience").is_some()
        && let Some(a) = v.get_mut("annotations").and_then(Value::as_object_mut)
    {
        a.remove("audience");
    }
    if v.get("inputSchema").is_none_or(|s| !s.is_object()) {
        v["inputSchema"] = json!({"type": "object", "properties": {}});
    }
    serde_json::from_value(v).ok()
}

impl ServerHandler for Bridge {
    fn get_info(&self) -> ServerConfig {
        let name = match &self.scope {
            Scope::All => "mcpdev hub".to_string(),
            Scope::Device(id) => format!("mcpdev device {id}"),
        };
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_resources()
                .enable_resources_subscribe()
                .build(),
        )
        .with_server_info(Implementation::new(name, env!("CARGO_PKG_VERSION")))
        .with_instructions("Tools of voice/IoT devices connected to an mcpdev hub. Each tool runs on a device; list_devices shows which are connected.")
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.shared.notifier.add_peer(self.scope.clone(), context.peer);
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
        let catalogue = self.catalogue().await;
        let start = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(c) => c
                .parse::<usize>()
                .ok()
                .filter(|n| *n <= catalogue.len())
                .ok_or_else(|| McpError::invalid_params(format!("Invalid cursor: {c}"), None))?,
        };
        let end = (start + self.shared.config.page_size.max(1)).min(catalogue.len());
        let tools = catalogue[start..end].iter().filter_map(|(name, _, t)| to_tool(name, t)).collect();
        let next_cursor = (end < catalogue.len()).then(|| end.to_string());
        Ok(ListToolsResult { tools, next_cursor, ..Default::default() }.with_ttl_ms(0).with_cache_scope(CacheScope::Public))
    }

    async fn call_tool(&self, request: CallToolRequestParams, cx: RequestContext<RoleServer>) -> Result<CallToolResponse, McpError> {
        let found = match self.find_by_prefix(&request.name).await {
            Some(hit) => Some(hit),
            None => self.catalogue().await.into_iter().find(|(n, _, _)| *n == request.name),
        };
        let Some((_, device, tool)) = found else {
            return Err(McpError::invalid_params(format!("Unknown tool: {}", request.name), None));
        };
        let Some(device) = device else { return Ok(self.list_devices().await.into()) };
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        // Validate here: the stock firmware truncates floats and silently substitutes defaults.
        if let Err(errors) = crate::args::validate(&tool["inputSchema"], &arguments) {
            let text = errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n");
            return Ok(CallToolResult::error(vec![ContentBlock::text(format!("invalid arguments, nothing was sent:\n{text}"))]).into());
        }
        let params = json!({"name": tool["name"], "arguments": arguments});
        let call = device.request("tools/call", Some(params), self.shared.config.call_timeout);
        tokio::select! {
            outcome = call => Ok(match outcome {
                Ok(result) => results::from_device(result),
                Err(e) => results::from_error(&device.device_id, &e),
            }.into()),
            // notifications/cancelled: stop waiting; the session drops the late reply.
            () = cx.ct.cancelled() => Err(McpError::internal_error("cancelled by the client", None)),
        }
    }

    // No prompts: answer "method not found", as the capabilities say, rather than rmcp's default
    // empty list (2026-07-28: a server that answers prompts/list MUST declare prompts in
    // server/discover).
    async fn list_prompts(&self, _request: Option<PaginatedRequestParams>, _cx: RequestContext<RoleServer>) -> Result<ListPromptsResult, McpError> {
        Err(McpError::method_not_found::<ListPromptsRequestMethod>())
    }

    async fn list_resources(&self, _request: Option<PaginatedRequestParams>, _cx: RequestContext<RoleServer>) -> Result<ListResourcesResult, McpError> {
        let mut resources = Vec::new();
        for h in self.devices() {
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
        Ok(ListResourcesResult { resources, ..Default::default() })
    }

    async fn read_resource(&self, request: ReadResourceRequestParams, _cx: RequestContext<RoleServer>) -> Result<ReadResourceResponse, McpError> {
        let uri = request.uri.to_string();
        for h in self.devices() {
            let text = if uri == device_uri(&h.device_id) {
                let Some(info) = h.snapshot().await else { continue };
                serde_json::to_string_pretty(&info).unwrap_or_default()
            } else if uri == notifications_uri(&h.device_id) {
                serde_json::to_string_pretty(&json!({"notifications": self.shared.notifier.recent(&h.device_id)})).unwrap_or_default()
            } else {
                continue;
            };
            let contents = ResourceContents::TextResourceContents { uri: uri.clone(), mime_type: Some("application/json".into()), text, meta: None };
            return Ok(ReadResourceResult::new(vec![contents]).into());
        }
        // `data.uri` names the missing resource (SEP-2164, a SHOULD since 2026-07-28).
        Err(McpError::resource_not_found(format!("no connected device has the resource {uri}"), Some(json!({"uri": uri}))))
    }

    #[allow(deprecated)]
    async fn subscribe(&self, request: SubscribeRequestParams, cx: RequestContext<RoleServer>) -> Result<(), McpError> {
        self.shared.notifier.subscribe(request.uri.to_string(), self.session, cx.peer);
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(&self, request: UnsubscribeRequestParams, _cx: RequestContext<RoleServer>) -> Result<(), McpError> {
        self.shared.notifier.unsubscribe(request.uri.as_ref(), self.session);
        Ok(())
    }
}
