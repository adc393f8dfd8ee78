//! `.ci/system-packages`, the first step of `.ci/test`, as a user who is not root: it says which
//! Debian packages it installs and why before it does, installs them through `sudo`, and where it
//! cannot (no sudo, sudo refused) stops with the package names and the command to run.
//!
//! The script runs with a PATH of fakes only (a `sudo` and an `apt-get` that log their arguments),
//! so nothing is installed and every package looks missing.
//!
//! And `.ci/steps.bash`, how `.ci/test` runs its steps: a failed step does not stop the ones after
//! it, and the run ends with a summary naming each failed step, and fails. And `.ci/run-tests`,
//! which runs the test binaries two at a time: with a fake `cargo` that names two binaries, each
//! output comes whole after its header, every binary runs, and a failure is named and fails it.

use std::path::Path;
use std::process::{Command, Output};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/system-packages");

fn fake(dir: &Path, name: &str, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Runs the script as uid 1000 with `bin` as its whole PATH (plus what it adds: /usr/sbin, /sbin,
/// where no package it checks lives but mosquitto).
fn run(bin: &Path) -> Output {
    // `env` is what the script runs apt-get through.
    std::os::unix::fs::symlink("/usr/bin/env", bin.join("env")).ok();
    Command::new("/bin/bash").arg(SCRIPT).env_clear().env("PATH", bin).env("MCPDEV_CI_EUID", "1000").output().unwrap()
}

fn text(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_normal_user_gets_sudo_after_being_told_what_is_installed() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    fake(&bin, "sudo", &format!("echo \"sudo $*\" >> {}\n[ \"$1\" = -n ] && shift\nexec \"$@\"", log.display()));
    fake(&bin, "apt-get", &format!("echo \"apt-get $*\" >> {}", log.display()));
    let out = run(&bin);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let log = std::fs::read_to_string(&log).unwrap();
    // Told before: every package with its reason, and the commands.
    for package in ["chromium: the browser tests", "prometheus: the /metrics tests", "npm:", "python3:"] {
        assert!(stdout.contains(package), "{package} announced: {stdout}");
    }
    assert!(stdout.contains("with: sudo -n apt-get update && sudo -n apt-get install python3 npm chromium"), "{stdout}");
    // Then through sudo, non-interactive since there is no terminal; each package once.
    let install = log.lines().find(|l| l.starts_with("sudo -n env DEBIAN_FRONTEND=noninteractive apt-get install")).unwrap_or_else(|| panic!("{log}"));
    assert!(install.ends_with("python3 npm chromium prometheus") || install.ends_with("python3 npm chromium mosquitto prometheus"), "{install}");
    assert!(log.contains("sudo -n env DEBIAN_FRONTEND=noninteractive apt-get update"), "{log}");
    assert!(log.contains("\napt-get install -y -qq python3 npm chromium"), "apt-get ran under sudo: {log}");
}

#[test]
fn without_sudo_it_stops_and_names_the_packages_and_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    fake(dir.path(), "apt-get", &format!("echo \"apt-get $*\" >> {}", log.display()));
    let out = run(dir.path());
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("installing needs root, and sudo was not found"), "{stderr}");
    assert!(stderr.contains("chromium: the browser tests"), "{stderr}");
    assert!(stderr.contains("  sudo apt-get install python3 npm chromium"), "the command to run: {stderr}");
    assert!(stderr.contains("then run .ci/test again"), "{stderr}");
    assert!(!log.exists(), "nothing ran apt-get as a normal user");
}

#[test]
fn a_refused_sudo_stops_with_the_command_to_run() {
    let dir = tempfile::tempdir().unwrap();
    fake(dir.path(), "sudo", "echo 'sudo: a password is required' >&2; exit 1");
    fake(dir.path(), "apt-get", "exit 0");
    let out = run(dir.path());
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("error: 'sudo -n apt-get update' failed"), "{stderr}");
    assert!(stderr.contains("  sudo apt-get install python3 npm chromium"), "{stderr}");
}

#[test]
fn without_apt_get_it_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path());
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("apt-get was not found"), "{stderr}");
    assert!(stderr.contains("chromium"), "{stderr}");
}

