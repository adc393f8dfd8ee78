//! The onboarding flow of a session: hello, `initialize`, `tools/list` page by page, re-lists,
//! retries and their budget. These are the rules it enforces.
//!
//! ## Onboarding that survives gateways
//!
//! The xiaozhi MQTT gateway answers MCP for a device from a cache it fills only after it asked the
//! device itself, so right after the hello it may answer `initialize` with an id-only reply
//! (`{"jsonrpc":"2.0","id":1}`), `tools/list` with an empty or partial list. The rules:
//!
//! - **A failed step is retried.** A reply with neither `result` nor `error`, an error reply, or
//!   no answer within `onboarding_timeout` fails the step (`initialize`, or `tools/list page N`);
//!   the same step is sent again after a backoff (`retry_backoff`: 50 ms, 200 ms, 1 s, 3 s), up to
//!   `onboarding_attempts` failed steps in all. Then onboarding has failed: `onboarding_error`
//!   names the step ("onboarding failed at tools/list page 2: no answer within 10s"), the phase is
//!   `ready` (so waiters stop waiting) with `onboarding.failed` set, and the CLI's `tools list`,
//!   `init` and `call` exit with code 9. The state (attempt k of n, last error, failed) is in
//!   [`DeviceInfo::onboarding`] and in [`Event::OnboardingRetry`] / [`Event::OnboardingFailed`].
//! - **A late answer still counts.** The answer to a step that timed out, arriving while that
//!   step is being retried, is taken for the step's (the retry is dropped and the attempt given
//!   back): a device, or a hub behind on its reading, that answers slower than the timeout is
//!   onboarded, not failed after five attempts whose answers all came too late.
//! - **A failed onboarding is tried again** while the device stays connected, 30 s, 60 s, 120 s,
//!   then every 5 min after each failure (`failed_onboarding_retry`), within the onboarding
//!   budget below; a hello or a refresh starts it over at once. A device that never answers
//!   costs one round of attempts every 5 minutes.
//! - **An empty list is listed again** after `empty_list_retry` (2 s), up to `empty_list_retries`.
//! - **After a retry, two listings must agree.** An onboarding that needed a retry (a failed
//!   step, or an empty list) is not `ready` on its first complete list: the tools are listed again
//!   `agreement_relist` (1.5 s) later, and again until two listings in a row agree (at most
//!   `max_relists` more; then the last is taken, with a warning). Until then the phase stays
//!   `listing` and no tools are shown, so `tools list --wait` never returns the partial list a
//!   gateway gives after a retried `initialize`.
//! - **A first list that looks cut short is not shown.** The list that would make the device
//!   `ready` is held back, exactly as after a retry (listed again until two listings in a row
//!   agree, at most `max_relists` more, then the last is taken with a logged warning), when it
//!   looks cut short: its last page, without a `nextCursor`, is as long as a page the device sent
//!   with one (this listing or an earlier one); the device sent `tools/list_changed` while it was
//!   being listed; or it is shorter than the list the hub knew for this device before (an earlier
//!   onboarding of this session, or the device's earlier connection: `known_tools`). A cache still
//!   filling (the xiaozhi MQTT gateway's) answers with the pages it has so far; one that never
//!   stops looking partial costs at most `max_relists` listings. The rule is the same for every
//!   device.
//! - **Through a gateway, no first list stands alone.** A device whose connection comes through
//!   the xiaozhi MQTT gateway (`behind_cache`: the gateway's credential, `MCPDEV_GATEWAY_TOKEN`,
//!   or the `from=mqtt_gateway` its documented chat-server URL carries) is `ready` only once two
//!   listings in a row agree, even on its very first connection: the gateway answers `tools/list`
//!   from the pages it has fetched so far, one list with no `nextCursor`, so a brand-new
//!   Device-Id's first list shows no sign of being partial (issue 45.3). The agreeing listing
//!   is the confirmation re-list, so it costs no extra frame, only `agreement_relist` before
//!   `ready`. What is still not seen: a cache that is not known as one, on a device's very first
//!   list, one page without a `nextCursor`; the confirmation re-list below corrects that one.
//! - **One confirmation re-list.** `confirm_relist` (1.5 s) after the first complete listing of a
//!   clean onboarding, the tools are listed once more in the background. The device is `ready` at
//!   once; the re-list only replaces the tools when they differ ([`Event::ToolsChanged`]), and its
//!   failure is only a warning. A direct device pays one `tools/list` frame, nothing visible.
//! - **A list that looks truncated is listed again.** A re-list that finds fewer tools than the
//!   list before is not believed at once: it is listed again after 1 s, and the shorter list is
//!   taken only when two listings in a row agree on it (or after `max_relists` tries).
//! - **`notifications/tools/list_changed`** re-lists in the background; several during one
//!   listing give one more listing, not one each, and re-lists start at most once per
//!   `min_relist_interval` (1 s): a device that floods `list_changed` gets one listing a second,
//!   so the hub's work (and the bridge's catalogue and `list_changed` to MCP hosts) stays there.
//! - **Refresh on demand.** A caller's request for [`REFRESH_METHOD`] is not sent to the device:
//!   the session re-lists (or, after a failed onboarding, starts onboarding over) and answers
//!   `{"tools":[…], "onboarding_error"?, "refresh_error"?}` when it is done. `mcpdev tools list
//!   --refresh` and the MCP bridge use it through the ordinary `rpc` path.
//!
//! A well-behaved device is onboarded with no delay at all: hello, `initialize`,
//! `notifications/initialized`, `tools/list` back to back, `ready` on the last page.
//!
//! ## Onboarding again: the device may be a new instance
//!
//! A device that restarted may run other firmware (other tools) and reads `capabilities.vision`
//! only in `initialize`, so it is onboarded again (from `initialize`; `ready` waits for the new
//! list) whenever it may be a new instance:
//!
//! - **every hello, on a link that cannot see the device's connections**
//!   (`hello_may_be_new_instance`: MQTT through a broker the hub does not run), as
//!   xiaozhi-esp32-server does on each session; also a hello during an onboarding, whose instance
//!   may be gone. Where the link sees connections (WebSocket, the embedded broker), a new
//!   instance comes on a new connection and gets a new session, so a hello on the same one is a
//!   new voice session and gets the server hello only;
//! - **the next message of any kind** after the link was down (an MQTT broker outage), a
//!   `goodbye`, or an OTA check-in ([`Session::may_have_restarted`]);
//! - a hello after a failed onboarding.
//!
//! Each onboarding, the first included, is taken from a budget of `max_onboardings` (4) per
//! `onboarding_window` (30 s), which a link hands on to the device's next link
//! (`onboard_budget`). Beyond it, one onboarding is planned for the end of the window, and that is
//! logged and shown as a warning: a device that says hello (or reconnects) in a loop costs at most
//! that, and no restart is missed.

