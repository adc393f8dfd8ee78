//! A table printed as its rows arrive (a fleet's `devices` listing, page by page), so its first
//! line comes after one page whatever the fleet. These are the rules it keeps:
//!
//! - Aligned columns, two spaces apart, no borders and no trailing spaces, like the plain table
//!   of [`super::output::table`].
//! - Each column is as wide as its widest cell so far: a later, wider cell widens its column from
//!   that row on (as `ps` lets a long cell push its row); nothing is cut.
//! - Every cell is one line: device text is escaped ([`super::terminal_text::line`]), newlines
//!   included, so a device cannot add rows or move the cursor.

use unicode_width::UnicodeWidthStr;

pub struct ColumnStream {
    widths: Vec<usize>,
    /// The header, until the first rows print it.
    header: Option<Vec<String>>,
    bold: bool,
}

impl ColumnStream {
    /// A table with these column headers; `bold` writes the header in bold (colour is on).
    pub fn new(headers: &[&str], bold: bool) -> Self {
        Self { widths: headers.iter().map(|h| h.width()).collect(), header: Some(headers.iter().map(|h| h.to_string()).collect()), bold }
    }

    /// The lines for these rows, each ending in a newline, the header before the first rows.
    /// Rows longer than the header are cut to it; shorter ones are padded with `-`.
    pub fn lines(&mut self, rows: &[Vec<String>]) -> String {
        let columns = self.widths.len();
        let rows: Vec<Vec<String>> = rows
            .iter()
            .map(|r| (0..columns).map(|i| r.get(i).map_or_else(|| "-".to_string(), |c| super::terminal_text::line(c).into_owned())).collect())
            .collect();
        for r in &rows {
            for (w, c) in self.widths.iter_mut().zip(r) {
                *w = (*w).max(c.width());
            }
        }
        let mut out = String::new();
        if let Some(header) = self.header.take() {
            let line = self.line(&header);
            if self.bold {
                out.push_str(&format!("\u{1b}[1m{line}\u{1b}[0m\n"));
            } else {
                out.push_str(&line);
                out.push('\n');
            }
        }
        for r in &rows {
            out.push_str(&self.line(r));
            out.push('\n');
        }
        out
    }

    fn line(&self, cells: &[String]) -> String {
        let mut line = String::new();
        for (i, (cell, width)) in cells.iter().zip(&self.widths).enumerate() {
            line.push_str(cell);
            if i + 1 < cells.len() {
                line.extend(std::iter::repeat_n(' ', width - cell.width() + 2));
            }
        }
        line.truncate(line.trim_end().len());
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(cells: &[&str]) -> Vec<String> {
        cells.iter().map(|c| c.to_string()).collect()
    }

    #[test]
    fn pages_print_aligned_as_they_come_and_a_wider_cell_widens_its_column_from_there() {
        let mut t = ColumnStream::new(&["device", "state", "hub"], false);
        let first = t.lines(&[row(&["aa:01", "ready", "h1"]), row(&["aa:02", "onboarding", "h2"])]);
        assert_eq!(first, "device  state       hub\naa:01   ready       h1\naa:02   onboarding  h2\n");
        let second = t.lines(&[row(&["aa:03-long-id", "ready", "h1"])]);
        assert_eq!(second, "aa:03-long-id  ready       h1\n", "no second header; the first column widened");
        assert_eq!(t.lines(&[row(&["aa:04", "ready"])]), "aa:04          ready       -\n");
    }

    /// Attacker: a device id or hub name with newlines, escapes and bidi overrides stays one
    /// escaped line in its cell, and wide characters count by their display width.
    #[test]
    fn device_text_stays_in_its_cell_on_one_line() {
        let mut t = ColumnStream::new(&["device", "alias"], false);
        let out = t.lines(&[row(&["x\n\u{1b}[2Jy\u{202e}", "界界"]), row(&["z", "a"])]);
        assert_eq!(out.lines().count(), 3, "{out:?}");
        assert!(!out.contains('\u{1b}') && !out.contains('\u{202e}'), "{out:?}");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[1], "x\\n\\e[2Jy\\u{202e}  界界");
        assert_eq!(lines[2], format!("z{}a", " ".repeat("x\\n\\e[2Jy\\u{202e}".len() - 1 + 2)));
    }
}
