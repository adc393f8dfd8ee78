//! The UDP side of MQTT devices (reference §2.2, §2.3): the `udp` block of the server hello, and
//! a socket that accepts audio datagrams and drops them, counting each on its device's session
//! (found by the SSRC in bytes 4–7 of the packet header, which the device copies from our nonce).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::net::UdpSocket;

use crate::session::{ServerHello, UdpHello};

/// Where an audio datagram goes: its device's link.
pub type AudioRoute = crate::links::mqtt::InboundSender;

/// The bound audio socket and the SSRC routes.
pub struct UdpSink {
    pub addr: SocketAddr,
    routes: Arc<Mutex<HashMap<u32, AudioRoute>>>,
    /// Datagrams that were not audio of a known session (too short, wrong type, unknown SSRC).
    pub dropped_unknown: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for UdpSink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl UdpSink {
    pub async fn bind(addr: SocketAddr) -> std::io::Result<Self> {
        let socket = UdpSocket::bind(addr).await?;
        let addr = socket.local_addr()?;
        let routes: Arc<Mutex<HashMap<u32, AudioRoute>>> = Arc::default();
        let dropped_unknown = Arc::new(AtomicU64::new(0));
        let (r, d) = (routes.clone(), dropped_unknown.clone());
        let task = tokio::spawn(async move {
            let mut buf = vec![0u8; 2048];
            while let Ok((n, _from)) = socket.recv_from(&mut buf).await {
                let route = ssrc_of(&buf[..n]).and_then(|ssrc| r.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&ssrc).cloned());
                match route {
                    Some(tx) => {
                        let _ = tx.try_send(crate::links::mqtt::Inbound::Audio(n));
                    }
                    None => {
                        d.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        });
        Ok(Self { addr, routes, dropped_unknown, task })
    }

    /// A fresh SSRC routed to `route` until [`UdpSink::forget`].
    pub fn register(&self, route: AudioRoute) -> u32 {
        let mut routes = self.routes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        loop {
            let ssrc = fastrand::u32(1..);
            if let std::collections::hash_map::Entry::Vacant(e) = routes.entry(ssrc) {
                e.insert(route);
                return ssrc;
            }
        }
    }

    pub fn forget(&self, ssrc: u32) {
        self.routes.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&ssrc);
    }
}

/// The SSRC of an audio packet: type byte 0x01, at least the 16-byte header.
pub fn ssrc_of(packet: &[u8]) -> Option<u32> {
    (packet.len() >= 16 && packet[0] == 0x01).then(|| u32::from_be_bytes([packet[4], packet[5], packet[6], packet[7]]))
}

/// The server hello an MQTT device expects (reference §2.2, [`envelope::udp_server_hello`]):
/// `transport:"udp"` and the hello's `udp` block, a random AES-128 key and the nonce the device
/// copies into every packet header (byte 0 = 0x01, bytes 4–7 = SSRC, the rest zero). Kept as
/// what it says, written when sent.
pub fn server_hello(server: &str, port: u16, ssrc: u32) -> ServerHello {
    ServerHello::Udp(Box::new(UdpHello { server: server.into(), port, ssrc, key: std::array::from_fn(|_| fastrand::u8(..)) }))
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::wire::envelope;

    #[test]
    fn udp_block_passes_the_stock_checks() {
        let ServerHello::Udp(u) = server_hello("192.168.1.5", 8888, 0xdead_beef) else { panic!("a UDP hello") };
        let hello: Value = serde_json::from_str(&envelope::udp_server_hello("s1", &u.server, u.port, u.ssrc, &u.key)).unwrap();
        let b = &hello["udp"];
        let hex16 = |v: &Value| v.as_str().is_some_and(|s| s.len() == 32 && s.bytes().all(|c| c.is_ascii_hexdigit()));
        assert!(hex16(&b["key"]) && hex16(&b["nonce"]));
        assert_eq!(b["nonce"], "01000000deadbeef0000000000000000");
        assert_eq!((b["server"].as_str(), b["port"].as_u64(), b["encryption"].as_str()), (Some("192.168.1.5"), Some(8888), Some("aes-128-ctr")));
        assert_eq!((hello["transport"].as_str(), hello["session_id"].as_str(), hello["audio_params"]["sample_rate"].as_u64()), (Some("udp"), Some("s1"), Some(24000)));
        let ServerHello::Udp(other) = server_hello("192.168.1.5", 8888, 0xdead_beef) else { panic!() };
        assert_ne!(u.key, other.key, "a key of its own for each session");
        let mut packet = [0u8; 20];
        packet[0] = 1;
        packet[4..8].copy_from_slice(&0xdead_beef_u32.to_be_bytes());
        assert_eq!(ssrc_of(&packet), Some(0xdead_beef));
        assert_eq!(ssrc_of(&packet[..15]), None);
        packet[0] = 2;
        assert_eq!(ssrc_of(&packet), None);
    }
}

#[cfg(test)]
mod socket_tests {
    use super::*;

    #[tokio::test]
    async fn audio_reaches_its_session_by_ssrc_and_the_rest_is_dropped() {
        let sink = UdpSink::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let (tx, mut rx) = crate::links::mqtt::inbound_channel();
        let ssrc = sink.register(tx);
        let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let mut packet = vec![0u8; 16 + 40];
        packet[0] = 1;
        packet[4..8].copy_from_slice(&ssrc.wrapping_add(1).to_be_bytes());
        sock.send_to(&packet, sink.addr).await.unwrap();
        packet[4..8].copy_from_slice(&ssrc.to_be_bytes());
        sock.send_to(&packet, sink.addr).await.unwrap();
        let got = tokio::time::timeout(std::time::Duration::from_secs(5), rx.recv()).await.unwrap();
        assert!(matches!(got, Some(crate::links::mqtt::Inbound::Audio(56))));
        assert_eq!(sink.dropped_unknown.load(Ordering::Relaxed), 1, "the unknown SSRC was dropped first");
    }
}
