//! The device-facing listener: WebSocket at `/xiaozhi/v1/`, the OTA endpoint devices bootstrap
//! from ([`super::ota`]), and the vision endpoint that camera tools upload photos to.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, DefaultBodyLimit, State};
use axum::http::{Request, Response, StatusCode, header};
use axum::routing::{any, post};
use tracing::warn;

use super::Hub;
use super::listener::DevicePeer;
use super::ota::DEVICE_PATH;
use crate::links::upgrade::{self, plain};
use crate::links::websocket;
use crate::wire::identity::{self, Identity};

pub const VISION_PATH: &str = "/mcp/vision/explain";

pub fn router(hub: Arc<Hub>) -> Router {
    let vision_limit = DefaultBodyLimit::max(super::vision::upload_limit(hub.config.vision_max_bytes));
    Router::new()
        .route(DEVICE_PATH, any(accept_device))
        .route("/xiaozhi/v1", any(accept_device))
        .merge(super::cors::allow_browsers(Router::new().route(VISION_PATH, post(super::vision::explain).layer(vision_limit)).merge(super::ota::routes())))
        .fallback(not_here)
        .with_state(hub)
}

/// Any other path: most likely a CLI or browser pointed at this port instead of the host
/// listener's; the answer says so ([`crate::links::listeners`]).
async fn not_here() -> Response<Body> {
    use crate::links::listeners;
    Response::builder()
        .status(StatusCode::NOT_FOUND)
        .header(listeners::HEADER, listeners::DEVICES)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Body::from(listeners::DEVICES_SAYS))
        .expect("static response")
}

async fn accept_device(State(hub): State<Arc<Hub>>, ConnectInfo(peer): ConnectInfo<DevicePeer>, mut req: Request<Body>) -> Response<Body> {
    let remote = peer.remote;
    let headers = req.headers().clone();
    // UTF-8, not only visible ASCII: a Client-Id carrying a bidi override is refused, not ignored.
    let header = |name: &str| headers.get(name).and_then(|v| std::str::from_utf8(v.as_bytes()).ok());
    let identity = match identity::identify(header, req.uri().query()) {
        Ok(id) => id,
        Err(e) => {
            log_identity_refusal(remote, "device", &e);
            crate::metrics::refused(crate::metrics::Refused::BadIdentity);
            return plain(StatusCode::BAD_REQUEST, &format!("{e}"));
        }
    };
    // A device with an upstream carries the upstream's token, not the hub's: its approval is
    // bound to its Device-Id and Client-Id instead ([`super::relayed`]).
    let upstream = hub.config.upstream.as_ref().and_then(|u| u.for_device(&identity.device_id)).cloned();
    let admitted = match &upstream {
        Some(_) => hub.admission.admits_relayed(&identity.device_id, identity.client_id.as_deref(), Some(remote)),
        None => hub.check_device_token(&identity, Some(remote)),
    };
    // Admission comes before the upgrade: a device that is not admitted never gets a session, so
    // it cannot take over the session of a connected device with the same Device-Id either (nor
    // make the hub dial its upstream).
    if let Err(why) = admitted {
        hub.admission.log_refusal(Some(remote.ip()), &format!("device {}", identity.device_id), &why);
        let mut answer = Response::builder();
        match (&why, why.retry_after_s()) {
            (_, Some(s)) => answer = answer.status(StatusCode::TOO_MANY_REQUESTS).header(header::RETRY_AFTER, s),
            // One of the hub's own devices: another device's id to take (a sim moves on). A
            // device connected with its token: still a missing credential, with that advice.
            (super::admission::Refusal::Taken { resident: true, .. }, None) => {
                crate::metrics::refused(crate::metrics::Refused::NotAdmitted);
                answer = answer.status(StatusCode::CONFLICT);
            }
            _ => {
                crate::metrics::refused(crate::metrics::Refused::NotAdmitted);
                answer = answer.status(StatusCode::UNAUTHORIZED);
            }
        }
        // A relayed device needs no token of the hub's: only the approval of its Device-Id and
        // Client-Id.
        let says = match (&why, &upstream) {
            (super::admission::Refusal::NotAdmitted { device_id, code: Some(code) }, Some(_)) => {
                format!("device {device_id} is not admitted: approve it with `mcpdev devices approve {code}`; it is then relayed to its upstream with its own token, by its Device-Id and this Client-Id (the token `approve` prints is not needed)")
            }
            _ => why.to_string(),
        };
        return answer
            .header(header::WWW_AUTHENTICATE, "Bearer")
            .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
            .body(Body::from(format!("{says}\n")))
            .expect("static response");
    }
    let behind_cache = through_gateway(&hub, &identity, req.uri().query());
    let local = peer.local.map(|a| a.ip());
    let until_hello = req.extensions().get::<super::budget::HelloSlot>().and_then(super::budget::HelloSlot::take);
    let forwarded = crate::links::relay::upstream::DeviceHeaders::for_device(&headers, &identity);
    drop(headers);
    let (response, socket) = match upgrade::accept_raw(&mut req) {
        Ok(pair) => pair,
        Err(resp) => return resp,
    };
    tokio::spawn(async move {
        let Some(ws) = socket.await else { return };
        match upstream {
            Some(url) => super::relayed::attach(hub, ws, identity, forwarded, url, local, Some(remote.to_string()), until_hello).await,
            None => attach(hub, ws, identity, Arrival { local, remote: Some(remote.to_string()), until_hello, behind_cache }),
        }
    });
    response
}

