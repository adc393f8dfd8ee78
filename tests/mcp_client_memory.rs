//! Issue 44 item 4: a hostile MCP server cannot make the CLI hold much more than what it sends.
//! `tests/fixtures/hostile_stdio_server.py` answers `tools/list` with one message built to cost a
//! client the most (`[{"a":0},…]`, the smallest valid tools, a schema of small numbers, one long
//! string), or sends 32 notifications first. The peak resident memory of the `mcpdev` process
//! (ru_maxrss from wait4) over a well-behaved server's must stay within a bound proportional to
//! the message: generous (debug build, allocator slack), yet a tenth of what it was (130–550×).

use std::io::Read;
use std::process::{Command, Stdio};

use common::repo_path;

mod common;

/// The message size each case sends: small enough for a debug build, large enough to dwarf the
/// process's own memory.
const SIZE: usize = 4 << 20;

/// Peak RSS growth allowed, in multiples of the message: generous (a debug build; the costliest
/// shape, the smallest valid tools, measured 14–18×).
const BOUND: usize = 24;

/// Runs `tools list` against the hostile server in `mode`; its exit code, peak RSS (KiB), stderr.
fn peak(mode: &str, json: bool) -> (i32, usize, String) {
    let server = format!("python3 {} {mode}", repo_path("tests/fixtures/hostile_stdio_server.py").display());
    let mut args = vec!["tools", "list", "--stdio", &server, "--timeout", "120s"];
    if json {
        args.push("--json");
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcpdev")).args(&args).env("NO_COLOR", "1").stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    let (mut status, mut usage) = (0, unsafe { std::mem::zeroed::<libc::rusage>() });
    // SAFETY: our own child, not yet waited for; wait4 fills the two out-parameters.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32);
    let code = if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { -libc::WTERMSIG(status) };
    (code, usage.ru_maxrss as usize, stderr)
}

#[test]
fn a_hostile_servers_message_costs_the_cli_a_bounded_multiple_of_its_size() {
    let mut report = Vec::new();
    let mut over = Vec::new();
    for json in [false, true] {
        let (code, base, stderr) = peak("plain", json);
        assert_eq!(code, 0, "{stderr}");
        for shape in ["objects", "tools", "numbers", "string"] {
            let (code, kib, stderr) = peak(&format!("big-tools:{shape}:{SIZE}"), json);
            assert_eq!(code, 0, "{shape}: {stderr}");
            let ratio = kib.saturating_sub(base) as f64 / (SIZE >> 10) as f64;
            report.push(format!("{shape} (json: {json}): {kib} KiB, base {base} KiB, {ratio:.1}x"));
            if kib > base + BOUND * (SIZE >> 10) {
                over.push(report.last().unwrap().clone());
            }
            // What was cut off is named.
            match shape {
                "objects" => assert!(stderr.contains("were not objects with a string `name`; skipped"), "{stderr}"),
                "numbers" => assert!(stderr.contains("mcpdev keeps no item that dense"), "{stderr}"),
                _ => {}
            }
        }
    }
    assert!(over.is_empty(), "over {BOUND}x the message:\n{}\nall:\n{}", over.join("\n"), report.join("\n"));
}

#[test]
fn unread_notifications_are_held_within_their_budget() {
    let (_, base, _) = peak("plain", false);
    // 32 notifications of 4 MiB (128 MiB) before the answer: at most 4 MiB of them are kept.
    let (code, kib, stderr) = peak(&format!("notes:32:{SIZE}"), false);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("more notifications than mcpdev keeps unread"), "{stderr}");
    assert!(kib < base + 8 * (SIZE >> 10), "{kib} KiB against {base} KiB with no notifications");
}