use std::time::Instant;

use serde_json::Value;

use super::*;

impl Session {
    /// A hello: answered with the server hello (rate-limited). It onboards the device (again)
    /// when it may be a new instance: see the module docs.
    pub(super) fn on_hello(&mut self, hello: &Value, now: Instant) {
        if !self.may_answer("hellos", now) {
            return;
        }
        self.info_mut().set_hello(hello);
        let shared = self.info.hello.clone().map_or_else(|| SharedJson::from_value(hello), SharedJson);
        self.emit(Event::Hello { hello: shared });
        if self.cfg.relayed {
            return self.relayed_hello(now);
        }
        let server_hello = match &self.server_hello {
            ServerHello::WebSocket => envelope::websocket_server_hello(&self.info.session_id),
            ServerHello::Udp(u) => envelope::udp_server_hello(&self.info.session_id, &u.server, u.port, u.ssrc, &u.key),
            ServerHello::Text(text) => text.to_string(),
        };
        self.send_text(server_hello, now);
        let marked = std::mem::take(&mut self.maybe_new_instance);
        let why = match () {
            _ if self.info.phase == Phase::AwaitingHello => "first",
            _ if marked => "it may have restarted",
            _ if self.cfg.hello_may_be_new_instance => "a hello the hub cannot tell from a new instance's",
            _ if self.info.onboarding.failed => "a hello after a failed onboarding",
            _ => return,
        };
        self.onboard(now, why);
    }

