//! Fuzz entry points: one fn per cargo-fuzz target in `fuzz/fuzz_targets/`, each taking the raw
//! input bytes, so libFuzzer (nightly, `cargo fuzz run NAME`) and the stable corpus replay
//! (`tests/fuzz_corpora.rs`) drive exactly the same code. Each fn panics only when an invariant
//! breaks: that panic is the finding. Not an API; hidden from the docs.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::session::{CallError, Output, Session, SessionConfig};
use crate::wire::identity::Identity;

/// Every target [`run`] knows, by the name of its `fuzz/fuzz_targets/<name>.rs` and
/// `fuzz/corpus/<name>/`.
pub const TARGETS: &[&str] = &["envelope_session", "args", "broker_packets", "ws_frames", "mcp_direct", "admission_requests", "tls_accept", "ws_handshake"];

/// Runs `data` through the target named `target`; `false` when no target has that name.
pub fn run(target: &str, data: &[u8]) -> bool {
    match target {
        "envelope_session" => envelope_session(data),
        "args" => args(data),
        "broker_packets" => crate::mqtt::broker::fuzz_packets(data),
        "ws_frames" => ws_frames(data),
        "mcp_direct" => mcp_direct(data),
        "admission_requests" => admission_requests(data),
        "tls_accept" => tls_accept(data),
        "ws_handshake" => crate::links::ws_handshake::fuzz_answer(data),
        _ => return false,
    }
    true
}

