//! `watch --record FILE`: a device's session as NDJSON, for `sim --replay` (the format is in
//! `sim::replay`).
//!
//! Rules it enforces:
//! - Every recording replays. Attached to a device that is already onboarded, it first writes
//!   what the hub knows of it: the identity and hello, the `initialize` exchange, and every
//!   `tools/list` page as the device cut them, each line marked `"from_hub": true` (the hub's
//!   memory, not frames seen on the wire: `sim::replay::hub_knowledge`, which the dashboard's
//!   Record uses too); then the traffic as it comes. Attached before the
//!   device connects, the identity comes from its `connected` and `hello` events and the
//!   onboarding is recorded as it happens.
//! - Never a token: the identity holds no `Authorization`, and the `initialize` the hub knows is
//!   written without the vision token it carried.
//! - Every line is flushed at once, so a watch ended by Ctrl-C leaves a complete file; the file is
//!   created private (0600) and a symbolic link at its path is never followed.

use serde_json::{Value, json};

use crate::exit::{CodedError, Exit};
use crate::links::hub_client::HubClient;

pub(crate) struct Recorder {
    file: std::io::BufWriter<std::fs::File>,
    path: std::path::PathBuf,
    client_id: Option<String>,
    transport: Option<String>,
    has_identity: bool,
}

impl Recorder {
    /// Opens the file and, if the hub knows the device already, writes what it knows.
    pub(crate) async fn create(path: &std::path::Path, client: &HubClient, device: Option<&str>) -> anyhow::Result<Self> {
        let file = open_record(path)?;
        let mut r = Self { file: std::io::BufWriter::new(file), path: path.to_path_buf(), client_id: None, transport: None, has_identity: false };
        if let Ok(info) = client.call(json!({"op": "device", "device": device, "wait_ms": 0})).await {
            let ts = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
            for line in crate::sim::replay::hub_knowledge(&info, &ts) {
                r.write(&line)?;
                r.has_identity = true;
            }
        }
        Ok(r)
    }

    fn write(&mut self, line: &Value) -> anyhow::Result<()> {
        use std::io::Write;
        writeln!(self.file, "{line}").and_then(|()| self.file.flush()).map_err(|e| CodedError::new(Exit::Internal, format!("cannot write {}: {e}", self.path.display())).into())
    }

    /// One watch event (stamped with `ts`): the identity when the device says hello, every
    /// MCP frame after it.
    pub(crate) fn record(&mut self, ev: &Value) -> anyhow::Result<()> {
        match ev["event"].as_str() {
            Some("connected") => {
                self.client_id = ev["client_id"].as_str().map(str::to_string);
                self.transport = ev["transport"].as_str().map(str::to_string);
                Ok(())
            }
            Some("hello") if !self.has_identity => {
                self.has_identity = true;
                let line = json!({"ts": ev["ts"], "direction": "identity", "device_id": ev["device_id"], "client_id": self.client_id,
                    // The binary protocol version the device announced (its hello says the same as its header).
                    "protocol_version": ev["hello"]["version"], "transport": self.transport, "hello": ev["hello"]});
                self.write(&line)
            }
            Some("traffic") if self.has_identity => {
                let line = json!({"ts": ev["ts"], "direction": ev["direction"], "frame": ev["payload"]});
                self.write(&line)
            }
            _ => Ok(()),
        }
    }
}

/// Opens `watch --record`'s file for writing: created private (0600: the traffic carries the
/// vision token the hub hands the device), or an existing regular file truncated. A symbolic link
/// planted at the path (another user pointing it at a file of ours, in a shared /tmp) is never
/// followed: the open fails and nothing is written anywhere.
fn open_record(path: &std::path::Path) -> Result<std::fs::File, CodedError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600).custom_flags(libc::O_NOFOLLOW);
    }
    options.open(path).map_err(|e| {
        let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
        let why = if link { "it is a symbolic link, which --record never follows; remove it or record elsewhere".to_string() } else { e.to_string() };
        CodedError::new(Exit::Usage, format!("cannot write {}: {why}", path.display()))
    })
}
