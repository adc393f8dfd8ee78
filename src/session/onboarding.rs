//! Listing a device's tools page by page, with the guards devices in the field need: a cursor
//! that does not advance, a page limit, caps on the number and bytes of tools kept, and a retry
//! when the list comes back empty.
//!
//! A listing's state lives in a box that exists only while a listing is under way (or an empty
//! list's retry is planned): a fleet's ready devices hold a null pointer, not ~180 bytes each.

use std::collections::HashSet;
use std::time::Instant;

use serde_json::Value;

use super::SessionConfig;

/// The longest cursor a page mark keeps (cursors are tool names in the field).
const MAX_MARK_CURSOR: usize = 256;
use super::tool_list::ToolEntry;

#[derive(Debug, Default)]
pub(super) struct Listing(Option<Box<State>>);

#[derive(Debug, Default)]
struct State {
    cursor: String,
    seen_cursors: HashSet<String>,
    seen_names: HashSet<String>,
    tools: Vec<ToolEntry>,
    bytes: usize,
    pages: usize,
    empty_retries: u32,
    retry_at: Option<Instant>,
    /// Set when a cap stopped the listing; what was kept is complete up to the cap.
    capped: Option<String>,
    /// Each page as the device cut it: the tools kept from it and the `nextCursor` it gave
    /// (none on the last), so the list can be written out page by page again (`watch --record`).
    marks: Vec<PageMark>,
    marks_dropped: bool,
    /// How many tools each page that had a `nextCursor` carried (as sent, before duplicates were
    /// dropped): the page sizes the device used in this listing.
    sizes: Vec<usize>,
    /// How many tools the last page carried (as sent) when it ended the list (no `nextCursor`).
    last_len: usize,
}

/// One page of a listing, as the device cut it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PageMark {
    /// Tools kept from this page (in list order, after the pages before).
    pub tools: usize,
    /// The cursor the page gave for the next one; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<Box<str>>,
}

pub(super) enum Step {
    Next,
    Done { warning: Option<String> },
}

impl Listing {
    pub fn cursor(&self) -> &str {
        self.0.as_ref().map_or("", |s| &s.cursor)
    }

    /// The page the next `tools/list` asks for, counted from 1 (for messages).
    pub fn page(&self) -> usize {
        self.0.as_ref().map_or(1, |s| s.pages + 1)
    }

    /// Whether any state is held (a listing under way or a retry planned).
    #[cfg(test)]
    pub fn is_active(&self) -> bool {
        self.0.is_some()
    }

    /// Whether a cap stopped the listing (what was kept is complete up to the cap).
    pub fn capped(&self) -> bool {
        self.0.as_ref().is_some_and(|s| s.capped.is_some())
    }

    /// Takes one `tools/list` result. Tools already seen (a device that ignores the cursor and
    /// sends everything again) are not added twice. Tools beyond `max_tools` or `max_tool_bytes`
    /// are not kept, and the listing stops there.
    pub fn add_page(&mut self, result: &Value, cfg: &SessionConfig) -> Step {
        self.0.get_or_insert_with(Box::default).add_page(result, cfg)
    }

    /// The tools listed; the listing's bookkeeping (names and cursors seen) is let go with them.
    pub fn take_tools(&mut self) -> Vec<ToolEntry> {
        self.0.as_mut().map(|s| s.take_tools()).unwrap_or_default()
    }

    /// How the listing just done was paged (empty for a list of one page: nothing to keep).
    pub fn take_marks(&mut self) -> Vec<PageMark> {
        match self.0.as_mut() {
            Some(s) if s.marks.len() > 1 => std::mem::take(&mut s.marks),
            _ => Vec::new(),
        }
    }

    /// Whether the listing just done ended on a full page, which looks cut short: a last page (no
    /// `nextCursor`) as long as the device's pages with a `nextCursor` (the longest of this
    /// listing, or `known_size` from an earlier one when this one had a single page). Also this
    /// listing's page size, if it had pages with a `nextCursor`.
    pub fn ended_on_a_full_page(&self, known_size: usize) -> (bool, Option<usize>) {
        let Some(s) = self.0.as_ref() else { return (false, None) };
        let size = s.sizes.iter().copied().max();
        let page = size.unwrap_or(known_size);
        (page > 0 && s.last_len == page, size)
    }

    /// The listing is over: its state is let go, unless an empty list's retry is planned.
    pub fn finish(&mut self) {
        if self.0.as_ref().is_some_and(|s| s.retry_at.is_none()) {
            self.0 = None;
        }
    }

