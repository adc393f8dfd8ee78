//! `mcpdev tasks list|get|result|cancel`, and following one task to its end (`call --task`).
//!
//! Rules:
//! - Only against a server that declares the `tasks` capability (MCP 2025-11-25); otherwise a
//!   clear error before anything is sent (exit 7).
//! - A task's status while it runs goes to stderr (never into `--json` stdout), once per change.
//! - Following a task ends by the deadline: the task is left to run, and its id named, so
//!   `tasks result` can fetch it later (exit 6). Ctrl-C cancels it on the server
//!   (`tasks/cancel`, bounded) and exits 130.
//! - Polling honours the server's `pollInterval`, within [`POLL_MIN`]..[`POLL_MAX`];
//!   `notifications/tasks/status` wakes it early.

use std::time::Duration;

use serde_json::{Value, json};

use super::mcp_server::{connect, failure};
use super::output::{device_document, outln, print_json, render, table, text};
use crate::cli::{GlobalArgs, TaskIdArgs, TasksCommand};
use crate::exit::{CodedError, Exit};
use crate::links::mcp::McpConnection;

const POLL_MIN: Duration = Duration::from_millis(50);
const POLL_MAX: Duration = Duration::from_secs(5);
const POLL_DEFAULT: Duration = Duration::from_millis(500);

pub async fn run(global: &GlobalArgs, command: TasksCommand) -> anyhow::Result<()> {
    let (args, what) = match &command {
        TasksCommand::List(a) => (a.clone(), "tasks list"),
        TasksCommand::Get(a) => (a.server.clone(), "tasks get"),
        TasksCommand::Result(a) => (a.server.clone(), "tasks result"),
        TasksCommand::Cancel(a) => (a.server.clone(), "tasks cancel"),
    };
    let (conn, endpoint) = connect(&args, what).await?;
    let name = endpoint.name();
    let out = match keeps_tasks(&conn, &name) {
        Err(e) => Err(e),
        Ok(()) => match command {
            TasksCommand::List(_) => list(global, &conn, &name, args.timeout).await,
            TasksCommand::Get(a) => one(global, &conn, &name, "tasks/get", &a).await,
            TasksCommand::Cancel(a) => one(global, &conn, &name, "tasks/cancel", &a).await,
            TasksCommand::Result(a) => {
                let result = conn.request("tasks/result", Some(json!({"taskId": a.task_id})), args.timeout).await.map_err(failure);
                match result {
                    // Through an mcpdev hub, the device that answered (as `call --task` shows it).
                    Ok(r) => {
                        let hub = super::target::is_mcpdev_hub(&conn.server_info());
                        let by = hub.then(|| super::target::meta_device(&r)).flatten().unwrap_or(&name);
                        super::call_result::show(global, by, &r, &a.task_id, None)
                    }
                    Err(e) => Err(e.into()),
                }
            }
        },
    };
    conn.close().await;
    out
}

/// An error unless the server declares the `tasks` capability.
pub fn keeps_tasks(conn: &McpConnection, name: &str) -> anyhow::Result<()> {
    if conn.server_info()["capabilities"]["tasks"].is_object() {
        return Ok(());
    }
    Err(CodedError::new(Exit::InvalidCall, format!("the MCP server at {name} keeps no tasks (its initialize declares no `tasks` capability); nothing was sent")).into())
}

async fn list(global: &GlobalArgs, conn: &McpConnection, name: &str, timeout: Duration) -> anyhow::Result<()> {
    let tasks = conn.list_all("tasks/list", "tasks", json!({}), timeout, None).await.map_err(failure)?;
    if global.json {
        print_json(&device_document(name, &json!({"tasks": tasks})));
        return Ok(());
    }
    let mut t = table(global, &["task", "status", "message", "created", "ttl"]);
    for task in &tasks {
        t.add_row(vec![
            task["taskId"].as_str().unwrap_or_default().to_string(),
            task["status"].as_str().unwrap_or_default().to_string(),
            task["statusMessage"].as_str().unwrap_or_default().to_string(),
            task["createdAt"].as_str().unwrap_or_default().to_string(),
            task["ttl"].as_u64().map(|ms| format!("{ms} ms")).unwrap_or_else(|| "unlimited".into()),
        ]);
    }
    outln!("{}", render(&t));
    if !global.quiet {
        eprintln!("{} task(s) on {}", tasks.len(), text(name));
    }
    Ok(())
}

