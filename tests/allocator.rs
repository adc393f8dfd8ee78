//! Issue 46 item 6: a one-shot command runs on the system's allocator, a fleet process (`serve`,
//! `sim`) on mimalloc, as the binary chooses before `main` (src/alloc.rs); `MCPDEV_ALLOCATOR`
//! overrides it. Each case reads the choice the process logs at `-vv`.

use std::process::{Command, Stdio};

/// The allocator a `mcpdev` run reports, with `env` on top of a clean one. The line comes before
/// the command does anything; the process is ended once it came (`sim` would retry its hub).
fn allocator_of(args: &[&str], env: &[(&str, &str)]) -> String {
    use std::io::BufRead;
    let scratch = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcpdev"))
        .args(args)
        .env_remove("MCPDEV_ALLOCATOR")
        .env_remove("RUST_LOG")
        .env("XDG_CONFIG_HOME", scratch.path())
        .env("MCPDEV_STATE_DIR", scratch.path().join("state"))
        .env("MCPDEV_RUNTIME_DIR", scratch.path().join("run"))
        .envs(env.iter().copied())
        .current_dir(scratch.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut seen = Vec::new();
    let found = std::io::BufReader::new(child.stderr.take().unwrap()).lines().map_while(Result::ok).find_map(|l| {
        let found = l.rsplit_once("memory allocator: ").map(|(_, a)| a.trim().to_string());
        seen.push(l);
        found
    });
    let _ = child.kill();
    let _ = child.wait();
    found.unwrap_or_else(|| panic!("no allocator line for {args:?}:\n{}", seen.join("\n")))
}

#[test]
fn one_shot_commands_take_the_systems_allocator_and_fleets_mimalloc() {
    // A hub that is not there: each command fails fast, after it said which allocator it runs on.
    let nowhere = ["--url", "ws://127.0.0.1:9/xiaozhi/v1/"];
    assert_eq!(allocator_of(&["-vv", "--color", "never", "sim", nowhere[0], nowhere[1]], &[]), "mimalloc");
    assert_eq!(allocator_of(&["-vv", "--color=never", "devices", "--hub", "http://127.0.0.1:9"], &[]), "system");
    // A tool named like a fleet command is not one.
    assert_eq!(allocator_of(&["-vv", "call", "serve", "--hub", "http://127.0.0.1:9"], &[]), "system");
    // The value of a global option is not the command either.
    assert_eq!(allocator_of(&["-vv", "--ca-fingerprint", "sim", "devices", "--hub", "http://127.0.0.1:9"], &[]), "system");
}

#[test]
fn the_environment_overrides_the_choice_both_ways() {
    assert_eq!(allocator_of(&["-vv", "devices", "--hub", "http://127.0.0.1:9"], &[("MCPDEV_ALLOCATOR", "mimalloc")]), "mimalloc");
    assert_eq!(allocator_of(&["-vv", "sim", "--url", "ws://127.0.0.1:9/xiaozhi/v1/"], &[("MCPDEV_ALLOCATOR", "system")]), "system");
    // An unknown value changes nothing.
    assert_eq!(allocator_of(&["-vv", "sim", "--url", "ws://127.0.0.1:9/xiaozhi/v1/"], &[("MCPDEV_ALLOCATOR", "jemalloc")]), "mimalloc");
}
