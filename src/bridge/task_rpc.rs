//! The Tasks protocol (MCP 2025-11-25, experimental) on the hub's MCP endpoints, spoken in front
//! of rmcp (which implements the later tasks extension, not this one): a task-augmented
//! `tools/call`, `tasks/get`, `tasks/result`, `tasks/list` and `tasks/cancel` are answered here,
//! on every endpoint and transport; everything else goes on to rmcp untouched. What is kept is
//! [`super::tasks`]; what a task runs is the bridge's one tool call
//! ([`super::Shared::run_call`]), so a task answers exactly what the plain call would.
//!
//! Rules:
//! - **Declared.** `initialize` answers carry `capabilities.tasks` (`list`, `cancel`,
//!   `requests.tools.call`), and `tools/list` marks every device tool (and `call_device_tool`)
//!   `execution.taskSupport: "optional"`; `list_devices`, `search_devices` and
//!   `list_device_tools` are answered at once and stay without (a task of one gets `-32601`).
//! - **At once.** A task-augmented call answers `CreateTaskResult` before the device is asked;
//!   the call runs with the bridge's own timeout (`--mcp-timeout`), whatever the TTL.
//! - **Spec errors**: an unknown, expired or foreign task id, a bad cursor, or a cancel of an
//!   ended task are `-32602`, with one message for unknown and foreign alike; a task over a cap
//!   is `-32000` with the cap's name.
//! - **`tasks/result` blocks** until the task ends (its call is bounded, so this is), and
//!   answers exactly the call's result or its JSON-RPC error, with
//!   `io.modelcontextprotocol/related-task` in the result's `_meta`.
//! - **Notifications**: when the session can receive them, `notifications/tasks/status` when a
//!   task ends, and `notifications/progress` for the call's stages when the request carried a
//!   `progressToken`; they go out in order, one at a time, progress coalesced to the latest
//!   while the session is slow (one waits per task, never a queue). A Streamable HTTP `tasks/result` that
//!   accepts an event stream also gets the ended task's status on its own stream, just before
//!   its answer ([`status_note`]), wherever the task is held.
//! - **In a cluster**, `tasks/get|result|cancel` of a task another live hub holds (its id names
//!   it) are asked of that hub with the requestor's owner ([`elsewhere`]): its answer exactly, or a
//!   typed error naming the hub that did not answer. `tasks/list` lists this hub's tasks only.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::{oneshot, watch};

use super::tasks::{self, Outcome, Owner, Requestor, Tasks};
use super::{Scope, Shared, Stage, fleet};

/// Sends one JSON-RPC notification (method, params) to a session; false once it cannot.
pub type Sink = Arc<dyn Fn(&'static str, Value) -> BoxFuture<'static, bool> + Send + Sync>;

/// `_meta` key tying a message to its task.
pub const RELATED: &str = "io.modelcontextprotocol/related-task";

/// What one pass over a body's quoted words finds, before any parse: whether it may hold a task
/// message (`"task"`, `"tasks/…`), and whether it may be a request whose answer declares what
/// tasks need (`"initialize"`, `"tools/list"`). A plain call costs one scan of its bytes, that
/// stops only at its quotes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Marks {
    pub task: bool,
    pub declare: bool,
}

pub fn marks(body: &[u8]) -> Marks {
    let mut found = Marks::default();
    let mut rest = body;
    while let Some(at) = rest.iter().position(|&b| b == b'"') {
        let word = &rest[at + 1..];
        found.task |= word.starts_with(b"task\"") || word.starts_with(b"tasks/");
        found.declare |= word.starts_with(b"initialize\"") || word.starts_with(b"tools/list\"");
        rest = word;
    }
    found
}

/// Whether a body may hold a task message ([`marks`]).
pub fn may_be_task(body: &[u8]) -> bool {
    marks(body).task
}

/// The message in `body` if it is one answered here (a task-augmented `tools/call`, or a
/// `tasks/*` request with a string or integer id); `None` to leave it to rmcp.
pub fn parse(body: &[u8]) -> Option<Value> {
    if !may_be_task(body) {
        return None;
    }
    let msg: Value = serde_json::from_slice(body).ok()?;
    let ours = match msg.get("method")?.as_str()? {
        "tools/call" => msg.get("params").and_then(|p| p.get("task")).is_some_and(Value::is_object),
        "tasks/get" | "tasks/result" | "tasks/cancel" | "tasks/list" => true,
        _ => false,
    };
    let id_ok = msg.get("id").is_some_and(|id| id.is_string() || id.is_i64() || id.is_u64());
    (ours && id_ok && msg.get("jsonrpc").is_some_and(|v| v == "2.0")).then_some(msg)
}

