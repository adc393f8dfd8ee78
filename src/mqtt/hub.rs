//! The hub's MQTT side: one broker connection, one dispatcher task, and one
//! [`links::mqtt`](crate::links::mqtt) task per device, registered like WebSocket devices.
//!
//! The dispatcher reads every message for this hub: uplinks (through the cluster's shared
//! subscription), messages other hubs pass on, claims and hub presence (see [`super::cluster`]).
//! A device's first message creates its link; if that message is not a hello, onboarding starts
//! at once (an MQTT device answers MCP while idle). After a device's OTA check-in the hub also
//! sends it an `initialize` a few times until it hears from it, so an idle stock device that
//! never says hello still shows up, and tells the device's link that it may have restarted.
//!
//! With the embedded broker the dispatcher also hears device connections start and end, first
//! (before any message they carry): a closed connection ends the device's link at once, a new
//! one starts a new link (see [`super::instances`]). Through another broker every hello may be a
//! new instance's, and the link onboards the device again on each (see [`crate::session`]).
//!
//! On every (re)connect the hub subscribes again, republishes its presence and its claims; the
//! registry is kept across broker outages.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rumqttc::{AsyncClient, LastWill, QoS};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tracing::{debug, info, warn};

use super::cluster::{Claims, Route};
use super::cluster_rpc::ClusterNode;
use super::conn::{self, BrokerUrl, ConnEvent};
use super::instances::{Instances, LinkAction};
use super::{broker, topics, udp};
use crate::hub::Hub;
use crate::links::handle::LinkSetup;
use crate::links::mqtt::{self as link, Inbound, MqttLinkSetup};
use crate::session::SessionConfig;
use crate::wire::identity::Identity;

/// Which broker the hub uses.
#[derive(Debug, Clone)]
pub enum BrokerChoice {
    /// Run the embedded broker, listening here.
    Embedded { listen: SocketAddr },
    External(BrokerUrl),
}

/// `serve --mqtt …` and its companions.
#[derive(Debug, Clone)]
pub struct MqttSettings {
    pub broker: BrokerChoice,
    /// The shared-subscription group of the cluster's hubs.
    pub group: String,
    /// Largest message carried to or from a device.
    pub max_payload: usize,
    /// The UDP audio socket.
    pub udp_addr: SocketAddr,
    /// `mqtt.endpoint` given to devices in the OTA answer, when it is not the broker's own address.
    pub device_endpoint: Option<String>,
    /// `mqtt.keepalive` given to devices (seconds).
    pub device_keepalive: u16,
    /// How long a new claim must stand before the hub serves the device.
    pub claim_settle: Duration,
    /// Hand approved devices the shared login of [`DEVICE_USERNAME_ENV`]/[`DEVICE_PASSWORD_ENV`]
    /// (`--mqtt-shared-device-login`): an explicit opt-in, since it lets every device pick any
    /// client id.
    pub shared_device_login: bool,
    /// Keep Mosquitto's dynamic-security clients in line with the approvals
    /// (`--mqtt-dynsec`, [`super::dynsec`]).
    pub dynsec: bool,
    /// Serve EMQX's authentication and authorization hooks here (`--mqtt-hooks`, [`super::hooks`]).
    pub hooks: Option<SocketAddr>,
    /// The name the operator gave this hub (`serve --hub-name`), shown by `devices` for its id.
    pub hub_name: Option<String>,
    /// Where the embedded broker listens for MQTT over TLS when the hub has TLS (`--mqtts-listen`).
    /// Its plain listener then binds loopback only (the hub's own link, the CLI), unless
    /// `plain_beside_tls`.
    pub tls_listen: SocketAddr,
    /// With TLS, keep the embedded broker's plain listener on its address too (`--mqtt-plain`).
    pub plain_beside_tls: bool,
    /// Devices this hub lists in its cluster index at most (`--cluster-index-max`).
    pub index_max: usize,
    /// Other hubs' devices offered through this hub's MCP endpoints at once (`--cluster-stand-ins`).
    pub stand_ins: usize,
    /// Where this hub offers the other hubs a direct link for their requests (`--cluster-link`,
    /// [`super::hub_link`]); none by default: requests go through the broker.
    pub cluster_link: Option<SocketAddr>,
}