/// The xiaozhi envelope and tolerant JSON-RPC parsing driven through the [`Session`] state
/// machine. The input is lines (split on `\n`); a line's first byte says what happens:
///
/// - `>` + text: the rest is a text frame from the device;
/// - `+` + digits: time passes (that many tens of milliseconds, at most 655 s), then a tick;
/// - `r` + one byte + text: a result reply to one of the last requests the session sent (the
///   byte picks which), the text spliced in raw as the `result` (it may be invalid JSON);
/// - `e` + one byte + text: an error reply the stock way, its message spliced in unescaped;
/// - `c` + one byte + text: a caller's request (method = text, timeout from the byte);
/// - `x` + one byte: a caller cancels; `f`: the link fails every caller; `d`: the link drops;
/// - `b`: onboarding starts without a hello; `o` + text: an oversize frame; `t`: tracing toggles;
/// - anything else: the whole line is a text frame (so raw frames are valid corpus lines).
///
/// Invariants: no panic; every caller's request ends exactly once (a reply, a timeout, a link
/// failure or a cancel), and never after it ended; every frame sent is JSON; nothing is overdue
/// after a tick; the pending-request map holds at most the open callers' requests plus one
/// onboarding request and one keepalive; every text frame that
/// [`crate::wire::envelope::fast_response`] reads, it reads as the full parse does (see
/// [`crate::wire::envelope::fuzz_fast_response`]), and every
/// result a caller gets parses as a `Value`.
pub fn envelope_session(data: &[u8]) {
    let mut d = SessionDriver::new();
    for line in data.split(|b| *b == b'\n') {
        d.step(line);
    }
    let out = d.session.on_disconnect();
    d.check(out);
    let open: Vec<u64> = d.tickets.iter().filter(|(_, s)| **s == Ticket::Open).map(|(t, _)| *t).collect();
    assert!(open.is_empty(), "callers {open:?} never got an answer though the link dropped");
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ticket {
    Open,
    Ended,
    Cancelled,
}

struct SessionDriver {
    session: Session,
    now: Instant,
    tickets: BTreeMap<u64, Ticket>,
    /// The ids of the last requests the session sent (newest last).
    sent_ids: Vec<Value>,
}

impl SessionDriver {
    fn new() -> Self {
        let now = Instant::now();
        let mut cfg = SessionConfig::new("fz", r#"{"type":"hello","transport":"websocket","session_id":"fz"}"#);
        cfg.onboarding_timeout = Duration::from_secs(2);
        cfg.keepalive = Duration::from_secs(30);
        cfg.empty_list_retry = Duration::from_secs(1);
        cfg.empty_list_retries = 2;
        cfg.max_pages = 8;
        let identity = Identity { device_id: "aa:bb:cc:dd:ee:ff".into(), client_id: None, token: None, protocol_version: 1 };
        Self { session: Session::new(identity, "websocket", cfg, now), now, tickets: BTreeMap::new(), sent_ids: Vec::new() }
    }

    fn step(&mut self, line: &[u8]) {
        let (op, rest) = line.split_first().map_or((0, line), |(op, rest)| (*op, rest));
        let (pick, tail) = rest.split_first().map_or((0, rest), |(b, t)| (*b, t));
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let out = match op {
            b'>' => {
                crate::wire::envelope::fuzz_fast_response(&text(rest));
                self.session.on_text(&text(rest), self.now)
            }
            b'+' => {
                let n: u64 = text(rest).trim().parse::<u16>().map_or(1, u64::from);
                self.now += Duration::from_millis(n * 10);
                let out = self.session.on_tick(self.now);
                if let Some(next) = self.session.next_deadline() {
                    assert!(next > self.now, "a deadline is overdue right after a tick: the link would spin");
                }
                out
            }
            b'r' | b'e' => {
                let Some(id) = self.pick_sent(pick) else { return };
                let body = text(tail);
                let payload = if op == b'r' {
                    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{body}}}"#)
                } else {
                    format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32602,"message":"{body}"}}}}"#)
                };
                let frame = format!(r#"{{"session_id":"fz","type":"mcp","payload":{payload}}}"#);
                crate::wire::envelope::fuzz_fast_response(&frame);
                self.session.on_text(&frame, self.now)
            }
            b'c' => {
                let ticket = self.tickets.len() as u64 + 1;
                self.tickets.insert(ticket, Ticket::Open);
                let timeout = Duration::from_millis(100 * (u64::from(pick % 50) + 1));
                let method = text(tail);
                self.session.request(ticket, &method, None, timeout, self.now)
            }
            b'x' => {
                if let Some((&ticket, state)) = self.tickets.iter_mut().nth(usize::from(pick)) {
                    if *state == Ticket::Open {
                        *state = Ticket::Cancelled;
                    }
                    self.session.cancel(ticket, self.now)
                } else {
                    Vec::new()
                }
            }
            b'f' => self.session.fail_callers(CallError::Link("fuzz: link failed".into())),
            b'd' => {
                let out = self.session.on_disconnect();
                self.check(out);
                let open = self.tickets.values().filter(|s| **s == Ticket::Open).count();
                assert_eq!(open, 0, "a caller was left waiting after the link dropped");
                return;
            }
            b'b' => self.session.begin(self.now),
            b'o' => self.session.on_oversize(&text(rest), 16),
            b't' => {
                self.session.trace = !self.session.trace;
                Vec::new()
            }
            _ => {
                crate::wire::envelope::fuzz_fast_response(&text(line));
                self.session.on_text(&text(line), self.now)
            }
        };
        self.check(out);
    }

    fn pick_sent(&self, pick: u8) -> Option<Value> {
        let n = self.sent_ids.len();
        (n > 0).then(|| self.sent_ids[n - 1 - usize::from(pick) % n].clone())
    }

    fn check(&mut self, out: Vec<Output>) {
        for o in out {
            match o {
                Output::Send(text) => {
                    let frame: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("the session sent a frame that is not JSON ({e}): {text}"));
                    let payload = &frame["payload"];
                    if payload.get("method").is_some()
                        && let Some(id) = payload.get("id")
                    {
                        self.sent_ids.push(id.clone());
                        if self.sent_ids.len() > 32 {
                            self.sent_ids.remove(0);
                        }
                    }
                }
                Output::Reply { ticket, outcome } => {
                    if let Ok(result) = outcome {
                        assert!(serde_json::from_str::<Value>(result.text()).is_ok(), "a caller got a result that is not JSON: {}", result.text());
                    }
                    let state = self.tickets.get_mut(&ticket).unwrap_or_else(|| panic!("a reply for ticket {ticket}, which no caller used"));
                    assert_eq!(*state, Ticket::Open, "ticket {ticket} got a reply after it ended ({state:?})");
                    *state = Ticket::Ended;
                }
                Output::Event(_) => {}
            }
        }
        let open = self.tickets.values().filter(|s| **s == Ticket::Open).count();
        let pending = self.session.pending_requests();
        assert!(pending <= open + 2, "{pending} requests pending with only {open} callers waiting: the map grows without bound");
    }
}

