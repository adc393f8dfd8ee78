//! Who opened what: every long-lived thing the host listener serves is tied to the credential
//! that opened it, and ends at once when that credential is revoked.
//!
//! Rules it enforces:
//! - **One lease per opening.** A request that proved a credential ([`super::bearer`], or a
//!   dashboard session cookie) gets a [`Lease`]: a cancellation token that is cancelled when that
//!   credential stops being valid. Everything the request opens that outlives it (a dashboard
//!   traffic stream, a control API connection and its watches, an `/mcp` or `/sse` session, an
//!   MCP task) waits on its lease and ends the moment it is cancelled; nothing polls.
//! - **What cancels a lease**, per credential:
//!   - a remote token: its revocation (`mcpdev remote-token revoke`), seen within a second by the
//!     hub's watch of the token file ([`super::remote_tokens::RemoteTokens::lease`]); a token file
//!     others can read, which makes the hub accept no remote token, cancels every one;
//!   - a dashboard session: log-out, its eviction or expiry, and the revocation of the remote
//!     token that asked for its link (its lease is a child of that token's);
//!   - the control token and `MCPDEV_MCP_TOKEN`: neither can be revoked while the hub runs (the
//!     control token is new each run and only this machine's user reads it; the MCP token is
//!     read once at start), so their leases last the hub's run, and a restart ends everything.
//! - **A principal is who a cap counts on, and who owns a task** ([`Principal`]): a person (by
//!   their remote token), the hub's own user (the control token, or a loopback peer on a hub that
//!   needs no token), or the holders of the one shared MCP token, who are told apart only by
//!   their address.

use std::net::IpAddr;
use std::sync::Arc;

use super::Hub;
use super::bearer::Credential;
pub use super::lease::Lease;

/// The lease of a request that proved `credential` (`None`: no token, which only a hub that asks
/// for none lets through, on loopback).
pub fn lease(hub: &Hub, credential: Option<&Credential>) -> Lease {
    match credential {
        Some(Credential::Remote(holder)) => hub.remote_tokens.lease(holder),
        // One lease for every request of these (nothing cancels it): no allocation per request
        // on the hot path (`/mcp` calls).
        Some(Credential::Control | Credential::Extra) | None => {
            static RUN: std::sync::LazyLock<Lease> = std::sync::LazyLock::new(Lease::for_the_run);
            RUN.clone()
        }
    }
}

/// Who a cap counts on and who owns what a request makes (see the module's rules).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Principal {
    /// The hub's own user: the control token, or no token on a hub that needs none.
    Owner,
    /// A person, by the id of their remote token ([`super::remote_tokens::Entry::id`]).
    Person(Arc<str>),
    /// A holder of the shared MCP token, at this address (an IPv4 address, an IPv6 /64): the
    /// token does not tell its holders apart.
    SharedToken(IpAddr),
}

impl Principal {
    /// The principal of a request from `peer` that proved `credential`.
    pub fn of(credential: Option<&Credential>, peer: IpAddr) -> Self {
        match credential {
            Some(Credential::Remote(holder)) => Self::Person(holder.id.as_str().into()),
            Some(Credential::Extra) => Self::SharedToken(super::guesses::key(peer)),
            Some(Credential::Control) | None => Self::Owner,
        }
    }

    /// As another hub of the cluster is told it: `owner`, `person:<id>`, `shared:<address>`.
    pub fn to_wire(&self) -> String {
        match self {
            Self::Owner => "owner".to_string(),
            Self::Person(id) => format!("person:{id}"),
            Self::SharedToken(ip) => format!("shared:{ip}"),
        }
    }

    /// Reads [`Self::to_wire`] back; `None` for anything else.
    pub fn from_wire(text: &str) -> Option<Self> {
        if text == "owner" {
            return Some(Self::Owner);
        }
        if let Some(id) = text.strip_prefix("person:") {
            return (!id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_hexdigit())).then(|| Self::Person(id.into()));
        }
        text.strip_prefix("shared:").and_then(|ip| ip.parse::<IpAddr>().ok()).map(|ip| Self::SharedToken(super::guesses::key(ip)))
    }

    /// How logs and refusals name it (never a secret: a token's id is the start of its hash).
    pub fn describe(&self) -> String {
        match self {
            Self::Owner => "the hub's own user".to_string(),
            Self::Person(id) => format!("remote token {id}"),
            Self::SharedToken(ip) => format!("the MCP token from {ip}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principals_round_trip_and_junk_names_none() {
        for p in [Principal::Owner, Principal::Person("0123456789ab".into()), Principal::SharedToken("10.0.0.7".parse().unwrap())] {
            assert_eq!(Principal::from_wire(&p.to_wire()), Some(p.clone()), "{p:?}");
        }
        // The holders of the shared token at one IPv6 /64 are one principal.
        assert_eq!(Principal::from_wire("shared:2001:db8::9"), Some(Principal::SharedToken("2001:db8::".parse().unwrap())));
        for junk in ["", "person:", "person:zz", "person:../x", "shared:nope", "Owner", "10.0.0.7"] {
            assert_eq!(Principal::from_wire(junk), None, "{junk:?}");
        }
    }
}
