//! Just enough X.509 for a device that trusts one CA: a DER reader, and the checks of RFC 5280
//! that matter when the trust anchor is the hub's own CA.
//!
//! Rules it enforces (each refusal has its own [`Refusal`]):
//! - Every byte comes from the network before anything is verified, so every read is bounds-checked
//!   and a malformed certificate is an error, never a panic (fuzzed: `firmware/fuzz/fuzz_targets/x509.rs`,
//!   its corpus replayed by `cargo test` in `firmware/hub-link/tests/fuzz_corpus.rs`).
//! - Signatures: ECDSA P-256 with SHA-256 only (what `rcgen`, and so `serve --tls auto`, makes).
//! - A chain runs from the leaf up to the provisioned CA; every issuer but the CA itself must be a
//!   CA (`basicConstraints cA`), and issuer and subject names must match.
//! - Names: the dialled host against the leaf's subjectAltName only (no Common Name fallback): an
//!   IP literal against `iPAddress` entries, a host name against `dNSName` entries (one leading
//!   `*.` label at most).
//! - Time: the device has no clock, only a lower bound of "now" (the flash time, or the time an
//!   authenticated hub told it), so a certificate whose `notAfter` lies before that bound is
//!   refused; `notBefore` cannot be checked against a lower bound and is not.
//! - An unknown extension marked critical is refused, and so is a certificate with two instances
//!   of one extension (RFC 5280 §4.2: no "last one wins").
//! - The path rules of RFC 5280 §6.1 that a chain signed by the provisioned CA must still meet
//!   (a person's own CA may sign more than the hub's leaf): [`super::x509_path`].

use core::net::IpAddr;

/// Why a certificate (chain) was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Not DER, or not an X.509 v3 certificate this reader understands.
    Malformed,
    /// A key or signature other than ECDSA P-256 with SHA-256.
    Unsupported,
    /// No path from the leaf to the provisioned CA: another CA signed it.
    UnknownIssuer,
    /// An issuer in the chain is not a CA.
    NotACa,
    /// `notAfter` is before the device's lower bound of the time.
    Expired { not_after: u64, now: u64 },
    /// The leaf is not for the name or address the device dialled.
    WrongName,
    /// An extension marked critical that this reader does not know.
    UnknownCriticalExtension,
    /// The signature over the handshake (CertificateVerify) did not verify, or never came.
    BadHandshakeSignature,
    /// One extension twice in a certificate.
    DuplicateExtension,
    /// More intermediate CAs below a CA than its `pathLenConstraint` allows.
    PathTooLong,
    /// A CA in the chain whose `keyUsage` does not allow signing certificates (keyCertSign).
    NotForSigning,
    /// The leaf is a CA (`basicConstraints cA`), not a server's certificate.
    LeafIsCa,
    /// The leaf's (or a CA's) `extKeyUsage` does not include serverAuth.
    NotForServerAuth,
    /// A name of the leaf outside a CA's `nameConstraints`, or a constraint this firmware cannot check.
    NameConstraints,
}

impl Refusal {
    pub fn as_str(&self) -> &'static str {
        match self {
            Refusal::Malformed => "the hub's certificate is not a DER X.509 v3 certificate this firmware can read",
            Refusal::Unsupported => "the hub's certificate uses a key or signature this firmware cannot verify (it verifies ECDSA P-256 with SHA-256, as `serve --tls auto` makes)",
            Refusal::UnknownIssuer => "the hub's certificate was not issued by the provisioned hub CA: a man in the middle, or a hub with another CA (re-flash with `mcpdev flash` to provision this hub's CA)",
            Refusal::NotACa => "a certificate in the hub's chain signed another one without being a CA",
            Refusal::Expired { .. } => "the hub's certificate has expired",
            Refusal::WrongName => "the hub's certificate is not for the name or address the device connected to",
            Refusal::UnknownCriticalExtension => "the hub's certificate has a critical extension this firmware does not know",
            Refusal::BadHandshakeSignature => "the hub did not prove it holds its certificate's key (CertificateVerify missing or wrong)",
            Refusal::DuplicateExtension => "a certificate in the hub's chain has one extension twice (RFC 5280 forbids it)",
            Refusal::PathTooLong => "the hub's chain has more intermediate CAs than a CA's pathLenConstraint allows",
            Refusal::NotForSigning => "a CA in the hub's chain may not sign certificates (its keyUsage lacks keyCertSign)",
            Refusal::LeafIsCa => "the hub's certificate is a CA certificate, not a server's",
            Refusal::NotForServerAuth => "the hub's certificate (or a CA above it) is not for TLS servers (its extKeyUsage lacks serverAuth)",
            Refusal::NameConstraints => "the hub's certificate has a name its CA's nameConstraints do not permit (or a constraint this firmware cannot check)",
        }
    }
}

