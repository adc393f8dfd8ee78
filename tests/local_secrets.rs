//! Secrets go only where they belong (issue 22 items 5 and the `watch --record` surface): the
//! control token in the hub's file reaches only the loopback address of the hub that wrote it,
//! never another host nor another loopback address someone else may have bound on the same
//! port; `watch --record` never writes through a symbolic link planted at its path.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::HubProcess;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A listener that records what clients send (up to the end of their request head), then
/// refuses them with 401, as a stranger's server might.
async fn catcher(addr: std::net::SocketAddr) -> Option<(Arc<Mutex<Vec<String>>>, std::net::SocketAddr)> {
    let listener = tokio::net::TcpListener::bind(addr).await.ok()?;
    let bound = listener.local_addr().unwrap();
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf)).await {
                        Ok(Ok(n)) if n > 0 => head.extend_from_slice(&buf[..n]),
                        _ => break,
                    }
                }
                log.lock().unwrap().push(String::from_utf8_lossy(&head).into_owned());
                let _ = s.write_all(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").await;
            });
        }
    });
    Some((seen, bound))
}

/// Runs `mcpdev devices --hub HUB` with the hub's runtime directory (so the token file is there)
/// and `env`; exit code and stderr.
async fn devices(runtime: &str, hub: &str, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"));
    cmd.args(["devices", "--hub", hub]).env("MCPDEV_RUNTIME_DIR", runtime).env_remove("MCPDEV_HUB_TOKEN").env_remove("MCPDEV_HUB").env("NO_COLOR", "1").kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::time::timeout(Duration::from_secs(30), cmd.output()).await.expect("devices ended").unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// This machine's address on its default route, if it has one (no packet is sent).
fn lan_ip() -> Option<std::net::IpAddr> {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("192.0.2.1:9").ok()?;
    Some(s.local_addr().ok()?.ip()).filter(|ip| !ip.is_loopback() && !ip.is_unspecified())
}

#[tokio::test]
async fn the_control_token_goes_only_to_the_hub_that_wrote_it() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = dir.path().to_str().unwrap();
    let hub = HubProcess::start(&[], &[("MCPDEV_RUNTIME_DIR", runtime)]).await;
    let port: u16 = hub.host_url.rsplit(':').next().unwrap().parse().unwrap();
    let contents = std::fs::read_to_string(dir.path().join(format!("control-{port}.token"))).unwrap();
    let token = contents.lines().next().unwrap().to_string();

    // The hub itself, by its address and as localhost: the token is found and accepted.
    for url in [hub.host_url.clone(), format!("http://localhost:{port}")] {
        let (code, stderr) = devices(runtime, &url, &[]).await;
        assert_eq!(code, Some(0), "{url}: {stderr}");
    }

    // Strangers on the same port: another loopback address (anyone on this machine may bind
    // 127.0.0.2 while the hub has 127.0.0.1), [::1], and this machine's LAN address. Each
    // gets no connection with the token: the CLI stops with exit 3 and says what to do.
    let mut strangers = Vec::new();
    for addr in [format!("127.0.0.2:{port}"), format!("[::1]:{port}")].into_iter().chain(lan_ip().map(|ip| std::net::SocketAddr::new(ip, port).to_string())) {
        match catcher(addr.parse().unwrap()).await {
            Some(c) => strangers.push(c),
            None => eprintln!("cannot listen on {addr} here; that stranger is not tried"),
        }
    }
    assert!(!strangers.is_empty(), "127.0.0.2 at least can be bound on Linux");
    for (seen, addr) in &strangers {
        let url = format!("http://{addr}");
        let (code, stderr) = devices(runtime, &url, &[]).await;
        assert_eq!(code, Some(3), "{url}: {stderr}");
        assert!(stderr.contains("MCPDEV_HUB_TOKEN"), "says what to do: {stderr}");
        assert!(!stderr.contains(&token), "{stderr}");
        let got = seen.lock().unwrap().clone();
        assert!(got.iter().all(|h| !h.contains(&token)), "{url} got the token: {got:?}");
        assert!(got.is_empty(), "{url} was not even contacted without a token to send: {got:?}");
    }
    // A host that is not this machine at all (TEST-NET, unroutable): refused before connecting.
    let (code, stderr) = devices(runtime, &format!("http://192.0.2.1:{port}"), &[]).await;
    assert_eq!(code, Some(3), "{stderr}");

    // With MCPDEV_HUB_TOKEN the person chose what to send, and where: that token, never the file's.
    let (seen, addr) = &strangers[0];
    let (code, stderr) = devices(runtime, &format!("http://{addr}"), &[("MCPDEV_HUB_TOKEN", "the-env-token")]).await;
    assert_eq!(code, Some(3), "refused by the stranger: {stderr}");
    let got = seen.lock().unwrap().clone();
    assert!(got.iter().any(|h| h.contains("Bearer the-env-token")), "the catcher sees what is sent: {got:?}");
    assert!(got.iter().all(|h| !h.contains(&token)), "{got:?}");
}

/// `watch --record PATH` where someone planted a symbolic link at PATH (to a file of ours, in a
/// shared directory): refused with a clear error, and the link's target is untouched. A plain
/// path is created 0600 (the traffic carries the device's vision token).
#[cfg(unix)]
#[tokio::test]
async fn watch_record_never_follows_a_planted_symlink() {
    use std::os::unix::fs::PermissionsExt;
    let hub = HubProcess::start(&["--demo", "1"], &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("precious.txt");
    std::fs::write(&victim, "keep me").unwrap();
    let planted = dir.path().join("session.ndjson");
    std::os::unix::fs::symlink(&victim, &planted).unwrap();
    let out = common::mcpdev(&hub, &["watch", "-d", "02:00:00:00:00:01", "--record", planted.to_str().unwrap(), "--count", "1"]).await;
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("symbolic link"), "{}", out.stderr);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me", "the link's target is untouched");
    // A dangling link (to a file that does not exist yet) is not followed either.
    let target = dir.path().join("created-through-link");
    let dangling = dir.path().join("dangling.ndjson");
    std::os::unix::fs::symlink(&target, &dangling).unwrap();
    let out = common::mcpdev(&hub, &["watch", "-d", "02:00:00:00:00:01", "--record", dangling.to_str().unwrap(), "--count", "1"]).await;
    assert_eq!(out.code, 2, "{out:?}");
    assert!(!target.exists(), "nothing was created through the link");

    // A plain path: recorded, private.
    let plain = dir.path().join("plain.ndjson");
    let mut watch = common::spawn_mcpdev(
        &["watch", "-d", "02:00:00:00:00:01", "--record", plain.to_str().unwrap(), "--count", "1", "--json"],
        &[("MCPDEV_HUB", hub.host_url.as_str()), ("MCPDEV_RUNTIME_DIR", hub.runtime_dir.as_str())],
    );
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(watch.child.stdout.take().unwrap()));
    let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line()).await.expect("watching in time").unwrap().unwrap();
    assert!(first.contains("watching"), "{first}");
    assert_eq!(std::fs::metadata(&plain).unwrap().permissions().mode() & 0o777, 0o600);
}
