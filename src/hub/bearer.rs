//! The bearer token of a host-listener request, by the host listener's rules: one check for the
//! control API ([`super::control_auth::require_token`]), the dashboard's scripts and `/mcp`.
//!
//! Rules it enforces:
//! - **The control token is for this machine.** It is accepted from a loopback peer only; from
//!   another machine it is refused (403) with the advice to use a remote token.
//! - **A remote token ([`super::remote_tokens`]) only over TLS, only where other machines are
//!   meant to reach the hub**: on a host listener that serves `https://` (`serve --host-tls`) and
//!   is bound to an address other than loopback. Anywhere else it is refused (403) with the
//!   reason, before it is even looked up (and over plain http the refusal says it crossed the
//!   network in clear text: revoke it). The CLI never sends one over plain http in the first place
//!   ([`crate::links::control_token`]).
//! - **A right token is recognised before any cap is asked**, so it is never held up by its
//!   address's wrong guesses (a neighbour behind the same NAT). **Guessing is capped per peer and
//!   on the whole hub** ([`super::guesses`]): every wrong token counts; a wrong token over a cap
//!   gets 429 until one more may be sent.
//! - Every refusal is counted (`mcpdev_refusals_total`) and logged per peer through the log
//!   limiter; no token is ever logged.

use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request};
use axum::http::{Response, StatusCode, header};

use super::listener::Transport;
use super::remote_tokens::Holder;
use super::Hub;
use crate::links::control_token::REMOTE_TOKEN_PREFIX;
use crate::links::upgrade::plain;
use crate::metrics::log_limit::{self, Kind};

/// Which credential a request proved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// This run's control token, from this machine.
    Control,
    /// A person's remote token, over TLS.
    Remote(Holder),
    /// The other token the caller accepts (the dashboard's and `/mcp`'s `MCPDEV_MCP_TOKEN`).
    Extra,
}

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The peer sent too many wrong tokens: it may send one more after this long.
    Guesses(Duration),
    /// Not a token of this hub (wrong, or revoked).
    Wrong,
    /// A remote token over plain http.
    RemoteInClear,
    /// A remote token to a host listener bound to loopback.
    RemoteToLoopback(SocketAddr),
    /// The control token from another machine.
    ControlFromAfar,
}

impl Refusal {
    /// The answer: `wrong` says what a wrong token should have been.
    pub fn response(&self, wrong: &str) -> Response<Body> {
        let (status, message) = match self {
            Refusal::Guesses(retry) => {
                let mut resp = plain(StatusCode::TOO_MANY_REQUESTS, &format!("too many wrong tokens from this address: try again in {} s", retry.as_secs() + 1));
                if let Ok(v) = header::HeaderValue::from_str(&(retry.as_secs() + 1).to_string()) {
                    resp.headers_mut().insert(header::RETRY_AFTER, v);
                }
                return resp;
            }
            Refusal::Wrong => (StatusCode::UNAUTHORIZED, wrong.to_string()),
            Refusal::RemoteInClear => (
                StatusCode::FORBIDDEN,
                "a remote token is accepted only over TLS (https://), and this listener serves plain http: the token crossed the network in clear text, \
                 so revoke it on the hub's machine (`mcpdev remote-token revoke NAME`) and create another; serve the host listener with --tls auto --host-tls"
                    .to_string(),
            ),
            Refusal::RemoteToLoopback(bound) => (
                StatusCode::FORBIDDEN,
                format!(
                    "a remote token is for a hub that other machines reach, and this hub's host listener is bound to {bound}, which only this machine reaches: \
                     here the CLI uses the control token file; to serve other machines, start the hub with --host-addr 0.0.0.0:{} --host-tls",
                    bound.port()
                ),
            ),
            Refusal::ControlFromAfar => (
                StatusCode::FORBIDDEN,
                "the control token is for the hub's own machine; from another machine, use a remote token: `mcpdev remote-token create NAME` on the hub's machine, \
                 then MCPDEV_HUB_TOKEN_FILE (or MCPDEV_HUB_TOKEN) here"
                    .to_string(),
            ),
        };
        let mut resp = plain(status, &message);
        if status == StatusCode::UNAUTHORIZED {
            resp.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
        }
        resp
    }
}

/// The peer of a request (loopback when the listener did not say, as in in-process tests).
pub fn peer(req: &Request) -> SocketAddr {
    req.extensions().get::<ConnectInfo<SocketAddr>>().map_or(SocketAddr::from(([127, 0, 0, 1], 0)), |c| c.0)
}

/// The token of `Authorization: Bearer …` (the scheme in any case), if the request has one.
pub fn presented(req: &Request) -> Option<String> {
    req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).map(crate::wire::identity::bearer_token)
}