    /// Onboards the device (again) within its budget: beyond `max_onboardings` per
    /// `onboarding_window`, the onboarding waits for the window to end (one is planned at most),
    /// and that is logged.
    pub(super) fn onboard(&mut self, now: Instant, why: &str) {
        if self.deferred_onboarding.is_some() {
            return;
        }
        match self.onboard_budget.take(now, self.cfg.max_onboardings, self.cfg.onboarding_window) {
            Ok(()) => {
                if self.info.phase != Phase::AwaitingHello && may_log(Kind::Onboarding, &self.info.device_id) {
                    tracing::info!(device = %self.info.device_id, "onboarding again: {why}");
                }
                self.start_onboarding(now);
            }
            Err(at) => {
                self.deferred_onboarding = Some(at);
                let message = format!(
                    "the device asks to be onboarded more than {} times in {} s ({why}); the next onboarding waits {} ms",
                    self.cfg.max_onboardings,
                    self.cfg.onboarding_window.as_secs(),
                    at.saturating_duration_since(now).as_millis()
                );
                if may_log(Kind::Onboarding, &self.info.device_id) {
                    tracing::warn!(device = %self.info.device_id, "{message}");
                }
                self.emit(Event::Warning { message });
            }
        }
    }

    /// Counts one hello or request the device sent; false when it sent too many this second.
    pub(super) fn may_answer(&mut self, what: &str, now: Instant) -> bool {
        match self.answers.take(now, self.cfg.max_answers_per_sec) {
            limits::Verdict::Allow => true,
            verdict => {
                self.info_mut().counters.unanswered += 1;
                if verdict == limits::Verdict::FirstRefusal {
                    let message = format!(
                        "the device sends more than {} hellos and requests a second; the rest of this second's {what} are not answered",
                        self.cfg.max_answers_per_sec
                    );
                    if may_log(Kind::Device, &self.info.device_id) {
                        tracing::warn!(device = %self.info.device_id, "{message}");
                    }
                    self.emit(Event::Warning { message });
                }
                false
            }
        }
    }

    /// Starts onboarding (over): fresh attempts, `initialize` now.
    fn start_onboarding(&mut self, now: Instant) {
        self.generation += 1;
        self.background = false;
        self.relisting = false;
        self.relist_again = false;
        self.retry_step = None;
        self.late_step = None;
        self.retry_failed_at = None;
        self.relist_at = None;
        self.deferred_onboarding = None;
        self.begin_at = None;
        self.maybe_new_instance = false;
        // A new instance gets its own confirmation re-list, and agrees on its own lists.
        self.confirm_planned = false;
        self.short_seen = None;
        self.truncation_relists = 0;
        // Through a cache that may still be filling, no first list is taken on its own.
        self.needs_agreement = self.cfg.behind_cache;
        self.unconfirmed = None;
        self.agreement_relists = 0;
        self.changed_while_onboarding = false;
        self.onboarding = onboarding::Listing::default();
        self.info_mut().onboarding_error = None;
        self.info_mut().onboarding = OnboardingStatus { attempt: 1, max_attempts: self.cfg.onboarding_attempts.max(1), last_error: None, failed: false };
        self.info_mut().bump();
        if self.cfg.relayed {
            // The upstream initializes a relayed device: the hub only lists its tools.
            return self.list_tools(now);
        }
        self.send_initialize(now);
    }

