//! The device's MCP tools, acting on the real peripherals.

use alloc::string::String;

use embassy_time::Instant;
use esp_hal::ledc::LowSpeed;
use esp_hal::ledc::channel::{Channel, ChannelIFace};
use esp_hal::tsens::TemperatureSensor;
use mcp_device::{Call, McpServer, Property, Tool, ToolError, ToolOutput};
use serde_json::json;

use crate::{board, status};

/// The LED on an LEDC PWM channel.
pub struct Led {
    pub channel: Channel<'static, LowSpeed>,
    pub gpio: u8,
    pub active_low: bool,
}

impl Led {
    /// Sets the brightness in percent.
    pub fn set(&self, percent: u8) -> Result<(), esp_hal::ledc::channel::Error> {
        let percent = percent.min(100);
        self.channel.set_duty(if self.active_low { 100 - percent } else { percent })
    }
}

/// Everything the tools act on.
pub struct Board {
    pub device_id: String,
    pub client_id: String,
    pub ssid: String,
    pub flash_size: usize,
    pub provisioning_offset: u32,
    pub volume: i64,
    pub brightness: i64,
    pub led: Option<Led>,
    pub tsens: Option<TemperatureSensor<'static>>,
    /// Set by `self.reboot`; the connection loop answers, waits 1 s and resets the chip.
    pub reboot_requested: bool,
}

impl Board {
    /// The chip's temperature in °C, to 0.1 °C.
    fn temperature(&self) -> Option<f64> {
        let t = self.tsens.as_ref()?.get_temperature().to_celsius();
        let tenths = if t >= 0.0 { (t * 10.0 + 0.5) as i32 } else { (t * 10.0 - 0.5) as i32 };
        Some(f64::from(tenths) / 10.0)
    }
}

const STATUS_DESCRIPTION: &str = "Provides the real-time information of the device, including the current status of the \
audio speaker, the LED, the network (Wi-Fi signal), the chip temperature, uptime and free memory.\nUse this tool for: \n\
1. Answering questions about current condition (e.g. what is the current volume of the audio speaker?)\n\
2. As the first step to control the device (e.g. turn up / down the volume of the audio speaker, etc.)";
const SET_VOLUME_DESCRIPTION: &str = "Set the volume of the audio speaker. If the current volume is unknown, you must \
call `self.get_device_status` tool first and then call this tool.";
const LED_DESCRIPTION: &str = "Set the brightness of the device's LED in percent (0 is off, 100 is full brightness).";

pub fn build_server(board: Board) -> McpServer<Board> {
    let mut server = McpServer::new("mcpdev-fw", env!("CARGO_PKG_VERSION"), board);
    let tools = [
        Tool::new("self.get_device_status", STATUS_DESCRIPTION, device_status),
        Tool::new("self.audio_speaker.set_volume", SET_VOLUME_DESCRIPTION, set_volume)
            .property(Property::integer("volume").range(0, 100)),
        Tool::new("self.led.set_brightness", LED_DESCRIPTION, set_brightness)
            .property(Property::integer("brightness").range(0, 100)),
        Tool::new(
            "self.get_system_info",
            "Get the system information of the device, including the chip, firmware, memory and network.",
            system_info,
        )
        .user_only(),
        Tool::new("self.reboot", "Reboot the system.", reboot).user_only(),
    ];
    for tool in tools {
        if let Err(e) = server.add_tool(tool) {
            // Only a programming error gets here; the device still serves the other tools.
            log::error!("tool registry: {e:?}");
        }
    }
    server
}

fn signal(rssi: Option<i32>) -> &'static str {
    match rssi {
        None => "none",
        Some(r) if r >= -60 => "strong",
        Some(r) if r >= -70 => "medium",
        Some(_) => "weak",
    }
}

fn device_status(b: &mut Board, _: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    let rssi = status::rssi();
    let mut v = json!({
        "audio_speaker": {"volume": b.volume},
        "led": {"brightness": b.brightness, "gpio": b.led.as_ref().map(|l| l.gpio)},
        "network": {"type": "wifi", "ssid": b.ssid, "signal": signal(rssi), "rssi": rssi},
        "system": {
            "uptime_s": Instant::now().as_secs(),
            "free_heap": esp_alloc::HEAP.free(),
        },
    });
    if let Some(t) = b.temperature() {
        v["chip"] = json!({"temperature": t});
    }
    Ok(ToolOutput::json(&v))
}

fn set_volume(b: &mut Board, call: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    let new = call.args.int("volume")?;
    let old = core::mem::replace(&mut b.volume, new);
    if old != new {
        call.outbox.state_changed("audio_speaker.volume", old.into(), new.into());
    }
    Ok(true.into())
}

fn set_brightness(b: &mut Board, call: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    let new = call.args.int("brightness")?;
    let Some(led) = &b.led else {
        return Err(ToolError::new("This device has no LED configured"));
    };
    // The schema limits the value to 0..=100.
    led.set(new.clamp(0, 100) as u8).map_err(|e| ToolError::new(alloc::format!("LEDC error: {e:?}")))?;
    let old = core::mem::replace(&mut b.brightness, new);
    if old != new {
        call.outbox.state_changed("led.brightness", old.into(), new.into());
    }
    Ok(true.into())
}

fn system_info(b: &mut Board, _: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    let heap = esp_alloc::HEAP.stats();
    let rev = esp_hal::efuse::chip_revision();
    let rssi = status::rssi();
    Ok(ToolOutput::json(&json!({
        "version": 2,
        "flash_size": b.flash_size,
        // A string, as the stock firmware sends it.
        "minimum_free_heap_size": alloc::format!("{}", heap.size.saturating_sub(heap.max_usage)),
        "heap": {"size": heap.size, "free": heap.size.saturating_sub(heap.current_usage)},
        "mac_address": b.device_id,
        "uuid": b.client_id,
        "chip_model_name": board::NAME,
        "chip_info": {"model": board::MODEL, "cores": board::CORES, "revision": u32::from(rev.major) * 100 + u32::from(rev.minor)},
        "application": {"name": "mcpdev-fw", "version": env!("CARGO_PKG_VERSION")},
        "provisioning": {"offset": b.provisioning_offset},
        "uptime_s": Instant::now().as_secs(),
        "board": {
            "type": "mcpdev-fw",
            "name": board::NAME,
            "ssid": b.ssid,
            "rssi": rssi,
            "channel": status::channel(),
            "ip": status::ipv4().map(|ip| alloc::format!("{ip}")),
            "mac": b.device_id,
        },
    })))
}

fn reboot(b: &mut Board, _: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    b.reboot_requested = true;
    Ok(true.into())
}
