//! Text from a device (or an MCP server, or an unauthenticated check-in) made safe to print on
//! a terminal. The adversary is a peer that puts escape sequences in any string it controls (a
//! tool name, `serverInfo`, a call result, a Client-Id, the board an OTA check-in reports) to
//! clear the screen, retitle the window, write the clipboard (OSC 52), plant links (OSC 8), draw
//! over a table line (`\r` + erase-line) or reorder what people read (bidi overrides).
//!
//! Rules this module enforces, for every human-readable command (the output layer,
//! [`super::output`], calls it; commands never print device text around it):
//! - C0 controls, DEL, C1 controls (U+0080–U+009F), the bidi controls (U+061C, U+200E/F,
//!   U+202A–U+202E, U+2066–U+2069) and the line/paragraph separators U+2028/U+2029 never reach
//!   the terminal raw. They are shown in one visible notation: `\e` for ESC, `\n` `\r` `\t`,
//!   `\x07` for the other C0 controls and DEL, `\u{9b}` for C1 and the Unicode controls.
//! - In a table cell ([`cell`]) a newline stays a newline (`\r\n` too): the table wraps the cell's
//!   lines inside its row, so a multi-line description reads as lines, never as `\n`. A tab, and a
//!   `\r` on its own, are escaped: they would move the cursor across the table's columns. In free
//!   text ([`text`], a call's result) newline and tab are kept, as layout.
//! - JSON ([`json`]) stays exact: serde_json escapes C0 already; the others are written as
//!   `\u009b`-style JSON escapes, which parse back to the very same string.
//! - A backslash is not escaped: `\e` in the output may be the device's own two characters,
//!   never an ESC.

use std::borrow::Cow;

/// Whether `c` must not reach a terminal raw: the very set identities may not carry.
pub fn is_unsafe(c: char) -> bool {
    crate::wire::identity::is_control_text(c)
}

/// Device text for a table cell: every unsafe character escaped but newline (a `\r\n` is one
/// newline); the table lays the lines out inside the cell.
pub fn cell(s: &str) -> Cow<'_, str> {
    let lines: Cow<'_, str> = if s.contains("\r\n") { Cow::Owned(s.replace("\r\n", "\n")) } else { Cow::Borrowed(s) };
    match lines {
        Cow::Borrowed(s) => escape(s, Keep::Newline),
        Cow::Owned(s) => Cow::Owned(escape(&s, Keep::Newline).into_owned()),
    }
}

/// Device text printed as lines of its own (a call result): as [`cell`], but newline and tab
/// stay as they are.
pub fn text(s: &str) -> Cow<'_, str> {
    escape(s, Keep::Layout)
}

/// Device text for a cell that must stay one line (a table printed as it arrives): as [`cell`],
/// with newlines escaped too.
pub fn line(s: &str) -> Cow<'_, str> {
    escape(s, Keep::Nothing)
}

/// Which layout characters stay raw.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Keep {
    /// None.
    Nothing,
    /// Newline (table cells).
    Newline,
    /// Newline and tab (free text).
    Layout,
}

/// A JSON document as serde_json wrote it, with the characters it leaves raw (DEL, C1, bidi,
/// U+2028/U+2029) written as `\uXXXX` escapes. Outside strings serde_json writes only ASCII
/// (and newlines, when pretty), and inside them it escapes every C0 control, so every such
/// character is inside a string and the document means exactly the same.
pub fn json(serialized: String) -> String {
    let raw = |c: char| c != '\n' && is_unsafe(c);
    if !serialized.chars().any(raw) {
        return serialized;
    }
    let mut out = String::with_capacity(serialized.len() + 16);
    for c in serialized.chars() {
        if raw(c) {
            // Each is in the Basic Multilingual Plane: one \u escape.
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

fn escape(s: &str, keep: Keep) -> Cow<'_, str> {
    let kept = |c: char| (c == '\n' && keep != Keep::Nothing) || (keep == Keep::Layout && c == '\t');
    if !s.chars().any(|c| is_unsafe(c) && !kept(c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            c if kept(c) || !is_unsafe(c) => out.push(c),
            '\u{1b}' => out.push_str("\\e"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every sequence the issue tried, and the Unicode controls beside them.
    const HOSTILE: &str = "a\u{1b}[2Jb\u{1b}]0;title\u{7}c\u{1b}]52;c;aGk=\u{7}d\u{1b}]8;;http://x\u{1b}\\L\u{1b}]8;;\u{1b}\\e\r\u{1b}[2Kf\u{202e}g\u{9b}31mh\u{2066}\u{200f}\u{61c}\u{2028}\u{7f}\u{0}\n\ti";

    #[test]
    fn no_control_but_newline_survives_in_a_cell() {
        let out = cell(HOSTILE);
        assert!(!out.chars().any(|c| is_unsafe(c) && c != '\n'), "{out:?}");
        assert!(!out.contains('\t'), "a tab would move across the columns: {out:?}");
        assert_eq!(
            out,
            "a\\e[2Jb\\e]0;title\\x07c\\e]52;c;aGk=\\x07d\\e]8;;http://x\\e\\L\\e]8;;\\e\\e\\r\\e[2Kf\\u{202e}g\\u{9b}31mh\\u{2066}\\u{200f}\\u{61c}\\u{2028}\\x7f\\x00\n\\ti"
        );
    }

    #[test]
    fn a_cell_keeps_its_lines_as_lines() {
        assert_eq!(cell("Set the volume.\nArgs:\r\n  volume: 0-100"), "Set the volume.\nArgs:\n  volume: 0-100");
        assert_eq!(cell("a\rb"), "a\\rb", "a lone carriage return is escaped: it would draw over the row");
        assert!(matches!(cell("two\nlines"), Cow::Borrowed(_)), "safe text is not copied");
    }

    #[test]
    fn free_text_keeps_its_lines_and_tabs_only() {
        let out = text(HOSTILE);
        assert!(!out.chars().any(|c| is_unsafe(c) && c != '\n' && c != '\t'), "{out:?}");
        assert!(out.ends_with("\\x00\n\ti"), "{out:?}");
        assert!(matches!(text("plain\ttext\nlines, ünïcode ✓"), Cow::Borrowed(_)), "safe text is not copied");
    }

    #[test]
    fn json_stays_exact_and_safe() {
        let v = serde_json::json!({"name": HOSTILE, "k\u{202e}": [HOSTILE]});
        for doc in [serde_json::to_string(&v).unwrap(), serde_json::to_string_pretty(&v).unwrap()] {
            let safe = json(doc);
            assert!(!safe.chars().any(|c| is_unsafe(c) && c != '\n'), "{safe:?}");
            assert_eq!(serde_json::from_str::<serde_json::Value>(&safe).unwrap(), v, "the same document");
        }
    }
}
