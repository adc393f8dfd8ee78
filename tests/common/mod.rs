//! Shared helpers for the end-to-end tests: run the built binary, and a WebSocket backend.
#![allow(dead_code)]

pub mod ws;

use std::process::Stdio;

/// A running `mcpdev` process, killed when dropped.
pub struct Running {
    pub child: tokio::process::Child,
}

/// Starts the built `mcpdev` binary with `args` and extra environment; stdout is piped, stderr
/// inherited (so its logs show up in a failing test's output).
pub fn spawn_mcpdev(args: &[&str], env: &[(&str, &str)]) -> Running {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"));
    cmd.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::inherit()).kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    Running { child: cmd.spawn().expect("spawn mcpdev") }
}
