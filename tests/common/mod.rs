//! Shared helpers for the end-to-end tests: run the built binary, and a WebSocket backend.
#![allow(dead_code)]
#![allow(clippy::result_large_err, reason = "tungstenite handshake callbacks return an HTTP response as their error")]

pub mod browser;
pub mod cluster;
pub mod dynsec;
pub mod mqtt;
pub mod ota;
pub mod vision;
pub mod raw_http;
pub mod pki;
pub mod pty;
pub mod ws;
pub mod mcp_proxy;
pub mod mcp_session;
pub mod relay;
pub mod sdk;
pub mod upstream;

use std::process::Stdio;

/// A running `mcpdev` process, killed when dropped.
pub struct Running {
    pub child: tokio::process::Child,
}

/// Starts the built `mcpdev` binary with `args` and extra environment; stdout is piped, stderr
/// inherited (so its logs show up in a failing test's output).
pub fn spawn_mcpdev(args: &[&str], env: &[(&str, &str)]) -> Running {
    spawn_mcpdev_with(args, env, Stdio::inherit())
}

/// [`spawn_mcpdev`], with stderr as the caller wants it (piped, to read what a command says there).
pub fn spawn_mcpdev_with(args: &[&str], env: &[(&str, &str)], stderr: Stdio) -> Running {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"));
    cmd.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(stderr).kill_on_drop(true);
    // A `sim` with no id of its own takes the first default slot no other `sim` on this machine
    // holds, and tests run side by side: these tests mean the default first id itself, so they
    // name it (a named id never moves). `tests/first_hour.rs` tests the moving default.
    if args.first() == Some(&"sim") && !args.iter().any(|a| *a == "--device-id" || *a == "--replay") {
        cmd.args(["--device-id", "02:00:00:00:00:01"]);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    Running { child: cmd.spawn().expect("spawn mcpdev") }
}

pub mod fake_device;

use tokio::io::{AsyncBufReadExt, BufReader};

/// A running `mcpdev serve` on ephemeral loopback ports.
pub struct HubProcess {
    pub running: Running,
    /// `ws://127.0.0.1:PORT/xiaozhi/v1/`
    pub device_url: String,
    /// `http://127.0.0.1:PORT`
    pub host_url: String,
    /// The whole `listening` line (`ota`, and `mqtt`/`udp_port` when the hub runs MQTT).
    pub info: serde_json::Value,
    /// The rest of the hub's stdout: its NDJSON event log (kept open, so the hub can write it).
    pub log: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    /// The hub's private state directory when the test did not name one (removed on drop).
    _state: tempfile::TempDir,
    /// Where the hub keeps its control token: [`mcpdev`] runs the CLI with the same.
    pub runtime_dir: String,
    /// What the hub wrote to stderr so far, when started with [`HubProcess::start_capturing`].
    pub stderr: Option<std::sync::Arc<std::sync::Mutex<String>>>,
}

/// The hub secret of every hub [`HubProcess::cluster`] starts.
pub const CLUSTER_SECRET: [u8; 32] = {
    let mut b = [0u8; 32];
    let mut i = 0;
    while i < 32 {
        b[i] = ((i * 37 + 11) % 256) as u8;
        i += 1;
    }
    b
};

/// Writes `hex` as the hub secret of the state directory `dir` (0600, as the hub requires).
pub fn write_secret(dir: &std::path::Path, hex: &str) {
    let path = dir.join("hub-secret");
    std::fs::write(&path, hex).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
}

/// [`CLUSTER_SECRET`] as hex digits, as the `hub-secret` file holds it.
pub fn cluster_secret_hex() -> String {
    CLUSTER_SECRET.iter().map(|b| format!("{b:02x}")).collect()
}

/// [`CLUSTER_SECRET`] as the hubs hold it: what a test signs cluster records with.
pub fn cluster_secret() -> mcpdev::hub::secret::HubSecret {
    mcpdev::hub::secret::HubSecret::from_bytes(&CLUSTER_SECRET)
}

impl HubProcess {
    /// Starts `mcpdev serve --json --approve-all` (tests not about admission admit every device)
    /// with extra arguments and waits for its `listening` line.
    pub async fn start(extra: &[&str], env: &[(&str, &str)]) -> Self {
        let mut args = vec!["--approve-all"];
        args.extend_from_slice(extra);
        Self::start_admitting(&args, env).await
    }

    /// Starts `mcpdev serve --json` in its default admission mode (plus `extra`). Its state (hub
    /// secret, approvals) goes to `MCPDEV_STATE_DIR` when `env` names one, else to a fresh
    /// temporary directory, never to the user's own.
    pub async fn start_admitting(extra: &[&str], env: &[(&str, &str)]) -> Self {
        Self::start_with(extra, env, false).await
    }

    /// As [`HubProcess::start`], with the hub's stderr (its log) collected in `stderr`.
    pub async fn start_capturing(extra: &[&str], env: &[(&str, &str)]) -> Self {
        let mut args = vec!["--approve-all"];
        args.extend_from_slice(extra);
        Self::start_with(&args, env, true).await
    }

    /// `n` hubs of one cluster (`--approve-all`, plus `extra`, which names the broker): each with
    /// its own state directory holding the same hub secret, as docs/cluster.md requires (their
    /// indexes and requests are MAC'd with it); the directories go with the hubs.
    pub async fn cluster(
        n: usize,
        extra: &[&str],
        capture: bool,
    ) -> (Vec<Self>, Vec<tempfile::TempDir>) {
        Self::cluster_of(&vec![extra; n], capture).await
    }

    /// A cluster as [`Self::cluster`], each hub with its own `extra` arguments.
    pub async fn cluster_of(extras: &[&[&str]], capture: bool) -> (Vec<Self>, Vec<tempfile::TempDir>) {
        let secret = cluster_secret_hex();
        let (mut hubs, mut dirs) = (Vec::new(), Vec::new());
        for extra in extras {
            let dir = tempfile::tempdir().unwrap();
            write_secret(dir.path(), &secret);
            let state = dir.path().to_string_lossy().into_owned();
            let mut args = vec!["--approve-all"];
            args.extend_from_slice(extra);
            hubs.push(Self::start_with(&args, &[("MCPDEV_STATE_DIR", &state)], capture).await);
            dirs.push(dir);
        }
        (hubs, dirs)
    }

    /// Starts `mcpdev serve --json` with `extra` (no `--approve-all` unless given), its stderr
    /// collected in `stderr` when `capture`.
    pub async fn start_with(extra: &[&str], env: &[(&str, &str)], capture: bool) -> Self {
        let mut args = vec!["serve", "--json"];
        // A test may bind either listener elsewhere (`--host-addr 0.0.0.0:0`, the remote set-up).
        if !extra.contains(&"--device-addr") {
            args.extend(["--device-addr", "127.0.0.1:0"]);
        }
        if !extra.contains(&"--host-addr") {
            args.extend(["--host-addr", "127.0.0.1:0"]);
        }
        args.extend_from_slice(extra);
        let state = tempfile::tempdir().expect("temporary state directory");
        let mut env = env.to_vec();
        let state_path = state.path().to_string_lossy().into_owned();
        if !env.iter().any(|(k, _)| *k == "MCPDEV_STATE_DIR") {
            env.push(("MCPDEV_STATE_DIR", &state_path));
        }
        // The control token stays where the CLI commands of the test look for it.
        let runtime = mcpdev::paths::runtime_dir().to_string_lossy().into_owned();
        if !env.iter().any(|(k, _)| *k == "MCPDEV_RUNTIME_DIR") {
            env.push(("MCPDEV_RUNTIME_DIR", &runtime));
        }
        let runtime_dir = env.iter().find(|(k, _)| *k == "MCPDEV_RUNTIME_DIR").map(|(_, v)| v.to_string()).unwrap_or_default();
        let mut running = spawn_mcpdev_with(&args, &env, if capture { Stdio::piped() } else { Stdio::inherit() });
        let stderr = running.child.stderr.take().map(|pipe| {
            let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
            let into = log.clone();
            tokio::spawn(async move {
                let mut lines = BufReader::new(pipe).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    eprintln!("{line}");
                    let mut all = into.lock().unwrap();
                    all.push_str(&line);
                    all.push('\n');
                }
            });
            log
        });
        let stdout = running.child.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        let line = tokio::time::timeout(ws::DEADLINE, lines.next_line()).await.expect("hub did not start in time").unwrap().expect("hub exited");
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["event"], "listening");
        Self { running, device_url: v["devices"].as_str().unwrap().to_string(), host_url: v["host"].as_str().unwrap().to_string(), info: v, log: lines, _state: state, runtime_dir, stderr }
    }
}

