//! MQTT devices: the topic scheme, broker connections (rumqttc), the embedded broker, the UDP
//! audio sink, the cluster's claims, presence and hub-to-hub requests, the hub's MQTT side, and
//! the CLI's direct access; and the per-device logins of real brokers (Mosquitto's dynamic
//! security, EMQX's HTTP hooks).
//!
//! Devices reached through a broker run through the same session layer as WebSocket devices:
//! [`links::mqtt`](crate::links::mqtt) drives one [`Session`](crate::session::Session) per device.

pub mod admission_sync;
pub mod broker;
pub mod cluster;
pub mod cluster_rpc;
pub mod cluster_seal;
pub mod cluster_view;
pub mod conn;
mod device_login;
pub mod direct;
pub mod dynsec;
pub mod hooks;
pub mod hub;
pub mod hub_link;
mod instances;
pub mod presence;
pub mod proxy;
pub mod stand_ins;
pub mod topics;
pub mod udp;