/// `k=v` argument building and validation against a schema ([`crate::args`]). The input's first
/// line is the schema (any JSON; text that is not JSON stands for no schema), a following line
/// starting with `--args-json ` gives that option's text, the other lines are the words.
///
/// Invariants: no panic; every error names what is wrong (a non-empty message); a built value is
/// a JSON object; validation and the signature never fail on what building produced; validation's
/// quick path never accepts what the `jsonschema` crate refuses.
pub fn args(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut lines = text.split('\n');
    let schema: Value = serde_json::from_str(lines.next().unwrap_or_default()).unwrap_or(Value::Null);
    let mut args_json = None;
    let mut words = Vec::new();
    for line in lines {
        match line.strip_prefix("--args-json ") {
            Some(j) => args_json = Some(j),
            None => words.push(line.to_string()),
        }
    }
    let _ = crate::args::signature(&schema);
    if let Some(raw) = args_json.and_then(|j| serde_json::from_str::<Value>(j).ok()) {
        quick_yes_is_right(&schema, &raw);
    }
    match crate::args::build_arguments(&schema, &words, args_json) {
        Ok(value) => {
            assert!(value.is_object(), "build_arguments returned a non-object: {value}");
            quick_yes_is_right(&schema, &value);
            if let Err(errors) = crate::args::validate(&schema, &value) {
                assert!(!errors.is_empty(), "validate failed without saying why");
                for e in errors {
                    assert!(!e.message.is_empty() || !e.suggestions.is_empty(), "a validation error with no message: {e:?}");
                    let _ = e.to_string();
                }
            }
        }
        Err(e) => {
            assert!(!e.message.is_empty(), "a build error with no message: {e:?}");
            let _ = e.to_string();
        }
    }
    if let Some(word) = words.first() {
        let names: Vec<&str> = schema.get("properties").and_then(Value::as_object).map(|p| p.keys().map(String::as_str).collect()).unwrap_or_default();
        let found = crate::args::suggest(word, names.iter().copied());
        assert!(found.len() <= 3, "suggest returned {} names (at most 3)", found.len());
    }
}

/// The validator's quick path never accepts what the `jsonschema` crate refuses.
fn quick_yes_is_right(schema: &Value, args: &Value) {
    if crate::args::quickly_accepts(schema, args) {
        let full = jsonschema::validator_for(schema).map(|v| v.is_valid(args));
        assert_eq!(full.as_ref().ok(), Some(&true), "the quick path accepted {args} for {schema}, jsonschema says {full:?}");
    }
}

/// A `/mcp` request through the bridge's direct path's choice of what it answers itself
/// ([`crate::bridge::direct::fuzz_request`]: headers, then a blank line, then the body).
pub fn mcp_direct(data: &[u8]) {
    crate::bridge::direct::fuzz_request(data);
}

/// A client's WebSocket byte stream through the hub's frame decoder ([`crate::wire::ws_frame`]).
/// The first byte sets a read size (1 to 256 bytes); the rest is the stream.
///
/// Invariants: no panic; the messages, and the error if any, are the same whether the stream
/// arrives in one read or in reads of that size; no message is over the decoder's limit; nothing
/// is held once the stream ends between messages without an error.
pub fn ws_frames(data: &[u8]) {
    use crate::wire::ws_frame::{Decoder, Incoming};
    const LIMIT: usize = 4096;
    let Some((&size, stream)) = data.split_first() else {
        return;
    };
    let decode = |read: usize| {
        let mut decoder = Decoder::new(LIMIT);
        let mut out = Vec::new();
        for chunk in stream.chunks(read) {
            if let Err(e) = decoder.feed(chunk, &mut out) {
                return (out, Some(e), false);
            }
        }
        (out, None, decoder.is_idle())
    };
    let whole = decode(stream.len().max(1));
    let pieces = decode(usize::from(size) + 1);
    assert_eq!(
        whole,
        pieces,
        "the same stream read in {}-byte pieces",
        usize::from(size) + 1
    );
    for message in &whole.0 {
        match message {
            Incoming::Text(t) => assert!(t.len() <= LIMIT, "a {}-byte text message", t.len()),
            Incoming::Binary(n) => assert!(*n <= LIMIT, "a {n}-byte binary message"),
            Incoming::Data(d) => assert!(d.len() <= LIMIT, "a {}-byte binary message", d.len()),
            Incoming::Ping(p) => assert!(p.len() <= 125, "a {}-byte ping", p.len()),
            Incoming::Pong | Incoming::Close(_) => {}
        }
    }
}

