//! The firmware's hub connection (this crate's `connect::attempt` and `Backoff`, so WebSocket,
//! MQTT and the OTA check-in) on the host, with a few firmware-like tools, against any hub: a way
//! to try a hub with the firmware's exact connection code when no board is at hand.
//!
//! ```sh
//! cd firmware
//! cargo run -p hub-link --example host_device -- ws://127.0.0.1:8000/xiaozhi/v1/ [TOKEN] [MAC]
//! cargo run -p hub-link --example host_device -- mqtt://127.0.0.1:1883 [TOKEN] [MAC]
//! cargo run -p hub-link --example host_device -- http://127.0.0.1:8000/xiaozhi/ota/ [TOKEN] [MAC]
//! ```
//! `MCPDEV_DEVICE_KEY` (from the environment, never argv: it is a secret) gives the device a key
//! that goes out as `Mcpdev-Device-Key` with OTA check-ins and `/activate` polls, as a flashed
//! board's provisioned key does; `MCPDEV_CLIENT_ID` overrides the Client-Id, which is otherwise
//! derived from the MAC (the predictable fallback of a board provisioned by an older host).
//! `MCPDEV_CA_FILE` names the hub's CA (PEM or DER, e.g. `serve --tls auto`'s `tls/ca.pem`): the
//! device then speaks only `wss://`, `https://` and `mqtts://`, verified against it, as a board
//! flashed with that CA does (the flash time is "now").
//!
//! Press Enter to "press the BOOT button"; Ctrl-C to stop. Each session's end is printed as a
//! line `session ended: …`, and the firmware's log (info and up, e.g. the activation code a hub
//! that has not admitted the device hands out) goes to stdout too.

use std::io::BufRead;
use std::sync::atomic::{AtomicU32, Ordering};

use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use embassy_sync::channel::Channel;
use embassy_time::Timer;
use hub_link::connect::{Buffers, attempt};
use hub_link::tls::{TlsBuffers, Trust};
use hub_link::{Backoff, Board, End, Identity, Timing};
use mcp_device::{Call, DeviceLink, McpServer, Property, Tool, ToolError, ToolOutput, Transport};
use provisioning::{HubUrl, client_id_from_mac, format_mac, format_uuid};

struct State {
    volume: i64,
    brightness: i64,
    reboot: bool,
}

fn status(s: &mut State, _: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    Ok(ToolOutput::text(format!(
        "{{\"audio_speaker\":{{\"volume\":{}}},\"led\":{{\"brightness\":{}}},\"network\":{{\"type\":\"host\"}}}}",
        s.volume, s.brightness
    )))
}

fn set_volume(s: &mut State, c: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    let new = c.args.int("volume")?;
    let old = std::mem::replace(&mut s.volume, new);
    if old != new {
        c.outbox.state_changed("audio_speaker.volume", old.into(), new.into());
    }
    Ok(true.into())
}

fn set_brightness(s: &mut State, c: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    let new = c.args.int("brightness")?;
    let old = std::mem::replace(&mut s.brightness, new);
    if old != new {
        c.outbox.state_changed("led.brightness", old.into(), new.into());
    }
    Ok(true.into())
}

/// The OTA check-in body: the stock shape (reference §3.1) with what a host can tell.
fn system_info(s: &State) -> String {
    serde_json::json!({
        "version": 2, "flash_size": 0, "minimum_free_heap_size": "0", "chip_model_name": "host",
        "application": {"name": "mcpdev-fw", "version": env!("CARGO_PKG_VERSION")},
        "board": {"type": "mcpdev-fw-host", "name": "host", "volume": s.volume},
    })
    .to_string()
}

fn reboot(s: &mut State, _: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    s.reboot = true;
    Ok(true.into())
}

fn random() -> u32 {
    static STATE: AtomicU32 = AtomicU32::new(0);
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().subsec_nanos();
    let x = STATE.load(Ordering::Relaxed) ^ seed ^ 0x9E37_79B9;
    let x = x ^ (x << 13);
    let x = x ^ (x >> 17);
    let x = x ^ (x << 5);
    STATE.store(x, Ordering::Relaxed);
    x
}

/// The DER inside a PEM `CERTIFICATE` block, if the file is PEM.
fn pem_to_der(pem: &[u8]) -> Option<Vec<u8>> {
    use base64::Engine;
    let text = std::str::from_utf8(pem).ok()?;
    let body = text.split("-----BEGIN CERTIFICATE-----").nth(1)?.split("-----END CERTIFICATE-----").next()?;
    let b64: String = body.chars().filter(|c| !c.is_whitespace()).collect();
    base64::engine::general_purpose::STANDARD.decode(b64).ok()
}

static PRESSES: Channel<CriticalSectionRawMutex, u32, 8> = Channel::new();

/// The firmware's `log` lines on stdout, as its serial console would show them.
struct StdoutLog;

impl log::Log for StdoutLog {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Info
    }

    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            println!("{} {}", r.level(), r.args());
        }
    }

    fn flush(&self) {}
}

static LOG: StdoutLog = StdoutLog;