/// Answers a message [`parse`] took (`tasks/result` only once its task has ended).
pub async fn answer(shared: &Arc<Shared>, scope: &Scope, who: &Requestor, mut msg: Value, sink: Option<Sink>) -> Value {
    let id = msg.get_mut("id").map(Value::take).unwrap_or_default();
    let params = msg.get_mut("params").map(Value::take).unwrap_or(Value::Null);
    let tasks = &shared.tasks;
    let outcome = match msg.get("method").and_then(Value::as_str).unwrap_or_default() {
        "tools/call" => match runnable(shared, scope, &params).await {
            Ok(()) => create(shared, scope, who, params, sink),
            Err(e) => Err(e),
        },
        method @ ("tasks/get" | "tasks/result" | "tasks/cancel") => match task_id(&params) {
            Ok(t) => held(shared, who, method, t).await,
            Err(e) => Err(e),
        },
        "tasks/list" => {
            let cursor = params.get("cursor").and_then(Value::as_str);
            match tasks.list(&who.owner, cursor) {
                Some((page, next)) => {
                    let mut v = json!({"tasks": page});
                    if let Some(n) = next {
                        v["nextCursor"] = json!(n);
                    }
                    Ok(v)
                }
                None => Err(bad_cursor(shared, cursor.unwrap_or_default())),
            }
        }
        _ => Err(method_not_found()),
    };
    match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
    }
}

fn invalid(message: String) -> Value {
    json!({"code": -32602, "message": message})
}

/// The one answer for a task id that is unknown, expired, or another requestor's.
fn not_found(id: &str) -> Value {
    let shown: String = id.chars().take(80).filter(|c| !c.is_control()).collect();
    invalid(format!("Failed to retrieve task: Task not found ({shown}); it may have expired (tasks are kept for their ttl)"))
}

fn task_id(params: &Value) -> Result<&str, Value> {
    params.get("taskId").and_then(Value::as_str).ok_or_else(|| invalid("params.taskId (a string) is missing".into()))
}

fn method_not_found() -> Value {
    json!({"code": -32601, "message": "Method not found"})
}

/// A `tasks/list` cursor that is no task of the requestor's here: one from another hub's list is
/// said to be so (the id names its hub; nothing about the task is told).
fn bad_cursor(shared: &Shared, cursor: &str) -> Value {
    let me = crate::hub::remote::of(&shared.hub).map(|c| c.me().to_string());
    match tasks::hub_of(cursor).filter(|h| me.as_deref().is_some_and(|me| me != *h)) {
        Some(hub) => invalid(format!("this tasks/list cursor comes from hub {hub}'s list: tasks/list lists the tasks of the hub it is asked of (each task id names its hub, and tasks/get, tasks/result and tasks/cancel reach it through any hub); list again without a cursor")),
        None => invalid("this tasks/list cursor is no task of yours (its task may have expired); list again without a cursor".into()),
    }
}

/// `tasks/get|result|cancel`: on the hub the task id names when that is another live hub of the
/// cluster ([`elsewhere`]); here otherwise (an id that names no live hub, or junk, is answered
/// as unknown without a word to any other hub).
async fn held(shared: &Shared, who: &Requestor, method: &str, id: &str) -> Result<Value, Value> {
    if let Some(c) = crate::hub::remote::of(&shared.hub)
        && let Some(hub) = tasks::hub_of(id).filter(|h| c.is_peer(h))
    {
        return elsewhere(shared, c.as_ref(), hub, who, method, id).await;
    }
    local(&shared.tasks, &who.owner, method, id).await
}

/// `tasks/get|result|cancel` of a task this hub holds, for `owner`: what the hub's endpoints
/// answer, and what another hub's forwarded request gets ([`crate::hub::remote::TaskDesk`]).
pub async fn local(tasks: &Tasks, owner: &Owner, method: &str, id: &str) -> Result<Value, Value> {
    match method {
        "tasks/get" => tasks.get(owner, id).ok_or_else(|| not_found(id)),
        "tasks/result" => result(tasks, owner, id).await,
        "tasks/cancel" => match tasks.cancel(owner, id) {
            None => Err(not_found(id)),
            Some(Ok(task)) => Ok(task),
            Some(Err(status)) => Err(invalid(format!("Cannot cancel task: already in terminal status '{}'", status.as_str()))),
        },
        _ => Err(method_not_found()),
    }
}

impl crate::hub::remote::TaskDesk for Tasks {
    fn answer<'a>(&'a self, owner: &'a str, method: &'a str, task_id: &'a str) -> BoxFuture<'a, Result<Value, Value>> {
        Box::pin(async move {
            match Owner::from_wire(owner) {
                Some(owner) => local(self, &owner, method, task_id).await,
                None => Err(not_found(task_id)),
            }
        })
    }
}