impl MqttSettings {
    pub fn new(broker: BrokerChoice) -> Self {
        Self {
            broker,
            group: "mcpdev".into(),
            max_payload: 8192,
            udp_addr: "0.0.0.0:0".parse().expect("static address"),
            device_endpoint: None,
            device_keepalive: 240,
            claim_settle: Duration::from_millis(300),
            shared_device_login: false,
            dynsec: false,
            hooks: None,
            hub_name: None,
            cluster_link: None,
            tls_listen: "0.0.0.0:8883".parse().expect("static address"),
            plain_beside_tls: false,
            index_max: super::presence::DEFAULT_INDEX_MAX as usize,
            stand_ins: super::proxy::DEFAULT_MAX_PROXIES as usize,
        }
    }
}

/// How long a hub waits for its own claim of a device to come back from the broker before it
/// looks again ([`Control::ClaimCheck`]).
const CLAIM_RECHECK: Duration = Duration::from_secs(3);

/// How long a claim of this hub may take to come back from the broker and still count as its own
/// late claim ([`Dispatcher::claims_out`]); one that takes longer was lost.
const CLAIM_OUT_MAX: Duration = Duration::from_secs(300);

/// The keepalive of the hub's own broker connection: how soon a hub that vanished silently is
/// declared dead by the broker (its last will), and its devices taken over.
pub const HUB_KEEPALIVE: Duration = Duration::from_secs(5);

pub use super::device_login::{DEVICE_PASSWORD_ENV, DEVICE_USERNAME_ENV};

/// The running MQTT side of a hub.
pub struct MqttHub {
    pub hub_id: String,
    /// The broker as the hub reaches it (for people; no password).
    pub broker: String,
    /// The embedded broker's hub credential for the CLI, removed at shutdown.
    credential_file: Option<std::path::PathBuf>,
    /// The broker's host and port as devices should reach it, unless `device_endpoint` is set;
    /// `None` for the host means "the name the device reached the hub by".
    endpoint_host: Option<String>,
    endpoint_port: u16,
    settings: MqttSettings,
    device_login: super::device_login::DeviceLogin,
    client: AsyncClient,
    up: watch::Receiver<bool>,
    /// `true` once every subscription of the current connection is acknowledged.
    subscribed: watch::Receiver<bool>,
    pub udp: Arc<udp::UdpSink>,
    /// Keys heard from (any uplink, any claim): the OTA probe stops once a device is heard.
    heard: Arc<Mutex<HashSet<String>>>,
    /// Keys with a probe under way: one per device, however often it checks in (a device in a
    /// check-in loop must not multiply the `initialize`s published to it).
    probing: Arc<Mutex<HashSet<String>>>,
    control: mpsc::Sender<Control>,
    /// The embedded broker's clients (a revocation kicks the device's connection).
    broker_clients: Option<broker::Clients>,
    /// The other hubs on this broker, and requests to and from them.
    pub cluster: Arc<ClusterNode>,
    /// Mosquitto's per-device clients, when this hub keeps them (`--mqtt-dynsec`).
    dynsec: Option<Arc<super::dynsec::Dynsec>>,
    /// Where the EMQX hooks are served (`--mqtt-hooks`).
    pub hooks: Option<SocketAddr>,
    /// The direct link this hub offers the other hubs (`--cluster-link`), as advertised.
    pub link: Option<super::hub_link::Advert>,
}


enum Control {
    Settled(String),
    /// [`CLAIM_RECHECK`] has passed since this hub published a claim for the device.
    ClaimCheck(String),
    /// The device was revoked: drop its link now.
    CutOff(String),
    /// The device checked in at the OTA endpoint.
    CheckedIn(String),
    Ended { key: String, generation: u64 },
    Shutdown(tokio::sync::oneshot::Sender<()>),
}

