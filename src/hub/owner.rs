//! The host listener serves only the user who started the hub, the way local daemons do it.
//!
//! - The control API needs `Authorization: Bearer <control token>` ([`super::control_auth`]). The
//!   hub writes a random token to `control-<host port>.token` in [`crate::paths::runtime_dir`]
//!   (0600, removed at shutdown), with the address it bound; the CLI reads it from there and sends
//!   it only to that loopback address. It is accepted from loopback peers only; a person on
//!   another machine uses a remote token of their own ([`super::remote_tokens`], [`super::bearer`]).
//! - On Linux, a loopback connection's peer user is the `uid` of the peer's socket, asked of the
//!   kernel (sock_diag, else `/proc/net/tcp{,6}`); another user's connections are refused (403)
//!   on every host route, `/mcp` included. When the lookup fails (another network namespace), the
//!   token rules apply.

use std::net::SocketAddr;
use std::path::PathBuf;

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;

use crate::links::upgrade::plain;

use crate::links::control_token::{file_contents, token_of, token_path};

/// The control token a hub checks, and the file it is in (removed when this is dropped).
#[derive(Debug)]
pub struct ControlToken {
    pub token: String,
    pub path: PathBuf,
}

impl ControlToken {
    /// A fresh random token, written to [`token_path`] for `bound`'s port with `bound` beside it:
    /// the CLI sends the file's token only to the hub listening there
    /// ([`crate::links::control_token`]).
    pub fn create(bound: SocketAddr) -> anyhow::Result<Self> {
        let mut bytes = [0u8; 32];
        super::secret::fill_random(&mut bytes)?;
        let token = super::secret::hex(&bytes);
        let path = token_path(bound.port());
        crate::paths::write_private(&path, file_contents(&token, bound).as_bytes())
            .map_err(|e| anyhow::anyhow!("cannot write the control API's token to {}: {e} (set MCPDEV_RUNTIME_DIR to a private directory)", path.display()))?;
        Ok(Self { token, path })
    }

}

impl ControlToken {
    /// Removes the token file (at shutdown): only our own, a newer hub on the port may have replaced it.
    pub fn remove(&self) {
        if std::fs::read(&self.path).is_ok_and(|b| token_of(&b) == self.token) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Drop for ControlToken {
    fn drop(&mut self) {
        self.remove();
    }
}

/// The local user behind a host-listener connection, when the system tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerUser {
    /// The peer socket's owner.
    Uid(u32),
    /// Not on loopback, or the lookup failed: the token rules decide.
    Unknown,
}

impl PeerUser {
    /// Looks up the user owning the peer end of the connection `remote` -> `local`.
    pub fn of(local: SocketAddr, remote: SocketAddr) -> Self {
        if !remote.ip().to_canonical().is_loopback() {
            return Self::Unknown;
        }
        peer_uid(local, remote).map_or(Self::Unknown, Self::Uid)
    }
}

/// This process's effective user. mcpdev never changes its user, so it is read once: the
/// owner check asks for it on every request to the host listener.
pub fn my_uid() -> Option<u32> {
    #[cfg(unix)]
    {
        static UID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
        // SAFETY: geteuid has no preconditions and cannot fail.
        Some(*UID.get_or_init(|| unsafe { libc::geteuid() }))
    }
    #[cfg(not(unix))]
    None
}

/// The `uid` of the socket whose local address is `remote` and remote address is `local`
/// (the peer's end of our connection): asked of the kernel by its exact address pair (netlink
/// sock_diag, tens of microseconds), else found in `/proc/net/tcp{,6}` (milliseconds: the kernel
/// prints every socket).
pub fn peer_uid(local: SocketAddr, remote: SocketAddr) -> Option<u32> {
    #[cfg(target_os = "linux")]
    if let Some(uid) = sock_diag::uid_of(remote, local) {
        return Some(uid);
    }
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().find_map(|table| {
        let text = std::fs::read_to_string(table).ok()?;
        find_uid(&text, remote, local)
    })
}

/// One `SOCK_DIAG_BY_FAMILY` request for one TCP socket, by its exact addresses.
#[cfg(target_os = "linux")]
mod sock_diag {
    use std::net::{IpAddr, SocketAddr};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    const SOCK_DIAG_BY_FAMILY: u16 = 20;
    const NLMSG_ERROR: u16 = 2;

    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct SockId {
        sport: [u8; 2],
        dport: [u8; 2],
        src: [u8; 16],
        dst: [u8; 16],
        interface: u32,
        cookie: [u32; 2],
    }

