//! `mcpdev flash`: the firmware in `firmware/` (or a prebuilt ESP-IDF build) onto an ESP32-C3/C6.
//!
//! One job per module:
//! - [`build`]: cargo inside `firmware/` for one chip, the ELF from cargo's JSON messages;
//! - [`image`]: the flashable image with the espflash library (bootloader, partition table, app),
//!   saved app-only or merged;
//! - [`prebuilt`]: `--image` (a merged bin at 0x0) and ESP-IDF `build/flash_args`;
//! - [`record`]: the provisioning record (Wi-Fi, hub URL, token) from flags, environment, prompt,
//!   and the board's own random Client-Id and device key, kept per MAC;
//! - [`port`]: serial port discovery and selection;
//! - [`device`]: connecting to the chip's ROM loader, writing, verifying, resetting;
//! - [`progress`]: espflash's `ProgressCallbacks` for people (indicatif) and for scripts (NDJSON);
//! - [`wait`]: `--wait-device`, the flashed device coming online at the hub.

pub mod build;
pub mod device;
pub mod image;
pub mod monitor;
pub mod port;
pub mod prebuilt;
pub mod progress;
pub mod record;
pub mod wait;

use std::path::PathBuf;

use clap::{Args, ValueEnum};

/// A duration like `30s`, `500ms`, `2m`; a bare number is seconds. Here rather than in `cli`
/// (which re-exports it) because `cli` mounts [`FlashArgs`]: the dependency runs one way.
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    if let Ok(secs) = s.parse::<f64>()
        && secs.is_finite() && secs >= 0.0
    {
        return Ok(std::time::Duration::from_secs_f64(secs));
    }
    humantime::parse_duration(s).map_err(|e| format!("{s:?} is not a duration like 30s, 500ms or 2m ({e})"))
}

/// The chips the firmware in `firmware/` is built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Chip {
    Esp32c3,
    Esp32c6,
}

impl Chip {
    /// The Rust target the firmware is built for.
    pub fn target(self) -> &'static str {
        match self {
            Chip::Esp32c3 => "riscv32imc-unknown-none-elf",
            Chip::Esp32c6 => "riscv32imac-unknown-none-elf",
        }
    }

    /// The cargo feature of `mcpdev-fw` that selects the chip.
    pub fn feature(self) -> &'static str {
        match self {
            Chip::Esp32c3 => "esp32c3",
            Chip::Esp32c6 => "esp32c6",
        }
    }

    pub fn espflash(self) -> espflash::target::Chip {
        match self {
            Chip::Esp32c3 => espflash::target::Chip::Esp32c3,
            Chip::Esp32c6 => espflash::target::Chip::Esp32c6,
        }
    }

    pub fn name(self) -> &'static str {
        self.feature()
    }
}