impl MqttHub {
    /// The OTA answer's `mqtt` section for a device that reaches the hub by `host` (the hub's
    /// public name, see [`Hub::public_name`]) and whose own token is `device_token`.
    ///
    /// Every field stock firmware and py-xiaozhi insist on is set. The username is the client id
    /// and the password `device_token`: the approved binding's own when `admitted`, else one bound
    /// to the check-in's request, which no broker set up as the docs say accepts until a person
    /// approves that request. Only with the shared login opted in ([`DEVICE_USERNAME_ENV`],
    /// [`DEVICE_PASSWORD_ENV`], `--mqtt-shared-device-login`) does an approved binding get that
    /// login instead; a request nobody approved never does.
    pub fn ota_settings(&self, device_id: &str, host: &str, device_token: &str, admitted: bool) -> Value {
        let key = topics::key_for(device_id).unwrap_or_default();
        let endpoint = self.settings.device_endpoint.clone().unwrap_or_else(|| {
            let h = self.endpoint_host.as_deref().unwrap_or(host);
            format!("{h}:{}", self.endpoint_port)
        });
        use super::device_login::DeviceLogin;
        let (username, password) = match &self.device_login {
            DeviceLogin::Shared { username, password } if admitted => (username.clone(), password.clone()),
            DeviceLogin::Own | DeviceLogin::Shared { .. } => (key.clone(), device_token.to_string()),
        };
        json!({
            "endpoint": endpoint,
            "client_id": key,
            "username": username,
            "password": password,
            "publish_topic": topics::uplink(&key),
            "subscribe_topic": topics::downlink(&key),
            "keepalive": self.settings.device_keepalive,
        })
    }

