//! The path rules of RFC 5280 (§4.2.1 and §6.1) for a chain the provisioned CA signed: what a
//! CA may sign, and what a server's certificate must be. openssl refuses a chain that breaks one
//! of them; so does the firmware, even when the provisioned CA's key signed it (a person's own CA
//! may issue more than the hub's certificate).
//!
//! Rules it enforces (each refusal has its own [`Refusal`]):
//! - The leaf is no CA ([`Refusal::LeafIsCa`]); with an `extKeyUsage`, it includes serverAuth
//!   ([`Refusal::NotForServerAuth`]; `anyExtendedKeyUsage` alone is not taken for it).
//! - Every CA above the leaf, the provisioned one included:
//!   - with a `pathLenConstraint` of n, has at most n intermediate CAs below it
//!     ([`Refusal::PathTooLong`]);
//!   - with a `keyUsage`, allows keyCertSign ([`Refusal::NotForSigning`]);
//!   - with `nameConstraints`, permits every dNSName and iPAddress of every certificate below it
//!     and excludes none ([`Refusal::NameConstraints`]). A constraint on another kind of name, or
//!     with a minimum or maximum (which RFC 5280 forbids), cannot be checked here and is refused.
//! - An intermediate CA with an `extKeyUsage` includes serverAuth (its purposes bound the
//!   leaf's, as openssl and webpki hold).

use super::x509::{Cert, Der, OID, Refusal, SEQUENCE};

/// serverAuth (1.3.6.1.5.5.7.3.1).
const SERVER_AUTH: &[u8] = &[0x2B, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x01];
/// keyUsage's keyCertSign bit.
const KEY_CERT_SIGN: u16 = 1 << 5;
/// GeneralName tags: dNSName [2] and iPAddress [7] (IMPLICIT, primitive).
const DNS_NAME: u8 = 0x82;
const IP_ADDRESS: u8 = 0x87;

/// What the leaf must be: a server's certificate, not a CA's.
pub(super) fn check_leaf(leaf: &Cert<'_>) -> Result<(), Refusal> {
    if leaf.is_ca {
        return Err(Refusal::LeafIsCa);
    }
    server_auth_allowed(leaf)
}

/// What `issuer` must allow for the certificates `below` it (the leaf first, then the
/// intermediates up to it). `anchor`: the provisioned CA, whose own purposes are not checked.
pub(super) fn check_issuer(issuer: &Cert<'_>, below: &[Cert<'_>], anchor: bool) -> Result<(), Refusal> {
    let intermediates = below.len().saturating_sub(1) as u64;
    if issuer.path_len.is_some_and(|n| intermediates > n) {
        return Err(Refusal::PathTooLong);
    }
    if issuer.key_usage.is_some_and(|bits| bits & KEY_CERT_SIGN == 0) {
        return Err(Refusal::NotForSigning);
    }
    if !anchor {
        server_auth_allowed(issuer)?;
    }
    if let Some(constraints) = issuer.name_constraints {
        for cert in below {
            names_permitted(constraints, cert.alt_names)?;
        }
    }
    Ok(())
}

/// With an `extKeyUsage`, serverAuth must be among its purposes.
fn server_auth_allowed(cert: &Cert<'_>) -> Result<(), Refusal> {
    let Some(purposes) = cert.ext_key_usage else { return Ok(()) };
    let mut purposes = Der::new(purposes);
    while !purposes.is_empty() {
        if purposes.expect(OID)? == SERVER_AUTH {
            return Ok(());
        }
    }
    Err(Refusal::NotForServerAuth)
}

