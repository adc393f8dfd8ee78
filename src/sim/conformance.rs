//! The MCP conformance suite's fixture tools, offered by a virtual device (`--profile
//! conformance`), so the suite checks what the hub's bridge forwards from a real device link.
//! The texts and data are the ones the suite's `tools-call-*` scenarios expect.

use mcp_device::{Call, Content, Tool, ToolError, ToolOutput};

const PNG_1X1: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/5+hHgAHggJ/PchI7wAAAABJRU5ErkJggg==";
const WAV_EMPTY: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEARKwAAIhYAQACABAAZGF0YQAAAAA=";

/// The fixture tools; they never touch the device state, so they fit any server's state type
/// (and this module needs nothing from `tools`, which offers them: the dependency runs one way).
pub fn tools<S>() -> Vec<Tool<S>> {
    vec![
        Tool::new("test_simple_text", "Returns simple text content", simple_text::<S>),
        Tool::new("test_image_content", "Returns image content", image::<S>),
        Tool::new("test_audio_content", "Returns audio content", audio::<S>),
        Tool::new("test_embedded_resource", "Returns an embedded resource", embedded_resource::<S>),
        Tool::new("test_multiple_content_types", "Returns text, image and resource content", multiple::<S>),
        Tool::new("test_error_handling", "Always returns an error result", error::<S>),
    ]
}

fn simple_text<S>(_: &mut S, _: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    Ok(ToolOutput::text("This is a simple text response for testing."))
}

fn image<S>(_: &mut S, _: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    Ok(ToolOutput { content: vec![png()], is_error: false })
}

fn audio<S>(_: &mut S, _: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    let wav = Content::Audio { data: WAV_EMPTY.into(), mime_type: "audio/wav".into() };
    Ok(ToolOutput { content: vec![wav], is_error: false })
}

fn embedded_resource<S>(_: &mut S, _: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    let r = Content::Resource {
        uri: "test://embedded-resource".into(),
        mime_type: "text/plain".into(),
        text: "This is an embedded resource content.".into(),
    };
    Ok(ToolOutput { content: vec![r], is_error: false })
}

fn multiple<S>(_: &mut S, _: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    let r = Content::Resource {
        uri: "test://mixed-content-resource".into(),
        mime_type: "application/json".into(),
        text: r#"{"test":"data","value":123}"#.into(),
    };
    Ok(ToolOutput::text("Multiple content types test:").with(png()).with(r))
}

fn error<S>(_: &mut S, _: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    Ok(ToolOutput::error("This tool intentionally returns an error for testing"))
}

fn png() -> Content {
    Content::Image { data: PNG_1X1.into(), mime_type: "image/png".into() }
}