/// How long a forwarded `tasks/get` or `tasks/cancel` is waited on (the other hub answers it at
/// once).
const FORWARD_WAIT: Duration = Duration::from_secs(5);

/// `tasks/get|result|cancel` of a task `hub` holds, asked of it over the cluster's RPC with the
/// requestor's owner as this hub saw it: its answer exactly (its owner check included), or, when
/// it does not answer, a typed error that says so (`-32000`, `data.kind` the cluster's:
/// `timeout`, `link_down`, `busy`), never "unknown task". `tasks/result` is waited on for the
/// call's own timeout (`--mcp-timeout`) and the hop.
async fn elsewhere(shared: &Shared, c: &dyn crate::hub::remote::Cluster, hub: &str, who: &Requestor, method: &str, id: &str) -> Result<Value, Value> {
    let wait = if method == "tasks/result" { shared.config.call_timeout + super::CALL_GRACE } else { FORWARD_WAIT };
    let op = json!({"op": "task", "method": method, "task": id, "owner": who.owner.to_wire(), "wait_ms": wait.as_millis() as u64});
    let deadline = wait + crate::hub::remote::HOP_GRACE;
    let unanswered = |kind: &str, why: String| json!({"code": -32000, "message": format!("task {id} is held by hub {hub}, which did not answer: {why}"), "data": {"kind": kind, "hub": hub}});
    match c.forward(hub, op, deadline).await {
        Ok(text) => match serde_json::from_str::<Value>(&text) {
            Ok(mut v) if v.get("result").is_some() => Ok(v["result"].take()),
            Ok(mut v) if v.get("error").is_some_and(Value::is_object) => Err(v["error"].take()),
            _ => Err(unanswered("link_down", "its answer could not be read".into())),
        },
        Err(e) if e["kind"] == "not_found" => Err(not_found(id)),
        Err(e) => {
            let kind = e["kind"].as_str().unwrap_or("link_down").to_string();
            let why = match kind.as_str() {
                "timeout" => format!("no answer within {deadline:?}; the task may still be running there: ask again"),
                "busy" => format!("it has too many requests of this hub under way ({}); try again when some end", e["message"].as_str().unwrap_or_default()),
                _ if !c.is_peer(hub) => "it left the cluster before answering (a task lives in the memory of its hub: if that hub stopped, the task and its result are gone; if it comes back, ask again)".into(),
                _ => format!("{} (it may run an older mcpdev, or be unreachable); ask again", e["message"].as_str().unwrap_or("no reason given")),
            };
            Err(unanswered(&kind, why))
        }
    }
}

