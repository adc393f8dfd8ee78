//! Who a connecting device is: `Device-Id`, `Client-Id`, `Authorization`, `Protocol-Version`,
//! from the handshake headers or, for browsers that cannot set headers, from the query string.
//!
//! An identity field is refused at the door when it carries a control character (C0, DEL, C1)
//! or a bidi control ([`is_control_text`]), after percent-decoding: a peer that needs no
//! credential to be listed (a refused WebSocket, an OTA check-in) must not be able to write on
//! the terminal of the person reading `devices pending`. A Client-Id is at most
//! [`MAX_CLIENT_ID`] bytes. [`check_fields`] is the one check, for every listener.

use std::collections::HashMap;

/// A device's identity as it connected.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Identity {
    /// Lower-case MAC `aa:bb:cc:dd:ee:ff`.
    pub device_id: String,
    pub client_id: Option<String>,
    /// The bearer token, if any (an empty `Bearer ` is normal when auth is off).
    #[serde(skip)]
    pub token: Option<String>,
    /// Binary protocol version 1, 2 or 3 (1 when absent).
    pub protocol_version: u8,
}

/// Why an identity could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    #[error("no Device-Id header or device-id query parameter")]
    MissingDeviceId,
    #[error("Device-Id {0:?} is not a MAC address like aa:bb:cc:dd:ee:ff")]
    BadDeviceId(String),
    #[error("Protocol-Version {0:?} is not 1, 2 or 3")]
    BadProtocolVersion(String),
    #[error("{field} contains a control character ({code} at character {at}); identities are printable text")]
    ControlCharacter { field: &'static str, code: String, at: usize },
    #[error("{field} is {len} bytes long; at most {MAX_CLIENT_ID} are taken")]
    TooLong { field: &'static str, len: usize },
}

/// Longest Client-Id taken (the stock firmware's is a 36-character UUID).
pub const MAX_CLIENT_ID: usize = 128;

/// Whether `c` is a character no identity may carry and no terminal may be sent raw: C0, DEL, C1,
/// the bidi controls (U+061C, U+200E/F, U+202A–U+202E, U+2066–U+2069) and the line and paragraph
/// separators U+2028/U+2029.
pub fn is_control_text(c: char) -> bool {
    c.is_control() || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}')
}

/// Refuses an identity field (`(name, value)`, `None` when absent) with a control character in
/// it, and a Client-Id (or OTA `uuid`) longer than [`MAX_CLIENT_ID`]. The error names the field
/// and the character (as `U+001B`), never the raw value.
pub fn check_fields<'a>(fields: impl IntoIterator<Item = (&'static str, Option<&'a str>)>) -> Result<(), IdentityError> {
    for (field, value) in fields {
        let Some(value) = value else { continue };
        if let Some((at, c)) = value.chars().enumerate().find(|(_, c)| is_control_text(*c)) {
            return Err(IdentityError::ControlCharacter { field, code: format!("U+{:04X}", c as u32), at });
        }
        if matches!(field, "Client-Id" | "uuid") && value.len() > MAX_CLIENT_ID {
            return Err(IdentityError::TooLong { field, len: value.len() });
        }
    }
    Ok(())
}

/// Reads the identity. `header` looks a header up case-insensitively; `query` is the raw query
/// string (`device-id=…&client-id=…&authorization=…`). Headers win over the query.
pub fn identify<'a>(header: impl Fn(&str) -> Option<&'a str>, query: Option<&str>) -> Result<Identity, IdentityError> {
    let q: HashMap<String, String> = query
        .map(|q| {
            q.split('&')
                .filter_map(|kv| kv.split_once('=').or(Some((kv, ""))))
                .map(|(k, v)| (percent_decode(k).to_ascii_lowercase(), percent_decode(v)))
                .collect()
        })
        .unwrap_or_default();
    let get = |h: &str, qk: &str| header(h).map(str::to_string).or_else(|| q.get(qk).cloned());
    let client_id = get("client-id", "client-id").filter(|s| !s.is_empty());
    check_fields([("Device-Id", get("device-id", "device-id").as_deref()), ("Client-Id", client_id.as_deref())])?;
    let raw_id = get("device-id", "device-id").filter(|s| !s.is_empty()).ok_or(IdentityError::MissingDeviceId)?;
    let mac = parse_mac(&raw_id).map_err(|_| IdentityError::BadDeviceId(raw_id.clone()))?;
    let token = get("authorization", "authorization").map(|a| bearer_token(&a)).filter(|t| !t.is_empty());
    let protocol_version = match get("protocol-version", "protocol-version") {
        None => 1,
        Some(v) => match v.trim().parse::<u8>() {
            Ok(0) => 1,
            Ok(n @ 1..=3) => n,
            _ => return Err(IdentityError::BadProtocolVersion(v)),
        },
    };
    Ok(Identity {
        device_id: format_mac(&mac),
        client_id,
        token,
        protocol_version,
    })
}

