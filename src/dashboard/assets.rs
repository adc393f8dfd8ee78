//! The dashboard's files, embedded in the binary (no CDN, no build step, works offline), and the
//! headers every page goes out with.
//!
//! Rules it enforces: every answer carries [`CSP`] (scripts and styles only from this origin,
//! none inline; images also as `data:` URLs, which is how tool results carry them; no frames,
//! no plugins, no `<base>`), `nosniff`, and no referrer; only the files listed here are served.
//! The one third-party file, uPlot (`assets/vendor/`, MIT), is served as published, with its
//! licence beside it.

use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;

pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; \
                       base-uri 'none'; form-action 'self'; frame-ancestors 'none'; object-src 'none'";

pub const INDEX_HTML: &str = include_str!("assets/index.html");
pub const LOGIN_HTML: &str = include_str!("assets/login.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");
const ICON_SVG: &str = include_str!("assets/icon.svg");
const UPLOT_JS: &str = include_str!("assets/vendor/uPlot.iife.min.js");
const UPLOT_CSS: &str = include_str!("assets/vendor/uPlot.min.css");
const UPLOT_LICENSE: &str = include_str!("assets/vendor/uPlot.LICENSE");

/// Every embedded file with its type (the page weight in benches/README.md is their sum).
pub const FILES: [(&str, &str, &str); 6] = [
    ("app.js", "text/javascript; charset=utf-8", APP_JS),
    ("app.css", "text/css; charset=utf-8", APP_CSS),
    ("icon.svg", "image/svg+xml", ICON_SVG),
    ("uPlot.iife.min.js", "text/javascript; charset=utf-8", UPLOT_JS),
    ("uPlot.min.css", "text/css; charset=utf-8", UPLOT_CSS),
    ("uPlot.LICENSE", "text/plain; charset=utf-8", UPLOT_LICENSE),
];

fn secure(mut resp: Response) -> Response {
    let h = resp.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    resp
}

/// An HTML page.
pub fn page(status: StatusCode, html: &'static str) -> Response {
    secure(super::text(status, "text/html; charset=utf-8", html))
}

/// `/assets/NAME`.
pub async fn serve(Path(name): Path<String>) -> Response {
    match FILES.iter().find(|(n, _, _)| *n == name) {
        Some((_, kind, body)) => {
            let mut resp = secure(super::text(StatusCode::OK, kind, *body));
            // Fresh after each hub upgrade, cached within a session.
            resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("private, max-age=300"));
            resp
        }
        None => secure(super::text(StatusCode::NOT_FOUND, "text/plain; charset=utf-8", "no such file\n")),
    }
}

/// `/favicon.ico`: the icon, so a browser's automatic request finds something.
pub async fn favicon() -> Response {
    serve(Path("icon.svg".to_string())).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Device text is written as text: the script has no HTML sink, and no page has inline
    /// script or style (the CSP would block them, and they would be a place for injection).
    #[test]
    fn the_script_writes_no_html_and_the_pages_have_nothing_inline() {
        for sink in ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "setAttribute('on", "srcdoc"] {
            assert!(!APP_JS.contains(sink), "app.js uses {sink}");
        }
        for page in [INDEX_HTML, LOGIN_HTML] {
            assert!(!page.contains("<script>") && !page.contains("style=") && !page.contains("<style") && !has_handler_attribute(page), "inline script or style in a page");
            assert!(!page.contains("http://") && !page.contains("https://"), "a page loads something from elsewhere");
        }
        assert!(!APP_CSS.contains("url(http"), "the stylesheet loads something from elsewhere");
    }

    /// The charting library is the published file, writes no HTML and loads nothing, and its
    /// licence is served beside it.
    #[test]
    fn the_vendored_chart_library_is_inert_and_licensed() {
        assert!(UPLOT_JS.starts_with("/*! https://github.com/leeoniya/uPlot (v1.6.32) */"));
        for sink in ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "http://", "XMLHttpRequest", "fetch("] {
            assert!(!UPLOT_JS.contains(sink), "uPlot uses {sink}");
        }
        assert!(!UPLOT_CSS.contains("url("), "its stylesheet loads nothing");
        assert!(UPLOT_LICENSE.contains("MIT License") && UPLOT_LICENSE.contains("Leon Sorokin"));
        assert!(INDEX_HTML.contains("/assets/uPlot.iife.min.js") && INDEX_HTML.contains("/assets/uPlot.min.css"));
    }

    /// ` onclick=`, ` onload=`…: an attribute that runs script.
    fn has_handler_attribute(html: &str) -> bool {
        html.match_indices(" on").any(|(at, _)| {
            let rest = &html[at + 3..];
            let name_len = rest.chars().take_while(char::is_ascii_alphabetic).count();
            name_len > 0 && rest[name_len..].starts_with('=')
        })
    }
}
