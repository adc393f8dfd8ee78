//! Where the control API's token lives, shared by the hub that writes it
//! ([`crate::hub::owner`]) and the CLI that reads it ([`super::hub_client`]).

use std::path::PathBuf;

/// The environment variable that gives the CLI the control token (it overrides the file).
pub const HUB_TOKEN_ENV: &str = "MCPDEV_HUB_TOKEN";

/// Where a hub whose host listener is on `port` keeps its control token (0600).
pub fn token_path(port: u16) -> PathBuf {
    crate::paths::runtime_dir().join(format!("control-{port}.token"))
}

/// The control token to send to the hub on `port`: `MCPDEV_HUB_TOKEN`, else the hub's file.
/// `Err` says why there is none (for the message if the hub refuses).
pub fn for_client(port: u16) -> Result<String, String> {
    if let Some(t) = std::env::var(HUB_TOKEN_ENV).ok().map(|t| t.trim().to_string()).filter(|t| !t.is_empty()) {
        return Ok(t);
    }
    let path = token_path(port);
    match crate::paths::read_private(&path) {
        Ok(bytes) => Ok(String::from_utf8_lossy(&bytes).trim().to_string()),
        Err(e) => Err(format!("cannot read the control token {}: {e}; a hub run by another user needs {HUB_TOKEN_ENV}", path.display())),
    }
}
