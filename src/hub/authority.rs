//! `Host` and `Origin` read as what they are: an RFC 3986 authority (`Host = uri-host [":" port]`,
//! RFC 9110 §7.2; an `Origin` is `scheme "://" authority`, RFC 6454). The host listener's
//! DNS-rebinding and cross-site checks compare what this reads, never substrings of the header.
//!
//! The rules:
//! - **The whole value is one authority, or it is refused**: no userinfo (`user@`), no path,
//!   query or fragment, no whitespace or control characters, nothing after the port.
//! - The host is an IPv6 literal in brackets (no zone id such as `%25eth0`, no `IPvFuture`), a
//!   dotted-decimal IPv4 address, or a name of letters, digits, `-`, `_` and `.` in labels of 1 to
//!   63 characters (at most 253 in all; no percent-encoding). A name whose last label is numeric
//!   (`127.1`, `0x7f.1`, `2130706433`) is refused: browsers read those as IPv4 addresses.
//! - The port, when there is a `:`, is 1 to 5 digits and at most 65535.
//! - Names compare case-insensitively and without one trailing dot; an IPv4-mapped IPv6 address is
//!   its IPv4 address.

use std::net::{IpAddr, Ipv6Addr};

/// The host of an authority.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    Ip(IpAddr),
    /// A registered name, lower-case, without a trailing dot.
    Name(String),
}

/// A `Host` header's value, or an `Origin`'s authority, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authority {
    pub host: Host,
    pub port: Option<u16>,
}

impl Authority {
    /// `host[:port]` (RFC 3986 §3.2), or why it is not one.
    pub fn parse(s: &str) -> Result<Self, String> {
        if let Some(bad) = s.chars().find(|c| matches!(c, '@' | '/' | '?' | '#' | '\\') || c.is_whitespace() || c.is_control()) {
            return Err(format!("{bad:?} has no place in a host[:port]"));
        }
        let (host, port) = match s.strip_prefix('[') {
            Some(rest) => {
                let (literal, after) = rest.split_once(']').ok_or("an IPv6 address in [ ] is not closed")?;
                if literal.contains('%') {
                    return Err("an IPv6 zone id (%…) is not allowed".into());
                }
                let ip: Ipv6Addr = literal.parse().map_err(|_| format!("[{literal}] is not an IPv6 address"))?;
                let port = match after {
                    "" => None,
                    _ => Some(after.strip_prefix(':').ok_or_else(|| format!("{after:?} after [{literal}] is not :port"))?),
                };
                (Host::Ip(IpAddr::V6(ip).to_canonical()), port)
            }
            None => {
                let (name, port) = match s.split_once(':') {
                    Some((name, port)) => (name, Some(port)),
                    None => (s, None),
                };
                (host_name(name)?, port)
            }
        };
        let port = port.map(read_port).transpose()?;
        Ok(Self { host, port })
    }

    /// Whether the host is this machine: `localhost`, `127.0.0.0/8`, `::1` (or IPv4-mapped
    /// loopback).
    pub fn is_loopback(&self) -> bool {
        match &self.host {
            Host::Ip(ip) => ip.is_loopback(),
            Host::Name(n) => n == "localhost",
        }
    }

    /// Whether `self` is what an allowed entry (`name`, `name:port`, `[v6]`, a bare IPv6 address)
    /// names: the same host, and the same port when the entry gives one.
    pub fn matches(&self, allowed: &str) -> bool {
        let entry = Self::parse(allowed).or_else(|_| allowed.parse::<IpAddr>().map(|ip| Self { host: Host::Ip(ip.to_canonical()), port: None }));
        entry.is_ok_and(|e| e.host == self.host && e.port.is_none_or(|p| Some(p) == self.port))
    }

    /// The host as written in a URL (`[::1]`, `127.0.0.1`, `hub.lan`), for messages.
    pub fn host_text(&self) -> String {
        match &self.host {
            Host::Ip(IpAddr::V6(v6)) => format!("[{v6}]"),
            Host::Ip(IpAddr::V4(v4)) => v4.to_string(),
            Host::Name(n) => n.clone(),
        }
    }
}

/// An `Origin`'s scheme (lower-case) and authority: `scheme://host[:port]`, nothing after it.
pub fn origin(s: &str) -> Result<(String, Authority), String> {
    let (scheme, rest) = s.split_once("://").ok_or("an origin is scheme://host[:port]")?;
    if scheme.is_empty() || !scheme.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.')) {
        return Err(format!("{scheme:?} is not a scheme"));
    }
    Ok((scheme.to_ascii_lowercase(), Authority::parse(rest)?))
}

