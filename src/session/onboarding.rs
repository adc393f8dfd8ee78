//! Listing a device's tools page by page, with the guards devices in the field need: a cursor
//! that does not advance, a page limit, and a retry when the list comes back empty.

use std::collections::HashSet;
use std::time::Instant;

use serde_json::Value;

use super::SessionConfig;
use super::info::ToolEntry;

#[derive(Debug, Default)]
pub(super) struct Listing {
    cursor: String,
    seen_cursors: HashSet<String>,
    seen_names: HashSet<String>,
    tools: Vec<ToolEntry>,
    pages: usize,
    empty_retries: u32,
    retry_at: Option<Instant>,
}

pub(super) enum Step {
    Next,
    Done { warning: Option<String> },
}

impl Listing {
    pub fn cursor(&self) -> &str {
        &self.cursor
    }

    /// Takes one `tools/list` result. Tools already seen (a device that ignores the cursor and
    /// sends everything again) are not added twice.
    pub fn add_page(&mut self, result: &Value, max_pages: usize) -> Step {
        self.pages += 1;
        let mut skipped = 0;
        for t in result.get("tools").and_then(Value::as_array).into_iter().flatten() {
            match ToolEntry::from_value(t) {
                Some(entry) if self.seen_names.insert(entry.name.clone()) => self.tools.push(entry),
                Some(_) => {}
                None => skipped += 1,
            }
        }
        let mut warning = (skipped > 0).then(|| format!("{skipped} tool(s) without a name were skipped"));
        match result.get("nextCursor").and_then(Value::as_str) {
            None | Some("") => Step::Done { warning },
            Some(next) if !self.seen_cursors.insert(next.to_string()) => Step::Done {
                warning: Some(format!("tools/list cursor {next:?} did not advance; stopped after {} page(s)", self.pages)),
            },
            Some(_) if self.pages >= max_pages => {
                warning = Some(format!("tools/list stopped after {max_pages} pages"));
                Step::Done { warning }
            }
            Some(next) => {
                self.cursor = next.to_string();
                Step::Next
            }
        }
    }

    pub fn take_tools(&mut self) -> Vec<ToolEntry> {
        std::mem::take(&mut self.tools)
    }

    /// After an empty list: plan a new listing from the start, if retries are left.
    pub fn schedule_retry(&mut self, now: Instant, cfg: &SessionConfig) -> bool {
        if self.empty_retries >= cfg.empty_list_retries {
            return false;
        }
        let retries = self.empty_retries + 1;
        *self = Self { empty_retries: retries, retry_at: Some(now + cfg.empty_list_retry), ..Self::default() };
        true
    }

    pub fn retry_at(&self) -> Option<Instant> {
        self.retry_at
    }

    pub fn retry_due(&mut self, now: Instant) -> bool {
        if self.retry_at.is_some_and(|at| at <= now) {
            self.retry_at = None;
            return true;
        }
        false
    }
}
