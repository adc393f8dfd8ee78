//! `mcpdev check`: a battery of conformance and robustness checks against one device, each
//! reported as pass, warn, fail or skip with a one-line reason and a reference (the MCP spec
//! section, or the stock firmware's behaviour in the protocol reference).
//!
//! Severities follow one rule, judged against what real backends do (xiaozhi-esp32-server, the
//! xiaozhi MQTT gateway, and mcpdev's own hub):
//!
//! - **fail**: something real backends trip on: a device they cannot onboard, a call they wait
//!   on until their timeout, a reply they cannot parse or route, a device that drops off;
//! - **warn**: a deviation from the reference or the MCP spec that those backends tolerate (no
//!   backend sends it, or they cope with it); `--strict` fails it;
//! - **skip**: the check could not run, or what it looks at was already counted (the reason says
//!   which check counted it).
//!
//! **One missing answer is counted once.** A device that never answers, say, an unknown tool is
//! failed by `hygiene.unknown_tool`; every other check whose request is the same kind of request
//! (`hygiene.error_escaping`'s tool named with quotes, a fuzzed call of a tool that never answers,
//! any request after the device disconnected) is skipped and names the check that counted it
//! ([`Results::unanswered`], settled by [`Results::settle`]).
//!
//! One file per family: [`hello`], [`initialize`], [`tools_list`], [`hygiene`], [`envelope`],
//! [`calls`] and [`fuzz`] (with the [`arguments`] they build), [`timing`]; [`report`] renders
//! the table, the JSON document and JUnit XML.
//! [`conn`] is the device they drive (accepted, through a broker with [`mqtt`], or through a hub),
//! [`silence`] why it did not answer, and [`initialize_request`] what finds it over MQTT.
//! docs/check.md has every check with its severity and reference.

pub mod arguments;
pub mod calls;
pub mod conn;
pub mod envelope;
pub mod fuzz;
pub mod hello;
pub mod hygiene;
pub mod initialize;
pub mod initialize_request;
pub mod mqtt;
pub mod report;
pub mod silence;
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

/// Collects results as the checks run, and which missing answers were counted by whom.
#[derive(Debug, Default)]
pub struct Results(pub Vec<CheckResult>, Vec<Unanswered>);

/// A request the device did not answer, as one check reported it.
#[derive(Debug)]
struct Unanswered {
    /// What kind of request it was ([`Asked`]'s key).
    key: String,
    /// The check's index in the results.
    index: usize,
    /// Whether this check is the one that owns such a request (it counts it whatever ran first).
    owner: bool,
}

/// What a request that got no answer asked for: requests of one kind that all go unanswered
/// are one missing answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked {
    /// A method the device does not have (`hygiene.unknown_method` owns it; `ping` is one too
    /// on a device without ping).
    UnknownMethod,
    /// A tool the device does not have (`hygiene.unknown_tool` owns it).
    UnknownTool,
    /// A call of this tool (`calls.NAME` owns it).
    Tool(String),
    /// Anything, after the device disconnected (the first check that saw it owns it).
    Gone,
}

impl Asked {
    /// The check that counts a missing answer of this kind whatever ran first (for a disconnect,
    /// the first check that saw it).
    fn owner(&self) -> Option<String> {
        match self {
            Asked::UnknownMethod => Some("hygiene.unknown_method".into()),
            Asked::UnknownTool => Some("hygiene.unknown_tool".into()),
            Asked::Tool(name) => Some(format!("calls.{name}")),
            Asked::Gone => None,
        }
    }

    fn key(&self) -> String {
        match self {
            Asked::UnknownMethod => "an unknown method".into(),
            Asked::UnknownTool => "an unknown tool".into(),
            Asked::Tool(name) => format!("tool {name}"),
            Asked::Gone => "the device disconnected".into(),
        }
    }
}

impl Results {
    /// Adds a result; a failure because the device had disconnected is a missing answer
    /// ([`Asked::Gone`]), counted once.
    pub fn add(&mut self, id: impl Into<String>, status: Status, reason: impl Into<String>, reference: &'static str) {
        let reason = reason.into();
        if status == Status::Fail && reason.contains(conn::GONE) {
            let owner = self.counted(&Asked::Gone).is_none();
            self.1.push(Unanswered { key: Asked::Gone.key(), index: self.0.len(), owner });
        }
        self.push(id, status, reason, reference);
    }

