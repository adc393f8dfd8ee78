//! `mcpdev check --listen ADDR`: accept the next device, run every check (src/check/), print the
//! table (or `--json`), write `--junit FILE`, and exit 10 when a check failed.

use anyhow::Context;
use tokio::net::TcpListener;

use crate::check::{self, Options, report};
use crate::cli::{CheckArgs, GlobalArgs};
use crate::exit::{CodedError, Exit};

pub async fn run(global: &GlobalArgs, args: CheckArgs) -> anyhow::Result<()> {
    if args.call.iter().any(|g| g.trim().is_empty()) {
        return Err(CodedError::new(Exit::Usage, "--call needs a tool name or a glob such as 'self.audio_speaker.*'").into());
    }
    let listener = TcpListener::bind(args.listen)
        .await
        .map_err(|e| CodedError::new(Exit::Usage, format!("cannot listen on {}: {e}", args.listen)))?;
    if !global.quiet {
        // Also with --json (on stderr): a script starting the device next needs the real port.
        eprintln!("listening on ws://{}/xiaozhi/v1/ for the device to check…", listener.local_addr()?);
    }
    let (conn, greeting, since_hello) = tokio::select! {
        accepted = check::conn::accept(&listener, args.wait, args.timeout) => accepted.map_err(|e| CodedError::new(Exit::Unreachable, format!("{e:#}")))?,
        _ = tokio::signal::ctrl_c() => return Err(CodedError::interrupted().into()),
    };
    drop(listener);
    let opts = Options { call: args.call.clone(), max_onboarding: args.max_onboarding, fuzz: args.fuzz as usize };
    let report = tokio::select! {
        r = check::run(conn, greeting, since_hello, &opts) => r,
        _ = tokio::signal::ctrl_c() => return Err(CodedError::interrupted().into()),
    };
    if let Some(path) = &args.junit {
        std::fs::write(path, report::junit(&report, args.strict)).with_context(|| format!("writing {}", path.display()))?;
    }
    if global.json {
        super::output::print_json(&report::json(&report, args.strict));
    } else {
        println!("{}", report::table(&report, global));
    }
    if report.failed(args.strict) {
        let what = if args.strict { "failed or warned" } else { "failed" };
        let n = report.count(check::Status::Fail) + if args.strict { report.count(check::Status::Warn) } else { 0 };
        return Err(CodedError::new(Exit::CheckFailed, format!("{n} check(s) {what} for {}", report.device_id)).into());
    }
    Ok(())
}
