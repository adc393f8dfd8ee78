//! Hub features beyond the call path: the vision endpoint devices upload photos to, media
//! results saved by `call --save-images`, and configuration precedence.

mod common;

use common::fake_device::{FakeDevice, tool};
use common::vision::{self, post_parts, text, vision_of};
use common::{HubProcess, mcpdev};
use serde_json::{Value, json};

/// POSTs a multipart upload the way the stock firmware's `self.camera.take_photo` does; returns
/// the status code and the body.
async fn upload(url: &str, token: &str, question: &str, photo: &[u8]) -> (u16, Value) {
    upload_as(url, "aa:00:00:00:00:0e", token, question, photo).await
}

/// [`upload`] with any `Device-Id` header.
async fn upload_as(url: &str, device_id: &str, token: &str, question: &str, photo: &[u8]) -> (u16, Value) {
    post_parts(url, device_id, token, &[text("question", question), vision::photo("file", photo)]).await
}

#[tokio::test]
async fn the_vision_endpoint_saves_photos_for_devices_that_have_its_token() {
    let dir = tempfile::tempdir().unwrap();
    let hub = HubProcess::start(&["--vision-dir", dir.path().to_str().unwrap()], &[]).await;
    // The device learns the endpoint and its token from initialize.
    let (_dev, url, token) = vision_of(&hub, "aa:00:00:00:00:0e").await;
    let (url, token) = (url.as_str(), token.as_str());
    let port = hub.device_url.rsplit(':').next().unwrap().split('/').next().unwrap();
    assert_eq!(url, format!("http://127.0.0.1:{port}/mcp/vision/explain"));
    assert!(token.len() >= 16, "a random token: {token}");

    let jpeg = [0xff, 0xd8, 0xff, 0xe0, 1, 2, 3, 4];
    let (status, body) = upload(url, token, "what is on the desk?", &jpeg).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["success"], true);
    assert!(body["text"].as_str().unwrap().contains("JPEG"), "{body}");
    let saved = dir.path().join(body["file"].as_str().unwrap());
    assert_eq!(std::fs::read(&saved).unwrap(), jpeg);

    let (status, body) = upload(url, "wrong", "q", &jpeg).await;
    assert_eq!((status, body["success"].clone()), (401, json!(false)));
}

/// Every file under `root`, recursively.
fn files_under(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(root).unwrap().flatten() {
        let p = e.path();
        if p.symlink_metadata().unwrap().is_dir() { out.extend(files_under(&p)) } else { out.push(p) }
    }
    out
}

/// Issue 10 item 3: uploads land only in the vision folder, under names the hub makes, for the
/// device whose own token they carry; the folder is capped; the answer names no server path.
#[tokio::test]
async fn the_vision_endpoint_keeps_uploads_in_its_folder_per_device_and_capped() {
    let root = tempfile::tempdir().unwrap();
    let vision_dir = root.path().join("a/b/vision");
    std::fs::create_dir_all(root.path().join("outside")).unwrap();
    let hub = HubProcess::start(&["--vision-dir", vision_dir.to_str().unwrap(), "--vision-max-files", "5"], &[]).await;
    let (_a, url, token_a) = vision_of(&hub, "aa:00:00:00:00:1a").await;
    let (_b, _, token_b) = vision_of(&hub, "aa:00:00:00:00:1b").await;
    assert_ne!(token_a, token_b, "each device has its own vision token");
    let jpeg = [0xff, 0xd8, 0xff, 0xe0, 9, 9, 9, 9];

    // Hostile Device-Ids, each with a token the hub handed out: refused, nothing written.
    let outside = root.path().join("outside/x");
    for id in ["../../x", "../../../outside/x", outside.to_str().unwrap(), "..%2f..%2fx", "aa:00:00:00:00:1a/../x", ""] {
        let (status, body) = upload_as(&url, id, &token_a, "q", &jpeg).await;
        assert_eq!(status, 400, "Device-Id {id:?}: {body}");
    }
    // A MAC with another device's token, or with a made-up one: refused.
    for (id, token) in [("aa:00:00:00:00:1a", token_b.as_str()), ("aa:00:00:00:00:1b", token_a.as_str()), ("aa:00:00:00:00:1c", token_a.as_str()), ("aa:00:00:00:00:1a", "wrong")] {
        let (status, body) = upload_as(&url, id, token, "q", &jpeg).await;
        assert_eq!(status, 401, "{id} with another token: {body}");
    }
    assert!(files_under(root.path()).is_empty(), "refused uploads wrote {:?}", files_under(root.path()));

    // Six uploads keep the five newest; the answer has the file's name, not its path.
    let mut names = Vec::new();
    for i in 0..6 {
        let (status, body) = upload_as(&url, "AA-00-00-00-00-1A", &token_a, &format!("photo {i}"), &jpeg).await;
        assert_eq!(status, 200, "{body}");
        let text = body.to_string();
        assert!(!text.contains(root.path().to_str().unwrap()) && !text.contains("vision/"), "the answer shows a server path: {text}");
        names.push(body["file"].as_str().unwrap().to_string());
    }
    let kept = files_under(root.path());
    assert_eq!(kept.len(), 5, "{kept:?}");
    assert!(kept.iter().all(|p| p.starts_with(&vision_dir)), "{kept:?}");
    assert!(!vision_dir.join(&names[0]).exists() && vision_dir.join(&names[5]).exists(), "the oldest upload goes first");
}

