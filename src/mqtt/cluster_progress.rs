//! A device of another hub reporting progress during a call made for an MCP host of this hub:
//! the forwarded `rpc` asks the serving hub for the device's progress (`hub::control`'s
//! progress relay), and each report is published here as the device's own
//! `notifications/progress` event, which this hub's MCP bridge routes to the host's call as it
//! routes a local device's (by the device and the hub's own token, which the call carried).

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::{Answer, ClusterNode};
use crate::links::handle::{DeviceEvent, LinkEvent};
use crate::session::Event;

impl ClusterNode {
    /// A forwarded `rpc` whose device's progress reports come to `progress` while it runs.
    pub fn forward_with_progress(&self, hub: &str, mut op: Value, deadline: Duration, progress: mpsc::Sender<Box<RawValue>>) -> BoxFuture<'static, Answer> {
        op["progress"] = json!(true);
        super::stop::forward(self, hub, op, deadline, Some(progress))
    }

    /// Publishes a progress report of `device_id` (another hub's) as that device's notification
    /// on this hub; a report that is not a JSON object is dropped.
    pub fn relay_progress(&self, device_id: &Arc<str>, params: &RawValue) {
        let (Some(hub), Ok(params @ Value::Object(_))) = (self.hub.upgrade(), serde_json::from_str::<Value>(params.get())) else { return };
        let event = LinkEvent::Session(Event::Notification { method: "notifications/progress".into(), params: Box::new(params) });
        hub.registry.events.send(Arc::new(DeviceEvent { device_id: device_id.clone(), event }));
    }
}