    /// After an OTA check-in: send the device `initialize` until it is heard from (at 2, 5, 10
    /// and 20 s), so that an idle device is onboarded without waiting for its hello.
    pub fn probe(self: &Arc<Self>, device_id: &str) {
        let Ok(key) = topics::key_for(device_id) else { return };
        // A device that checks in has booted: a link it has may be its old instance's.
        if self.control.try_send(Control::CheckedIn(key.clone())).is_err() {
            warn!(%key, "the MQTT dispatcher is behind; an OTA check-in was not passed on to the device's link");
        }
        self.heard.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&key);
        if !self.probing.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(key.clone()) {
            debug!(%key, "a probe of this device is already under way");
            return;
        }
        let me = self.clone();
        tokio::spawn(async move {
            me.probe_until_heard(&key).await;
            me.probing.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&key);
        });
    }

    /// The probe's schedule: `initialize` at 2, 5, 10 and 20 s after the check-in, until heard.
    async fn probe_until_heard(&self, key: &str) {
        for (i, wait) in [2u64, 3, 5, 10].into_iter().enumerate() {
            tokio::time::sleep(Duration::from_secs(wait)).await;
            if self.heard.lock().unwrap_or_else(std::sync::PoisonError::into_inner).contains(key) {
                return;
            }
            if *self.up.borrow() {
                let probe = json!({"session_id": "", "type": "mcp", "payload": {
                    "jsonrpc": "2.0", "id": 2_000_000_000 + i as i64, "method": "initialize",
                    "params": {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "mcpdev", "version": env!("CARGO_PKG_VERSION")}},
                }});
                debug!(%key, "probing a device after its OTA check-in");
                crate::links::mqtt::publish(&self.client, topics::downlink(key), probe.to_string());
            }
        }
    }

    /// A revocation: kicks `device_id`'s broker connection (embedded broker) and drops its link;
    /// the broker's login check and [`Dispatcher::start_link`]'s admission check keep it out.
    /// Whether an embedded-broker connection was closed (a link is the registry's to report).
    pub fn cut_off(&self, device_id: &str) -> bool {
        let kicked = self.broker_clients.as_ref().map_or(0, |c| c.kick_device(device_id));
        if kicked > 0 {
            info!(device = %device_id, kicked, "revoked: its embedded-broker connection is closed");
        }
        // The link, if the dispatcher has one, is dropped there. Whether there was one is the
        // registry's to say (the caller looks there): a queued request proves nothing, and once
        // made a revocation through one hub of a cluster believe it had cut off a device that
        // another hub served, so it never asked that hub.
        if let Ok(key) = topics::key_for(device_id)
            && self.control.try_send(Control::CutOff(key)).is_err()
        {
            warn!(device = %device_id, "the MQTT dispatcher is behind; the revoked device's link is closed through its handle only");
        }
        kicked > 0
    }

    /// Refuses other hubs' requests from now on (typed, so they go where the devices go), lets
    /// the ones under way be answered, then says goodbye to every device, clears this hub's
    /// presence and disconnects.
    pub async fn shutdown(&self) {
        self.cluster.stop_serving().await;
        let (tx, rx) = tokio::sync::oneshot::channel();
        if self.control.send(Control::Shutdown(tx)).await.is_ok() {
            let _ = tokio::time::timeout(Duration::from_secs(2), rx).await;
        }
        // The embedded broker is in this process: it ends with it. The goodbyes are on their way
        // once it read this hub's DISCONNECT and its writers took what was queued.
        if let Some(clients) = &self.broker_clients
            && !clients.flushed_after(&own_client_id(&self.hub_id), Duration::from_secs(2)).await
        {
            warn!("the embedded MQTT broker did not pass every goodbye on within 2 s; stopping anyway");
        }
        if let Some(f) = &self.credential_file {
            let _ = std::fs::remove_file(f);
        }
    }

    pub fn is_up(&self) -> bool {
        *self.up.borrow()
    }

    /// The share group this hub reads uplinks through: `<--mqtt-group>-<tag of the hub secret>`
    /// ([`super::cluster_seal::share_group`]), what a per-cluster broker role grants.
    pub fn share_group(&self) -> &str {
        &self.settings.group
    }

    /// Waits up to `limit` until connected and subscribed (devices' messages reach the hub).
    pub async fn wait_subscribed(&self, limit: Duration) -> bool {
        let mut s = self.subscribed.clone();
        tokio::time::timeout(limit, s.wait_for(|ok| *ok)).await.is_ok_and(|r| r.is_ok())
    }
}

/// The embedded broker's logins with admission on: the hub's own connections by their run's
/// password; every other client is a device, with its scheme's client id
/// (`GID_mcpdev@@@aa_bb_…`) and its own token (or a shared `MCPDEV_DEVICE_TOKEN`) as the password,
/// and may then use only its own topics.
fn device_auth(hub: Arc<Hub>, hub_password: String) -> broker::Authenticate {
    use broker::acl::{Refusal, device_client_id, hub_login};
    Arc::new(move |login: &broker::Login| {
        if let Some(hub) = hub_login(login, &hub_password) {
            return hub;
        }
        device_client_id(login)?;
        let password = login.password.as_deref().unwrap_or_default();
        hub.admission.mqtt_login(&login.client_id, password).map_err(Refusal::Credentials)?;
        Ok(broker::Role::Device { client_id: login.client_id.clone() })
    })
}

/// Starts the broker (if embedded), the connection and the dispatcher.
/// The OTA answer's view of the MQTT side.
impl crate::hub::ota::MqttOffer for Arc<MqttHub> {
    fn ota_settings(&self, device_id: &str, host: &str, device_token: &str, admitted: bool) -> Value {
        MqttHub::ota_settings(self, device_id, host, device_token, admitted)
    }
    fn admission_changed(&self, device_id: &str) -> Option<tokio::sync::oneshot::Receiver<Result<(), String>>> {
        self.dynsec.as_ref().map(|d| d.sync(device_id))
    }
    fn probe(&self, device_id: &str) {
        MqttHub::probe(self, device_id);
    }
    fn cut_off(&self, device_id: &str) -> bool {
        MqttHub::cut_off(self, device_id)
    }
}

