//! The device a command works on: through a running hub's relay, accepted directly with
//! `--listen`, or reached through an MQTT broker with `--mqtt`. All run the same session code,
//! so they behave the same.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};

use crate::cli::{DeviceArgs, GlobalArgs};
use crate::exit::{CodedError, Exit};
use crate::links::handle::{LinkEvent, Tracing};
use crate::links::hub_client::{ControlError, HubClient};
use crate::links::mcp_client::{McpConnection, McpFailure, parse_headers};
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
    /// Any MCP server (`--url`).
    Mcp { conn: McpConnection, url: String },
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
        if let Some(url) = &args.url {
            return open_url(url, args).await;
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

    pub fn device_id(&self) -> &str {
        match self {
            Target::Hub { device_id, .. } => device_id,
            Target::Direct { handle } => &handle.device_id,
            Target::Mcp { url, .. } => url,
        }
    }

    /// One JSON-RPC request to the device.
    pub async fn request(&self, method: &str, params: Option<Value>, timeout: Duration) -> Result<Value, CallFailure> {
        match self {
            Target::Direct { handle } => handle.request(method, params, timeout).await.map_err(|e| match e {
                CallError::Device(rpc) => CallFailure::Device { code: rpc.code, message: rpc.message.clone(), rpc: rpc.to_value() },
                CallError::Timeout(d) => CallFailure::Timeout(format!("device {} did not answer within {d:?}", handle.device_id)),
                CallError::Disconnected => CallFailure::Gone(format!("device {} disconnected before answering", handle.device_id)),
                CallError::Link(why) => CallFailure::Gone(format!("device {}: {why}", handle.device_id)),
            }),
            Target::Mcp { conn, .. } => match method {
                "tools/call" => {
                    let params = params.unwrap_or(Value::Null);
                    let name = params["name"].as_str().unwrap_or_default();
                    conn.call_tool(name, params["arguments"].clone(), timeout).await.map_err(|e| match e {
                        McpFailure::Rpc { code, message, data } => {
                            let rpc = json!({"code": code, "message": message, "data": data});
                            CallFailure::Device { code: Some(code.into()), message, rpc }
                        }
                        McpFailure::Timeout(d) => CallFailure::Timeout(format!("the MCP server did not answer within {d:?}")),
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

/// Any MCP server: connect, list every tool, and describe it like a device.
async fn open_url(url: &str, args: &DeviceArgs) -> anyhow::Result<(Target, Value)> {
    let headers = parse_headers(&args.headers).map_err(|e| CodedError::new(Exit::Usage, e))?;
    let mcp_error = |e: McpFailure| -> anyhow::Error {
        let exit = match &e {
            McpFailure::Auth(_) => Exit::Auth,
            McpFailure::Timeout(_) => Exit::Timeout,
            McpFailure::Rpc { .. } => Exit::ToolError,
            McpFailure::Unreachable(_) => Exit::Unreachable,
        };
        CodedError::new(exit, e.to_string()).into()
    };
    let conn = McpConnection::connect(url, &headers, args.transport, args.timeout).await.map_err(mcp_error)?;
    let tools = conn.list_all_tools(args.timeout).await.map_err(mcp_error)?;
    let init = conn.server_info();
    let info = json!({
        "device_id": url,
        "transport": "mcp",
        "tools": tools,
        "mcp_protocol_version": init["protocolVersion"],
        "server_info": init["serverInfo"],
        "capabilities": init["capabilities"],
    });
    Ok((Target::Mcp { conn, url: url.to_string() }, info))
}

async fn open_hub(args: &DeviceArgs, global: &GlobalArgs) -> anyhow::Result<(Target, Value)> {
    let client = HubClient::connect(&args.hub).await.map_err(|e| {
        CodedError::new(Exit::Unreachable, format!("cannot reach the hub at {}: {e}. Is `mcpdev serve` running? (--hub, MCPDEV_HUB)", args.hub))
    })?;
    let wait = args.wait.unwrap_or(SETTLE);
    let spinner = super::output::spinner(global, args.wait.is_some(), "waiting for the device");
    let device = crate::config::resolve_alias(args.device.as_deref());
    let reply = client.call(json!({"op": "device", "device": device, "wait_ms": wait.as_millis() as u64})).await;
    if let Some(s) = spinner {
        s.finish_and_clear();
    }
    let info = reply.map_err(|e| select_failure(e, args.wait))?;
    let device_id = info["device_id"].as_str().unwrap_or_default().to_string();
    Ok((Target::Hub { client, device_id }, info))
}

fn select_failure(e: ControlError, waited: Option<Duration>) -> CodedError {
    let exit = if e.kind == "ambiguous" { Exit::Usage } else { Exit::Unreachable };
    let hint = match (e.kind.as_str(), waited) {
        ("no_devices" | "not_found", None) => " (use --wait 30s to wait for it)",
        _ => "",
    };
    CodedError::new(exit, format!("{}{hint}", e.message))
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
    let mut cfg = SessionConfig::new(&session_id, websocket::server_hello(&session_id));
    (cfg.vision_url, cfg.vision_token) = vision.unwrap_or_else(|| ("http://127.0.0.1/mcpdev-no-vision".into(), "none".into()));
    cfg.onboarding_timeout = args.timeout;
    let (events, mut rx) = tokio::sync::broadcast::channel(256);
    let setup = LinkSetup { identity, session: cfg, events, tracing: Arc::new(Tracing::default()), generation: 1, remote: Some(remote), until_hello: None, hello_timeout: None };
    let (handle, _done) = websocket::spawn(ws, setup);
    let ready = async {
        loop {
            match rx.recv().await {
                Ok(ev) => match ev.event {
                    LinkEvent::Session(Event::Ready { .. } | Event::ToolsChanged { .. }) => return Ok(()),
                    LinkEvent::Session(Event::Warning { message }) if message.contains("initialize") => return Ok(()),
                    LinkEvent::Link(crate::links::handle::Lifecycle::Disconnected { reason }) => return Err(reason),
                    _ => {}
                },
                Err(_) => return Err("the link ended".to_string()),
            }
        }
    };
    match tokio::time::timeout(args.timeout * 4, ready).await {
        Ok(Ok(())) => {}
        Ok(Err(reason)) => return Err(CodedError::new(Exit::Unreachable, format!("the device went away during onboarding: {reason}")).into()),
        Err(_) => return Err(CodedError::new(Exit::Timeout, "the device did not finish onboarding (hello, initialize, tools/list) in time").into()),
    }
    let info = handle.snapshot().ok_or_else(|| CodedError::new(Exit::Unreachable, "the device disconnected"))?;
    Ok((Target::Direct { handle }, serde_json::to_value(&*info)?))
}

async fn accept_one(
    listener: &TcpListener,
) -> anyhow::Result<(tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>, identity::Identity, String)> {
    loop {
        let (stream, remote) = listener.accept().await?;
        let mut identity = None;
        let callback = |req: &Request, resp: Response| {
            let header = |n: &str| req.headers().get(n).and_then(|v| v.to_str().ok());
            match identity::identify(header, req.uri().query()) {
                Ok(id) => {
                    identity = Some(id);
                    Ok(resp)
                }
                Err(e) => {
                    let mut refusal = tokio_tungstenite::tungstenite::handshake::server::ErrorResponse::new(Some(e.to_string()));
                    *refusal.status_mut() = tokio_tungstenite::tungstenite::http::StatusCode::BAD_REQUEST;
                    Err(refusal)
                }
            }
        };
        let config = Some(crate::links::upgrade::ws_config());
        match tokio_tungstenite::accept_hdr_async_with_config(stream, callback, config).await {
            Ok(ws) => return Ok((ws, identity.expect("set by the accepted handshake"), remote.to_string())),
            Err(e) => tracing::warn!(%remote, "refused a connection: {e}"),
        }
    }
}