/// The `admission_requests` fuzz target: what a stranger controls in admission (OTA check-in
/// headers and bodies, `/activate` polls, WebSocket identity headers and query strings) read by
/// the hub's own readers, and driven through [`Admission`] against a model of who was approved.
///
/// The input is lines (split on `\n`); a line's first byte says what it is:
/// - `h` + `name: value`: a request header for what follows (at most 16 are kept);
/// - `q` + text: a WebSocket query string: [`identify`] reads it with the headers;
/// - `b` + text: an OTA body: [`read_check_in`] reads it with the headers, then the requester checks in;
/// - `p` + one byte: an `/activate` poll of one of the requesters so far;
/// - `a` + one byte (+ `!` to rebind): approve one of the codes handed out so far;
/// - `d` + one byte: approve a Device-Id out of band; `r` + one byte: revoke one;
/// - `n` + three bytes: the address later check-ins come from (IPv4, IPv4-mapped IPv6 or IPv6,
///   in a few networks; [`fuzz_address`]);
/// - `m` + three bytes: a flood of made-up Device-Ids (the count, then how its addresses spread:
///   one address, one network, many networks, IPv6);
/// - `l`: a person lists the pending requests; `x`: the headers are cleared.
///
/// Invariants: no panic; every Device-Id read is canonical, every Client-Id at most 64 characters,
/// every reported field capped, a device key hash 64 hex digits; **every token ever handed
/// out opens its device exactly when the request it was bound to is that device's current
/// approval** (never an impostor's request, never after a revocation or a re-binding); and the
/// request store keeps its caps without evicting an address's only request, evicting a seen
/// request only when no unseen one could go, and refusing only when nothing could
/// ([`check_room`]).
pub fn admission_requests(data: &[u8]) {
    let adm = crate::hub::admission::Admission::load(&crate::hub::admission::AdmissionConfig::default(), &[]).expect("an in-memory admission");
    let mut remote: std::net::SocketAddr = ([10, 0, 0, 1], 1000).into();
    let mut flooded = 0u32;
    let mut headers: Vec<(String, String)> = Vec::new();
    // Every token handed out: (device, the request's code, token).
    let mut tokens: Vec<(String, String, String)> = Vec::new();
    let mut requesters: Vec<(String, Option<String>, Option<String>)> = Vec::new();
    // The model: the code each device's current approval came from ("" = out of band).
    let mut bound: std::collections::HashMap<String, String> = std::collections::HashMap::new();
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
            b'n' => remote = fuzz_address(rest),
            b'm' => {
                let (n, spread) = (rest.first().copied().unwrap_or(0), rest.get(1).copied().unwrap_or(0));
                for _ in 0..n {
                    flooded += 1;
                    let [_, a, b, c] = flooded.to_be_bytes();
                    let from = match spread % 4 {
                        0 => remote,
                        1 => fuzz_address(&[0, rest.get(2).copied().unwrap_or(0), c]),
                        2 => fuzz_address(&[3, b, c]),
                        _ => fuzz_address(&[2, rest.get(2).copied().unwrap_or(0), c]),
                    };
                    let id = format!("02:ff:00:{a:02x}:{b:02x}:{c:02x}");
                    let who = crate::hub::admission::Requester { device_id: &id, via: crate::hub::admission::Via::Ota, client_id: Some("flood"), key_hash: None, remote: Some(from), reported: None };
                    let before = adm.waiting();
                    let checked = adm.check_in(&who);
                    check_room(&before, &adm.waiting(), from.ip(), checked.as_ref().err());
                }
            }
            b'l' => {
                let listed = adm.pending();
                assert_eq!(listed.len(), adm.waiting().len(), "`devices pending` lists every waiting request");
                assert!(adm.waiting().iter().all(|w| w.seen), "a listed request counts as seen");
            }
            b'q' => {
                if let Ok(id) = crate::wire::identity::identify(header, Some(&text)) {
                    assert_eq!(crate::wire::identity::parse_mac(&id.device_id).map(|m| crate::wire::identity::format_mac(&m)).as_deref(), Ok(id.device_id.as_str()), "a Device-Id that is not canonical");
                }
            }
            b'b' => {
                let Ok(r) = crate::hub::ota::read_check_in(&header, rest) else { continue };
                assert_eq!(crate::wire::identity::parse_mac(&r.device_id).map(|m| crate::wire::identity::format_mac(&m)).as_deref(), Ok(r.device_id.as_str()));
                assert!(r.client_id.as_ref().is_none_or(|c| c.chars().count() <= 64), "a Client-Id longer than 64 characters");
                assert!(r.key_hash.as_ref().is_none_or(|k| k.len() == 64 && k.bytes().all(|b| b.is_ascii_hexdigit())));
                for v in r.reported.as_object().expect("reported is an object").values() {
                    assert!(v.as_str().is_some_and(|s| s.chars().count() <= 64 * 2 + 1), "a reported field over its cap: {v}");
                }
                let who = crate::hub::admission::Requester { device_id: &r.device_id, via: crate::hub::admission::Via::Ota, client_id: r.client_id.as_deref(), key_hash: r.key_hash.clone(), remote: Some(remote), reported: Some(r.reported.clone()) };
                let before = adm.waiting();
                let checked = adm.check_in(&who);
                check_room(&before, &adm.waiting(), remote.ip(), checked.as_ref().err());
                if let Ok(crate::hub::admission::CheckIn::Pending { pending, token }) = checked {
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
                    if a == crate::hub::admission::Activation::Approved {
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

/// An address a check-in comes from, picked by three bytes: the shape (IPv4 in 10.0.0.0/22,
/// IPv4-mapped IPv6 in the same networks, IPv6 in four /64s, IPv4 in 65,536 /24s), then two that
/// pick the network and the host.
fn fuzz_address(b: &[u8]) -> std::net::SocketAddr {
    let (shape, net, host) = (b.first().copied().unwrap_or(0), b.get(1).copied().unwrap_or(0), b.get(2).copied().unwrap_or(1));
    let v4 = std::net::Ipv4Addr::new(10, 0, net % 4, host);
    let ip: std::net::IpAddr = match shape % 4 {
        0 => v4.into(),
        1 => v4.to_ipv6_mapped().into(),
        2 => std::net::Ipv6Addr::new(0x2001, 0xdb8, 0, u16::from(net % 4), 0, 0, 0, u16::from(host)).into(),
        _ => std::net::Ipv4Addr::new(10, net, host, 1).into(),
    };
    (ip, 1000).into()
}

/// The request store's caps and eviction rules, checked around one check-in from `from`:
/// `before` and `after` are what waited around it, `refused` its refusal, if any.
/// - at most [`MAX_PER_PEER`] per address, [`MAX_PER_PREFIX`] per network, [`MAX_PENDING`] in all;
/// - an address's only request is never evicted, and a refused check-in evicts nothing;
/// - a seen request is evicted only when no unseen one of an address holding several could go;
/// - a full network or store refuses a check-in only when every address there holds one.
fn check_room(before: &[crate::hub::admission::Waiting], after: &[crate::hub::admission::Waiting], from: std::net::IpAddr, refused: Option<&crate::hub::admission::Refusal>) {
    use crate::hub::admission::requests::{MAX_PENDING, MAX_PER_PEER, MAX_PER_PREFIX, prefix};
    use crate::hub::admission::{Crowded, Refusal};
    let from = from.to_canonical();
    let count = |set: &[crate::hub::admission::Waiting], f: &dyn Fn(&crate::hub::admission::Waiting) -> bool| set.iter().filter(|w| f(w)).count();
    for w in after {
        assert!(count(after, &|o| o.ip == w.ip) <= MAX_PER_PEER, "{:?} holds more than {MAX_PER_PEER} requests", w.ip);
        assert!(count(after, &|o| o.ip.map(prefix) == w.ip.map(prefix)) <= MAX_PER_PREFIX, "the network of {:?} holds more than {MAX_PER_PREFIX}", w.ip);
    }
    assert!(after.len() <= MAX_PENDING, "{} requests held", after.len());
    let gone: Vec<_> = before.iter().filter(|b| !after.iter().any(|a| a.code == b.code)).collect();
    if refused.is_some() {
        assert!(gone.is_empty(), "a refused check-in evicted {gone:?}");
    }
    for g in &gone {
        assert!(count(before, &|o| o.ip == g.ip) > 1, "the only request of {:?} was evicted", g.ip);
    }
    assert!(gone.len() <= 1, "one check-in evicted {} requests", gone.len());
    // Where the room was made: the address's own requests at its cap, else its network, else all.
    let mine = |o: &crate::hub::admission::Waiting| o.ip == Some(from);
    let net = |o: &crate::hub::admission::Waiting| o.ip.map(prefix) == Some(prefix(from));
    let own_full = count(before, &mine) >= MAX_PER_PEER;
    let net_full = count(before, &net) >= MAX_PER_PREFIX;
    let scope = |o: &crate::hub::admission::Waiting| if own_full { mine(o) } else if net_full { net(o) } else { true };
    let several = |o: &crate::hub::admission::Waiting| count(before, &|x| x.ip == o.ip) > 1;
    if let Some(g) = gone.first() {
        assert!(scope(g), "{g:?} was evicted from outside the full scope");
        assert!(!g.seen || !before.iter().any(|o| scope(o) && several(o) && !o.seen), "a seen request was evicted while an unseen one could go");
    }
    match refused {
        Some(Refusal::Busy { cap: Crowded::Network, .. }) => assert!(net_full && !before.iter().any(|o| net(o) && several(o)), "a network refused a check-in though it had room or a request to spare"),
        Some(Refusal::Busy { cap: Crowded::Full, .. }) => assert!(before.len() >= MAX_PENDING && !before.iter().any(several), "a full store refused a check-in though it had a request to spare"),
        _ => {}
    }
}

/// The hub's TLS accept path: the server configuration every hub listener uses
/// ([`crate::tls::server::config`]: its versions, suites, ALPN and session tickets) fed what a
/// peer sends. The first byte sets the size of the reads (0: everything in one), the rest is
/// the peer's bytes (real ClientHellos, cut or mangled, are in the corpus).
///
/// Invariants: no panic; once the connection failed it stays failed (the listener closes it);
/// no application data comes out before the handshake is complete; what the server writes back
/// stays small (a flight of handshake messages, never a reflection of what it was sent).
pub fn tls_accept(data: &[u8]) {
    use std::io::Read;
    let Some((&size, input)) = data.split_first() else { return };
    let chunk = if size == 0 { input.len().max(1) } else { usize::from(size) };
    let config = crate::tls::server::config(fuzz_cert(), crate::tls::server::HTTP1);
    let mut conn = rustls::ServerConnection::new(config).expect("a server connection from the hub's configuration");
    let mut written = Vec::new();
    let mut failed = false;
    for piece in input.chunks(chunk) {
        let mut reader = piece;
        while !reader.is_empty() {
            match conn.read_tls(&mut reader) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            match conn.process_new_packets() {
                Ok(state) => {
                    assert!(!failed, "a failed connection accepted more");
                    if state.plaintext_bytes_to_read() > 0 {
                        assert!(!conn.is_handshaking(), "application data before the handshake completed");
                        let mut sink = Vec::new();
                        let _ = conn.reader().read_to_end(&mut sink);
                    }
                }
                Err(_) => failed = true,
            }
            while conn.wants_write() {
                if conn.write_tls(&mut written).is_err() {
                    break;
                }
            }
            if failed {
                break;
            }
        }
        assert!(written.len() < 64 * 1024, "the server wrote {} bytes back", written.len());
        if failed {
            assert!(conn.process_new_packets().is_err(), "a failed connection recovered");
            return;
        }
    }
}

/// A certificate for [`tls_accept`], made once.
fn fuzz_cert() -> std::sync::Arc<dyn rustls::server::ResolvesServerCert> {
    crate::tls::server::self_signed()
}
