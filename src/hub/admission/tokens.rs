//! Which credential opens what: a device's token (derived from its approval's nonce), its vision
//! token, a gateway's credential, shared tokens, and the broker logins the hub hands out. It
//! carries out "a device is admitted when it presents its approval's token", "a gateway is
//! trusted as a gateway" and "a revocation holds on every path" (see the module above).

use super::*;

impl Admission {
    pub(super) fn token_for(&self, purpose: Purpose, device_id: &str, nonce: &str) -> String {
        self.secret.token(purpose, &bound(device_id, nonce))
    }

    /// The nonce of `device_id`'s current approval: `Some("")` for devices admitted without one
    /// (demo devices, `--approve-all`, files from before bindings), `None` when it is not admitted.
    fn nonce_of(&self, state: &State, device_id: &str) -> Option<String> {
        if state.book.revoked.contains_key(device_id) {
            return None;
        }
        // The hub's own virtual devices hold their Device-Id for this run, over any approval.
        if state.book.resident.contains(device_id) {
            return Some(String::new());
        }
        if let Some(a) = state.book.admitted.get(device_id) {
            return Some(a.nonce.clone());
        }
        self.approve_all.then(String::new)
    }

    /// `device_id`'s current device token (WebSocket bearer, MQTT password), if it is admitted.
    pub fn device_token(&self, device_id: &str) -> Option<String> {
        let id = device_id.to_ascii_lowercase();
        let nonce = self.nonce_of(&lock(&self.state), &id)?;
        Some(self.token_for(Purpose::Device, &id, &nonce))
    }

    /// `device_id`'s current vision token: derived from its approval like its device token, so a
    /// revocation ends it too. A device that is not admitted gets one that matches nothing.
    pub fn vision_token(&self, device_id: &str) -> String {
        let id = device_id.to_ascii_lowercase();
        match self.nonce_of(&lock(&self.state), &id) {
            Some(nonce) => self.token_for(Purpose::Vision, &id, &nonce),
            None => self.token_for(Purpose::Vision, &id, &format!("{:016x}", random_u64())),
        }
    }

    /// Whether `token` is `device_id`'s current vision token (the device must still be admitted).
    pub fn verify_vision(&self, device_id: &str, token: &str) -> bool {
        let id = device_id.to_ascii_lowercase();
        let Some(nonce) = self.nonce_of(&lock(&self.state), &id) else { return false };
        constant_time_eq(self.token_for(Purpose::Vision, &id, &nonce).as_bytes(), token.trim().as_bytes())
    }

    /// Whether a device presenting `token` as `device_id` is let in (WebSocket, MQTT).
    pub fn admits(&self, device_id: &str, token: Option<&str>) -> Result<(), Refusal> {
        let device_id = device_id.to_ascii_lowercase();
        let token = token.map(str::trim).filter(|t| !t.is_empty());
        let state = lock(&self.state);
        if state.book.revoked.contains_key(&device_id) {
            return Err(Refusal::Revoked { device_id });
        }
        // One of this hub's own virtual devices: nothing else may use its Device-Id, whatever the
        // mode (`--approve-all` or a shared token would let another device replace it, back and forth).
        if state.book.resident.contains(&device_id) {
            return match token {
                Some(t) if self.secret.verify(Purpose::Device, &device_id, t) => Ok(()),
                _ => Err(Refusal::Taken { device_id, resident: true }),
            };
        }
        if let Some(t) = token
            && self.shared_tokens.iter().any(|s| constant_time_eq(s.as_bytes(), t.as_bytes()))
        {
            return Ok(());
        }
        let Some(nonce) = self.nonce_of(&state, &device_id) else {
            // A token bound to one of its requests: that request waits for its code.
            let code = token.and_then(|t| {
                let now = Instant::now();
                state.requests.of_device(&device_id, now).find(|p| self.secret.verify(Purpose::Device, &bound(&device_id, &p.nonce), t)).map(|p| p.code.clone())
            });
            return Err(Refusal::NotAdmitted { device_id, code });
        };
        // With --approve-all and no shared tokens, anything not revoked goes; with shared tokens,
        // a device must send one of them or its own token.
        if self.approve_all && self.shared_tokens.is_empty() {
            return Ok(());
        }
        match token {
            None => Err(Refusal::NoToken { device_id }),
            Some(t) if self.secret.verify(Purpose::Device, &bound(&device_id, &nonce), t) => Ok(()),
            Some(_) => Err(Refusal::WrongToken { device_id }),
        }
    }

