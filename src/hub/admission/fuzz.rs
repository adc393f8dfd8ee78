//! The `admission_requests` fuzz target: what a stranger controls in admission (OTA check-in
//! headers and bodies, `/activate` polls, WebSocket identity headers and query strings) read by
//! the hub's own readers, and driven through [`Admission`] against a model of who was approved.
//!
//! The input is lines (split on `\n`); a line's first byte says what it is:
//! - `h` + `name: value`: a request header for what follows (at most 16 are kept);
//! - `q` + text: a WebSocket query string: [`identify`] reads it with the headers;
//! - `b` + text: an OTA body: [`read_check_in`] reads it with the headers, then the requester checks in;
//! - `p` + one byte: an `/activate` poll of one of the requesters so far;
//! - `a` + one byte (+ `!` to rebind): approve one of the codes handed out so far;
//! - `d` + one byte: approve a Device-Id out of band; `r` + one byte: revoke one;
//! - `x`: the headers are cleared.
//!
//! Invariants: no panic; every Device-Id read is canonical, every Client-Id at most 64 characters,
//! every reported field capped, a device key hash 64 hex digits; and **every token ever handed
//! out opens its device exactly when the request it was bound to is that device's current
//! approval** (never an impostor's request, never after a revocation or a re-binding).

use std::collections::HashMap;

use super::{Activation, Admission, AdmissionConfig, CheckIn, Requester, Via};
use crate::hub::ota::read_check_in;
use crate::wire::identity::{format_mac, identify, parse_mac};

pub fn admission_requests(data: &[u8]) {
    let adm = Admission::load(&AdmissionConfig::default(), &[]).expect("an in-memory admission");
    let mut headers: Vec<(String, String)> = Vec::new();
    // Every token handed out: (device, the request's code, token).
    let mut tokens: Vec<(String, String, String)> = Vec::new();
    let mut requesters: Vec<(String, Option<String>, Option<String>)> = Vec::new();
    // The model: the code each device's current approval came from ("" = out of band).
    let mut bound: HashMap<String, String> = HashMap::new();
    for line in data.split(|b| *b == b'\n').take(256) {
        let Some((&op, rest)) = line.split_first() else { continue };
        let text = String::from_utf8_lossy(rest);
        let pick = |n: usize| rest.first().map(|b| usize::from(*b) % n.max(1));
        let header = |name: &str| headers.iter().rev().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str());
        match op {
            b'h' => {
                if let Some((k, v)) = text.split_once(':')
                    && headers.len() < 16
                {
                    headers.push((k.trim().to_string(), v.trim().to_string()));
                }
            }
            b'x' => headers.clear(),
            b'q' => {
                if let Ok(id) = identify(header, Some(&text)) {
                    assert_eq!(parse_mac(&id.device_id).map(|m| format_mac(&m)).as_deref(), Ok(id.device_id.as_str()), "a Device-Id that is not canonical");
                }
            }
            b'b' => {
                let Ok(r) = read_check_in(&header, rest) else { continue };
                assert_eq!(parse_mac(&r.device_id).map(|m| format_mac(&m)).as_deref(), Ok(r.device_id.as_str()));
                assert!(r.client_id.as_ref().is_none_or(|c| c.chars().count() <= 64), "a Client-Id longer than 64 characters");
                assert!(r.key_hash.as_ref().is_none_or(|k| k.len() == 64 && k.bytes().all(|b| b.is_ascii_hexdigit())));
                for v in r.reported.as_object().expect("reported is an object").values() {
                    assert!(v.as_str().is_some_and(|s| s.chars().count() <= 64 * 2 + 1), "a reported field over its cap: {v}");
                }
                let who = Requester { device_id: &r.device_id, via: Via::Ota, client_id: r.client_id.as_deref(), key_hash: r.key_hash.clone(), remote: Some(([10, 0, 0, 1], 1000).into()), reported: Some(r.reported.clone()) };
                if let Ok(CheckIn::Pending { pending, token }) = adm.check_in(&who) {
                    tokens.push((r.device_id.clone(), pending.code.clone(), token));
                }
                if requesters.len() < 64 {
                    requesters.push((r.device_id, r.client_id, r.key_hash));
                }
            }
            b'p' => {
                if let Some((id, client, key)) = pick(requesters.len()).and_then(|i| requesters.get(i)) {
                    let a = adm.activation(id, client.as_deref(), key.as_deref(), None);
                    let approved_here = bound.get(id).is_some_and(|code| tokens.iter().any(|(d, c, _)| d == id && c == code));
                    if a == Activation::Approved {
                        assert!(approved_here, "{id}'s poll is approved, though no request of it was");
                    }
                }
            }
            b'a' => {
                if let Some((id, code, _)) = pick(tokens.len()).and_then(|i| tokens.get(i)).cloned()
                    && adm.approve(&code, rest.get(1) == Some(&b'!')).is_ok()
                {
                    bound.insert(id, code);
                }
            }
            b'd' | b'r' => {
                let Some(id) = pick(tokens.len()).and_then(|i| tokens.get(i)).map(|t| t.0.clone()) else { continue };
                if op == b'd' {
                    if adm.approve(&id, false).is_ok() {
                        bound.insert(id, String::new());
                    }
                } else if adm.revoke(&id).is_ok() {
                    bound.remove(&id);
                }
            }
            _ => {}
        }
        for (id, code, token) in &tokens {
            let current = bound.get(id) == Some(code);
            assert_eq!(adm.admits(id, Some(token)).is_ok(), current, "{id}'s token of request {code}: admitted = {}, current approval = {current}", !current);
        }
    }
}
