//! `mcpdev dashboard`: a fresh one-time log-in link to a running hub's dashboard.
//!
//! Rules: the link is asked of the hub with its control token, which goes only to a loopback hub
//! unless `MCPDEV_HUB_TOKEN` names one for a remote hub; the browser is opened on a private
//! (0600) redirect file, never with the token on a command line other users can read.

use crate::cli::{DashboardArgs, GlobalArgs};
use crate::exit::{CodedError, Exit};
use crate::links::control_token::{ForHub, for_client};

pub async fn run(global: &GlobalArgs, args: DashboardArgs) -> anyhow::Result<()> {
    let base = args.hub.trim_end_matches('/');
    let url = reqwest::Url::parse(base).map_err(|e| CodedError::new(Exit::Usage, format!("--hub {base:?} is not a URL: {e}")))?;
    let port = url.port_or_known_default().unwrap_or(8001);
    let host = url.host_str().unwrap_or_default().trim_start_matches('[').trim_end_matches(']');
    // The token file's token goes only to the loopback hub that wrote it (MCPDEV_HUB_TOKEN otherwise).
    let host = if host == "localhost" { "127.0.0.1" } else { host };
    let token = match for_client(host, port, url.scheme() == "https") {
        ForHub::Send(t) => t,
        // No token file: most often no hub at all, which is what to say then.
        // No token file for that port: most often no hub there, or a port that is not a hub's
        // host listener; ask it (no token is sent) before blaming the file.
        ForHub::Missing(why) => {
            crate::tls::install_crypto_provider();
            let probe = reqwest::Client::builder().timeout(std::time::Duration::from_secs(5)).build()?.get(format!("{base}/")).send().await;
            let err = match probe {
                Err(e) if crate::links::listeners::is_refused(&e) => crate::links::listeners::no_hub(base),
                Ok(resp) => {
                    let answered = resp.headers().get(crate::links::listeners::HEADER).and_then(|v| v.to_str().ok());
                    crate::links::listeners::wrong_listener(crate::links::listeners::Client::Cli, base, answered).unwrap_or_else(|| CodedError::new(Exit::Unreachable, why))
                }
                Err(_) => CodedError::new(Exit::Unreachable, why),
            };
            return Err(err.into());
        }
        ForHub::NotThisHub(why) => return Err(CodedError::new(Exit::Auth, why).into()),
    };
    crate::tls::install_crypto_provider();
    // A remote token goes only to the hub its file names, by that hub's CA.
    let builder = match crate::links::control_token::hub_pin().filter(|_| crate::links::control_token::is_remote(&token)) {
        Some(pin) => reqwest::Client::builder().tls_backend_preconfigured((*crate::tls::client::pinned_http_config(pin).map_err(|e| anyhow::anyhow!("{}", e.0))?).clone()),
        None => crate::tls::client::reqwest_builder(),
    };
    let client = builder.timeout(std::time::Duration::from_secs(10)).redirect(reqwest::redirect::Policy::none()).build()?;
    let resp = client
        .post(format!("{base}/dashboard/api/login-link"))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .map_err(|e| {
            if crate::links::listeners::is_refused(&e) {
                return crate::links::listeners::no_hub(base);
            }
            // A hub that does not prove who it is gets nothing, the token included (exit 3).
            if let Some(what) = crate::tls::client::explain(&e) {
                return CodedError::new(Exit::Auth, format!("the hub at {base} did not prove who it is: {what}; nothing was sent"));
            }
            CodedError::new(Exit::Unreachable, format!("cannot reach the hub at {base}: {e}")).with_help("--hub or MCPDEV_HUB names another hub")
        })?;
    let answered = resp.headers().get(crate::links::listeners::HEADER).and_then(|v| v.to_str().ok());
    if let Some(wrong) = crate::links::listeners::wrong_listener(crate::links::listeners::Client::Cli, base, answered) {
        return Err(wrong.into());
    }
    let status = resp.status();
    let body: serde_json::Value = resp.json().await.unwrap_or_default();
    let Some(link) = body["url"].as_str().filter(|_| status.is_success()) else {
        let why = body["error"].as_str().unwrap_or("no link in the answer");
        return Err(CodedError::new(Exit::Unreachable, format!("the hub at {base} gave no log-in link ({status}): {why}")).into());
    };
    if global.json {
        println!("{}", serde_json::json!({"url": link}));
    } else {
        println!("{link}");
    }
    if !args.no_open {
        match open_browser(link) {
            Ok(true) if !global.quiet && !global.json => eprintln!("opened in your browser (the link works once)"),
            Ok(_) => {}
            Err(e) => tracing::debug!("no browser opened: {e}"),
        }
    }
    Ok(())
}

/// Opens the link through a private redirect file (the token stays off every command line).
/// `Ok(false)`: no graphical session or no opener.
fn open_browser(link: &str) -> anyhow::Result<bool> {
    let graphical = cfg!(target_os = "macos") || std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some();
    let opener = if cfg!(target_os = "macos") { "open" } else { "xdg-open" };
    if !graphical {
        return Ok(false);
    }
    let page = crate::paths::runtime_dir().join(format!("dashboard-{}.html", std::process::id()));
    // The link is a URL we built (hex token): nothing in it needs escaping in an attribute.
    let html = format!("<!doctype html><meta charset=utf-8><meta http-equiv=refresh content=\"0;url={link}\"><title>mcpdev</title><a href=\"{link}\">open the dashboard</a>\n");
    crate::paths::write_private(&page, html.as_bytes())?;
    let status = std::process::Command::new(opener).arg(&page).stdin(std::process::Stdio::null()).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).status();
    Ok(status.is_ok_and(|s| s.success()))
}
