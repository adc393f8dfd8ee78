//! Which of a hub's two listeners a client reached, and the error that names the mistake.
//!
//! Rules:
//! - Each listener answers a request meant for the other with [`HEADER`] set to its own name
//!   ([`DEVICES`] or [`HOST`]): the device listener on any path it does not serve (the control API,
//!   the dashboard, `/mcp`), the host listener on the device path. A client that gets such an
//!   answer says which port it reached and which one it wanted ([`wrong_listener`]), exit 2.
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
        _ => return None,
    };
    Some(CodedError::new(Exit::Usage, message).with_help(help))
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
    fn a_refused_connection_is_found_in_the_chain() {
        let io = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let ws = tokio_tungstenite::tungstenite::Error::Io(io);
        let chained = anyhow::Error::new(ws).context("connecting");
        assert!(is_refused(chained.as_ref()));
        assert!(!is_refused(&std::io::Error::from(std::io::ErrorKind::TimedOut)));
    }
}
