//! The device a command works on: through a running hub's relay, accepted directly with
//! `--listen`, or reached through an MQTT broker with `--mqtt`. All run the same session code,
//! so they behave the same.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::bridge::fleet::{CALL as FLEET_CALL, CAPABILITY as FLEET_CAPABILITY, LIST_TOOLS as FLEET_LIST_TOOLS};
use crate::bridge::results::DEVICE_META;
use crate::cli::{DeviceArgs, GlobalArgs};
use crate::exit::{CodedError, Exit};
use crate::links::handle::{LinkEvent, Tracing};
use crate::links::hub_client::{ControlError, HubClient};
use crate::links::mcp::{McpConnection, McpEndpoint, McpFailure};
use crate::links::handle::LinkSetup;
use crate::links::websocket;
use crate::links::DeviceHandle;
use crate::session::{CallError, Event, SessionConfig};
use crate::wire::identity;

/// Without `--wait`, how long a device may take to finish onboarding once it is connected.
const SETTLE: Duration = Duration::from_secs(10);

pub enum Target {
    Hub { client: HubClient, device_id: String },
    Direct { handle: DeviceHandle },
    /// Any MCP server (`--url`); `fleet` when the tool to call was found through an mcpdev
    /// hub's fleet tools.
    /// `hub`: the server is an mcpdev hub (its `/mcp` declares [`FLEET_CAPABILITY`]; one device's
    /// endpoint names itself `mcpdev device <id>`), whose results name the device that answered.
    Mcp { conn: McpConnection, url: String, fleet: Option<FleetRoute>, hub: bool },
}

/// A tool of an mcpdev hub's `/mcp` reached through its fleet tools: the name asked for, and
/// the device and tool it names there.
pub struct FleetRoute {
    name: String,
    device: String,
    tool: String,
}

/// A device whose onboarding failed (after every retry): exit 9, with the failed step named.
/// `None` when onboarding did not fail.
pub fn onboarding_failure(device_id: &str, info: &Value) -> Option<anyhow::Error> {
    let error = info["onboarding_error"].as_str()?;
    let help = "`mcpdev tools list --refresh` starts onboarding over; `mcpdev watch` shows each attempt";
    Some(CodedError::new(Exit::Onboarding, format!("device {device_id}: {error}")).with_help(help).into())
}

/// Lists the device's tools again (after a failed onboarding: onboards it again) and returns its
/// description with the new list; an MCP server (`--url`) was listed just now, so it is as is.
pub async fn refresh(target: &Target, mut info: Value, timeout: Duration) -> anyhow::Result<Value> {
    if matches!(target, Target::Mcp { .. }) {
        return Ok(info);
    }
    let fresh = target.request(crate::session::REFRESH_METHOD, None, timeout).await.map_err(call_failure)?;
    if let Some(e) = fresh["refresh_error"].as_str() {
        return Err(CodedError::new(Exit::Onboarding, format!("device {}: {e}", target.device_id())).into());
    }
    for key in ["tools", "onboarding_error", "tools_warning"] {
        info[key] = fresh.get(key).cloned().unwrap_or(Value::Null);
    }
    Ok(info)
}

/// Why a request to the device did not give a result, with its exit code.
pub fn call_failure(e: CallFailure) -> anyhow::Error {
    let exit = match &e {
        CallFailure::Device { .. } => Exit::ToolError,
        CallFailure::Timeout(_) => Exit::Timeout,
        CallFailure::Gone(_) => Exit::Unreachable,
    };
    CodedError::new(exit, e.to_string()).into()
}

#[derive(Debug, thiserror::Error)]
pub enum CallFailure {
    #[error("the device answered with an error{}: {message}", code.map(|c| format!(" ({c})")).unwrap_or_default())]
    Device { code: Option<i64>, message: String, rpc: Value },
    #[error("{0}")]
    Timeout(String),
    #[error("{0}")]
    Gone(String),
}

