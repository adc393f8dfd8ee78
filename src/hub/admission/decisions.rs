//! A person's decisions and their records: approve (by code, or by Device-Id with `--rebind` to
//! move a binding), deny, revoke, and the signed records other hubs of a cluster import. A
//! decision is ordered by its time, so every hub ends on the latest; the hub's own virtual
//! devices are never approved, re-bound or revoked.

use super::*;

impl Admission {
    /// Every approved device, by Device-Id.
    pub fn admitted(&self) -> Vec<Admitted> {
        lock(&self.state).book.admitted.values().cloned().collect()
    }

    /// Up to `limit` (at least 1) approved devices after the Device-Id `after`, by Device-Id, and
    /// the cursor of the next page when more follow (the lock is held while one page is copied).
    pub fn admitted_after(&self, after: Option<&str>, limit: usize) -> (Vec<Admitted>, Option<String>) {
        use std::ops::Bound;
        let state = lock(&self.state);
        let start = after.map_or(Bound::Unbounded, Bound::Excluded);
        let mut page: Vec<Admitted> = state.book.admitted.range::<str, _>((start, Bound::Unbounded)).take(limit.max(1) + 1).map(|(_, a)| a.clone()).collect();
        let more = page.len() > limit.max(1);
        page.truncate(limit.max(1));
        let next = more.then(|| page.last().map(|a| a.device_id.clone())).flatten();
        (page, next)
    }

    /// Every Device-Id this hub holds a decision about (approved or revoked).
    pub fn decided(&self) -> Vec<String> {
        let state = lock(&self.state);
        state.book.admitted.keys().chain(state.book.revoked.keys()).cloned().collect::<std::collections::BTreeSet<_>>().into_iter().collect()
    }

    /// Approves a pending code, or a Device-Id out of band, and keeps the approval on disk. An
    /// admitted device is bound again only with `rebind`.
    pub fn approve(&self, target: &str, rebind: bool) -> Result<Approval, String> {
        let wanted = target.trim();
        let now = Instant::now();
        let mut state = lock(&self.state);
        let request = if is_code(wanted) {
            let p = state.requests.by_code(wanted, now).cloned().ok_or_else(|| {
                format!("no device is waiting with code {wanted} (codes expire after {} minutes): `mcpdev devices pending` lists the waiting ones", CODE_LIFETIME.as_secs() / 60)
            })?;
            Some(p)
        } else {
            None
        };
        let id = match &request {
            Some(p) => p.device_id.clone(),
            None => device_id(wanted).map_err(|_| format!("{wanted:?} is neither a 6-digit activation code nor a Device-Id like aa:bb:cc:dd:ee:ff"))?,
        };
        if state.book.resident.contains(&id) {
            return Err(resident_refusal(&id, "approving it (or re-binding it) would give it a token it does not have and lock it out"));
        }
        let previous = state.book.admitted.get(&id).cloned();
        if let Some(prev) = &previous
            && !rebind
        {
            let what = match &request {
                Some(p) => format!("this request is from Client-Id {} at {}", p.client_id.as_deref().unwrap_or("(none)"), p.remote.as_deref().unwrap_or("(unknown address)")),
                None => "approving it by Device-Id issues a new token".into(),
            };
            return Err(format!(
                "{id} is admitted already ({}); {what}. If the device was really replaced or reset, run `mcpdev devices approve {wanted} --rebind`: the old binding's tokens stop working",
                describe(prev)
            ));
        }
        if previous.is_none() && state.book.admitted.len() >= MAX_ADMITTED {
            return Err(format!("{MAX_ADMITTED} devices are approved already: revoke some with `mcpdev devices revoke DEVICE-ID`"));
        }
        let at = next_time(&state, &id);
        let entry = match &request {
            Some(p) => Admitted {
                device_id: id.clone(),
                client_id: p.client_id.clone(),
                via: Some(p.via),
                approved_at_ms: at,
                key_hash: p.key_hash.clone(),
                nonce: p.nonce.clone(),
                challenge: p.challenge.clone(),
            },
            None => Admitted {
                device_id: id.clone(),
                client_id: None,
                via: None,
                approved_at_ms: at,
                key_hash: None,
                nonce: format!("{:016x}{:016x}", random_u64(), random_u64()),
                challenge: String::new(),
            },
        };
        let nonce = entry.nonce.clone();
        state.book.admitted.insert(id.clone(), entry);
        let was_revoked = state.book.revoked.remove(&id);
        if let Some(path) = &self.file
            && let Err(e) = state.book.save(path)
        {
            match previous {
                Some(prev) => state.book.admitted.insert(id.clone(), prev),
                None => state.book.admitted.remove(&id),
            };
            if let Some(at) = was_revoked {
                state.book.revoked.insert(id.clone(), at);
            }
            return Err(e);
        }
        match &request {
            Some(p) => {
                state.requests.remove(&p.code);
            }
            None => state.requests.remove_device(&id),
        }
        drop(state);
        let via = request.as_ref().map(|p| p.via);
        // Printed once for devices that cannot pick it up from an OTA check-in.
        let token = match via {
            Some(Via::Ota | Via::Gateway) => None,
            Some(Via::Websocket) | None => Some(self.token_for(Purpose::Device, &id, &nonce)),
        };
        let replaced = previous.as_ref().map(describe);
        info!(device = %id, via = ?via, rebind = replaced.is_some(), "admission: approved");
        let asked_from = request.as_ref().and_then(|p| p.ip);
        Ok(Approval { device_id: id, via, token, replaced, asked_from })
    }

