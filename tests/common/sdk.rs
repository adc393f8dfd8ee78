//! xiaozhi-sdk devices (PyPI, pinned in `.ci/requirements.txt`) run by
//! `tests/interop/xiaozhi_sdk_device.py` with the Python of `.ci/venv` (`.ci/test` creates it and
//! sets `MCPDEV_TEST_PYTHON`), connected to a hub.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use super::HubProcess;

/// How long the SDK devices may take to start (Python imports numpy, av, opuslib) and connect.
pub const STARTUP: Duration = Duration::from_secs(60);

/// The Python of `.ci/venv`, where `.ci/test` installs xiaozhi-sdk. Missing is a failure, not a skip.
fn python() -> PathBuf {
    let from_env = std::env::var_os("MCPDEV_TEST_PYTHON").map(PathBuf::from);
    let fallback = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".ci/venv/bin/python");
    if let Some(p) = from_env.iter().chain([&fallback]).find(|p| p.exists()) {
        return p.clone();
    }
    panic!(
        "no Python with xiaozhi-sdk: MCPDEV_TEST_PYTHON is {from_env:?} and {} does not exist. \
         Run .ci/test (it creates .ci/venv from .ci/requirements.txt), or set MCPDEV_TEST_PYTHON.",
        fallback.display()
    );
}

/// The script's xiaozhi-sdk devices, connected to a hub; killed when dropped.
pub struct SdkDevices {
    _child: Child,
    stdin: ChildStdin,
    _stdout: Lines<BufReader<ChildStdout>>,
}

impl SdkDevices {
    /// Starts one SDK device per MAC and returns once the script says `ready` (all connected).
    pub async fn start(hub: &HubProcess, macs: &[&str]) -> Self {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop/xiaozhi_sdk_device.py");
        let mut cmd = tokio::process::Command::new(python());
        cmd.arg(&script).args(["--url", &hub.device_url]);
        for mac in macs {
            cmd.args(["--mac", mac]);
        }
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit()).kill_on_drop(true);
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
        let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let line = tokio::time::timeout(STARTUP, stdout.next_line())
            .await
            .unwrap_or_else(|_| panic!("the xiaozhi-sdk devices did not connect within {STARTUP:?}"))
            .unwrap();
        if line.as_deref() != Some("ready") {
            let status = child.wait().await.unwrap();
            panic!("the xiaozhi-sdk script printed {line:?} and ended with {status} (its stderr is above; is .ci/venv current? run .ci/test)");
        }
        let stdin = child.stdin.take().expect("piped stdin");
        Self { _child: child, stdin, _stdout: stdout }
    }

    /// Lets every pending `wait_for_button` call return.
    pub async fn press_button(&mut self) {
        self.stdin.write_all(b"release\n").await.unwrap();
        self.stdin.flush().await.unwrap();
    }
}

