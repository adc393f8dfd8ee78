//! A layer that checks each request before the routes under it see it: the check answers a
//! refused request itself and passes any other on untouched.
//!
//! `axum::middleware::from_fn` does the same for an `async fn`, but costs every request a clone
//! of the service under it (into the request's `Next`) and a boxed future; on the host
//! listener, in front of every `/mcp` call, that showed. A check that needs no `await` (every
//! check the host listener makes reads only the request's headers and extensions) runs here as
//! a plain function, with nothing cloned or boxed per request. A check may also note what it
//! proved in the request's extensions (the credential and its lease, [`super::principal`]) for
//! the routes under it.

use std::task::{Context, Poll};

use axum::extract::Request;
use axum::response::Response;
use futures_util::future::{Either, Ready, ready};
use tower::{Layer, Service};

/// Runs `check` on each request: `Some(refusal)` is the answer, `None` passes the request on
/// (with whatever the check noted in its extensions).
#[derive(Clone)]
pub struct CheckLayer<F> {
    check: F,
}

impl<F> CheckLayer<F>
where
    F: Fn(&mut Request) -> Option<Response> + Clone,
{
    pub fn new(check: F) -> Self {
        Self { check }
    }
}

impl<S, F: Clone> Layer<S> for CheckLayer<F> {
    type Service = Checked<S, F>;

    fn layer(&self, inner: S) -> Checked<S, F> {
        Checked { inner, check: self.check.clone() }
    }
}

/// A service behind a [`CheckLayer`].
#[derive(Clone)]
pub struct Checked<S, F> {
    inner: S,
    check: F,
}

impl<S, F> Service<Request> for Checked<S, F>
where
    S: Service<Request, Response = Response>,
    F: Fn(&mut Request) -> Option<Response>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = Either<Ready<Result<Response, S::Error>>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request) -> Self::Future {
        match (self.check)(&mut req) {
            Some(refusal) => Either::Left(ready(Ok(refusal))),
            None => Either::Right(self.inner.call(req)),
        }
    }
}

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::body::Body;
    use axum::http::StatusCode;
    use axum::routing::get;
    use tower::ServiceExt as _;

    use super::*;

    /// A refused request gets the check's answer and never reaches the route; any other reaches
    /// it as it was sent.
    #[tokio::test]
    async fn a_refused_request_is_answered_by_the_check_and_others_reach_the_route() {
        let reached = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let r = reached.clone();
        let app = Router::new()
            .route(
                "/x",
                get(move |req: Request| async move {
                    r.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    req.headers().get("x-pass").map_or("none", |v| v.to_str().unwrap_or("?")).to_string()
                }),
            )
            .layer(CheckLayer::new(|req: &mut Request| {
                req.headers().get("x-pass").is_none().then(|| {
                    let mut refusal = Response::new(Body::from("refused"));
                    *refusal.status_mut() = StatusCode::FORBIDDEN;
                    refusal
                })
            }));
        let refused = app.clone().oneshot(Request::get("/x").body(Body::empty()).unwrap()).await.unwrap();
        assert_eq!(refused.status(), StatusCode::FORBIDDEN);
        assert_eq!(axum::body::to_bytes(refused.into_body(), 100).await.unwrap(), "refused");
        assert_eq!(reached.load(std::sync::atomic::Ordering::SeqCst), 0);
        let passed = app.oneshot(Request::get("/x").header("x-pass", "yes").body(Body::empty()).unwrap()).await.unwrap();
        assert_eq!(passed.status(), StatusCode::OK);
        assert_eq!(axum::body::to_bytes(passed.into_body(), 100).await.unwrap(), "yes");
        assert_eq!(reached.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}