impl core::fmt::Display for Refusal {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Refusal::Expired { not_after, now } => {
                write!(f, "{} (not after {not_after}, the device's clock is at least {now}, Unix seconds)", self.as_str())
            }
            other => f.write_str(other.as_str()),
        }
    }
}

/// A DER reader over a slice: tag, length, value, always within bounds.
#[derive(Clone, Copy)]
pub(crate) struct Der<'a>(&'a [u8]);

impl<'a> Der<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Der(bytes)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The next element: (tag, value, the whole TLV).
    pub(crate) fn next(&mut self) -> Result<(u8, &'a [u8], &'a [u8]), Refusal> {
        let bytes = self.0;
        let tag = *bytes.first().ok_or(Refusal::Malformed)?;
        if tag & 0x1F == 0x1F {
            return Err(Refusal::Malformed); // high tag numbers: none in a certificate
        }
        let first = *bytes.get(1).ok_or(Refusal::Malformed)?;
        let (len, head): (usize, usize) = match first {
            0..=0x7F => (usize::from(first), 2),
            0x81 => {
                let l = usize::from(*bytes.get(2).ok_or(Refusal::Malformed)?);
                if l < 0x80 {
                    return Err(Refusal::Malformed); // not the shortest form: not DER
                }
                (l, 3)
            }
            0x82 => {
                let hi = usize::from(*bytes.get(2).ok_or(Refusal::Malformed)?);
                let lo = usize::from(*bytes.get(3).ok_or(Refusal::Malformed)?);
                let l = hi << 8 | lo;
                if l < 0x100 {
                    return Err(Refusal::Malformed);
                }
                (l, 4)
            }
            _ => return Err(Refusal::Malformed), // > 64 KiB, indefinite, or not DER
        };
        let end = head.checked_add(len).ok_or(Refusal::Malformed)?;
        let whole = bytes.get(..end).ok_or(Refusal::Malformed)?;
        self.0 = &bytes[end..];
        Ok((tag, &whole[head..], whole))
    }

    /// The next element, which must have `tag`; its value.
    pub(crate) fn expect(&mut self, tag: u8) -> Result<&'a [u8], Refusal> {
        match self.next()? {
            (t, value, _) if t == tag => Ok(value),
            _ => Err(Refusal::Malformed),
        }
    }

    /// The next element if it has `tag`.
    pub(crate) fn optional(&mut self, tag: u8) -> Result<Option<&'a [u8]>, Refusal> {
        if self.0.first() == Some(&tag) { self.expect(tag).map(Some) } else { Ok(None) }
    }
}

pub(super) const SEQUENCE: u8 = 0x30;
const INTEGER: u8 = 0x02;
const BIT_STRING: u8 = 0x03;
const OCTET_STRING: u8 = 0x04;
pub(super) const OID: u8 = 0x06;
const BOOLEAN: u8 = 0x01;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;

/// ecdsa-with-SHA256 (1.2.840.10045.4.3.2).
const ECDSA_SHA256: &[u8] = &[0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x03, 0x02];
/// id-ecPublicKey (1.2.840.10045.2.1).
const EC_PUBLIC_KEY: &[u8] = &[0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01];
/// prime256v1 (1.2.840.10045.3.1.7).
const P256: &[u8] = &[0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07];
/// Extensions: basicConstraints, subjectAltName, and those that may be critical and need nothing
/// here (keyUsage, extKeyUsage: the hub's CA marks keyUsage critical).
const BASIC_CONSTRAINTS: &[u8] = &[0x55, 0x1D, 0x13];
const SUBJECT_ALT_NAME: &[u8] = &[0x55, 0x1D, 0x11];
const KEY_USAGE: &[u8] = &[0x55, 0x1D, 0x0F];
const EXT_KEY_USAGE: &[u8] = &[0x55, 0x1D, 0x25];
const NAME_CONSTRAINTS: &[u8] = &[0x55, 0x1D, 0x1E];
/// The most extensions a certificate may carry here (the hub's leaf has four).
const MAX_EXTENSIONS: usize = 24;