impl Target {
    /// Opens the device named by the arguments and returns it with its description (onboarded).
    pub async fn open(args: &DeviceArgs, global: &GlobalArgs, vision: Option<(String, String)>) -> anyhow::Result<(Target, Value)> {
        Self::open_for(args, global, vision, None).await
    }

    /// As [`Target::open`], for calling the tool `wanted`: an MCP server (`--url`) is listed only
    /// until the page that holds it (its description's `tools` then stops there).
    pub async fn open_for(args: &DeviceArgs, global: &GlobalArgs, vision: Option<(String, String)>, wanted: Option<&str>) -> anyhow::Result<(Target, Value)> {
        if let Some(endpoint) = super::mcp_server::endpoint(&args.server)? {
            return open_mcp(endpoint, args, wanted).await;
        }
        if let Some(url) = &args.mqtt {
            let (handle, info) = crate::mqtt::direct::open(url, args.device.as_deref(), args.timeout, args.wait, vision).await?;
            return Ok((Target::Direct { handle }, info));
        }
        match args.listen {
            Some(addr) => accept_direct(addr, args, global, vision).await,
            None => open_hub(args, global).await,
        }
    }

    /// Ends what was opened: an MCP session is closed on the server (`DELETE`), so one-shot
    /// commands leave none open behind them.
    pub async fn close(self) {
        if let Target::Mcp { conn, .. } = self {
            conn.close().await;
        }
    }

    pub fn device_id(&self) -> &str {
        match self {
            Target::Hub { device_id, .. } => device_id,
            Target::Direct { handle } => &handle.device_id,
            Target::Mcp { url, .. } => url,
        }
    }

    /// Who answered `result`: the device. Through an mcpdev hub's `/mcp` (`--url`), the device
    /// its result names in `_meta` ([`DEVICE_META`]), else the one its fleet tools named; from
    /// any other MCP server, its URL.
    pub fn answered_by<'a>(&'a self, result: &'a Value) -> &'a str {
        match self {
            Target::Mcp { hub: true, fleet, url, .. } => meta_device(result).or(fleet.as_ref().map(|f| f.device.as_str())).unwrap_or(url),
            _ => self.device_id(),
        }
    }

    /// The `tools/call` params that reach a tool of this MCP server: through an mcpdev hub's
    /// fleet tools when the name was found there.
    pub fn mcp_call_params(&self, params: Value) -> Value {
        match self {
            Target::Mcp { fleet: Some(f), .. } if params["name"] == f.name.as_str() => {
                json!({"name": FLEET_CALL, "arguments": {"device": f.device, "tool": f.tool, "arguments": params["arguments"]}})
            }
            _ => params,
        }
    }

    /// One JSON-RPC request to the device.
    pub async fn request(&self, method: &str, params: Option<Value>, timeout: Duration) -> Result<Value, CallFailure> {
        match self {
            Target::Direct { handle } => handle.request(method, params, timeout).await.map(|r| r.to_value()).map_err(|e| match e {
                CallError::Device(rpc) => CallFailure::Device { code: rpc.code, message: rpc.message.clone(), rpc: rpc.to_value() },
                CallError::Timeout(d) => CallFailure::Timeout(format!("device {} did not answer within {d:?}", handle.device_id)),
                CallError::Disconnected => CallFailure::Gone(format!("device {} disconnected before answering", handle.device_id)),
                CallError::Link(why) => CallFailure::Gone(format!("device {}: {why}", handle.device_id)),
            }),
            Target::Mcp { conn, fleet, .. } => match method {
                "tools/call" => {
                    let params = params.unwrap_or(Value::Null);
                    let name = params["name"].as_str().unwrap_or_default();
                    let call = match fleet.as_ref().filter(|f| f.name == name) {
                        Some(f) => conn.call_tool(FLEET_CALL, json!({"device": f.device, "tool": f.tool, "arguments": params["arguments"]}), timeout),
                        None => conn.call_tool(name, params["arguments"].clone(), timeout),
                    };
                    call.await.map_err(|e| match e {
                        McpFailure::Rpc { code, message, data } => {
                            let rpc = json!({"code": code, "message": message, "data": data});
                            CallFailure::Device { code: Some(code.into()), message, rpc }
                        }
                        McpFailure::Timeout(d) => CallFailure::Timeout(format!("the MCP server did not answer within {d:?}")),
                        McpFailure::TooLarge(why) => CallFailure::Device { code: None, message: why.clone(), rpc: json!({"message": why}) },
                        other => CallFailure::Gone(other.to_string()),
                    })
                }
                _ => Ok(conn.server_info()),
            },
            Target::Hub { client, device_id } => {
                let req = json!({"op": "rpc", "device": device_id, "method": method, "params": params, "timeout_ms": timeout.as_millis() as u64});
                client.call(req).await.map_err(|e| match e.kind.as_str() {
                    "device_error" => {
                        let rpc = e.rpc.clone().unwrap_or(Value::Null);
                        CallFailure::Device { code: rpc.get("code").and_then(Value::as_i64), message: e.message, rpc }
                    }
                    "timeout" => CallFailure::Timeout(e.message),
                    _ => CallFailure::Gone(e.message),
                })
            }
        }
    }
}