    fn push(&mut self, id: impl Into<String>, status: Status, reason: String, reference: &'static str) {
        self.0.push(CheckResult { id: id.into(), status, reason, reference });
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

    /// Reports a check whose request got no answer: `asked` says what kind of request it was.
    /// [`Results::settle`] then keeps one of the checks that saw the same missing answer (its
    /// owner, [`Asked::owner`], else the first) and skips the others.
    pub fn unanswered(&mut self, asked: Asked, id: impl Into<String>, status: Status, reason: impl Into<String>, reference: &'static str) {
        let id = id.into();
        // Once the device is gone, every later silence is that one.
        let (key, owner) = match self.counted(&Asked::Gone) {
            Some(_) => (Asked::Gone.key(), false),
            None => (asked.key(), asked == Asked::Gone || asked.owner().is_some_and(|o| o == id)),
        };
        self.1.push(Unanswered { key, index: self.0.len(), owner });
        self.push(id, status, reason.into(), reference);
    }

    /// Reports a check's request that ended in `why`: a timeout is a missing answer of kind
    /// `asked`, a disconnect is [`Asked::Gone`].
    pub fn silence(&mut self, why: &conn::Silence, asked: Asked, id: impl Into<String>, status: Status, reason: impl Into<String>, reference: &'static str) {
        let asked = if matches!(why, conn::Silence::Gone(_)) { Asked::Gone } else { asked };
        self.unanswered(asked, id, status, reason, reference);
    }

    /// The check that already counted a missing answer of this kind, if one did (a later check
    /// of the same kind can skip its request and save the wait).
    pub fn counted(&self, asked: &Asked) -> Option<&str> {
        let key = asked.key();
        let first = self.1.iter().filter(|u| u.key == key).min_by_key(|u| (!u.owner, u.index))?;
        Some(self.0[first.index].id.as_str())
    }

    /// One missing answer is counted once: of the checks that saw the same one, the owner (else
    /// the first) keeps its status, the others become `skip` naming it.
    pub fn settle(&mut self) {
        let keys: std::collections::BTreeSet<&str> = self.1.iter().map(|u| u.key.as_str()).collect();
        let mut skipped = Vec::new();
        for key in keys {
            let same: Vec<&Unanswered> = self.1.iter().filter(|u| u.key == key).collect();
            let Some(kept) = same.iter().min_by_key(|u| (!u.owner, u.index)) else { continue };
            for u in same.iter().filter(|u| u.index != kept.index) {
                skipped.push((u.index, key.to_string(), self.0[kept.index].id.clone()));
            }
        }
        for (index, key, by) in skipped {
            let c = &mut self.0[index];
            if c.status != Status::Pass {
                c.reason = format!("{} — the same missing answer ({key}) is counted once, by {by}", c.reason);
                c.status = Status::Skip;
            }
        }
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
    // A device in the middle of its upstream's session: an `initialize` of check's would replace
    // the upstream's vision URL on it, so its answer to the upstream's own is what is shown.
    let init = match &greeting.relayed {
        Some((upstream, observed)) => {
            initialize::skip_relayed(upstream, &mut r);
            Some(observed.clone()).filter(|o| !o["protocolVersion"].is_null())
        }
        None => initialize::check(&mut conn, &mut r).await,
    };
    let listing = tools_list::check(&mut conn, &mut r).await;
    let onboarding = since_hello.elapsed();
    let tools = listing.as_ref().map(|l| l.user.clone()).unwrap_or_default();
    let callable: Vec<Value> = calls::selected(&tools, &opts.call).into_iter().cloned().collect();
    hygiene::check(&mut conn, &tools, &callable, &mut r).await;
    calls::check(&mut conn, &tools, opts, &mut r).await;
    envelope::check(&conn, &mut r);
    // Over MQTT there is no hello: onboarding counts from the first request after the device answered.
    let from = if greeting.no_hello.is_some() { "the device answered" } else { "the hello" };
    let timing = timing::check(&conn, onboarding, from, opts.max_onboarding, init.is_some() && listing.is_some(), &mut r);
    r.settle();
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
    fn one_missing_answer_is_counted_once_by_its_owner_whatever_ran_first() {
        let mut r = Results::default();
        let timeout = conn::Silence::Timeout;
        // A non-owner meets tool t's silence first; the owner (calls.t) still counts it.
        r.silence(&timeout, Asked::Tool("t".into()), "hygiene.invalid_params", Status::Fail, "no answer", "ref");
        r.silence(&timeout, Asked::Tool("t".into()), "calls.t", Status::Fail, "no answer", "ref");
        assert_eq!(r.counted(&Asked::Tool("t".into())), Some("calls.t"));
        // Another kind is counted apart; a kind with no owner keeps its first.
        r.unanswered(Asked::UnknownMethod, "hygiene.ping", Status::Warn, "no answer", "ref");
        // A disconnect: the first failure that says so counts it; later ones, of any kind, are it.
        r.fail("hygiene.malformed_json", format!("after a malformed frame: {}", conn::Silence::Gone("closed".into())), "ref");
        r.silence(&timeout, Asked::UnknownTool, "hygiene.unknown_tool", Status::Fail, "no answer", "ref");
        r.fail("calls.u", format!("defaults: {}", conn::Silence::Gone("closed".into())), "ref");
        r.settle();
        let got: Vec<(&str, Status)> = r.0.iter().map(|c| (c.id.as_str(), c.status)).collect();
        assert_eq!(
            got,
            [
                ("hygiene.invalid_params", Status::Skip),
                ("calls.t", Status::Fail),
                ("hygiene.ping", Status::Warn),
                ("hygiene.malformed_json", Status::Fail),
                ("hygiene.unknown_tool", Status::Skip),
                ("calls.u", Status::Skip),
            ]
        );
        assert!(r.0[0].reason.ends_with("counted once, by calls.t"), "{}", r.0[0].reason);
        assert!(r.0[5].reason.contains("by hygiene.malformed_json"), "{}", r.0[5].reason);
    }

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
