//! Connecting a virtual device from a chosen local address (`sim --source-addr`), so one machine
//! can simulate more devices than one address's ephemeral ports allow (about 28,000 towards one
//! hub address).
//!
//! Rules it enforces: an address must be this machine's own and of the URL's family, checked once
//! before any device starts (a clear usage error, not a device retrying for ever); `ws://` and
//! `wss://` URLs alike (the TLS handshake, verified as without a source address, runs over the
//! connection made here: [`crate::links::ws_client::over`]); the port is chosen at `connect`, not
//! at `bind` (`IP_BIND_ADDRESS_NO_PORT` on Linux), so the same local port serves several hubs.

use std::net::{IpAddr, SocketAddr};

use tokio::net::{TcpSocket, TcpStream};

/// Whether `ip` can be a source address towards `url`: a `ws://` or `wss://` URL, a local
/// address, and of the same family as the URL's host when that is an address. `Err` says what to
/// change.
pub fn check_source_addr(ip: IpAddr, url: &str) -> Result<(), String> {
    if !url.starts_with("ws://") && !url.starts_with("wss://") {
        return Err(format!("--source-addr needs a ws:// or wss:// URL, not {url}"));
    }
    let socket = std::net::UdpSocket::bind(SocketAddr::new(ip, 0))
        .map_err(|e| format!("--source-addr {ip} is not an address of this machine ({e}); every 127.x.y.z is loopback on Linux, other addresses must be on an interface"))?;
    drop(socket);
    if let Some(host) = host_of(url)
        && let Ok(hub) = host.parse::<IpAddr>()
        && hub.is_ipv4() != ip.is_ipv4()
    {
        return Err(format!("--source-addr {ip} cannot reach {hub}: not the same address family"));
    }
    Ok(())
}

/// The host part of a `ws://` or `wss://` URL (brackets of an IPv6 literal removed).
fn host_of(url: &str) -> Option<&str> {
    let rest = url.strip_prefix("ws://").or_else(|| url.strip_prefix("wss://"))?;
    let authority = rest.split(['/', '?']).next()?;
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next(),
        None => Some(host.rsplit_once(':').map_or(host, |(h, _)| h)),
    }
}

/// A TCP connection to `host:port` (the first resolved address of `from`'s family), from `from`.
pub async fn connect_from(from: IpAddr, host: &str, port: u16) -> std::io::Result<TcpStream> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let to = tokio::net::lookup_host((host, port))
        .await?
        .find(|a| a.is_ipv4() == from.is_ipv4())
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::AddrNotAvailable, format!("{host} has no address of {from}'s family")))?;
    let socket = if from.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let one: libc::c_int = 1;
        // SAFETY: setsockopt reads one c_int from a pointer valid for the call.
        unsafe {
            libc::setsockopt(socket.as_raw_fd(), libc::IPPROTO_IP, libc::IP_BIND_ADDRESS_NO_PORT, (&raw const one).cast(), std::mem::size_of::<libc::c_int>() as libc::socklen_t);
        }
    }
    socket.bind(SocketAddr::new(from, 0))?;
    let tcp = socket.connect(to).await?;
    tcp.set_nodelay(true)?;
    Ok(tcp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_address_must_be_local_a_websocket_url_and_of_the_hubs_family() {
        let lo2: IpAddr = "127.0.0.2".parse().unwrap();
        assert_eq!(check_source_addr(lo2, "ws://127.0.0.1:8000/xiaozhi/v1/"), Ok(()));
        assert_eq!(check_source_addr(lo2, "ws://localhost:8000/"), Ok(()));
        let err = check_source_addr("192.0.2.55".parse().unwrap(), "ws://127.0.0.1:8000/").unwrap_err();
        assert!(err.contains("not an address of this machine"), "{err}");
        assert_eq!(check_source_addr(lo2, "wss://hub.example/xiaozhi/v1/"), Ok(()));
        assert!(check_source_addr(lo2, "http://127.0.0.1:8000/").unwrap_err().contains("wss://"));
        assert!(check_source_addr(lo2, "ws://[::1]:8000/").unwrap_err().contains("family"));
        assert!(check_source_addr(lo2, "wss://[::1]:8000/").unwrap_err().contains("family"));
        assert_eq!(host_of("ws://user@[::1]:80/x"), Some("::1"));
    }
}