#[tokio::test]
async fn call_saves_images_and_summarises_them_otherwise() {
    let hub = HubProcess::start(&[], &[]).await;
    let id = "aa:00:00:00:00:0f";
    let mut dev = FakeDevice::connect(&hub.device_url, id, vec![tool("cam.snap")]).await;
    let png = [0x89u8, b'P', b'N', b'G', 13, 10, 26, 10];
    let data = base64_encode(&png);
    let dir = tempfile::tempdir().unwrap();
    let dir_arg = dir.path().to_str().unwrap().to_string();
    for save in [false, true] {
        let mut args = vec!["call", "cam.snap", "n=1", "-d", id];
        if save {
            args.extend(["--save-images", &dir_arg]);
        }
        let answer = async {
            let req = dev.recv_request("tools/call").await;
            dev.reply(&req["id"], json!({"content":[{"type":"image","mimeType":"image/png","data":data}],"isError":false})).await;
        };
        let (out, ()) = tokio::join!(mcpdev(&hub, &args), answer);
        assert_eq!(out.code, 0, "{out:?}");
        if save {
            let path = dir.path().join("cam.snap-0.png");
            assert_eq!(std::fs::read(&path).unwrap(), png);
            assert!(out.stdout.contains("saved to"), "{}", out.stdout);
        } else {
            assert!(out.stdout.contains("[image image/png, 8 bytes; --save-images DIR saves it]"), "{}", out.stdout);
        }
    }
}

fn base64_encode(b: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(b)
}

