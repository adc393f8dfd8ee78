//! The tools a virtual device offers: the stock xiaozhi common tools over simulated state, the
//! user-only ones, and any number of extra tools (to exercise paging).

use mcp_device::{Call, McpServer, Property, Tool, ToolError, ToolOutput};
use serde_json::json;

/// The simulated state the tools act on.
#[derive(Debug, Clone)]
pub struct SimState {
    pub device_id: String,
    pub volume: i64,
    pub brightness: i64,
    pub theme: String,
    /// Set by `self.reboot`; the client drops the connection and reconnects.
    pub reboot_requested: bool,
}

impl SimState {
    pub fn new(device_id: &str) -> Self {
        Self { device_id: device_id.to_string(), volume: 70, brightness: 80, theme: "light".into(), reboot_requested: false }
    }
}

const SET_VOLUME_DESCRIPTION: &str = "Set the volume of the audio speaker. If the current volume is unknown, you must call `self.get_device_status` tool first and then call this tool.";
const STATUS_DESCRIPTION: &str = "Provides the real-time information of the device, including the current status of the audio speaker, screen, battery, network, etc.\nUse this tool for: \n1. Answering questions about current condition (e.g. what is the current volume of the audio speaker?)\n2. As the first step to control the device (e.g. turn up / down the volume of the audio speaker, etc.)";

/// Which tools a virtual device offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Profile {
    /// The stock xiaozhi common and user-only tools, served the standard way.
    #[default]
    StockTools,
    /// The stock tools plus the MCP conformance suite's fixture tools.
    Conformance,
    /// The stock tools with the stock firmware 2.4.2's deviations from MCP (see `sim::stock`):
    /// no answer to string ids, `Method not implemented` for `ping`, errors without a `code`, unescaped error messages,
    /// `nextCursor:""`, wrong types silently defaulted.
    Stock,
}

/// A virtual device's MCP server: the stock tools, then `extra_tools` generated ones.
pub fn build_server(device_id: &str, extra_tools: usize) -> McpServer<SimState> {
    build_server_with(Profile::StockTools, device_id, extra_tools)
}

/// Like [`build_server`], with the tools of `profile`.
pub fn build_server_with(profile: Profile, device_id: &str, extra_tools: usize) -> McpServer<SimState> {
    let mut server = McpServer::new("mcpdev-sim", env!("CARGO_PKG_VERSION"), SimState::new(device_id));
    let tools = [
        Tool::new("self.get_device_status", STATUS_DESCRIPTION, device_status),
        Tool::new("self.audio_speaker.set_volume", SET_VOLUME_DESCRIPTION, set_volume)
            .property(Property::integer("volume").range(0, 100)),
        Tool::new("self.screen.set_brightness", "Set the brightness of the screen.", set_brightness)
            .property(Property::integer("brightness").range(0, 100)),
        Tool::new("self.screen.set_theme", "Set the theme of the screen. The theme can be `light` or `dark`.", set_theme)
            .property(Property::string("theme")),
        Tool::new(
            "self.get_system_info",
            "Get the system information of the device, including the chip, firmware and network.",
            system_info,
        )
        .user_only(),
        Tool::new("self.reboot", "Reboot the system.", reboot).user_only(),
    ];
    let fixtures = if profile == Profile::Conformance { super::conformance::tools() } else { Vec::new() };
    for tool in tools.into_iter().chain(fixtures).chain((1..=extra_tools).map(extra_tool)) {
        server.add_tool(tool).expect("the simulator's tools are valid");
    }
    server
}

fn extra_tool(n: usize) -> Tool<SimState> {
    Tool::new(
        format!("sim.extra.tool_{n:04}"),
        format!(
            "Extra tool number {n} of the simulator. It echoes its arguments back as JSON, so paging, \
             argument typing and validation can be tried against a device with many tools."
        ),
        echo,
    )
    .property(Property::string("text").default("hello"))
    .property(Property::integer("count").default(1).range(1, 10))
    .property(Property::boolean("loud").default(false))
}

fn device_status(s: &mut SimState, _: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    Ok(ToolOutput::json(&json!({
        "audio_speaker": {"volume": s.volume},
        "screen": {"brightness": s.brightness, "theme": s.theme},
        "network": {"type": "wifi", "ssid": "mcpdev-sim", "signal": "strong"},
    })))
}

fn set_volume(s: &mut SimState, call: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    set_level(&mut s.volume, call, "volume", "audio_speaker.volume")
}

fn set_brightness(s: &mut SimState, call: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    set_level(&mut s.brightness, call, "brightness", "screen.brightness")
}

/// Sets a 0..100 level from the argument `arg`; a change emits `notifications/state_changed`.
fn set_level(slot: &mut i64, call: &mut Call<'_>, arg: &str, what: &str) -> Result<ToolOutput, ToolError> {
    let new = call.args.int(arg)?;
    let old = std::mem::replace(slot, new);
    if old != new {
        call.outbox.state_changed(what, old.into(), new.into());
    }
    Ok(true.into())
}

fn set_theme(s: &mut SimState, call: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    let theme = call.args.str("theme")?;
    if theme != "light" && theme != "dark" {
        // The stock firmware answers `false` (still a success) for an unknown theme.
        return Ok(false.into());
    }
    if s.theme != theme {
        call.outbox.state_changed("screen.theme", s.theme.as_str().into(), theme.into());
        s.theme = theme.to_string();
    }
    Ok(true.into())
}

fn system_info(s: &mut SimState, _: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    Ok(ToolOutput::json(&json!({
        "version": 2,
        "language": "en-US",
        "flash_size": 4_194_304,
        "minimum_free_heap_size": "180000",
        "mac_address": s.device_id,
        "chip_model_name": "mcpdev-sim",
        "application": {"name": "mcpdev-sim", "version": env!("CARGO_PKG_VERSION")},
        "board": {"type": "mcpdev-sim", "name": "mcpdev-sim"},
    })))
}

fn reboot(s: &mut SimState, _: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    s.reboot_requested = true;
    Ok(true.into())
}

fn echo(_: &mut SimState, call: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    let args: serde_json::Map<String, serde_json::Value> = call
        .args
        .iter()
        .map(|(k, v)| {
            let v = match v {
                mcp_device::ArgValue::Bool(b) => json!(b),
                mcp_device::ArgValue::Int(i) => json!(i),
                mcp_device::ArgValue::Str(s) => json!(s),
            };
            (k.to_string(), v)
        })
        .collect();
    Ok(ToolOutput::json(&json!({"tool": call.name, "arguments": args})))
}
