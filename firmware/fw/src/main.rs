//! mcpdev firmware for the ESP32-C3 and ESP32-C6.
//!
//! Boot: read the provisioning record from its flash sector (waiting, with a clear log, while there
//! is none), bring up Wi-Fi and DHCP, then keep a connection to the hub open (a WebSocket with the
//! xiaozhi headers, or MQTT through a broker, or whichever an OTA endpoint names), answering MCP
//! through `mcp-device` with tools on the board's peripherals.
#![no_std]
#![no_main]
#![deny(clippy::mem_forget, reason = "mem::forget is unsound with esp-hal types that own DMA buffers")]

extern crate alloc;

mod board;
mod button;
mod hub;
mod net;
mod provision;
mod status;
mod tools;

use alloc::string::String;

use embassy_executor::Spawner;
use embassy_net::StackResources;
use embassy_time::{Duration, Timer};
use esp_backtrace as _;
use esp_hal::clock::CpuClock;
use esp_hal::efuse::{self, InterfaceMacAddress};
use esp_hal::gpio::{AnyPin, DriveMode, Input, InputConfig, Pull};
use esp_hal::ledc::channel::{self, ChannelIFace};
use esp_hal::ledc::timer::{self, TimerIFace};
use esp_hal::ledc::{LSGlobalClkSource, Ledc, LowSpeed};
use esp_hal::rng::Rng;
use esp_hal::time::Rate;
use esp_hal::timer::timg::TimerGroup;
use esp_hal::tsens::{self, TemperatureSensor};
use esp_radio::wifi::{Interface, WifiController};
use esp_storage::FlashStorage;
use log::{error, info, warn};
use mcp_device::{DeviceLink, Transport};
use provisioning::{LedConfig, client_id_from_mac, format_mac, format_uuid};
use static_cell::StaticCell;

use crate::tools::{Board, Led};

esp_bootloader_esp_idf::esp_app_desc!();

/// Sockets: DHCP, DNS and the hub's TCP connection, plus one spare.
const SOCKETS: usize = 4;