/// What the request's bearer token proves: `Ok(None)` when it has none. `extra` is another token
/// the caller accepts besides the control and remote tokens (`None`: none; the control and
/// remote tokens are accepted only when `control` is set).
pub fn check(hub: &Hub, req: &Request, control: bool, extra: Option<&str>) -> Result<Option<Credential>, Refusal> {
    let Some(given) = presented(req) else {
        return Ok(None);
    };
    let given = given.as_str();
    let peer = peer(req);
    let path = req.uri().path();
    let refuse = |why: Refusal| {
        // Only a wrong token meets the wrong-guess caps: over one, 429 instead of 401.
        if why == Refusal::Wrong {
            hub.guesses.check(peer.ip(), path).map_err(Refusal::Guesses)?;
            hub.guesses.wrong(peer.ip());
        }
        let reason = if why == Refusal::Wrong { crate::metrics::Refused::ControlToken } else { crate::metrics::Refused::TokenTransport };
        crate::metrics::refused(reason);
        if log_limit::allow(Kind::Refusal, &format!("token {}", peer.ip())) {
            tracing::warn!(peer = %peer, path, "refused a bearer token: {why:?}");
        }
        Err(why)
    };
    let same = |a: &str, b: &str| super::secret::constant_time_eq(a.as_bytes(), b.as_bytes());
    if extra.is_some_and(|t| same(given, t)) {
        return Ok(Some(Credential::Extra));
    }
    if !control {
        return refuse(Refusal::Wrong);
    }
    if same(given, &hub.control.token) {
        return if peer.ip().to_canonical().is_loopback() { Ok(Some(Credential::Control)) } else { refuse(Refusal::ControlFromAfar) };
    }
    if given.starts_with(REMOTE_TOKEN_PREFIX) {
        let tls = req.extensions().get::<Transport>().is_some_and(|t| t.tls);
        if !tls {
            return refuse(Refusal::RemoteInClear);
        }
        let bound = hub.config.host_addr;
        if bound.ip().to_canonical().is_loopback() {
            return refuse(Refusal::RemoteToLoopback(bound));
        }
        if let Some(holder) = hub.remote_tokens.verify(given) {
            if log_limit::allow(Kind::Connect, &format!("remote token {}", holder.name)) {
                tracing::info!(peer = %peer, path, token = %holder.name, id = %holder.id, "a remote token opened the control API");
            }
            return Ok(Some(Credential::Remote(holder)));
        }
    }
    refuse(Refusal::Wrong)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hub::{HubConfig, guesses, remote_tokens};

    fn request(token: &str, peer: &str, tls: bool) -> Request {
        let mut req = Request::builder().uri("/api/v1/link").header(header::AUTHORIZATION, format!("Bearer {token}")).body(Body::empty()).unwrap();
        req.extensions_mut().insert(ConnectInfo(peer.parse::<SocketAddr>().unwrap()));
        req.extensions_mut().insert(Transport { tls });
        req
    }

    async fn hub(host: &str, tokens: &std::path::Path) -> std::sync::Arc<Hub> {
        let config = HubConfig { device_addr: "127.0.0.1:0".parse().unwrap(), host_addr: host.parse().unwrap(), remote_tokens: tokens.to_path_buf(), mcp_token_set: true, ..Default::default() };
        crate::hub::bind(config).await.unwrap().hub
    }

    #[tokio::test]
    async fn each_token_is_taken_only_where_it_belongs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(remote_tokens::FILE);
        let (alice, _) = remote_tokens::create(&path, "alice").unwrap();
        // A host listener other machines reach (the documented remote set-up; bound for a moment).
        let remote = hub("0.0.0.0:0", &path).await;
        let control = remote.control.token.clone();
        let from_afar = "192.0.2.7:40000";
        assert_eq!(check(&remote, &request(&control, "127.0.0.1:40000", false), true, None), Ok(Some(Credential::Control)));
        assert_eq!(check(&remote, &request(&control, from_afar, true), true, None), Err(Refusal::ControlFromAfar), "the control token is for this machine");
        assert!(matches!(check(&remote, &request(&alice, from_afar, true), true, None), Ok(Some(Credential::Remote(h))) if h.name == "alice"));
        assert_eq!(check(&remote, &request(&alice, from_afar, false), true, None), Err(Refusal::RemoteInClear), "never over plain http");
        assert_eq!(check(&remote, &request(&alice, from_afar, true), false, Some("mcp")), Err(Refusal::Wrong), "/mcp keeps its own token");
        assert_eq!(check(&remote, &request("mcp", from_afar, false), false, Some("mcp")), Ok(Some(Credential::Extra)));
        // A hub whose host listener only this machine reaches takes no remote token, even over TLS.
        let local = hub("127.0.0.1:0", &path).await;
        assert!(matches!(check(&local, &request(&alice, "127.0.0.1:40000", true), true, None), Err(Refusal::RemoteToLoopback(_))));
        // Guessing: after the burst, wrong tokens get 429, and a right one from the same address
        // (a neighbour behind the same NAT) still works.
        let guesser = "192.0.2.99:1";
        for i in 0..guesses::BURST as usize {
            assert_eq!(check(&remote, &request(&format!("{REMOTE_TOKEN_PREFIX}{i:064}"), guesser, true), true, None), Err(Refusal::Wrong));
        }
        assert!(matches!(check(&remote, &request(&format!("{REMOTE_TOKEN_PREFIX}{:064}", 99), guesser, true), true, None), Err(Refusal::Guesses(_))));
        assert!(matches!(check(&remote, &request("not-a-token", guesser, true), true, Some("mcp")), Err(Refusal::Guesses(_))));
        assert!(matches!(check(&remote, &request(&alice, guesser, true), true, None), Ok(Some(Credential::Remote(_)))), "a right token is never held up");
        assert_eq!(check(&remote, &request("mcp", guesser, true), true, Some("mcp")), Ok(Some(Credential::Extra)));
        assert!(matches!(check(&remote, &request(&alice, from_afar, true), true, None), Ok(Some(_))), "another peer is not held up");
        let resp = Refusal::Guesses(Duration::from_secs(2)).response("");
        assert_eq!((resp.status(), resp.headers().get(header::RETRY_AFTER).map(|v| v.to_str().unwrap().to_string())), (StatusCode::TOO_MANY_REQUESTS, Some("3".into())));
    }
}