/// `.ci/steps.bash` sourced by a script of `body` (bash, no `set -e`, like `.ci/test`).
fn steps(body: &str) -> Output {
    let lib = concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/steps.bash");
    Command::new("/bin/bash").arg("-c").arg(format!("set -uo pipefail\n. {lib}\n{body}")).output().unwrap()
}

#[test]
fn a_failed_step_hides_no_other_and_the_summary_names_it() {
    let out = steps("run 'first: passes' true\nrun 'second: fails' sh -c 'echo second ran; exit 3'\nrun 'third: after the failure' echo third ran\nsummary");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "a failed step fails the run: {stdout}\n{stderr}");
    assert!(stdout.contains("second ran") && stdout.contains("third ran"), "every step ran: {stdout}");
    // Each step's start line, as CI logs show where time went.
    for name in ["first: passes", "second: fails", "third: after the failure", "summary"] {
        assert!(stdout.lines().any(|l| l.starts_with("== [") && l.ends_with(&format!("s] {name}"))), "{name}: {stdout}");
    }
    let summary = stdout.split("s] summary\n").nth(1).unwrap_or_else(|| panic!("no summary: {stdout}"));
    assert!(summary.lines().any(|l| l.starts_with("ok ") && l.ends_with("first: passes")), "{summary}");
    assert!(summary.lines().any(|l| l.starts_with("FAILED ") && l.ends_with("second: fails (exit 3)")), "{summary}");
    assert!(summary.contains("1 of 3 steps failed") && summary.trim_end().ends_with("  second: fails (exit 3)"), "the failed step is named last: {summary}");
}

#[test]
fn a_run_of_passing_steps_passes() {
    let out = steps("run one true\nrun two true\nsummary");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("every step passed") && !stdout.contains("FAILED"), "{stdout}");
}

#[test]
fn run_tests_runs_every_binary_prints_each_whole_and_names_the_failed() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    // Two test binaries: each prints a line, waits, prints another; the second fails.
    let slow = |name: &str, code: i32| format!("echo '{name} starts'; sleep 0.3; echo 'test result: {name} ends'; exit {code}");
    fake(dir.path(), "passes", &slow("passes", 0));
    fake(dir.path(), "fails", &slow("fails", 101));
    let artifact = |name: &str| {
        format!(r#"{{"reason":"compiler-artifact","target":{{"src_path":"{root}/tests/{name}.rs"}},"profile":{{"test":true}},"executable":"{root}/{name}"}}"#, root = dir.path().display())
    };
    let listing = format!("{}\n{}", artifact("passes"), artifact("fails"));
    fake(&bin, "cargo", &format!("case \"$*\" in *--no-run*) printf '%s\\n' '{}' ;; *--doc*) echo 'test result: doc ok' ;; esac", listing.replace('\n', "' '")));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/run-tests");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let out = Command::new("/bin/bash").arg(script).env("PATH", path).env("MCPDEV_TEST_JOBS", "2").output().unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "a failed binary fails the run: {stdout}\n{stderr}");
    for name in ["passes", "fails"] {
        // Its header, then its two lines, with nothing of the other binary between them.
        let header = format!("tests/{name}.rs (");
        let at = stdout.find(&header).unwrap_or_else(|| panic!("no header for {name}: {stdout}"));
        let at = stdout[..at].rfind('\n').map_or(0, |n| n + 1);
        let block: Vec<&str> = stdout[at..].lines().take(3).collect();
        assert!(block[0].starts_with("     Running "), "cargo's header: {stdout}");
        assert_eq!(&block[1..], [format!("{name} starts"), format!("test result: {name} ends")], "{stdout}");
    }
    assert!(stdout.contains("test result: doc ok"), "the doc-tests ran: {stdout}");
    assert!(stdout.trim_end().ends_with("tests/fails.rs") && stdout.contains("1 test target(s) failed"), "the failed binary is named last: {stdout}");
    assert!(!stdout.trim_end().ends_with("tests/passes.rs"), "{stdout}");
}
