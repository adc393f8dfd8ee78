//! What `mcpdev serve` tells the person or script that started it: the banner with addresses a
//! device can actually reach, and one line per device lifecycle event (connected, ready,
//! onboarding trouble, disconnected), as NDJSON with timestamps under `--json`.

use std::net::{IpAddr, SocketAddr};

use serde_json::Value;

/// The `ws://…/xiaozhi/v1/` URLs devices can use: the bound address, or, when bound to every
/// interface (0.0.0.0 / ::), one per LAN address of this machine (loopback last, for a device on
/// this machine), since no device can connect to 0.0.0.0.
pub fn device_urls(scheme: &str, bound: SocketAddr, path: &str) -> Vec<String> {
    let port = bound.port();
    let url = |ip: IpAddr| match ip {
        IpAddr::V4(v4) => format!("{scheme}://{v4}:{port}{path}"),
        IpAddr::V6(v6) => format!("{scheme}://[{v6}]:{port}{path}"),
    };
    if !bound.ip().is_unspecified() {
        return vec![url(bound.ip())];
    }
    let mut ips: Vec<IpAddr> = lan_addresses().into_iter().filter(|ip| bound.is_ipv6() || ip.is_ipv4()).collect();
    ips.sort_by_key(|ip| (ip.is_loopback(), ip.is_ipv6()));
    ips.dedup();
    if !ips.iter().any(IpAddr::is_loopback) {
        ips.push(if bound.is_ipv6() { IpAddr::V6(std::net::Ipv6Addr::LOCALHOST) } else { IpAddr::V4(std::net::Ipv4Addr::LOCALHOST) });
    }
    ips.into_iter().map(url).collect()
}

/// The banner's "CLI and MCP hosts" entry: the URLs the host listener is reached by (one per
/// address when it is bound to every interface: nobody connects to 0.0.0.0) and who can reach it,
/// said truly: loopback only, or other machines too.
pub fn host_entry(scheme: &str, bound: SocketAddr) -> (Vec<String>, &'static str) {
    let urls = device_urls(scheme, bound, "");
    let who = if bound.ip().is_loopback() {
        "(this machine only; --host-addr 0.0.0.0:PORT and --allowed-host for the LAN)"
    } else if bound.ip().is_unspecified() {
        "(every interface: other machines reach it too; they need its tokens)"
    } else {
        "(other machines reach it; they need its tokens)"
    };
    (urls, who)
}

/// This machine's interface addresses (up interfaces; link-local IPv6 left out: a device cannot
/// use one without a zone).
#[cfg(unix)]
pub fn lan_addresses() -> Vec<IpAddr> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we only read and then free with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return out;
    }
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_flags & (libc::IFF_UP as libc::c_uint) == 0 {
            continue;
        }
        // SAFETY: `ifa_addr` is non-null and points at a sockaddr of the family it names.
        let family = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
        if family == libc::AF_INET {
            // SAFETY: an AF_INET address is a sockaddr_in.
            let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
            out.push(IpAddr::V4(std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr))));
        } else if family == libc::AF_INET6 {
            // SAFETY: an AF_INET6 address is a sockaddr_in6.
            let sin6 = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
            let ip = std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            if ip.segments()[0] & 0xffc0 != 0xfe80 {
                out.push(IpAddr::V6(ip));
            }
        }
    }
    // SAFETY: `head` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    out
}

#[cfg(not(unix))]
pub fn lan_addresses() -> Vec<IpAddr> {
    Vec::new()
}

/// The `--hub` a suggested command needs to reach this hub: none on the default address, where
/// every command looks first.
/// The device ceiling as the banner says it: how many devices the hub takes, and what sets it.
pub fn device_ceiling(budget: &crate::hub::budget::Budget) -> String {
    let max = budget.caps().max_connections;
    match budget.fd_limit() {
        Some(fds) if fds != u64::MAX => format!("up to {max} (open-file limit {fds}; to raise it see docs/hub.md, \"Descriptor limits\")"),
        _ => format!("up to {max} (--max-device-connections)"),
    }
}

pub fn hub_flag(host_url: &str, host_addr: SocketAddr) -> String {
    let https = host_url.starts_with("https:");
    if !https && host_addr.port() == 8001 && (host_addr.ip().is_loopback() || host_addr.ip().is_unspecified()) {
        return String::new();
    }
    let ip = if host_addr.ip().is_unspecified() { IpAddr::V4(std::net::Ipv4Addr::LOCALHOST) } else { host_addr.ip() };
    format!(" --hub {}://{}", if https { "https" } else { "http" }, SocketAddr::new(ip, host_addr.port()))
}

