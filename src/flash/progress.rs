//! espflash's `ProgressCallbacks`, twice: indicatif bars for people, NDJSON lines for scripts.
//! espflash calls `init` once per flash region (bootloader, table, record, app), then `update`
//! with the bytes written so far, `verifying`, and `finish` (`skipped` when the region's MD5
//! already matched and nothing was written).

use espflash::target::ProgressCallbacks;
use indicatif::{ProgressBar, ProgressStyle};

/// One bar per region on stderr.
#[derive(Default)]
pub struct Bars {
    bar: Option<ProgressBar>,
    addr: u32,
}

impl ProgressCallbacks for Bars {
    fn init(&mut self, addr: u32, total: usize) {
        let style = ProgressStyle::with_template("{msg:>12} [{bar:40.cyan/blue}] {bytes:>9}/{total_bytes:9} {bytes_per_sec}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        let bar = ProgressBar::new(total as u64).with_style(style).with_message(format!("{addr:#07x}"));
        self.bar = Some(bar);
        self.addr = addr;
    }

    fn update(&mut self, current: usize) {
        if let Some(b) = &self.bar {
            b.set_position(current as u64);
        }
    }

    fn verifying(&mut self) {
        if let Some(b) = &self.bar {
            b.set_message(format!("{:#07x} verifying", self.addr));
        }
    }

    fn finish(&mut self, skipped: bool) {
        if let Some(b) = self.bar.take() {
            let what = if skipped { "unchanged, skipped" } else { "written" };
            b.finish_with_message(format!("{:#07x} {what}", self.addr));
        }
    }
}

/// NDJSON on stdout: `{"event":"progress","addr":…,"written":…,"total":…}` at most every 5 %,
/// plus `start`, `verifying` and `done` per region.
#[derive(Default)]
pub struct Ndjson {
    addr: u32,
    total: usize,
    last_pct: Option<usize>,
}

impl Ndjson {
    fn emit(v: serde_json::Value) {
        crate::exit::write_stdout(format!("{v}\n").as_bytes());
    }
}

impl ProgressCallbacks for Ndjson {
    fn init(&mut self, addr: u32, total: usize) {
        (self.addr, self.total, self.last_pct) = (addr, total, None);
        Self::emit(serde_json::json!({"event": "region", "addr": addr, "total": total}));
    }

    fn update(&mut self, current: usize) {
        let pct = (current * 100).checked_div(self.total).unwrap_or(100);
        if self.last_pct.is_none_or(|last| pct >= last + 5 || (pct == 100 && last != 100)) {
            self.last_pct = Some(pct);
            Self::emit(serde_json::json!({"event": "progress", "addr": self.addr, "written": current, "total": self.total}));
        }
    }

    fn verifying(&mut self) {
        Self::emit(serde_json::json!({"event": "verifying", "addr": self.addr}));
    }

    fn finish(&mut self, skipped: bool) {
        Self::emit(serde_json::json!({"event": "region_done", "addr": self.addr, "skipped": skipped}));
    }
}

/// No output (`-q`).
pub struct Silent;

impl ProgressCallbacks for Silent {
    fn init(&mut self, _: u32, _: usize) {}
    fn update(&mut self, _: usize) {}
    fn verifying(&mut self) {}
    fn finish(&mut self, _: bool) {}
}
