//! `--wait-device`: after flashing, wait until the device (by the MAC read from the chip, which
//! the firmware sends as its Device-Id) connects to the hub and finishes onboarding; its
//! description includes the hello.

use std::time::Duration;

use serde_json::{Value, json};

use crate::exit::{CodedError, Exit};
use crate::links::hub_client::HubClient;

/// The hub's description of the device once it is onboarded (`device_id`, `hello`, …).
pub async fn wait_for_device(hub: &str, device_id: &str, wait: Duration) -> Result<Value, CodedError> {
    let client = HubClient::open(hub).await?;
    let request = json!({"op": "device", "device": device_id, "wait_ms": wait.as_millis() as u64});
    client.call(request).await.map_err(|e| {
        let exit = if e.kind == "timeout" || e.kind == "not_found" || e.kind == "no_devices" { Exit::Timeout } else { Exit::Unreachable };
        CodedError::new(exit, format!("the flashed device {device_id} did not come online at the hub {hub} within {}: {}", humantime::format_duration(wait), e.message))
    })
}
