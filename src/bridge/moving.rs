//! A device whose hub went away — stopped with SIGTERM to restart, killed, cut off — while
//! another hub of the cluster takes it over: a call for it on an MCP endpoint waits for it, as
//! the control API's requests do ([`crate::hub::remote::route`]), instead of failing at once
//! (issue 45.4).
//!
//! Rules:
//! - **Only a moving device is waited for**: one the cluster's index still lists for a hub that
//!   is no longer alive, with no live hub listing it. One another hub lists but that has no
//!   stand-in here yet (it has just moved there) gets its stand-in at once. A device or tool
//!   nobody knows, or a device that is simply offline, is answered at once, as before.
//! - **Within the call's own timeout** (`--mcp-timeout`): the wait ends as soon as the device is
//!   ready again, here (taken over by this hub) or on another hub (its stand-in made); at the
//!   timeout the caller gets the usual answer for a device that is not there.
//! - **Nothing is sent before**: the call is made once, after the wait; a call already sent to
//!   the hub that went away is never sent again (it may have run on the device).

use std::time::Duration;

use super::Shared;
use crate::hub::remote::{self, Located};

/// Waits, up to `within`, for `device_id` to be reachable again when the cluster says it is
/// moving; whether it is now (the caller looks it up again). False at once for any other device.
pub(super) async fn wait_for(shared: &Shared, device_id: &str, within: Duration) -> bool {
    let Some(cluster) = remote::of(&shared.hub) else { return false };
    match cluster.locate(Some(device_id), shared.hub.registry.aliases()) {
        Located::Moving { .. } => {}
        // Just taken over by another hub, with no stand-in here yet: made now.
        Located::Remote { device_id, .. } => return cluster.proxy(&device_id).await.is_ok(),
        _ => return false,
    }
    let started = tokio::time::Instant::now();
    tracing::debug!(device = %device_id, "the device's hub went away; waiting for the cluster to take it over");
    match remote::route(&shared.hub, Some(&cluster), Some(device_id), within).await {
        Ok(Some((_, id))) => cluster.proxy(&id).await.is_ok(),
        Ok(None) => shared.hub.registry.wait_ready(Some(device_id), within.saturating_sub(started.elapsed())).await.is_ok(),
        Err(_) => false,
    }
}