#[esp_rtos::main]
async fn main(spawner: Spawner) -> ! {
    esp_println::logger::init_logger_from_env();
    let peripherals = esp_hal::init(esp_hal::Config::default().with_cpu_clock(CpuClock::max()));
    // The RAM the ROM bootloader used, then some ordinary RAM: Wi-Fi, TCP buffers and replies.
    #[cfg(feature = "esp32c3")]
    esp_alloc::heap_allocator!(#[esp_hal::ram(reclaimed)] size: 66320);
    #[cfg(feature = "esp32c6")]
    esp_alloc::heap_allocator!(#[esp_hal::ram(reclaimed)] size: 65536);
    esp_alloc::heap_allocator!(size: 48 * 1024);

    let timg0 = TimerGroup::new(peripherals.TIMG0);
    esp_rtos::start(timg0.timer0, peripherals.FROM_CPU_INTR0);

    let mac: [u8; 6] = efuse::interface_mac_address(InterfaceMacAddress::Station).as_bytes().try_into().unwrap_or([0; 6]);
    let device_id = format_mac(mac);
    info!("mcpdev-fw {} on {}; Device-Id {device_id}", env!("CARGO_PKG_VERSION"), board::NAME);
    info!("reset reason: {:?}", esp_hal::system::reset_reason());

    // 1. Settings from the provisioning sector; without them, explain and wait (no reboot loop).
    let mut flash = FlashStorage::new(peripherals.FLASH);
    let flash_size = flash.capacity();
    let (offset, prov) = loop {
        match provision::load(&mut flash) {
            Ok(found) => break found,
            Err(missing) => {
                provision::explain(&missing, &device_id);
                Timer::after(Duration::from_secs(60)).await;
            }
        }
    };
    info!("provisioning: record at {offset:#x}: {prov:?}");
    let client_id = format_uuid(&prov.client_id.unwrap_or_else(|| client_id_from_mac(mac)));
    let source = if prov.client_id.is_some() {
        "from the provisioning record"
    } else {
        "derived from the MAC: predictable, re-flash with a current `mcpdev flash`"
    };
    info!("Client-Id {client_id} ({source})");
    if prov.device_key.is_empty() {
        warn!("provisioning: no device key; the hub cannot tell this board from another that knows its MAC (re-flash with a current `mcpdev flash`)");
    }

    // 2. Peripherals the tools use.
    let led = led(peripherals.LEDC, board::led_config(prov.led));
    let tsens = match TemperatureSensor::new(peripherals.TSENS, tsens::Config::default()) {
        Ok(t) => Some(t),
        Err(e) => {
            warn!("temperature sensor unavailable: {e:?}");
            None
        }
    };
    Timer::after(Duration::from_micros(300)).await; // the sensor settles after power-up
    let button = Input::new(peripherals.GPIO9, InputConfig::default().with_pull(Pull::Up));
    spawner.spawn(button::button_task(button).unwrap());

    // 3. Wi-Fi station and the network stack.
    let controller = match WifiController::new(peripherals.WIFI, Default::default()) {
        Ok(c) => c,
        Err(e) => park(alloc::format!("Wi-Fi: the driver did not start: {e:?}")).await,
    };
    let interface = Interface::station();
    let rng = Rng::new();
    let seed = (u64::from(rng.random()) << 32) | u64::from(rng.random());
    static RESOURCES: StaticCell<StackResources<SOCKETS>> = StaticCell::new();
    let net_config = embassy_net::Config::dhcpv4(Default::default());
    let (stack, runner) = embassy_net::new(interface, net_config, RESOURCES.init(StackResources::new()), seed);
    spawner.spawn(net::net_runner(runner).unwrap());
    spawner.spawn(net::wifi_task(controller, prov.wifi_ssid.clone(), prov.wifi_password.clone()).unwrap());

    // 4. The MCP server and the hub connection.
    let board = Board {
        device_id: device_id.clone(),
        client_id: client_id.clone(),
        ssid: prov.wifi_ssid.clone(),
        flash_size,
        provisioning_offset: offset,
        volume: 70,
        brightness: 0,
        led,
        tsens,
        reboot_requested: false,
    };
    let link = DeviceLink::new(tools::build_server(board), Transport::WebSocket { binary_version: 1 });
    let identity =
        hub_link::Identity { device_id, client_id, token: prov.token.clone(), device_key: prov.device_key.clone() };
    // With the hub's CA the device talks to its hub only over TLS; a CA it cannot use is a
    // provisioning problem no retry fixes.
    let trust = match prov.hub_ca.is_empty() {
        true => {
            warn!("provisioning: no hub CA; the link to the hub is plain text (flash with `mcpdev flash` while the hub runs with --tls)");
            None
        }
        false => match hub_link::tls::Trust::new(prov.hub_ca.clone(), prov.flashed_at) {
            Ok(t) => {
                info!("provisioning: hub CA present; TLS only, verified against it");
                Some(t)
            }
            Err(why) => park(alloc::format!("provisioning: the hub CA cannot be used: {why}; re-flash with `mcpdev flash`")).await,
        },
    };
    hub::run(stack, prov.hub_url, identity, trust, link).await
}

/// The LED on LEDC low-speed timer 0 / channel 0: 5 kHz, 10-bit duty, starting dark.
fn led(ledc: esp_hal::peripherals::LEDC<'static>, cfg: LedConfig) -> Option<Led> {
    static LEDC: StaticCell<Ledc<'static>> = StaticCell::new();
    static TIMER: StaticCell<timer::Timer<'static, LowSpeed>> = StaticCell::new();
    let ledc = LEDC.init(Ledc::new(ledc));
    ledc.set_global_slow_clock(LSGlobalClkSource::APBClk);
    let t = TIMER.init(ledc.timer::<LowSpeed>(timer::Number::Timer0));
    let configured = t.configure(timer::config::Config {
        duty: timer::config::Duty::Duty10Bit,
        clock_source: timer::LSClockSource::APBClk,
        frequency: Rate::from_khz(5),
    });
    if let Err(e) = configured {
        error!("LED: LEDC timer: {e:?}");
        return None;
    }
    // SAFETY: `board::led_config` only returns pins from the chip's allow-list, which leaves out
    // GPIO9 (the button, the only other pin this firmware takes) and the flash/USB/UART pins;
    // nothing else creates this pin.
    let pin = unsafe { AnyPin::steal(cfg.gpio) };
    let mut ch = ledc.channel(channel::Number::Channel0, pin);
    let configured = ch.configure(channel::config::Config {
        timer: &*t,
        duty_pct: if cfg.active_low { 100 } else { 0 },
        drive_mode: DriveMode::PushPull,
    });
    if let Err(e) = configured {
        error!("LED: LEDC channel: {e:?}");
        return None;
    }
    info!("LED: GPIO{} ({}), off", cfg.gpio, if cfg.active_low { "active low" } else { "active high" });
    Some(Led { channel: ch, gpio: cfg.gpio, active_low: cfg.active_low })
}

/// Logs `why` now and every minute, forever: for problems no retry can fix, so the device waits
/// with an explanation instead of crash-looping.
pub async fn park(why: String) -> ! {
    loop {
        error!("{why}");
        Timer::after(Duration::from_secs(60)).await;
    }
}