    pub(super) fn send_initialize(&mut self, now: Instant) {
        self.info_mut().set_phase(Phase::Initializing);
        let params = json!({
            "protocolVersion": "2024-11-05",
            "capabilities": {"vision": {"url": self.cfg.vision_url, "token": self.vision_token}},
            "clientInfo": {"name": "mcpdev", "version": env!("CARGO_PKG_VERSION")},
        });
        self.send_request("initialize", Some(params), Origin::Initialize(self.generation), self.cfg.onboarding_timeout, now);
    }

    pub(super) fn list_tools(&mut self, now: Instant) {
        if !self.background {
            self.info_mut().set_phase(Phase::Listing);
        }
        let params = json!({"cursor": self.onboarding.cursor(), "withUserTools": true});
        self.send_request("tools/list", Some(params), Origin::ListPage(self.generation), self.cfg.onboarding_timeout, now);
    }

    /// A refresh asked for by a caller: re-list a ready device, start a failed onboarding over;
    /// while onboarding runs, its end answers the caller.
    pub(super) fn refresh(&mut self, now: Instant) {
        if self.info.onboarding.failed || self.info.phase == Phase::AwaitingHello {
            self.start_onboarding(now);
        } else if self.info.phase == Phase::Ready {
            self.start_relist(now);
        }
    }

    /// Lists the tools of a ready device again in the background (the phase stays `ready`); a
    /// request while a listing runs gives one more listing after it.
    pub(super) fn start_relist(&mut self, now: Instant) {
        if self.info.phase != Phase::Ready || self.info.onboarding.failed {
            // Onboarding is under way (its listing is about to read the new list anyway) or gave
            // up (only a hello or a refresh starts it over).
            self.relist_again = self.info.phase != Phase::Ready;
            return;
        }
        if self.relisting {
            self.relist_again = true;
            return;
        }
        if let Some(next) = self.last_relist.map(|at| at + self.cfg.min_relist_interval)
            && now < next
        {
            // Too soon after the last one: one re-list then, whatever asks meanwhile.
            self.relist_at = Some(self.relist_at.map_or(next, |at| at.min(next)));
            return;
        }
        self.last_relist = Some(now);
        self.generation += 1;
        self.late_step = None;
        self.background = true;
        self.relisting = true;
        self.onboarding = onboarding::Listing::default();
        self.list_tools(now);
    }

    pub(super) fn on_list_page(&mut self, result: &Value, now: Instant) {
        match self.onboarding.add_page(result, &self.cfg) {
            onboarding::Step::Next => self.list_tools(now),
            onboarding::Step::Done { warning } => {
                if let Some(w) = warning {
                    self.warn_listing(w);
                }
                let tools = self.onboarding.take_tools();
                if tools.is_empty() && !self.background && self.onboarding.schedule_retry(now, &self.cfg) {
                    self.needs_agreement = true;
                    self.info_mut().set_phase(Phase::Listing);
                    return;
                }
                let (full_page, size) = self.onboarding.ended_on_a_full_page(self.page_size as usize);
                if let Some(n) = size {
                    self.page_size = u32::try_from(n).unwrap_or(u32::MAX);
                }
                let marks = self.onboarding.take_marks();
                self.onboarding.finish();
                let settled = if self.background { self.relist_done(tools, marks, now) } else { self.first_list_done(tools, marks, full_page, now) };
                if settled {
                    self.answer_waiters(None);
                }
                if std::mem::take(&mut self.relist_again) {
                    self.start_relist(now);
                }
            }
        }
    }

