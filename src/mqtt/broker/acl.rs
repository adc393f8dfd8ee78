//! Who a client is (the authentication hook run at CONNECT) and what it may do.
//!
//! - [`Role::Hub`]: full rights. The hub's own connections log in as [`HUB_USERNAME`] with a
//!   password made at random for each run (see [`hub_credential_path`]).
//! - [`Role::Device`]: may publish only to `mcpdev/up/<its client id>` (also its will) and
//!   subscribe only to `mcpdev/down/<its client id>` (which it gets on connect anyway).

use std::path::PathBuf;
use std::sync::Arc;

use rumqttc::mqttbytes::v4::ConnectReturnCode;

use crate::mqtt::topics;

/// The MQTT username of the hub's own connections to its embedded broker.
pub const HUB_USERNAME: &str = "mcpdev-hub";

/// What a client gave at CONNECT.
#[derive(Clone, PartialEq, Eq)]
pub struct Login {
    pub client_id: String,
    pub username: Option<String>,
    pub password: Option<String>,
}

/// Never shows the password.
impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Login").field("client_id", &self.client_id).field("username", &self.username).finish_non_exhaustive()
    }
}

impl Login {
    /// What a CONNECT carries (an empty username counts as none).
    pub fn of(connect: &rumqttc::mqttbytes::v4::Connect) -> Self {
        Self {
            client_id: connect.client_id.clone(),
            username: connect.login.as_ref().map(|l| l.username.clone()).filter(|u| !u.is_empty()),
            password: connect.login.as_ref().map(|l| l.password.clone()),
        }
    }

    /// The Device-Id (`aa:bb:cc:dd:ee:ff`) of a client id of mcpdev's scheme
    /// (`GID_mcpdev@@@aa_bb_cc_dd_ee_ff`, see [`topics`]): `None` for any other client id.
    pub fn device_id(&self) -> Option<String> {
        is_device_key(&self.client_id).then(|| topics::device_id_of(&self.client_id)).flatten()
    }
}

/// A client id a device may use: one topic level that names a MAC.
pub fn is_device_key(client_id: &str) -> bool {
    topics::valid_key(client_id) && topics::device_id_of(client_id).is_some()
}

/// What a client may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Everything.
    Hub,
    /// Only its own uplink and downlink.
    Device { client_id: String },
}

impl Role {
    pub fn may_publish(&self, topic: &str) -> bool {
        match self {
            Role::Hub => true,
            Role::Device { client_id } => topic.strip_prefix(topics::UP) == Some(client_id.as_str()),
        }
    }

    /// Shared subscriptions (`$share/…`) are for hubs only.
    pub fn may_subscribe(&self, filter: &str) -> bool {
        match self {
            Role::Hub => true,
            Role::Device { client_id } => filter.strip_prefix(topics::DOWN) == Some(client_id.as_str()),
        }
    }
}

/// Why a CONNECT is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No or wrong credentials (CONNACK return code 4).
    Credentials(String),
    /// A client id the broker does not accept (CONNACK return code 2).
    ClientId(String),
}

impl Refusal {
    pub fn code(&self) -> ConnectReturnCode {
        match self {
            Refusal::Credentials(_) => ConnectReturnCode::BadUserNamePassword,
            Refusal::ClientId(_) => ConnectReturnCode::BadClientId,
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Credentials(why) | Refusal::ClientId(why) => f.write_str(why),
        }
    }
}

/// The authentication hook: run once per CONNECT, outside any lock.
pub type Authenticate = Arc<dyn Fn(&Login) -> Result<Role, Refusal> + Send + Sync>;

/// Compares secrets in time independent of where they differ.
pub fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The hub's default hook:
/// - username [`HUB_USERNAME`] with `hub_password`: [`Role::Hub`];
/// - no device tokens (an open lab broker): a client id of the device scheme is a
///   [`Role::Device`], any other client a [`Role::Hub`];
/// - with device tokens: a password among them and a client id of the device scheme make a
///   [`Role::Device`]; anything else is refused.
pub fn token_auth(device_tokens: Vec<String>, hub_password: String) -> Authenticate {
    Arc::new(move |login: &Login| {
        if let Some(hub) = hub_login(login, &hub_password) {
            return hub;
        }
        let device = || Role::Device { client_id: login.client_id.clone() };
        if device_tokens.is_empty() {
            return Ok(if is_device_key(&login.client_id) { device() } else { Role::Hub });
        }
        if !login.password.as_deref().is_some_and(|p| device_tokens.iter().any(|t| same_secret(p, t))) {
            return Err(Refusal::Credentials("no accepted device token as the MQTT password".into()));
        }
        device_client_id(login)?;
        Ok(device())
    })
}

