//! What a device's link tells the hub: [`DeviceEvent`], a session's event or the link's own
//! (connected, disconnected), as the hub's ring ([`super::ring`]) carries it to every watcher.
//!
//! Rules it enforces:
//! - An event is small: the device id is shared by every event of a link, a transport is one of
//!   a few names, and strings are boxed slices (the dashboard keeps events per device).
//! - An event knows its weight ([`DeviceEvent::weight`]) and its name ([`LinkEvent::name`])
//!   without being serialized, so the ring can bound itself in bytes and readers can filter.

use std::sync::Arc;

use crate::session::Event;

/// An event of one device, as the hub broadcasts it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DeviceEvent {
    /// Shared by every event of the device's link (one allocation, not one per event).
    pub device_id: Arc<str>,
    #[serde(flatten)]
    pub event: LinkEvent,
}

/// Session events plus the link's own: connected and disconnected.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(untagged)]
pub enum LinkEvent {
    Session(Event),
    Link(Lifecycle),
}

/// Kept small (events are kept per device by the dashboard's timeline): a transport is one of a
/// few names, and the strings are boxed slices.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Lifecycle {
    Connected { transport: &'static str, client_id: Option<Box<str>>, remote: Option<Box<str>> },
    Disconnected { reason: String },
}

impl DeviceEvent {
    /// What the event weighs in the hub's ring: the length of its JSON (what a watcher is sent),
    /// plus the event itself. A device's values reach it already cut to
    /// [`crate::session::VIEW_MAX_BYTES`].
    pub fn weight(&self) -> usize {
        std::mem::size_of::<Self>() + self.device_id.len() + self.event.weight()
    }
}

impl LinkEvent {
    fn weight(&self) -> usize {
        match self {
            LinkEvent::Session(e) => e.weight(),
            LinkEvent::Link(Lifecycle::Connected { client_id, remote, .. }) => client_id.as_ref().map_or(0, |s| s.len()) + remote.as_ref().map_or(0, |s| s.len()),
            LinkEvent::Link(Lifecycle::Disconnected { reason }) => reason.len(),
        }
    }

    /// The `event` field it is serialized with, without serializing it (a reader that keeps
    /// a few kinds of event need not serialize every device notification to find them).
    pub fn name(&self) -> &'static str {
        match self {
            LinkEvent::Session(e) => e.name(),
            LinkEvent::Link(Lifecycle::Connected { .. }) => "connected",
            LinkEvent::Link(Lifecycle::Disconnected { .. }) => "disconnected",
        }
    }
}