/// The client id of a hub's own broker connection.
fn own_client_id(hub_id: &str) -> String {
    format!("mcpdev-hub-{hub_id}")
}

pub async fn start(hub: Arc<Hub>, mut settings: MqttSettings) -> anyhow::Result<Arc<MqttHub>> {
    let hub_id = uuid::Uuid::new_v4().simple().to_string()[..12].to_string();
    // The cluster's own share group: a hub with another hub secret takes none of its uplinks.
    settings.group = super::cluster_seal::share_group(&hub.secret, &settings.group);
    info!(group = %settings.group, "cluster: uplinks are read through the share group of this hub secret and --mqtt-group (hubs with another secret are not in it)");
    let tokens = hub.config.device_tokens.clone();
    let max_packet = (settings.max_payload * 4).max(1 << 20);
    let (index_max, stand_ins) = (settings.index_max, settings.stand_ins);
    let mut broker_clients = None;
    // Device connections starting and ending, from the embedded broker (none from another one).
    let mut client_events = None;
    let (url, endpoint_host, endpoint_port) = match &settings.broker {
        BrokerChoice::Embedded { listen } => {
            // The hub's own connections log in with a password only this run knows.
            let hub_password = format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
            let authenticate = if hub.admission.approve_all() && tokens.is_empty() {
                warn!("the embedded MQTT broker is open (--approve-all): any client may connect, and clients that are not devices get full rights");
                broker::acl::token_auth(Vec::new(), hub_password.clone())
            } else {
                // Admission decides: a device's own token, or a shared one (with --approve-all too).
                device_auth(hub.clone(), hub_password.clone())
            };
            let (events_tx, events_rx) = mpsc::channel(4096);
            client_events = Some(events_rx);
            // With TLS, devices get mqtts; plain MQTT stays on loopback for the hub's own link
            // (and the CLI) unless the person asked for it on the network too.
            let tls = hub.config.tls.as_ref().map(|t| broker::BrokerTls { addr: settings.tls_listen, config: t.mqtt.clone(), deadline: hub.config.handshake_timeout });
            let plain_addr = match &tls {
                Some(_) if !settings.plain_beside_tls => SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), 0),
                _ => *listen,
            };
            let b = broker::start(broker::BrokerConfig { addr: plain_addr, authenticate, max_packet, limits: broker::Limits::default(), events: Some(events_tx), tls })
                .await
                .map_err(|e| anyhow::anyhow!("cannot start the embedded MQTT broker on {listen}{}: {e}", if hub.config.tls.is_some() { format!(" / {} (--mqtts-listen)", settings.tls_listen) } else { String::new() }))?;
            watch_broker(b.stopped.clone());
            broker_clients = Some(b.clients.clone());
            let port = b.addr.port();
            if let Err(e) = broker::acl::write_hub_credential(port, &hub_password) {
                warn!("cannot write the embedded broker's credential for the CLI ({}): {e}; `mcpdev … --mqtt` through it needs MCPDEV_MQTT_PASSWORD", broker::acl::hub_credential_path(port).display());
            }
            let url = BrokerUrl {
                host: "127.0.0.1".into(),
                port,
                tls: false,
                username: Some(broker::acl::HUB_USERNAME.into()),
                password: Some(hub_password),
            };
            (url, None, b.tls_addr.map_or(port, |a| a.port()))
        }
        BrokerChoice::External(url) => {
            let loopback = url.host == "localhost" || url.host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
            (url.clone(), (!loopback).then(|| url.host.clone()), url.port)
        }
    };
    // A hub login with no password (`mcpdev-hub…`): the cluster's own, derived from the shared hub
    // secret, which the EMQX hooks of any hub check.
    let url = match &settings.broker {
        BrokerChoice::External(_) if url.password.is_none() && url.username.as_deref().is_some_and(|u| u.starts_with(super::hooks::HUB_USERNAME_PREFIX)) => {
            info!("logging in to the broker with the cluster's hub password (derived from the hub secret; what --mqtt-hooks checks)");
            BrokerUrl { password: Some(hub.admission.hub_broker_password()), ..url }
        }
        _ => url,
    };
    // The embedded broker as devices and people reach it: without the hub's credential.
    let (shown, credential_file) = match settings.broker {
        BrokerChoice::Embedded { .. } => {
            let tls = hub.config.tls.is_some();
            let shown = BrokerUrl { username: None, password: None, tls, port: endpoint_port, ..url.clone() };
            (shown.to_string(), Some(broker::acl::hub_credential_path(url.port)))
        }
        BrokerChoice::External(_) => (url.to_string(), None),
    };
    let setup = super::device_login::Setup {
        external: match &settings.broker {
            BrokerChoice::External(url) => Some(url as &dyn std::fmt::Display),
            BrokerChoice::Embedded { .. } => None,
        },
        shared_opt_in: settings.shared_device_login,
        managed_here: settings.dynsec || settings.hooks.is_some(),
    };
    let device_login = super::device_login::device_login(&setup, std::env::var(DEVICE_USERNAME_ENV).ok(), std::env::var(DEVICE_PASSWORD_ENV).ok()).map_err(anyhow::Error::msg)?;
    let dynsec_admin = match (&settings.broker, settings.dynsec) {
        (BrokerChoice::External(url), true) => Some(super::dynsec::admin_url(url).map_err(anyhow::Error::msg)?),
        (BrokerChoice::Embedded { .. }, true) => anyhow::bail!("--mqtt-dynsec is for Mosquitto (--mqtt mqtt://…); the embedded broker checks each device's own login by itself"),
        (_, false) => None,
    };
    let hooks = match (&settings.broker, settings.hooks) {
        (BrokerChoice::External(_), Some(addr)) => Some(super::hooks::serve(hub.clone(), addr, super::hooks::secret_from_env().map_err(anyhow::Error::msg)?, settings.group.clone()).await?),
        (BrokerChoice::Embedded { .. }, Some(_)) => anyhow::bail!("--mqtt-hooks is for EMQX (--mqtt mqtt://…); the embedded broker checks each device's own login by itself"),
        (_, None) => None,
    };
    let link = match settings.cluster_link {
        Some(addr) => Some(super::hub_link::Listener::bind(addr).await?),
        None => None,
    };
    let udp = Arc::new(udp::UdpSink::bind(settings.udp_addr).await.map_err(|e| anyhow::anyhow!("cannot bind the UDP audio socket {}: {e}", settings.udp_addr))?);
    let presence = format!("{}{hub_id}", topics::HUBS);
    let will = LastWill::new(&presence, Vec::<u8>::new(), QoS::AtLeastOnce, true);
    // The broker notices a hub that vanished without closing its connection within 1.5 periods
    // (a killed process closes it, and the will is published at once).
    let options = url.options(&own_client_id(&hub_id), HUB_KEEPALIVE, max_packet);
    let connection = conn::connect(options, Some(will));
    let (control, control_rx) = mpsc::channel(1024);
    let (subscribed_tx, subscribed) = watch::channel(false);
    let cluster = ClusterNode::new(&hub_id, settings.hub_name.clone(), Arc::downgrade(&hub), connection.client.clone(), stand_ins, hub.secret.clone());
    // Reconciled only once this hub holds the cluster's approvals (mqtt::admission_sync).
    let dynsec = dynsec_admin.map(|admin| super::dynsec::Dynsec::start(Arc::downgrade(&hub), &admin, &hub_id, cluster.admissions.caught_up()));
    let mqtt = Arc::new(MqttHub {
        hub_id: hub_id.clone(),
        broker: shown,
        credential_file,
        endpoint_host,
        endpoint_port,
        device_login,
        client: connection.client.clone(),
        up: connection.up.clone(),
        subscribed,
        udp,
        heard: Arc::default(),
        probing: Arc::default(),
        control: control.clone(),
        broker_clients,
        cluster,
        dynsec,
        hooks,
        link: link.as_ref().map(|l| l.advert().clone()),
        settings,
    });
    if let Some(listener) = link {
        let serve: std::sync::Weak<dyn super::hub_link::Serve> = Arc::downgrade(&mqtt.cluster) as _;
        listener.spawn(hub_id.clone(), hub.secret.clone(), serve);
    }
    let (republish, republish_rx) = watch::channel(0u64);
    // A shard leaves room in its packet for its MAC and header.
    super::presence::publish_index(
        Arc::downgrade(&hub),
        hub_id.clone(),
        mqtt.settings.hub_name.clone(),
        connection.client.clone(),
        republish_rx,
        index_max,
        max_packet - 4096,
    );
    info!(broker = %mqtt.broker, hub = %hub_id, "MQTT: connecting");
    let dispatcher = Dispatcher {
        hub,
        mqtt: mqtt.clone(),
        claims: Claims::new(hub_id),
        pending: HashMap::new(),
        claims_out: super::cluster::Recent::new(CLAIM_OUT_MAX),
        restores: Default::default(),
        links: HashMap::new(),
        control,
        subscribed: subscribed_tx,
        republish,
        acks_due: 0,
        stopped: None,
        instances: Instances::default(),
    };
    tokio::spawn(dispatcher.run(connection.events, control_rx, client_events));
    Ok(mqtt)
}