fn read_port(p: &str) -> Result<u16, String> {
    if p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{p:?} is not a port (1 to 5 digits)"));
    }
    p.parse().map_err(|_| format!("{p} is not a port (at most 65535)"))
}

fn host_name(name: &str) -> Result<Host, String> {
    if let Ok(ip) = name.parse::<std::net::Ipv4Addr>() {
        return Ok(Host::Ip(IpAddr::V4(ip)));
    }
    let lower = name.to_ascii_lowercase();
    let bare = lower.strip_suffix('.').unwrap_or(&lower);
    if bare.is_empty() || bare.len() > 253 {
        return Err(format!("{name:?} is not a host name (1 to 253 characters)"));
    }
    for label in bare.split('.') {
        if label.is_empty() || label.len() > 63 || !label.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_')) {
            return Err(format!("{name:?} is not a host name (labels of letters, digits, - and _, separated by dots)"));
        }
    }
    let last = bare.rsplit('.').next().unwrap_or(bare);
    if last.bytes().all(|b| b.is_ascii_digit()) || (last.starts_with("0x") && last[2..].bytes().all(|b| b.is_ascii_hexdigit())) {
        return Err(format!("{name:?} is neither a dotted IPv4 address nor a host name"));
    }
    Ok(Host::Name(bare.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_is_one_authority_and_nothing_else() {
        let loopback = ["127.0.0.1:8001", "localhost:8001", "LOCALHOST", "localhost.:8001", "[::1]:8001", "[::1]", "127.0.0.5", "[::ffff:127.0.0.1]:80", "[0:0:0:0:0:0:0:1]:1"];
        for ok in loopback {
            assert!(Authority::parse(ok).is_ok_and(|a| a.is_loopback()), "{ok}");
        }
        let junk = [
            "[::1].evil.example:8001",
            "[::1]evil:8001",
            "[::1]:8001.evil.example",
            "127.0.0.1:8001:8002",
            "127.0.0.1:80x",
            "127.0.0.1:",
            "127.0.0.1:65536",
            "127.0.0.1:999999",
            "127.0.0.1:+80",
            "evil@127.0.0.1:8001",
            "127.0.0.1@evil.example",
            "user:pw@localhost",
            "[fe80::1%25eth0]:8001",
            "[fe80::1%eth0]",
            "[v1.fe]:80",
            "[::1",
            "::1",
            "localhost/",
            "localhost:8001/x",
            "localhost?x",
            "localhost#x",
            "local host",
            "localhost\t",
            "",
            ":8001",
            "127.1",
            "0x7f.0.0.1",
            "2130706433",
            "127.0.0.01",
            "a..b",
            ".localhost",
            "l%6fcalhost",
        ];
        for bad in junk {
            assert!(Authority::parse(bad).is_err(), "{bad:?} was read as {:?}", Authority::parse(bad));
        }
        // Well-formed, and not this machine: a name that merely starts with a loopback one.
        for remote in ["evil.example:8001", "192.168.1.5:8001", "[2001:db8::1]:8001", "hub.lan", "my_host.lan", "127.0.0.1.evil.example:8001", "localhost.evil.example"] {
            assert!(Authority::parse(remote).is_ok_and(|a| !a.is_loopback()), "{remote}");
        }
    }

    #[test]
    fn allowed_entries_match_the_host_and_their_port() {
        let a = Authority::parse("Hub.LAN:8001").unwrap();
        assert!(a.matches("hub.lan") && a.matches("hub.lan:8001") && a.matches("hub.lan."));
        assert!(!a.matches("hub.lan:8002") && !a.matches("lan") && !a.matches("evil.hub.lan"));
        let v6 = Authority::parse("[fd00::1]:8001").unwrap();
        assert!(v6.matches("[fd00::1]") && v6.matches("fd00::1") && v6.matches("[fd00:0::1]:8001"));
        assert!(!Authority::parse("[fd00::1].evil:8001").is_ok_and(|a| a.matches("[fd00::1]")));
    }

    #[test]
    fn an_origin_is_a_scheme_and_an_authority() {
        assert_eq!(origin("http://localhost:6274").unwrap(), ("http".into(), Authority::parse("localhost:6274").unwrap()));
        assert_eq!(origin("HTTPS://[::1]").unwrap().0, "https");
        for bad in ["null", "http://[::1].evil.example", "http://localhost:6274/", "http://evil@localhost", "http:/localhost", "://localhost", "ht tp://localhost"] {
            assert!(origin(bad).is_err(), "{bad}");
        }
    }
}