    #[repr(C)]
    struct Request {
        header: libc::nlmsghdr,
        family: u8,
        protocol: u8,
        ext: u8,
        pad: u8,
        states: u32,
        id: SockId,
    }

    /// `inet_diag_msg`, up to the uid.
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Reply {
        family: u8,
        state: u8,
        timer: u8,
        retrans: u8,
        id: SockId,
        expires: u32,
        rqueue: u32,
        wqueue: u32,
        uid: u32,
        inode: u32,
    }

    fn octets(ip: IpAddr) -> [u8; 16] {
        let mut b = [0u8; 16];
        match ip {
            IpAddr::V4(v4) => b[..4].copy_from_slice(&v4.octets()),
            IpAddr::V6(v6) => b = v6.octets(),
        }
        b
    }

    /// The owner of the TCP socket bound to `src` and connected to `dst`.
    pub fn uid_of(src: SocketAddr, dst: SocketAddr) -> Option<u32> {
        let (src, dst) = (SocketAddr::new(src.ip().to_canonical(), src.port()), SocketAddr::new(dst.ip().to_canonical(), dst.port()));
        let family = if src.is_ipv4() && dst.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
        let id = SockId {
            sport: src.port().to_be_bytes(),
            dport: dst.port().to_be_bytes(),
            src: octets(src.ip()),
            dst: octets(dst.ip()),
            interface: 0,
            cookie: [u32::MAX; 2], // INET_DIAG_NOCOOKIE: match by addresses
        };
        let request = Request {
            header: libc::nlmsghdr {
                nlmsg_len: std::mem::size_of::<Request>() as u32,
                nlmsg_type: SOCK_DIAG_BY_FAMILY,
                nlmsg_flags: libc::NLM_F_REQUEST as u16,
                nlmsg_seq: 1,
                nlmsg_pid: 0,
            },
            family: family as u8,
            protocol: libc::IPPROTO_TCP as u8,
            ext: 0,
            pad: 0,
            states: u32::MAX,
            id,
        };
        // SAFETY: plain socket calls on a descriptor we own, with buffers of the sizes given.
        unsafe {
            let fd = libc::socket(libc::AF_NETLINK, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, libc::NETLINK_SOCK_DIAG);
            if fd < 0 {
                return None;
            }
            let fd = OwnedFd::from_raw_fd(fd);
            // A kernel that does not answer must not hold a connection: 200 ms at most.
            let tv = libc::timeval { tv_sec: 0, tv_usec: 200_000 };
            libc::setsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVTIMEO, (&tv as *const libc::timeval).cast(), std::mem::size_of::<libc::timeval>() as u32);
            let mut kernel: libc::sockaddr_nl = std::mem::zeroed();
            kernel.nl_family = libc::AF_NETLINK as u16;
            let sent = libc::sendto(
                fd.as_raw_fd(),
                (&request as *const Request).cast(),
                std::mem::size_of::<Request>(),
                0,
                (&kernel as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            );
            if sent < 0 {
                return None;
            }
            let mut buf = [0u8; 1024];
            let n = libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0);
            let header_len = std::mem::size_of::<libc::nlmsghdr>();
            if n < (header_len + std::mem::size_of::<Reply>()) as isize {
                return None;
            }
            let header: libc::nlmsghdr = std::ptr::read_unaligned(buf.as_ptr().cast());
            if header.nlmsg_type == NLMSG_ERROR || header.nlmsg_type != SOCK_DIAG_BY_FAMILY {
                return None;
            }
            let reply: Reply = std::ptr::read_unaligned(buf[header_len..].as_ptr().cast());
            (reply.id.sport == id.sport && reply.id.dport == id.dport).then_some(reply.uid)
        }
    }
}

/// In a `/proc/net/tcp*` table, the uid of the row with this local and remote address.
fn find_uid(table: &str, local: SocketAddr, remote: SocketAddr) -> Option<u32> {
    let same = |a: SocketAddr, b: SocketAddr| a.port() == b.port() && a.ip().to_canonical() == b.ip().to_canonical();
    table.lines().skip(1).find_map(|line| {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let (l, r, uid) = (parse_addr(cols.get(1)?)?, parse_addr(cols.get(2)?)?, cols.get(7)?);
        (same(l, local) && same(r, remote)).then(|| uid.parse().ok()).flatten()
    })
}

