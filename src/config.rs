//! `mcpdev.toml`: defaults for flags, below flags and `MCPDEV_*` environment variables.
//!
//! Looked up in the working directory, then in the user's config directory
//! (`$XDG_CONFIG_HOME/mcpdev/mcpdev.toml`, else `~/.config/mcpdev/mcpdev.toml`). The first found
//! is used. Keys (all optional; unknown keys are an error, so a typo does not go unnoticed):
//!
//! ```toml
//! hub = "http://127.0.0.1:8001"   # --hub / MCPDEV_HUB
//! device = "aa:bb"                # --device / MCPDEV_DEVICE
//! timeout = "30s"                 # --timeout / MCPDEV_TIMEOUT
//! device_addr = "0.0.0.0:8000"    # serve --device-addr / MCPDEV_DEVICE_ADDR
//! host_addr = "127.0.0.1:8001"    # serve --host-addr / MCPDEV_HOST_ADDR
//! sim_url = "ws://…/xiaozhi/v1/"  # sim --url / MCPDEV_SIM_URL
//! mcp_fleet_threshold = 32        # serve --mcp-fleet-threshold / MCPDEV_MCP_FLEET_THRESHOLD
//! [aliases]
//! kitchen = "aa:bb:cc:dd:ee:ff"   # --device kitchen
//! [stdio]                         # --stdio with no command
//! command = "npx -y @modelcontextprotocol/server-everything"
//! env = { DEBUG = "1" }           # on top of HOME, PATH, USER… (see `--stdio-env`)
//! ```
//! Secrets (tokens) are not read from this file: use the environment.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub hub: Option<String>,
    pub device: Option<String>,
    pub timeout: Option<String>,
    pub device_addr: Option<String>,
    pub host_addr: Option<String>,
    pub sim_url: Option<String>,
    pub mcp_fleet_threshold: Option<u32>,
    #[serde(default)]
    pub aliases: HashMap<String, String>,
    pub stdio: Option<StdioConfig>,
    /// `[upstreams]`: a Device-Id's own upstream voice backend, over `serve --upstream`.
    #[serde(default)]
    pub upstreams: HashMap<String, String>,
}

/// `[stdio]`: the MCP server `--stdio` runs when given no command.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StdioConfig {
    pub command: String,
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
}

impl FileConfig {
    /// The environment variable each key stands in for.
    fn defaults(&self) -> Vec<(&'static str, String)> {
        [
            ("MCPDEV_HUB", self.hub.clone()),
            ("MCPDEV_DEVICE", self.device.clone()),
            ("MCPDEV_TIMEOUT", self.timeout.clone()),
            ("MCPDEV_DEVICE_ADDR", self.device_addr.clone()),
            ("MCPDEV_HOST_ADDR", self.host_addr.clone()),
            ("MCPDEV_SIM_URL", self.sim_url.clone()),
            ("MCPDEV_MCP_FLEET_THRESHOLD", self.mcp_fleet_threshold.map(|n| n.to_string())),
        ]
        .into_iter()
        .filter_map(|(env, v)| v.map(|v| (env, v)))
        .collect()
    }
}

/// Where the config file is, if there is one.
pub fn path() -> Option<PathBuf> {
    let local = PathBuf::from("mcpdev.toml");
    if local.is_file() {
        return Some(local);
    }
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".config")))?;
    let global = base.join("mcpdev").join("mcpdev.toml");
    global.is_file().then_some(global)
}

/// Reads the config file; a missing file is an empty config, a bad one an error that says where.
pub fn load() -> Result<FileConfig, String> {
    let Some(p) = path() else { return Ok(FileConfig::default()) };
    let text = std::fs::read_to_string(&p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
    toml::from_str(&text).map_err(|e| format!("{} is not a valid mcpdev.toml: {e}", p.display()))
}

/// The aliases of the config file (empty when there is none or it is invalid).
pub fn aliases() -> HashMap<String, String> {
    load().map(|c| c.aliases).unwrap_or_default()
}

/// A `--device` selector with this machine's aliases applied (the hub applies its own too).
pub fn resolve_alias(selector: Option<&str>) -> Option<String> {
    let sel = selector?;
    Some(aliases().get(sel).cloned().unwrap_or_else(|| sel.to_string()))
}

/// Gives every argument backed by one of the file's keys the file's value as its default, so
/// that flags, then the environment, then the file decide.
///
/// The CLI builds each command's arguments only when that command is run (`defer` in
/// [`crate::cli`]: building all of them was a third of a one-shot call's start-up); a file with
/// defaults has them all built first, so that every argument it backs is found.
pub fn apply(mut cmd: clap::Command, cfg: &FileConfig) -> clap::Command {
    let defaults = cfg.defaults();
    if defaults.is_empty() {
        return cmd;
    }
    cmd.build();
    apply_to(cmd, &defaults)
}

/// In place (`mut_args`, `mut_subcommands`): the command is built, and its lookup tables point
/// at each argument's position (`mut_arg` moves the argument to the end, and `--hub` would then
/// find another argument).
fn apply_to(cmd: clap::Command, defaults: &[(&'static str, String)]) -> clap::Command {
    cmd.mut_args(|a| {
        let value = a.get_env().and_then(|e| e.to_str()).and_then(|env| defaults.iter().find(|(e, _)| *e == env)).map(|(_, v)| v.clone());
        match value {
            Some(v) => a.default_value(v),
            None => a,
        }
    })
    .mut_subcommands(|s| apply_to(s, defaults))
}