    /// After an empty list: plan a new listing from the start, if retries are left.
    pub fn schedule_retry(&mut self, now: Instant, cfg: &SessionConfig) -> bool {
        self.0.get_or_insert_with(Box::default).schedule_retry(now, cfg)
    }

    pub fn retry_at(&self) -> Option<Instant> {
        self.0.as_ref().and_then(|s| s.retry_at)
    }

    pub fn retry_due(&mut self, now: Instant) -> bool {
        match &mut self.0 {
            Some(s) if s.retry_at.is_some_and(|at| at <= now) => {
                s.retry_at = None;
                true
            }
            _ => false,
        }
    }
}

impl State {
    fn add_page(&mut self, result: &Value, cfg: &SessionConfig) -> Step {
        self.pages += 1;
        let mut skipped = 0;
        let kept_before = self.tools.len();
        let sent = result.get("tools").and_then(Value::as_array).map_or(0, Vec::len);
        let next = result.get("nextCursor").and_then(Value::as_str).filter(|c| !c.is_empty());
        // A page that ends the list (no `nextCursor`), or 0: a listing a guard stopped did not end so.
        self.last_len = if next.is_some() { 0 } else { sent };
        if next.is_some() {
            self.sizes.push(sent);
        }
        // Bounded: a cursor longer than any tool name gives up the marks (they are a courtesy to
        // recordings, never worth holding a device's megabytes).
        if next.is_some_and(|c| c.len() > MAX_MARK_CURSOR) || self.marks.len() >= cfg.max_pages {
            self.marks_dropped = true;
            self.marks = Vec::new();
        }
        if !self.marks_dropped {
            self.marks.push(PageMark { tools: 0, next_cursor: next.map(Into::into) });
        }
        let step = self.take_page(result, &mut skipped, cfg);
        if let Some(m) = self.marks.last_mut().filter(|_| !self.marks_dropped) {
            m.tools = self.tools.len() - kept_before;
            if matches!(step, Step::Done { .. }) {
                m.next_cursor = None;
            }
        }
        step
    }

    fn take_page(&mut self, result: &Value, skipped: &mut usize, cfg: &SessionConfig) -> Step {
        for t in result.get("tools").and_then(Value::as_array).into_iter().flatten() {
            let Some(entry) = ToolEntry::from_value(t) else {
                *skipped += 1;
                continue;
            };
            if self.seen_names.contains(&entry.name) {
                continue;
            }
            let size = entry.json.get().len();
            if self.tools.len() >= cfg.max_tools || self.bytes + size > cfg.max_tool_bytes {
                self.capped = Some(format!(
                    "the device offers more tools than the hub keeps ({} tools / {} bytes); kept the first {} tools ({} bytes) and stopped listing",
                    cfg.max_tools,
                    cfg.max_tool_bytes,
                    self.tools.len(),
                    self.bytes
                ));
                return Step::Done { warning: self.capped.clone() };
            }
            self.bytes += size;
            self.seen_names.insert(entry.name.clone());
            self.tools.push(entry);
        }
        let skipped = *skipped;
        let mut warning = (skipped > 0).then(|| format!("{skipped} tool(s) without a name were skipped"));
        match result.get("nextCursor").and_then(Value::as_str) {
            None | Some("") => Step::Done { warning },
            Some(next) if !self.seen_cursors.insert(next.to_string()) => Step::Done {
                warning: Some(format!("tools/list cursor {:?} did not advance; stopped after {} page(s)", super::truncate(next, 64), self.pages)),
            },
            Some(_) if self.pages >= cfg.max_pages => {
                warning = Some(format!("tools/list stopped after {} pages", cfg.max_pages));
                Step::Done { warning }
            }
            Some(next) => {
                self.cursor = next.to_string();
                Step::Next
            }
        }
    }

    fn take_tools(&mut self) -> Vec<ToolEntry> {
        self.bytes = 0;
        self.seen_names = HashSet::new();
        self.seen_cursors = HashSet::new();
        std::mem::take(&mut self.tools)
    }

    fn schedule_retry(&mut self, now: Instant, cfg: &SessionConfig) -> bool {
        if self.empty_retries >= cfg.empty_list_retries {
            return false;
        }
        let retries = self.empty_retries + 1;
        *self = Self { empty_retries: retries, retry_at: Some(now + cfg.empty_list_retry), ..Self::default() };
        true
    }
}
