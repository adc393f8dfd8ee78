//! CORS for the device-facing HTTP routes a browser device calls with `fetch` (the OTA check-in
//! and activation, the vision upload).
//!
//! A page such as xiaozhi-esp32-server's test page (`main/digital-human`, a device without a
//! board) is served from another origin than the hub, and its first POST to the OTA URL carries
//! `Device-Id`/`Client-Id` headers and `Content-Type: application/json`, so the browser sends a
//! preflight `OPTIONS` first and reads the answer only if it names the page's origin. These routes
//! authenticate with headers (device and vision tokens), never with cookies, so any origin may call
//! them (`Access-Control-Allow-Origin: *`, no credentials), as the reference backend does.
//!
//! Only the routes [`allow_browsers`] wraps get this. The WebSocket path needs none (browsers do
//! not preflight WebSocket), and the host listener keeps its own Origin policy
//! (`super::front_door`).

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, Method, Response, StatusCode, header};
use axum::middleware::{self, Next};
use tracing::debug;

/// The methods the wrapped routes serve.
pub const ALLOW_METHODS: &str = "GET, POST, OPTIONS";
/// The request headers a browser device (and stock OTA) sends. A fixed list, not an echo of the
/// preflight's `Access-Control-Request-Headers`: `*` would not cover `Authorization`.
pub const ALLOW_HEADERS: &str = "Authorization, Content-Type, Device-Id, Client-Id, Activation-Version, Accept-Language, User-Agent";
/// How long a browser may cache a preflight, in seconds (Chromium caps it at 2 hours).
pub const MAX_AGE: &str = "86400";

/// `routes` with CORS: preflights answered 204 here, before method routing (which would say 405),
/// and every answer, errors included, readable by a page from any origin.
pub fn allow_browsers<S: Clone + Send + Sync + 'static>(routes: Router<S>) -> Router<S> {
    routes.layer(middleware::from_fn(cors))
}

async fn cors(req: Request, next: Next) -> Response<Body> {
    if is_preflight(&req) {
        debug!(path = %req.uri().path(), origin = ?req.headers().get(header::ORIGIN), "CORS preflight");
        return preflight(req.headers());
    }
    let mut resp = next.run(req).await;
    resp.headers_mut().insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    resp
}

/// A CORS preflight: `OPTIONS` with `Access-Control-Request-Method`. A bare `OPTIONS` goes on to
/// the router (and gets its usual answer).
fn is_preflight(req: &Request) -> bool {
    req.method() == Method::OPTIONS && req.headers().contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
}

fn preflight(request: &HeaderMap) -> Response<Body> {
    let mut resp = Response::builder()
        .status(StatusCode::NO_CONTENT)
        .header(header::ACCESS_CONTROL_ALLOW_ORIGIN, "*")
        .header(header::ACCESS_CONTROL_ALLOW_METHODS, ALLOW_METHODS)
        .header(header::ACCESS_CONTROL_ALLOW_HEADERS, ALLOW_HEADERS)
        .header(header::ACCESS_CONTROL_MAX_AGE, MAX_AGE);
    // Chromium's Private Network Access: a page on a public origin asks before reaching a device
    // listener on the LAN, which is where this hub's device side is meant to be reachable.
    if request.get("access-control-request-private-network").is_some_and(|v| v == "true") {
        resp = resp.header("access-control-allow-private-network", "true");
    }
    resp.body(Body::empty()).expect("static response")
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::post;
    use tower::ServiceExt;

    fn app() -> Router {
        let wrapped = allow_browsers(Router::new().route("/ota/", post(|| async { "ok" })));
        wrapped.route("/ws", post(|| async { "ws" }))
    }

    async fn send(req: axum::http::Request<Body>) -> Response<Body> {
        app().oneshot(req).await.unwrap()
    }

    fn preflight_to(path: &str) -> axum::http::Request<Body> {
        axum::http::Request::builder()
            .method(Method::OPTIONS)
            .uri(path)
            .header(header::ORIGIN, "http://page.example:8006")
            .header(header::ACCESS_CONTROL_REQUEST_METHOD, "POST")
            .header(header::ACCESS_CONTROL_REQUEST_HEADERS, "device-id,client-id,content-type")
            .body(Body::empty())
            .unwrap()
    }

    fn get<'a>(r: &'a Response<Body>, name: &str) -> Option<&'a str> {
        r.headers().get(name).and_then(|v| v.to_str().ok())
    }

    #[tokio::test]
    async fn preflight_is_answered_with_what_a_browser_device_sends() {
        let r = send(preflight_to("/ota/")).await;
        assert!(r.status().is_success(), "{}", r.status());
        assert_eq!(get(&r, "access-control-allow-origin"), Some("*"));
        assert!(get(&r, "access-control-allow-methods").unwrap().contains("POST"));
        let allowed = get(&r, "access-control-allow-headers").unwrap().to_ascii_lowercase();
        for h in ["device-id", "client-id", "content-type", "authorization", "activation-version", "accept-language"] {
            assert!(allowed.split(", ").any(|a| a == h), "{h} missing from {allowed}");
        }
        assert_eq!(get(&r, "access-control-max-age"), Some(MAX_AGE));
        assert_eq!(get(&r, "access-control-allow-private-network"), None);
    }

    #[tokio::test]
    async fn private_network_access_is_granted_only_when_asked() {
        let mut req = preflight_to("/ota/");
        req.headers_mut().insert("access-control-request-private-network", HeaderValue::from_static("true"));
        let r = send(req).await;
        assert_eq!(get(&r, "access-control-allow-private-network"), Some("true"));
    }

    #[tokio::test]
    async fn answers_and_errors_are_readable_cross_origin() {
        let post_to = |path: &str| {
            axum::http::Request::builder().method(Method::POST).uri(path).header(header::ORIGIN, "http://page.example").body(Body::empty()).unwrap()
        };
        let r = send(post_to("/ota/")).await;
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(get(&r, "access-control-allow-origin"), Some("*"));
        // A method the route does not serve still fails, but the page can read why.
        let r = send(axum::http::Request::builder().method(Method::PUT).uri("/ota/").body(Body::empty()).unwrap()).await;
        assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(get(&r, "access-control-allow-origin"), Some("*"));
    }

    #[tokio::test]
    async fn routes_outside_the_layer_get_no_cors() {
        let r = send(preflight_to("/ws")).await;
        assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(get(&r, "access-control-allow-origin"), None);
        let r = send(axum::http::Request::builder().method(Method::POST).uri("/ws").header(header::ORIGIN, "http://page.example").body(Body::empty()).unwrap()).await;
        assert_eq!(get(&r, "access-control-allow-origin"), None);
    }

    #[tokio::test]
    async fn a_bare_options_is_not_a_preflight() {
        let r = send(axum::http::Request::builder().method(Method::OPTIONS).uri("/ota/").body(Body::empty()).unwrap()).await;
        assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    }
}