/// The parts of a certificate the checks use, borrowed from its DER.
#[derive(Debug, Clone, Copy)]
pub struct Cert<'a> {
    /// The signed part, whole (tag and length included): what the issuer's signature covers.
    tbs: &'a [u8],
    issuer: &'a [u8],
    subject: &'a [u8],
    not_after: u64,
    /// The SEC1 point of the P-256 key.
    key: &'a [u8],
    /// The DER ECDSA signature of the issuer.
    signature: &'a [u8],
    pub(super) is_ca: bool,
    /// `basicConstraints` pathLenConstraint: how many intermediate CAs may follow (None: any).
    pub(super) path_len: Option<u64>,
    /// `keyUsage`'s bits, bit 0 (digitalSignature) first (None: no keyUsage extension).
    pub(super) key_usage: Option<u16>,
    /// `extKeyUsage`'s sequence of purposes (None: no extKeyUsage extension).
    pub(super) ext_key_usage: Option<&'a [u8]>,
    /// `nameConstraints`' value (None: none).
    pub(super) name_constraints: Option<&'a [u8]>,
    /// The subjectAltName's GeneralNames (empty: none).
    pub(super) alt_names: &'a [u8],
}

impl<'a> Cert<'a> {
    pub fn parse(der: &'a [u8]) -> Result<Self, Refusal> {
        let mut outer = Der::new(der);
        let cert = outer.expect(SEQUENCE)?;
        if !outer.is_empty() {
            return Err(Refusal::Malformed);
        }
        let mut cert = Der::new(cert);
        let (tag, tbs_value, tbs) = cert.next()?;
        if tag != SEQUENCE {
            return Err(Refusal::Malformed);
        }
        let outer_alg = algorithm(cert.expect(SEQUENCE)?)?;
        let signature = bit_string(cert.expect(BIT_STRING)?)?;
        if !cert.is_empty() {
            return Err(Refusal::Malformed);
        }

        let mut t = Der::new(tbs_value);
        // version [0] EXPLICIT: v3 only (extensions are needed for the CA flag and the names).
        let version = t.expect(0xA0)?;
        if version != [INTEGER, 1, 2] {
            return Err(Refusal::Malformed);
        }
        t.expect(INTEGER)?; // serialNumber
        let inner_alg = algorithm(t.expect(SEQUENCE)?)?;
        if inner_alg != outer_alg {
            return Err(Refusal::Malformed);
        }
        if inner_alg != ECDSA_SHA256 {
            return Err(Refusal::Unsupported);
        }
        let issuer = t.expect(SEQUENCE)?;
        let mut validity = Der::new(t.expect(SEQUENCE)?);
        let _not_before = time(&mut validity)?;
        let not_after = time(&mut validity)?;
        let subject = t.expect(SEQUENCE)?;
        let key = p256_key(t.expect(SEQUENCE)?)?;
        t.optional(0x81)?; // issuerUniqueID
        t.optional(0x82)?; // subjectUniqueID
        let mut is_ca = false;
        let mut path_len = None;
        let mut key_usage = None;
        let mut ext_key_usage = None;
        let mut name_constraints = None;
        let mut alt_names: &[u8] = &[];
        if let Some(exts) = t.optional(0xA3)? {
            let mut exts = Der::new(exts);
            let mut list = Der::new(exts.expect(SEQUENCE)?);
            if !exts.is_empty() {
                return Err(Refusal::Malformed);
            }
            let mut seen: heapless::Vec<&[u8], MAX_EXTENSIONS> = heapless::Vec::new();
            while !list.is_empty() {
                let mut ext = Der::new(list.expect(SEQUENCE)?);
                let id = ext.expect(OID)?;
                if seen.contains(&id) {
                    return Err(Refusal::DuplicateExtension);
                }
                seen.push(id).map_err(|_| Refusal::Malformed)?;
                let critical = match ext.optional(BOOLEAN)? {
                    Some([0xFF]) => true,
                    Some([0x00]) => false,
                    Some(_) => return Err(Refusal::Malformed),
                    None => false,
                };
                let value = ext.expect(OCTET_STRING)?;
                if !ext.is_empty() {
                    return Err(Refusal::Malformed);
                }
                match id {
                    BASIC_CONSTRAINTS => {
                        let mut v = Der::new(value);
                        let mut bc = Der::new(v.expect(SEQUENCE)?);
                        is_ca = match bc.optional(BOOLEAN)? {
                            Some([0xFF]) => true,
                            // DER leaves a FALSE default out.
                            None => false,
                            Some(_) => return Err(Refusal::Malformed),
                        };
                        path_len = bc.optional(INTEGER)?.map(small_integer).transpose()?;
                        // A path length on a certificate that is not a CA means nothing (§4.2.1.9).
                        if !bc.is_empty() || !v.is_empty() || (path_len.is_some() && !is_ca) {
                            return Err(Refusal::Malformed);
                        }
                    }
                    SUBJECT_ALT_NAME => {
                        let mut v = Der::new(value);
                        alt_names = v.expect(SEQUENCE)?;
                        if !v.is_empty() {
                            return Err(Refusal::Malformed);
                        }
                    }
                    KEY_USAGE => {
                        let mut v = Der::new(value);
                        key_usage = Some(key_usage_bits(v.expect(BIT_STRING)?)?);
                        if !v.is_empty() {
                            return Err(Refusal::Malformed);
                        }
                    }
                    EXT_KEY_USAGE => {
                        let mut v = Der::new(value);
                        let purposes = v.expect(SEQUENCE)?;
                        if purposes.is_empty() || !v.is_empty() {
                            return Err(Refusal::Malformed);
                        }
                        ext_key_usage = Some(purposes);
                    }
                    NAME_CONSTRAINTS => {
                        let mut v = Der::new(value);
                        name_constraints = Some(v.expect(SEQUENCE)?);
                        if !v.is_empty() {
                            return Err(Refusal::Malformed);
                        }
                    }
                    _ if critical => return Err(Refusal::UnknownCriticalExtension),
                    _ => {}
                }
            }
        }
        if !t.is_empty() {
            return Err(Refusal::Malformed);
        }
        Ok(Cert { tbs, issuer, subject, not_after, key, signature, is_ca, path_len, key_usage, ext_key_usage, name_constraints, alt_names })
    }

