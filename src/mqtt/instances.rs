//! Which instance of an MQTT device the hub serves, from what the embedded broker tells it
//! ([`ClientEvent`]: a device's connection started or ended), and each device's onboarding budget
//! across its links. The rules (the dispatcher carries them out):
//!
//! - **A connection that ends ends the device's link at once** (when it is the device's current
//!   connection): no link stays `ready` for a device that is gone, and no call waits on it.
//! - **A new connection of a device that has a link** ends that link and starts a new one that
//!   onboards at once: a device that reboots sends no FIN, so its new CONNECT (which takes over
//!   its client id) is the first sign of the new instance.
//! - **A device whose link ended with its connection** in the last [`RECONNECT_MEMORY`] gets a
//!   new link that onboards at once when it connects again: an idle stock device that reconnected
//!   after a network blip says nothing until its next wake word, and would otherwise be missing.
//! - A connection that ends after its successor started (a takeover) changes nothing.
//! - **Onboardings are budgeted per device, across its links**: each new link is handed what the
//!   device's earlier links spent ([`OnboardBudget`]), so a device that reconnects in a loop gets
//!   at most `max_onboardings` per `onboarding_window` and the rest wait (the session logs it).
//!
//! Bounded: current connections by the broker's client cap; the records of closed links and of
//! budgets are forgotten once they no longer matter, swept whenever their table has doubled.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::broker::ClientEvent;
use crate::session::OnboardBudget;

/// How long a device whose connection closed is remembered, so that its reconnect starts a link.
pub const RECONNECT_MEMORY: Duration = Duration::from_secs(600);

/// What to do with a device's link after a connection event.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum LinkAction {
    Nothing,
    /// End the link, for this reason.
    End(String),
    /// End the link (if any) and start a new one that onboards without waiting for a hello.
    Restart(String),
}

#[derive(Debug, Default)]
pub(super) struct Instances {
    /// A device's current connection.
    current: HashMap<String, u64>,
    /// Devices whose link ended with their connection, and when.
    closed: HashMap<String, Instant>,
    budgets: HashMap<String, OnboardBudget>,
    sweep_at: usize,
}

impl Instances {
    /// A connection event of the device `key` (its client id); `has_link` says whether the
    /// device has a link now.
    pub fn on_event(&mut self, event: ClientEvent, has_link: bool, now: Instant) -> (String, LinkAction) {
        match event {
            ClientEvent::Connected { client_id, conn } => {
                self.current.insert(client_id.clone(), conn);
                let recently = self.closed.remove(&client_id).is_some_and(|at| now.duration_since(at) < RECONNECT_MEMORY);
                let action = if has_link {
                    LinkAction::Restart("a new MQTT connection of the device started (it restarted): its old session is over".into())
                } else if recently {
                    LinkAction::Restart(String::new())
                } else {
                    LinkAction::Nothing
                };
                (client_id, action)
            }
            ClientEvent::Closed { client_id, conn } => {
                if self.current.get(&client_id) != Some(&conn) {
                    return (client_id, LinkAction::Nothing);
                }
                self.current.remove(&client_id);
                if !has_link {
                    return (client_id, LinkAction::Nothing);
                }
                self.closed.insert(client_id.clone(), now);
                self.sweep(now);
                (client_id, LinkAction::End("its MQTT connection closed".into()))
            }
        }
    }

    /// The budget to hand a new link of `key`: what its earlier links spent. This link's first
    /// onboarding is counted here too, as the session will count it.
    pub fn budget(&mut self, key: &str, now: Instant, max: u32, window: Duration) -> OnboardBudget {
        let record = self.budgets.entry(key.to_string()).or_default();
        let handed = *record;
        let _ = record.take(now, max, window);
        self.sweep_budgets(now, window);
        handed
    }

    fn sweep(&mut self, now: Instant) {
        if self.closed.len() >= self.sweep_at.max(64) {
            self.closed.retain(|_, at| now.duration_since(*at) < RECONNECT_MEMORY);
            self.sweep_at = self.closed.len() * 2;
        }
    }

    fn sweep_budgets(&mut self, now: Instant, window: Duration) {
        if self.budgets.len() >= 64 && self.budgets.len().is_power_of_two() {
            self.budgets.retain(|_, b| !b.is_fresh(now, window));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connected(id: &str, conn: u64) -> ClientEvent {
        ClientEvent::Connected { client_id: id.into(), conn }
    }

    fn closed(id: &str, conn: u64) -> ClientEvent {
        ClientEvent::Closed { client_id: id.into(), conn }
    }

    #[test]
    fn a_close_ends_the_link_a_reconnect_starts_one_and_a_takeover_close_changes_nothing() {
        let t0 = Instant::now();
        let mut i = Instances::default();
        assert_eq!(i.on_event(connected("k", 1), false, t0).1, LinkAction::Nothing, "a new device: its first message starts the link");
        assert!(matches!(i.on_event(closed("k", 1), true, t0).1, LinkAction::End(why) if why.contains("closed")));
        // It comes back (a blip, or a restart that closed its socket): a link that onboards at once.
        assert!(matches!(i.on_event(connected("k", 2), false, t0).1, LinkAction::Restart(_)));
        // A reboot without FIN: the new connection takes over while the link is up.
        assert!(matches!(i.on_event(connected("k", 3), true, t0).1, LinkAction::Restart(why) if why.contains("restarted")));
        assert_eq!(i.on_event(closed("k", 2), true, t0).1, LinkAction::Nothing, "the taken-over connection ends late");
        assert!(matches!(i.on_event(closed("k", 3), true, t0).1, LinkAction::End(_)));
        // Long gone: its reconnect is a new device again.
        assert_eq!(i.on_event(connected("k", 4), false, t0 + RECONNECT_MEMORY).1, LinkAction::Nothing);
    }

    #[test]
    fn a_device_that_reconnects_in_a_loop_spends_one_budget_across_its_links() {
        let t0 = Instant::now();
        let w = Duration::from_secs(30);
        let mut i = Instances::default();
        let mut spent = Vec::new();
        for n in 0..6 {
            let mut handed = i.budget("k", t0 + Duration::from_secs(n), 4, w);
            spent.push(handed.take(t0 + Duration::from_secs(n), 4, w).is_ok());
        }
        assert_eq!(spent, [true, true, true, true, false, false]);
        let mut other = i.budget("other", t0, 4, w);
        assert!(other.take(t0, 4, w).is_ok(), "per device");
        let mut later = i.budget("k", t0 + w, 4, w);
        assert!(later.take(t0 + w, 4, w).is_ok(), "a new window");
    }

    #[test]
    fn the_records_stay_bounded() {
        let t0 = Instant::now();
        let mut i = Instances::default();
        for n in 0..10_000u64 {
            let at = t0 + RECONNECT_MEMORY * (n as u32 + 1);
            let id = format!("k{n}");
            i.on_event(connected(&id, n), false, at);
            i.on_event(closed(&id, n), true, at);
            i.budget(&id, at, 4, Duration::from_secs(30));
        }
        assert!(i.closed.len() < 200 && i.budgets.len() < 200 && i.current.is_empty(), "{} {}", i.closed.len(), i.budgets.len());
    }
}
