//! The upstream's requests to a relayed device while they are in flight, and the ids they travel
//! with: the device answers both the upstream and the hub over one socket, and each answer must
//! reach the one who asked, and only them.
//!
//! Rules it enforces:
//! - The hub's own requests use ids from [`HUB_ID_BASE`] up (xiaozhi-esp32-server counts its ids
//!   from 1: `initialize` is 1, `tools/list` 2, its `tools/call`s 1, 2, 3, …).
//! - An upstream request travels with its own id, unchanged, unless that id is in the hub's range
//!   or is already in flight (another upstream request the device has not answered): then it
//!   gets a free id from [`TRANSLATED_BASE`] up on its way to the device, and its answer gets the
//!   upstream's id back on its way up. Both ask, both get their own answer.
//! - At most [`MAX_IN_FLIGHT`] upstream requests are remembered per device, each for at most
//!   [`CALL_TTL`]: beyond, the oldest is forgotten (its late answer is then nobody's and dropped),
//!   so a flood of requests costs bounded memory.
//! - An answer from the device to an id neither side has in flight is nobody's: the relay drops
//!   it (the session counts it as a late reply).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The first id of the hub's own requests to a relayed device (positive int32s: the stock
/// firmware reads ids through `valueint`).
pub const HUB_ID_BASE: i64 = 1 << 30;
/// The first id an upstream request is given when its own cannot be used.
pub const TRANSLATED_BASE: i64 = 1 << 29;
/// Upstream requests remembered per device.
pub const MAX_IN_FLIGHT: usize = 256;
/// How long an unanswered upstream request is remembered.
pub const CALL_TTL: Duration = Duration::from_secs(300);

/// Which of the upstream's requests an answer belongs to, as far as the hub cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Initialize,
    Other,
}

#[derive(Debug)]
struct Call {
    /// The upstream's own id, when the device was given another one.
    upstream_id: Option<Value>,
    method: Method,
    at: Instant,
}

/// An upstream request the device answered.
#[derive(Debug, PartialEq)]
pub struct Answered {
    /// The id to give the answer on its way up, when it is not the one the device used.
    pub upstream_id: Option<Value>,
    pub method: Method,
}

/// The upstream's requests in flight, by the id the device was given (its JSON text).
#[derive(Debug, Default)]
pub struct UpstreamCalls {
    calls: HashMap<String, Call>,
    next_translated: i64,
    /// Requests forgotten to stay within [`MAX_IN_FLIGHT`].
    pub evicted: u64,
}

impl UpstreamCalls {
    /// An upstream request with `id` for `method`: the id it must reach the device with instead
    /// of its own, if any.
    pub fn on_request(&mut self, id: &Value, method: &str, now: Instant) -> Option<i64> {
        self.calls.retain(|_, c| now.duration_since(c.at) < CALL_TTL);
        while self.calls.len() >= MAX_IN_FLIGHT {
            let Some(oldest) = self.calls.iter().min_by_key(|(_, c)| c.at).map(|(k, _)| k.clone()) else { break };
            self.calls.remove(&oldest);
            self.evicted += 1;
        }
        let method = if method == "initialize" { Method::Initialize } else { Method::Other };
        let key = id.to_string();
        let in_hub_range = id.as_i64().is_some_and(|n| n >= HUB_ID_BASE) || id.as_f64().is_some_and(|n| n >= HUB_ID_BASE as f64);
        if !in_hub_range && !self.calls.contains_key(&key) {
            self.calls.insert(key, Call { upstream_id: None, method, at: now });
            return None;
        }
        let fresh = self.free_id();
        self.calls.insert(Value::from(fresh).to_string(), Call { upstream_id: Some(id.clone()), method, at: now });
        Some(fresh)
    }

    /// A translated id no request in flight uses (the range is far larger than the cap).
    fn free_id(&mut self) -> i64 {
        loop {
            if !(TRANSLATED_BASE..HUB_ID_BASE).contains(&self.next_translated) {
                self.next_translated = TRANSLATED_BASE;
            }
            let id = self.next_translated;
            self.next_translated += 1;
            if !self.calls.contains_key(&Value::from(id).to_string()) {
                return id;
            }
        }
    }

    /// The device answered `id`: the upstream request it belongs to, if one is in flight.
    pub fn on_answer(&mut self, id: &Value) -> Option<Answered> {
        self.calls.remove(&id.to_string()).map(|c| Answered { upstream_id: c.upstream_id, method: c.method })
    }

    /// Upstream requests the device has not answered.
    pub fn in_flight(&self) -> usize {
        self.calls.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_upstream_id_passes_unchanged_and_its_answer_goes_back_up() {
        let (mut calls, now) = (UpstreamCalls::default(), Instant::now());
        assert_eq!(calls.on_request(&json!(1), "initialize", now), None);
        assert_eq!(calls.on_request(&json!("a"), "tools/call", now), None);
        assert_eq!(calls.on_answer(&json!(1)), Some(Answered { upstream_id: None, method: Method::Initialize }));
        assert_eq!(calls.on_answer(&json!(1)), None, "answered once");
        assert_eq!(calls.on_answer(&json!(HUB_ID_BASE)), None, "the hub's ids are not the upstream's");
        assert_eq!(calls.on_answer(&json!("a")).map(|a| a.method), Some(Method::Other));
    }

    #[test]
    fn an_id_in_the_hubs_range_or_in_flight_is_translated_and_given_back() {
        let (mut calls, now) = (UpstreamCalls::default(), Instant::now());
        let hub_range = calls.on_request(&json!(HUB_ID_BASE + 1), "tools/call", now).expect("translated");
        assert!((TRANSLATED_BASE..HUB_ID_BASE).contains(&hub_range));
        // xiaozhi-esp32-server's first tools/call reuses id 1 while `initialize` (1) may be in flight.
        assert_eq!(calls.on_request(&json!(1), "initialize", now), None);
        let again = calls.on_request(&json!(1), "tools/call", now).expect("an id in flight is translated");
        assert_ne!(again, hub_range);
        // The upstream uses the translated id itself: that one is translated in turn.
        let third = calls.on_request(&json!(hub_range), "tools/call", now).expect("translated");
        assert!(third != hub_range && third != again);
        assert_eq!(calls.on_answer(&json!(again)), Some(Answered { upstream_id: Some(json!(1)), method: Method::Other }));
        assert_eq!(calls.on_answer(&json!(1)).map(|a| a.upstream_id), Some(None));
        assert_eq!(calls.on_answer(&json!(hub_range)).and_then(|a| a.upstream_id), Some(json!(HUB_ID_BASE + 1)));
        assert_eq!(calls.on_answer(&json!(third)).and_then(|a| a.upstream_id), Some(json!(hub_range)));
    }

    #[test]
    fn a_flood_of_requests_stays_within_the_cap_and_old_ones_expire() {
        let (mut calls, now) = (UpstreamCalls::default(), Instant::now());
        for i in 0..10_000 {
            calls.on_request(&json!(i), "tools/call", now + Duration::from_micros(i));
        }
        assert_eq!(calls.in_flight(), MAX_IN_FLIGHT);
        assert_eq!(calls.evicted, 10_000 - MAX_IN_FLIGHT as u64);
        assert!(calls.on_answer(&json!(0)).is_none(), "the oldest went first");
        assert!(calls.on_answer(&json!(9_999)).is_some());
        calls.on_request(&json!("late"), "tools/call", now + CALL_TTL + Duration::from_secs(1));
        assert_eq!(calls.in_flight(), 1, "requests older than the TTL are forgotten");
    }
}