/// Every dNSName and iPAddress of `alt_names` against `NameConstraints` (its value).
fn names_permitted(constraints: &[u8], alt_names: &[u8]) -> Result<(), Refusal> {
    let mut nc = Der::new(constraints);
    let permitted = nc.optional(0xA0)?;
    let excluded = nc.optional(0xA1)?;
    if !nc.is_empty() || (permitted.is_none() && excluded.is_none()) {
        return Err(Refusal::Malformed);
    }
    // Every subtree must be one this firmware can check, whether or not a name meets it.
    for subtrees in [permitted, excluded].into_iter().flatten() {
        subtree_bases(subtrees, |_, _| Ok(false))?;
    }
    let mut names = Der::new(alt_names);
    while !names.is_empty() {
        let (tag, name, _) = names.next()?;
        if tag != DNS_NAME && tag != IP_ADDRESS {
            continue;
        }
        if let Some(excluded) = excluded
            && subtree_bases(excluded, |t, base| Ok(t == tag && within(tag, base, name)))?
        {
            return Err(Refusal::NameConstraints);
        }
        if let Some(permitted) = permitted {
            let mut of_this_kind = false;
            let inside = subtree_bases(permitted, |t, base| {
                of_this_kind |= t == tag;
                Ok(t == tag && within(tag, base, name))
            })?;
            // Constraints bind only the kinds of name they list (§4.2.1.10).
            if of_this_kind && !inside {
                return Err(Refusal::NameConstraints);
            }
        }
    }
    Ok(())
}

/// Calls `found(tag, base)` for each GeneralSubtree of `subtrees` until it returns true; whether
/// one did. A base of another kind than dNSName or iPAddress, or a minimum or maximum, is refused.
fn subtree_bases(subtrees: &[u8], mut found: impl FnMut(u8, &[u8]) -> Result<bool, Refusal>) -> Result<bool, Refusal> {
    let mut list = Der::new(subtrees);
    if list.is_empty() {
        return Err(Refusal::Malformed);
    }
    let mut any = false;
    while !list.is_empty() {
        let mut subtree = Der::new(list.expect(SEQUENCE)?);
        let (tag, base, _) = subtree.next()?;
        if !subtree.is_empty() || (tag != DNS_NAME && tag != IP_ADDRESS) {
            return Err(Refusal::NameConstraints);
        }
        if tag == IP_ADDRESS && base.len() != 8 && base.len() != 32 {
            return Err(Refusal::Malformed);
        }
        if !any && found(tag, base)? {
            any = true;
        }
    }
    Ok(any)
}

/// Whether `name` (a dNSName or an iPAddress, by `tag`) lies within the subtree `base`.
fn within(tag: u8, base: &[u8], name: &[u8]) -> bool {
    if tag == IP_ADDRESS {
        // An address and a mask, for an address of the same family.
        let (addr, mask) = base.split_at(base.len() / 2);
        return name.len() == addr.len() && name.iter().zip(addr).zip(mask).all(|((n, a), m)| n & m == a & m);
    }
    dns_within(base, name)
}

/// A dNSName within a DNS constraint: the constraint itself or a name below it (`example.com`
/// covers `example.com` and `hub.example.com`, not `badexample.com`; `.example.com` only names
/// below it; an empty constraint covers every name). Case-insensitive.
fn dns_within(base: &[u8], name: &[u8]) -> bool {
    if base.is_empty() {
        return true;
    }
    if name.len() < base.len() || !name[name.len() - base.len()..].eq_ignore_ascii_case(base) {
        return false;
    }
    let rest = name.len() - base.len();
    base[0] == b'.' || rest == 0 || name[rest - 1] == b'.'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_constraints_cover_the_name_and_those_below_it() {
        assert!(dns_within(b"example.com", b"example.com"));
        assert!(dns_within(b"example.com", b"Hub.Example.com"));
        assert!(!dns_within(b"example.com", b"badexample.com"));
        assert!(!dns_within(b".example.com", b"example.com"));
        assert!(dns_within(b".example.com", b"hub.example.com"));
        assert!(dns_within(b"", b"anything.at.all"));
        assert!(!dns_within(b"hub.example.com", b"example.com"));
    }

    #[test]
    fn ip_constraints_are_an_address_and_a_mask_of_its_family() {
        let lan = [192, 168, 1, 0, 255, 255, 255, 0];
        assert!(within(IP_ADDRESS, &lan, &[192, 168, 1, 7]));
        assert!(!within(IP_ADDRESS, &lan, &[192, 168, 2, 7]));
        assert!(!within(IP_ADDRESS, &lan, &[0u8; 16]), "an IPv6 address is not in an IPv4 subtree");
    }
}