    /// Refuses a pending request: its code is gone (the device may ask again, with a new code).
    pub fn deny(&self, code: &str) -> Result<Pending, String> {
        let code = code.trim();
        let now = Instant::now();
        let mut state = lock(&self.state);
        if state.requests.by_code(code, now).is_none() {
            return Err(format!("no device is waiting with code {code}: `mcpdev devices pending` lists the waiting ones"));
        }
        state.requests.remove(code).ok_or_else(|| format!("no device is waiting with code {code}"))
    }

    /// Withdraws an approval and remembers the revocation (the caller disconnects the device);
    /// `Ok` says how the device was admitted until now. The revocation is recorded either way.
    pub fn revoke(&self, id: &str) -> Result<WasAdmitted, String> {
        let id = device_id(id).map_err(|_| format!("{id:?} is not a Device-Id like aa:bb:cc:dd:ee:ff"))?;
        let mut state = lock(&self.state);
        if state.book.resident.contains(&id) {
            return Err(resident_refusal(&id, "revoking it would leave it locked out until the hub restarts; stop the hub, or run it without --demo"));
        }
        let prev = state.book.admitted.remove(&id);
        let was_resident = state.book.resident.remove(&id);
        let prev_revoked = state.book.revoked.get(&id).copied();
        let was = match () {
            _ if prev_revoked.is_some() && prev.is_none() => WasAdmitted::RevokedAlready,
            _ if prev.is_some() => WasAdmitted::Approved,
            _ if was_resident => WasAdmitted::InProcess,
            _ if self.approve_all => WasAdmitted::ApproveAll,
            _ if !self.shared_tokens.is_empty() => WasAdmitted::SharedToken,
            _ => WasAdmitted::NotAdmitted,
        };
        let at = next_time(&state, &id);
        state.book.remember_revoked(&id, at);
        if let Some(path) = &self.file
            && let Err(e) = state.book.save(path)
        {
            if let Some(p) = prev {
                state.book.admitted.insert(id.clone(), p);
            }
            if was_resident {
                state.book.resident.insert(id.clone());
            }
            match prev_revoked {
                Some(at) => state.book.revoked.insert(id.clone(), at),
                None => state.book.revoked.remove(&id),
            };
            return Err(e);
        }
        state.requests.remove_device(&id);
        Ok(was)
    }

    /// `device_id`'s current decision as a sealed [`Record`] for the other hubs of a cluster
    /// (`by`: this hub's name); `None` if nobody decided anything about it.
    pub fn record(&self, device_id: &str, by: &str) -> Option<String> {
        let id = device_id.to_ascii_lowercase();
        let held = held(&lock(&self.state), &id, by)?;
        Some(held.seal(&self.secret))
    }

