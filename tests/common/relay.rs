//! A TCP relay to a local server (the broker) whose connections a test cuts at will: the client
//! behind it (a hub) loses the server at once, and the server sees the client's socket close
//! (Mosquitto publishes its last will). While closed, the relay takes connections and ends them,
//! so the client keeps retrying until [`Relay::open`].
//!
//! It can also hold what the broker sends ([`Relay::hold`]): every MQTT packet but the
//! connection's acknowledgement (CONNACK) and the answers to pings (PINGRESP) waits, in order,
//! until [`Relay::release`]. A hub that reconnects then stands where a hub on a loaded broker
//! stands for seconds: connected, its subscriptions not yet acknowledged and the retained
//! records not yet replayed, its keepalive answered.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

pub struct Relay {
    pub port: u16,
    conns: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
    open: watch::Sender<bool>,
    held: watch::Sender<bool>,
}

impl Relay {
    /// Relays `127.0.0.1:<port>` (its own) to `127.0.0.1:<to>`, open.
    pub async fn start(to: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let conns: Arc<Mutex<Vec<tokio::task::AbortHandle>>> = Arc::default();
        let (open, is_open) = watch::channel(true);
        let (held, is_held) = watch::channel(false);
        let kept = conns.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if !*is_open.borrow() {
                    continue; // dropped: the client sees its connection end
                }
                let Ok(server) = TcpStream::connect(("127.0.0.1", to)).await else { continue };
                let (mut from_client, to_client) = client.into_split();
                let (from_server, mut to_server) = server.into_split();
                let hold = is_held.clone();
                let task = tokio::spawn(async move {
                    tokio::select! {
                        _ = tokio::io::copy(&mut from_client, &mut to_server) => {}
                        () = down(from_server, to_client, hold) => {}
                    }
                });
                kept.lock().unwrap().push(task.abort_handle());
            }
        });
        Self { port, conns, open, held }
    }

    pub fn url(&self) -> String {
        format!("mqtt://127.0.0.1:{}", self.port)
    }

    /// Ends every relayed connection (both sockets close) and refuses new ones until [`Self::open`].
    pub fn cut(&self) {
        self.open.send_replace(false);
        for task in self.conns.lock().unwrap().drain(..) {
            task.abort();
        }
    }

    pub fn open(&self) {
        self.open.send_replace(true);
    }

    /// From now on the broker's packets wait, but for CONNACK and PINGRESP.
    pub fn hold(&self) {
        self.held.send_replace(true);
    }

    /// Sends what waited, in order, and holds nothing more.
    pub fn release(&self) {
        self.held.send_replace(false);
    }
}

/// The length of the MQTT packet `buf` starts with, once it is all there.
fn packet_len(buf: &[u8]) -> Option<usize> {
    let (mut len, mut shift) = (0usize, 0);
    for (i, b) in buf.iter().enumerate().skip(1).take(4) {
        len |= usize::from(b & 0x7f) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            let total = i + 1 + len;
            return (buf.len() >= total).then_some(total);
        }
    }
    None
}

/// The broker's side of one connection, packet by packet, holding while `held` says so.
async fn down(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut held: watch::Receiver<bool>) {
    let (mut buf, mut waiting, mut chunk) = (Vec::new(), Vec::new(), vec![0u8; 64 << 10]);
    loop {
        tokio::select! {
            n = from.read(&mut chunk) => {
                let Ok(n @ 1..) = n else { return };
                buf.extend_from_slice(&chunk[..n]);
                while let Some(len) = packet_len(&buf) {
                    let packet: Vec<u8> = buf.drain(..len).collect();
                    // CONNACK (0x20) and PINGRESP (0xd0) pass; the rest waits while held.
                    if *held.borrow() && !matches!(packet[0] & 0xf0, 0x20 | 0xd0) {
                        waiting.extend_from_slice(&packet);
                    } else if to.write_all(&packet).await.is_err() {
                        return;
                    }
                }
            }
            r = held.changed() => {
                if r.is_err() {
                    return;
                }
                if !*held.borrow() && to.write_all(&std::mem::take(&mut waiting)).await.is_err() {
                    return;
                }
            }
        }
    }
}
