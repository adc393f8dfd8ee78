//! A call another hub forwarded for one of its MCP hosts, with the device's progress passed
//! back while it runs (`"progress": true` on the `rpc` op): each `notifications/progress` the
//! called device sends under the call's own `progressToken` goes to the asking hub as an event
//! of the request, so a host hears a device of another hub report progress as it hears one of
//! its own hub's (issue 45: progress on every path). Rules:
//! - Only the called device's progress, and only under the token the call carries: another
//!   device, another token, or any other notification is not passed on.
//! - Passed on without waiting (`try_send`): a slow asking hub loses progress, never the answer;
//!   the call ends as [`super::rpc`] ends it.

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;

use crate::hub::Hub;
use crate::links::handle::LinkEvent;
use crate::session::Event;
use crate::wire::jsonrpc::RawResult;

/// [`super::rpc`], with the device's progress under the call's token sent on `tx` as events of
/// request `id`.
pub(super) async fn rpc_relaying(hub: &Hub, device: Option<&str>, method: &str, params: Option<Value>, timeout_ms: u64, id: u64, tx: &mpsc::Sender<String>) -> Result<RawResult, Value> {
    let token = params.as_ref().and_then(|p| p.pointer("/_meta/progressToken")).filter(|t| t.is_string() || t.is_number()).cloned();
    let (Some(token), Ok(handle)) = (token, hub.registry.select(device)) else {
        return super::rpc(hub, device, method, params, timeout_ms).await;
    };
    let mut events = hub.registry.events.subscribe();
    let call = super::rpc(hub, device, method, params, timeout_ms);
    tokio::pin!(call);
    loop {
        tokio::select! {
            answer = &mut call => return answer,
            ev = events.recv() => match ev {
                Ok(ev) => {
                    if *ev.device_id == *handle.device_id
                        && let LinkEvent::Session(Event::Notification { method, params }) = &ev.event
                        && method == "notifications/progress"
                        && params.get("progressToken") == Some(&token)
                    {
                        let _ = tx.try_send(json!({"id": id, "event": params}).to_string());
                    }
                }
                Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return call.await,
            },
        }
    }
}
