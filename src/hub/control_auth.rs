//! The control API's door (`/api/v1/link`): who may open a control connection.
//!
//! - A request needs `Authorization: Bearer` with the control token (from this machine) or a
//!   remote token (over TLS), by the host listener's one check ([`super::bearer`]); else 401, or
//!   403/429 with the reason. The 401 says where the CLI finds this run's token
//!   ([`super::owner::ControlToken`]) and how another machine gets a remote token.
//! - A request with no token is counted (`mcpdev_refusals_total`) and logged per peer through
//!   the log limiter; no token is ever logged.
//! - The credential that opened the connection goes with the request, so that the connection ends
//!   when a remote token is revoked ([`super::principal`]).

use std::path::Path;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

use crate::links::control_token::{HUB_TOKEN_ENV, HUB_TOKEN_FILE_ENV};

/// The control API: `Authorization: Bearer` with the control token (from this machine) or a
/// remote token (over TLS, [`super::bearer`]), else 401/403/429. A remote token's holder goes
/// with the request ([`super::bearer::Credential`]), so that its connection ends when the token
/// is revoked.
pub async fn require_token(State(hub): State<Arc<super::Hub>>, mut req: Request, next: Next) -> Response {
    let path = hub.control.path.clone();
    match super::bearer::check(&hub, &req, true, None) {
        Ok(Some(credential)) => {
            req.extensions_mut().insert(credential);
            next.run(req).await
        }
        Ok(None) => {
            crate::metrics::refused(crate::metrics::Refused::ControlToken);
            let peer = super::bearer::peer(&req);
            if crate::metrics::log_limit::allow(crate::metrics::log_limit::Kind::Refusal, &format!("token {}", peer.ip())) {
                tracing::warn!(%peer, path = %req.uri().path(), "control API refused: no token");
            }
            super::bearer::Refusal::Wrong.response(&unauthorized_message(&path, false))
        }
        Err(why) => why.response(&unauthorized_message(&path, true)),
    }
}

fn unauthorized_message(path: &Path, wrong: bool) -> String {
    let what = if wrong { "the token sent is not one of this hub's (a wrong or revoked one)" } else { "it needs a token" };
    format!(
        "the control API refused the request: {what}. On the hub's machine, the CLI reads this run's token from {} (readable only by the user who started the hub); \
         from another machine, it sends a remote token (`mcpdev remote-token create NAME` on the hub's machine) from {HUB_TOKEN_FILE_ENV} or {HUB_TOKEN_ENV}",
        path.display()
    )
}
