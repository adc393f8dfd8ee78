//! `mcpdev flash`: build, make the image, flash and provision (or save the image). The work is in
//! [`crate::flash`]; this module orders the steps and renders them.

use super::output::outln;
use anyhow::{Context, bail};
use serde_json::json;

use crate::cli::GlobalArgs;
use crate::exit::{CodedError, Exit};
use crate::flash::{Chip, FlashArgs, build, device, image, port, prebuilt, progress, record};

/// What was flashed: the chip's Device-Id (its MAC, if it told it) and the port.
struct Flashed {
    device_id: Option<String>,
    port: String,
}

pub async fn run(g: &GlobalArgs, args: FlashArgs) -> anyhow::Result<()> {
    if args.monitor_only {
        // The port is chosen as for flashing (exit 8 when there is none or it is gone).
        let port = port::select(args.port.as_deref(), &port::available())?;
        let (stop, mut worker) = start_monitor(g, &port.name, args.monitor_baud);
        tokio::select! {
            signal = super::stop_signal::stop_signal() => { signal?; }
            // The monitor ends by itself only on an error reading the port.
            ended = &mut worker => {
                ended.context("the monitor panicked")?.context("reading the serial log")?;
                return Ok(());
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        worker.await.context("the monitor panicked")?.context("reading the serial log")?;
        return Err(crate::exit::CodedError::interrupted().into());
    }
    let (g2, hub, wait) = (g.clone(), args.hub.clone(), args.wait_device);
    let (monitor, monitor_baud) = (args.monitor, args.monitor_baud);
    let flashed = tokio::task::spawn_blocking(move || run_blocking(&g2, &args)).await.context("the flash task panicked")??;
    let Some(flashed) = flashed else { return Ok(()) };
    let log = monitor.then(|| start_monitor(g, &flashed.port, monitor_baud));
    if let Some(wait) = wait {
        wait_device(g, &hub, flashed.device_id, wait).await?;
    }
    if let Some((stop, worker)) = log {
        super::stop_signal::stop_signal().await?;
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        worker.await.context("the monitor panicked")?.context("reading the serial log")?;
        return Err(crate::exit::CodedError::interrupted().into());
    }
    Ok(())
}

/// Shows the serial log in a thread of its own until the returned flag is set.
fn start_monitor(
    g: &GlobalArgs,
    port: &str,
    baud: u32,
) -> (std::sync::Arc<std::sync::atomic::AtomicBool>, tokio::task::JoinHandle<std::io::Result<()>>) {
    say(g, &format!("serial log of {port} at {baud} baud (Ctrl-C to stop):"));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (flag, port, json) = (stop.clone(), port.to_string(), g.json);
    let worker = tokio::task::spawn_blocking(move || crate::flash::monitor::monitor(&port, baud, json, &mut std::io::stdout(), &flag));
    (stop, worker)
}

async fn wait_device(g: &GlobalArgs, hub: &str, device_id: Option<String>, wait: std::time::Duration) -> anyhow::Result<()> {
    let device_id = device_id.context("the chip did not tell its MAC, so there is no Device-Id to wait for")?;
    let spinner = super::output::spinner(g, true, &format!("waiting for {device_id} at the hub {hub}"));
    let info = crate::flash::wait::wait_for_device(hub, &device_id, wait).await;
    if let Some(s) = spinner {
        s.finish_and_clear();
    }
    let info = info?;
    if g.json {
        event(g, json!({"event": "online", "device_id": device_id, "hello": info["hello"]}));
    } else {
        outln!("{device_id} is online at the hub; its hello:\n{}", serde_json::to_string_pretty(&info["hello"]).unwrap_or_default());
    }
    Ok(())
}

/// Status for people on stderr (not with --json or -q).
fn say(g: &GlobalArgs, msg: &str) {
    if !g.json && !g.quiet {
        eprintln!("{msg}");
    }
}

/// One NDJSON event on stdout (only with --json).
fn event(g: &GlobalArgs, v: serde_json::Value) {
    if g.json {
        outln!("{v}");
    }
}

fn usage(m: impl Into<String>) -> anyhow::Error {
    CodedError::new(Exit::Usage, m).into()
}

/// The record's inputs from the flags; `detected_ca` is where `serve --tls auto` keeps its CA.
fn record_inputs<'a>(args: &'a FlashArgs, detected_ca: &'a std::path::Path) -> record::Inputs<'a> {
    record::Inputs {
        wifi_ssid: args.wifi_ssid.as_deref(),
        hub_url: args.hub_url.as_deref(),
        hub_ca: record::hub_ca_choice(args.hub_ca.as_deref(), args.no_hub_ca, detected_ca),
    }
}

/// Flashes (or saves the image); returns the Device-Id (MAC) of the chip flashed.
fn run_blocking(g: &GlobalArgs, args: &FlashArgs) -> anyhow::Result<Option<Flashed>> {
    if let Some(out) = &args.save_image {
        return save_image(g, args, out).map(|()| None);
    }
    let prebuilt = match (&args.image, &args.flash_args) {
        (Some(path), _) => Some(prebuilt::merged_image(path)?),
        (None, Some(path)) => Some(prebuilt::flash_args(path)?),
        (None, None) => None,
    };
    if prebuilt.is_some() && (args.wifi_ssid.is_some() || args.hub_url.is_some()) {
        bail!(usage("--wifi-ssid/--hub-url provision mcpdev's firmware; a prebuilt image (--image, --flash-args) provisions itself"));
    }
    // Port first, and the record's inputs (maybe a prompt), so mistakes show before a long build.
    let seen = port::available();
    let port = port::select(args.port.as_deref(), &seen)?;
    let mut record = match (&prebuilt, args.no_provision || args.board_info) {
        (None, false) => Some(record::gather(&record_inputs(args, &crate::paths::hub_ca_file()), &record::Process)?),
        _ => None,
    };
    let fw_dir = if prebuilt.is_none() && !args.board_info { Some(build::firmware_dir(args.firmware_dir.as_deref())?) } else { None };

    say(g, &format!("connecting to {port} …"));
    let mut dev = device::connect(&port, None, args.baud, !args.no_verify, &seen)?;
    let detected = match dev.chip {
        espflash::target::Chip::Esp32c3 => Some(Chip::Esp32c3),
        espflash::target::Chip::Esp32c6 => Some(Chip::Esp32c6),
        _ => None,
    };
    if let Some(wanted) = args.chip
        && detected != Some(wanted)
    {
        bail!(usage(format!("the chip on {} is an {}, not the {} --chip names", port.name, dev.chip, wanted.name())));
    }
    let mac = dev.mac.clone();
    say(g, &format!("found an {} (MAC {})", dev.chip, mac.as_deref().unwrap_or("unknown")));
    event(g, json!({"event": "connected", "port": port.name, "chip": dev.chip.to_string(), "device_id": mac}));
    if let Some(r) = record.as_mut()
        && !args.board_info
    {
        identify(g, r, mac.as_deref())?;
    }
    if args.board_info {
        let info = dev.board_info()?;
        if g.json {
            event(g, json!({"event": "board_info", "port": port.name, "board": info}));
        } else {
            let text = |v: &serde_json::Value| v.as_str().map_or_else(|| v.to_string(), str::to_string);
            for key in ["chip", "revision", "crystal", "flash_size", "features", "mac"] {
                outln!("{key:<11} {}", text(&info[key]));
            }
        }
        dev.reset()?;
        return Ok(None);
    }
    if args.erase {
        say(g, "erasing the whole flash …");
        dev.erase_all()?;
        event(g, json!({"event": "erased", "port": port.name}));
    }

    let parts = match prebuilt {
        Some(parts) => parts,
        None => {
            let chip = detected.with_context(|| format!("mcpdev's firmware runs on the ESP32-C3 and ESP32-C6, not the {}", dev.chip))?;
            let fw_dir = fw_dir.expect("set when building");
            let img = build_image(g, &fw_dir, chip)?;
            let sector = record.as_ref().map(|r| r.encode_sector()).transpose().map_err(|e| usage(format!("cannot provision the device: {e}")))?;
            image::with_record(img.parts, sector)
        }
    };

    let mut bars = progress::Bars::default();
    let mut nd = progress::Ndjson::default();
    let mut silent = progress::Silent;
    let cb: &mut dyn espflash::target::ProgressCallbacks = if g.json {
        &mut nd
    } else if g.quiet {
        &mut silent
    } else {
        &mut bars
    };
    dev.write(&parts, cb)?;
    dev.reset()?;

    let hub = record.as_ref().map(|r| provisioning::loggable_url(&r.hub_url).to_string());
    let client_id = record.as_ref().and_then(|r| r.client_id.as_ref()).map(provisioning::format_uuid);
    event(g, json!({"event": "flashed", "port": port.name, "device_id": mac, "client_id": client_id, "verified": !args.no_verify, "provisioned": record.is_some(), "hub_url": hub}));
    if !g.json {
        let mut line = format!("flashed {} and reset it", port.name);
        if let Some(m) = &mac {
            line.push_str(&format!("; its Device-Id is {m}"));
        }
        if let Some(c) = &client_id {
            line.push_str(&format!(", its Client-Id {c}"));
        }
        outln!("{line}");
        if let Some(h) = hub {
            say(g, &format!("it will join Wi-Fi {:?} and connect to {h}", record.as_ref().map_or("", |r| r.wifi_ssid.as_str())));
        }
    }
    Ok(Some(Flashed { device_id: mac, port: port.name.clone() }))
}

/// Gives the record the board's Client-Id and device key (kept per MAC in the state directory;
/// see [`record::identify`]), saying so when they cannot be kept. The key is never shown.
fn identify(g: &GlobalArgs, record: &mut provisioning::Provisioning, mac: Option<&str>) -> anyhow::Result<()> {
    let boards = crate::paths::state_dir().join(crate::device_identity::BOARD_DIR);
    if !record::identify(record, &boards, mac)? {
        say(g, "the board has a fresh random Client-Id and device key that are not kept (no MAC to keep them by): flashing it again gives it new ones, and the hub will ask to approve it again");
    }
    Ok(())
}

/// Builds the firmware for `chip` and makes its image.
fn build_image(g: &GlobalArgs, fw_dir: &std::path::Path, chip: Chip) -> anyhow::Result<image::Image> {
    say(g, &format!("building the firmware for {} in {} …", chip.name(), fw_dir.display()));
    event(g, json!({"event": "build", "chip": chip.name(), "target": chip.target()}));
    let elf_path = build::build(fw_dir, chip, g.quiet || g.json)?;
    let elf = std::fs::read(&elf_path).with_context(|| format!("reading {}", elf_path.display()))?;
    let img = image::from_elf(&elf, chip)?;
    event(g, json!({"event": "built", "elf": elf_path, "app_size": img.app.len(), "partition_size": img.partition_size}));
    Ok(img)
}

fn save_image(g: &GlobalArgs, args: &FlashArgs, out: &std::path::Path) -> anyhow::Result<()> {
    let chip = args.chip.ok_or_else(|| usage("--save-image needs --chip (esp32c3 or esp32c6)"))?;
    // Only a merged image carries the record; the app alone never holds secrets.
    let record = if args.merge && !args.no_provision {
        let mut r = record::gather(&record_inputs(args, &crate::paths::hub_ca_file()), &record::Process)?;
        // No board to keep it by: the image carries a fresh pair, for the one board it goes on.
        record::identify(&mut r, std::path::Path::new(""), None)?;
        say(g, "the merged image carries a fresh random Client-Id and device key: write it to one board only (boards sharing them cannot be told apart)");
        Some(r)
    } else {
        None
    };
    let fw_dir = build::firmware_dir(args.firmware_dir.as_deref())?;
    let img = build_image(g, &fw_dir, chip)?;
    let app_len = img.app.len();
    let bytes = if args.merge {
        let sector = record.as_ref().map(|r| r.encode_sector()).transpose().map_err(|e| usage(format!("cannot provision the device: {e}")))?;
        image::merge(&image::with_record(img.parts, sector))?
    } else {
        img.app
    };
    std::fs::write(out, &bytes).with_context(|| format!("writing {}", out.display()))?;
    let kind = if args.merge { "merged image (write at 0x0)" } else { "app image (factory partition, 0x10000)" };
    if g.json {
        outln!("{}", json!({"event": "saved", "file": out, "chip": chip.name(), "bytes": bytes.len(), "merged": args.merge,
            "provisioned": record.is_some(), "app_bytes": app_len, "partition_size": img.partition_size}));
    } else if !g.quiet {
        outln!("saved the {} {kind} to {}: {} bytes", chip.name(), out.display(), bytes.len());
        outln!("{}", partition_usage(app_len as u64, img.partition_size));
    }
    Ok(())
}

/// What espflash prints after making an image: `App/part. size: 642,784/4,128,768 bytes, 15.57%`.
fn partition_usage(app: u64, partition: u64) -> String {
    let share = if partition == 0 { 0.0 } else { app as f64 * 100.0 / partition as f64 };
    format!("App/part. size: {}/{} bytes, {share:.2}%", thousands(app), thousands(partition))
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn partition_usage_reads_like_espflash() {
        assert_eq!(super::partition_usage(642_784, 4_128_768), "App/part. size: 642,784/4,128,768 bytes, 15.57%");
        assert_eq!(super::partition_usage(999, 1000), "App/part. size: 999/1,000 bytes, 99.90%");
    }
}
