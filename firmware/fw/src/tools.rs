//! The device's MCP tools, acting on the real peripherals.
//!
//! Results are JSON text written straight into a `String` (as `mcp-device` writes its replies):
//! building `serde_json::Value` trees with `json!` cost about 6 KB more flash for these two tools.

use alloc::string::String;
use core::fmt::Write;

use embassy_time::Instant;
use esp_hal::ledc::LowSpeed;
use esp_hal::ledc::channel::{Channel, ChannelIFace};
use esp_hal::tsens::TemperatureSensor;
use mcp_device::{Call, McpServer, Property, Tool, ToolError, ToolOutput, push_str_literal};

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
    /// The chip's temperature in tenths of a °C.
    fn temperature_tenths(&self) -> Option<i32> {
        let t = self.tsens.as_ref()?.get_temperature().to_celsius();
        Some(if t >= 0.0 { (t * 10.0 + 0.5) as i32 } else { (t * 10.0 - 0.5) as i32 })
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
    let mut s = String::with_capacity(320);
    let _ = write!(s, "{{\"audio_speaker\":{{\"volume\":{}}},\"led\":{{\"brightness\":{},\"gpio\":", b.volume, b.brightness);
    push_opt(&mut s, b.led.as_ref().map(|l| l.gpio));
    s.push_str("},\"network\":{\"type\":\"wifi\",\"ssid\":");
    push_str_literal(&mut s, &b.ssid);
    let _ = write!(s, ",\"signal\":\"{}\",\"rssi\":", signal(rssi));
    push_opt(&mut s, rssi);
    let _ = write!(s, "}},\"system\":{{\"uptime_s\":{},\"free_heap\":{}}}", Instant::now().as_secs(), esp_alloc::HEAP.free());
    if let Some(tenths) = b.temperature_tenths() {
        s.push_str(",\"chip\":{\"temperature\":");
        push_tenths(&mut s, tenths);
        s.push('}');
    }
    s.push('}');
    Ok(ToolOutput::text(s))
}

/// A number or `null`.
fn push_opt(s: &mut String, v: Option<impl core::fmt::Display>) {
    let _ = match v {
        Some(v) => write!(s, "{v}"),
        None => write!(s, "null"),
    };
}

/// Tenths as a decimal number (`-3` -> `-0.3`), without pulling in float formatting.
fn push_tenths(s: &mut String, tenths: i32) {
    let sign = if tenths < 0 { "-" } else { "" };
    let a = tenths.unsigned_abs();
    let _ = write!(s, "{sign}{}.{}", a / 10, a % 10);
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
    Ok(ToolOutput::text(system_info_json(b)))
}

/// The stock firmware's system info (reference §3.1): the `get_system_info` tool's answer and the
/// body of an OTA check-in.
pub fn system_info_json(b: &Board) -> String {
    let heap = esp_alloc::HEAP.stats();
    let rev = esp_hal::efuse::chip_revision();
    let mut s = String::with_capacity(640);
    // The stock firmware's shape (reference §3.1); `minimum_free_heap_size` is a string there too.
    let _ = write!(
        s,
        "{{\"version\":2,\"flash_size\":{},\"minimum_free_heap_size\":\"{}\",\"heap\":{{\"size\":{},\"free\":{}}},\"mac_address\":",
        b.flash_size,
        heap.size.saturating_sub(heap.max_usage),
        heap.size,
        heap.size.saturating_sub(heap.current_usage)
    );
    push_str_literal(&mut s, &b.device_id);
    s.push_str(",\"uuid\":");
    push_str_literal(&mut s, &b.client_id);
    let _ = write!(
        s,
        ",\"chip_model_name\":\"{}\",\"chip_info\":{{\"model\":{},\"cores\":{},\"revision\":{}}},\
         \"application\":{{\"name\":\"mcpdev-fw\",\"version\":\"{}\"}},\"provisioning\":{{\"offset\":{}}},\
         \"uptime_s\":{},\"board\":{{\"type\":\"mcpdev-fw\",\"name\":\"{}\",\"ssid\":",
        board::NAME,
        board::MODEL,
        board::CORES,
        u32::from(rev.major) * 100 + u32::from(rev.minor),
        env!("CARGO_PKG_VERSION"),
        b.provisioning_offset,
        Instant::now().as_secs(),
        board::NAME,
    );
    push_str_literal(&mut s, &b.ssid);
    s.push_str(",\"rssi\":");
    push_opt(&mut s, status::rssi());
    let _ = write!(s, ",\"channel\":{},\"ip\":", status::channel());
    match status::ipv4() {
        Some(ip) => {
            let _ = write!(s, "\"{ip}\"");
        }
        None => s.push_str("null"),
    }
    s.push_str(",\"mac\":");
    push_str_literal(&mut s, &b.device_id);
    s.push_str("}}");
    s
}

fn reboot(b: &mut Board, _: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    b.reboot_requested = true;
    Ok(true.into())
}
