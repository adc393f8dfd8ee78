//! Rendering a [`Report`] for programs: one JSON document, JUnit XML for CI systems (the table
//! for people is drawn by the `check` command).

use std::fmt::Write;

use serde_json::json;

use super::{Report, Status};

/// The JSON document (`--json`): the report plus the verdict.
pub fn json(report: &Report, strict: bool) -> serde_json::Value {
    let mut v = serde_json::to_value(report).unwrap_or_default();
    v["summary"] = json!({
        "pass": report.count(Status::Pass), "warn": report.count(Status::Warn),
        "fail": report.count(Status::Fail), "skip": report.count(Status::Skip),
        "strict": strict, "failed": report.failed(strict),
    });
    v
}

/// JUnit XML: one testsuite, one testcase per check; `fail` is a failure (and `warn` too with
/// `strict`), `skip` is skipped, a warning otherwise shows in `system-out`.
pub fn junit(report: &Report, strict: bool) -> String {
    let failures = report.results.iter().filter(|c| c.status == Status::Fail || (strict && c.status == Status::Warn)).count();
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let name = format!("mcpdev check {}", report.device_id);
    let _ = writeln!(
        x,
        "<testsuites name=\"mcpdev check\" tests=\"{n}\" failures=\"{failures}\">\n  <testsuite name=\"{}\" tests=\"{n}\" failures=\"{failures}\" errors=\"0\" skipped=\"{}\">",
        esc(&name),
        report.count(Status::Skip),
        n = report.results.len()
    );
    for c in &report.results {
        let classname = c.id.split('.').next().unwrap_or("check");
        let _ = write!(x, "    <testcase classname=\"{}\" name=\"{}\"", esc(classname), esc(&c.id));
        let message = format!("{} ({})", c.reason, c.reference);
        match c.status {
            Status::Pass => x.push_str("/>\n"),
            Status::Skip => {
                let _ = writeln!(x, "><skipped message=\"{}\"/></testcase>", esc(&message));
            }
            Status::Warn if !strict => {
                let _ = writeln!(x, "><system-out>warn: {}</system-out></testcase>", esc(&message));
            }
            Status::Warn | Status::Fail => {
                let _ = writeln!(x, "><failure type=\"{}\" message=\"{}\">{}</failure></testcase>", c.status.as_str(), esc(&message), esc(&message));
            }
        }
    }
    x.push_str("  </testsuite>\n</testsuites>\n");
    x
}

/// XML text and attribute escaping; characters XML 1.0 cannot carry become U+FFFD.
fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            '\t' | '\n' | '\r' => o.push(ch),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => o.push('\u{FFFD}'),
            c => o.push(c),
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_escaping_covers_markup_and_control_characters() {
        assert_eq!(esc("a<b>&\"'\u{1}"), "a&lt;b&gt;&amp;&quot;&apos;\u{FFFD}");
    }
}
