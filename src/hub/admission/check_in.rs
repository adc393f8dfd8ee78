//! A device asking to be admitted: an OTA check-in or a WebSocket request opens (or finds) a
//! request bound to its requester, and gets its token only once that very request is approved.
//! It carries out "a request is bound to its requester" and "tokens go only to the approved
//! binding" (see the module above); the store's caps and eviction are in [`super::requests`].

use super::*;

impl Admission {
    /// An OTA check-in (`via: ota`). The approved binding gets its token; anyone else gets its own
    /// request (opened or refreshed) and a token bound to it.
    pub fn check_in(&self, r: &Requester<'_>) -> Result<CheckIn, Refusal> {
        let id = r.device_id;
        {
            let state = lock(&self.state);
            if !state.book.revoked.contains_key(id) {
                if let Some(a) = state.book.admitted.get(id) {
                    if a.via == Some(Via::Ota) && a.matches(r.client_id, r.key_hash.as_deref()) {
                        return Ok(CheckIn::Admitted { token: self.token_for(Purpose::Device, id, &a.nonce) });
                    }
                } else if self.approve_all {
                    return Ok(CheckIn::Admitted { token: self.token_for(Purpose::Device, id, "") });
                }
            }
        }
        let pending = self.request(r)?;
        let token = self.token_for(Purpose::Device, id, &pending.nonce);
        Ok(CheckIn::Pending { pending: Box::new(pending), token })
    }

    /// Records (or refreshes) a request for admission and returns it with its code.
    pub fn request(&self, r: &Requester<'_>) -> Result<Pending, Refusal> {
        let now = Instant::now();
        let opened = lock(&self.state).requests.open(r, now, now_ms(), &mut random_u64);
        let ip = r.remote.map(|a| a.ip());
        match opened {
            Ok(Opened::Existing(p)) => Ok(*p),
            Ok(Opened::New { pending, evicted }) => {
                if let Some(suppressed) = self.may_log(ip) {
                    if let Some(gone) = evicted {
                        warn!(device = %gone.device_id, remote = gone.remote.as_deref().unwrap_or("-"), "admission: too many requests held; dropped this one (its address held several)");
                    }
                    warn!(device = %pending.device_id, via = ?pending.via, remote = pending.remote.as_deref().unwrap_or("-"), suppressed,
                        "a device asks to be admitted: `mcpdev devices pending` shows it; approve it with `mcpdev devices approve {}`", pending.code);
                }
                Ok(*pending)
            }
            Err(refusal) => {
                // One line per address, per network, or for the whole store in each window: a
                // flood from many addresses is one line and a count.
                let (reason, key) = match &refusal {
                    Refusal::Busy { cap: Crowded::Network, .. } => (Refused::AdmissionNetwork, ip.map(requests::prefix)),
                    Refusal::Busy { cap: Crowded::Full, .. } => (Refused::AdmissionFull, Some(IpAddr::from([0u8; 4]))),
                    _ => (Refused::AdmissionRate, ip),
                };
                crate::metrics::refused(reason);
                if let Some(suppressed) = self.may_log(key) {
                    warn!(remote = r.remote.map(|a| a.to_string()).unwrap_or_else(|| "-".into()), suppressed, "admission request refused: {refusal}");
                }
                Err(refusal)
            }
        }
    }

    /// Where the `/activate` poll of this requester stands. `challenge`: the one the poll sent,
    /// if any (the stock body is `{}` without an eFuse serial).
    pub fn activation(&self, device_id: &str, client_id: Option<&str>, key_hash: Option<&str>, challenge: Option<&str>) -> Activation {
        let now = Instant::now();
        let mut state = lock(&self.state);
        // A lab bench asks for no activation: whoever polls is done (unless revoked).
        if self.approve_all && !state.book.admitted.contains_key(device_id) && !state.book.revoked.contains_key(device_id) {
            return Activation::Approved;
        }
        if let Some(a) = state.book.admitted.get(device_id)
            && !state.book.revoked.contains_key(device_id)
            && a.matches(client_id, key_hash)
            && challenge.is_none_or(|c| a.challenge.is_empty() || constant_time_eq(c.as_bytes(), a.challenge.as_bytes()))
        {
            return Activation::Approved;
        }
        let mine: Vec<&Pending> = state.requests.of_device(device_id, now).filter(|p| p.client_id.as_deref() == client_id && p.key_hash.as_deref() == key_hash).collect();
        if mine.is_empty() {
            return Activation::Unknown;
        }
        let polled = match challenge {
            Some(c) => mine.iter().find(|p| constant_time_eq(p.challenge.as_bytes(), c.as_bytes())).map(|p| p.code.clone()),
            None => mine.iter().min_by_key(|p| p.since).map(|p| p.code.clone()),
        };
        match polled {
            // A device polling for its code keeps it ahead of requests nobody looks at.
            Some(code) => {
                state.requests.seen(&code);
                Activation::Waiting(code)
            }
            None => Activation::WrongChallenge,
        }
    }

    /// Every live pending request, oldest first, each with its conflicts. Each is marked as shown
    /// to a person (`devices pending`, the dashboard): kept ahead of requests nobody saw.
    pub fn pending(&self) -> Vec<Pending> {
        let now = Instant::now();
        let mut state = lock(&self.state);
        let mut v: Vec<Pending> = state.requests.live(now).cloned().map(|p| p.with_expiry(now)).collect();
        for p in &v {
            state.requests.seen(&p.code);
        }
        v.sort_by(|a, b| a.since.cmp(&b.since).then_with(|| a.code.cmp(&b.code)));
        let all: Vec<(String, String, Option<String>, Option<String>)> = v.iter().map(|p| (p.device_id.clone(), p.code.clone(), p.client_id.clone(), p.remote.clone())).collect();
        for p in &mut v {
            for (id, code, client, remote) in &all {
                if *id == p.device_id && *code != p.code {
                    p.conflicts.push(format!(
                        "another request for this Device-Id: code {code} from Client-Id {} at {}",
                        client.as_deref().unwrap_or("(none)"),
                        remote.as_deref().unwrap_or("(unknown address)")
                    ));
                }
            }
            if let Some(a) = state.book.admitted.get(&p.device_id) {
                p.conflicts.push(format!("this Device-Id is admitted already ({}): approving this request replaces that binding and needs --rebind", decisions::describe(a)));
            }
            if state.book.revoked.contains_key(&p.device_id) {
                p.conflicts.push("this Device-Id was revoked".into());
            }
        }
        v
    }

    /// What the request store holds, as its eviction rules see it, without marking anything
    /// seen (for the fuzz target's invariants).
    pub(crate) fn waiting(&self) -> Vec<Waiting> {
        let now = Instant::now();
        lock(&self.state).requests.live(now).map(|p| Waiting { code: p.code.clone(), ip: p.ip, seen: p.seen }).collect()
    }
}

/// A waiting request as the request store's eviction rules see it ([`Admission::waiting`]).
#[derive(Debug, Clone)]
pub(crate) struct Waiting {
    pub code: String,
    /// The requester's address, canonical.
    pub ip: Option<IpAddr>,
    /// Shown to a person, or polled for by its device.
    pub seen: bool,
}
