//! Timing: onboarding after the hello (over MQTT: after the device first answered), and p50/p99 round trips per method.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use super::conn::Conn;
use super::Results;

const REF: &str = "xiaozhi-protocol.md §5 (backends time out MCP requests after 10 s)";

/// `from`: what onboarding is counted from (`the hello`).
pub fn check(conn: &Conn, onboarding: Duration, from: &str, limit: Duration, onboarded: bool, r: &mut Results) -> Value {
    let ms = onboarding.as_secs_f64() * 1000.0;
    if !conn.raw() {
        r.skip("timing.onboarding", "skipped: through a hub, the device onboarded with the hub, not with check", REF);
    } else if !onboarded {
        r.skip("timing.onboarding", "skipped: onboarding did not complete", REF);
    } else if onboarding <= limit {
        r.pass("timing.onboarding", format!("initialize and every tools/list page took {ms:.0} ms after {from}"), REF);
    } else {
        r.fail("timing.onboarding", format!("onboarding took {ms:.0} ms, over the {limit:?} allowed (--max-onboarding)"), REF);
    }
    let mut per: BTreeMap<&str, Vec<Duration>> = BTreeMap::new();
    for (m, d) in &conn.latencies {
        per.entry(m.as_str()).or_default().push(*d);
    }
    let methods: serde_json::Map<String, Value> = per
        .into_iter()
        .map(|(m, mut v)| {
            v.sort();
            let pick = |q: f64| v[((v.len() as f64 - 1.0) * q).round() as usize].as_secs_f64() * 1000.0;
            (m.to_string(), json!({"count": v.len(), "p50_ms": round(pick(0.5)), "p99_ms": round(pick(0.99))}))
        })
        .collect();
    json!({"onboarding_ms": round(ms), "onboarding_from": from, "methods": methods})
}

fn round(ms: f64) -> f64 {
    (ms * 10.0).round() / 10.0
}