/// Makes the embedded broker's end visible: the broker logs it, and so does the hub's MQTT side
/// with what it means for devices.
fn watch_broker(mut stopped: watch::Receiver<Option<String>>) {
    tokio::spawn(async move {
        if let Ok(why) = stopped.wait_for(Option::is_some).await {
            tracing::error!(why = why.as_deref().unwrap_or_default(), "the hub's embedded MQTT broker is down: MQTT devices are unreachable; restart `mcpdev serve`");
        }
    });
}

struct LinkEntry {
    inbound: link::InboundSender,
    generation: u64,
    ssrc: u32,
    /// The session id of our server hello: a server goodbye must carry it.
    session_id: String,
}

struct Dispatcher {
    hub: Arc<Hub>,
    mqtt: Arc<MqttHub>,
    claims: Claims,
    /// Devices this hub has claimed and not yet settled, with their held messages.
    pending: HashMap<String, Vec<String>>,
    /// This hub's claims published and not yet come back, and when. A claim can come back late:
    /// behind a broker that stalls, or re-sent by the client after a reconnect. By then the hub
    /// may have let the device go (its look after [`CLAIM_RECHECK`] saw another hub's claim
    /// first), yet its claim, arriving last, wins on every hub, and the others let go of the
    /// device; knowing the claim is its own, the hub serves the device instead of leaving it on
    /// no hub ([`Self::on_own_claim`]). Forgotten after [`CLAIM_OUT_MAX`].
    claims_out: super::cluster::Recent,
    /// This hub's claims put back after a forgery replaced them ([`super::cluster_seal::Restores`]).
    restores: super::cluster_seal::Restores,
    links: HashMap<String, LinkEntry>,
    control: mpsc::Sender<Control>,
    subscribed: watch::Sender<bool>,
    /// Bumped on every (re)connect: the hub's index is published again.
    republish: watch::Sender<u64>,
    /// Subscriptions of the current connection not yet acknowledged.
    acks_due: usize,
    /// Told once the connection has closed after a shutdown.
    stopped: Option<tokio::sync::oneshot::Sender<()>>,
    /// Device connections as the embedded broker reports them, and onboarding budgets.
    instances: Instances,
}

#[path = "hub_dispatcher.rs"]
mod dispatcher;