/// `Bearer abc` -> `abc`; anything else is taken verbatim (trimmed).
pub fn bearer_token(authorization: &str) -> String {
    let a = authorization.trim();
    match a.split_once(' ') {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("bearer") => rest.trim().to_string(),
        _ if a.eq_ignore_ascii_case("bearer") => String::new(),
        _ => a.to_string(),
    }
}

/// Parses `aa:bb:cc:dd:ee:ff` (also with `-` or `_` separators, any case).
pub fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let parts: Vec<&str> = s.trim().split([':', '-', '_']).collect();
    let bad = || format!("{s:?} is not a MAC address like aa:bb:cc:dd:ee:ff");
    if parts.len() != 6 {
        return Err(bad());
    }
    let mut mac = [0u8; 6];
    for (b, p) in mac.iter_mut().zip(parts) {
        if p.len() != 2 {
            return Err(bad());
        }
        *b = u8::from_str_radix(p, 16).map_err(|_| bad())?;
    }
    Ok(mac)
}

pub fn format_mac(m: &[u8; 6]) -> String {
    format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
}

fn percent_decode(s: &str) -> String {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let decoded = match bytes[i] {
            b'%' if i + 2 < bytes.len() => hex(bytes[i + 1]).zip(hex(bytes[i + 2])).map(|(h, l)| h << 4 | l),
            _ => None,
        };
        match decoded {
            Some(b) => {
                out.push(b);
                i += 3;
            }
            None => {
                out.push(if bytes[i] == b'+' { b' ' } else { bytes[i] });
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_win_over_query_and_mac_is_normalised() {
        let headers = [("device-id", "AA-BB-CC-DD-EE-01"), ("authorization", "Bearer  tok "), ("protocol-version", "3")];
        let h = |k: &str| headers.iter().find(|(n, _)| *n == k).map(|(_, v)| *v);
        let id = identify(h, Some("device-id=11:22:33:44:55:66&client-id=c%2D1")).unwrap();
        assert_eq!(id.device_id, "aa:bb:cc:dd:ee:01");
        assert_eq!(id.client_id.as_deref(), Some("c-1"));
        assert_eq!(id.token.as_deref(), Some("tok"));
        assert_eq!(id.protocol_version, 3);
    }

    #[test]
    fn query_only_identity_and_empty_bearer() {
        let id = identify(|_| None, Some("device-id=aa%3Abb%3Acc%3Add%3Aee%3Aff&authorization=Bearer%20")).unwrap();
        assert_eq!(id.device_id, "aa:bb:cc:dd:ee:ff");
        assert_eq!(id.token, None);
        assert_eq!(id.protocol_version, 1);
    }

    #[test]
    fn errors_say_what_is_wrong() {
        assert_eq!(identify(|_| None, None), Err(IdentityError::MissingDeviceId));
        let h = |k: &str| (k == "device-id").then_some("not-a-mac");
        assert_eq!(identify(h, None), Err(IdentityError::BadDeviceId("not-a-mac".into())));
        let h = |k: &str| match k {
            "device-id" => Some("aa:bb:cc:dd:ee:ff"),
            "protocol-version" => Some("9"),
            _ => None,
        };
        assert_eq!(identify(h, None), Err(IdentityError::BadProtocolVersion("9".into())));
    }

    #[test]
    fn control_characters_in_identity_are_refused_however_spelled() {
        let mac = "aa:bb:cc:dd:ee:ff";
        for query in [
            format!("device-id={mac}&client-id=%1b%5b2J"),
            format!("device-id={mac}&client-id=ok%0d%1b[2K"),
            format!("device-id={mac}&client-id=%E2%80%AEevil"),
            format!("device-id={mac}&client-id=%C2%9B31m"),
            format!("device-id={mac}&client-id=a%7f"),
            "device-id=aa:bb:cc:dd:ee:ff%1b".to_string(),
        ] {
            let err = identify(|_| None, Some(&query)).unwrap_err();
            assert!(matches!(err, IdentityError::ControlCharacter { .. }), "{query}: {err:?}");
            assert!(!err.to_string().chars().any(is_control_text), "the message carries no control: {err}");
        }
        let h = |k: &str| (k == "client-id").then_some("fine\u{202e}");
        let err = identify(h, Some(&format!("device-id={mac}"))).unwrap_err();
        assert_eq!(err.to_string(), "Client-Id contains a control character (U+202E at character 4); identities are printable text");
        let long = "c".repeat(MAX_CLIENT_ID + 1);
        assert!(matches!(identify(|_| None, Some(&format!("device-id={mac}&client-id={long}"))), Err(IdentityError::TooLong { .. })));
        // What real devices send still passes: a UUID, a MAC, spaces, and non-ASCII letters.
        let ok = identify(|_| None, Some(&format!("device-id={mac}&client-id=7d4e3f9a-1c2b-4a5d-9e8f-0a1b2c3d4e5f"))).unwrap();
        assert_eq!(ok.client_id.as_deref(), Some("7d4e3f9a-1c2b-4a5d-9e8f-0a1b2c3d4e5f"));
        assert!(check_fields([("uuid", Some("客户端 1")), ("Client-Id", None)]).is_ok());
    }
}
