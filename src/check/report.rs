//! Rendering a [`Report`]: a table for people, one JSON document, JUnit XML for CI systems.

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

/// A table: one row per check, then the timing and a summary line.
pub fn table(report: &Report, global: &crate::cli::GlobalArgs) -> String {
    use console::Style;
    use std::io::IsTerminal;
    let color = crate::commands::output::use_color(global.color, std::io::stdout().is_terminal());
    let mut t = crate::commands::output::table(global, &["CHECK", "RESULT", "REASON", "REFERENCE"]);
    for c in &report.results {
        let style = match c.status {
            Status::Pass => Style::new().green(),
            Status::Warn => Style::new().yellow(),
            Status::Fail => Style::new().red().bold(),
            Status::Skip => Style::new().dim(),
        };
        t.add_row(vec![c.id.clone(), style.force_styling(color).apply_to(c.status.as_str()).to_string(), c.reason.clone(), c.reference.to_string()]);
    }
    let mut out = crate::commands::output::render(&t);
    let _ = write!(out, "\nonboarding {} ms after the hello", report.timing["onboarding_ms"]);
    if let Some(methods) = report.timing["methods"].as_object() {
        for (m, s) in methods {
            let _ = write!(out, "; {m} p50 {} ms p99 {} ms (n={})", s["p50_ms"], s["p99_ms"], s["count"]);
        }
    }
    let _ = write!(
        out,
        "\n{}: {} pass, {} warn, {} fail, {} skip",
        report.device_id,
        report.count(Status::Pass),
        report.count(Status::Warn),
        report.count(Status::Fail),
        report.count(Status::Skip)
    );
    out
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
