//! Replays `firmware/fuzz/corpus/x509/` through `hub_link::fuzz::x509`, the entry point the
//! cargo-fuzz target calls, on stable Rust: a crash the fuzzer found (committed to the corpus)
//! stays fixed without nightly in CI.

use std::path::Path;

#[test]
fn every_x509_corpus_file_replays_without_a_panic() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/x509");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(files.len() >= 3, "{} holds its seeds", dir.display());
    for file in &files {
        let data = std::fs::read(file).unwrap();
        if std::panic::catch_unwind(|| hub_link::fuzz::x509(&data)).is_err() {
            panic!("{} makes the x509 target panic (see the message above)", file.display());
        }
    }
}

/// The seeds reach the verifier's depths: the chains made with openssl verify (and the one that
/// breaks the rules does not), so the fuzzer starts from certificates that parse.
#[test]
fn the_seed_chains_verify_as_made() {
    use hub_link::tls::x509::{Cert, Refusal, verify_chain};
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/x509");
    let elements = |name: &str| {
        let data = std::fs::read(dir.join(name)).unwrap();
        let mut out = Vec::new();
        let mut rest = &data[..];
        while rest.len() > 4 {
            let len = usize::from(rest[2]) << 8 | usize::from(rest[3]);
            out.push(rest[..4 + len].to_vec());
            rest = &rest[4 + len..];
        }
        out
    };
    for (seed, expected) in [("ca-leaf", Ok(())), ("ca-leaf-intermediate", Ok(())), ("ca-leaf-ca-clientauth", Err(Refusal::LeafIsCa))] {
        let certs = elements(seed);
        let ca = Cert::parse(&certs[0]).unwrap();
        let chain: Vec<&[u8]> = certs[1..].iter().map(Vec::as_slice).collect();
        assert_eq!(verify_chain(&ca, &chain, "hub.lan", 0).map(|_| ()), expected, "{seed}");
    }
}
