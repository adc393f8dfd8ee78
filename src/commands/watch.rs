//! `mcpdev watch`: live events from the hub, one line each (NDJSON with --json).

use serde_json::Value;

use crate::cli::{GlobalArgs, WatchArgs};
use crate::exit::{CodedError, Exit};
use crate::links::hub_client::HubClient;

pub async fn run(global: &GlobalArgs, args: WatchArgs) -> anyhow::Result<()> {
    let client = HubClient::open(&args.hub).await?;
    let device = crate::config::resolve_alias(args.device.as_deref());
    let mut events = client.watch(device.as_deref(), args.traffic).await.map_err(|e| CodedError::new(Exit::Unreachable, e.message))?;
    if !global.quiet && !global.json {
        eprintln!("watching {} (Ctrl-C to stop)", args.device.as_deref().unwrap_or("all devices"));
    }
    use std::io::Write;
    let mut seen = 0u64;
    loop {
        let ev = tokio::select! {
            ev = events.recv() => match ev {
                Some(ev) => ev,
                None => return Err(CodedError::new(Exit::Unreachable, "the hub closed the connection").into()),
            },
            _ = tokio::signal::ctrl_c() => return Ok(()),
        };
        let confirmation = ev["event"] == "watching";
        if global.json {
            // The `watching` line tells a script the subscription is live.
            println!("{ev}");
        } else if !confirmation {
            println!("{}", describe(&ev));
        }
        if confirmation {
            continue;
        }
        seen += 1;
        let _ = std::io::stdout().flush();
        if args.count.is_some_and(|n| seen >= n) {
            return Ok(());
        }
    }
}

/// One line for people.
fn describe(ev: &Value) -> String {
    let id = ev["device_id"].as_str().unwrap_or("-");
    let s = |k: &str| ev[k].as_str().unwrap_or_default().to_string();
    let what = match ev["event"].as_str().unwrap_or_default() {
        "connected" => format!("connected over {} from {}", s("transport"), s("remote")),
        "disconnected" => format!("disconnected: {}", s("reason")),
        "hello" => format!("hello {}", ev["hello"]),
        "ready" => format!("ready, {} tool(s)", ev["tools"]),
        "tools_changed" => format!("tools changed, now {}", ev["tools"]),
        "notification" => format!("notification {} {}", s("method"), ev["params"]),
        "message" => format!("message {} {}", s("kind"), ev["message"]),
        "traffic" => {
            let arrow = if ev["direction"] == "in" { "<-" } else { "->" };
            let latency = ev["latency_ms"].as_f64().map(|ms| format!(" ({ms:.1} ms)")).unwrap_or_default();
            format!("{arrow} {}{latency}", ev["payload"])
        }
        "malformed" => format!("malformed frame: {} {:?}", s("reason"), s("text")),
        "late_reply" => format!("late reply to id {} dropped", ev["id"]),
        "warning" => format!("warning: {}", s("message")),
        "lagged" => format!("(skipped {} events: the watcher fell behind)", ev["skipped"]),
        other => format!("{other} {ev}"),
    };
    let time = humantime::format_rfc3339_millis(std::time::SystemTime::now());
    format!("{time} {id} {what}")
}