impl HubProcess {
    /// The hub's log once it holds what `seen` looks for (started with
    /// [`HubProcess::start_capturing`]: its stderr is read as it comes), within [`ws::DEADLINE`].
    pub async fn logged(&self, seen: impl Fn(&str) -> bool) -> String {
        let deadline = tokio::time::Instant::now() + ws::DEADLINE;
        loop {
            let log = self.stderr.as_ref().expect("a hub started capturing its log").lock().unwrap().clone();
            if seen(&log) {
                return log;
            }
            assert!(tokio::time::Instant::now() < deadline, "not in the hub's log: {log}");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// `/metrics` (with the control token): the value of one sample, e.g.
    /// `mcpdev_refusals_total{reason="cluster_link"}`.
    pub async fn metric(&self, sample: &str) -> f64 {
        let port = self.host_url.rsplit(':').next().unwrap();
        let token = std::fs::read_to_string(std::path::Path::new(&self.runtime_dir).join(format!("control-{port}.token"))).unwrap();
        let addr = self.host_url.trim_start_matches("http://").to_string();
        let (status, _, body) = ota::exchange(&addr, "GET", "/metrics", &[("Authorization", &format!("Bearer {}", token.trim()))], "", ws::DEADLINE).await;
        assert_eq!(status, 200);
        let text = String::from_utf8_lossy(&body).into_owned();
        text.lines().find_map(|l| l.strip_prefix(sample)).and_then(|v| v.trim().parse().ok()).unwrap_or_else(|| panic!("no {sample} in /metrics"))
    }
}

/// What a finished command printed and how it ended.
#[derive(Debug)]
pub struct Outcome {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Outcome {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self:?}"))
    }
}

/// Runs `mcpdev ARGS` to completion against a hub (the command is built before the future).
pub fn mcpdev(hub: &HubProcess, args: &[&str]) -> impl std::future::Future<Output = Outcome> + 'static {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"));
    cmd.args(args).env("MCPDEV_HUB", &hub.host_url).env("MCPDEV_RUNTIME_DIR", &hub.runtime_dir).env("NO_COLOR", "1").stdin(Stdio::null()).kill_on_drop(true);
    async move {
        let out = tokio::time::timeout(std::time::Duration::from_secs(60), cmd.output()).await.expect("command hung").unwrap();
        Outcome {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

/// A `watch --json` event without its `ts` stamp (checked to be RFC 3339 first), for comparing
/// the rest of it exactly.
pub fn unstamped(mut v: serde_json::Value) -> serde_json::Value {
    let ts = v.as_object_mut().and_then(|o| o.remove("ts")).unwrap_or_else(|| panic!("no ts in {v}"));
    humantime::parse_rfc3339(ts.as_str().unwrap_or_default()).unwrap_or_else(|e| panic!("ts {ts} is not RFC 3339: {e}"));
    v
}

#[allow(unused_imports, reason = "not every test file uses it")]
pub use ota::http;

/// A path inside the repository.
pub fn repo_path(rel: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// A tool `.ci/test` installs: where `var` says, else `fallback`; a test without it fails and says
/// how to get it.
pub fn installed(var: &str, fallback: std::path::PathBuf, what: &str) -> std::path::PathBuf {
    let from_env = std::env::var_os(var).map(std::path::PathBuf::from);
    if let Some(p) = from_env.iter().chain([&fallback]).find(|p| p.exists()) {
        return p.clone();
    }
    panic!("no {what}: {var} is {from_env:?} and {} does not exist. Run .ci/test (it installs it), or set {var}.", fallback.display());
}

/// The official MCP Python SDK 2.x (`.ci/venv-mcp2`, `MCPDEV_TEST_MCP2_PYTHON`) against `url`,
/// running `steps` (tests/interop/mcp_client.py); its output lines.
pub async fn mcp_sdk_client(url: &str, steps: &serde_json::Value) -> Vec<serde_json::Value> {
    let python = installed(
        "MCPDEV_TEST_MCP2_PYTHON",
        repo_path(".ci/venv-mcp2/bin/python"),
        "the MCP Python SDK 2.x (.ci/test creates .ci/venv-mcp2)",
    );
    let out = tokio::process::Command::new(python)
        .arg(repo_path("tests/interop/mcp_client.py"))
        .args([
            "--url",
            url,
            "--transport",
            "http",
            "--commands",
            &steps.to_string(),
        ])
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(std::time::Duration::from_secs(120), out)
        .await
        .expect("the MCP client hung")
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the MCP client failed: {text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}