/// `0100007F:1F41` (IPv4) or 32 hex digits and a port (IPv6): 32-bit words in host byte order.
fn parse_addr(s: &str) -> Option<SocketAddr> {
    let (ip, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| ip.get(i * 8..i * 8 + 8).and_then(|w| u32::from_str_radix(w, 16).ok()).map(u32::to_ne_bytes);
    let ip: std::net::IpAddr = match ip.len() {
        8 => std::net::Ipv4Addr::from(word(0)?).into(),
        32 => {
            let mut b = [0u8; 16];
            for i in 0..4 {
                b[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            std::net::Ipv6Addr::from(b).into()
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// Every host route: another local user's connection gets 403 (logged).
pub fn refuse_other_user(req: &Request) -> Option<Response> {
    if let (Some(PeerUser::Uid(peer)), Some(me)) = (req.extensions().get::<PeerUser>().copied(), my_uid())
        && peer != me
    {
        tracing::warn!(uid = peer, path = %req.uri().path(), "refused a connection from another local user");
        return Some(plain(StatusCode::FORBIDDEN, &format!("this hub serves only the user who started it (uid {me}); you are uid {peer}")));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_net_tcp_rows_are_found_by_both_ends() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:1F41 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0\n\
   1: 0100007F:D431 0100007F:1F41 01 00000000:00000000 00:00000000 00000000 65534        0 2 1 0000000000000000 20 4 30 10 -1\n";
        let hub: SocketAddr = "127.0.0.1:8001".parse().unwrap();
        let client: SocketAddr = "127.0.0.1:54321".parse().unwrap();
        assert_eq!(find_uid(table, client, hub), Some(65534));
        assert_eq!(find_uid(table, hub, client), None);
        let v6 = "h\n   0: 0000000000000000FFFF00000100007F:D431 0000000000000000FFFF00000100007F:1F41 01 0:0 0:0 0 1000 0 3\n";
        assert_eq!(find_uid(v6, client, hub), Some(1000), "v4-mapped v6 rows match v4 addresses");
        assert_eq!(parse_addr("00000000000000000000000001000000:0050"), Some("[::1]:80".parse().unwrap()));
    }

    #[tokio::test]
    async fn a_live_loopback_connection_is_ours() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = tokio::net::TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, remote) = listener.accept().await.unwrap();
        assert_eq!(remote, client.local_addr().unwrap());
        if std::path::Path::new("/proc/net/tcp").exists() {
            assert_eq!(PeerUser::of(server.local_addr().unwrap(), remote), PeerUser::Uid(my_uid().unwrap()));
        } else {
            eprintln!("skipped: no /proc/net/tcp on this system");
        }
    }

    #[tokio::test]
    async fn sock_diag_and_proc_agree() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = tokio::net::TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, remote) = listener.accept().await.unwrap();
        let local = server.local_addr().unwrap();
        #[cfg(target_os = "linux")]
        assert_eq!(sock_diag::uid_of(remote, local), my_uid(), "sock_diag finds the client's socket");
        let proc = ["/proc/net/tcp", "/proc/net/tcp6"].iter().find_map(|t| find_uid(&std::fs::read_to_string(t).ok()?, remote, local));
        if std::path::Path::new("/proc/net/tcp").exists() {
            assert_eq!(proc, my_uid(), "the /proc fallback finds it too");
        }
        drop(client);
    }

    /// The cost per host connection, with `n` other connections open (README figure):
    /// `cargo test --lib hub::owner -- --ignored --nocapture`.
    #[tokio::test]
    #[ignore = "a measurement, not a check"]
    async fn measure_the_lookup_cost() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let local = listener.local_addr().unwrap();
        for n in [10usize, 1000] {
            let mut held = Vec::new();
            for _ in 0..n {
                let c = tokio::net::TcpStream::connect(local).await.unwrap();
                let (s, r) = listener.accept().await.unwrap();
                held.push((c, s, r));
            }
            let remote = held.last().unwrap().2;
            let rounds = 200;
            let start = std::time::Instant::now();
            for _ in 0..rounds {
                assert!(matches!(PeerUser::of(local, remote), PeerUser::Uid(_)));
            }
            println!("peer uid lookup with {n} open connections: {:?} each", start.elapsed() / rounds);
        }
    }
}
