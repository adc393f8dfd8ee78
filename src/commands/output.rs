//! Output conventions shared by the commands: colour choice, JSON vs. human rendering.

use crate::cli::ColorChoice;

/// Whether to use colour on a stream: `--color`, then NO_COLOR / CLICOLOR_FORCE / CLICOLOR /
/// TERM=dumb, then whether the stream is a terminal.
pub fn use_color(choice: ColorChoice, is_terminal: bool) -> bool {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            if env("NO_COLOR").is_some() {
                false
            } else if env("CLICOLOR_FORCE").is_some_and(|v| v != "0") {
                true
            } else if env("CLICOLOR").is_some_and(|v| v == "0") || env("TERM").is_some_and(|v| v == "dumb") {
                false
            } else {
                is_terminal
            }
        }
    }
}

use crate::cli::GlobalArgs;

/// A spinner on stderr, only for a person at a terminal (not with --json or -q).
pub fn spinner(global: &GlobalArgs, wanted: bool, message: &str) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if !wanted || global.json || global.quiet || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new_spinner().with_message(message.to_string());
    bar.enable_steady_tick(std::time::Duration::from_millis(100));
    Some(bar)
}

/// Prints one JSON document on stdout.
pub fn print_json(v: &serde_json::Value) {
    println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

/// A table for people: wraps to the terminal width; bold headers with colour.
pub fn table(global: &GlobalArgs, headers: &[&str]) -> comfy_table::Table {
    use comfy_table::{Cell, ContentArrangement, presets};
    use std::io::IsTerminal;
    let mut t = comfy_table::Table::new();
    t.load_style(presets::UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic);
    if !std::io::stdout().is_terminal() {
        t.set_width(120);
    }
    let color = use_color(global.color, std::io::stdout().is_terminal());
    if color {
        t.enforce_styling();
    } else {
        t.force_no_tty();
    }
    t.set_header(headers.iter().map(|h| {
        let c = Cell::new(h);
        if color { c.add_attribute(comfy_table::Attribute::Bold) } else { c }
    }));
    t
}

/// Unix milliseconds as local-ish wall time (UTC, RFC 3339) for people.
pub fn local_time(ms: u64) -> String {
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms)).to_string()
}