/// A login with the reserved hub username: [`Role::Hub`] with the hub's password, refused with any
/// other; `None` for every other login. Every authentication hook starts with it.
pub fn hub_login(login: &Login, hub_password: &str) -> Option<Result<Role, Refusal>> {
    (login.username.as_deref() == Some(HUB_USERNAME)).then(|| match &login.password {
        Some(p) if !hub_password.is_empty() && same_secret(p, hub_password) => Ok(Role::Hub),
        _ => Err(Refusal::Credentials(format!("wrong password for the reserved username {HUB_USERNAME}"))),
    })
}

/// A device's client id must be of mcpdev's scheme, since its topics are named after it.
pub fn device_client_id(login: &Login) -> Result<(), Refusal> {
    if is_device_key(&login.client_id) {
        return Ok(());
    }
    Err(Refusal::ClientId(format!("a device's client id must be GID_mcpdev@@@<mac with _>, not {:?}", login.client_id)))
}

/// Where a hub running an embedded broker on `port` keeps its broker credential (0600, in
/// [`crate::paths::runtime_dir`]), so that the CLI of the same user can reach the broker as a hub
/// (`mcpdev call --mqtt mqtt://127.0.0.1:PORT --device …`).
pub fn hub_credential_path(port: u16) -> PathBuf {
    crate::paths::runtime_dir().join(format!("mqtt-broker-{port}.secret"))
}

/// Writes the hub's broker password for `port`.
pub fn write_hub_credential(port: u16, password: &str) -> std::io::Result<()> {
    crate::paths::write_private(&hub_credential_path(port), password.as_bytes())
}

/// The hub's broker password for a loopback embedded broker on `port`, if a hub of this user
/// runs one.
pub fn read_hub_credential(port: u16) -> Option<String> {
    let bytes = crate::paths::read_private(&hub_credential_path(port)).ok()?;
    String::from_utf8(bytes).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "GID_mcpdev@@@aa_bb_cc_dd_ee_01";

    fn login(client_id: &str, username: Option<&str>, password: Option<&str>) -> Login {
        Login { client_id: client_id.into(), username: username.map(Into::into), password: password.map(Into::into) }
    }

    #[test]
    fn roles_from_logins() {
        let open = token_auth(vec![], "hubpw".into());
        assert_eq!(open(&login(KEY, None, None)), Ok(Role::Device { client_id: KEY.into() }));
        assert_eq!(open(&login("mosquitto_sub", None, None)), Ok(Role::Hub));
        assert_eq!(open(&login("x", Some(HUB_USERNAME), Some("hubpw"))), Ok(Role::Hub));
        assert!(matches!(open(&login("x", Some(HUB_USERNAME), Some("nope"))), Err(Refusal::Credentials(_))));
        let closed = token_auth(vec!["t1".into(), "t2".into()], "hubpw".into());
        assert_eq!(closed(&login(KEY, None, Some("t2"))), Ok(Role::Device { client_id: KEY.into() }));
        assert_eq!(closed(&login("cli", Some(HUB_USERNAME), Some("hubpw"))), Ok(Role::Hub));
        assert!(matches!(closed(&login(KEY, None, Some("t3"))), Err(Refusal::Credentials(_))));
        assert!(matches!(closed(&login(KEY, None, None)), Err(Refusal::Credentials(_))));
        let bad_id = closed(&login("sniffer", None, Some("t1"))).unwrap_err();
        assert_eq!(bad_id.code(), ConnectReturnCode::BadClientId);
        assert!(matches!(closed(&login("a/b", None, Some("t1"))), Err(Refusal::ClientId(_))));
        assert!(!format!("{:?}", login(KEY, None, Some("t1"))).contains("t1"), "Debug hides the password");
        assert_eq!(login(KEY, None, None).device_id().as_deref(), Some("aa:bb:cc:dd:ee:01"));
    }

    #[test]
    fn a_device_has_only_its_own_topics() {
        let d = Role::Device { client_id: KEY.into() };
        assert!(d.may_publish(&topics::uplink(KEY)) && d.may_subscribe(&topics::downlink(KEY)));
        let other = "GID_mcpdev@@@aa_bb_cc_dd_ee_02";
        for t in [topics::downlink(KEY), topics::uplink(other), topics::downlink(other), format!("{}+", topics::UP), "#".into(), format!("{}/x", topics::uplink(KEY))] {
            assert!(!d.may_publish(&t), "{t}");
        }
        for f in ["#".to_string(), topics::downlink(other), format!("{}+", topics::DOWN), topics::uplink(KEY), format!("$share/g/{}", topics::downlink(KEY))] {
            assert!(!d.may_subscribe(&f), "{f}");
        }
        assert!(Role::Hub.may_publish("anything") && Role::Hub.may_subscribe("#"));
    }
}