fn main() {
    if log::set_logger(&LOG).is_ok() {
        log::set_max_level(log::LevelFilter::Info);
    }
    let args: Vec<String> = std::env::args().collect();
    let Some(url_text) = args.get(1).cloned() else {
        eprintln!("usage: host_device ws://HOST:PORT/PATH|mqtt://HOST[:PORT]|http://HOST:PORT/xiaozhi/ota/ [TOKEN] [aa:bb:cc:dd:ee:ff]");
        std::process::exit(2);
    };
    let token = args.get(2).cloned().unwrap_or_default();
    let mac: [u8; 6] = match args.get(3) {
        Some(m) => {
            let bytes: Vec<u8> = m.split(':').filter_map(|b| u8::from_str_radix(b, 16).ok()).collect();
            bytes.try_into().expect("MAC as aa:bb:cc:dd:ee:ff")
        }
        None => [0x02, 0x00, 0x00, 0xfe, 0x00, 0x01],
    };
    std::thread::spawn(|| {
        let mut n = 0;
        for _ in std::io::stdin().lock().lines() {
            n += 1;
            let _ = PRESSES.try_send(n);
        }
    });
    futures_lite::future::block_on(async move {
        if let Err(e) = HubUrl::parse(&url_text) {
            eprintln!("{url_text}: {e}");
            std::process::exit(2);
        }
        let device_key = std::env::var("MCPDEV_DEVICE_KEY").unwrap_or_default();
        let key_fits = (provisioning::MIN_DEVICE_KEY_LEN..=provisioning::MAX_DEVICE_KEY_LEN).contains(&device_key.len())
            && device_key.bytes().all(|b| b.is_ascii_graphic());
        if !device_key.is_empty() && !key_fits {
            eprintln!("MCPDEV_DEVICE_KEY must be 16 to 64 visible ASCII characters, as a provisioning record's");
            std::process::exit(2);
        }
        // MCPDEV_CA_FILE: the hub's CA (PEM or DER), as `mcpdev flash` provisions it; then the
        // device connects only over TLS, verified against it.
        let trust = match std::env::var("MCPDEV_CA_FILE") {
            Ok(path) => {
                let bytes = std::fs::read(&path).unwrap_or_else(|e| {
                    eprintln!("MCPDEV_CA_FILE {path}: {e}");
                    std::process::exit(2)
                });
                let der = pem_to_der(&bytes).unwrap_or(bytes);
                let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
                match Trust::new(der, now) {
                    Ok(t) => Some(t),
                    Err(e) => {
                        eprintln!("MCPDEV_CA_FILE {path}: {e}");
                        std::process::exit(2)
                    }
                }
            }
            Err(_) => None,
        };
        let client_id = std::env::var("MCPDEV_CLIENT_ID").unwrap_or_else(|_| format_uuid(&client_id_from_mac(mac)));
        let id = Identity { device_id: format_mac(mac), client_id, token: token.clone(), device_key };
        let keyed = if id.device_key.is_empty() { "no device key" } else { "with a device key" };
        println!("device {} (Client-Id {}, {keyed}) -> {}", id.device_id, id.client_id, provisioning::loggable_url(&url_text));
        let mut server = McpServer::new("mcpdev-fw-host", env!("CARGO_PKG_VERSION"), State { volume: 70, brightness: 0, reboot: false });
        let tools = [
            Tool::new("self.get_device_status", "Volume, LED brightness, network.", status),
            Tool::new("self.audio_speaker.set_volume", "Set the volume.", set_volume)
                .property(Property::integer("volume").range(0, 100)),
            Tool::new("self.led.set_brightness", "Set the LED brightness in percent.", set_brightness)
                .property(Property::integer("brightness").range(0, 100)),
            Tool::new("self.reboot", "Reboot the system.", reboot).user_only(),
        ];
        for t in tools {
            server.add_tool(t).expect("valid tool");
        }
        let mut link = DeviceLink::new(server, Transport::WebSocket { binary_version: 1 });
        let board = Board {
            random,
            reboot_requested: |s: &State| s.reboot,
            system_info,
            user_agent: concat!("mcpdev-fw-host/", env!("CARGO_PKG_VERSION")),
            presses: &PRESSES,
            trust: trust.as_ref(),
        };
        let timing = Timing::default();
        let stack = edge_nal_std::Stack::new();
        let (mut rx, mut http) = (vec![0u8; 8192], vec![0u8; 2048]);
        let mut tls = TlsBuffers::default();
        let mut backoff = Backoff::default();
        loop {
            let mut greeted = false;
            let mut bufs = Buffers { rx: &mut rx, http: &mut http, tls: &mut tls };
            let end = attempt(&stack, &stack, &url_text, &id, &mut link, &board, &timing, &mut bufs, &mut greeted).await;
            println!("session ended: {end}");
            if matches!(end, End::Reboot) {
                println!("(a board would reset now; reconnecting instead)");
                link.server.state_mut().reboot = false;
            }
            let delay = backoff.delay(greeted, random());
            println!("reconnecting in {} ms", delay.as_millis());
            Timer::after(delay).await;
        }
    });
}
