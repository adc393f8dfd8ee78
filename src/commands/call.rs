//! `mcpdev call TOOL k=v …`: arguments typed and validated by the tool's inputSchema, then sent.

use serde_json::{Value, json};

use super::call_result::show;
use super::target::{Target, call_failure, onboarding_failure};
use crate::cli::{CallArgs, GlobalArgs};
use crate::exit::{CodedError, Exit};

pub async fn run(global: &GlobalArgs, args: CallArgs) -> anyhow::Result<()> {
    let (target, info) = Target::open_for(&args.target, global, None, Some(&args.tool)).await?;
    let out = run_on(global, args, &target, info).await;
    target.close().await;
    out
}

async fn run_on(
    global: &GlobalArgs,
    args: CallArgs,
    target: &Target,
    info: Value,
) -> anyhow::Result<()> {
    if let Some(failed) = onboarding_failure(target.device_id(), &info) {
        return Err(failed);
    }
    let tools: &[Value] = info["tools"].as_array().map_or(&[], Vec::as_slice);
    let Some(tool) = tools.iter().find(|t| t["name"] == args.tool.as_str()) else {
        let names = tools.iter().filter_map(|t| t["name"].as_str());
        let suggestions = crate::args::suggest(&args.tool, names);
        let hint = match suggestions.as_slice() {
            [] if matches!(target, Target::Mcp { .. }) => "; `mcpdev tools list --url …` shows them all".to_string(),
            [] => "; `mcpdev tools list --user-tools` shows them all".to_string(),
            s => format!("; did you mean {}?", s.iter().map(|n| format!("'{n}'")).collect::<Vec<_>>().join(" or ")),
        };
        let owner = if matches!(target, Target::Mcp { .. }) { "the MCP server at" } else { "device" };
        // What an mcpdev hub said of the device the name's prefix names (it left, say).
        let hub_said = info["fleet_note"].as_str().map(|n| format!("\n{}", super::output::text(n))).unwrap_or_default();
        return Err(CodedError::new(Exit::InvalidCall, format!("{owner} {} has no tool '{}'{hint}{hub_said}", target.device_id(), args.tool)).into());
    };
    let schema = &tool["inputSchema"];
    let arguments = crate::args::build_arguments(schema, &args.args, args.args_json.as_deref())
        .map_err(|e| CodedError::new(Exit::InvalidCall, format!("the arguments do not fit {}'s inputSchema; nothing was sent:\n  {e}", args.tool)))?;
    if !args.no_validate
        && let Err(errors) = crate::args::validate(schema, &arguments)
    {
        let lines: Vec<String> = errors.iter().map(|e| format!("  {e}")).collect();
        let msg = format!(
            "the arguments do not fit {}'s inputSchema; nothing was sent:\n{}\n(--no-validate sends them anyway)",
            args.tool,
            lines.join("\n")
        );
        return Err(CodedError::new(Exit::InvalidCall, msg).into());
    }
    let params = json!({"name": args.tool, "arguments": arguments});
    let support = tool.pointer("/execution/taskSupport").and_then(Value::as_str).unwrap_or("forbidden");
    if let Target::Mcp { conn, .. } = target
        && (args.task || support == "required")
    {
        return as_task(global, &args, target, conn, params, support).await;
    }
    // Ctrl-C gives the call up, which cancels it on the server (`notifications/cancelled`), or on
    // the hub (the control connection ends, and the hub tells the device). Handled here, not left
    // to the default action: a CLI started with SIGINT ignored (a background job) still stops.
    let stop = super::stop_signal::install()?;
    let result = tokio::select! {
        r = target.request("tools/call", Some(params), args.target.timeout) => r,
        _ = stop.wait() => return Err(CodedError::new(Exit::Interrupted, format!("interrupted: the call of {} was cancelled on the server", args.tool)).into()),
    };
    let result = result.map_err(|e| with_timeout_hint(e, args.target.timeout, support))?;
    show(global, target.answered_by(&result), &result, &args.tool, args.save_images.as_deref())
}

/// A call's failure; a timeout says how to wait longer: `--task` when the tool runs as a task
/// (its `taskSupport` is "optional"), else `--timeout` with a longer time than `timeout`.
fn with_timeout_hint(e: super::target::CallFailure, timeout: std::time::Duration, support: &str) -> anyhow::Error {
    let timed_out = matches!(e, super::target::CallFailure::Timeout(_));
    let err = call_failure(e);
    if !timed_out {
        return err;
    }
    let longer = humantime::format_duration(timeout.saturating_mul(4).max(std::time::Duration::from_secs(60)));
    let help = if support == "optional" {
        format!("the tool can run as a task: `--task` starts it and follows it to its end, however long it takes; or wait longer with --timeout {longer}")
    } else {
        format!("a slow tool needs longer: --timeout {longer} (or MCPDEV_TIMEOUT)")
    };
    match err.downcast::<CodedError>() {
        Ok(coded) => coded.with_help(help).into(),
        Err(other) => other,
    }
}

/// `call --task`: the call made a task on the server, followed to its end.
async fn as_task(global: &GlobalArgs, args: &CallArgs, target: &Target, conn: &crate::links::mcp::McpConnection, params: Value, support: &str) -> anyhow::Result<()> {
    super::tasks::keeps_tasks(conn, target.device_id())?;
    if support == "forbidden" {
        let msg = format!("tool {} does not run as a task (its execution.taskSupport is not \"optional\" or \"required\"); nothing was sent", args.tool);
        return Err(CodedError::new(Exit::InvalidCall, msg).with_help("call it without --task").into());
    }
    if !args.task && !global.quiet {
        eprintln!("tool {} runs only as a task (taskSupport: required): running it as one", super::output::text(&args.tool));
    }
    let mut params = target.mcp_call_params(params);
    params["task"] = match args.task_ttl {
        Some(ttl) => json!({"ttl": ttl.as_millis() as u64}),
        None => json!({}),
    };
    let created = conn.request("tools/call", Some(params), args.target.timeout).await.map_err(super::mcp_server::failure)?;
    let Some(task) = created.get("task") else {
        // A server that ran the call at once instead (allowed for an optional tool).
        return show(global, target.answered_by(&created), &created, &args.tool, args.save_images.as_deref());
    };
    match super::tasks::follow(global, conn, task, args.target.timeout).await? {
        super::tasks::Followed::Interrupted => Err(CodedError::new(Exit::Interrupted, "interrupted").into()),
        super::tasks::Followed::Done(result) => {
            let result = result.map_err(super::mcp_server::failure)?;
            show(global, target.answered_by(&result), &result, &args.tool, args.save_images.as_deref())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::target::CallFailure;

    fn help_of(e: anyhow::Error) -> Option<String> {
        e.downcast::<CodedError>().ok().and_then(|c| c.help)
    }

    #[test]
    fn a_timeout_says_how_to_wait_longer() {
        let timeout = || CallFailure::Timeout("device x did not answer within 1s".into());
        let help = help_of(with_timeout_hint(timeout(), std::time::Duration::from_secs(30), "optional")).unwrap();
        assert!(help.contains("`--task`") && help.contains("--timeout 2m"), "{help}");
        let help = help_of(with_timeout_hint(timeout(), std::time::Duration::from_secs(1), "forbidden")).unwrap();
        assert!(!help.contains("--task") && help.contains("--timeout 1m"), "{help}");
        // Any other failure keeps its own words.
        let gone = with_timeout_hint(CallFailure::Gone("device x left".into()), std::time::Duration::from_secs(1), "optional");
        assert_eq!(help_of(gone), None);
    }
}
