//! The dashboard (`http://127.0.0.1:8001/`) and `/metrics`, on the hub's host listener.
//!
//! The pages are one static document and one script, embedded in the binary ([`assets`]); the
//! script reads small JSON answers from `/dashboard/api/…` ([`api`]) and streams a device's
//! traffic over server-sent events. `/metrics` is the Prometheus exposition ([`crate::metrics`]).
//!
//! Rules it enforces:
//! - Behind the host listener's front door like every host route (owner only, `Host` and
//!   `Origin` checked), and behind its own [`auth`]: a session cookie from a one-time log-in link,
//!   or a bearer token (control or MCP) for scripts; state changes need an anti-forgery token.
//! - Device text is data: the answers are JSON, the script writes it with `textContent` only,
//!   and every page carries a Content-Security-Policy without inline script or style.
//! - Bounded: the device list is paged on the server (at most [`api::MAX_PAGE`] rows an answer),
//!   traffic streams are capped in total, per principal and per address ([`streams`]), and end
//!   when the credential that opened them is revoked; the timeline is capped ([`timeline`]).
//! - Calls from a tool form are typed and validated by [`crate::args`], the CLI's own code, and
//!   nothing that fails validation is sent.
//!
//! Admission goes through the control API's own ops ([`crate::hub::control::answer_once`]), so the
//! page follows whatever the CLI's `devices pending|approve|revoke` do.

pub mod api;
pub mod assets;
pub mod auth;
pub mod streams;
pub mod timeline;

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use crate::hub::Hub;
use crate::hub::check_layer::CheckLayer;

/// The dashboard's state: the hub, who is logged in, what each device did lately.
pub struct Dashboard {
    pub hub: Arc<Hub>,
    pub auth: auth::Auth,
    pub timeline: Arc<timeline::Timeline>,
    /// Traffic streams open now.
    pub streams: Arc<streams::Streams>,
    /// One `check` at a time.
    pub checks: Arc<tokio::sync::Semaphore>,
    /// The host listener's address, for log-in links.
    pub host_addr: std::net::SocketAddr,
    /// The device listener's address, for the hub page.
    pub device_addr: std::net::SocketAddr,
    /// The MCP token, which scripts may use too.
    mcp_token: Option<String>,
}

impl Dashboard {
    /// The dashboard of `hub`, following its events; `mcp_token` also lets scripts in.
    pub fn start(hub: Arc<Hub>, device_addr: std::net::SocketAddr, host_addr: std::net::SocketAddr, mcp_token: Option<String>) -> Arc<Self> {
        let timeline = Arc::new(timeline::Timeline::default());
        timeline.follow(&hub);
        let secure = hub.config.host_tls && hub.config.tls.is_some();
        let auth = auth::Auth::new(host_addr.port(), secure);
        let streams = Arc::new(streams::Streams::default());
        Arc::new(Self { hub, auth, timeline, streams, checks: Arc::new(tokio::sync::Semaphore::new(1)), host_addr, device_addr, mcp_token })
    }

    /// A fresh one-time log-in URL on the host listener's own address.
    pub fn login_url(&self) -> String {
        self.login_url_at(&self.own_authority(), None, &crate::hub::principal::Lease::for_the_run())
    }

    /// The host listener's own address as a URL's authority (loopback for all addresses).
    fn own_authority(&self) -> String {
        let host = match self.host_addr.ip() {
            ip if ip.is_unspecified() => "127.0.0.1".to_string(),
            std::net::IpAddr::V6(v6) => format!("[{v6}]"),
            v4 => v4.to_string(),
        };
        format!("{host}:{}", self.host_addr.port())
    }

    /// A fresh one-time log-in URL at `authority` (the `Host` the asker reached the hub by, which
    /// the front door allowed; the hub's own address without one); its session lives by
    /// `holder`'s remote token, if given, and ends with `lease`.
    pub fn login_url_at(&self, authority: &str, holder: Option<crate::hub::remote_tokens::Holder>, lease: &crate::hub::principal::Lease) -> String {
        format!("{}://{authority}/?token={}", self.scheme(), self.auth.new_link(holder, lease))
    }

    /// What a request's bearer token proves, by the host listener's rules (control token from
    /// this machine, a remote token over TLS, the MCP token), or its refusal.
    pub fn bearer(&self, req: &Request) -> Result<Option<crate::hub::bearer::Credential>, Response> {
        crate::hub::bearer::check(&self.hub, req, true, self.mcp_token.as_deref()).map_err(|why| {
            why.response("not a token of this hub: scripts send Authorization: Bearer with the control token, a remote token (over https) or the MCP token")
        })
    }

    /// Whether this request may go on, and as whom (`Err`: its refusal, counted and logged).
    fn who(&self, req: &Request) -> Result<auth::Who, Response> {
        let bearer = self.bearer(req)?;
        self.auth.check(req.method(), req.headers(), bearer, |h| self.hub.remote_tokens.holds(h)).map_err(|denied| refusal(denied, req))
    }

    /// `https` when the host listener serves TLS (`serve --host-tls`), else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.hub.config.host_tls && self.hub.config.tls.is_some() { "https" } else { "http" }
    }
}

