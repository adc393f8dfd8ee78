//! The hub URL, one of:
//! - `ws://host[:port][/path][?query]` (or `wss://`): the hub's WebSocket device endpoint;
//! - `mqtt://host[:port]` (or `mqtts://`): a broker, reached with mcpdev's topic scheme;
//! - `http://host[:port]/path` (or `https://`): an OTA endpoint, asked where to connect the way
//!   stock xiaozhi devices do (`/xiaozhi/ota/`).
//!
//! Just enough of URL syntax for a client on a microcontroller: no user info, no fragments, IPv6
//! literals in brackets. Both the decoder (to refuse a record the firmware could not use) and the
//! firmware (to connect) parse with this.

/// The URL's scheme; the `…s` ones name TLS, which the firmware refuses with a clear log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Ws,
    Wss,
    Mqtt,
    Mqtts,
    Http,
    Https,
}

impl Scheme {
    const ALL: [(Scheme, &'static str, u16); 6] = [
        (Scheme::Ws, "ws://", 80),
        (Scheme::Wss, "wss://", 443),
        (Scheme::Mqtt, "mqtt://", 1883),
        (Scheme::Mqtts, "mqtts://", 8883),
        (Scheme::Http, "http://", 80),
        (Scheme::Https, "https://", 443),
    ];

    /// Whether the scheme asks for TLS.
    pub fn is_tls(self) -> bool {
        matches!(self, Scheme::Wss | Scheme::Mqtts | Scheme::Https)
    }

    fn default_port(self) -> u16 {
        Self::ALL.iter().find(|(s, _, _)| *s == self).map_or(80, |(_, _, port)| *port)
    }
}

/// A parsed hub URL, borrowing the text it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HubUrl<'a> {
    pub scheme: Scheme,
    /// Host name or IP literal (IPv6 without its brackets).
    pub host: &'a str,
    /// The explicit port, or 80 / 443 by scheme.
    pub port: u16,
    /// Whether the URL named the port (then the `Host` header carries it).
    pub explicit_port: bool,
    /// Path and query, at least `/`.
    pub path: &'a str,
}

/// Why a URL was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UrlError {
    /// Not one of the schemes above.
    Scheme,
    /// Empty host, user info, or characters that do not belong in a host.
    Host,
    /// A port that is not a number in 1..=65535.
    Port,
    /// Spaces, control characters or a fragment.
    Path,
}

impl UrlError {
    pub fn as_str(self) -> &'static str {
        match self {
            UrlError::Scheme => "the URL must start with ws:// (the hub), mqtt:// (a broker) or http:// (an OTA endpoint)",
            UrlError::Host => "the URL has no valid host",
            UrlError::Port => "the URL's port must be a number from 1 to 65535",
            UrlError::Path => "the URL's path has spaces, control characters or a fragment",
        }
    }
}

impl core::fmt::Display for UrlError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<'a> HubUrl<'a> {
    pub fn parse(url: &'a str) -> Result<Self, UrlError> {
        let (scheme, rest) = Scheme::ALL
            .iter()
            .find_map(|(scheme, prefix, _)| strip_prefix_ignore_case(url, prefix).map(|rest| (*scheme, rest)))
            .ok_or(UrlError::Scheme)?;
        let split = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(split);
        if path.bytes().any(|b| b <= b' ' || b == 0x7f || b == b'#') {
            return Err(UrlError::Path);
        }
        let path = if path.is_empty() { "/" } else { path };
        if path.starts_with('?') {
            // `ws://host?x`: an HTTP request target must start with `/`; ask for `ws://host/?x`.
            return Err(UrlError::Path);
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let end = v6.find(']').ok_or(UrlError::Host)?;
            let host = &v6[..end];
            if host.is_empty() || !host.bytes().all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.') {
                return Err(UrlError::Host);
            }
            let after = &v6[end + 1..];
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':').ok_or(UrlError::Port)?),
            };
            (host, port)
        } else {
            match authority.rfind(':') {
                Some(i) => (&authority[..i], Some(&authority[i + 1..])),
                None => (authority, None),
            }
        };
        let host_ok = !host.is_empty()
            && host.len() <= 253
            && (host.contains(':') || host.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_')));
        if !host_ok {
            return Err(UrlError::Host);
        }
        let (port, explicit_port) = match port {
            None => (scheme.default_port(), false),
            Some(p) => (parse_port(p).ok_or(UrlError::Port)?, true),
        };
        Ok(HubUrl { scheme, host, port, explicit_port, path })
    }
}

fn parse_port(p: &str) -> Option<u16> {
    if p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    p.parse::<u16>().ok().filter(|p| *p != 0)
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then(|| &s[prefix.len()..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_usual_hub_urls() {
        let u = HubUrl::parse("ws://192.168.1.20:8000/xiaozhi/v1/").unwrap();
        assert_eq!(
            u,
            HubUrl { scheme: Scheme::Ws, host: "192.168.1.20", port: 8000, explicit_port: true, path: "/xiaozhi/v1/" }
        );
        let u = HubUrl::parse("WS://hub.example").unwrap();
        assert_eq!((u.host, u.port, u.explicit_port, u.path), ("hub.example", 80, false, "/"));
        let u = HubUrl::parse("wss://hub.example/x?device=1").unwrap();
        assert_eq!((u.scheme, u.port, u.path), (Scheme::Wss, 443, "/x?device=1"));
        let u = HubUrl::parse("ws://[fe80::1]:81/a").unwrap();
        assert_eq!((u.host, u.port), ("fe80::1", 81));
    }

    #[test]
    fn parses_broker_and_ota_urls() {
        let u = HubUrl::parse("mqtt://192.168.1.20").unwrap();
        assert_eq!((u.scheme, u.host, u.port, u.explicit_port, u.path), (Scheme::Mqtt, "192.168.1.20", 1883, false, "/"));
        let u = HubUrl::parse("MQTTS://broker.example:8884").unwrap();
        assert_eq!((u.scheme, u.port, u.scheme.is_tls()), (Scheme::Mqtts, 8884, true));
        let u = HubUrl::parse("http://hub.local:8000/xiaozhi/ota/").unwrap();
        assert_eq!((u.scheme, u.port, u.path, u.scheme.is_tls()), (Scheme::Http, 8000, "/xiaozhi/ota/", false));
        assert_eq!(HubUrl::parse("https://hub/ota/").unwrap().port, 443);
    }

    #[test]
    fn refuses_what_the_firmware_could_not_use() {
        assert_eq!(HubUrl::parse("ftp://hub/"), Err(UrlError::Scheme));
        assert_eq!(HubUrl::parse("mqtt://user@hub/"), Err(UrlError::Host));
        assert_eq!(HubUrl::parse("ws:///x"), Err(UrlError::Host));
        assert_eq!(HubUrl::parse("ws://user@hub/"), Err(UrlError::Host));
        assert_eq!(HubUrl::parse("ws://hub:0/"), Err(UrlError::Port));
        assert_eq!(HubUrl::parse("ws://hub:65536/"), Err(UrlError::Port));
        assert_eq!(HubUrl::parse("ws://hub:/"), Err(UrlError::Port));
        assert_eq!(HubUrl::parse("ws://hub/a b"), Err(UrlError::Path));
        assert_eq!(HubUrl::parse("ws://hub/a#frag"), Err(UrlError::Path));
        assert_eq!(HubUrl::parse("ws://[zz]/"), Err(UrlError::Host));
    }
}
