//! The control API's answers that grow with the fleet or the admissions (issue 46.2): the device
//! listing (`devices`) and the approved devices (`admitted`), read a page at a time.
//!
//! Rules it enforces:
//! - **What the hub holds for one answer is a page**, whatever the fleet. A paged `devices`
//!   answer is one page ([`devices_after`]); an unpaged one, and `admitted`, are a [`Streamed`]
//!   answer: a cursor (a Device-Id) from which about [`FRAGMENT_BYTES`] of rows are made at a
//!   time. The control connection sends each page as one fragment of one WebSocket text message
//!   ([`ws_frame::text_fragment`]) and makes the next only once the socket's queue is down to
//!   [`STREAM_LOW_WATER`] bytes, so a client that reads slowly holds the hub to a page and a
//!   queue, and one that stops reading meets the connection's write deadline as any answer does.
//!   The client reads one message of the shape it always had (`{"id":N,"ok":[…]}`).
//! - **In Device-Id order, each device once.** Pages follow the registry's order and, in a
//!   cluster, the index's, merged ([`devices_after`]); a device that comes or goes while the
//!   answer is written is listed or not, as in the paged listing, but never twice, and one that
//!   stayed connected throughout is never skipped.
//! - A page's rows are the same text whichever way they are asked for: the paged and the
//!   streamed listing share [`devices_after`]; a device of this hub and one of another hub have
//!   the same summary fields with the same meaning ([`local_row`]).

use std::sync::Arc;

use super::Hub;
use super::remote::{self, Cluster};
use crate::session::DeviceInfo;
use crate::wire::ws_frame;

/// Rows read at a time for a streamed answer (the registry's lock, and the cluster index's, is
/// held for one such read).
pub const STREAM_CHUNK: usize = 8;
/// A fragment of a streamed answer ends once it holds this many bytes: at ~3.6 KB a device
/// description, ~36 devices; at most this and one chunk of rows whatever the devices.
pub const FRAGMENT_BYTES: usize = 128 << 10;
/// A streamed answer makes its next fragment only once the socket's queue holds at most this
/// many bytes: with one fragment beyond it, what one answer costs the hub is a few fragments.
pub const STREAM_LOW_WATER: usize = 256 << 10;

/// The next page of rows after a cursor: each row's JSON text, and the cursor of the page that
/// follows (`None` at the end).
pub(crate) type Pages = Box<dyn FnMut(Option<&str>, usize) -> (Vec<String>, Option<String>) + Send>;

/// An answer written a page at a time: `head`, the rows separated by commas, `tail`.
pub struct Streamed {
    head: String,
    tail: &'static str,
    pages: Pages,
    after: Option<String>,
    /// Rows written so far (the next one needs a comma before it when there were some).
    rows: usize,
    /// Fragments made so far.
    fragments: usize,
    done: bool,
}

impl Streamed {
    pub(crate) fn new(head: String, tail: &'static str, pages: Pages) -> Self {
        Self { head, tail, pages, after: None, rows: 0, fragments: 0, done: false }
    }

    /// The text of the next fragment and whether it is the last; `None` once the last was made.
    /// A fragment is [`STREAM_CHUNK`] rows at a time until it holds [`FRAGMENT_BYTES`] or the
    /// rows end.
    pub fn next_text(&mut self) -> Option<(String, bool)> {
        if self.done {
            return None;
        }
        let mut text = std::mem::take(&mut self.head);
        while !self.done && text.len() < FRAGMENT_BYTES {
            let (rows, next) = (self.pages)(self.after.as_deref(), STREAM_CHUNK);
            text.reserve(rows.iter().map(|r| r.len() + 1).sum());
            for row in rows {
                if self.rows > 0 {
                    text.push(',');
                }
                text.push_str(&row);
                self.rows += 1;
            }
            // A cursor that does not move on ends the answer rather than looping.
            match next.filter(|n| self.after.as_deref() != Some(n.as_str())) {
                Some(n) => self.after = Some(n),
                None => {
                    text.push_str(self.tail);
                    self.done = true;
                }
            }
        }
        self.fragments += 1;
        Some((text, self.done))
    }

    /// The next fragment as the WebSocket frame that carries it.
    pub fn next_frame(&mut self) -> Option<Vec<u8>> {
        let first = self.fragments == 0;
        self.next_text().map(|(text, last)| ws_frame::text_fragment(&text, first, last))
    }

    /// The whole answer as one text, for a caller with no connection to stream it to (the
    /// dashboard's admission page, bounded by the admission book's cap).
    pub fn collect(mut self) -> String {
        let mut out = String::new();
        while let Some((text, _)) = self.next_text() {
            out.push_str(&text);
        }
        out
    }
}

/// An answer of the control API: whole, or streamed.
pub enum Reply {
    Text(String),
    Streamed(Streamed),
}

impl Reply {
    /// The answer as one text ([`Streamed::collect`]).
    pub fn into_text(self) -> String {
        match self {
            Self::Text(t) => t,
            Self::Streamed(s) => s.collect(),
        }
    }
}