#[tokio::test]
async fn flags_beat_environment_beats_mcpdev_toml() {
    let hub = HubProcess::start(&["--demo", "2"], &[]).await;
    let work = tempfile::tempdir().unwrap();
    std::fs::write(
        work.path().join("mcpdev.toml"),
        format!("hub = \"{}\"\ndevice = \"desk\"\n[aliases]\ndesk = \"02:00:00:00:00:02\"\n", hub.host_url),
    )
    .unwrap();
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"));
        cmd.current_dir(work.path()).args(args).env_remove("MCPDEV_HUB").env_remove("MCPDEV_DEVICE").env("NO_COLOR", "1");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        (out.status.code().unwrap(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let device_of = |out: &(i32, String, String)| -> String {
        assert_eq!(out.0, 0, "{out:?}");
        serde_json::from_str::<Value>(&out.1).unwrap()["device_id"].as_str().unwrap().to_string()
    };
    // The file gives the hub and the device (through an alias)…
    assert_eq!(device_of(&run(&["hello", "--json", "--wait", "10s"], &[])), "02:00:00:00:00:02");
    // …the environment beats the file…
    assert_eq!(device_of(&run(&["hello", "--json", "--wait", "10s"], &[("MCPDEV_DEVICE", "02:00:00:00:00:01")])), "02:00:00:00:00:01");
    // …and a flag beats both.
    let flag = run(&["hello", "--json", "-d", "02:00:00:00:00:02", "--wait", "10s"], &[("MCPDEV_DEVICE", "02:00:00:00:00:01")]);
    assert_eq!(device_of(&flag), "02:00:00:00:00:02");
    // A typo in the file is an error that names the file.
    std::fs::write(work.path().join("mcpdev.toml"), "hubb = \"x\"\n").unwrap();
    let bad = run(&["hello"], &[]);
    assert_eq!(bad.0, 2);
    assert!(bad.2.contains("mcpdev.toml") && bad.2.contains("hubb"), "{}", bad.2);
}

#[tokio::test]
async fn a_failed_onboarding_is_reported_not_hidden() {
    let hub = HubProcess::start(&["--onboarding-timeout", "300ms"], &[]).await;
    let id = "aa:00:00:00:00:10";
    let mut req = tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(hub.device_url.as_str()).unwrap();
    req.headers_mut().insert("Device-Id", id.parse().unwrap());
    let (ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    let mut dev = FakeDevice { ws, session_id: String::new() };
    dev.send(json!({"type":"hello","version":1,"features":{"mcp":true},"transport":"websocket"})).await;
    dev.recv().await;
    let init = dev.recv_request("initialize").await;
    dev.reply(&init["id"], json!({"protocolVersion":"2024-11-05","serverInfo":{"name":"mute","version":"1"}})).await;
    // tools/list is never answered: each timeout is retried (5 attempts in all), then onboarding
    // has failed, and every command that relies on it fails with exit 9 naming the step.
    for _ in 0..5 {
        assert_eq!(dev.recv_request("tools/list").await["params"]["cursor"], "");
    }
    let step = "onboarding failed at tools/list page 1: no answer within 300ms (5 attempts)";
    let list = mcpdev(&hub, &["tools", "list", "-d", id, "--wait", "20s", "--json"]).await;
    assert_eq!(list.code, 9, "{list:?}");
    assert!(list.stderr.contains(step) && list.stderr.contains("--refresh"), "{}", list.stderr);
    assert_eq!(list.stdout, "", "no tool list is printed for a failed onboarding");
    let init = mcpdev(&hub, &["init", "-d", id]).await;
    assert_eq!(init.code, 9, "{init:?}");
    assert!(init.stderr.contains(step), "{}", init.stderr);
    let call = mcpdev(&hub, &["call", "self.audio_speaker.set_volume", "volume=1", "-d", id]).await;
    assert_eq!(call.code, 9, "{call:?}");
    assert!(call.stderr.contains(step), "{}", call.stderr);
    // hello shows the state: attempt 5 of 5, failed, the last error.
    let hello = mcpdev(&hub, &["hello", "-d", id, "--json"]).await;
    assert_eq!(hello.code, 0, "{hello:?}");
    let onboarding = &hello.json()["onboarding"];
    assert_eq!((onboarding["attempt"].as_u64(), onboarding["max_attempts"].as_u64(), onboarding["failed"].as_bool()), (Some(5), Some(5), Some(true)), "{}", hello.stdout);
    assert_eq!(onboarding["last_error"], "tools/list page 1: no answer within 300ms");
    // --refresh starts onboarding over; this time the device answers.
    let refreshed = tokio::spawn(mcpdev(&hub, &["tools", "list", "-d", id, "--refresh", "--json"]));
    let init = dev.recv_request("initialize").await;
    dev.reply(&init["id"], json!({"protocolVersion":"2024-11-05","serverInfo":{"name":"mute","version":"1"}})).await;
    let list_req = dev.recv_request("tools/list").await;
    dev.reply(&list_req["id"], json!({"tools": [tool("self.back")]})).await;
    let refreshed = refreshed.await.unwrap();
    assert_eq!(refreshed.code, 0, "{refreshed:?}");
    assert_eq!(refreshed.json()["tools"][0]["name"], "self.back");
}

/// Issue 22 item 8: photos are private to the hub's user. Without `--vision-dir` they go to
/// `vision/` in the state directory (never the current directory), the folder 0700 and each
/// photo 0600; a `--vision-dir` that other users can enter is refused, not changed.
#[cfg(unix)]
#[tokio::test]
async fn vision_photos_are_private_and_kept_under_the_state_directory() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let state = tempfile::tempdir().unwrap();
    let hub = HubProcess::start(&[], &[("MCPDEV_STATE_DIR", state.path().to_str().unwrap())]).await;
    let (_dev, url, token) = vision_of(&hub, "aa:00:00:00:00:0e").await;
    let (status, body) = upload(&url, &token, "q", &[0xff, 0xd8, 0xff, 0xe0, 1]).await;
    assert_eq!(status, 200, "{body}");
    let folder = state.path().join("vision");
    let photo = folder.join(body["file"].as_str().unwrap());
    assert!(photo.is_file(), "the photo is under the state directory: {body}");
    assert_eq!(mode(&folder), 0o700, "the folder");
    assert_eq!(mode(&photo), 0o600, "the photo");
    assert!(!std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("mcpdev-vision").join(body["file"].as_str().unwrap()).exists(), "nothing in the current directory");

    // A folder of ours that others can enter (`mkdir photos`, 0755) is made private; the shared
    // /tmp (sticky, another user's) is refused and left as it is.
    let mine = tempfile::tempdir().unwrap();
    std::fs::set_permissions(mine.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let hub = HubProcess::start(&["--vision-dir", mine.path().to_str().unwrap()], &[]).await;
    let (_dev, url, token) = vision_of(&hub, "aa:00:00:00:00:0e").await;
    let (status, body) = upload(&url, &token, "q", &[0xff, 0xd8, 0xff, 0xe0, 1]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!((mode(mine.path()), mode(&mine.path().join(body["file"].as_str().unwrap()))), (0o700, 0o600));
    // Another user's folder: refused and left as it is (as root, a folder given to `nobody`).
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let theirs = tempfile::tempdir().unwrap();
        std::fs::set_permissions(theirs.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::chown(theirs.path(), Some(65534), Some(65534)).unwrap();
        let hub = HubProcess::start(&["--vision-dir", theirs.path().to_str().unwrap()], &[]).await;
        let (_dev, url, token) = vision_of(&hub, "aa:00:00:00:00:0e").await;
        let (status, body) = upload(&url, &token, "q", &[0xff, 0xd8, 0xff, 0xe0, 1]).await;
        assert_eq!(status, 500, "{body}");
        assert!(!body.to_string().contains(theirs.path().to_str().unwrap()), "no server path to the device: {body}");
        assert_eq!(mode(theirs.path()), 0o755, "another user's folder is never changed");
        assert_eq!(std::fs::read_dir(theirs.path()).unwrap().count(), 0, "nothing saved there");
    } else {
        eprintln!("vision_photos_are_private…: not root, so another user's folder is not tried");
    }
}
