//! Who may use the dashboard: Jupyter-style log-in links, session cookies, anti-forgery tokens.
//!
//! Rules it enforces:
//! - A log-in link carries a one-time token: opening it once makes a session and the token is
//!   spent; the answer is a redirect to a URL without it, so it never stays in the address bar,
//!   the history or a `Referer`. Links expire after [`LINK_TTL`]; at most [`MAX_LINKS`] wait.
//! - A session is a random id in an `HttpOnly`, `SameSite=Strict` cookie named after the hub's
//!   port (two hubs on one machine keep their own), valid for [`SESSION_TTL`]; at most
//!   [`MAX_SESSIONS`] live (the oldest goes first). Under `serve --host-tls` the cookie is also
//!   `Secure`: a browser never sends it over plain http, where anyone on the path would read it.
//! - A link asked for with a person's remote token ([`crate::hub::remote_tokens`]) makes a
//!   session that lives only as long as that token: once it is revoked, the session is refused.
//! - Each session has a [`Lease`] (a child of the lease of the credential that asked for its
//!   link), which what the session opened (its traffic streams) ends with: it is cancelled at
//!   log-out, when the session is evicted or expires, and when that credential is revoked.
//! - A request changing anything (any method but GET/HEAD) made with the cookie needs the
//!   session's anti-forgery token in [`CSRF_HEADER`] and an `Origin` that is the dashboard's own
//!   (`http://` plus the request's `Host`): the front door lets every loopback origin through (MCP
//!   web clients), but a page on another local port is the same *site* as the dashboard for
//!   `SameSite`, so the cookie alone would go with its requests.
//! - Scripts use `Authorization: Bearer` with the control token, a remote token or the MCP
//!   token instead, checked by the host listener's rules ([`crate::hub::bearer`]); such requests
//!   carry no ambient credential, so they need no anti-forgery token.
//! - Every token is compared in constant time; every refusal is counted and logged.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, Method, header};

use crate::hub::bearer::Credential;
use crate::hub::principal::Lease;
use crate::hub::remote_tokens::Holder;
use crate::hub::secret::{constant_time_eq, fill_random, hex};

/// How long a log-in link stays valid.
pub const LINK_TTL: Duration = Duration::from_secs(24 * 3600);
/// Log-in links waiting to be opened, at most (the oldest is dropped).
pub const MAX_LINKS: usize = 16;
/// How long a session lasts.
pub const SESSION_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// Live sessions, at most (the oldest is ended).
pub const MAX_SESSIONS: usize = 64;
/// The header that carries the anti-forgery token.
pub const CSRF_HEADER: &str = "x-mcpdev-csrf";

/// How a request proved who it is.
#[derive(Debug, Clone)]
pub enum Who {
    /// A browser session: its anti-forgery token, what ends with it, and the remote token it
    /// lives by (if one asked for its link).
    Session { csrf: String, lease: Lease, holder: Option<Holder> },
    /// A script with a bearer token.
    Bearer(Credential),
}

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denied {
    /// No session cookie, an unknown or expired one, and no valid bearer token.
    NoSession,
    /// A state-changing request with the cookie but without the right anti-forgery token or
    /// without an `Origin`.
    Forgery,
}

/// A live session: its id, its anti-forgery token, when it began, and the remote token it
/// lives by, if a remote token asked for its link.
struct Session {
    id: String,
    csrf: String,
    at: Instant,
    holder: Option<Holder>,
    lease: Lease,
}

/// A log-in link waiting to be opened: its one-time token, when it was made, and the remote
/// token and lease of the credential that asked for it.
struct Link {
    token: String,
    at: Instant,
    holder: Option<Holder>,
    lease: Lease,
}

#[derive(Default)]
struct State {
    links: VecDeque<Link>,
    sessions: VecDeque<Session>,
}

impl State {
    /// Forgets expired links and sessions; an expired session's lease ends.
    fn expire(&mut self) {
        self.links.retain(|l| l.at.elapsed() < LINK_TTL && !l.lease.is_ended());
        self.sessions.retain(|x| {
            let live = x.at.elapsed() < SESSION_TTL;
            if !live {
                x.lease.0.cancel();
            }
            live
        });
    }

    /// Ends the session `id` (its lease too).
    fn end(&mut self, id: &str) {
        self.sessions.retain(|x| {
            let other = !constant_time_eq(x.id.as_bytes(), id.as_bytes());
            if !other {
                x.lease.0.cancel();
            }
            other
        });
    }
}

pub struct Auth {
    cookie: String,
    /// Cookie attributes: `Secure` under TLS.
    attributes: &'static str,
    state: Mutex<State>,
}

