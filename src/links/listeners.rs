//! Which of a hub's two listeners a client reached, and the error that names the mistake.
//!
//! Rules:
//! - Each listener answers a request meant for the other with [`HEADER`] set to its own name
//!   ([`DEVICES`] or [`HOST`]): the device listener on any path it does not serve (the control API,
//!   the dashboard, `/mcp`), the host listener on the device path. A client that gets such an
//!   answer says which port it reached and which one it wanted ([`wrong_listener`]), exit 2.
//! - A listener with TLS answers a plain-text request (`ws://`, `http://`) in plain HTTP, with
//!   [`HEADER`] set to [`TLS`] (`tls::server::answer_plain_http`); a client that gets that answer,
//!   or bytes that are not HTTP at all from a `ws://`/`http://` URL (another server's TLS alert),
//!   says "this port speaks TLS: use wss://…" and stops ([`plain_at_tls`]), exit 2.
//! - A refused TCP connection is "no hub is listening at …" ([`no_hub`]), exit 4, whatever the
//!   command; anything else that keeps the client from the hub keeps its own words.

use crate::exit::{CodedError, Exit};

/// The header a listener names itself in, on an answer to a request meant for the other one.
pub const HEADER: &str = "mcpdev-listener";
/// The device listener (`serve --device-addr`, 0.0.0.0:8000 by default).
pub const DEVICES: &str = "devices";
/// The host listener (`serve --host-addr`, 127.0.0.1:8001 by default).
pub const HOST: &str = "host";

/// What the device listener says to a request for a path only the host listener serves.
pub const DEVICES_SAYS: &str = "this is an mcpdev hub's device listener (serve --device-addr): devices connect here at /xiaozhi/v1/. \
The CLI, the dashboard and MCP hosts use its host listener (serve --host-addr, http://127.0.0.1:8001 by default)\n";
/// What the host listener says to a device.
pub const HOST_SAYS: &str = "this is an mcpdev hub's host listener (serve --host-addr), for the CLI, the dashboard and MCP hosts. \
Devices connect to its device listener (serve --device-addr, ws://<this machine>:8000/xiaozhi/v1/ by default)\n";

/// A listener with TLS, answering a plain-text request.
pub const TLS: &str = "tls";
/// What a listener with TLS says to a plain-text request.
pub const TLS_SAYS: &str = "this port speaks TLS: use wss:// (devices) or https:// (the CLI, the dashboard, MCP hosts), with the same host and port\n";

/// Who is speaking: a client of the host listener (the CLI, `--hub`) or a device (`sim --url`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    Cli,
    Device,
}

/// The error for a client that reached the wrong listener at `url`: `answered` is the value of
/// [`HEADER`] in the answer. `None` when it is the listener this client wants (or no hub's).
pub fn wrong_listener(client: Client, url: &str, answered: Option<&str>) -> Option<CodedError> {
    let (message, help) = match (client, answered?) {
        (Client::Cli, DEVICES) => (
            format!("{url} is the hub's device listener, where devices connect; the CLI talks to its host listener"),
            "use the port of `serve --host-addr` (127.0.0.1:8001 by default): --hub http://127.0.0.1:8001, or set MCPDEV_HUB",
        ),
        (Client::Device, HOST) => (
            format!("{url} is the hub's host listener, for the CLI, the dashboard and MCP hosts; devices connect to its device listener"),
            "use the port of `serve --device-addr` (8000 by default): --url ws://127.0.0.1:8000/xiaozhi/v1/, or set MCPDEV_SIM_URL",
        ),
        (_, TLS) => return Some(plain_at_tls(url)),
        _ => return None,
    };
    Some(CodedError::new(Exit::Usage, message).with_help(help))
}

/// The error for a plain-text `url` (`ws://`, `http://`) whose port speaks TLS: the same URL with
/// the TLS scheme is what to use.
pub fn plain_at_tls(url: &str) -> CodedError {
    let secure = ["ws://", "http://"].iter().find_map(|plain| url.strip_prefix(plain).map(|rest| format!("{}s://{rest}", &plain[..plain.len() - 3])));
    let help = secure.map_or_else(|| "use wss:// or https:// with the same host and port".to_string(), |s| format!("use {s}"));
    CodedError::new(Exit::Usage, format!("{url}: this port speaks TLS, not plain text")).with_help(help)
}

