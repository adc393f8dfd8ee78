//! The fuzz entry point over the broker's packet handling (`fuzz/fuzz_targets/broker_packets.rs`,
//! replayed by the tests): bytes are cut into steps for four clients, each step's bytes decoded
//! with the same codec as the network path, then routed through the same [`State`].
//!
//! A step is `[op][len u8][len bytes]`: `op & 3` picks the client, `op >> 2 & 3` what to do:
//! 0 = decode and handle the packets in the bytes (the first one of a client not connected
//! must be CONNECT, authenticated by the hub's default hook with device token `tok` and hub
//! password `hubpw`), 1 = its connection drops (the will goes out), 2 = read its queue empty,
//! 3 = the client goes quiet (stops reading: its queue fills and it gets kicked).

use bytes::BytesMut;
use rumqttc::mqttbytes::v4::Packet;
use tokio::sync::{mpsc, oneshot};

use super::acl::{self, Login};
use super::state::{Limits, Next, State};

const CLIENTS: usize = 4;
const MAX_PACKET: usize = 4096;

struct Conn {
    client_id: String,
    conn: u64,
    rx: mpsc::Receiver<Packet>,
    _kick: oneshot::Receiver<()>,
}

/// Decodes `data` into packets of a few clients and routes them through the broker state;
/// panics only on a bug (that is what the fuzzer looks for).
#[doc(hidden)]
pub fn fuzz_packets(data: &[u8]) {
    let limits = Limits { max_clients: 3, max_subscriptions: 4, max_group_members: 2, max_retained: 4, max_retained_bytes: 256, hub_queue: 8, device_queue: 4 };
    let mut state = State::new(limits.clone());
    let auth = acl::token_auth(vec!["tok".into()], "hubpw".into());
    let mut conns: [Option<Conn>; CLIENTS] = Default::default();
    let mut rest = data;
    while let [op, len, tail @ ..] = rest {
        let n = usize::from(*len).min(tail.len());
        let (chunk, next) = tail.split_at(n);
        rest = next;
        let who = usize::from(op & 3) % CLIENTS;
        match (op >> 2) & 3 {
            1 => {
                if let Some(c) = conns[who].take() {
                    state.end(&c.client_id, c.conn, false);
                }
            }
            2 => {
                if let Some(c) = conns[who].as_mut() {
                    while c.rx.try_recv().is_ok() {}
                }
            }
            3 => {}
            _ => {
                let mut buf = BytesMut::from(chunk);
                while let Ok(packet) = Packet::read(&mut buf, MAX_PACKET) {
                    let current = conns[who].as_ref().map(|c| (c.client_id.clone(), c.conn));
                    match (current, packet) {
                        (None, Packet::Connect(connect)) => {
                            let login = Login::of(&connect);
                            let Ok(role) = auth(&login) else { break };
                            let client_id = if connect.client_id.is_empty() { format!("anon-{who}") } else { connect.client_id.clone() };
                            let (tx, rx) = mpsc::channel(limits.queue_for(&role));
                            let (kick, kick_rx) = oneshot::channel();
                            if let Ok(conn) = state.connect(&client_id, &connect, role, tx, kick) {
                                // A takeover: the other slot with this client id is gone.
                                for other in conns.iter_mut() {
                                    if other.as_ref().is_some_and(|o| o.client_id == client_id) {
                                        *other = None;
                                    }
                                }
                                conns[who] = Some(Conn { client_id, conn, rx, _kick: kick_rx });
                            }
                        }
                        (None, _) => break,
                        (Some((client_id, conn)), packet) => match state.handle(&client_id, conn, packet) {
                            Next::Continue => {}
                            next => {
                                state.end(&client_id, conn, next == Next::Goodbye);
                                conns[who] = None;
                                break;
                            }
                        },
                    }
                }
            }
        }
    }
    for c in conns.into_iter().flatten() {
        state.end(&c.client_id, c.conn, false);
    }
    assert!(state.client_count() == 0, "every client ended");
    assert!(state.retained_count() <= limits.max_retained);
}
