//! Carrying a decision out on the hub: the broker's per-device credential is brought in line and
//! the device's sessions are cut off, so a revoked or re-bound device is gone on every path by the
//! time the command that decided it returns. Nothing here holds the admission lock while it waits.

use super::*;

/// How long an approval or a revocation waits for the broker to confirm the device's credential.
pub const BROKER_SYNC_LIMIT: Duration = Duration::from_secs(5);

/// Brings the broker's per-device credential of `device_id` in line with its approval, when the
/// hub manages them (Mosquitto dynamic security), and waits for it up to [`BROKER_SYNC_LIMIT`]:
/// the command that changed the approval returns once the broker knows (a new credential works,
/// a revoked one is gone and its session ended). A broker that is down is caught up with later;
/// the error says so.
async fn sync_broker(hub: &crate::hub::Hub, device_id: &str) -> Result<(), String> {
    let Some(done) = hub.mqtt.get().and_then(|m| m.admission_changed(device_id)) else { return Ok(()) };
    match tokio::time::timeout(BROKER_SYNC_LIMIT, done).await {
        Ok(Ok(Ok(()))) => Ok(()),
        Ok(Ok(Err(e))) => Err(format!("the broker's login for {device_id} is not updated: {e}")),
        Ok(Err(_)) | Err(_) => Err(format!(
            "the broker did not confirm the login of {device_id} within {BROKER_SYNC_LIMIT:?} (is the hub's dynamic-security admin connection down? `serve` logs it)"
        )),
    }
}

/// `mcpdev devices revoke`: withdraws the approval and cuts the device off on every path.
pub async fn revoke_and_disconnect(hub: &crate::hub::Hub, id: &str) -> Result<Value, String> {
    let was = hub.admission.revoke(id)?;
    let device_id = device_id(id)?;
    if let Err(e) = sync_broker(hub, &device_id).await {
        // The hub serves no uplink of a revoked device whatever the broker holds.
        warn!(device = %device_id, "{e}; the revocation holds on the hubs, and the broker's login is removed once the admin connection is back");
    }
    let disconnected = cut_off(hub, &device_id, crate::links::handle::CloseReason::Revoked).await;
    // `revoked`: the revocation is recorded (it always is, once `revoke` succeeds); `was`: what
    // let the device in until now.
    Ok(serde_json::json!({"device_id": device_id, "revoked": true, "was": was, "was_admitted": was.admitted(), "disconnected": disconnected}))
}

/// `mcpdev devices approve`: approves, and when the approval re-binds the device (`--rebind`),
/// cuts off the session that came in with the old binding's token. Beside the approval, whether
/// the broker got the device's login: the approval is recorded either way (the caller hands it to
/// the other hubs), but a device without its login cannot connect, so the command is to fail and
/// say why rather than report success.
pub async fn approve_and_cut_over(hub: &crate::hub::Hub, target: &str, rebind: bool) -> Result<(Approval, Result<(), String>), String> {
    let approval = hub.admission.approve(target, rebind)?;
    let broker = sync_broker(hub, &approval.device_id).await.map_err(|e| {
        format!("approved {}, but {e}. The approval is recorded, and the login is created once the hub reaches the broker's dynamic-security admin again; until then the device cannot connect over MQTT", approval.device_id)
    });
    if approval.replaced.is_some() {
        cut_off(hub, &approval.device_id, crate::links::handle::CloseReason::Revoked).await;
    }
    Ok((approval, broker))
}

/// Another hub's decision ([`Admission::import`]), applied; the device's sessions here are cut
/// off when it was revoked (or bound anew).
pub async fn import_and_cut_off(hub: &crate::hub::Hub, device_id: &str, payload: &[u8]) -> Result<Imported, String> {
    let imported = hub.admission.import(device_id, payload)?;
    carry_out_import(hub, &imported).await;
    Ok(imported)
}

/// What an imported decision asks of this hub: the broker's credential brought in line, and the
/// device's sessions here cut off when it was revoked (or bound anew).
pub async fn carry_out_import(hub: &crate::hub::Hub, imported: &Imported) {
    if let Imported::Applied { device_id, .. } = imported
        && let Err(e) = sync_broker(hub, device_id).await
    {
        warn!(device = %device_id, "{e}; it is updated in the background");
    }
    if let Imported::Applied { device_id, cut: true, .. } = imported
        && cut_off(hub, device_id, crate::links::handle::CloseReason::Revoked).await
    {
        info!(device = %device_id, "revoked through another hub of the cluster: disconnected it here");
    }
}

/// Closes `device_id`'s WebSocket or MQTT session, its embedded-broker connection and its MQTT
/// link. Whether it had any.
async fn cut_off(hub: &crate::hub::Hub, device_id: &str, reason: crate::links::handle::CloseReason) -> bool {
    let handle = hub.registry.get(device_id);
    let mut disconnected = handle.is_some();
    if let Some(m) = hub.mqtt.get() {
        disconnected |= m.cut_off(device_id);
    }
    if let Some(h) = handle {
        info!(device = %device_id, ?reason, "admission changed: disconnecting the device");
        // A device that does not drain its socket must not hold the CLI up.
        if tokio::time::timeout(Duration::from_secs(5), h.close(reason)).await.is_err() {
            warn!(device = %device_id, "the device's session did not close within 5 s");
        }
        // The link leaves the registry as its task ends, a moment after the close (at once when
        // the MQTT dispatcher dropped it first): wait for that, so that whoever asks next (the
        // CLI's next `devices`) no longer sees a device this answer says is disconnected.
        if !hub.registry.wait_removed(&h, Duration::from_secs(2)).await {
            warn!(device = %device_id, "the device's link was still listed 2 s after it was closed");
        }
    }
    disconnected
}
