//! Admission of a relayed device (`serve --upstream`): it carries its upstream's token, never one
//! of the hub's, so its approval is bound to the Device-Id and Client-Id of the request a person
//! approved (its relayed OTA check-in, or its first WebSocket).
//!
//! What that guarantees, and what not (docs/security.md, "Relayed devices"):
//! - A device nobody approved is never relayed: the hub does not dial the upstream for it, and a
//!   request with a code waits in `mcpdev devices pending`. Revoked stays revoked; the hub's own
//!   virtual devices' ids are not taken; `--approve-all` admits every other device, as usual.
//! - Only the approved Client-Id gets through for an approved Device-Id (an approval by
//!   Device-Id alone, which binds no Client-Id, does not admit a relayed device).
//! - It is **not** a secret: the Device-Id and Client-Id travel in the clear on a `ws://` hub and
//!   reach the upstream. Whoever learns both can connect as the device; what they get is the
//!   relay to the upstream (which still wants the upstream's token) and the device's place on
//!   the hub, where they can show tools of their own to the CLI and MCP hosts. Serve devices over
//!   `--tls` to keep the pair off the network.

use std::net::SocketAddr;

use super::{Admission, Refusal, Requester, Via, lock};

impl Admission {
    /// Whether a relayed device with this Device-Id and Client-Id is admitted; if not, its request
    /// (with a code) is opened or refreshed.
    pub fn admits_relayed(&self, device_id: &str, client_id: Option<&str>, remote: Option<SocketAddr>) -> Result<(), Refusal> {
        let device_id = device_id.to_ascii_lowercase();
        {
            let state = lock(&self.state);
            if state.book.revoked.contains_key(&device_id) {
                return Err(Refusal::Revoked { device_id });
            }
            if state.book.resident.contains(&device_id) {
                return Err(Refusal::Taken { device_id, resident: true });
            }
            if self.approve_all || state.book.admitted.get(&device_id).is_some_and(|a| a.matches(client_id, None)) {
                return Ok(());
            }
        }
        let r = Requester { device_id: &device_id, via: Via::Websocket, client_id, key_hash: None, remote, reported: None };
        let p = self.request(&r)?;
        Err(Refusal::NotAdmitted { device_id, code: Some(p.code) })
    }
}