    /// The end of onboarding: ready at once (one confirmation re-list planned), or, after an
    /// onboarding that needed a retry, once two listings in a row agree. False while a list waits
    /// for its agreement.
    fn first_list_done(&mut self, tools: Vec<ToolEntry>, marks: Vec<onboarding::PageMark>, full_page: bool, now: Instant) -> bool {
        if !self.needs_agreement
            && let Some(why) = self.looks_cut_short(tools.len(), full_page)
        {
            tracing::info!(device = %self.info.device_id, tools = tools.len(), "the first list looks cut short ({why}); listing again before the device is ready");
            self.needs_agreement = true;
        }
        self.changed_while_onboarding = false;
        if self.needs_agreement {
            let agreed = self.unconfirmed.take().is_some_and(|before| tool_list::same(&before, &tools));
            if !agreed && self.agreement_relists < self.cfg.max_relists {
                self.agreement_relists += 1;
                tracing::debug!(device = %self.info.device_id, tools = tools.len(), "onboarding needed a retry: listing again until two listings agree");
                self.unconfirmed = Some(tools);
                self.onboarding = onboarding::Listing::default();
                self.retry_step = Some((now + self.cfg.agreement_relist, Planned::ListPage));
                return false;
            }
            if !agreed {
                let warning = format!("no two listings in a row agreed ({} listings); took the last, {} tools", self.agreement_relists + 1, tools.len());
                if may_log(Kind::Device, &self.info.device_id) {
                    tracing::warn!(device = %self.info.device_id, "{warning}");
                }
                self.info_mut().tools_warning = Some(warning.clone());
                self.emit(Event::Warning { message: warning });
            }
            // Agreed: that was the confirmation.
            self.confirm_planned = true;
        }
        let changed = self.info.phase_was_ready_once;
        self.failed_rounds = 0;
        self.info_mut().set_tools(tools);
        self.info_mut().set_tool_pages(marks);
        self.info_mut().set_phase(Phase::Ready);
        // From now on this session's own list is what a later one is held against.
        self.known_tools = 0;
        let count = self.info.tools.len();
        self.emit(if changed { Event::ToolsChanged { tools: count } } else { Event::Ready { tools: count } });
        self.info_mut().phase_was_ready_once = true;
        if let Some(after) = self.cfg.confirm_relist
            && !self.confirm_planned
        {
            self.confirm_planned = true;
            self.relist_at = Some(now + after);
        }
        true
    }

    /// A background re-list finished: a shorter list is believed only when two agree on it.
    /// False while a shorter list waits for its confirmation.
    fn relist_done(&mut self, tools: Vec<ToolEntry>, marks: Vec<onboarding::PageMark>, now: Instant) -> bool {
        self.relisting = false;
        self.background = false;
        let (before, after) = (self.info.tools.len(), tools.len());
        if after < before && self.short_seen != Some(after) && self.truncation_relists < self.cfg.max_relists {
            self.truncation_relists += 1;
            self.short_seen = Some(after);
            if may_log(Kind::Onboarding, &self.info.device_id) {
            tracing::info!(device = %self.info.device_id, "tools/list gave {after} tools after {before}; listing again to tell a truncated list from a shorter one");
            }
            self.relist_at = Some(now + Duration::from_secs(1));
            return false;
        }
        self.short_seen = None;
        let same = tool_list::same(&tools, &self.info.tools);
        if !same {
            self.info_mut().set_tools(tools);
            self.info_mut().set_tool_pages(marks);
            self.emit(Event::ToolsChanged { tools: after });
        }
        true
    }

    /// Why a first list (the one that would make the device `ready`) looks cut short, if it
    /// does: its last page is exactly as long as a page the device sent with a `nextCursor` (a
    /// cache answering with the pages it has so far), the device said its tools changed while
    /// they were being listed, or it is shorter than the list the hub knew for this device
    /// before (this session's earlier onboarding, or its earlier connection).
    fn looks_cut_short(&self, tools: usize, full_page: bool) -> Option<String> {
        if full_page {
            return Some("its last page, without a nextCursor, is as long as a page the device sent with one".into());
        }
        if self.changed_while_onboarding {
            return Some("the device sent tools/list_changed while it was being listed".into());
        }
        let before = if self.info.phase_was_ready_once { self.info.tools.len() } else { 0 }.max(self.known_tools as usize);
        (tools < before).then(|| format!("{tools} tools, fewer than the {before} this device listed before"))
    }