/// The commands the start-up banner suggests after `mcpdev watch`: with `demo` virtual devices,
/// calls to the first of them (which exists, with that tool); without any, commands that work
/// for whichever device connects, naming no device that is not there.
pub fn try_lines(demo: u32, hub_flag: &str) -> Vec<String> {
    if demo > 0 {
        return vec![
            format!("mcpdev tools list --device 02:00:00:00:00:01 --wait 5s{hub_flag}"),
            format!("mcpdev call self.audio_speaker.set_volume volume=50 --device 02:00:00:00:00:01{hub_flag}"),
        ];
    }
    vec![
        format!("mcpdev devices{hub_flag}                 # the devices connected, and their addresses"),
        format!("mcpdev tools list --wait 60s{hub_flag}   # the tools of the first device to connect (--device ID for one of several)"),
    ]
}

/// Which device events the hub reports by default: a device's life, not its traffic.
fn reported(event: &str) -> bool {
    matches!(event, "connected" | "ready" | "tools_changed" | "disconnected" | "warning") || event.contains("fail") || event.starts_with("onboarding")
}

/// Lifecycle events one device may put in the event log per [`crate::metrics::log_limit::WINDOW`];
/// the rest are summed up in one `suppressed` event.
pub const EVENTS_PER_WINDOW: u32 = 10;