    /// A sealed [`Record`] another hub made, filed under `device_id`: checked
    /// ([`Record::open`]), and applied only if it is later than what this hub holds (so an older
    /// approval never undoes a newer revocation). The caller cuts the device off when this says
    /// so ([`import_and_cut_off`]).
    pub fn import(&self, device_id: &str, payload: &[u8]) -> Result<Imported, String> {
        let record = Record::open(&self.secret, device_id, payload)?;
        let id = record.device_id.clone();
        let mut state = lock(&self.state);
        let current = held(&state, &id, "");
        if !record.supersedes(current.as_ref()) {
            let newer = current.filter(|c| c.supersedes(Some(&record))).is_some();
            return Ok(if newer { Imported::Older } else { Imported::Same });
        }
        let (prev, prev_revoked) = (state.book.admitted.get(&id).cloned(), state.book.revoked.get(&id).copied());
        if record.approved.is_some() && prev.is_none() && state.book.admitted.len() >= MAX_ADMITTED {
            return Err(format!("{MAX_ADMITTED} devices are approved already here"));
        }
        match &record.approved {
            Some(a) => {
                state.book.admitted.insert(id.clone(), a.clone());
                state.book.revoked.remove(&id);
            }
            None => {
                state.book.admitted.remove(&id);
                state.book.resident.remove(&id);
                state.book.remember_revoked(&id, record.at_ms);
            }
        }
        if let Some(path) = &self.file
            && let Err(e) = state.book.save(path)
        {
            match prev {
                Some(p) => state.book.admitted.insert(id.clone(), p),
                None => state.book.admitted.remove(&id),
            };
            match prev_revoked {
                Some(at) => state.book.revoked.insert(id.clone(), at),
                None => state.book.revoked.remove(&id),
            };
            return Err(e);
        }
        state.requests.remove_device(&id);
        drop(state);
        let cut = match &record.approved {
            None => true,
            // Another binding: the sessions of the old one go.
            Some(a) => prev.is_some_and(|p| p.nonce != a.nonce),
        };
        info!(device = %id, by = %record.by, approved = record.approved.is_some(), "admission: applied another hub's decision");
        Ok(Imported::Applied { device_id: id, revoked: record.approved.is_none(), cut })
    }
}

/// How a device was let in until [`Admission::revoke`] recorded its revocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WasAdmitted {
    /// A person approved it.
    Approved,
    /// It ran inside the hub (`serve --demo`).
    InProcess,
    /// The hub admits every device (`serve --approve-all`).
    ApproveAll,
    /// A shared `MCPDEV_DEVICE_TOKEN` would have let it in.
    SharedToken,
    /// It was revoked already.
    RevokedAlready,
    /// Nothing let it in.
    NotAdmitted,
}

impl WasAdmitted {
    /// Whether anything let the device in before.
    pub fn admitted(self) -> bool {
        !matches!(self, WasAdmitted::RevokedAlready | WasAdmitted::NotAdmitted)
    }
}

/// What [`Admission::import`] did with a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Imported {
    /// Applied; `cut`: the device's sessions are to be cut off (revoked, or bound anew).
    Applied { device_id: String, revoked: bool, cut: bool },
    /// This hub holds the same decision.
    Same,
    /// This hub holds a later decision (the record is stale: this hub's own is to be published
    /// again, so the broker ends on the latest).
    Older,
}

/// What `state` holds about `id`, as a record (`by` names the hub for a sealed copy).
fn held(state: &State, id: &str, by: &str) -> Option<Record> {
    if let Some(&at) = state.book.revoked.get(id) {
        return Some(Record { device_id: id.to_string(), at_ms: at, by: by.to_string(), approved: None });
    }
    let a = state.book.admitted.get(id)?;
    // Files from before bindings have no nonce: nothing another hub could verify tokens by.
    (!a.nonce.is_empty()).then(|| Record { device_id: id.to_string(), at_ms: a.approved_at_ms, by: by.to_string(), approved: Some(a.clone()) })
}

/// The time of a new decision about `id`: now, or just after the latest this hub knows of if its
/// clock is behind the hub that made that one (records are ordered by it: [`record`]).
fn next_time(state: &State, id: &str) -> u64 {
    let latest = state.book.revoked.get(id).copied().into_iter().chain(state.book.admitted.get(id).map(|a| a.approved_at_ms)).max();
    latest.map_or(now_ms(), |l| now_ms().max(l + 1))
}

/// Why `approve` and `revoke` leave one of the hub's own virtual devices alone.
fn resident_refusal(id: &str, what: &str) -> String {
    format!(
        "{id} is one of this hub's own virtual devices (serve --demo): it is admitted for this run and needs no approval; {what}. A device that uses this Device-Id too is another device: give it its own (`mcpdev sim --device-id 02:…`)"
    )
}

/// An admitted binding, for people: its Client-Id, transport and age.
pub(super) fn describe(a: &Admitted) -> String {
    let via = match a.via {
        Some(Via::Ota) => "over OTA",
        Some(Via::Websocket) => "over WebSocket",
        Some(Via::Gateway) => "through a gateway",
        None => "by Device-Id",
    };
    format!("Client-Id {}, approved {via}{}", a.client_id.as_deref().unwrap_or("(none)"), if a.key_hash.is_some() { " with a device key" } else { "" })
}
