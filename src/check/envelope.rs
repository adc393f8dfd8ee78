//! The envelope around every message the device sends after its hello (reference §1.3, §1.5):
//! a string `type`, an object `payload` in `mcp` messages, and the server hello's `session_id`
//! echoed. Judged on every message the checks drew from the device, at the end of the run.
//!
//! - `envelope.type` fails: backends dispatch on `type`, so a reply without one (or an `mcp`
//!   message whose payload is not an object) never reaches the request that waits for it.
//! - `envelope.session_id` warns: the reference says a device stores the server hello's
//!   `session_id` and echoes it in every message; py-xiaozhi sends an empty one over WebSocket,
//!   others none, and backends (xiaozhi-esp32-server, mcpdev's hub) do not filter on it, so it is tolerated.
//!
//! Of the server hello's other fields, `transport` and `audio_params` steer only audio, which a
//! check over MCP cannot observe; the device's own hello is judged by [`super::hello`].

use super::conn::Conn;
use super::Results;

const REF_TYPE: &str = "xiaozhi-protocol.md §1.5, §1.6 (messages are dispatched on type)";
const REF_SESSION: &str = "xiaozhi-protocol.md §1.3 (the device echoes session_id; backends do not filter on it)";

pub fn check(conn: &Conn, r: &mut Results) {
    if !conn.raw() {
        r.skip("envelope.type", super::NEEDS_RAW, REF_TYPE);
        return r.skip("envelope.session_id", super::NEEDS_RAW, REF_SESSION);
    }
    let e = &conn.envelopes;
    if e.messages == 0 {
        r.skip("envelope.type", "skipped: the device sent no message after its hello", REF_TYPE);
        return r.skip("envelope.session_id", "skipped: the device sent no message after its hello", REF_SESSION);
    }
    if let Some(first) = e.untyped.first() {
        r.fail("envelope.type", format!("a message without a string type (backends drop it): {first}"), REF_TYPE);
    } else if let Some(first) = e.bad_payload.first() {
        r.fail("envelope.type", format!("an mcp message whose payload is not an object (backends drop it): {first}"), REF_TYPE);
    } else {
        r.pass("envelope.type", format!("{} message(s), each with a type; mcp payloads are objects", e.messages), REF_TYPE);
    }
    if !conn.hello_sent {
        return r.skip("envelope.session_id", "skipped: over MQTT the check sends no server hello (an idle device keeps the session of its last voice session)", REF_SESSION);
    }
    if e.echoed == e.messages {
        return r.pass("envelope.session_id", format!("every message echoes the server hello's session_id ({})", e.messages), REF_SESSION);
    }
    let mut how = Vec::new();
    if e.empty > 0 {
        how.push(format!("{} an empty one", e.empty));
    }
    if e.missing > 0 {
        how.push(format!("{} none", e.missing));
    }
    if e.others() > 0 {
        how.push(format!("{} another ({})", e.others(), e.other.join(", ")));
    }
    r.warn(
        "envelope.session_id",
        format!(
            "{} of {} message(s) do not echo the server hello's session_id {:?}: {} (backends tolerate it)",
            e.messages - e.echoed,
            e.messages,
            conn.session_id(),
            how.join(", ")
        ),
        REF_SESSION,
    );
}