fn random_hex() -> String {
    let mut b = [0u8; 32];
    // The system's random source does not fail on Linux; should it, the token is still
    // unguessable per process start (time and address), and logged.
    if let Err(e) = fill_random(&mut b) {
        tracing::error!("no system randomness for a dashboard token: {e}");
        let fallback = format!("{:?}{:p}", std::time::SystemTime::now(), &b);
        b.copy_from_slice(&ring::digest::digest(&ring::digest::SHA256, fallback.as_bytes()).as_ref()[..32]);
    }
    hex(&b)
}

/// Ends `lease` when its session expires ([`SESSION_TTL`]), so a stream the session opened does
/// not outlive it even when no request comes to notice the expiry (no runtime: noticed by the
/// next request only).
fn end_at_expiry(lease: &Lease) {
    end_after(lease, SESSION_TTL);
}

fn end_after(lease: &Lease, ttl: Duration) {
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        let lease = lease.clone();
        rt.spawn(async move {
            tokio::select! {
                () = tokio::time::sleep(ttl) => lease.0.cancel(),
                () = lease.end() => {}
            }
        });
    }
}

impl Auth {
    /// The sessions of the dashboard on `port`; `secure` when it is served over TLS only.
    pub fn new(port: u16, secure: bool) -> Self {
        let attributes = if secure { "HttpOnly; Secure; SameSite=Strict; Path=/" } else { "HttpOnly; SameSite=Strict; Path=/" };
        Self { cookie: format!("mcpdev_session_{port}"), attributes, state: Mutex::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Nothing under this lock can panic; a poisoned one is still consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A fresh one-time log-in token; its session lives by `holder`'s remote token, if given,
    /// and ends with `lease` (the lease of the credential that asked for the link).
    pub fn new_link(&self, holder: Option<Holder>, lease: &Lease) -> String {
        let token = random_hex();
        let mut s = self.lock();
        s.expire();
        while s.links.len() >= MAX_LINKS {
            s.links.pop_front();
        }
        s.links.push_back(Link { token: token.clone(), at: Instant::now(), holder, lease: lease.clone() });
        token
    }

    /// Spends a log-in token: a new session's `Set-Cookie` value, or `None` for a token that
    /// was never issued, was spent already or expired.
    pub fn log_in(&self, token: &str) -> Option<String> {
        let mut s = self.lock();
        s.expire();
        let at = s.links.iter().position(|l| constant_time_eq(l.token.as_bytes(), token.as_bytes()))?;
        let link = s.links.remove(at)?;
        let (id, csrf) = (random_hex(), random_hex());
        while let Some(oldest) = (s.sessions.len() >= MAX_SESSIONS).then(|| s.sessions.pop_front()).flatten() {
            oldest.lease.0.cancel();
        }
        let lease = link.lease.child();
        end_at_expiry(&lease);
        s.sessions.push_back(Session { id: id.clone(), csrf, at: Instant::now(), holder: link.holder, lease });
        Some(format!("{}={id}; {}; Max-Age={}", self.cookie, self.attributes, SESSION_TTL.as_secs()))
    }

    /// The `Set-Cookie` value that ends the browser's session (and the session itself).
    pub fn log_out(&self, headers: &HeaderMap) -> String {
        if let Some(id) = self.cookie_of(headers) {
            self.lock().end(id);
        }
        format!("{}=; {}; Max-Age=0", self.cookie, self.attributes)
    }

    fn cookie_of<'a>(&self, headers: &'a HeaderMap) -> Option<&'a str> {
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(name, _)| *name == self.cookie)
            .map(|(_, value)| value)
    }

    /// Whether this request may go on, and as whom: `bearer` is what its bearer token proved
    /// (checked by the host listener's rules), `alive` whether a remote token is still valid.
    pub fn check(&self, method: &Method, headers: &HeaderMap, bearer: Option<Credential>, alive: impl Fn(&Holder) -> bool) -> Result<Who, Denied> {
        if let Some(credential) = bearer {
            return Ok(Who::Bearer(credential));
        }
        let id = self.cookie_of(headers).ok_or(Denied::NoSession)?;
        let (csrf, holder, lease) = {
            let mut s = self.lock();
            s.expire();
            s.sessions
                .iter()
                .find(|x| constant_time_eq(x.id.as_bytes(), id.as_bytes()))
                .map(|x| (x.csrf.clone(), x.holder.clone(), x.lease.clone()))
                .ok_or(Denied::NoSession)?
        };
        // A session a remote token opened ends with that token (checked outside the lock).
        if lease.is_ended() || holder.as_ref().is_some_and(|holder| !alive(holder)) {
            self.lock().end(id);
            return Err(Denied::NoSession);
        }
        if !matches!(*method, Method::GET | Method::HEAD) {
            let token_ok = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok()).is_some_and(|t| constant_time_eq(t.as_bytes(), csrf.as_bytes()));
            let text = |name| headers.get(name).and_then(|v: &axum::http::HeaderValue| v.to_str().ok());
            // The page's own origin: `http://` (or `https://` under `--host-tls`) and the very authority of `Host`, both read whole.
            let own_origin = matches!((text(header::ORIGIN), text(header::HOST)), (Some(origin), Some(host))
                if crate::hub::authority::origin(origin).is_ok_and(|(scheme, o)| (scheme == "http" || scheme == "https") && crate::hub::authority::Authority::parse(host).is_ok_and(|h| h == o)));
            if !token_ok || !own_origin {
                return Err(Denied::Forgery);
            }
        }
        Ok(Who::Session { csrf, lease, holder })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn auth() -> Auth {
        Auth::new(8001, false)
    }

    fn check(a: &Auth, method: &Method, h: &HeaderMap) -> Result<Who, Denied> {
        a.check(method, h, None, |_| true)
    }

    fn assert_forgery(r: Result<Who, Denied>, why: &str) {
        assert!(matches!(r, Err(Denied::Forgery)), "{why}: {r:?}");
    }

    fn cookie_headers(set_cookie: &str) -> HeaderMap {
        let pair = set_cookie.split(';').next().unwrap();
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, HeaderValue::from_str(&format!("other=1; {pair}")).unwrap());
        h
    }

    #[test]
    fn a_link_opens_one_session_once() {
        let a = auth();
        let link = a.new_link(None, &Lease::for_the_run());
        let set = a.log_in(&link).expect("a fresh link logs in");
        assert!(set.contains("HttpOnly") && set.contains("SameSite=Strict") && set.starts_with("mcpdev_session_8001="), "{set}");
        assert_eq!(a.log_in(&link), None, "a link is spent once used");
        assert_eq!(a.log_in("not-a-link"), None);
        let h = cookie_headers(&set);
        assert!(matches!(check(&a, &Method::GET, &h), Ok(Who::Session { .. })));
    }

    #[test]
    fn a_state_change_needs_the_anti_forgery_token_and_an_origin() {
        let a = auth();
        let set = a.log_in(&a.new_link(None, &Lease::for_the_run())).unwrap();
        let mut h = cookie_headers(&set);
        let Ok(Who::Session { csrf, .. }) = check(&a, &Method::GET, &h) else { panic!() };
        assert_forgery(check(&a, &Method::POST, &h), "no token");
        h.insert(CSRF_HEADER, HeaderValue::from_static("wrong"));
        h.insert(header::HOST, HeaderValue::from_static("127.0.0.1:8001"));
        h.insert(header::ORIGIN, HeaderValue::from_static("http://127.0.0.1:8001"));
        assert_forgery(check(&a, &Method::POST, &h), "a wrong token");
        h.insert(CSRF_HEADER, HeaderValue::from_str(&csrf).unwrap());
        assert!(check(&a, &Method::POST, &h).is_ok());
        // Another page on this machine: the same site for SameSite, but not the dashboard's origin.
        h.insert(header::ORIGIN, HeaderValue::from_static("http://127.0.0.1:3000"));
        assert_forgery(check(&a, &Method::POST, &h), "another local origin");
        h.insert(header::ORIGIN, HeaderValue::from_static("http://localhost:8001"));
        assert_forgery(check(&a, &Method::POST, &h), "another name than the page was loaded by");
        // The same junk in Host and Origin is no authority, so no origin of the page either.
        h.insert(header::HOST, HeaderValue::from_static("[::1].evil.example:8001"));
        h.insert(header::ORIGIN, HeaderValue::from_static("http://[::1].evil.example:8001"));
        assert_forgery(check(&a, &Method::POST, &h), "junk around a loopback address");
        h.insert(header::HOST, HeaderValue::from_static("LOCALHOST:8001"));
        h.insert(header::ORIGIN, HeaderValue::from_static("http://localhost:8001"));
        assert!(check(&a, &Method::POST, &h).is_ok(), "one authority, whatever its case");
        h.remove(header::ORIGIN);
        assert_forgery(check(&a, &Method::POST, &h), "no Origin");
    }

    #[test]
    fn a_bearer_passes_and_a_forged_or_foreign_cookie_does_not() {
        let a = auth();
        assert!(matches!(a.check(&Method::POST, &HeaderMap::new(), Some(Credential::Control), |_| true), Ok(Who::Bearer(Credential::Control))), "scripts need no anti-forgery token");
        let mut forged = HeaderMap::new();
        forged.insert(header::COOKIE, HeaderValue::from_static("mcpdev_session_8001=0000"));
        assert!(matches!(check(&a, &Method::GET, &forged), Err(Denied::NoSession)));
        // Another hub's cookie (another port) is not this hub's session.
        let b = Auth::new(9001, false);
        let set = b.log_in(&b.new_link(None, &Lease::for_the_run())).unwrap();
        assert!(matches!(check(&a, &Method::GET, &cookie_headers(&set)), Err(Denied::NoSession)));
    }

    #[test]
    fn under_tls_the_cookie_is_secure_and_plain_it_is_not() {
        let secure = Auth::new(8001, true);
        let set = secure.log_in(&secure.new_link(None, &Lease::for_the_run())).unwrap();
        assert!(set.split("; ").any(|a| a == "Secure") && set.contains("HttpOnly") && set.contains("SameSite=Strict"), "{set}");
        assert!(secure.log_out(&cookie_headers(&set)).split("; ").any(|a| a == "Secure"), "the log-out cookie too");
        let plain = auth();
        let set = plain.log_in(&plain.new_link(None, &Lease::for_the_run())).unwrap();
        assert!(!set.contains("Secure"), "plain http keeps the cookie usable: {set}");
    }

    #[test]
    fn a_session_a_remote_token_opened_ends_with_the_token() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("remote-tokens.json");
        let tokens = crate::hub::remote_tokens::RemoteTokens::new(path.clone());
        let (token, _) = crate::hub::remote_tokens::create(&path, "alice").unwrap();
        let holder = tokens.verify(&token).unwrap();
        let a = auth();
        let set = a.log_in(&a.new_link(Some(holder.clone()), &tokens.lease(&holder))).unwrap();
        let h = cookie_headers(&set);
        let Ok(Who::Session { lease, .. }) = a.check(&Method::GET, &h, None, |h| tokens.holds(h)) else { panic!("a live session") };
        assert!(!lease.is_ended());
        crate::hub::remote_tokens::revoke(&path, "alice").unwrap();
        tokens.refresh();
        assert!(lease.is_ended(), "revoked: what the session opened ends at once");
        assert!(matches!(a.check(&Method::GET, &h, None, |h| tokens.holds(h)), Err(Denied::NoSession)), "revoked: the session ends");
        assert!(matches!(a.check(&Method::GET, &h, None, |_| true), Err(Denied::NoSession)), "and stays ended");
        // Log-out and eviction end a session's lease too.
        let set = a.log_in(&a.new_link(None, &Lease::for_the_run())).unwrap();
        let Ok(Who::Session { lease, .. }) = check(&a, &Method::GET, &cookie_headers(&set)) else { panic!() };
        a.log_out(&cookie_headers(&set));
        assert!(lease.is_ended(), "log-out ends what the session opened");
        let set = a.log_in(&a.new_link(None, &Lease::for_the_run())).unwrap();
        let Ok(Who::Session { lease, .. }) = check(&a, &Method::GET, &cookie_headers(&set)) else { panic!() };
        for _ in 0..MAX_SESSIONS {
            a.log_in(&a.new_link(None, &Lease::for_the_run())).unwrap();
        }
        assert!(lease.is_ended(), "an evicted session's lease ends");
    }

    #[test]
    fn sessions_and_links_are_capped() {
        let a = auth();
        let first = a.new_link(None, &Lease::for_the_run());
        for _ in 0..MAX_LINKS {
            a.new_link(None, &Lease::for_the_run());
        }
        assert_eq!(a.log_in(&first), None, "the oldest link was dropped");
        let first_session = a.log_in(&a.new_link(None, &Lease::for_the_run())).unwrap();
        for _ in 0..MAX_SESSIONS {
            a.log_in(&a.new_link(None, &Lease::for_the_run())).unwrap();
        }
        assert!(matches!(check(&a, &Method::GET, &cookie_headers(&first_session)), Err(Denied::NoSession)), "the oldest session was ended");
    }

    /// A session's lease ends at its expiry even if no request comes, and not before.
    #[tokio::test]
    async fn a_sessions_streams_end_at_its_expiry() {
        let a = auth();
        let set = a.log_in(&a.new_link(None, &Lease::for_the_run())).unwrap();
        let Ok(Who::Session { lease, .. }) = check(&a, &Method::GET, &cookie_headers(&set)) else { panic!() };
        tokio::task::yield_now().await;
        assert!(!lease.is_ended(), "a week-long session is not ended at once");
        let short = Lease::for_the_run();
        end_after(&short, Duration::from_millis(10));
        tokio::time::timeout(Duration::from_secs(10), short.end()).await.expect("ended at its expiry");
    }
}
