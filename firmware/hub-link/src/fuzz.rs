//! The fuzz target's entry point for the X.509 verifier (`firmware/fuzz/fuzz_targets/x509.rs`),
//! here so that `cargo test` replays its corpus on stable Rust (`tests/fuzz_corpus.rs`).
//!
//! The input is read as DER elements one after the other: the first is taken as the provisioned
//! CA, the rest as the chain a server sent (leaf first), verified for a host name and for an
//! address, with and without a clock. Each element is also parsed alone and matched against
//! names. Whatever the bytes, nothing may panic, and a chain is accepted only with a leaf that
//! parses and carries the name.

use crate::tls::x509::{Cert, Der, verify_chain};

/// Runs the verifier on `data`.
pub fn x509(data: &[u8]) {
    let mut elements: heapless::Vec<&[u8], 6> = heapless::Vec::new();
    let mut der = Der::new(data);
    while !der.is_empty() {
        let Ok((_, _, whole)) = der.next() else { break };
        if elements.push(whole).is_err() {
            break;
        }
    }
    for element in &elements {
        if let Ok(cert) = Cert::parse(element) {
            let _ = cert.names("hub.lan");
            let _ = cert.names("192.0.2.7");
            let _ = cert.key();
        }
    }
    let Some((ca, chain)) = elements.split_first() else { return };
    let Ok(ca) = Cert::parse(ca) else { return };
    if chain.is_empty() {
        return;
    }
    for host in ["hub.lan", "192.0.2.7", "::1"] {
        for now in [0, 1_700_000_000] {
            if let Ok(leaf) = verify_chain(&ca, chain, host, now) {
                assert!(Cert::parse(chain[0]).is_ok() && leaf.names(host).is_ok(), "a chain was accepted with a leaf not for {host}");
            }
        }
    }
}
