//! The device-facing listener: WebSocket at `/xiaozhi/v1/`, the OTA endpoint devices bootstrap
//! from ([`super::ota`]), and the vision endpoint that camera tools upload photos to.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::connect_info::Connected;
use axum::extract::{ConnectInfo, DefaultBodyLimit, State};
use axum::http::{Request, Response, StatusCode, header};
use axum::routing::{any, post};
use axum::serve::{IncomingStream, Listener};
use tokio::net::{TcpListener, TcpStream};
use tracing::{info, warn};

use super::Hub;
use crate::links::upgrade::{self, plain};
use crate::links::handle::LinkSetup;
use crate::links::websocket;
use crate::session::SessionConfig;
use crate::wire::identity::{self, Identity};

pub const DEVICE_PATH: &str = "/xiaozhi/v1/";
pub const VISION_PATH: &str = "/mcp/vision/explain";

/// Who a device connection is: the peer, and the hub's own address it came in on (URLs handed to
/// that device are built from the latter, never from its `Host` header).
#[derive(Debug, Clone, Copy)]
pub struct DevicePeer {
    pub remote: SocketAddr,
    pub local: Option<SocketAddr>,
}

/// The device listener: TCP with `TCP_NODELAY` on every socket (see [`super::no_delay`]); its own
/// type so that a connection can tell its local address ([`DevicePeer`]).
pub struct DeviceListener(pub TcpListener);

impl Listener for DeviceListener {
    type Io = TcpStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (TcpStream, SocketAddr) {
        let (mut io, addr) = Listener::accept(&mut self.0).await;
        super::no_delay(&mut io);
        (io, addr)
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

impl Connected<IncomingStream<'_, DeviceListener>> for DevicePeer {
    fn connect_info(stream: IncomingStream<'_, DeviceListener>) -> Self {
        Self { remote: *stream.remote_addr(), local: stream.io().local_addr().ok() }
    }
}

pub fn router(hub: Arc<Hub>) -> Router {
    let vision_limit = DefaultBodyLimit::max(super::vision::upload_limit(hub.config.vision_max_bytes));
    Router::new()
        .route(DEVICE_PATH, any(accept_device))
        .route("/xiaozhi/v1", any(accept_device))
        .route(VISION_PATH, post(super::vision::explain).layer(vision_limit))
        .merge(super::ota::routes())
        .with_state(hub)
}

async fn accept_device(State(hub): State<Arc<Hub>>, ConnectInfo(peer): ConnectInfo<DevicePeer>, mut req: Request<Body>) -> Response<Body> {
    let remote = peer.remote;
    let headers = req.headers().clone();
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let identity = match identity::identify(header, req.uri().query()) {
        Ok(id) => id,
        Err(e) => {
            warn!(%remote, "device refused: {e}");
            return plain(StatusCode::BAD_REQUEST, &format!("{e}"));
        }
    };
    if let Err(why) = hub.check_device_token(&identity) {
        warn!(%remote, device = %identity.device_id, "device refused: {why}");
        return Response::builder()
            .status(StatusCode::UNAUTHORIZED)
            .header(header::WWW_AUTHENTICATE, "Bearer")
            .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
            .body(Body::from(format!("{why}\n")))
            .expect("static response");
    }
    let local = peer.local.map(|a| a.ip());
    let (response, socket) = match upgrade::accept(&mut req) {
        Ok(pair) => pair,
        Err(resp) => return resp,
    };
    tokio::spawn(async move {
        if let Some(ws) = socket.await {
            attach(hub, ws, identity, local, Some(remote.to_string()));
        }
    });
    response
}

/// Runs a device's link and keeps it in the registry while it lives. A device that reconnects
/// with the same Device-Id replaces its old session. `local` is the hub's address the device came
/// in on (for the vision URL).
pub fn attach(hub: Arc<Hub>, ws: upgrade::UpgradedSocket, identity: Identity, local: Option<IpAddr>, remote: Option<String>) {
    let session_id = uuid::Uuid::new_v4().to_string();
    let mut cfg = SessionConfig::new(&session_id, websocket::server_hello(&session_id));
    (cfg.vision_url, cfg.vision_token) = hub.vision_for(&identity.device_id, local);
    cfg.keepalive = hub.config.keepalive;
    cfg.onboarding_timeout = hub.config.onboarding_timeout;
    cfg.system_info = hub.registry.ota.system_info(&identity.device_id);
    let generation = hub.registry.next_generation();
    let device_id = identity.device_id.clone();
    let setup = LinkSetup {
        identity,
        session: cfg,
        events: hub.registry.events.clone(),
        tracing: hub.registry.tracing.clone(),
        generation,
        remote,
    };
    let (handle, done) = websocket::spawn(ws, setup);
    info!(device = %device_id, "device connected");
    if let Some(old) = hub.registry.insert(handle) {
        info!(device = %device_id, "replacing the previous session of this device");
        tokio::spawn(async move { old.close().await });
    }
    tokio::spawn(async move {
        let _ = done.await;
        hub.registry.remove(&device_id, generation);
    });
}