#[derive(Debug, Args)]
#[command(after_help = "Provisioning (written at flash time to its own sector at 0xE000, never into the image):\n  \
--wifi-ssid, --hub-url         flags (or MCPDEV_WIFI_SSID, MCPDEV_HUB_URL)\n  \
--hub-ca                       the hub's CA (default: <state dir>/tls/ca.pem of `serve --tls auto`, when there); then TLS only\n  \
MCPDEV_WIFI_PASSWORD           the Wi-Fi password (empty for an open network); asked for, hidden, when unset at a terminal\n  \
MCPDEV_DEVICE_TOKEN            the device token the hub expects (optional)\n  \
(generated)                    a random Client-Id and device key per board, kept in the state directory's flash/<mac>.json\n\n\
Examples:\n  \
MCPDEV_WIFI_PASSWORD=… mcpdev flash --chip esp32c3 --wifi-ssid home --hub-url ws://192.168.1.10:8000/xiaozhi/v1/\n  \
mcpdev flash --chip esp32c6 --save-image fw-c6.bin                 # app only, no hardware, no secrets\n  \
mcpdev flash --chip esp32c3 --save-image full.bin --merge --wifi-ssid lab --hub-url ws://hub:8000/xiaozhi/v1/\n  \
mcpdev flash --flash-args xiaozhi-esp32/build/flash_args           # a prebuilt ESP-IDF build (stock xiaozhi)\n  \
mcpdev flash --image xiaozhi-merged.bin --port /dev/ttyACM0")]
pub struct FlashArgs {
    /// The chip to build for (the connected chip is checked against it)
    #[arg(short, long, value_enum)]
    pub chip: Option<Chip>,
    /// Serial port of the board (default: the one USB-serial port that looks like an ESP board)
    #[arg(short, long, env = "MCPDEV_PORT")]
    pub port: Option<String>,
    /// Baud rate for flashing (connecting always starts at 115200)
    #[arg(short = 'B', long, env = "MCPDEV_BAUD", default_value_t = 921_600)]
    pub baud: u32,
    /// Do not read the flash back to verify what was written
    #[arg(long)]
    pub no_verify: bool,
    /// Write the image to FILE instead of flashing (no hardware needed)
    #[arg(long, value_name = "FILE", conflicts_with_all = ["image", "flash_args"])]
    pub save_image: Option<PathBuf>,
    /// With --save-image: one file for offset 0 (bootloader, partition table, provisioning record, app)
    /// instead of the app alone
    #[arg(long, requires = "save_image")]
    pub merge: bool,
    /// Flash this prebuilt merged image at 0x0 instead of building (e.g. the stock xiaozhi firmware)
    #[arg(long, value_name = "FILE", conflicts_with = "flash_args")]
    pub image: Option<PathBuf>,
    /// Flash a prebuilt ESP-IDF build from its `build/flash_args` (offsets and files)
    #[arg(long, value_name = "FILE")]
    pub flash_args: Option<PathBuf>,
    /// Wi-Fi network the device joins
    #[arg(long, env = "MCPDEV_WIFI_SSID")]
    pub wifi_ssid: Option<String>,
    /// Hub URL: ws://HOST:PORT/xiaozhi/v1/, mqtt://BROKER[:PORT] or http://HOST:PORT/xiaozhi/ota/, or their TLS
    /// forms wss://, mqtts://, https:// with a hub CA (default: ws://<LAN address>:8000/xiaozhi/v1/, wss:// with a hub CA)
    #[arg(long, env = "MCPDEV_HUB_URL")]
    pub hub_url: Option<String>,
    /// The hub's CA certificate (PEM or DER) for the record: the device then talks to its hub only
    /// over TLS (wss://, https://, mqtts://), verified against it [default: the CA of `mcpdev serve
    /// --tls auto` on this machine, <state dir>/tls/ca.pem, when it exists]
    #[arg(long, env = "MCPDEV_HUB_CA", value_name = "FILE")]
    pub hub_ca: Option<PathBuf>,
    /// Provision no hub CA even when this machine's hub has one: the link stays plain text
    #[arg(long, conflicts_with = "hub_ca")]
    pub no_hub_ca: bool,
    /// Do not write the provisioning record (keep the one on the device; app-only images never have one)
    #[arg(long)]
    pub no_provision: bool,
    /// After flashing, wait up to DURATION (60s without a value) for the device to connect to the hub
    /// and print its hello
    #[arg(long, value_name = "DURATION", num_args = 0..=1, default_missing_value = "60s",
        value_parser = parse_duration, conflicts_with = "save_image")]
    pub wait_device: Option<std::time::Duration>,
    /// After flashing, show the device's serial log until Ctrl-C (reopening the port when a
    /// USB-Serial-JTAG board comes back after its reset); NDJSON lines with --json
    #[arg(short = 'M', long, conflicts_with = "save_image")]
    pub monitor: bool,
    /// Baud rate of the serial log for --monitor
    #[arg(long, default_value_t = 115_200)]
    pub monitor_baud: u32,
    /// Only show the serial log of the board (no build, no flashing) until Ctrl-C
    #[arg(long, conflicts_with_all = ["save_image", "image", "flash_args", "board_info", "erase", "wait_device"])]
    pub monitor_only: bool,
    /// Only tell what board is on the port (chip, revision, crystal, flash size, features, MAC)
    #[arg(long, conflicts_with_all = ["save_image", "image", "flash_args", "erase", "wait_device", "monitor"])]
    pub board_info: bool,
    /// Erase the whole flash before writing (the provisioning record and any old data go too)
    #[arg(long, conflicts_with = "save_image")]
    pub erase: bool,
    /// The hub's host listener, for --wait-device
    #[arg(long, env = "MCPDEV_HUB", default_value = "http://127.0.0.1:8001")]
    pub hub: String,
    /// The firmware workspace to build (default: the `firmware/` next to mcpdev's sources)
    #[arg(long, env = "MCPDEV_FIRMWARE_DIR", value_name = "DIR")]
    pub firmware_dir: Option<PathBuf>,
}
