//! Output conventions shared by the commands: colour choice, JSON vs. human rendering.
//!
//! Device text reaches a terminal only through here: a [`Table`] escapes every cell, [`text`]
//! escapes free text, [`print_json`] and [`json_line`] write exact JSON with no raw control
//! (rules in [`super::terminal_text`]), and [`error_lines`] escapes the messages that quote a
//! device. A table at a terminal that reports no width (0 columns) is laid out for 80.

use crate::cli::ColorChoice;

/// `println!` for command output, through [`crate::exit::write_stdout`].
macro_rules! outln {
    () => { $crate::exit::write_stdout(b"\n") };
    ($($arg:tt)*) => { $crate::exit::write_stdout(format!("{}\n", format_args!($($arg)*)).as_bytes()) };
}
pub(crate) use outln;

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

/// mcpdev's own error, as people see it on stderr: `error: …` and, where there is advice,
/// `help: …` on the next line (red and cyan, bold, when colour is on).
pub fn error_lines(message: &str, help: Option<&str>, color: bool) -> String {
    use console::Style;
    let label = |style: Style, text: &str| style.bold().force_styling(color).apply_to(text).to_string();
    // A message may quote what a device or server said (its error, a tool name).
    let message = super::terminal_text::text(message);
    let mut out = format!("{} {message}", label(Style::new().red(), "error:"));
    if let Some(h) = help {
        out.push_str(&format!("\n{} {}", label(Style::new().cyan(), "help:"), super::terminal_text::text(h)));
    }
    out
}

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

/// Prints one JSON document on stdout (exact, and with no raw control: [`super::terminal_text::json`]).
pub fn print_json(v: &serde_json::Value) {
    print_serialized(v);
}

/// [`print_json`] of anything serializable (a document that borrows what it shows, not a copy).
pub fn print_serialized(v: &impl serde::Serialize) {
    outln!("{}", super::terminal_text::json(serde_json::to_string_pretty(v).unwrap_or_default()));
}

/// One JSON document on one line (NDJSON), as [`print_json`] writes it.
pub fn json_line(v: &serde_json::Value) -> String {
    super::terminal_text::json(v.to_string())
}

/// Device text printed as lines of its own: see [`super::terminal_text::text`].
pub fn text(s: &str) -> std::borrow::Cow<'_, str> {
    super::terminal_text::text(s)
}

/// The one shape of a command's JSON document about a device: an object with `device_id` first,
/// then the fields of what the device answered at the top level (the MCP result of `init` and
/// `call`, the `tools` of `tools list`, the session record of `hello`), so `jq .content`,
/// `jq .tools[].name` and `jq .serverInfo` read it as the MCP spec names it.
pub fn device_document(device_id: &str, answer: &serde_json::Value) -> serde_json::Value {
    let mut doc = serde_json::Map::new();
    doc.insert("device_id".into(), device_id.into());
    match answer {
        serde_json::Value::Object(fields) => doc.extend(fields.iter().filter(|(k, _)| *k != "device_id").map(|(k, v)| (k.clone(), v.clone()))),
        // Not an object (a broken device's answer): kept whole rather than dropped.
        other => {
            doc.insert("result".into(), other.clone());
        }
    }
    serde_json::Value::Object(doc)
}

/// A table for people. At a terminal: box drawing, wrapped to the terminal's width (`COLUMNS`
/// when set), with the first column (names) never broken: the other columns wrap instead. Piped:
/// plain text in aligned columns, never wrapped, like ripgrep and cargo print (`--json` stays
/// the format for programs).
pub fn table(global: &GlobalArgs, headers: &[&str]) -> Table {
    use std::io::IsTerminal;
    let terminal = std::io::stdout().is_terminal();
    let layout = if terminal { Layout::Terminal { width: Some(terminal_width()) } } else { Layout::Plain };
    table_with(layout, use_color(global.color, terminal), headers)
}

