//! `mcpdev flash` without hardware: images for both chips checked by esptool (PyPI, from the venv
//! `.ci/test` makes; `MCPDEV_TEST_ESPTOOL`), the provisioning record in a merged image read back
//! by the firmware's own decoder, and the serial port errors (exit code 8).
//!
//! The image tests build the firmware in `firmware/` through `mcpdev flash` (minutes on a cold
//! target dir; cargo's cache makes later runs fast). A missing esptool is a failure, not a skip.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const URL: &str = "ws://192.168.4.2:8000/xiaozhi/v1/";
const PASSWORD: &str = "correct horse battery";
const TOKEN: &str = "device-token-0123456789";

/// `mcpdev ARGS` with the flash-related environment cleared, then `env` set.
fn mcpdev(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpdev"));
    cmd.args(args).env("NO_COLOR", "1").stdin(Stdio::null());
    for k in ["MCPDEV_PORT", "MCPDEV_WIFI_SSID", "MCPDEV_WIFI_PASSWORD", "MCPDEV_HUB_URL", "MCPDEV_DEVICE_TOKEN", "MCPDEV_FIRMWARE_DIR", "MCPDEV_BAUD"] {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run mcpdev")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn esptool() -> PathBuf {
    if let Some(p) = std::env::var_os("MCPDEV_TEST_ESPTOOL") {
        return PathBuf::from(p);
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/venv/bin/esptool");
    assert!(venv.exists(), "esptool is missing: run .ci/test (it installs esptool into .ci/venv) or set MCPDEV_TEST_ESPTOOL");
    venv
}

/// `esptool --chip CHIP image-info FILE`; asserts a valid checksum and SHA-256 and the chip id.
fn assert_esptool_accepts(chip: &str, chip_id: u32, file: &Path) {
    let out = Command::new(esptool()).args(["--chip", chip, "image-info"]).arg(file).output().expect("run esptool");
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "esptool image-info {} failed:\n{stdout}\n{}", file.display(), text(&out.stderr));
    let line = |prefix: &str| stdout.lines().find(|l| l.trim_start().starts_with(prefix)).map(str::to_string);
    let checksum = line("Checksum:").unwrap_or_else(|| panic!("no checksum line:\n{stdout}"));
    assert!(checksum.ends_with("(valid)"), "{checksum}\n{stdout}");
    let hash = line("Validation hash:").unwrap_or_else(|| panic!("no validation hash line:\n{stdout}"));
    assert!(hash.ends_with("(valid)"), "{hash}\n{stdout}");
    let id = line("Chip ID:").unwrap_or_else(|| panic!("no chip id line:\n{stdout}"));
    assert!(id.starts_with(&format!("Chip ID: {chip_id} ")), "{id}, expected {chip_id}\n{stdout}");
}

/// App-only and merged images for one chip, each checked by esptool; the merged one's
/// provisioning sector decoded by the firmware's own parser.
fn images_for(chip: &str, chip_id: u32) {
    let dir = tempfile::tempdir().unwrap();
    let app = dir.path().join(format!("{chip}.bin"));
    let secrets = [("MCPDEV_WIFI_PASSWORD", PASSWORD), ("MCPDEV_DEVICE_TOKEN", TOKEN)];
    let out = mcpdev(&["flash", "--chip", chip, "--save-image", app.to_str().unwrap()], &secrets);
    assert!(out.status.success(), "save-image {chip}: {}", text(&out.stderr));
    assert!(text(&out.stdout).contains("bytes"), "{}", text(&out.stdout));
    assert_esptool_accepts(chip, chip_id, &app);
    let app_bytes = std::fs::read(&app).unwrap();
    assert!(!contains(&app_bytes, PASSWORD.as_bytes()) && !contains(&app_bytes, TOKEN.as_bytes()), "secrets in the app image");

    let merged = dir.path().join(format!("{chip}-merged.bin"));
    let out = mcpdev(
        &["flash", "--json", "--chip", chip, "--save-image", merged.to_str().unwrap(), "--merge", "--wifi-ssid", "lab-net", "--hub-url", URL],
        &secrets,
    );
    assert!(out.status.success(), "save-image --merge {chip}: {}", text(&out.stderr));
    let saved: serde_json::Value = text(&out.stdout).lines().filter_map(|l| serde_json::from_str(l).ok()).find(|v: &serde_json::Value| v["event"] == "saved").expect("a saved event");
    assert_eq!(saved["provisioned"], true);
    assert_esptool_accepts(chip, chip_id, &merged);
    let bytes = std::fs::read(&merged).unwrap();
    assert_eq!(bytes.len(), 0x10000 + app_bytes.len(), "merged = bootloader, table, record, then the app at 0x10000");
    assert_eq!(&bytes[0x10000..], &app_bytes[..], "the merged image's app is the app image");

    // The record, read back with the firmware's decoder.
    let offset = provisioning::FLASH_OFFSET as usize;
    let mut sector = bytes[offset..offset + provisioning::SECTOR_SIZE].to_vec();
    let record = provisioning::decode(&sector).expect("the firmware decodes the record mcpdev wrote");
    assert_eq!(record.wifi_ssid, "lab-net");
    assert_eq!(record.wifi_password, PASSWORD);
    assert_eq!(record.hub_url, URL);
    assert_eq!(record.token, TOKEN);
    // A merged image for no board in particular carries a fresh random identity (never one
    // derived from a MAC): a Client-Id that is a random UUID, and a device key.
    let client_id = record.client_id.expect("a Client-Id in the record");
    assert_eq!(client_id[6] >> 4, 4, "a random (version 4) UUID: {}", provisioning::format_uuid(&client_id));
    assert!(record.device_key.len() >= 16, "a device key in the record");
    // A flipped byte inside the record is caught by its CRC.
    sector[12] ^= 0x01;
    assert!(matches!(provisioning::decode(&sector), Err(provisioning::DecodeError::BadCrc { .. })), "{:?}", provisioning::decode(&sector));
    // The partition table at 0x8000 names the record's partition.
    assert!(contains(&bytes[0x8000..0x9000], provisioning::PARTITION_LABEL.as_bytes()));
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn esp32c3_images_pass_esptool_and_carry_the_record() {
    images_for("esp32c3", 5);
}

#[test]
fn esp32c6_images_pass_esptool_and_carry_the_record() {
    images_for("esp32c6", 13);
}

#[test]
fn a_merged_image_needs_provisioning_inputs_and_never_takes_the_password_from_argv() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("x.bin");
    let out = mcpdev(&["flash", "--chip", "esp32c3", "--save-image", file.to_str().unwrap(), "--merge", "--hub-url", URL], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("--wifi-ssid"), "{}", text(&out.stderr));
    let out = mcpdev(&["flash", "--chip", "esp32c3", "--save-image", file.to_str().unwrap(), "--merge", "--wifi-ssid", "x", "--hub-url", URL], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("MCPDEV_WIFI_PASSWORD"), "{}", text(&out.stderr));
    assert!(!file.exists());
}

/// Exit code 8 with the ports seen listed.
fn assert_port_error(out: &Output, what: &str) {
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(8), "{stderr}");
    assert!(stderr.contains(what), "expected {what:?} in:\n{stderr}");
    assert!(stderr.contains("ports seen:"), "the ports seen are listed:\n{stderr}");
}