    /// Whether `issuer`'s key signed this certificate (and the names chain).
    pub(super) fn signed_by(&self, issuer: &Cert<'_>) -> Result<(), Refusal> {
        if self.issuer != issuer.subject {
            return Err(Refusal::UnknownIssuer);
        }
        verify_p256(issuer.key, self.tbs, self.signature).map_err(|_| Refusal::UnknownIssuer)
    }

    pub(super) fn fresh(&self, now: u64) -> Result<(), Refusal> {
        if now != 0 && self.not_after < now {
            return Err(Refusal::Expired { not_after: self.not_after, now });
        }
        Ok(())
    }

    /// Whether the subjectAltName covers `host` (an IP literal or a DNS name).
    pub fn names(&self, host: &str) -> Result<(), Refusal> {
        let ip: Option<IpAddr> = host.parse().ok();
        let mut names = Der::new(self.alt_names);
        while !names.is_empty() {
            let (tag, value, _) = names.next()?;
            let found = match (tag, ip) {
                // iPAddress [7]
                (0x87, Some(IpAddr::V4(v4))) => value == v4.octets(),
                (0x87, Some(IpAddr::V6(v6))) => value == v6.octets(),
                // dNSName [2]
                (0x82, None) => dns_matches(value, host.as_bytes()),
                _ => false,
            };
            if found {
                return Ok(());
            }
        }
        Err(Refusal::WrongName)
    }

    /// The leaf's public key (SEC1), for the handshake signature.
    pub fn key(&self) -> &'a [u8] {
        self.key
    }
}