/// The `notifications/tasks/status` a blocking `tasks/result` sends on its own stream before
/// its answer (a Streamable HTTP host hears of the end without holding a GET stream): the task as
/// `tasks/get` shows it now that it has ended, asked of the hub that holds it. `None` when the
/// answer is no task's own (an unknown id, a hub that did not answer) or the task still works.
pub async fn status_note(shared: &Shared, who: &Requestor, task_id: &str, answer: &Value) -> Option<Value> {
    let error = answer.get("error");
    if error.is_some_and(|e| e["code"] == -32602 || e["data"].get("hub").is_some() || e["data"]["kind"] == "timeout") {
        return None;
    }
    let task = held(shared, who, "tasks/get", task_id).await.ok()?;
    (task["status"] != "working").then(|| json!({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": task}))
}

/// `tasks/result`: waits for the task to end, then its call's answer.
async fn result(tasks: &Tasks, owner: &Owner, id: &str) -> Result<Value, Value> {
    let mut rx = tasks.watch(owner, id).ok_or_else(|| not_found(id))?;
    let state = rx.wait_for(|s| s.status.is_terminal()).await.map_err(|_| not_found(id))?.clone();
    match state.outcome.as_deref() {
        Some(Outcome::Result(v)) => {
            let mut v = v.clone();
            if let Some(obj) = v.as_object_mut() {
                let meta = obj.entry("_meta").or_insert_with(|| json!({}));
                if let Some(meta) = meta.as_object_mut() {
                    meta.insert(RELATED.into(), json!({"taskId": id}));
                }
            }
            Ok(v)
        }
        Some(Outcome::Error(e)) => Err(e.clone()),
        None => Err(json!({"code": -32603, "message": "the task ended without an answer"})),
    }
}

/// Whether `name` on `scope` may run as a task: device tools and `call_device_tool` may; the
/// hub's own listings answer at once.
pub fn task_support(scope: &Scope, name: &str) -> bool {
    !(matches!(scope, Scope::All) && (name == "list_devices" || (fleet::is_fleet_tool(name) && name != fleet::CALL)))
}

/// Whether a task-augmented `tools/call` names a tool that can run now: a device's tool in the
/// endpoint's catalogue (its device connected), or `call_device_tool` naming a connected device's
/// listed tool with fitting arguments. Otherwise the JSON-RPC error (`-32602`) that says why, and
/// no task is made: a flood of calls for tools that do not exist takes no place.
async fn runnable(shared: &Shared, scope: &Scope, params: &Value) -> Result<(), Value> {
    let Some(name) = params.get("name").and_then(Value::as_str) else { return Ok(()) };
    if !task_support(scope, name) {
        return Ok(());
    }
    if *scope == Scope::All && name == fleet::CALL {
        let args = params.get("arguments").and_then(Value::as_object).cloned().unwrap_or_default();
        return match fleet::target(shared, &args).await {
            Ok(_) => Ok(()),
            Err(refused) => {
                let why = refused.content.iter().find_map(|c| c.as_text().map(|t| t.text.clone())).unwrap_or_else(|| "the call cannot run".into());
                Err(json!({"code": -32602, "message": format!("{why}; no task was created"), "data": refused.structured_content}))
            }
        };
    }
    if shared.offered(scope, name).is_some_and(|o| o.device.is_some()) {
        return Ok(());
    }
    let why = shared.unavailable(scope, name).unwrap_or_else(|| format!("Unknown tool: {name} (tools/list shows the tools this endpoint runs)"));
    Err(invalid(format!("{why} No task was created.")))
}

/// A task-augmented `tools/call`: the task, at once; the call runs on.
fn create(shared: &Arc<Shared>, scope: &Scope, who: &Requestor, params: Value, sink: Option<Sink>) -> Result<Value, Value> {
    let name = params.get("name").and_then(Value::as_str).ok_or_else(|| invalid("params.name (a string) is missing".into()))?.to_string();
    if !task_support(scope, &name) {
        return Err(json!({"code": -32601, "message": format!("{name} does not run as a task (its execution.taskSupport is forbidden); call it without params.task")}));
    }
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => None,
        Some(Value::Object(a)) => Some(a.clone()),
        Some(_) => return Err(invalid("params.arguments must be an object".into())),
    };
    let ttl = params.get("task").and_then(|t| t.get("ttl")).and_then(Value::as_u64);
    let progress_token = params.get("_meta").and_then(|m| m.get("progressToken")).filter(|t| t.is_string() || t.is_i64() || t.is_u64()).cloned();
    let hub = crate::hub::remote::of(&shared.hub).map_or_else(|| "hub".to_string(), |c| c.me().to_string());
    let (created, shown) = shared
        .tasks
        .create(who, &hub, ttl)
        .map_err(|why| json!({"code": -32000, "message": why.0, "data": {"kind": "task_cap"}}))?;
    tracing::debug!(task = %created.id, tool = %name, owner = %who.owner.to_wire(), "task created");
    let (progress, status) = sink.map(notes).unzip();
    let (shared, scope, owner, id) = (shared.clone(), scope.clone(), who.owner.clone(), created.id.clone());
    tokio::spawn(async move {
        let stages: super::Progress = {
            let (tasks, id, token) = (shared.tasks.clone(), id.clone(), progress_token);
            Some(Arc::new(move |stage: Stage| {
                tasks.stage(&id, stage.message());
                if let (Some(out), Some(token)) = (&progress, &token) {
                    let mut p = stage.progress(token);
                    p["_meta"] = json!({RELATED: {"taskId": &*id}});
                    out.send_replace(Some(p));
                }
            }))
        };
        // A task is slow by design: its call is timed apart from those a caller waits on.
        let answer = crate::metrics::slow_by_design(shared.run_call(&scope, &name, arguments, created.cancel.cancelled(), &stages)).await;
        // The progress ends here: its last report goes out before the status.
        drop(stages);
        shared.tasks.finish(&id, match answer {
            Ok(mut r) => {
                r.result_type = None;
                Outcome::Result(serde_json::to_value(r).unwrap_or_default())
            }
            Err(e) => Outcome::Error(serde_json::to_value(e).unwrap_or_default()),
        });
        if let (Some(status), Some(task)) = (status, shared.tasks.get(&owner, &id)) {
            let _ = status.send(task);
        }
    });
    let immediate = format!("{} is running on the device as task {}; its result comes with tasks/result", params["name"].as_str().unwrap_or_default(), shown["taskId"].as_str().unwrap_or_default());
    Ok(json!({"task": shown, "_meta": {"io.modelcontextprotocol/model-immediate-response": immediate}}))
}

/// A task's notifications to `sink`, in order, one at a time: its `notifications/progress`
/// coalesced to the latest while the session is slow ([`super::progress::drain`]: a device that
/// streams progress costs one report, not a queue), then, once the progress sender is gone, its
/// `notifications/tasks/status`.
fn notes(sink: Sink) -> (watch::Sender<Option<Value>>, oneshot::Sender<Value>) {
    let (progress, reports) = super::progress::latest::<Value>();
    let (status, ended) = oneshot::channel::<Value>();
    tokio::spawn(async move {
        let to = sink.clone();
        super::progress::drain(reports, move |p| to("notifications/progress", p)).await;
        if let Ok(task) = ended.await {
            sink("notifications/tasks/status", task).await;
        }
    });
    (progress, status)
}

/// Adds what the hub declares for tasks to an answer rmcp gave (an `initialize` result, a
/// `tools/list` result); anything else is left as it is.
pub fn declare(scope: &Scope, message: &mut Value) {
    let Some(result) = message.get_mut("result").and_then(Value::as_object_mut) else { return };
    if result.contains_key("protocolVersion")
        && let Some(caps) = result.get_mut("capabilities").and_then(Value::as_object_mut)
    {
        caps.insert("tasks".into(), json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}));
        return;
    }
    if let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) {
        for tool in tools {
            let supported = tool.get("name").and_then(Value::as_str).is_some_and(|n| task_support(scope, n));
            if supported && let Some(t) = tool.as_object_mut() {
                t.insert("execution".into(), fleet::device_tool_execution());
            }
        }
    }
}

