//! Time and peak heap of the device core (`mcp-device`) on the two requests a backend sends most:
//! one full `tools/list` page and one `tools/call`.
//!
//! Run: `cargo bench --bench device_core`. Not a timed test: it prints a table and fails (exit 1)
//! only if a `tools/list` page needs more than the 9 KB heap budget (issue 14).
//!
//! - Time: the median (and 90th percentile) of many single requests, each timed on its own.
//! - Peak heap: dhat's `max_bytes` for a profiler started just before the request, so blocks live
//!   before it (the server, its tools, the request text) are not counted: the figure is the peak
//!   during handling minus what was live before. It includes the parsed request, the reply being
//!   written and every scratch buffer. The reply is still live when the figures are read.

use std::hint::black_box;
use std::time::{Duration, Instant};

use mcp_device::{DeviceLink, McpServer, Transport};
use mcpdev::sim::{SimState, build_server};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// Enough generated tools (about 430 bytes of JSON each) that the first page is full.
const EXTRA_TOOLS: usize = 60;
const WARMUP: usize = 300;
const SAMPLES: usize = 5_000;
/// The heap budget for building one `tools/list` page (issue 14; it was 12 KB).
const PAGE_HEAP_BUDGET: usize = 9 * 1024;

const LIST: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"cursor":"","withUserTools":false}}"#;

fn set_volume(volume: i64) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"self.audio_speaker.set_volume","arguments":{{"volume":{volume}}}}}}}"#
    )
}

