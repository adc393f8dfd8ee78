//! `mcpdev watch`: live events from the hub, one line each (NDJSON with --json), each stamped
//! with the time it reached the watcher (`ts`, RFC 3339 UTC with milliseconds).
//!
//! A device notification is shown once, as its `notification` event: with `--traffic` its raw
//! frame is not shown a second time. Ctrl-C ends the watch with exit code 130.
//!
//! Nothing is dropped unsaid: events the watch could not keep up with (the hub's ring moved past
//! it, or its own queue was full, [`crate::links::hub_client::WatchEvents`]) are counted, and
//! the count is printed as "dropped N events" on stderr, and with --json as a
//! `{"event":"lagged","skipped":N}` record in the output.

use super::output::outln;
use serde_json::Value;

use crate::cli::{GlobalArgs, WatchArgs};
use crate::exit::{CodedError, Exit};
use crate::links::hub_client::HubClient;

pub async fn run(global: &GlobalArgs, args: WatchArgs) -> anyhow::Result<()> {
    // Before the `watching` line tells a script the subscription is live.
    let stop = super::stop_signal::install()?;
    let client = HubClient::open(&args.hub).await?;
    let device = crate::config::resolve_alias(args.device.as_deref());
    let mut events = client.watch(device.as_deref(), args.traffic || args.record.is_some()).await.map_err(|e| CodedError::new(Exit::Unreachable, e.message))?;
    let mut recorder = match &args.record {
        Some(path) => Some(super::record::Recorder::create(path, &client, device.as_deref()).await?),
        None => None,
    };
    if !global.quiet && !global.json {
        eprintln!("watching {} (Ctrl-C to stop)", args.device.as_deref().unwrap_or("all devices"));
    }
    use std::io::{IsTerminal, Write};
    let color = crate::commands::output::use_color(global.color, std::io::stdout().is_terminal());
    let mut seen = 0u64;
    // One listener for the whole watch: a signal that comes between two events is not missed.
    let signalled = stop.wait();
    tokio::pin!(signalled);
    loop {
        let mut ev = tokio::select! {
            ev = events.recv() => match ev {
                Some(ev) => ev,
                None => return Err(CodedError::new(Exit::Unreachable, "the hub closed the connection").into()),
            },
            _ = &mut signalled => return Err(CodedError::interrupted().into()),
        };
        stamp(&mut ev, std::time::SystemTime::now());
        if let Some(r) = recorder.as_mut() {
            r.record(&ev)?;
        }
        if is_notification_frame(&ev) || (ev["event"] == "traffic" && !args.traffic) {
            continue;
        }
        // Events this watch did not get (it fell behind, or the hub's ring moved past it): said
        // on stderr, whatever the mode, and as an NDJSON record too with --json. Not an event of
        // a device: it does not count towards --count.
        if ev["event"] == "lagged" {
            eprintln!("{}", dropped_line(&ev));
            if global.json {
                outln!("{}", crate::commands::output::json_line(&ev));
            }
            continue;
        }
        let confirmation = ev["event"] == "watching";
        if global.json {
            // The `watching` line tells a script the subscription is live.
            outln!("{}", crate::commands::output::json_line(&ev));
        } else if !confirmation {
            outln!("{}", describe(&ev, color));
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

/// What a `lagged` notice says on stderr.
fn dropped_line(ev: &Value) -> String {
    let n = ev["skipped"].as_u64().unwrap_or(0);
    format!("mcpdev watch: dropped {n} event{}: the watch fell behind (its output was not read fast enough)", if n == 1 { "" } else { "s" })
}

/// The raw frame of a device notification (`--traffic`): its `notification` event shows it.
fn is_notification_frame(ev: &Value) -> bool {
    ev["event"] == "traffic" && ev["direction"] == "in" && ev["payload"].get("method").is_some() && ev["payload"].get("id").is_none()
}

/// Adds `ts` (RFC 3339, UTC, milliseconds) unless the event has one.
pub(crate) fn stamp(ev: &mut Value, now: std::time::SystemTime) {
    if let Some(obj) = ev.as_object_mut()
        && !obj.contains_key("ts")
    {
        obj.insert("ts".into(), Value::String(humantime::format_rfc3339_millis(now).to_string()));
    }
}

/// One line for people: time, device, what happened; with colour, the device stands out,
/// frames are coloured by direction, and trouble is red or yellow.
pub(crate) fn describe(ev: &Value, color: bool) -> String {
    use console::Style;
    // Every piece may carry the device's text: escaped before it is painted (one line per event).
    let paint = |style: Style, text: String| style.force_styling(color).apply_to(crate::commands::terminal_text::cell(&text)).to_string();
    let id = ev["device_id"].as_str().unwrap_or("-");
    let s = |k: &str| ev[k].as_str().unwrap_or_default().to_string();
    let event = ev["event"].as_str().unwrap_or_default();
    let what = match event {
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
            // Who sent it (the device, the hub, a host, a relayed device's upstream).
            let by = ev["by"].as_str().map(|b| format!("{b}: ")).unwrap_or_default();
            format!("{arrow} {by}{}{latency}", ev["payload"])
        }
        "malformed" => format!("malformed frame: {} {:?}", s("reason"), s("text")),
        "late_reply" => format!("late reply to id {} dropped", ev["id"]),
        "warning" => format!("warning: {}", s("message")),
        "onboarding_retry" => format!("onboarding step failed ({}); attempt {} of {} in {} ms", s("error"), ev["attempt"], ev["of"], ev["retry_in_ms"]),
        "onboarding_failed" => s("error"),
        "lagged" => format!("(dropped {} events: the watcher fell behind)", ev["skipped"]),
        "suppressed" => {
            let counts = ev["counts"].as_object().map(|m| m.iter().map(|(k, v)| format!("{v} {k}")).collect::<Vec<_>>().join(", ")).unwrap_or_default();
            format!("({} more events not shown in the last {} s: {counts}; the last: {})", ev["count"], ev["window_s"], s("last"))
        }
        other => format!("{other} {ev}"),
    };
    let style = match event {
        "traffic" if ev["payload"].get("error").is_some() => Style::new().red(),
        "traffic" if ev["direction"] == "in" => Style::new().green(),
        "traffic" => Style::new().blue(),
        "disconnected" | "malformed" | "onboarding_failed" => Style::new().red(),
        "warning" | "late_reply" | "lagged" | "suppressed" | "onboarding_retry" => Style::new().yellow(),
        "connected" | "ready" => Style::new().bold(),
        _ => Style::new(),
    };
    let time = ev["ts"].as_str().map_or_else(|| humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(), str::to_string);
    format!("{} {} {}", paint(Style::new().dim(), time), paint(Style::new().cyan(), id.to_string()), paint(style, what))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(ms: u64) -> std::time::SystemTime {
        std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms)
    }

    #[test]
    fn a_notification_is_shown_once_even_with_traffic() {
        let params = json!({"newState": 33, "oldState": 70, "what": "audio_speaker.volume"});
        let frame = json!({"device_id": "02:00:00:00:00:01", "event": "traffic", "direction": "in",
            "payload": {"jsonrpc": "2.0", "method": "notifications/state_changed", "params": params}});
        let reply = json!({"device_id": "02:00:00:00:00:01", "event": "traffic", "direction": "in",
            "payload": {"jsonrpc": "2.0", "id": 3, "result": {}}});
        let sent = json!({"device_id": "02:00:00:00:00:01", "event": "traffic", "direction": "out",
            "payload": {"jsonrpc": "2.0", "method": "notifications/initialized"}});
        assert!(is_notification_frame(&frame));
        assert!(!is_notification_frame(&reply), "a reply is traffic of its own");
        assert!(!is_notification_frame(&sent), "what the hub sends is shown");
    }

    #[test]
    fn lines_for_people_are_stamped_and_coloured_only_when_asked() {
        let mut ev = json!({"device_id": "02:00:00:00:00:01", "event": "disconnected", "reason": "closed by the device"});
        stamp(&mut ev, at(1_795_000_000_123));
        assert_eq!(ev["ts"], "2026-11-18T11:06:40.123Z");
        let plain = describe(&ev, false);
        insta::assert_snapshot!("watch_line_plain", plain);
        let coloured = describe(&ev, true);
        assert!(coloured.contains("\u{1b}[31m"), "a disconnect is red: {coloured:?}");
        assert_eq!(console::strip_ansi_codes(&coloured), plain);
    }
}