/// Whether `e` (any error chain) is a server answering a plain-text HTTP request with bytes that
/// are not HTTP (a TLS server's alert: "httparse error: invalid HTTP version").
pub fn is_not_http(e: &(dyn std::error::Error + 'static)) -> bool {
    use tokio_tungstenite::tungstenite::error::{Error as WsError, ProtocolError};
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(WsError::Protocol(ProtocolError::HttparseError(_))) = err.downcast_ref::<WsError>() {
            return true;
        }
        cur = err.source();
    }
    false
}

/// Whether `e` (any error chain) is a TCP connection the other side refused: nobody listens there.
pub fn is_refused(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        if let Some(tokio_tungstenite::tungstenite::Error::Io(io)) = err.downcast_ref::<tokio_tungstenite::tungstenite::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        cur = err.source();
    }
    false
}

/// "No hub is listening at …": the same words and exit code from every command.
pub fn no_hub(hub: &str) -> CodedError {
    CodedError::new(Exit::Unreachable, format!("no hub is listening at {hub}"))
        .with_help("start one with `mcpdev serve`; --hub or MCPDEV_HUB names another hub, --wait waits for one that is starting")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_client_is_told_which_listener_it_reached() {
        let cli = wrong_listener(Client::Cli, "http://127.0.0.1:8000", Some(DEVICES)).unwrap();
        assert_eq!(cli.exit, Exit::Usage);
        assert!(cli.message.contains("device listener") && cli.help.unwrap().contains("--hub http://127.0.0.1:8001"));
        let dev = wrong_listener(Client::Device, "ws://127.0.0.1:8001/xiaozhi/v1/", Some(HOST)).unwrap();
        assert!(dev.message.contains("host listener") && dev.help.unwrap().contains("8000"));
        assert!(wrong_listener(Client::Cli, "x", Some(HOST)).is_none(), "the right listener is no mistake");
        assert!(wrong_listener(Client::Device, "x", None).is_none(), "not a hub: no guess");
    }

    #[test]
    fn a_plain_client_at_a_tls_port_is_told_the_tls_url() {
        for (client, url, secure) in [
            (Client::Device, "ws://127.0.0.1:8000/xiaozhi/v1/", "use wss://127.0.0.1:8000/xiaozhi/v1/"),
            (Client::Cli, "http://hub.lan:8001", "use https://hub.lan:8001"),
        ] {
            let e = wrong_listener(client, url, Some(TLS)).unwrap();
            assert_eq!(e.exit, Exit::Usage);
            assert!(e.message.contains("this port speaks TLS"), "{}", e.message);
            assert_eq!(e.help.as_deref(), Some(secure));
        }
        assert!(!is_not_http(&std::io::Error::from(std::io::ErrorKind::ConnectionRefused)));
    }

    #[tokio::test]
    async fn a_tls_alert_in_answer_to_a_websocket_request_is_not_http() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let server = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = server.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut tcp, _) = server.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let _ = tcp.read(&mut buf).await;
            // What a TLS server sends a client whose first bytes are not a ClientHello: an alert.
            let _ = tcp.write_all(&[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x32]).await;
        });
        let e = tokio_tungstenite::connect_async(format!("ws://{addr}/xiaozhi/v1/")).await.unwrap_err();
        assert!(is_not_http(anyhow::Error::new(e).context("connecting").as_ref()), "found under a context");
    }

    #[test]
    fn a_refused_connection_is_found_in_the_chain() {
        let io = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let ws = tokio_tungstenite::tungstenite::Error::Io(io);
        let chained = anyhow::Error::new(ws).context("connecting");
        assert!(is_refused(chained.as_ref()));
        assert!(!is_refused(&std::io::Error::from(std::io::ErrorKind::TimedOut)));
    }
}
