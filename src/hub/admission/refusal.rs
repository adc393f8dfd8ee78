//! Why a device was not let in, and the refusal log that one peer cannot flood.
//!
//! - Every [`Refusal`]'s `Display` says what to do next.
//! - [`LogLimit`]: refusal lines per peer address, through the hub's one limiter
//!   ([`crate::metrics::log_limit`]): a few per window, the rest summed up and counted.

use std::net::IpAddr;
use std::time::Duration;

/// One refusal log line per peer address in this window (the rest are counted).
pub const LOG_WINDOW: Duration = Duration::from_secs(10);

/// Why a device was not let in; its `Display` says what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Not approved (yet): approve it with the code or its Device-Id.
    NotAdmitted { device_id: String, code: Option<String> },
    /// Approved, but it sent no token.
    NoToken { device_id: String },
    /// Approved, but the token is not this device's token.
    WrongToken { device_id: String },
    /// Its approval was withdrawn (`mcpdev devices revoke`); only a new approval lets it in.
    Revoked { device_id: String },
    /// Too many requests for admission, from this address or its network or in all: try again
    /// later (HTTP 429 with `Retry-After`).
    Busy { retry_after_s: u64, cap: Crowded },
    /// Another device has this Device-Id: one of the hub's own virtual devices (`resident`), or
    /// one connected now with its token. The advice never breaks that device.
    Taken { device_id: String, resident: bool },
}

/// Which cap a refused request for admission met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Crowded {
    /// Its address asks too fast.
    Rate,
    /// Its network (the /24 or /64) holds as many requests as it may, one per address.
    Network,
    /// The hub holds as many requests as it keeps, one per address.
    Full,
}

impl Refusal {
    /// For a refusal that a later try may not meet ([`Refusal::Busy`]): when to try again.
    pub fn retry_after_s(&self) -> Option<u64> {
        match self {
            Refusal::Busy { retry_after_s, .. } => Some(*retry_after_s),
            _ => None,
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::NotAdmitted { device_id, code: Some(code) } => write!(
                f,
                "device {device_id} is not admitted (no device token is accepted for it yet): approve it with `mcpdev devices approve {code}` (the code this device was given), then give the device the token that prints"
            ),
            Refusal::NotAdmitted { device_id, code: None } => {
                write!(f, "device {device_id} is not admitted (no device token is accepted for it yet): approve it with `mcpdev devices approve {device_id}`")
            }
            Refusal::NoToken { device_id } => write!(
                f,
                "device {device_id} sent no token: send its own token as `Authorization: Bearer <token>` (its OTA check-in hands it out; `mcpdev devices approve {device_id} --rebind` prints a new one)"
            ),
            Refusal::WrongToken { device_id } => write!(
                f,
                "the token is not this device's current token (device {device_id}); each device has its own, and a new approval replaces it: `mcpdev devices approve {device_id} --rebind` prints a new one"
            ),
            Refusal::Revoked { device_id } => write!(
                f,
                "device {device_id} was revoked: it gets in again only after a new approval (`mcpdev devices pending`, then `mcpdev devices approve CODE`)"
            ),
            Refusal::Busy { retry_after_s, cap: Crowded::Rate } => {
                write!(f, "too many admission requests from this address: try again in {retry_after_s} s")
            }
            Refusal::Taken { device_id, resident: true } => write!(
                f,
                "Device-Id {device_id} is one of this hub's own virtual devices (serve --demo); this is another device with the same Device-Id: give it its own (`mcpdev sim --device-id 02:…`, or leave --device-id out for a free one)"
            ),
            Refusal::Taken { device_id, resident: false } => write!(
                f,
                "Device-Id {device_id} belongs to a device connected to this hub now, with its token; this is another device with the same Device-Id: give it its own (`mcpdev sim --device-id 02:…`). Only if this is that very device, reset, and the connected one is gone for good: `mcpdev devices approve {device_id} --rebind` prints a new token (the old one stops working)"
            ),
            Refusal::Busy { retry_after_s, cap: Crowded::Network } => write!(
                f,
                "too many devices of this network (its /24 or /64) wait for approval: try again in {retry_after_s} s; the hub's owner can approve or deny them (`mcpdev devices pending`)"
            ),
            Refusal::Busy { retry_after_s, cap: Crowded::Full } => write!(
                f,
                "the hub holds as many admission requests as it keeps: try again in {retry_after_s} s; the hub's owner can approve or deny them (`mcpdev devices pending`), or approve this device by its Device-Id"
            ),
        }
    }
}

/// Refusal lines per peer address, through the hub's one limiter of lines a peer can trigger
/// ([`crate::metrics::log_limit`]: a few per address per window, the rest summed up and counted).
#[derive(Default)]
pub struct LogLimit;

impl LogLimit {
    /// `Some(0)` when a line about `remote` may be logged now (what is held back is summed up by
    /// the limiter, not counted here).
    pub fn may_log(&mut self, remote: Option<IpAddr>) -> Option<u64> {
        let Some(ip) = remote else { return Some(0) };
        crate::metrics::log_limit::allow(crate::metrics::log_limit::Kind::Refusal, &ip.to_string()).then_some(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_gets_a_few_lines_per_window_and_another_peer_its_own() {
        let mut log = LogLimit;
        let a: IpAddr = "10.213.0.1".parse().unwrap();
        let b: IpAddr = "10.213.0.2".parse().unwrap();
        let logged = (0..100).filter(|_| log.may_log(Some(a)).is_some()).count();
        assert_eq!(logged, crate::metrics::log_limit::PER_WINDOW as usize);
        assert_eq!(log.may_log(Some(b)), Some(0), "another peer is not held back by the first");
        assert_eq!(log.may_log(None), Some(0));
    }
}