/// The dashboard's routes, to be served on the host listener.
pub fn router(d: Arc<Dashboard>) -> Router {
    let guarded = Router::new()
        .route("/metrics", get(api::metrics))
        .route("/dashboard/api/session", get(api::session))
        .route("/dashboard/api/login-link", post(api::login_link))
        .route("/dashboard/api/devices", get(api::devices))
        .route("/dashboard/api/device", get(api::device))
        .route("/dashboard/api/validate", post(api::validate))
        .route("/dashboard/api/call", post(api::call))
        .route("/dashboard/api/check", post(api::check))
        .route("/dashboard/api/traffic", get(api::traffic))
        .route("/dashboard/api/recording", get(api::recording))
        .route("/dashboard/api/admission", get(api::admission))
        .route("/dashboard/api/admission/{op}", post(api::admission_op))
        .route("/dashboard/api/hub", get(api::hub))
        .route("/dashboard/api/logout", post(api::logout))
        .layer(CheckLayer::new({
            let d = d.clone();
            move |req: &mut Request| refuse(&d, req)
        }));
    Router::new()
        .route("/", get(index))
        .route("/assets/{name}", get(assets::serve))
        .route("/favicon.ico", get(assets::favicon))
        .merge(guarded)
        .with_state(d)
}

/// The refusal of a request that is not logged in, or that looks forged (counted and logged).
/// A request that may go on carries who it is ([`auth::Who`]) and the [`Lease`] of its
/// credential, which what it opens ends with ([`crate::hub::principal`]).
fn refuse(d: &Dashboard, req: &mut Request) -> Option<Response> {
    let who = match d.who(req) {
        Ok(who) => who,
        Err(refusal) => return Some(refusal),
    };
    let lease = match &who {
        auth::Who::Session { lease, .. } => lease.clone(),
        auth::Who::Bearer(credential) => crate::hub::principal::lease(&d.hub, Some(credential)),
    };
    if lease.is_ended() {
        return Some(refusal(auth::Denied::NoSession, req));
    }
    let principal = match &who {
        auth::Who::Session { holder: Some(holder), .. } => crate::hub::principal::Principal::Person(holder.id.as_str().into()),
        auth::Who::Session { holder: None, .. } => crate::hub::principal::Principal::Owner,
        auth::Who::Bearer(credential) => crate::hub::principal::Principal::of(Some(credential), crate::hub::bearer::peer(req).ip()),
    };
    req.extensions_mut().insert(lease);
    req.extensions_mut().insert(principal);
    req.extensions_mut().insert(who);
    None
}

fn refusal(denied: auth::Denied, req: &Request) -> Response {
    let (status, reason, message) = match denied {
        auth::Denied::NoSession => (
            StatusCode::UNAUTHORIZED,
            crate::metrics::Refused::DashboardAuth,
            "not logged in: open the log-in link `mcpdev serve` printed, or run `mcpdev dashboard` for a fresh one; scripts send Authorization: Bearer <control or MCP token>",
        ),
        auth::Denied::Forgery => (
            StatusCode::FORBIDDEN,
            crate::metrics::Refused::AntiForgery,
            "refused: a change from the dashboard needs its anti-forgery token (x-mcpdev-csrf) and an Origin; reload the page",
        ),
    };
    crate::metrics::refused(reason);
    tracing::warn!(path = %req.uri().path(), method = %req.method(), "dashboard request refused: {}", reason.as_str());
    api::error(status, message)
}

#[derive(serde::Deserialize)]
struct LoginQuery {
    token: Option<String>,
}

/// `/`: with `?token=`, a log-in (a session cookie, then a redirect that drops the token); with
/// a session, the dashboard; without one, how to log in.
async fn index(State(d): State<Arc<Dashboard>>, Query(q): Query<LoginQuery>, req: Request) -> Response {
    if let Some(token) = q.token {
        return match d.auth.log_in(&token) {
            Some(cookie) => {
                let mut resp = (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response();
                if let Ok(v) = HeaderValue::from_str(&cookie) {
                    resp.headers_mut().insert(header::SET_COOKIE, v);
                }
                resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
                resp.headers_mut().insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
                resp
            }
            None => {
                crate::metrics::refused(crate::metrics::Refused::DashboardAuth);
                tracing::warn!("dashboard log-in refused: a link that was used already, expired, or never issued");
                assets::page(StatusCode::FORBIDDEN, assets::LOGIN_HTML)
            }
        };
    }
    match d.auth.check(req.method(), req.headers(), None, |h| d.hub.remote_tokens.holds(h)) {
        Ok(_) => assets::page(StatusCode::OK, assets::INDEX_HTML),
        Err(_) => assets::page(StatusCode::UNAUTHORIZED, assets::LOGIN_HTML),
    }
}

/// A body as plain text (for the few non-JSON answers).
pub(crate) fn text(status: StatusCode, content_type: &'static str, body: impl Into<Body>) -> Response {
    let mut resp = Response::new(body.into());
    *resp.status_mut() = status;
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}