/// `tasks/get` or `tasks/cancel`: the task as the server describes it.
async fn one(global: &GlobalArgs, conn: &McpConnection, name: &str, method: &str, args: &TaskIdArgs) -> anyhow::Result<()> {
    let task = conn.request(method, Some(json!({"taskId": args.task_id})), args.server.timeout).await.map_err(failure)?;
    if global.json {
        print_json(&device_document(name, &task));
        return Ok(());
    }
    let mut t = table(global, &["field", "value"]);
    for (k, v) in task.as_object().into_iter().flatten() {
        t.add_row(vec![k.clone(), v.as_str().map_or_else(|| v.to_string(), str::to_string)]);
    }
    outln!("{}", render(&t));
    Ok(())
}

/// How following a task ended.
pub enum Followed {
    /// `tasks/result`'s answer (the call's result, or the server's error for a failed task).
    Done(Result<Value, crate::links::mcp::McpFailure>),
    /// Ctrl-C: cancelled on the server.
    Interrupted,
}

/// Follows `task` (a `CreateTaskResult`'s task) until it ends or `deadline`, showing its status
/// on stderr, then fetches its result.
pub async fn follow(global: &GlobalArgs, conn: &McpConnection, task: &Value, timeout: Duration) -> anyhow::Result<Followed> {
    let id = task["taskId"].as_str().ok_or_else(|| CodedError::new(Exit::ToolError, format!("the server created a task without a taskId: {task}")))?.to_string();
    let deadline = tokio::time::Instant::now() + timeout;
    let stop = super::stop_signal::install()?;
    let stopped = stop.wait();
    tokio::pin!(stopped);
    let mut shown = String::new();
    let mut current = task.clone();
    loop {
        let line = format!("task {id}: {}{}", current["status"].as_str().unwrap_or("?"), current["statusMessage"].as_str().map(|m| format!(" ({m})")).unwrap_or_default());
        if line != shown && !global.quiet {
            eprintln!("{}", text(&line));
            shown = line;
        }
        if matches!(current["status"].as_str(), Some("completed" | "failed" | "cancelled")) {
            break;
        }
        let pause = current["pollInterval"].as_u64().map_or(POLL_DEFAULT, Duration::from_millis).clamp(POLL_MIN, POLL_MAX);
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        tokio::select! {
            _ = &mut stopped => {
                let cancelled = conn.request("tasks/cancel", Some(json!({"taskId": id})), crate::links::mcp::CLOSE_WAIT).await;
                if !global.quiet {
                    match cancelled {
                        Ok(t) => eprintln!("interrupted: task {} cancelled (now {})", text(&id), text(t["status"].as_str().unwrap_or("?"))),
                        Err(e) => eprintln!("interrupted: cancelling task {} failed: {}", text(&id), text(&e.to_string())),
                    }
                }
                return Ok(Followed::Interrupted);
            }
            _ = tokio::time::sleep(pause.min(left)) => {}
            note = status_note(conn, &id) => if let Some(t) = note { current = t; continue; },
        }
        if left <= pause {
            return Err(CodedError::new(Exit::Timeout, format!("task {id} did not finish within {timeout:?}; it runs on"))
                .with_help(format!("`mcpdev tasks result {id}` (same server) fetches its result; `mcpdev tasks cancel {id}` stops it"))
                .into());
        }
        current = conn.request("tasks/get", Some(json!({"taskId": id})), left).await.map_err(failure)?;
    }
    let left = deadline.saturating_duration_since(tokio::time::Instant::now()).max(POLL_MAX);
    Ok(Followed::Done(conn.request("tasks/result", Some(json!({"taskId": id})), left).await))
}

/// The next `notifications/tasks/status` about task `id` (other notifications are skipped).
async fn status_note(conn: &McpConnection, id: &str) -> Option<Value> {
    loop {
        let note = conn.next_note().await?;
        if note["method"] == "notifications/tasks/status" && note["params"]["taskId"] == id {
            return Some(note["params"].clone());
        }
    }
}