/// `devices` with no `limit`: every device of the cluster, streamed (request `id`).
pub fn devices(hub: Arc<Hub>, cluster: Option<Arc<dyn Cluster>>, id: u64) -> Streamed {
    let pages = Box::new(move |after: Option<&str>, limit: usize| devices_after(&hub, cluster.as_ref(), after, limit));
    Streamed::new(format!(r#"{{"id":{id},"ok":["#), "]}", pages)
}

/// `admitted`: `{"approve_all":bool,"devices":[Admitted…]}`, streamed (request `id`).
pub fn admitted(hub: Arc<Hub>, id: u64) -> Streamed {
    let head = format!(r#"{{"id":{id},"ok":{{"approve_all":{},"devices":["#, hub.admission.approve_all());
    let pages = Box::new(move |after: Option<&str>, limit: usize| {
        let (page, next) = hub.admission.admitted_after(after, limit);
        (page.iter().map(|a| a.public().to_string()).collect(), next)
    });
    Streamed::new(head, "]}}", pages)
}

/// Up to `limit` (at least 1) devices after the Device-Id `after`, in Device-Id order, each as
/// its row's JSON text, and the cursor of the next page when more follow. In a cluster the page
/// runs over every hub's devices (this hub's and, from the index, the others'), each with its
/// `hub`; a device listed both here and in another hub's index (it is moving) is listed once,
/// here. O(limit), whatever the cluster.
pub fn devices_after(hub: &Hub, cluster: Option<&Arc<dyn Cluster>>, after: Option<&str>, limit: usize) -> (Vec<String>, Option<String>) {
    let limit = limit.max(1);
    let (infos, next) = hub.registry.page(after, limit);
    let Some(c) = cluster else {
        return (infos.iter().map(|i| local_row(i)).collect(), next);
    };
    let local = infos.iter().map(|i| (i.device_id.clone(), remote::with_this_hub(&local_row(i), c.as_ref())));
    // The others' devices after the cursor, but not past the end of the local page when more
    // local devices follow it (they come first in the next page).
    let upto = next.clone();
    let remote = c
        .remote_page(after, limit + 1)
        .into_iter()
        .filter(|(id, _)| upto.as_deref().is_none_or(|u| id.as_str() <= u) && hub.registry.get(id).is_none());
    let mut rows: Vec<(String, String)> = local.chain(remote).collect();
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    rows.dedup_by(|a, b| a.0 == b.0);
    let more = rows.len() > limit || next.is_some();
    rows.truncate(limit);
    let next = if more { rows.last().map(|r| r.0.clone()) } else { None };
    (rows.into_iter().map(|r| r.1).collect(), next)
}

/// A device of this hub as a `devices` row: its whole description, led by the fields a row of
/// another hub's device has with the same meaning (issue 46.4; [`crate::mqtt`]'s index row):
/// `name` ([`DeviceInfo::name`]), `tool_count` (every tool it listed) and `host_tools` (those
/// offered to MCP hosts, user-only ones left out: [`crate::session::ToolList::offered_count`]).
pub fn local_row(info: &DeviceInfo) -> String {
    let text = text_of(info);
    let lead = format!(r#""name":{},"tool_count":{},"host_tools":{}"#, serde_json::Value::from(info.name()), info.tools.len(), info.tools.offered_count(false));
    match text.strip_prefix('{') {
        Some(rest) if rest.trim_start().starts_with('}') => format!("{{{lead}{rest}"),
        Some(rest) => format!("{{{lead},{rest}"),
        None => text,
    }
}

/// The JSON text of a description. Serializing these types cannot fail (string keys, no floats
/// that JSON cannot hold); should it ever, the row is `null` rather than a broken answer.
pub(crate) fn text_of(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `total` rows of `width` bytes each (JSON strings of digits).
    fn numbers(total: usize, width: usize) -> Streamed {
        let pages = Box::new(move |after: Option<&str>, limit: usize| {
            let start = after.map_or(0, |a| a.parse::<usize>().unwrap() + 1);
            let end = (start + limit).min(total);
            let rows: Vec<String> = (start..end).map(|n| format!("\"{}{n}\"", "0".repeat(width.saturating_sub(2 + n.to_string().len())))).collect();
            (rows, (end < total).then(|| (end - 1).to_string()))
        });
        Streamed::new(r#"{"id":7,"ok":["#.into(), "]}", pages)
    }

    /// The fragments make the one message an unpaged answer always was, each a bounded part of it.
    #[test]
    fn a_streamed_answer_is_its_whole_shape_a_part_at_a_time() {
        for (total, width) in [(0, 8), (1, 8), (STREAM_CHUNK, 8), (STREAM_CHUNK + 1, 8), (500, 1024), (7, 200_000)] {
            let mut s = numbers(total, width);
            let mut parts = Vec::new();
            while let Some((text, last)) = s.next_text() {
                assert!(text.len() <= FRAGMENT_BYTES + STREAM_CHUNK * (width + 1) + 32, "a fragment of {} bytes", text.len());
                parts.push((text, last));
            }
            assert!(parts.iter().rev().skip(1).all(|(_, last)| !last) && parts.last().is_some_and(|p| p.1), "{total}");
            if total * width > 2 * FRAGMENT_BYTES && total > STREAM_CHUNK {
                assert!(parts.len() >= 2, "{total} rows of {width} bytes came in {} fragment(s)", parts.len());
            }
            let whole: String = parts.into_iter().map(|p| p.0).collect();
            let v: serde_json::Value = serde_json::from_str(&whole).unwrap_or_else(|e| panic!("{e}: {whole}"));
            assert_eq!(v["id"], 7);
            let got: Vec<usize> = v["ok"].as_array().unwrap().iter().map(|n| n.as_str().unwrap().parse().unwrap()).collect();
            assert_eq!(got, (0..total).collect::<Vec<_>>());
            assert_eq!(numbers(total, width).collect(), whole);
        }
    }

    /// A source whose cursor does not move ends the answer (well-formed) instead of looping.
    #[test]
    fn a_cursor_that_does_not_move_ends_the_answer() {
        let mut s = Streamed::new("[".into(), "]", Box::new(|_: Option<&str>, _: usize| (vec!["1".to_string()], Some("x".to_string()))));
        let mut n = 0;
        let mut whole = String::new();
        while let Some((text, _)) = s.next_text() {
            whole.push_str(&text);
            n += 1;
            assert!(n < 10, "it loops");
        }
        assert_eq!(whole, "[1,1]");
    }
}