/// Checks a chain as the server sent it (`chain[0]` the leaf, then its issuers in any order, the
/// CA itself possibly among them) against the provisioned `ca`, for `host`, at `now` (a lower
/// bound, 0: unknown). Returns the leaf.
pub fn verify_chain<'c>(ca: &Cert<'_>, chain: &[&'c [u8]], host: &str, now: u64) -> Result<Cert<'c>, Refusal> {
    let leaf_der = *chain.first().ok_or(Refusal::Malformed)?;
    let leaf = Cert::parse(leaf_der)?;
    leaf.fresh(now)?;
    ca.fresh(now)?;
    leaf.names(host)?;
    super::x509_path::check_leaf(&leaf)?;
    // Up the chain: at most three intermediates, found by issuer name and signature, never a
    // certificate already on the path (a self-signed CA of another hub in the chain is not an
    // issuer of itself). The path rules are checked once it reaches the pinned CA: a chain that
    // never does is refused as one from an unknown issuer, whatever else is wrong with it.
    // `path`: the leaf, then the intermediates found so far.
    let mut path: heapless::Vec<Cert<'c>, 4> = heapless::Vec::new();
    let _ = path.push(leaf);
    let mut child = leaf;
    for _ in 0..4 {
        // The leaf pinned as is (a self-signed hub certificate): nothing above it.
        if child.tbs == ca.tbs && child.signature == ca.signature {
            return Ok(leaf);
        }
        // The pinned CA itself: each CA on the path constrains what is below it.
        if child.signed_by(ca).is_ok() {
            for (at, issuer) in path.iter().enumerate().skip(1) {
                if !issuer.is_ca {
                    return Err(Refusal::NotACa);
                }
                issuer.fresh(now)?;
                super::x509_path::check_issuer(issuer, &path[..at], false)?;
            }
            super::x509_path::check_issuer(ca, &path, true)?;
            return Ok(leaf);
        }
        let issuer = chain[1..]
            .iter()
            .filter_map(|der| Cert::parse(der).ok())
            .find(|c| c.subject == child.issuer && !path.iter().any(|p| p.tbs == c.tbs) && child.signed_by(c).is_ok())
            .ok_or(Refusal::UnknownIssuer)?;
        path.push(issuer).map_err(|_| Refusal::UnknownIssuer)?;
        child = issuer;
    }
    Err(Refusal::UnknownIssuer)
}

/// ECDSA P-256 / SHA-256 over `message` with a SEC1 key and a DER signature.
pub fn verify_p256(key: &[u8], message: &[u8], signature: &[u8]) -> Result<(), Refusal> {
    use p256::ecdsa::signature::Verifier;
    use p256::ecdsa::{Signature, VerifyingKey};
    let key = VerifyingKey::from_sec1_bytes(key).map_err(|_| Refusal::Unsupported)?;
    let signature = Signature::from_der(signature).map_err(|_| Refusal::Malformed)?;
    key.verify(message, &signature).map_err(|_| Refusal::UnknownIssuer)
}

fn algorithm(value: &[u8]) -> Result<&[u8], Refusal> {
    let mut alg = Der::new(value);
    let oid = alg.expect(OID)?;
    // ECDSA algorithm identifiers have no parameters (RFC 5758).
    if !alg.is_empty() && oid == ECDSA_SHA256 {
        return Err(Refusal::Malformed);
    }
    Ok(oid)
}

/// A non-negative DER INTEGER of at most 8 bytes (a pathLenConstraint).
fn small_integer(value: &[u8]) -> Result<u64, Refusal> {
    match value {
        [] => Err(Refusal::Malformed),
        [first, ..] if first & 0x80 != 0 => Err(Refusal::Malformed),
        // Not minimal: a leading zero only before a byte with its top bit set.
        [0, next, ..] if next & 0x80 == 0 => Err(Refusal::Malformed),
        v if v.len() > 9 || (v.len() == 9 && v[0] != 0) => Err(Refusal::Malformed),
        v => Ok(v.iter().fold(0u64, |acc, b| acc << 8 | u64::from(*b))),
    }
}

/// keyUsage's BIT STRING as bits, bit 0 (digitalSignature) the lowest: at most two bytes
/// (nine usages), its unused bits zero.
fn key_usage_bits(value: &[u8]) -> Result<u16, Refusal> {
    let (&unused, bits) = value.split_first().ok_or(Refusal::Malformed)?;
    if unused > 7 || bits.is_empty() || bits.len() > 2 || bits.last().is_some_and(|b| b & ((1u8 << unused) - 1) != 0) {
        return Err(Refusal::Malformed);
    }
    let mut out = 0u16;
    for (i, byte) in bits.iter().enumerate() {
        for bit in 0..8 {
            if byte & (0x80 >> bit) != 0 {
                out |= 1 << (i * 8 + bit);
            }
        }
    }
    Ok(out)
}

fn bit_string(value: &[u8]) -> Result<&[u8], Refusal> {
    match value.split_first() {
        Some((0, bits)) => Ok(bits),
        _ => Err(Refusal::Malformed),
    }
}

/// SubjectPublicKeyInfo: an uncompressed P-256 point, else unsupported.
fn p256_key(spki: &[u8]) -> Result<&[u8], Refusal> {
    let mut spki = Der::new(spki);
    let mut alg = Der::new(spki.expect(SEQUENCE)?);
    let key = bit_string(spki.expect(BIT_STRING)?)?;
    if alg.expect(OID)? != EC_PUBLIC_KEY || alg.optional(OID)? != Some(P256) || key.len() != 65 || key[0] != 4 {
        return Err(Refusal::Unsupported);
    }
    Ok(key)
}

/// A UTCTime (`YYMMDDHHMMSSZ`, 1950..2049) or GeneralizedTime (`YYYYMMDDHHMMSSZ`), to Unix seconds.
fn time(der: &mut Der<'_>) -> Result<u64, Refusal> {
    let (tag, v, _) = der.next()?;
    let digits = |s: &[u8]| -> Result<u64, Refusal> {
        s.iter().try_fold(0u64, |acc, b| if b.is_ascii_digit() { Ok(acc * 10 + u64::from(b - b'0')) } else { Err(Refusal::Malformed) })
    };
    let (year, rest) = match (tag, v.len()) {
        (UTC_TIME, 13) => {
            let yy = digits(&v[..2])?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, &v[2..])
        }
        (GENERALIZED_TIME, 15) => (digits(&v[..4])?, &v[4..]),
        _ => return Err(Refusal::Malformed),
    };
    if rest[10] != b'Z' {
        return Err(Refusal::Malformed);
    }
    let (month, day) = (digits(&rest[0..2])?, digits(&rest[2..4])?);
    let (h, m, s) = (digits(&rest[4..6])?, digits(&rest[6..8])?, digits(&rest[8..10])?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || h > 23 || m > 59 || s > 60 || year < 1970 {
        return Err(Refusal::Malformed);
    }
    Ok(days_from_civil(year, month, day) * 86_400 + h * 3600 + m * 60 + s)
}

/// Days since 1970-01-01 of a date in the proleptic Gregorian calendar (Howard Hinnant's
/// algorithm), for years from 1970.
fn days_from_civil(year: u64, month: u64, day: u64) -> u64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A dNSName against a host: case-insensitive, `*.` only as the whole left-most label, matching
/// exactly one label.
fn dns_matches(pattern: &[u8], host: &[u8]) -> bool {
    if let Some(suffix) = pattern.strip_prefix(b"*.") {
        let Some(dot) = host.iter().position(|b| *b == b'.') else { return false };
        // `*.com` style wildcards (one label left) are refused.
        dot > 0 && suffix.contains(&b'.') && host[dot + 1..].eq_ignore_ascii_case(suffix)
    } else {
        !pattern.contains(&b'*') && pattern.eq_ignore_ascii_case(host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_to_unix_seconds() {
        let mut d = Der::new(b"\x17\x0d700101000000Z");
        assert_eq!(time(&mut d), Ok(0));
        let mut d = Der::new(b"\x17\x0d491231235959Z");
        assert_eq!(time(&mut d), Ok(2_524_607_999));
        let mut d = Der::new(b"\x18\x0f20500101000000Z");
        assert_eq!(time(&mut d), Ok(2_524_608_000));
        let mut d = Der::new(b"\x18\x0f40960101000000Z");
        assert_eq!(time(&mut d), Ok(67_090_118_400));
        for bad in [&b"\x17\x0d701301000000Z"[..], b"\x17\x0d70010100000aZ", b"\x17\x0d700101000000+", b"\x17\x0c70010100000Z"] {
            assert_eq!(time(&mut Der::new(bad)), Err(Refusal::Malformed), "{bad:?}");
        }
    }

    #[test]
    fn dns_wildcards_cover_one_label() {
        assert!(dns_matches(b"hub.lan", b"HUB.lan"));
        assert!(dns_matches(b"*.example.org", b"hub.example.org"));
        assert!(!dns_matches(b"*.example.org", b"a.hub.example.org"));
        assert!(!dns_matches(b"*.example.org", b"example.org"));
        assert!(!dns_matches(b"*.org", b"example.org"));
        assert!(!dns_matches(b"h*.example.org", b"hub.example.org"));
        assert!(!dns_matches(b"hub.lan", b"hub.lan.evil"));
    }

    #[test]
    fn der_lengths_are_bounded_and_minimal() {
        // A length past the end, a non-minimal long form, an indefinite length: all refused.
        for bad in [&[0x30, 0x05, 0x01][..], &[0x30, 0x81, 0x05, 0, 0, 0, 0, 0], &[0x30, 0x80, 0, 0], &[0x30, 0x84, 0, 0, 0, 1, 0], &[0x1F, 0x01, 0x00]] {
            assert!(Der::new(bad).next().is_err(), "{bad:?}");
        }
        let mut d = Der::new(&[0x04, 0x02, 0xAA, 0xBB, 0x05, 0x00]);
        assert_eq!(d.expect(OCTET_STRING), Ok(&[0xAA, 0xBB][..]));
        assert_eq!(d.expect(0x05), Ok(&[][..]));
        assert!(d.is_empty());
    }
}
