//! A Node script driving Debian's Chromium through playwright-core (`tests/browser/*.cjs`), and
//! the reports it prints: one JSON object a line after a fixed prefix, `{"step": …}`.
//!
//! Rules: every wait has a deadline; a failed step or a driver that exits or falls silent fails
//! the test with everything it said; closing its stdin closes Chromium. A page's steps may come in
//! any order (its vision upload runs beside its MCP answers): a report not waited for yet is kept
//! until a later `step` asks for it.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout};

use super::{installed, repo_path};

/// Chromium starts in about a second; past this a step is a failure.
pub const STEP_DEADLINE: Duration = Duration::from_secs(60);

pub struct BrowserDriver {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    seen: Vec<String>,
    /// Reports read while waiting for another step, oldest first.
    pending: VecDeque<Value>,
    prefix: &'static str,
    failed: fn(&str) -> bool,
}

impl BrowserDriver {
    /// Runs `node <script> <playwright-core> <chromium> <profile> <args…>`. Reports are the lines
    /// starting with `prefix`; a step for which `failed` holds fails the test.
    pub fn open(script: &str, profile: &std::path::Path, args: &[&str], prefix: &'static str, failed: fn(&str) -> bool) -> Self {
        let node = installed("MCPDEV_TEST_NODE22", repo_path(".ci/node22/node_modules/node/bin/node"), "Node 22 (npm package node@22)");
        let playwright = installed("MCPDEV_TEST_NODE_BROWSER", repo_path(".ci/browser/node_modules/playwright-core"), "playwright-core (npm)");
        let chromium = installed("MCPDEV_TEST_CHROMIUM", PathBuf::from("/usr/bin/chromium"), "Chromium (Debian package chromium)");
        let mut child = tokio::process::Command::new(node)
            .arg(repo_path(script))
            .arg(playwright)
            .arg(chromium)
            .arg(profile)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("run the browser driver {script}: {e}"));
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Self { child, lines, seen: Vec::new(), pending: VecDeque::new(), prefix, failed }
    }

    /// Waits for the report of `step` and returns it: the oldest one already read, or the next.
    pub async fn step(&mut self, step: &str) -> Value {
        if let Some(at) = self.pending.iter().position(|v| v["step"] == step) {
            return self.pending.remove(at).unwrap();
        }
        let deadline = tokio::time::Instant::now() + STEP_DEADLINE;
        loop {
            let line = match tokio::time::timeout_at(deadline, self.lines.next_line()).await {
                Ok(Ok(Some(line))) => line,
                Ok(_) => panic!("the browser driver exited before it reported {step:?}; it said:\n{}", self.seen.join("\n")),
                Err(_) => panic!("no report of {step:?} within {STEP_DEADLINE:?}; the driver said:\n{}", self.seen.join("\n")),
            };
            self.seen.push(line.clone());
            let Some(report) = line.strip_prefix(self.prefix) else { continue };
            let v: Value = serde_json::from_str(report).unwrap();
            let got = v["step"].as_str().unwrap_or_default();
            if got == step {
                return v;
            }
            assert!(!(self.failed)(got), "the browser failed at {got:?} while waiting for {step:?}:\n{}", self.seen.join("\n"));
            self.pending.push_back(v);
        }
    }

    /// Sends the driver one line on its stdin.
    pub async fn send(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(format!("{line}\n").as_bytes()).await.unwrap();
        stdin.flush().await.unwrap();
    }

    /// Closes the driver's stdin (it closes Chromium and exits) and waits for it.
    pub async fn close(mut self) {
        drop(self.child.stdin.take());
        let _ = tokio::time::timeout(Duration::from_secs(20), self.child.wait()).await;
    }
}