fn envelope(payload: &str) -> String {
    format!(r#"{{"session_id":"bench","type":"mcp","payload":{payload}}}"#)
}

struct Row {
    case: &'static str,
    median: Duration,
    p90: Duration,
    peak_heap: usize,
    allocations: u64,
    reply_bytes: usize,
}

/// Times `run` (a whole request, reply dropped afterwards) `SAMPLES` times after a warm-up.
fn time(mut run: impl FnMut(usize) -> usize) -> (Duration, Duration) {
    for i in 0..WARMUP {
        black_box(run(i));
    }
    let mut samples: Vec<Duration> = (0..SAMPLES)
        .map(|i| {
            let start = Instant::now();
            black_box(run(i));
            start.elapsed()
        })
        .collect();
    samples.sort_unstable();
    (samples[SAMPLES / 2], samples[SAMPLES * 9 / 10])
}

/// Peak heap and allocation count of one request, with a fresh profiler so earlier blocks don't count.
fn heap<R>(run: impl FnOnce() -> R) -> (dhat::HeapStats, R) {
    let profiler = dhat::Profiler::builder().testing().build();
    let reply = run();
    let stats = dhat::HeapStats::get();
    drop(profiler);
    (stats, reply)
}

fn server() -> McpServer<SimState> {
    build_server("aa:bb:cc:dd:ee:ff", EXTRA_TOOLS)
}

fn main() {
    let mut rows = Vec::new();

    // (a) tools/list, first page, through McpServer::handle.
    {
        let mut s = server();
        let page = s.handle(LIST).expect("tools/list is answered");
        assert!(page.contains(r#""nextCursor":"#), "with {EXTRA_TOOLS} extra tools the first page must be full");
        let (median, p90) = time(|_| s.handle(black_box(LIST)).map_or(0, |r| r.len()));
        let (stats, reply) = heap(|| s.handle(LIST).unwrap());
        assert_eq!(reply, page);
        rows.push(Row {
            case: "tools/list page (handle)",
            median,
            p90,
            peak_heap: stats.max_bytes,
            allocations: stats.total_blocks,
            reply_bytes: reply.len(),
        });
    }

    // (b) tools/call self.audio_speaker.set_volume, through McpServer::handle. The volume changes
    // on every call, so the handler also queues a state_changed notification (drained untimed).
    {
        let mut s = server();
        let requests = [set_volume(30), set_volume(31)];
        let (median, p90) = {
            let mut samples = Vec::with_capacity(SAMPLES);
            for i in 0..WARMUP + SAMPLES {
                let req = &requests[i % 2];
                let start = Instant::now();
                black_box(s.handle(black_box(req)));
                let took = start.elapsed();
                while s.outbox().pop().is_some() {}
                if i >= WARMUP {
                    samples.push(took);
                }
            }
            samples.sort_unstable();
            (samples[SAMPLES / 2], samples[SAMPLES * 9 / 10])
        };
        let req = set_volume(77);
        let (stats, reply) = heap(|| s.handle(&req).unwrap());
        assert_eq!(reply, r#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"true"}],"isError":false}}"#);
        assert_eq!(s.outbox().len(), 1, "the notification was queued during the measured call");
        rows.push(Row {
            case: "tools/call set_volume (handle)",
            median,
            p90,
            peak_heap: stats.max_bytes,
            allocations: stats.total_blocks,
            reply_bytes: reply.len(),
        });
    }

    // The same two through DeviceLink::on_text, as the device receives them: the envelope is parsed
    // too and the reply is wrapped.
    {
        let mut link = DeviceLink::new(server(), Transport::WebSocket { binary_version: 1 });
        let mut out = String::new();
        link.on_text(r#"{"type":"hello","transport":"websocket","session_id":"bench"}"#, &mut out);
        let list = envelope(LIST);
        let (median, p90) = time(|_| {
            let mut out = String::new();
            link.on_text(black_box(&list), &mut out);
            out.len()
        });
        let (stats, out) = heap(|| {
            let mut out = String::new();
            link.on_text(&list, &mut out);
            out
        });
        rows.push(Row {
            case: "tools/list page (DeviceLink)",
            median,
            p90,
            peak_heap: stats.max_bytes,
            allocations: stats.total_blocks,
            reply_bytes: out.len(),
        });

        let calls = [envelope(&set_volume(30)), envelope(&set_volume(31))];
        let mut samples = Vec::with_capacity(SAMPLES);
        for i in 0..WARMUP + SAMPLES {
            let start = Instant::now();
            let mut out = String::new();
            link.on_text(black_box(&calls[i % 2]), &mut out);
            black_box(&out);
            drop(out);
            let took = start.elapsed();
            while link.server.outbox().pop().is_some() {}
            if i >= WARMUP {
                samples.push(took);
            }
        }
        samples.sort_unstable();
        let call = envelope(&set_volume(77));
        let (stats, out) = heap(|| {
            let mut out = String::new();
            link.on_text(&call, &mut out);
            out
        });
        rows.push(Row {
            case: "tools/call set_volume (DeviceLink)",
            median: samples[SAMPLES / 2],
            p90: samples[SAMPLES * 9 / 10],
            peak_heap: stats.max_bytes,
            allocations: stats.total_blocks,
            reply_bytes: out.len(),
        });
    }

    println!("mcp-device core, sim server with {EXTRA_TOOLS} extra tools ({SAMPLES} samples per case)");
    println!();
    println!("| case | median | p90 | peak heap | allocations | reply |");
    println!("|---|---:|---:|---:|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {:.1} µs | {:.1} µs | {} B | {} | {} B |",
            r.case,
            r.median.as_secs_f64() * 1e6,
            r.p90.as_secs_f64() * 1e6,
            r.peak_heap,
            r.allocations,
            r.reply_bytes
        );
    }
    println!();

    let over: Vec<&Row> = rows.iter().filter(|r| r.case.starts_with("tools/list") && r.peak_heap > PAGE_HEAP_BUDGET).collect();
    if over.is_empty() {
        println!("peak heap for a tools/list page is within the {PAGE_HEAP_BUDGET} B budget");
    } else {
        for r in over {
            eprintln!("OVER BUDGET: {} peaked at {} B > {PAGE_HEAP_BUDGET} B", r.case, r.peak_heap);
        }
        std::process::exit(1);
    }
}