/// What the event log held back of one device in a window: how many of each event, and the last.
#[derive(Debug, Default)]
struct Tally {
    counts: Vec<(&'static str, u64)>,
    last: &'static str,
}

impl Tally {
    fn add(&mut self, name: &'static str) {
        match self.counts.iter_mut().find(|(n, _)| *n == name) {
            Some((_, c)) => *c += 1,
            None => self.counts.push((name, 1)),
        }
        self.last = name;
    }
}

type EventLimiter = crate::metrics::log_limit::Limiter<std::sync::Arc<str>, Tally>;

/// The `suppressed` event that sums up what a device (or, with no `device_id`, the devices beyond
/// those followed one by one) did in a window beyond [`EVENTS_PER_WINDOW`]: `count` events,
/// `counts` by event, and `last`, the last of them (so a script that follows a device's state
/// knows it after a loop: `connected` or `disconnected`).
fn suppressed(h: &crate::metrics::log_limit::Held<std::sync::Arc<str>, Tally>) -> Value {
    let counts: serde_json::Map<String, Value> = h.tally.counts.iter().map(|(n, c)| ((*n).to_string(), Value::from(*c))).collect();
    let mut v = serde_json::json!({"device_id": h.key.as_deref(), "event": "suppressed", "count": h.count, "counts": counts, "last": h.tally.last, "window_s": h.over.as_secs().max(1)});
    if h.key.is_none() {
        v["beyond_followed"] = Value::from(crate::metrics::log_limit::MAX_KEYS);
    }
    v
}

/// The line written where the log stops reporting devices one by one: more devices had events in
/// a window than it follows ([`crate::metrics::log_limit::MAX_KEYS`]); theirs are counted and
/// summed up in a `suppressed` line without a `device_id` every window, and at the end.
fn not_followed() -> Value {
    let max = crate::metrics::log_limit::MAX_KEYS;
    serde_json::json!({"device_id": null, "event": "warning", "message": format!("more than {max} devices had events within {} s: the events of the devices beyond those {max} are not printed one by one from here, but counted, and summed up every {} s in a `suppressed` line (`beyond_followed`)", crate::metrics::log_limit::WINDOW.as_secs(), crate::metrics::log_limit::WINDOW.as_secs())})
}

/// Reports device lifecycle events until the hub's event channel closes: NDJSON on stdout with
/// `--json` (after the `listening` line), else one line each on stderr; nothing with `-q`.
///
/// The log is written from a thread of its own: a reader that stops reading the hub's stdout
/// blocks that thread only, never a runtime worker, and the events it misses meanwhile are
/// reported as one `lagged` line when it reads again. A device may put at most
/// [`EVENTS_PER_WINDOW`] events in it per window; the rest are summed up in one `suppressed`
/// line once the window is over (never silently lost), and counted in `/metrics`.
///
/// `events` was subscribed before any device could connect (the stack does it), and the log
/// starts after the `listening` line: a device that connects at once is reported from its first
/// event.
pub fn spawn_event_log(events: crate::links::ring::Receiver, json: bool, color: bool) {
    let spawned = std::thread::Builder::new().name("mcpdev-event-log".into()).spawn(move || {
        // A runtime of the thread's own, for its one timer (the summaries are due even when no
        // event comes).
        match tokio::runtime::Builder::new_current_thread().enable_time().build() {
            Ok(rt) => rt.block_on(write_event_log(events, json, color)),
            Err(e) => tracing::warn!("cannot start the event log: {e}; device events are not reported"),
        }
    });
    if let Err(e) = spawned {
        tracing::warn!("cannot start the event log: {e}; device events are not reported");
    }
}

async fn write_event_log(events: crate::links::ring::Receiver, json: bool, color: bool) {
    // Buffered, and flushed whenever no event is waiting: a fleet coming back at once is written
    // in a few large writes, not a write per event, and a single event is out at once.
    let out: Box<dyn std::io::Write> = if json { Box::new(std::io::BufWriter::new(std::io::stdout())) } else { Box::new(std::io::BufWriter::new(std::io::stderr())) };
    write_event_log_to(events, json, color, out).await
}

async fn write_event_log_to(mut events: crate::links::ring::Receiver, json: bool, color: bool, mut out: Box<dyn std::io::Write>) {
    use crate::links::ring::{RecvError, TryRecvError};
    use std::io::Write;
    // Whether the line that says the log stopped following devices one by one was written for the
    // current overflow (written again after the overflow's summary, if it comes back).
    let mut told_overflow = false;
    let mut limiter = EventLimiter::new(crate::metrics::log_limit::WINDOW, EVENTS_PER_WINDOW, crate::metrics::log_limit::MAX_KEYS);
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let line = |out: &mut Box<dyn Write>, mut v: Value, now: std::time::SystemTime| {
        if json {
            v["ts"] = Value::from(humantime::format_rfc3339_millis(now).to_string());
            writeln!(out, "{v}")
        } else {
            super::watch::stamp(&mut v, now);
            writeln!(out, "{}", super::watch::describe(&v, color))
        }
    };
    loop {
        let next = match events.try_recv() {
            Ok(ev) => Ok(ev),
            Err(TryRecvError::Lagged(n)) => Err(RecvError::Lagged(n)),
            Err(TryRecvError::Closed) => Err(RecvError::Closed),
            Err(TryRecvError::Empty) => {
                if let Err(e) = out.flush() {
                    tracing::debug!("the event log stopped: {e}");
                    return;
                }
                tokio::select! {
                    ev = events.recv() => ev,
                    _ = tick.tick() => {
                        let now = std::time::SystemTime::now();
                        for h in limiter.due(std::time::Instant::now()) {
                            told_overflow &= h.key.is_some();
                            if line(&mut out, suppressed(&h), now).is_err() {
                                return;
                            }
                        }
                        continue;
                    }
                }
            }
        };
        // Only lifecycle events are reported: the others (a device's notifications, say) are
        // not serialized at all.
        let now = std::time::SystemTime::now();
        let written = match next {
            Ok(ev) if !reported(ev.event.name()) => continue,
            Ok(ev) => {
                let name = ev.event.name();
                let (log, ended) = limiter.check(&ev.device_id, std::time::Instant::now(), |t| t.add(name));
                if let Some(h) = ended
                    && line(&mut out, suppressed(&h), now).is_err()
                {
                    return;
                }
                if !log {
                    crate::metrics::log_lines_suppressed(crate::metrics::log_limit::Kind::Event, 1);
                    if !told_overflow && !limiter.follows(&ev.device_id) {
                        told_overflow = true;
                        if line(&mut out, not_followed(), now).is_err() {
                            return;
                        }
                    }
                    continue;
                }
                if json {
                    // The JSON line is the event as the control API's `watch` sends it, with its
                    // time last, written straight from the event (no JSON tree per event).
                    match serde_json::to_string(&*ev) {
                        Ok(mut text) if text.ends_with('}') => {
                            text.pop();
                            writeln!(out, "{text},\"ts\":\"{}\"}}", humantime::format_rfc3339_millis(now))
                        }
                        _ => continue,
                    }
                } else {
                    line(&mut out, serde_json::to_value(&*ev).unwrap_or(Value::Null), now)
                }
            }
            Err(RecvError::Lagged(n)) => line(&mut out, serde_json::json!({"event": "lagged", "skipped": n}), now),
            Err(RecvError::Closed) => {
                // What is still held back is summed up now, not lost with the log.
                for h in limiter.due(std::time::Instant::now() + crate::metrics::log_limit::WINDOW) {
                    let _ = line(&mut out, suppressed(&h), now);
                }
                let _ = out.flush();
                return;
            }
        };
        // Whoever reads the log may go away (a closed pipe): the hub goes on without it.
        if let Err(e) = written {
            tracing::debug!("the event log stopped: {e}");
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_listener_is_labelled_by_who_reaches_it() {
        let (urls, who) = host_entry("http", "127.0.0.1:8001".parse().unwrap());
        assert_eq!(urls, vec!["http://127.0.0.1:8001".to_string()]);
        assert!(who.contains("this machine only"), "{who}");
        let (urls, who) = host_entry("https", "0.0.0.0:8001".parse().unwrap());
        assert!(!who.contains("this machine only") && who.contains("other machines"), "{who}");
        assert!(urls.iter().all(|u| u.starts_with("https://") && !u.contains("0.0.0.0")), "nobody connects to 0.0.0.0: {urls:?}");
        assert_eq!(urls.last().map(String::as_str), Some("https://127.0.0.1:8001"));
        let (_, who) = host_entry("http", "192.0.2.7:8001".parse().unwrap());
        assert!(who.contains("other machines"), "{who}");
    }

    #[test]
    fn devices_are_told_addresses_they_can_reach() {
        let bound: SocketAddr = "127.0.0.1:8000".parse().unwrap();
        assert_eq!(device_urls("ws", bound, "/xiaozhi/v1/"), ["ws://127.0.0.1:8000/xiaozhi/v1/"]);
        let every: SocketAddr = "0.0.0.0:8000".parse().unwrap();
        let urls = device_urls("ws", every, "/xiaozhi/v1/");
        assert!(!urls.iter().any(|u| u.contains("0.0.0.0")), "{urls:?}");
        assert_eq!(urls.last().map(String::as_str), Some("ws://127.0.0.1:8000/xiaozhi/v1/"), "loopback last: {urls:?}");
        assert!(urls.iter().all(|u| u.starts_with("ws://") && u.ends_with(":8000/xiaozhi/v1/")), "{urls:?}");
    }

    #[test]
    fn suggested_commands_name_a_hub_that_is_not_the_default() {
        assert_eq!(hub_flag("http://127.0.0.1:8001", "127.0.0.1:8001".parse().unwrap()), "");
        assert_eq!(hub_flag("https://127.0.0.1:8001", "127.0.0.1:8001".parse().unwrap()), " --hub https://127.0.0.1:8001");
        assert_eq!(hub_flag("http://127.0.0.1:9001", "127.0.0.1:9001".parse().unwrap()), " --hub http://127.0.0.1:9001");
        assert_eq!(hub_flag("http://0.0.0.0:9001", "0.0.0.0:9001".parse().unwrap()), " --hub http://127.0.0.1:9001");
    }

    /// A writer the test reads after the log ended.
    #[derive(Clone, Default)]
    struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Issue 46 item 8: past the devices the log follows one by one, it says so where it stops,
    /// and how many events it did not print, by event.
    #[tokio::test]
    async fn the_log_says_where_it_stops_following_devices_and_counts_the_rest() {
        use crate::links::handle::{DeviceEvent, LinkEvent};
        use crate::session::Event;
        let max = crate::metrics::log_limit::MAX_KEYS;
        let extra = 76;
        for json in [true, false] {
            let (tx, rx) = crate::links::ring::channel(4 * (max + extra), 64 << 20);
            for i in 0..max + extra {
                tx.send(std::sync::Arc::new(DeviceEvent { device_id: format!("02:00:00:00:{:02x}:{:02x}", i >> 8, i & 0xff).into(), event: LinkEvent::Session(Event::Ready { tools: 4 }) }));
            }
            drop(tx);
            let out = Shared::default();
            write_event_log_to(rx, json, false, Box::new(out.clone())).await;
            let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            let ready = lines.iter().filter(|l| l.contains("ready")).count();
            assert!(lines.len() == max + 2, "{} lines:\n{}", lines.len(), lines[max - 1..].join("\n"));
            // The line after the last one printed says why the others are not, in both formats.
            assert!(lines[max].contains(&format!("more than {max} devices had events")), "{}", lines[max]);
            assert!(ready >= max, "{ready}");
            let summary = lines[max + 1];
            if json {
                let v: Value = serde_json::from_str(summary).unwrap();
                assert_eq!((v["event"].as_str(), v["count"].as_u64(), v["counts"]["ready"].as_u64(), v["beyond_followed"].as_u64()), (Some("suppressed"), Some(extra as u64), Some(extra as u64), Some(max as u64)), "{summary}");
                assert!(v["device_id"].is_null());
            } else {
                assert!(summary.contains(&format!("({extra} more events not shown")) && summary.contains(&format!("{extra} ready")), "{summary}");
            }
        }
    }

    #[test]
    fn the_log_reports_lifecycle_not_traffic() {
        for e in ["connected", "ready", "disconnected", "warning", "onboarding_failed"] {
            assert!(reported(e), "{e}");
        }
        for e in ["traffic", "notification", "message", "hello", "late_reply"] {
            assert!(!reported(e), "{e}");
        }
    }
}
