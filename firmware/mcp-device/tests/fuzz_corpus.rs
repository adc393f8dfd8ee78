//! Replays `firmware/fuzz/corpus/device_link/` through `mcp_device::fuzz::device_link`, the entry point the
//! cargo-fuzz target calls, on stable Rust: a crash the fuzzer found (committed to the corpus)
//! stays fixed without nightly in CI.

use std::path::Path;

#[test]
fn every_device_link_corpus_file_replays_without_a_panic() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/device_link");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(!files.is_empty(), "{} is empty", dir.display());
    for file in &files {
        let data = std::fs::read(file).unwrap();
        if std::panic::catch_unwind(|| mcp_device::fuzz::device_link(&data)).is_err() {
            panic!("{} makes the device_link target panic (see the message above)", file.display());
        }
    }
}