/// The device an mcpdev hub's result names in `_meta` ([`DEVICE_META`]), when it is a Device-Id
/// (any other text there is no device's, and is not shown as one). Read only of a server that
/// [`is_mcpdev_hub`].
pub fn meta_device(result: &Value) -> Option<&str> {
    result.pointer(&format!("/_meta/{}", DEVICE_META.replace('/', "~1"))).and_then(Value::as_str).filter(|id| identity::parse_mac(id).is_ok())
}

/// Whether an MCP server's `initialize` answer is an mcpdev hub's: its `/mcp` declares the
/// fleet tools ([`FLEET_CAPABILITY`]); one device's endpoint names itself `mcpdev device <id>`.
pub fn is_mcpdev_hub(init: &Value) -> bool {
    init.pointer(&format!("/capabilities/experimental/{}", FLEET_CAPABILITY.replace('/', "~1"))).is_some() || init["serverInfo"]["name"].as_str().is_some_and(|n| n.starts_with("mcpdev device "))
}

/// Any MCP server: connect, list its tools (every one, or until `wanted`), and describe it like
/// a device.
async fn open_mcp(endpoint: McpEndpoint, args: &DeviceArgs, wanted: Option<&str>) -> anyhow::Result<(Target, Value)> {
    let conn = McpConnection::connect(&endpoint, args.timeout).await.map_err(super::mcp_server::failure)?;
    let url = endpoint.name();
    match describe_url(&conn, &url, args, wanted).await {
        Ok((info, fleet, hub)) => Ok((Target::Mcp { conn, url, fleet, hub }, info)),
        Err(e) => {
            conn.close().await;
            Err(super::mcp_server::failure(e).into())
        }
    }
}

/// An MCP server's description, as a device's: its tools (until `wanted`), and how to reach
/// `wanted` on an mcpdev hub's fleet.
async fn describe_url(
    conn: &McpConnection,
    url: &str,
    args: &DeviceArgs,
    wanted: Option<&str>,
) -> Result<(Value, Option<FleetRoute>, bool), McpFailure> {
    let init = conn.server_info();
    let fleet_tools = init.pointer(&format!("/capabilities/experimental/{}", FLEET_CAPABILITY.replace('/', "~1"))).is_some();
    let hub = is_mcpdev_hub(&init);
    let found = match wanted {
        Some(name) if fleet_tools => Some(fleet_lookup(conn, name, args.timeout).await),
        _ => None,
    };
    let (tools, fleet, fleet_note) = match found {
        Some(Ok((tool, route))) => (vec![tool], Some(route), None),
        Some(Err(note)) => (
            conn.list_tools_until(args.timeout, wanted).await?,
            None,
            note,
        ),
        None => (
            conn.list_tools_until(args.timeout, wanted).await?,
            None,
            None,
        ),
    };
    let mut info = json!({
        "device_id": url,
        "transport": "mcp",
        "tools": [],
        "mcp_protocol_version": init["protocolVersion"],
        "server_info": init["serverInfo"],
        "capabilities": init["capabilities"],
        "fleet_note": fleet_note,
    });
    // Moved in: `json!` would copy every tool.
    info["tools"] = Value::Array(tools);
    Ok((info, fleet, hub))
}