    /// A cap or a device quirk cut the listing short: warn (a cap is logged once per session).
    fn warn_listing(&mut self, warning: String) {
        if self.onboarding.capped() {
            if !self.cap_logged {
                self.cap_logged = true;
                if may_log(Kind::Device, &self.info.device_id) {
                    tracing::warn!(device = %self.info.device_id, "{warning}");
                }
            }
            self.info_mut().tools_warning = Some(warning.clone());
            self.info_mut().bump();
        }
        self.emit(Event::Warning { message: warning });
    }

    /// Answers every refresh waiter with the tool list as it is now.
    fn answer_waiters(&mut self, refresh_error: Option<&str>) {
        if self.waiters.is_empty() {
            return;
        }
        let mut answer = json!({"tools": self.info.tools});
        if let Some(e) = &self.info.onboarding_error {
            answer["onboarding_error"] = json!(e);
        }
        if let Some(e) = &self.info.tools_warning {
            answer["tools_warning"] = json!(e);
        }
        if let Some(e) = refresh_error {
            answer["refresh_error"] = json!(e);
        }
        let answer = RawResult::from_value(&answer);
        for w in std::mem::take(&mut self.waiters) {
            self.out.push(Output::Reply { ticket: w.ticket, outcome: Ok(answer.clone()) });
        }
    }

    /// An onboarding step failed: send it again after a backoff, or give up when the attempts
    /// are spent. A failed background re-list keeps the tools listed before.
    pub(super) fn step_failed(&mut self, origin: Origin, error: String, now: Instant) {
        let (step, planned) = match origin {
            Origin::Initialize(_) => ("initialize".to_string(), Planned::Initialize),
            _ => (format!("tools/list page {}", self.onboarding.page()), Planned::ListPage),
        };
        let what = format!("{step}: {error}");
        if self.background {
            self.background = false;
            self.relisting = false;
            let message = format!("listing the tools again failed at {what}; kept the {} tools listed before", self.info.tools.len());
            self.emit(Event::Warning { message: message.clone() });
            self.answer_waiters(Some(&message));
            return;
        }
        let status = &mut std::sync::Arc::make_mut(&mut self.info).onboarding;
        status.last_error = Some(what.clone());
        if status.attempt < status.max_attempts {
            let delay = config::backoff(self.cfg.retry_backoff, status.attempt as usize - 1).unwrap_or_default();
            status.attempt += 1;
            let (attempt, of) = (status.attempt, status.max_attempts);
            self.info_mut().bump();
            self.needs_agreement = true;
            self.retry_step = Some((now + delay, planned));
            self.emit(Event::OnboardingRetry { attempt, of, error: what, retry_in_ms: delay.as_millis() as u64 });
            return;
        }
        status.failed = true;
        let attempts = status.attempt;
        let message = format!("onboarding failed at {what} ({attempts} attempts)");
        let again = config::backoff(self.cfg.failed_onboarding_retry, usize::from(self.failed_rounds));
        if let Some(delay) = again {
            self.retry_failed_at = Some(now + delay);
            self.failed_rounds = self.failed_rounds.saturating_add(1);
        }
        if may_log(Kind::Onboarding, &self.info.device_id) {
            match again {
                Some(delay) => tracing::warn!(device = %self.info.device_id, "{message}; onboarding it again in {} s, or at its next hello", delay.as_secs()),
                None => tracing::warn!(device = %self.info.device_id, "{message}"),
            }
        }
        // Keep what a listing that failed part-way found, unless an earlier list had more.
        let partial = self.onboarding.take_tools();
        if partial.len() > self.info.tools.len() {
            self.info_mut().set_tools(partial);
        }
        self.info_mut().onboarding_error = Some(message.clone());
        self.info_mut().set_phase(Phase::Ready);
        self.info_mut().bump();
        self.emit(Event::OnboardingFailed { error: message, attempts });
        self.answer_waiters(None);
    }
}
