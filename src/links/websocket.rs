//! A device's WebSocket: one task that owns the socket and the device's session.

use std::collections::HashMap;
use std::time::Instant;

use futures_util::{Sink, SinkExt, Stream, StreamExt};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::{self, Message};
use tracing::info;

use super::handle::{Command, DeviceEvent, DeviceHandle, Lifecycle, LinkEvent, LinkSetup, Waiting, deliver, spawn_link};
use crate::session::{CallError, Output, Session};

/// The server hello a WebSocket device expects (reference §1.3): `transport` must be the string
/// "websocket" (the stock firmware crashes otherwise), and xiaozhi-sdk needs `session_id` and
/// `audio_params`.
pub fn server_hello(session_id: &str) -> String {
    serde_json::json!({
        "type": "hello",
        "transport": "websocket",
        "session_id": session_id,
        "audio_params": {"format": "opus", "sample_rate": 24000, "channels": 1, "frame_duration": 60},
    })
    .to_string()
}

/// Starts the task serving one device socket; returns its handle and a receiver that fires when
/// the link has ended.
pub fn spawn<S>(ws: S, setup: LinkSetup) -> (DeviceHandle, oneshot::Receiver<()>)
where
    S: Stream<Item = Result<Message, tungstenite::Error>> + Sink<Message, Error = tungstenite::Error> + Unpin + Send + 'static,
{
    let (device_id, generation) = (setup.identity.device_id.clone(), setup.generation);
    spawn_link(device_id, generation, move |commands| run(ws, commands, setup))
}

async fn run<S>(mut ws: S, mut commands: mpsc::Receiver<Command>, setup: LinkSetup)
where
    S: Stream<Item = Result<Message, tungstenite::Error>> + Sink<Message, Error = tungstenite::Error> + Unpin,
{
    let device_id = setup.identity.device_id.clone();
    let emit = |event: LinkEvent| {
        let _ = setup.events.send(DeviceEvent { device_id: device_id.clone(), event });
    };
    emit(LinkEvent::Link(Lifecycle::Connected {
        transport: "websocket".into(),
        client_id: setup.identity.client_id.clone(),
        remote: setup.remote.clone(),
    }));
    let mut session = Session::new(setup.identity.clone(), "websocket", setup.session, Instant::now());
    // Until the first hello: a deadline, and the hub's pre-hello permit, dropped at the hello.
    let mut until_hello = setup.until_hello;
    let hello_timeout = setup.hello_timeout;
    let hello_deadline = hello_timeout.map(|d| tokio::time::Instant::now() + d);
    let mut waiting: HashMap<u64, oneshot::Sender<Result<serde_json::Value, CallError>>> = HashMap::new();
    let reason = loop {
        session.trace = setup.tracing.enabled();
        let deadline = session.next_deadline().map(tokio::time::Instant::from_std);
        let outputs = tokio::select! {
            frame = ws.next() => match frame {
                Some(Ok(Message::Text(text))) => session.on_text(&text, Instant::now()),
                Some(Ok(Message::Binary(b))) => { session.on_binary(b.len()); continue; }
                Some(Ok(Message::Close(_))) | None => break "closed by the device".to_string(),
                Some(Ok(_)) => continue,
                Some(Err(e)) => break format!("websocket error: {e}"),
            },
            cmd = commands.recv() => match cmd {
                Some(Command::Request { ticket, method, params, timeout, reply }) => {
                    waiting.insert(ticket, reply);
                    session.request(ticket, &method, params, timeout, Instant::now())
                }
                Some(Command::Cancel(ticket)) => { waiting.remove(&ticket); session.cancel(ticket); continue; }
                Some(Command::Snapshot(tx)) => { let _ = tx.send(session.info().clone()); continue; }
                Some(Command::Close) | None => break "replaced or shut down by the hub".to_string(),
            },
            _ = sleep_until(deadline) => session.on_tick(Instant::now()),
            _ = sleep_until(hello_deadline.filter(|_| session.info().hello.is_none())) => {
                break format!("no hello within {:?}", hello_timeout.unwrap_or_default());
            }
        };
        if until_hello.is_some() && session.info().hello.is_some() {
            until_hello = None;
        }
        if let Err(e) = carry_out(outputs, &mut ws, &mut waiting, &emit).await {
            break format!("websocket error: {e}");
        }
    };
    for o in session.on_disconnect() {
        if let Output::Reply { ticket, outcome } = o
            && let Some(tx) = waiting.remove(&ticket)
        {
            let _ = tx.send(outcome);
        }
    }
    drop(until_hello);
    let _ = ws.close().await;
    info!(device = %device_id, %reason, "device disconnected");
    emit(LinkEvent::Link(Lifecycle::Disconnected { reason }));
}

async fn carry_out<S>(outputs: Vec<Output>, ws: &mut S, waiting: &mut Waiting, emit: &impl Fn(LinkEvent)) -> Result<(), tungstenite::Error>
where
    S: Sink<Message, Error = tungstenite::Error> + Unpin,
{
    for o in outputs {
        if let Some(text) = deliver(o, waiting, emit) {
            ws.send(Message::text(text)).await?;
        }
    }
    Ok(())
}

pub(crate) async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