    /// Whether `token` is one of the gateway credentials (`MCPDEV_GATEWAY_TOKEN`).
    pub fn is_gateway_credential(&self, token: Option<&str>) -> bool {
        token.map(str::trim).filter(|t| !t.is_empty()).is_some_and(|t| self.gateway_tokens.iter().any(|g| constant_time_eq(g.as_bytes(), t.as_bytes())))
    }

    /// A WebSocket through a gateway: `Some` when `token` is a gateway credential. The device must
    /// have been approved (by any path) and not revoked; otherwise a request `via: gateway` waits.
    pub fn admits_through_gateway(&self, device_id: &str, token: Option<&str>, client_id: Option<&str>, remote: Option<SocketAddr>) -> Option<Result<(), Refusal>> {
        if !self.is_gateway_credential(token) {
            return None;
        }
        let device_id = device_id.to_ascii_lowercase();
        {
            let state = lock(&self.state);
            if state.book.revoked.contains_key(&device_id) {
                return Some(Err(Refusal::Revoked { device_id }));
            }
            if state.book.admitted.contains_key(&device_id) || state.book.resident.contains(&device_id) {
                return Some(Ok(()));
            }
        }
        let r = Requester { device_id: &device_id, via: Via::Gateway, client_id, key_hash: None, remote, reported: None };
        Some(match self.request(&r) {
            Ok(p) => Err(Refusal::NotAdmitted { device_id, code: Some(p.code) }),
            Err(busy) => Err(busy),
        })
    }

    /// Whether the hub may serve `device_id`'s MQTT uplinks (the broker checked its login; on an
    /// external broker the hub sees no login at all): admitted, or `--approve-all`, or shared
    /// tokens configured — and never when revoked.
    pub fn may_serve(&self, device_id: &str) -> bool {
        let id = device_id.to_ascii_lowercase();
        let state = lock(&self.state);
        !state.book.revoked.contains_key(&id) && (self.nonce_of(&state, &id).is_some() || !self.shared_tokens.is_empty())
    }

    /// The password hubs of a cluster log in with on a broker that asks a hub about every login
    /// (the EMQX hooks, [`crate::mqtt::hooks`]): every hub holding the shared hub secret derives
    /// the same one, and it is no device's token (derived from a name that is not a Device-Id).
    pub fn hub_broker_password(&self) -> String {
        self.secret.token(Purpose::Device, "mcpdev-hub")
    }

    /// The broker login of `device_id`'s current approval: its token, when a person bound it (a
    /// request approved, or a Device-Id approved out of band). `None` for a device that is not
    /// approved, revoked, or admitted only by a mode (`--approve-all`, demo devices, shared
    /// tokens): a broker holds per-device credentials for approved bindings only.
    pub fn broker_login(&self, device_id: &str) -> Option<String> {
        let id = device_id.to_ascii_lowercase();
        let state = lock(&self.state);
        if state.book.revoked.contains_key(&id) {
            return None;
        }
        let a = state.book.admitted.get(&id)?;
        Some(self.token_for(Purpose::Device, &id, &a.nonce))
    }

    /// Every approved binding's broker login, by Device-Id (what a broker's per-device
    /// credentials must be, see [`Self::broker_login`]).
    pub fn broker_logins(&self) -> Vec<(String, String)> {
        let state = lock(&self.state);
        state.book.admitted.values().filter(|a| !state.book.revoked.contains_key(&a.device_id)).map(|a| (a.device_id.clone(), self.token_for(Purpose::Device, &a.device_id, &a.nonce))).collect()
    }

    /// An MQTT CONNECT as a device: the Device-Id is the MAC in its client id
    /// (`GID_x@@@aa_bb_cc_dd_ee_ff[@@@uuid]`, or a bare MAC), the password its own token. For the
    /// embedded broker's `authenticate` hook.
    pub fn mqtt_login(&self, client_id: &str, password: &str) -> Result<String, String> {
        let id = client_id.split("@@@").find_map(|part| device_id(part).ok()).ok_or_else(|| format!("client id {client_id:?} names no Device-Id (a MAC)"))?;
        self.admits(&id, Some(password)).map(|()| id).map_err(|r| r.to_string())
    }
}

/// The token name an approval's nonce gives a Device-Id (`id` alone for files from before bindings,
/// demo devices and `--approve-all`).
fn bound(device_id: &str, nonce: &str) -> String {
    if nonce.is_empty() { device_id.to_string() } else { format!("{device_id}#{nonce}") }
}