/// A table whose cells are escaped as they go in ([`super::terminal_text::cell`]): no command
/// can put a device's escape sequence, tab or bidi override into one. At a terminal a cell's
/// newlines are lines of the cell; piped, a row is one line whatever its cells hold (a cell's
/// lines joined by one space, then escaped as [`super::terminal_text::line`] does), so `grep`,
/// `wc -l` and `cut` see one row per line and a description reads as words, not as `\n`.
pub struct Table(comfy_table::Table, Layout);

/// One cell of a [`Table`]: text, and the colour and attribute the CLI gives it (shown only when
/// colour is on).
pub struct Cell {
    text: String,
    color: Option<comfy_table::Color>,
    attribute: Option<comfy_table::Attribute>,
}

impl Cell {
    pub fn styled(text: impl Into<String>, color: Option<comfy_table::Color>, attribute: Option<comfy_table::Attribute>) -> Self {
        Self { text: text.into(), color, attribute }
    }
}

impl From<String> for Cell {
    fn from(text: String) -> Self {
        Self::styled(text, None, None)
    }
}

impl From<&str> for Cell {
    fn from(text: &str) -> Self {
        Self::styled(text, None, None)
    }
}

impl Table {
    /// Adds a row, each cell escaped.
    pub fn add_row<C: Into<Cell>>(&mut self, cells: impl IntoIterator<Item = C>) -> &mut Self {
        let row = cells.into_iter().map(|c| {
            let c = c.into();
            let text = match self.1 {
                Layout::Plain => super::terminal_text::line(&one_line(&c.text)).into_owned().into(),
                Layout::Terminal { .. } => super::terminal_text::cell(&c.text),
            };
            let mut cell = comfy_table::Cell::new(text);
            if let Some(color) = c.color {
                cell = cell.fg(color);
            }
            if let Some(a) = c.attribute {
                cell = cell.add_attribute(a);
            }
            cell
        });
        self.0.add_row(row.collect::<Vec<_>>());
        self
    }
}

/// How a table is laid out: see [`table`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Box drawing, wrapped to `width` columns (or the terminal's own width).
    Terminal { width: Option<u16> },
    /// Aligned plain text, no wrapping.
    Plain,
}

/// [`table`] with the layout and colour decided by the caller.
pub fn table_with(layout: Layout, color: bool, headers: &[&str]) -> Table {
    use comfy_table::{Cell, ColumnConstraint, ContentArrangement, presets};
    let mut t = comfy_table::Table::new();
    match layout {
        Layout::Terminal { width } => {
            t.load_style(presets::UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic);
            if let Some(w) = width {
                t.set_width(w);
            }
        }
        Layout::Plain => {
            t.load_style(presets::NOTHING).set_content_arrangement(ContentArrangement::Disabled);
        }
    }
    if color {
        t.enforce_styling();
    } else {
        t.force_no_tty();
    }
    t.set_header(headers.iter().map(|h| {
        let c = Cell::new(h);
        if color { c.add_attribute(comfy_table::Attribute::Bold) } else { c }
    }));
    if let Some(first) = t.column_mut(0) {
        first.set_constraint(ColumnConstraint::ContentWidth);
    }
    if layout == Layout::Plain {
        // No border on the left, and two spaces between columns.
        for c in t.column_iter_mut() {
            c.set_padding((0, 2));
        }
    }
    Table(t, layout)
}

/// A cell's lines (`\n`, `\r\n`, a lone `\r`) joined by one space, without the blanks around
/// each break: what a piped row shows of a cell of several lines.
fn one_line(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains(['\n', '\r']) {
        return text.into();
    }
    text.split(['\n', '\r']).map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ").into()
}

/// Renders a table as the lines it prints: in plain layout without the trailing spaces of the
/// last column.
pub fn render(t: &Table) -> String {
    t.0.lines().map(|l| l.trim_end().to_string()).collect::<Vec<_>>().join("\n")
}

