//! The dashboard and `/metrics` over the hub's real host listener, without a browser (the browser
//! drives it in tests/dashboard_browser.rs): the one-time log-in, the refusals an attacker meets
//! (no cookie, a forged cookie, another Origin, no anti-forgery token, a spent link), the tool
//! form's validation by the CLI's own code, and a real scraper: `promtool check metrics` on the
//! exposition and Debian's Prometheus scraping it while calls are made.
//!
//! `.ci/test` installs Prometheus (Debian package `prometheus`: `promtool` and `prometheus`); a
//! missing one is a failure, not a skip.

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{HubProcess, installed, mcpdev};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

const DEV: &str = "02:00:00:00:00:01";
const DEADLINE: Duration = Duration::from_secs(30);

/// One HTTP/1.1 exchange with the host listener: status, headers (lower-case names), body.
async fn http(hub: &HubProcess, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, Vec<(String, String)>, String) {
    let (status, headers, body) = common::ota::exchange(hub.host_url.trim_start_matches("http://"), method, path, headers, body, DEADLINE).await;
    (status, headers, String::from_utf8_lossy(&body).into_owned())
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

type Headers<'a> = Vec<(&'a str, &'a str)>;

/// A logged-in browser, as the hub sees it: its cookie and anti-forgery token.
struct Browser {
    cookie: String,
    csrf: String,
    origin: String,
}

async fn log_in(hub: &HubProcess, link: &str) -> Browser {
    let path = link.strip_prefix(&hub.host_url).unwrap_or_else(|| panic!("{link} is not on {}", hub.host_url));
    let (status, headers, _) = http(hub, "GET", path, &[], "").await;
    assert_eq!(status, 303, "a log-in link redirects");
    assert_eq!(header(&headers, "location"), Some("/"), "the redirect drops the token from the URL");
    let set = header(&headers, "set-cookie").expect("a session cookie").to_string();
    assert!(set.contains("HttpOnly") && set.contains("SameSite=Strict"), "{set}");
    let cookie = set.split(';').next().unwrap().to_string();
    let (status, _, body) = http(hub, "GET", "/dashboard/api/session", &[("Cookie", &cookie)], "").await;
    assert_eq!(status, 200, "{body}");
    let csrf = serde_json::from_str::<Value>(&body).unwrap()["csrf"].as_str().unwrap().to_string();
    Browser { cookie, csrf, origin: hub.host_url.clone() }
}

async fn demo_hub() -> HubProcess {
    let hub = HubProcess::start(&["--demo", "2"], &[]).await;
    let ready = mcpdev(&hub, &["tools", "list", "-d", DEV, "--wait", "20s", "--json"]).await;
    assert_eq!(ready.code, 0, "{ready:?}");
    hub
}

async fn volume(hub: &HubProcess) -> u64 {
    let status = mcpdev(hub, &["call", "self.get_device_status", "-d", DEV, "--json"]).await;
    assert_eq!(status.code, 0, "{status:?}");
    let text: Value = serde_json::from_str(status.json()["content"][0]["text"].as_str().unwrap()).unwrap();
    text["audio_speaker"]["volume"].as_u64().unwrap()
}

/// The device's calls as the dashboard counts them.
async fn device_calls(hub: &HubProcess, b: &Browser) -> u64 {
    let (status, _, body) = http(hub, "GET", &format!("/dashboard/api/device?id={DEV}"), &[("Cookie", &b.cookie)], "").await;
    assert_eq!(status, 200, "{body}");
    serde_json::from_str::<Value>(&body).unwrap()["row"]["calls"]["calls"].as_u64().unwrap()
}

#[tokio::test]
async fn a_log_in_link_works_once_and_the_page_is_locked_down() {
    let hub = demo_hub().await;
    let link = hub.info["dashboard"].as_str().expect("serve prints a log-in link").to_string();
    assert!(link.starts_with(&format!("{}/?token=", hub.host_url)), "{link}");
    let b = log_in(&hub, &link).await;
    // Spent: the same link again opens nothing.
    let path = link.strip_prefix(&hub.host_url).unwrap();
    let (status, headers, _) = http(&hub, "GET", path, &[], "").await;
    assert_eq!(status, 403);
    assert!(header(&headers, "set-cookie").is_none());
    // The page, with its policy: no inline script, nothing from elsewhere.
    let (status, headers, body) = http(&hub, "GET", "/", &[("Cookie", &b.cookie)], "").await;
    assert_eq!(status, 200);
    let csp = header(&headers, "content-security-policy").expect("a CSP");
    assert!(csp.contains("script-src 'self'") && !csp.contains("unsafe-inline") && csp.contains("frame-ancestors 'none'"), "{csp}");
    assert!(body.contains("/assets/app.js"));
    // Without the cookie: the log-in help, not the dashboard.
    let (status, _, body) = http(&hub, "GET", "/", &[], "").await;
    assert_eq!(status, 401);
    assert!(body.contains("mcpdev dashboard"), "{body}");
    // `mcpdev dashboard` prints a fresh link that works.
    let fresh = mcpdev(&hub, &["dashboard", "--no-open"]).await;
    assert_eq!(fresh.code, 0, "{fresh:?}");
    let fresh_link = fresh.stdout.trim();
    assert_ne!(fresh_link, link);
    log_in(&hub, fresh_link).await;
    // Scripts: the control token works as a bearer; a wrong one does not.
    let token = std::fs::read_to_string(PathBuf::from(&hub.runtime_dir).join(format!("control-{}.token", hub.host_url.rsplit(':').next().unwrap()))).unwrap();
    let (status, _, body) = http(&hub, "GET", "/dashboard/api/devices", &[("Authorization", &format!("Bearer {}", token.trim()))], "").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["total"], 2);
    let (status, _, _) = http(&hub, "GET", "/dashboard/api/devices", &[("Authorization", "Bearer 0000")], "").await;
    assert_eq!(status, 401);
}