/// Logs a refused identity (a bad Device-Id, a control character in a Client-Id, …) through the
/// hub's one limiter, per address (a peer can send such requests at will; the rest are summed
/// up). The message names the field, never its raw value.
pub fn log_identity_refusal(remote: SocketAddr, what: &str, e: &identity::IdentityError) {
    if crate::metrics::log_limit::allow(crate::metrics::log_limit::Kind::Refusal, &remote.ip().to_string()) {
        warn!(%remote, "{what} refused: {e}");
    }
}

/// How a device's connection came in: the hub's address it came in on (for the vision URL), the
/// peer's, the connection's pre-hello permit ([`super::budget`]: the link drops it at the
/// device's hello), and whether it comes through a gateway's cache ([`through_gateway`]).
pub struct Arrival {
    pub local: Option<IpAddr>,
    pub remote: Option<String>,
    pub until_hello: Option<Box<dyn crate::links::handle::UntilHello>>,
    pub behind_cache: bool,
}

/// Whether a device's connection comes through the xiaozhi MQTT gateway, which answers
/// `tools/list` from a cache it may still be filling (so a first list must be confirmed): it
/// presents a gateway credential (`MCPDEV_GATEWAY_TOKEN`), or its URL carries
/// `from=mqtt_gateway`, as the gateway's documented chat-server URL does.
pub fn through_gateway(hub: &Hub, identity: &Identity, query: Option<&str>) -> bool {
    let from_gateway = query.is_some_and(|q| q.split('&').any(|pair| pair.eq_ignore_ascii_case("from=mqtt_gateway")));
    from_gateway || hub.admission.is_gateway_credential(identity.token.as_deref())
}

/// Runs a device's link and keeps it in the registry while it lives. A device that reconnects
/// with the same Device-Id replaces its old session (it was admitted: with admission on, only a
/// client holding that device's token gets here). How it came in: [`Arrival`].
pub fn attach(hub: Arc<Hub>, ws: upgrade::DeviceSocket, identity: Identity, arrival: Arrival) {
    let Arrival { local, remote, until_hello, behind_cache } = arrival;
    let mut setup = super::device_link::setup(&hub, identity, local, remote, until_hello);
    setup.session.behind_cache = behind_cache;
    let (device_id, generation) = (setup.identity.device_id.clone(), setup.generation);
    let (owner, id) = (hub.clone(), device_id.clone());
    let handle = websocket::spawn(ws, setup, move || owner.registry.remove(&id, generation));
    super::device_link::register(&hub, handle, &device_id, generation);
}
