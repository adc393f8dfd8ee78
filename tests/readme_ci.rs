//! The README's "Use it in CI" block, taken from the README and run as written with bash, on a
//! free port pair (the environment variables the block honours), a virtual device standing in
//! for the flashing step. And what it relies on: a hub that cannot bind fails at once naming the
//! flag; `--wait` waits for a hub that is still starting; a device that is not there is an error
//! at once that lists what is.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::{HubProcess, mcpdev};
use tokio::io::{AsyncBufReadExt, BufReader};

/// A port nothing listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The first ```sh block after the "## Use it in CI" heading.
fn readme_ci_block() -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let section = readme.split("\n## Use it in CI").nth(1).expect("the README has a \"Use it in CI\" section");
    let start = section.find("```sh\n").expect("a sh block") + "```sh\n".len();
    section[start..].split("\n```").next().unwrap().to_string()
}

#[tokio::test]
async fn the_readme_ci_recipe_passes_as_written() {
    let script = readme_ci_block();
    const BOOT: &str = "# … flash or boot the device under test here …";
    assert!(script.contains(BOOT), "the recipe keeps its device placeholder:\n{script}");
    let script = script.replace(BOOT, r#"mcpdev sim --url "ws://$MCPDEV_DEVICE_ADDR/xiaozhi/v1/" --device-id "$DEVICE" -q & trap 'kill $hub $!' EXIT"#);
    let dir = tempfile::tempdir().unwrap();
    let bin_dir = std::path::Path::new(env!("CARGO_BIN_EXE_mcpdev")).parent().unwrap().to_path_buf();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let host = format!("127.0.0.1:{}", free_port());
    let device = format!("127.0.0.1:{}", free_port());
    let mut cmd = tokio::process::Command::new("bash");
    cmd.arg("-c")
        .arg(&script)
        .current_dir(dir.path())
        .env("PATH", path)
        .env("MCPDEV_HOST_ADDR", &host)
        .env("MCPDEV_DEVICE_ADDR", &device)
        .env("DEVICE", "02:00:00:00:00:51")
        .env_remove("MCPDEV_HUB")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output()).await.expect("the recipe finished").unwrap();
    let log = std::fs::read_to_string(dir.path().join("hub.log")).unwrap_or_default();
    assert!(out.status.success(), "the README's CI block failed: {out:?}\nhub.log:\n{log}");
    assert!(log.lines().any(|l| l.contains("\"event\":\"ready\"") && l.contains("02:00:00:00:00:51")), "hub.log tells the device's story:\n{log}");
}

#[tokio::test]
async fn a_port_that_is_taken_ends_serve_at_once_naming_the_flag() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    for (flag, other) in [("--device-addr", "--host-addr"), ("--host-addr", "--device-addr")] {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"));
        cmd.args(["serve", flag, &addr, other, "127.0.0.1:0"]).stdin(Stdio::null()).kill_on_drop(true);
        let out = tokio::time::timeout(Duration::from_secs(20), cmd.output()).await.expect("serve gave up at once").unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {stderr}");
        assert!(stderr.contains(flag) && stderr.contains(&addr), "{flag}: {stderr}");
    }
}

#[tokio::test]
async fn wait_covers_a_hub_that_is_still_starting() {
    let host = format!("127.0.0.1:{}", free_port());
    let hub_url = format!("http://{host}");
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"));
    cmd.args(["tools", "list", "-d", "02:00:00:00:00:01", "--wait", "60s", "--hub", &hub_url, "-v"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut cli = cmd.spawn().unwrap();
    // The hub starts only once the CLI has found nothing there.
    let mut stderr = BufReader::new(cli.stderr.take().unwrap()).lines();
    loop {
        let line = tokio::time::timeout(Duration::from_secs(30), stderr.next_line()).await.expect("the CLI says it waits").unwrap().expect("the CLI runs");
        if line.contains("not reachable yet") {
            break;
        }
    }
    let mut serve = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"));
    serve.args(["serve", "--host-addr", &host, "--device-addr", "127.0.0.1:0", "--demo", "1", "-q"]).stdin(Stdio::null()).kill_on_drop(true);
    let _hub = serve.spawn().unwrap();
    let out = tokio::time::timeout(Duration::from_secs(60), cli.wait_with_output()).await.expect("the CLI finished").unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("self.audio_speaker.set_volume"));
}

#[tokio::test]
async fn a_device_that_is_not_there_is_an_error_at_once_that_lists_what_is() {
    let hub = HubProcess::start(&["--demo", "1"], &[]).await;
    assert_eq!(mcpdev(&hub, &["hello", "-d", "02:00:00:00:00:01", "--wait", "10s"]).await.code, 0);
    let started = std::time::Instant::now();
    let out = mcpdev(&hub, &["tools", "list", "-d", "aa:bb:cc:00:00:99"]).await;
    // Not the 10 s a connected device may take to onboard: the hub knows at once.
    assert!(started.elapsed() < Duration::from_secs(8), "waited {:?}", started.elapsed());
    assert_eq!(out.code, 4, "{out:?}");
    assert!(out.stderr.contains("aa:bb:cc:00:00:99"), "{}", out.stderr);
    assert!(out.stderr.contains(&hub.host_url), "names the hub it asked: {}", out.stderr);
    assert!(out.stderr.contains("connected devices: 02:00:00:00:00:01 (ready"), "lists what is there: {}", out.stderr);
    assert!(out.stderr.contains("help: --wait"), "{}", out.stderr);
}

/// Every `cargo install` of this tree in the docs is `--locked`: without it cargo resolves the
/// dependencies again, to versions the tests never ran with, and builds them all a second time.
#[test]
fn every_install_in_the_docs_is_locked() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md"), root.join("firmware/README.md")];
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            files.push(path);
        }
    }
    let mut unlocked = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            for at in line.match_indices("cargo install --path").map(|(i, _)| i) {
                // The command runs to the end of its code span or line.
                let command = line[at..].split('`').next().unwrap();
                if !command.contains("--locked") {
                    unlocked.push(format!("{}:{}: {command}", file.display(), n + 1));
                }
            }
        }
    }
    assert!(files.len() > 3, "the docs were read: {files:?}");
    assert!(unlocked.is_empty(), "installs without --locked:\n{}", unlocked.join("\n"));
}
