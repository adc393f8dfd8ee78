//! `mcpdev remote-token` as a person uses it on the hub's machine: `create NAME > file` leaves no
//! file others can read (made 0600, or `--out FILE`, written 0600), and `list` is a table like the
//! others (lower-case headers, a final newline).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// `mcpdev remote-token ARGS` with the state directory `state`, its stdout going to `stdout`.
fn remote_token(state: &Path, args: &[&str], stdout: Stdio) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mcpdev"))
        .arg("remote-token")
        .args(args)
        .env("MCPDEV_STATE_DIR", state)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn a_token_redirected_to_a_file_others_could_read_is_made_private() {
    let state = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    // What `> alice.token` makes with a umask of 022.
    let file = dir.path().join("alice.token");
    let f = std::fs::File::create(&file).unwrap();
    f.set_permissions(std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = remote_token(state.path(), &["create", "alice"], Stdio::from(f));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(mode(&file), 0o600, "{stderr}");
    assert!(stderr.contains("mode 0644") && stderr.contains("0600"), "said so: {stderr}");
    assert!(std::fs::read_to_string(&file).unwrap().trim().starts_with("mcpdev_rt_"), "the file holds the token");

    // Into a pipe: nothing to change, nothing said about it.
    let out = remote_token(state.path(), &["create", "bob"], Stdio::piped());
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("mode 0"), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn out_writes_the_token_readable_by_its_owner_only() {
    let state = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("carol.token");
    let out = remote_token(state.path(), &["create", "carol", "--out", file.to_str().unwrap()], Stdio::piped());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(out.stdout.is_empty(), "the token is not printed too");
    assert_eq!(mode(&file), 0o600);
    assert!(std::fs::read_to_string(&file).unwrap().trim().starts_with("mcpdev_rt_"));
    assert!(stderr.contains(file.to_str().unwrap()), "{stderr}");
    // A file that cannot be written: an error, and no token left behind.
    let out = remote_token(state.path(), &["create", "dave", "--out", "/nonexistent-dir/dave.token"], Stdio::piped());
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    let list = remote_token(state.path(), &["list"], Stdio::piped());
    assert!(!String::from_utf8_lossy(&list.stdout).contains("dave"), "the unwritten token was withdrawn");
}

#[test]
fn the_list_is_a_table_like_the_others() {
    let state = tempfile::tempdir().unwrap();
    assert!(remote_token(state.path(), &["create", "alice"], Stdio::piped()).status.success());
    let out = remote_token(state.path(), &["list"], Stdio::piped());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.ends_with('\n'), "a final newline: {stdout:?}");
    let header = stdout.lines().next().unwrap();
    assert!(header.starts_with("name") && header.contains("id") && header.contains("created"), "{header}");
    assert_eq!(header, header.to_lowercase(), "lower-case headers, as `devices` and `tasks` have");
    assert!(stdout.lines().nth(1).is_some_and(|l| l.starts_with("alice")), "{stdout}");
}
