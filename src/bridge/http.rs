//! The MCP endpoints on the hub's host listener:
//! - `/mcp` and `/devices/<id>/mcp`: Streamable HTTP (rmcp), every protocol version;
//! - `/sse` + `/messages` and `/devices/<id>/sse` + `/devices/<id>/messages`: legacy HTTP+SSE.
//!
//! `Host` and `Origin` are checked by the host listener for every route; with a token
//! configured, MCP clients must also send `Authorization: Bearer <token>`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, Request, State};
use axum::http::{Response, StatusCode, header};
use axum::middleware::{self, Next};
use axum::routing::{any, get, post};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tower::ServiceExt as _;

use super::sse::{self, SseSessions};
use super::{Bridge, BridgeConfig, Scope, Shared};
use crate::hub::Hub;
use crate::links::upgrade::plain;
use crate::wire::identity::{bearer_token, format_mac, parse_mac};

type Service = StreamableHttpService<Bridge, LocalSessionManager>;

struct Endpoints {
    shared: Arc<Shared>,
    all: Service,
    per_device: Mutex<HashMap<String, Service>>,
    sse: Arc<SseSessions>,
}

fn service(shared: &Arc<Shared>, scope: Scope) -> Service {
    let shared = shared.clone();
    // Host and Origin are checked once, for every route, by the host listener.
    let config = StreamableHttpServerConfig::default().disable_allowed_hosts().disable_allowed_origins();
    StreamableHttpService::new(move || Ok(Bridge::new(shared.clone(), scope.clone())), LocalSessionManager::default().into(), config)
}

/// The MCP routes, to merge into the host listener's router.
pub fn router(hub: Arc<Hub>, config: BridgeConfig) -> Router {
    let notifier = Arc::new(super::notifier::Notifier::default());
    notifier.spawn(&hub);
    let shared = Arc::new(Shared { hub, config, notifier });
    let endpoints = Arc::new(Endpoints {
        all: service(&shared, Scope::All),
        shared,
        per_device: Mutex::default(),
        sse: Arc::default(),
    });
    Router::new()
        .route("/mcp", any(all_streamable))
        .route("/devices/{id}/mcp", any(device_streamable))
        .route("/sse", get(all_sse))
        .route("/messages", post(all_messages))
        .route("/devices/{id}/sse", get(device_sse))
        .route("/devices/{id}/messages", post(device_messages))
        .layer(middleware::from_fn_with_state(endpoints.clone(), require_token))
        .with_state(endpoints)
}

async fn require_token(State(e): State<Arc<Endpoints>>, req: Request, next: Next) -> Response<Body> {
    if let Some(expected) = &e.shared.config.token {
        let given = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).map(bearer_token);
        if given.as_deref() != Some(expected.as_str()) {
            return Response::builder()
                .status(StatusCode::UNAUTHORIZED)
                .header(header::WWW_AUTHENTICATE, "Bearer")
                .body(Body::from("this endpoint needs Authorization: Bearer <token> (the hub's MCPDEV_MCP_TOKEN)\n"))
                .expect("static response");
        }
    }
    next.run(req).await
}

async fn all_streamable(State(e): State<Arc<Endpoints>>, req: Request) -> Response<Body> {
    let resp = e.all.clone().oneshot(req).await.unwrap_or_else(|never| match never {});
    resp.map(Body::new)
}

/// A device by id, unique prefix or alias; a well-formed MAC that is not connected (yet) is
/// accepted too, so a host can be configured before the device boots.
fn device_scope(e: &Endpoints, id: &str) -> Result<String, Response<Body>> {
    match e.shared.hub.registry.select(Some(id)) {
        Ok(h) => Ok(h.device_id),
        Err(err) => match parse_mac(id) {
            Ok(mac) => Ok(format_mac(&mac)),
            Err(_) => Err(plain(StatusCode::NOT_FOUND, &format!("{err}"))),
        },
    }
}

async fn device_streamable(State(e): State<Arc<Endpoints>>, Path(id): Path<String>, req: Request) -> Response<Body> {
    let device_id = match device_scope(&e, &id) {
        Ok(d) => d,
        Err(resp) => return resp,
    };
    let svc = e.per_device.lock().expect("lock").entry(device_id.clone()).or_insert_with(|| service(&e.shared, Scope::Device(device_id))).clone();
    let resp = svc.oneshot(req).await.unwrap_or_else(|never| match never {});
    resp.map(Body::new)
}

async fn all_sse(State(e): State<Arc<Endpoints>>) -> Response<Body> {
    sse::open(&e.sse, Bridge::new(e.shared.clone(), Scope::All), "/messages")
}

async fn device_sse(State(e): State<Arc<Endpoints>>, Path(id): Path<String>) -> Response<Body> {
    match device_scope(&e, &id) {
        Ok(device_id) => {
            let path = format!("/devices/{device_id}/messages");
            sse::open(&e.sse, Bridge::new(e.shared.clone(), Scope::Device(device_id)), &path)
        }
        Err(resp) => resp,
    }
}

#[derive(serde::Deserialize)]
struct SessionQuery {
    #[serde(rename = "sessionId", alias = "session_id")]
    session_id: Option<String>,
}

async fn all_messages(State(e): State<Arc<Endpoints>>, Query(q): Query<SessionQuery>, body: axum::body::Bytes) -> Response<Body> {
    sse::post(&e.sse, q.session_id.as_deref(), &body).await
}

async fn device_messages(State(e): State<Arc<Endpoints>>, Query(q): Query<SessionQuery>, body: axum::body::Bytes) -> Response<Body> {
    sse::post(&e.sse, q.session_id.as_deref(), &body).await
}
