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