/// [`declare`] on a body rmcp sent: one JSON message, or an SSE stream of them (its `data:`
/// lines).
pub fn declare_in_body(scope: &Scope, body: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(body).ok()?;
    if text.trim_start().starts_with('{') {
        let mut v: Value = serde_json::from_str(text).ok()?;
        declare(scope, &mut v);
        return serde_json::to_vec(&v).ok();
    }
    let mut out = String::with_capacity(text.len() + 128);
    for line in text.split_inclusive('\n') {
        let data = line.strip_prefix("data:").map(str::trim);
        match data.and_then(|d| serde_json::from_str::<Value>(d).ok()) {
            Some(mut v) => {
                declare(scope, &mut v);
                out.push_str("data: ");
                out.push_str(&v.to_string());
                out.push('\n');
            }
            None => out.push_str(line),
        }
    }
    Some(out.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declares_tasks_in_initialize_and_tools_and_not_for_the_hubs_own_listings() {
        let mut init = json!({"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}}}});
        declare(&Scope::All, &mut init);
        assert_eq!(init["result"]["capabilities"]["tasks"]["requests"]["tools"]["call"], json!({}));
        let body = b"id: 0\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"tools\":[{\"name\":\"lamp.set\"},{\"name\":\"list_devices\"},{\"name\":\"call_device_tool\"}]}}\n\n";
        let out: Value = {
            let b = declare_in_body(&Scope::All, body).unwrap();
            let text = String::from_utf8(b).unwrap();
            assert!(text.starts_with("id: 0\n") && text.ends_with("\n\n"), "{text}");
            serde_json::from_str(text.lines().find_map(|l| l.strip_prefix("data: ")).unwrap()).unwrap()
        };
        let tools = out["result"]["tools"].as_array().unwrap();
        assert_eq!(tools[0]["execution"]["taskSupport"], "optional");
        assert!(tools[1].get("execution").is_none());
        assert_eq!(tools[2]["execution"]["taskSupport"], "optional");
        // On a device's own endpoint every tool is the device's.
        assert!(task_support(&Scope::Device("d".into()), "list_devices"));
        assert!(may_be_task(br#"{"method":"tasks/get"}"#) && may_be_task(br#"{"params":{"task":{}}}"#));
        assert!(!may_be_task(br#"{"method":"tools/call","params":{"name":"tasks"}}"#));
        assert_eq!(marks(br#"{"method":"initialize","params":{}}"#), Marks { task: false, declare: true });
        assert_eq!(marks(br#"{"method":"tools/list"}"#), Marks { task: false, declare: true });
        assert_eq!(marks(br#"{"method":"tools/call","params":{"name":"x.tools/list","task":{}}}"#), Marks { task: true, declare: false });
        assert_eq!(marks(br#"{"method":"tools/call","params":{"name":"initialize_x"}}"#), Marks::default());
        assert_eq!(marks(b"\"task"), Marks::default());
    }
}