/// The width a table at a terminal is laid out for: `COLUMNS` when a shell exported it, else
/// the terminal's own, else (a pseudo-terminal that reports 0 columns, as some CI runners and
/// `script` do) 80.
fn terminal_width() -> u16 {
    let columns = std::env::var("COLUMNS").ok().and_then(|c| c.trim().parse().ok()).filter(|&w| w >= 20);
    columns.or_else(|| console::Term::stdout().size_checked().map(|(_, cols)| cols)).filter(|&w| w > 0).unwrap_or(80)
}

/// Unix milliseconds as local-ish wall time (UTC, RFC 3339) for people.
pub fn local_time(ms: u64) -> String {
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms)).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools_table(layout: Layout) -> String {
        let mut t = table_with(layout, false, &["tool", "description", "parameters"]);
        t.add_row(vec![
            "self.audio_speaker.set_volume",
            "Set the volume of the audio speaker. If the current volume is unknown, you must call `self.get_device_status` tool first and then call this tool.",
            "volume: integer 0..100",
        ]);
        t.add_row(vec!["self.get_device_status", "Provides the real-time information of the device.", "-"]);
        render(&t)
    }

    /// Issue 45.8: a description of several lines (`\n`, `\r\n`, a lone `\r`) is one row piped;
    /// at a terminal its lines stay inside the cell.
    #[test]
    fn a_piped_row_is_one_line_whatever_its_cells_hold() {
        let rows = [("self.a", "First line.\nSecond line.\r\nThird."), ("self.b", "one\rtwo"), ("self.c", "plain")];
        let fill = |layout| {
            let mut t = table_with(layout, false, &["tool", "description"]);
            for (name, description) in rows {
                t.add_row(vec![name, description]);
            }
            render(&t)
        };
        let piped = fill(Layout::Plain);
        assert_eq!(piped.lines().count(), 1 + rows.len(), "{piped}");
        assert!(piped.contains("First line. Second line. Third.") && !piped.contains("\\n"), "{piped}");
        assert!(piped.contains("one two"), "{piped}");
        let boxed = fill(Layout::Terminal { width: Some(200) });
        assert!(boxed.lines().any(|l| l.contains("Second line.")) && !boxed.contains("\\n"), "{boxed}");
    }

    #[test]
    fn errors_say_error_and_help_in_colour_only_when_asked() {
        let plain = error_lines("cannot reach the hub at http://127.0.0.1:8001", Some("start one with `mcpdev serve`"), false);
        assert_eq!(plain, "error: cannot reach the hub at http://127.0.0.1:8001\nhelp: start one with `mcpdev serve`");
        let coloured = error_lines("boom", None, true);
        assert!(coloured.starts_with("\u{1b}["), "{coloured:?}");
        assert_eq!(console::strip_ansi_codes(&coloured), "error: boom");
    }

    #[test]
    fn an_80_column_table_never_breaks_a_tool_name() {
        let out = tools_table(Layout::Terminal { width: Some(80) });
        assert!(out.lines().all(|l| l.chars().count() <= 80), "wider than 80 columns:\n{out}");
        assert!(out.contains("self.audio_speaker.set_volume"), "the name was broken:\n{out}");
        assert!(out.contains("self.get_device_status "), "{out}");
        insta::assert_snapshot!("tools_table_80_columns", out);
    }

    #[test]
    fn a_piped_table_is_aligned_plain_text() {
        let out = tools_table(Layout::Plain);
        for ch in ['│', '─', '┌', '╭', '|', '+'] {
            assert!(!out.contains(ch), "box drawing {ch:?} in piped output:\n{out}");
        }
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3, "a header and one line per row, never wrapped:\n{out}");
        let col = |l: &str, word: &str| l.find(word).unwrap_or_else(|| panic!("{word:?} not in {l:?}"));
        assert_eq!(col(lines[0], "description"), col(lines[1], "Set the volume"), "columns are aligned:\n{out}");
        assert_eq!(col(lines[0], "description"), col(lines[2], "Provides"), "columns are aligned:\n{out}");
        assert!(lines[0].starts_with("tool"), "no left border:\n{out}");
        insta::assert_snapshot!("tools_table_piped", out);
    }
}