/// The attacker's side: another web site, a request without the cookie, a forged cookie, a
/// request without the anti-forgery token. None of them reaches the device.
#[tokio::test]
async fn changes_without_the_session_the_origin_or_the_anti_forgery_token_are_refused() {
    let hub = demo_hub().await;
    let b = log_in(&hub, hub.info["dashboard"].as_str().unwrap()).await;
    let before = volume(&hub).await;
    let calls_before = device_calls(&hub, &b).await;
    let call = json!({"device": DEV, "tool": "self.audio_speaker.set_volume", "words": ["volume=13"]}).to_string();
    let csrf = b.csrf.as_str();
    let cookie = b.cookie.as_str();
    let origin = b.origin.as_str();
    let forged = "mcpdev_session_1=00".to_string();
    let other_local_page = "http://127.0.0.1:1";
    let attempts: [(&str, Headers, u16); 7] = [
        ("no cookie", vec![("Origin", origin), ("x-mcpdev-csrf", csrf)], 401),
        ("a forged cookie", vec![("Cookie", forged.as_str()), ("Origin", origin), ("x-mcpdev-csrf", csrf)], 401),
        ("another Origin", vec![("Cookie", cookie), ("Origin", "https://evil.example"), ("x-mcpdev-csrf", csrf)], 403),
        ("no anti-forgery token", vec![("Cookie", cookie), ("Origin", origin)], 403),
        ("a wrong anti-forgery token", vec![("Cookie", cookie), ("Origin", origin), ("x-mcpdev-csrf", "00")], 403),
        ("no Origin", vec![("Cookie", cookie), ("x-mcpdev-csrf", csrf)], 403),
        // A page on another local port passes the front door (loopback) but is not the dashboard.
        ("another local page", vec![("Cookie", cookie), ("Origin", other_local_page), ("x-mcpdev-csrf", csrf)], 403),
    ];
    for (what, headers, want) in &attempts {
        let mut h = headers.clone();
        h.push(("Content-Type", "application/json"));
        let (status, _, body) = http(&hub, "POST", "/dashboard/api/call", &h, &call).await;
        assert_eq!(status, *want, "{what}: {body}");
        let (status, _, _) = http(&hub, "POST", "/dashboard/api/admission/approve", &h, r#"{"target":"123456"}"#).await;
        assert_eq!(status, *want, "{what} (approve)");
    }
    // A DNS-rebinding page: its Host is not ours.
    let (status, _, _) = http(&hub, "GET", "/dashboard/api/devices", &[("Cookie", cookie), ("Host", "evil.example:8001")], "").await;
    assert_eq!(status, 403);
    assert_eq!(volume(&hub).await, before, "no refused request reached the device");
    assert_eq!(device_calls(&hub, &b).await, calls_before + 1, "only the status read above was a call");
    // The same request with all three passes, and changes the device.
    let h = [("Cookie", cookie), ("Origin", origin), ("x-mcpdev-csrf", csrf), ("Content-Type", "application/json")];
    let (status, _, body) = http(&hub, "POST", "/dashboard/api/call", &h, &call).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(volume(&hub).await, 13);
    // The refusals are counted by reason.
    let (_, _, metrics) = http(&hub, "GET", "/metrics", &[("Cookie", cookie)], "").await;
    for reason in ["dashboard_auth", "anti_forgery", "origin", "host"] {
        let line = metrics.lines().find(|l| l.starts_with(&format!("mcpdev_refusals_total{{reason=\"{reason}\"}}"))).unwrap_or_else(|| panic!("{reason}: {metrics}"));
        assert_ne!(line.rsplit(' ').next(), Some("0"), "{line}");
    }
}

/// A tool form's words go through the CLI's own typing and validation: the error is the CLI's,
/// word for word, and an invalid call is never sent.
#[tokio::test]
async fn a_form_is_validated_by_the_clis_code_and_an_invalid_call_is_never_sent() {
    let hub = demo_hub().await;
    let b = log_in(&hub, hub.info["dashboard"].as_str().unwrap()).await;
    let h = [("Cookie", b.cookie.as_str()), ("Origin", b.origin.as_str()), ("x-mcpdev-csrf", b.csrf.as_str()), ("Content-Type", "application/json")];
    let cli = mcpdev(&hub, &["call", "self.audio_speaker.set_volume", "volume=500", "-d", DEV]).await;
    assert_ne!(cli.code, 0);
    let calls_before = device_calls(&hub, &b).await;
    for path in ["/dashboard/api/validate", "/dashboard/api/call"] {
        let body = json!({"device": DEV, "tool": "self.audio_speaker.set_volume", "words": ["volume=500"]}).to_string();
        let (status, _, answer) = http(&hub, "POST", path, &h, &body).await;
        assert_eq!(status, 422, "{answer}");
        let answer: Value = serde_json::from_str(&answer).unwrap();
        let text = answer["errors"][0]["text"].as_str().unwrap();
        assert_eq!(text, "argument 'volume': must be at most 100 (allowed 0..100), got 500");
        assert!(cli.stderr.contains(text), "the CLI says the same: {}", cli.stderr);
    }
    assert_eq!(device_calls(&hub, &b).await, calls_before, "nothing reached the device");
    // Strings stay strings, typed by the schema: the CLI's coercion.
    let body = json!({"device": DEV, "tool": "self.audio_speaker.set_volume", "words": ["volume=50"]}).to_string();
    let (status, _, answer) = http(&hub, "POST", "/dashboard/api/validate", &h, &body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(serde_json::from_str::<Value>(&answer).unwrap()["arguments"], json!({"volume": 50}));
}

fn promtool() -> PathBuf {
    installed("MCPDEV_TEST_PROMTOOL", PathBuf::from("/usr/bin/promtool"), "promtool (Debian package prometheus)")
}

fn sample(text: &str, prefix: &str) -> f64 {
    text.lines().find(|l| l.starts_with(prefix)).and_then(|l| l.rsplit(' ').next()).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("no {prefix} in\n{text}"))
}

#[tokio::test]
async fn metrics_pass_promtool_and_count_calls() {
    let hub = demo_hub().await;
    let token = std::fs::read_to_string(PathBuf::from(&hub.runtime_dir).join(format!("control-{}.token", hub.host_url.rsplit(':').next().unwrap()))).unwrap();
    let bearer = format!("Bearer {}", token.trim());
    let (status, _, _) = http(&hub, "GET", "/metrics", &[], "").await;
    assert_eq!(status, 401, "/metrics needs the same authentication");
    let (status, headers, before) = http(&hub, "GET", "/metrics", &[("Authorization", &bearer)], "").await;
    assert_eq!(status, 200);
    assert!(header(&headers, "content-type").unwrap().starts_with("text/plain; version=0.0.4"));
    for _ in 0..3 {
        assert_eq!(mcpdev(&hub, &["call", "self.audio_speaker.set_volume", "volume=20", "-d", DEV]).await.code, 0);
    }
    let (_, _, after) = http(&hub, "GET", "/metrics", &[("Authorization", &bearer)], "").await;
    let ok = "mcpdev_calls_total{outcome=\"ok\"}";
    assert!(sample(&after, ok) >= sample(&before, ok) + 3.0, "{after}");
    // Plain calls are timed as `kind="call"` (MCP tasks as `task`, which the p99 alert leaves out).
    let timed = "mcpdev_call_duration_seconds_count{kind=\"call\"}";
    assert!(sample(&after, timed) >= sample(&before, timed) + 3.0, "{after}");
    assert_eq!(sample(&after, "mcpdev_call_duration_seconds_count{kind=\"task\"}"), 0.0, "no task ran");
    assert_eq!(sample(&after, "mcpdev_devices{state=\"ready\",transport=\"websocket\"}"), 2.0);
    assert!(sample(&after, "mcpdev_onboarded_total") >= 2.0);
    // Debian's promtool reads it as valid, lint included.
    let mut check = tokio::process::Command::new(promtool()).args(["check", "metrics"]).stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    check.stdin.take().unwrap().write_all(after.as_bytes()).await.unwrap();
    let out = check.wait_with_output().await.unwrap();
    assert!(out.status.success(), "promtool: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    // The standard process families and the build, as every client library exports them.
    for family in ["process_cpu_seconds_total ", "process_resident_memory_bytes ", "process_virtual_memory_bytes ", "process_start_time_seconds ", "process_open_fds ", "process_max_fds "] {
        assert!(after.lines().any(|l| l.starts_with(family)), "{family} in\n{after}");
    }
    assert!(after.contains(&format!("mcpdev_build_info{{version=\"{}\",commit=\"", env!("CARGO_PKG_VERSION"))), "{after}");
    // OpenMetrics for a scraper that asks for it.
    let (_, headers, open) = http(&hub, "GET", "/metrics", &[("Authorization", &bearer), ("Accept", "application/openmetrics-text;version=1.0.0")], "").await;
    assert!(header(&headers, "content-type").unwrap().starts_with("application/openmetrics-text"));
    assert!(open.ends_with("# EOF\n"));
}

/// Issue 33: a tool that ran and failed (`isError: true`, exit 5 in the CLI) counts as
/// `outcome="tool_error"`, apart from a JSON-RPC error from the device (`device_error`) and from
/// the calls that succeeded: an alert on failing tools sees them.
#[tokio::test]
async fn metrics_count_failing_tools_apart_from_device_errors() {
    let hub = HubProcess::start(&["--demo", "1", "--demo-profile", "conformance"], &[]).await;
    assert_eq!(mcpdev(&hub, &["tools", "list", "-d", DEV, "--wait", "20s"]).await.code, 0);
    let token = std::fs::read_to_string(PathBuf::from(&hub.runtime_dir).join(format!("control-{}.token", hub.host_url.rsplit(':').next().unwrap()))).unwrap();
    let bearer = format!("Bearer {}", token.lines().next().unwrap().trim());
    let scrape = || async { http(&hub, "GET", "/metrics", &[("Authorization", &bearer)], "").await.2 };
    let outcome = |text: &str, o: &str| sample(text, &format!("mcpdev_calls_total{{outcome=\"{o}\"}}"));
    let before = scrape().await;
    assert_eq!(outcome(&before, "tool_error"), 0.0, "written from the start, at 0: {before}");
    let failed = mcpdev(&hub, &["call", "test_error_handling", "-d", DEV]).await;
    assert_eq!(failed.code, 5, "{failed:?}");
    let refused = mcpdev(&hub, &["call", "self.audio_speaker.set_volume", "volume=500", "--no-validate", "-d", DEV]).await;
    assert_eq!(refused.code, 5, "{refused:?}");
    assert_eq!(mcpdev(&hub, &["call", "test_simple_text", "-d", DEV]).await.code, 0);
    let after = scrape().await;
    assert_eq!(outcome(&after, "tool_error") - outcome(&before, "tool_error"), 1.0, "{after}");
    assert_eq!(outcome(&after, "device_error") - outcome(&before, "device_error"), 1.0, "{after}");
    assert!(outcome(&after, "ok") >= outcome(&before, "ok") + 1.0, "{after}");
}

/// Issue 33: the dashboard's Record starts with what the hub knows of the device (identity,
/// hello, `initialize`, every `tools/list` page as the device cut them), so a recording of a
/// device that onboarded before it started replays; only for a logged-in owner.
#[tokio::test]
async fn the_dashboards_recording_starts_with_what_the_hub_knows() {
    let hub = HubProcess::start(&["--demo", "1", "--demo-extra-tools", "120"], &[]).await;
    assert_eq!(mcpdev(&hub, &["tools", "list", "-d", DEV, "--wait", "20s"]).await.code, 0);
    let token = std::fs::read_to_string(PathBuf::from(&hub.runtime_dir).join(format!("control-{}.token", hub.host_url.rsplit(':').next().unwrap()))).unwrap();
    let bearer = format!("Bearer {}", token.lines().next().unwrap().trim());
    let path = format!("/dashboard/api/recording?id={DEV}");
    assert_eq!(http(&hub, "GET", &path, &[], "").await.0, 401, "not for anyone but the owner");
    let (status, _, body) = http(&hub, "GET", &path, &[("Authorization", &bearer)], "").await;
    assert_eq!(status, 200, "{body}");
    let text: String = serde_json::from_str::<Value>(&body).unwrap()["lines"].as_array().unwrap().iter().map(|l| format!("{l}\n")).collect();
    let rec = mcpdev::sim::replay::Recording::parse(&text).unwrap();
    assert_eq!(rec.identity["device_id"], DEV);
    assert!(rec.answer("initialize", &json!({})).is_ok(), "{text}");
    let (_, _, device) = http(&hub, "GET", &format!("/dashboard/api/device?id={DEV}"), &[("Authorization", &bearer)], "").await;
    let known = serde_json::from_str::<Value>(&device).unwrap()["tools"].as_array().unwrap().len();
    let (mut listed, mut pages, mut cursor) = (0, 0, String::new());
    loop {
        let page = rec.answer("tools/list", &json!({"cursor": cursor, "withUserTools": true})).unwrap().reply.clone().unwrap();
        listed += page["result"]["tools"].as_array().unwrap().len();
        pages += 1;
        match page["result"]["nextCursor"].as_str() {
            Some(next) => cursor = next.to_string(),
            None => break,
        }
    }
    assert_eq!(listed, known, "every tool, page by page");
    assert!(pages > 1, "the device's own pages: {pages}");
}

/// Prometheus itself scrapes `/metrics` (with the control token as its bearer) and sees the
/// call counter move as calls are made.
#[tokio::test]
async fn prometheus_scrapes_the_hub_and_sees_calls_counted() {
    let prometheus = installed("MCPDEV_TEST_PROMETHEUS", PathBuf::from("/usr/bin/prometheus"), "Prometheus (Debian package prometheus)");
    let hub = demo_hub().await;
    let dir = tempfile::tempdir().unwrap();
    // The control token file holds the token and, on its second line, the address the hub bound:
    // Prometheus's credentials file must hold the token alone.
    let control_file = PathBuf::from(&hub.runtime_dir).join(format!("control-{}.token", hub.host_url.rsplit(':').next().unwrap()));
    let token = mcpdev::links::control_token::token_of(&std::fs::read(&control_file).unwrap());
    let token_file = dir.path().join("mcpdev.token");
    std::fs::write(&token_file, &token).unwrap();
    let target = hub.host_url.trim_start_matches("http://");
    let config = format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: mcpdev\n    authorization:\n      credentials_file: {}\n    static_configs:\n      - targets: ['{target}']\n",
        token_file.display()
    );
    std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
    let web = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let web_addr = web.local_addr().unwrap();
    drop(web);
    let mut server = tokio::process::Command::new(prometheus)
        .arg(format!("--config.file={}", dir.path().join("prometheus.yml").display()))
        .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
        .arg(format!("--web.listen-address={web_addr}"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    mcpdev::tls::install_crypto_provider();
    let client = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().unwrap();
    let query = |q: &str| {
        let mut url = reqwest::Url::parse(&format!("http://{web_addr}/api/v1/query")).unwrap();
        url.query_pairs_mut().append_pair("query", q);
        let request = client.get(url);
        async move {
            let v: Value = request.send().await.ok()?.json().await.ok()?;
            v["data"]["result"][0]["value"][1].as_str()?.parse::<f64>().ok()
        }
    };
    let until = |q: &'static str, cond: Box<dyn Fn(f64) -> bool>| {
        let query = &query;
        async move {
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                if let Some(v) = query(q).await
                    && cond(v)
                {
                    return v;
                }
                assert!(Instant::now() < deadline, "Prometheus never saw {q} as wanted");
                tokio::time::sleep(Duration::from_millis(200)).await; // polling interval, with a deadline
            }
        }
    };
    let up = until("up{job=\"mcpdev\"}", Box::new(|v| v == 1.0)).await;
    assert_eq!(up, 1.0);
    let before = until("mcpdev_calls_total{outcome=\"ok\"}", Box::new(|_| true)).await;
    for _ in 0..5 {
        assert_eq!(mcpdev(&hub, &["call", "self.audio_speaker.set_volume", "volume=30", "-d", DEV]).await.code, 0);
    }
    let after = until("mcpdev_calls_total{outcome=\"ok\"}", Box::new(move |v| v >= before + 5.0)).await;
    assert!(after >= before + 5.0);
    let devices = until("sum(mcpdev_devices{state=\"ready\"})", Box::new(|v| v == 2.0)).await;
    assert_eq!(devices, 2.0);
    server.kill().await.ok();
}

/// The device page's check button: `mcpdev check` through the hub, its report as `--json` gives it;
/// a second one while the first runs is refused, not queued.
#[tokio::test]
async fn the_check_button_runs_mcpdev_check_on_the_device() {
    let hub = demo_hub().await;
    let b = log_in(&hub, hub.info["dashboard"].as_str().unwrap()).await;
    let h = [("Cookie", b.cookie.as_str()), ("Origin", b.origin.as_str()), ("x-mcpdev-csrf", b.csrf.as_str()), ("Content-Type", "application/json")];
    let body = json!({"device": DEV}).to_string();
    // The first request, and a second one asked again and again while the first is under way:
    // one of them finds the other's check running. The second stops once the first has its
    // answer (it would otherwise run check after check until the deadline, each one a
    // connection to the host listener, whose cap a busy loop can reach).
    let first_done = std::sync::atomic::AtomicBool::new(false);
    let (first, second) = tokio::join!(
        async {
            let answer = http(&hub, "POST", "/dashboard/api/check", &h, &body).await;
            first_done.store(true, std::sync::atomic::Ordering::SeqCst);
            answer
        },
        async {
            let deadline = Instant::now() + DEADLINE;
            loop {
                let done_before = first_done.load(std::sync::atomic::Ordering::SeqCst);
                let (status, _, answer) = http(&hub, "POST", "/dashboard/api/check", &h, &body).await;
                if status == 429 || done_before || Instant::now() > deadline {
                    return (status, answer);
                }
            }
        }
    );
    let (status, _, report) = first;
    let report: Value = serde_json::from_str(&report).unwrap();
    // Either request may have taken the slot first; one ran, the other was refused.
    let (ran, refused) = if status == 200 { (report, second) } else { (serde_json::from_str(&second.1).unwrap(), (status, String::new())) };
    assert_eq!(refused.0, 429, "a second check at once is refused");
    assert_eq!(ran["device_id"], DEV, "{ran}");
    let results = ran["results"].as_array().unwrap();
    assert!(results.iter().any(|c| c["id"].as_str().unwrap().starts_with("initialize") && c["status"] == "pass"), "{ran}");
    assert_eq!(ran["summary"]["fail"], 0, "{ran}");
}

/// The alert rules pass `promtool check rules`, and `promtool test rules` shows each one firing
/// on its trouble (devices dropping, onboarding failures, refusals rising, call errors, p99) and
/// quiet on a healthy hub.
#[test]
fn alert_rules_pass_promtool_and_fire_on_their_trouble() {
    let check = std::process::Command::new(promtool()).args(["check", "rules"]).arg(common::repo_path("docs/monitoring/alerts.yml")).output().unwrap();
    assert!(check.status.success(), "promtool check rules: {}{}", String::from_utf8_lossy(&check.stdout), String::from_utf8_lossy(&check.stderr));
    let test = std::process::Command::new(promtool()).args(["test", "rules", "alerts_test.yml"]).current_dir(common::repo_path("tests/monitoring")).output().unwrap();
    assert!(test.status.success(), "promtool test rules: {}{}", String::from_utf8_lossy(&test.stdout), String::from_utf8_lossy(&test.stderr));
    let rules = std::fs::read_to_string(common::repo_path("docs/monitoring/alerts.yml")).unwrap();
    for alert in ["McpdevDevicesDropping", "McpdevOnboardingFailures", "McpdevRefusalsRising", "McpdevCallErrors", "McpdevCallLatencyP99"] {
        assert!(rules.contains(&format!("alert: {alert}\n")), "{alert}");
    }
}

/// Every metric the Grafana dashboard and the alert rules query is one the hub exports, so
/// neither drifts from `/metrics` unseen.
#[tokio::test]
async fn the_grafana_dashboard_and_alerts_query_only_what_the_hub_exports() {
    let hub = demo_hub().await;
    let token = std::fs::read_to_string(PathBuf::from(&hub.runtime_dir).join(format!("control-{}.token", hub.host_url.rsplit(':').next().unwrap()))).unwrap();
    let bearer = format!("Bearer {}", token.trim());
    assert_eq!(mcpdev(&hub, &["call", "self.audio_speaker.set_volume", "volume=20", "-d", DEV]).await.code, 0);
    let (_, _, text) = http(&hub, "GET", "/metrics", &[("Authorization", &bearer)], "").await;
    let exported: std::collections::HashSet<&str> = text.lines().filter(|l| !l.starts_with('#')).filter_map(|l| l.split(['{', ' ']).next()).collect();
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(common::repo_path("docs/monitoring/grafana-dashboard.json")).unwrap()).expect("the dashboard is JSON");
    assert_eq!(dashboard["__inputs"][0]["pluginId"], "prometheus", "importable with a data source of the user's choice");
    let mut exprs: Vec<String> = dashboard["panels"].as_array().unwrap().iter().flat_map(|p| p["targets"].as_array().unwrap().iter().map(|t| t["expr"].as_str().unwrap().to_string())).collect();
    assert!(exprs.len() >= 12, "{exprs:?}");
    exprs.push(std::fs::read_to_string(common::repo_path("docs/monitoring/alerts.yml")).unwrap());
    let mut used = std::collections::BTreeSet::new();
    for expr in &exprs {
        for (i, _) in expr.match_indices("mcpdev_").chain(expr.match_indices("process_")) {
            if i > 0 && expr.as_bytes()[i - 1].is_ascii_alphanumeric() {
                continue;
            }
            let name: String = expr[i..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            used.insert(name);
        }
    }
    assert!(used.contains("mcpdev_call_duration_seconds_bucket") && used.contains("process_cpu_seconds_total"), "{used:?}");
    let missing: Vec<&String> = used.iter().filter(|n| !exported.contains(n.as_str())).collect();
    assert!(missing.is_empty(), "queried but not exported: {missing:?}\n{text}");
}