/// Most pages of one device's tools read while looking for one tool.
const FLEET_PAGES_MAX: usize = 64;

/// On an mcpdev hub's `/mcp` (which declares [`FLEET_CAPABILITY`]), the tool `<prefix>.<tool>`
/// is `<tool>` of the device with that prefix, whatever the face and the naming: its
/// declaration comes from that device's listing alone, not from the fleet's (so reaching the
/// device that sorts last costs what reaching the first does). An error when the name names no
/// connected device's tool that way (a plain name, a device that left), with what the hub said
/// of the device: the caller then pages the server's own listing, as for any MCP server.
async fn fleet_lookup(conn: &McpConnection, name: &str, timeout: Duration) -> Result<(Value, FleetRoute), Option<String>> {
    let (prefix, tool) = name.split_once('.').ok_or(None)?;
    let mut cursor: Option<String> = None;
    for _ in 0..FLEET_PAGES_MAX {
        let page = conn.call_tool(FLEET_LIST_TOOLS, json!({"device": prefix, "cursor": cursor}), timeout).await.map_err(|_| None)?;
        let listing = &page["structuredContent"];
        if page["isError"] == true {
            // Said only of a prefix that names a device (`dev-<hex>`, an alias): "self" in
            // `self.get_device_status` is a plain name's part (`unknown_device`).
            // Or one another hub serves that could not be reached (said as such).
            let named = listing["error"]["kind"] == "device_not_connected"
                || listing["error"]["kind"] == "hub_unreachable";
            return Err(named
                .then(|| page["content"][0]["text"].as_str().map(str::to_string))
                .flatten());
        }
        if let Some(found) = listing["tools"].as_array().and_then(|tools| tools.iter().find(|t| t["name"] == tool)) {
            let mut declared = found.clone();
            declared["name"] = json!(name);
            let device = listing["device_id"].as_str().ok_or(None)?.to_string();
            return Ok((declared, FleetRoute { name: name.to_string(), device, tool: tool.to_string() }));
        }
        cursor = Some(listing["next_cursor"].as_str().ok_or(None)?.to_string());
    }
    Err(None)
}

async fn open_hub(args: &DeviceArgs, global: &GlobalArgs) -> anyhow::Result<(Target, Value)> {
    let started = tokio::time::Instant::now();
    let client = connect_hub(args, global).await?;
    let device = crate::config::resolve_alias(args.device.as_deref());
    let spinner = super::output::spinner(global, args.wait.is_some(), "waiting for the device");
    // Without --wait, a device that is not connected is an answer at once, and one that is ready
    // is the answer itself; one that is connected may still be onboarding, which takes
    // milliseconds, so it gets SETTLE. With --wait, the wait covers both (and the hub's start,
    // above).
    let ask = |wait: Duration| client.call(json!({"op": "device", "device": device, "wait_ms": wait.as_millis() as u64}));
    let reply = match args.wait {
        Some(w) => ask(w.saturating_sub(started.elapsed())).await,
        None => match ask(Duration::ZERO).await {
            Err(e) if matches!(e.kind.as_str(), "no_devices" | "not_found") => {
                return Err(select_failure(e, None, &args.hub, &client).await.into());
            }
            Ok(ready) => Ok(ready),
            Err(_) => ask(SETTLE).await,
        },
    };
    if let Some(s) = spinner {
        s.finish_and_clear();
    }
    let info = match reply {
        Ok(info) => info,
        Err(e) => return Err(select_failure(e, args.wait, &args.hub, &client).await.into()),
    };
    let device_id = info["device_id"].as_str().unwrap_or_default().to_string();
    Ok((Target::Hub { client, device_id }, info))
}