#[test]
fn no_esp_port_at_all_is_exit_8() {
    // A test machine has no ESP board plugged in; whatever ports it has are listed.
    let out = mcpdev(&["flash", "--chip", "esp32c3", "--no-provision"], &[]);
    assert_port_error(&out, "no serial port found");
}

#[test]
fn a_missing_port_is_exit_8() {
    let out = mcpdev(&["flash", "--chip", "esp32c3", "--no-provision", "--port", "/dev/mcpdev-missing"], &[]);
    assert_port_error(&out, "serial port /dev/mcpdev-missing does not exist");
    // The same through the environment variable, with --json: the error is one JSON line.
    let out = mcpdev(&["flash", "--json", "--chip", "esp32c3", "--no-provision"], &[("MCPDEV_PORT", "/dev/mcpdev-missing")]);
    assert_eq!(out.status.code(), Some(8));
    let err: serde_json::Value = serde_json::from_str(text(&out.stderr).trim()).expect("one JSON error line");
    assert_eq!(err["error"]["code"], 8);
}

#[test]
fn a_port_that_is_not_an_esp_chip_is_exit_8_within_seconds() {
    // A pseudo-terminal: a serial port nothing answers on.
    let (mut master, mut slave) = (0, 0);
    let mut name = [0 as libc::c_char; 128];
    let rc = unsafe { libc::openpty(&mut master, &mut slave, name.as_mut_ptr(), std::ptr::null(), std::ptr::null()) };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    let path = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }.to_string_lossy().into_owned();
    let started = Instant::now();
    let out = mcpdev(&["flash", "--chip", "esp32c3", "--no-provision", "--port", &path], &[]);
    let took = started.elapsed();
    unsafe {
        libc::close(slave);
        libc::close(master);
    }
    assert_port_error(&out, &format!("{path} did not answer as an ESP chip"));
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

/// `--wait-device`'s wait: nothing at first (the device is still booting), then the device with
/// the flashed chip's MAC connects and its hello comes back. A virtual device stands in for it.
#[tokio::test]
async fn wait_device_returns_the_hello_once_the_device_is_online() {
    let hub = common::HubProcess::start(&[], &[]).await;
    let mac = "02:00:00:00:f1:a5";
    let early = mcpdev::flash::wait::wait_for_device(&hub.host_url, mac, Duration::from_millis(300)).await.unwrap_err();
    assert_eq!(early.exit, mcpdev::exit::Exit::Timeout, "{}", early.message);
    assert!(early.message.contains(mac), "{}", early.message);
    let waiting = tokio::spawn({
        let url = hub.host_url.clone();
        async move { mcpdev::flash::wait::wait_for_device(&url, mac, Duration::from_secs(30)).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _device = common::spawn_mcpdev(&["sim", "--url", &hub.device_url, "--device-id", mac], &[]);
    let info = waiting.await.unwrap().expect("the device came online");
    assert_eq!(info["device_id"], mac);
    assert_eq!(info["hello"]["type"], "hello");
}

/// `--board-info`, `--erase` and `--monitor-only` find their port as flashing does: a missing
/// port is exit 8 with the ports seen, and none of them builds or asks for Wi-Fi first.
#[test]
fn board_info_erase_and_monitor_only_need_a_port_like_flashing() {
    for extra in [&["--board-info"][..], &["--erase", "--no-provision", "--chip", "esp32c3"], &["--monitor-only"]] {
        let mut args = vec!["flash", "--port", "/dev/mcpdev-missing"];
        args.extend_from_slice(extra);
        let out = mcpdev(&args, &[]);
        assert_port_error(&out, "serial port /dev/mcpdev-missing does not exist");
        assert!(!text(&out.stderr).contains("building"), "{extra:?} built the firmware: {}", text(&out.stderr));
    }
    let out = mcpdev(&["flash", "--monitor-only", "--save-image", "x.bin"], &[]);
    assert_eq!(out.status.code(), Some(2), "--monitor-only only monitors: {}", text(&out.stderr));
}
