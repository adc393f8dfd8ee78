//! Replays every fuzz corpus on stable Rust: each file under `fuzz/corpus/<target>/` goes through
//! `mcpdev::fuzz::run(target, data)`, the same entry point the cargo-fuzz target calls, so a
//! crash the fuzzer found (and committed to its corpus) stays fixed without nightly in CI.

use std::path::Path;

#[test]
fn every_corpus_file_replays_through_its_target_without_a_panic() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    let mut dirs: Vec<_> = std::fs::read_dir(&root).unwrap_or_else(|e| panic!("{}: {e}", root.display())).map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    dirs.sort();
    let mut replayed = Vec::new();
    for dir in &dirs {
        let target = dir.file_name().unwrap().to_string_lossy().into_owned();
        let mut files: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_file()).collect();
        files.sort();
        assert!(!files.is_empty(), "fuzz/corpus/{target}/ is empty");
        for file in &files {
            let data = std::fs::read(file).unwrap();
            let result = std::panic::catch_unwind(|| mcpdev::fuzz::run(&target, &data));
            match result {
                Ok(true) => {}
                Ok(false) => panic!("fuzz/corpus/{target}/ has no target in mcpdev::fuzz::run (a typo, or a target not wired in)"),
                Err(_) => panic!("{} makes target {target} panic (see the message above)", file.display()),
            }
        }
        replayed.push((target, files.len()));
    }
    eprintln!("replayed {replayed:?}");
    for target in mcpdev::fuzz::TARGETS {
        assert!(replayed.iter().any(|(t, _)| t == target), "target {target} has no corpus in fuzz/corpus/{target}/");
    }
}

#[test]
fn an_unknown_target_is_refused() {
    assert!(!mcpdev::fuzz::run("no_such_target", b""));
}