/// Connects to the hub. With `--wait`, a hub that is still starting (connection refused) is
/// retried until the wait is over, so `mcpdev serve & mcpdev … --wait 60s` works in a script.
async fn connect_hub(args: &DeviceArgs, global: &GlobalArgs) -> anyhow::Result<HubClient> {
    let Some(wait) = args.wait else {
        return Ok(HubClient::open(&args.hub).await?);
    };
    let deadline = tokio::time::Instant::now() + wait;
    let mut spinner = None;
    let mut pause = Duration::from_millis(20);
    loop {
        match HubClient::open(&args.hub).await {
            Ok(client) => {
                if let Some(s) = spinner {
                    indicatif::ProgressBar::finish_and_clear(&s);
                }
                return Ok(client);
            }
            // A refusal (a token that is not accepted) does not change by waiting.
            Err(e) if e.exit != Exit::Unreachable => return Err(e.into()),
            Err(mut e) if tokio::time::Instant::now() + pause >= deadline => {
                e.message.push_str(&format!(" (waited {wait:?})"));
                return Err(e.into());
            }
            Err(e) => {
                tracing::info!("the hub at {} is not reachable yet ({}); retrying until {wait:?} have passed", args.hub, e.message);
                spinner = spinner.or_else(|| super::output::spinner(global, true, &format!("waiting for the hub at {}", args.hub)));
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(500));
            }
        }
    }
}

/// The error for a device that could not be selected: what was asked, of which hub, and which
/// devices that hub has.
async fn select_failure(e: ControlError, waited: Option<Duration>, hub: &str, client: &HubClient) -> CodedError {
    let exit = e.select_exit();
    let mut message = match waited {
        Some(w) if matches!(e.kind.as_str(), "no_devices" | "not_found" | "not_ready") => format!("{} (waited {w:?}, hub {hub})", e.message),
        _ => format!("{} (hub {hub})", e.message),
    };
    // One page of the listing, not all of it: a mistyped id against a hub with 10,000 devices
    // made the hub build every device's description (tens of MB, kept by its allocator).
    if matches!(e.kind.as_str(), "not_found" | "not_ready")
        && let Ok(answer) = client.call(json!({"op": "devices", "limit": DESCRIBED})).await
    {
        let (list, more) = match &answer {
            // A hub that does not page answers with everything.
            Value::Array(all) => (all.as_slice(), false),
            page => (page["devices"].as_array().map_or(&[][..], Vec::as_slice), !page["next"].is_null()),
        };
        message.push_str(&format!("\nconnected devices: {}", describe_devices(list, more)));
    }
    let help = match (e.kind.as_str(), waited) {
        ("no_devices" | "not_found", None) => Some("--wait 30s waits for the device to connect"),
        ("ambiguous", _) => Some("name one with --device (an id, a unique prefix or an alias from mcpdev.toml)"),
        _ => None,
    };
    let err = CodedError::new(exit, message);
    match help {
        Some(h) => err.with_help(h),
        None => err,
    }
}

/// `aa:bb:… (ready, 4 tools), …`: at most ten, then how many more.
/// Devices an error message names at most.
const DESCRIBED: usize = 10;

/// The first devices of a listing; `more`: the hub has more than `list`.
fn describe_devices(list: &[Value], more: bool) -> String {
    if list.is_empty() {
        return "none".into();
    }
    let mut parts: Vec<String> = list
        .iter()
        .take(DESCRIBED)
        .map(|d| {
            let tools = d["tools"].as_array().map_or(0, Vec::len);
            format!("{} ({}, {tools} tools)", d["device_id"].as_str().unwrap_or("?"), d["phase"].as_str().unwrap_or("?"))
        })
        .collect();
    if list.len() > DESCRIBED {
        parts.push(format!("… and {} more", list.len() - DESCRIBED));
    } else if more {
        parts.push("… and more (mcpdev devices lists them all)".into());
    }
    parts.join(", ")
}

