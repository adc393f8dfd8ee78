//! `mcpdev check`: accept the next device (`--listen ADDR`), reach one through a broker
//! (`--mqtt URL -d ID`) or through a hub (`-d`), run every check (src/check/), print the table
//! (or `--json`), write `--junit FILE`, and exit 10 when a check failed.

use super::output::outln;
use anyhow::Context;
use tokio::net::TcpListener;

use crate::check::{self, Options, report};
use crate::cli::{CheckArgs, GlobalArgs};
use crate::exit::{CodedError, Exit};

pub async fn run(global: &GlobalArgs, args: CheckArgs) -> anyhow::Result<()> {
    if args.call.iter().any(|g| g.trim().is_empty()) {
        return Err(CodedError::new(Exit::Usage, "--call needs a tool name or a glob such as 'self.audio_speaker.*'").into());
    }
    let (conn, greeting, since_hello) = match (args.listen, &args.mqtt) {
        (Some(addr), _) => {
            let listener = TcpListener::bind(addr).await.map_err(|e| CodedError::new(Exit::Usage, format!("cannot listen on {addr}: {e}")))?;
            if !global.quiet {
                // Also with --json (on stderr): a script starting the device next needs the real port.
                eprintln!("listening on ws://{}/xiaozhi/v1/ for the device to check…", listener.local_addr()?);
            }
            tokio::select! {
                accepted = check::conn::accept(&listener, args.wait.unwrap_or(std::time::Duration::from_secs(3600)), args.timeout) => accepted.map_err(|e| CodedError::new(Exit::Unreachable, format!("{e:#}")))?,
                _ = super::stop_signal::stop_signal() => return Err(CodedError::interrupted().into()),
            }
        }
        (None, Some(url)) => tokio::select! {
            reached = check::conn::through_broker(url, args.device.as_deref(), args.wait, args.timeout) => reached?,
            _ = super::stop_signal::stop_signal() => return Err(CodedError::interrupted().into()),
        },
        (None, None) => {
            let device = crate::config::resolve_alias(args.device.as_deref());
            let (conn, greeting) = check::conn::through_hub(&args.hub, device.as_deref(), args.wait.unwrap_or_default(), args.timeout).await?;
            (conn, greeting, std::time::Instant::now())
        }
    };
    let opts = Options { call: args.call.clone(), max_onboarding: args.max_onboarding, fuzz: args.fuzz as usize };
    let report = tokio::select! {
        r = check::run(conn, greeting, since_hello, &opts) => r,
        _ = super::stop_signal::stop_signal() => return Err(CodedError::interrupted().into()),
    };
    if let Some(path) = &args.junit {
        std::fs::write(path, report::junit(&report, args.strict)).with_context(|| format!("writing {}", path.display()))?;
    }
    if global.json {
        super::output::print_json(&report::json(&report, args.strict));
    } else {
        outln!("{}", table(&report, global));
    }
    if report.failed(args.strict) {
        let what = if args.strict { "failed or warned" } else { "failed" };
        let n = report.count(check::Status::Fail) + if args.strict { report.count(check::Status::Warn) } else { 0 };
        return Err(CodedError::new(Exit::CheckFailed, format!("{n} check(s) {what} for {}", report.device_id)).into());
    }
    Ok(())
}

/// A table: one row per check, then the timing and a summary line.
fn table(report: &check::Report, global: &GlobalArgs) -> String {
    use comfy_table::{Attribute, Color};
    use std::fmt::Write;
    let mut t = super::output::table(global, &["CHECK", "RESULT", "REASON", "REFERENCE"]);
    for c in &report.results {
        // Coloured by the table, only when colour is on; the reason may quote the device.
        let (color, attribute) = match c.status {
            check::Status::Pass => (Some(Color::Green), None),
            check::Status::Warn => (Some(Color::Yellow), None),
            check::Status::Fail => (Some(Color::Red), Some(Attribute::Bold)),
            check::Status::Skip => (None, Some(Attribute::Dim)),
        };
        let status = super::output::Cell::styled(c.status.as_str(), color, attribute);
        t.add_row([c.id.as_str().into(), status, c.reason.as_str().into(), c.reference.into()]);
    }
    let mut out = super::output::render(&t);
    let _ = write!(out, "\nonboarding {} ms after {}", report.timing["onboarding_ms"], report.timing["onboarding_from"].as_str().unwrap_or("the hello"));
    if let Some(methods) = report.timing["methods"].as_object() {
        for (m, s) in methods {
            let _ = write!(out, "; {m} p50 {} ms p99 {} ms (n={})", s["p50_ms"], s["p99_ms"], s["count"]);
        }
    }
    let _ = write!(
        out,
        "\n{}: {} pass, {} warn, {} fail, {} skip",
        super::terminal_text::cell(&report.device_id),
        report.count(check::Status::Pass),
        report.count(check::Status::Warn),
        report.count(check::Status::Fail),
        report.count(check::Status::Skip)
    );
    out
}
