//! Replays `firmware/fuzz/corpus/provisioning_decode/` through `provisioning::fuzz::decode_record`, the entry point the
//! cargo-fuzz target calls, on stable Rust: a crash the fuzzer found (committed to the corpus)
//! stays fixed without nightly in CI.

use std::path::Path;

#[test]
fn every_provisioning_decode_corpus_file_replays_without_a_panic() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/provisioning_decode");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(!files.is_empty(), "{} is empty", dir.display());
    for file in &files {
        let data = std::fs::read(file).unwrap();
        if std::panic::catch_unwind(|| provisioning::fuzz::decode_record(&data)).is_err() {
            panic!("{} makes the provisioning_decode target panic (see the message above)", file.display());
        }
    }
}