async fn accept_direct(
    addr: std::net::SocketAddr,
    args: &DeviceArgs,
    global: &GlobalArgs,
    vision: Option<(String, String)>,
) -> anyhow::Result<(Target, Value)> {
    let listener = TcpListener::bind(addr).await.map_err(|e| CodedError::new(Exit::Usage, format!("cannot listen on {addr}: {e}")))?;
    if !global.quiet && !global.json {
        eprintln!("listening on ws://{}/xiaozhi/v1/ for the next device…", listener.local_addr()?);
    }
    let wait = args.wait.unwrap_or(Duration::from_secs(3600));
    let accepted = tokio::time::timeout(wait, accept_one(&listener));
    let (ws, identity, remote) = accepted
        .await
        .map_err(|_| CodedError::new(Exit::Unreachable, format!("no device connected to {addr} within {wait:?}")))??;
    let session_id = uuid::Uuid::new_v4().to_string();
    let mut cfg = SessionConfig::new(&session_id, crate::session::ServerHello::WebSocket);
    (cfg.vision_url, cfg.vision_token) = vision.unwrap_or_else(|| ("http://127.0.0.1/mcpdev-no-vision".into(), "none".into()));
    cfg.onboarding_timeout = args.timeout;
    let (events, mut rx) = crate::links::ring::channel(256, crate::hub::registry::EVENT_RING_BYTES);
    let setup = LinkSetup { identity, session: cfg, events, tracing: Arc::new(Tracing::default()), generation: 1, remote: Some(remote), until_hello: None, hello_timeout: None };
    let handle = websocket::spawn(ws, setup, || {});
    let ready = async {
        loop {
            match rx.recv().await {
                Ok(ev) => match &ev.event {
                    LinkEvent::Session(Event::Ready { .. } | Event::ToolsChanged { .. }) => return Ok(()),
                    // A failed onboarding is reported by the command, which names the step.
                    LinkEvent::Session(Event::OnboardingFailed { .. }) => return Ok(()),
                    LinkEvent::Link(crate::links::handle::Lifecycle::Disconnected { reason }) => return Err(reason.clone()),
                    _ => {}
                },
                Err(_) => return Err("the link ended".to_string()),
            }
        }
    };
    // Every onboarding step may be retried (5 attempts, backoffs adding up to about 4 s).
    match tokio::time::timeout(args.timeout * 6 + Duration::from_secs(5), ready).await {
        Ok(Ok(())) => {}
        Ok(Err(reason)) => return Err(CodedError::new(Exit::Unreachable, format!("the device went away during onboarding: {reason}")).into()),
        Err(_) => return Err(CodedError::new(Exit::Timeout, "the device did not finish onboarding (hello, initialize, tools/list) in time").into()),
    }
    let info = handle.snapshot().ok_or_else(|| CodedError::new(Exit::Unreachable, "the device disconnected"))?;
    Ok((Target::Direct { handle }, serde_json::to_value(&*info)?))
}

async fn accept_one(listener: &TcpListener) -> anyhow::Result<(crate::links::upgrade::DeviceSocket, identity::Identity, String)> {
    loop {
        let (stream, remote) = listener.accept().await?;
        let identify = |req: &hyper::Request<hyper::body::Incoming>| {
            let header = |n: &str| req.headers().get(n).and_then(|v| v.to_str().ok());
            identity::identify(header, req.uri().query()).map_err(|e| e.to_string())
        };
        match crate::links::upgrade::accept_one(stream, identify).await {
            Ok((socket, identity)) => return Ok((socket, identity, remote.to_string())),
            Err(e) => tracing::warn!(%remote, "refused a connection: {e:#}"),
        }
    }
}
