//! `mcpdev check`: a battery of conformance and robustness checks against one device, each
//! reported as pass, warn, fail or skip with a one-line reason and a reference (the MCP spec
//! section, or the stock firmware's behaviour in the protocol reference).
//!
//! - **fail**: something real backends trip on;
//! - **warn**: a deviation from the MCP spec that stock backends tolerate (`--strict` fails it);
//! - **skip**: the check could not run (the reason says why).
//!
//! One file per family: [`hello`], [`initialize`], [`tools_list`], [`hygiene`], [`calls`], [`fuzz`],
//! [`timing`]; [`report`] renders the table, the JSON document and JUnit XML. [`conn`] is the
//! device they drive (accepted, through a broker with [`mqtt`], or through a hub).

pub mod calls;
pub mod conn;
pub mod fuzz;
pub mod hello;
pub mod hygiene;
pub mod initialize;
pub mod mqtt;
pub mod report;
pub mod timing;
pub mod tools_list;

use serde::Serialize;
use serde_json::Value;

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Skip,
    Warn,
    Fail,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Skip => "skip",
            Status::Warn => "warn",
            Status::Fail => "fail",
        }
    }
}

/// One check's result.
#[derive(Debug, Clone, Serialize)]
pub struct CheckResult {
    /// `family.name`, e.g. `hygiene.ping`: stable, for scripts and JUnit test names.
    pub id: String,
    pub status: Status,
    pub reason: String,
    pub reference: &'static str,
}

/// Collects results as the checks run.
#[derive(Debug, Default)]
pub struct Results(pub Vec<CheckResult>);

impl Results {
    pub fn add(&mut self, id: impl Into<String>, status: Status, reason: impl Into<String>, reference: &'static str) {
        self.0.push(CheckResult { id: id.into(), status, reason: reason.into(), reference });
    }
    pub fn pass(&mut self, id: impl Into<String>, reason: impl Into<String>, reference: &'static str) {
        self.add(id, Status::Pass, reason, reference);
    }
    pub fn warn(&mut self, id: impl Into<String>, reason: impl Into<String>, reference: &'static str) {
        self.add(id, Status::Warn, reason, reference);
    }
    pub fn fail(&mut self, id: impl Into<String>, reason: impl Into<String>, reference: &'static str) {
        self.add(id, Status::Fail, reason, reference);
    }
    pub fn skip(&mut self, id: impl Into<String>, reason: impl Into<String>, reference: &'static str) {
        self.add(id, Status::Skip, reason, reference);
    }
}

/// The reason of a check skipped through a hub: it sends raw frames the hub does not forward.
pub const NEEDS_RAW: &str = "skipped: needs raw frames (ids, notifications, malformed JSON), which a hub does not relay; run check --listen";

/// The reason of the hello checks over MQTT.
pub const NO_HELLO_OVER_MQTT: &str = "skipped: over MQTT an idle device says no hello (only when it opens a voice session) and there are no handshake headers; run check --listen to check them";

/// What the user asked for beyond the core checks.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `--call GLOB`: tools to call with arguments built from their schemas.
    pub call: Vec<String>,
    /// The longest onboarding that passes (stock backends wait 10 s per request).
    pub max_onboarding: std::time::Duration,
    /// `--fuzz N`: generated argument sets per tool chosen with `--call`.
    pub fuzz: usize,
}

/// Runs every check against an accepted device, in an order that leaves the riskiest (malformed
/// input, calls) for last.
pub async fn run(mut conn: conn::Conn, greeting: conn::Greeting, since_hello: std::time::Instant, opts: &Options) -> Report {
    let mut r = Results::default();
    hello::check(&greeting, &mut r);
    let init = initialize::check(&mut conn, &mut r).await;
    let listing = tools_list::check(&mut conn, &mut r).await;
    let onboarding = since_hello.elapsed();
    let tools = listing.as_ref().map(|l| l.user.clone()).unwrap_or_default();
    let callable: Vec<Value> = calls::selected(&tools, &opts.call).into_iter().cloned().collect();
    hygiene::check(&mut conn, &tools, &callable, &mut r).await;
    calls::check(&mut conn, &tools, opts, &mut r).await;
    // Over MQTT there is no hello: onboarding counts from the first request after the device answered.
    let from = if greeting.no_hello.is_some() { "the device answered" } else { "the hello" };
    let timing = timing::check(&conn, onboarding, from, opts.max_onboarding, init.is_some() && listing.is_some(), &mut r);
    let device_id = greeting.header("device-id").unwrap_or("?").to_string();
    Report { device_id, hello: greeting.hello, server_info: init.map(|i| i["serverInfo"].clone()).unwrap_or(Value::Null), results: r.0, timing }
}

/// Everything `check` found, as rendered by [`report`].
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub device_id: String,
    pub hello: Value,
    pub server_info: Value,
    pub results: Vec<CheckResult>,
    pub timing: Value,
}

impl Report {
    /// Whether the run failed: any `fail`, or with `strict` any `warn`.
    pub fn failed(&self, strict: bool) -> bool {
        self.results.iter().any(|c| c.status == Status::Fail || (strict && c.status == Status::Warn))
    }

    pub fn count(&self, status: Status) -> usize {
        self.results.iter().filter(|c| c.status == status).count()
    }
}

/// Whether a tool may be called without being named explicitly: not user-only, and no name that
/// suggests a reboot, reset, upgrade or erase.
pub fn safe_to_call(tool: &Value) -> bool {
    let name = tool["name"].as_str().unwrap_or_default().to_ascii_lowercase();
    let user_only = tool["annotations"]["audience"].as_array().is_some_and(|a| a.iter().any(|v| v == "user") && !a.iter().any(|v| v == "assistant"));
    const RISKY: [&str; 8] = ["reboot", "reset", "restart", "upgrade", "erase", "format", "factory", "reconfigure"];
    !user_only && !RISKY.iter().any(|w| name.contains(w))
}

/// `*` (any run) and `?` (one character) glob matching.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn globs() {
        assert!(glob_match("self.*", "self.reboot"));
        assert!(glob_match("*volume", "self.audio_speaker.set_volume"));
        assert!(glob_match("a?c", "abc"));
        assert!(!glob_match("a?c", "abbc"));
        assert!(!glob_match("self.*", "sim.extra"));
    }

    #[test]
    fn risky_and_user_only_tools_are_not_called_by_a_glob() {
        assert!(!safe_to_call(&json!({"name": "self.reboot"})));
        assert!(!safe_to_call(&json!({"name": "self.upgrade_firmware"})));
        assert!(!safe_to_call(&json!({"name": "self.get_system_info", "annotations": {"audience": ["user"]}})));
        assert!(safe_to_call(&json!({"name": "self.audio_speaker.set_volume"})));
    }
}
