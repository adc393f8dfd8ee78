//! Which MQTT login the OTA answer hands devices (`serve --mqtt …`): the device's own on every
//! broker set-up the docs give, or, only when opted in (`--mqtt-shared-device-login`), one shared
//! login. The shared login's variables set without the opt-in stop the hub with advice rather than
//! being used or silently ignored.

use tracing::{info, warn};

/// Device MQTT credentials handed out by OTA (environment only: they are secrets).
pub const DEVICE_USERNAME_ENV: &str = "MCPDEV_MQTT_DEVICE_USERNAME";
pub const DEVICE_PASSWORD_ENV: &str = "MCPDEV_MQTT_DEVICE_PASSWORD";

/// What the choice depends on: the broker a real one (`Some`, as people see it) or the embedded
/// one (`None`); `--mqtt-shared-device-login`; whether a hub manages per-device logins here
/// (`--mqtt-dynsec` or `--mqtt-hooks`).
pub struct Setup<'a> {
    pub external: Option<&'a dyn std::fmt::Display>,
    pub shared_opt_in: bool,
    pub managed_here: bool,
}

/// The MQTT login the OTA answer gives devices.
#[derive(Debug, Clone)]
pub enum DeviceLogin {
    /// The client id and the device's own token: the embedded broker checks it, Mosquitto with
    /// dynamic security holds it for approved bindings, EMQX asks the hub's hooks.
    Own,
    /// The shared login (explicit opt-in), for approved bindings only.
    Shared { username: String, password: String },
}

/// Which login the OTA answer hands out: the device's own (client id and token) on every broker
/// set-up the docs give, or, only when opted in, the shared login. The shared login's variables
/// set without the opt-in stop the hub with advice, rather than being used or silently ignored.
pub fn device_login(setup: &Setup<'_>, username: Option<String>, password: Option<String>) -> Result<DeviceLogin, String> {
    let username = username.filter(|u| !u.is_empty());
    let password = password.filter(|p| !p.is_empty());
    let Some(external) = setup.external else {
        if username.is_some() || password.is_some() || setup.shared_opt_in {
            warn!("{DEVICE_USERNAME_ENV}/{DEVICE_PASSWORD_ENV} and --mqtt-shared-device-login are for a real broker: with the embedded one, each device gets its own login");
        }
        return Ok(DeviceLogin::Own);
    };
    match (setup.shared_opt_in, username, password) {
        (true, Some(username), Some(password)) => {
            warn!(
                broker = %external,
                "--mqtt-shared-device-login: every approved device gets the one login in {DEVICE_USERNAME_ENV}/{DEVICE_PASSWORD_ENV}, and with it any device (or anyone who reads it off one) \
                 may connect under any client id, another device's included; prefer per-device logins (--mqtt-dynsec on Mosquitto, --mqtt-hooks on EMQX)"
            );
            Ok(DeviceLogin::Shared { username, password })
        }
        (true, _, _) => Err(format!("--mqtt-shared-device-login needs both {DEVICE_USERNAME_ENV} and {DEVICE_PASSWORD_ENV}")),
        (false, None, None) => {
            if !setup.managed_here {
                info!(broker = %external, "devices get their client id and own token as their MQTT login: the broker must check it (--mqtt-dynsec on Mosquitto, --mqtt-hooks on EMQX, on this hub or another of the cluster)");
            }
            Ok(DeviceLogin::Own)
        }
        (false, _, _) => Err(format!(
            "{DEVICE_USERNAME_ENV}/{DEVICE_PASSWORD_ENV} are set, but a shared device login lets every device connect under any client id, another device's included: \
             pass --mqtt-shared-device-login to accept that, or unset them and give each device its own login (--mqtt-dynsec on Mosquitto, --mqtt-hooks on EMQX)"
        )),
    }
}
