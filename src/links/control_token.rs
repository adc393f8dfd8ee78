//! Where the control API's token lives, shared by the hub that writes it
//! ([`crate::hub::owner`]) and the CLI that reads it ([`super::hub_client`]), and to which hub
//! the CLI sends it.
//!
//! The file (`control-<port>.token`, 0600 in a 0700 directory) holds the token on its first line
//! and the address the hub's host listener bound on its second. Rules:
//! - `MCPDEV_HUB_TOKEN`, else the file `MCPDEV_HUB_TOKEN_FILE` names (0600: one others can read
//!   is refused), is sent to whatever hub `--hub` names: the person chose it. A token never comes
//!   from the command line (`ps` shows every user the arguments).
//! - A remote token (a person's, made by `mcpdev remote-token create` on the hub's machine; it
//!   starts with [`REMOTE_TOKEN_PREFIX`]) goes only over TLS: to an `https://` or `wss://` hub.
//!   The CLI stops before connecting to a plain one (the hub would refuse it too, after it had
//!   crossed the network in clear text).
//! - The file's token is sent only to the hub that wrote it: `--hub` must be a loopback IP
//!   literal that the recorded bound address covers (the same IP, or the unspecified address of
//!   the same family) on the same port. `localhost` is read as the loopback address the hub
//!   bound ([`pin_localhost`]): the CLI connects to that address, not to whatever `localhost`
//!   resolves to first.
//!   Anything else (another host, a name that may resolve anywhere, another loopback address
//!   than the one the hub bound) gets nothing: the CLI stops with exit 3 and says to set
//!   `MCPDEV_HUB_TOKEN` ([`ForHub::NotThisHub`]). A file without an address (left by an older
//!   hub that was killed) is as no file: nothing is sent ([`ForHub::Missing`]).
//! - A file left by a killed hub holds a token no hub accepts: when the hub refuses it, the CLI
//!   reads the file once more, and tries again if a new hub has written another token since.
//!
//! Adversaries:
//! - **Another host** (`--hub http://10.0.0.9:8001`, a typo, a hostile `MCPDEV_HUB` in a shared
//!   script): once the token was chosen by port alone and went there in clear text. Now a
//!   non-loopback hub never gets the file's token.
//! - **Another user on this machine** can bind a loopback address the hub did not (the hub on
//!   127.0.0.1:8001, the attacker on 127.0.0.2:8001 or [::1]:8001) and wait for a `--hub` that
//!   names it: the bound-address rule sends the token only to what the hub itself bound. That
//!   user cannot read the file (0600), nor use the token if they saw it: the hub refuses other
//!   users' connections by their socket's uid ([`crate::hub::owner`]). What the rule cannot stop:
//!   after the hub exits without removing its file (killed), another user may bind its very
//!   address and port and collect the stale token, which opens nothing, since a new hub writes a
//!   new one.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

/// The environment variable that gives the CLI the control token (it overrides the file).
pub const HUB_TOKEN_ENV: &str = "MCPDEV_HUB_TOKEN";
/// The environment variable that names a file holding the token (for a remote token, which a
/// person keeps in a 0600 file rather than in their shell's environment).
pub const HUB_TOKEN_FILE_ENV: &str = "MCPDEV_HUB_TOKEN_FILE";
/// How every remote token starts: the CLI and the hub tell one from the control token by it,
/// and a token on the command line is recognised and refused ([`in_arguments`]).
pub const REMOTE_TOKEN_PREFIX: &str = "mcpdev_rt_";

/// Whether `token` is a remote token.
pub fn is_remote(token: &str) -> bool {
    token.starts_with(REMOTE_TOKEN_PREFIX)
}

/// The first command-line argument that carries a remote token (in a URL, a header, anywhere).
pub fn in_arguments<'a>(args: impl IntoIterator<Item = &'a std::ffi::OsStr>) -> Option<usize> {
    args.into_iter().position(|a| a.to_string_lossy().contains(REMOTE_TOKEN_PREFIX))
}

/// Where a hub whose host listener is on `port` keeps its control token (0600).
pub fn token_path(port: u16) -> PathBuf {
    crate::paths::runtime_dir().join(format!("control-{port}.token"))
}

/// What the token file holds for a hub bound to `bound`.
pub fn file_contents(token: &str, bound: SocketAddr) -> String {
    format!("{token}\n{bound}\n")
}

/// The token a token file holds (its first line).
pub fn token_of(contents: &[u8]) -> String {
    String::from_utf8_lossy(contents).lines().next().unwrap_or_default().trim().to_string()
}

/// What the CLI sends to a hub.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForHub {
    /// This token (from `MCPDEV_HUB_TOKEN`, or the file of the hub at that address).
    Send(String),
    /// None to send: the hub's file is not there (yet: a hub that has just bound its port writes
    /// it a moment later), or cannot be read. Why, for the message if the hub refuses.
    Missing(String),
    /// The file's token is not for this hub: nothing is sent and the CLI stops. What to do.
    NotThisHub(String),
}

impl ForHub {
    /// The token to send, or why there is none.
    pub fn token(self) -> Result<String, String> {
        match self {
            Self::Send(token) => Ok(token),
            Self::Missing(why) | Self::NotThisHub(why) => Err(why),
        }
    }
}

/// The token the person gave: `MCPDEV_HUB_TOKEN`, else the file `MCPDEV_HUB_TOKEN_FILE` names.
/// `Err` says why the file cannot be used.
fn chosen() -> Result<Option<String>, String> {
    if let Some(t) = std::env::var(HUB_TOKEN_ENV).ok().map(|t| t.trim().to_string()).filter(|t| !t.is_empty()) {
        return Ok(Some(t));
    }
    let Some(file) = std::env::var_os(HUB_TOKEN_FILE_ENV).filter(|f| !f.is_empty()) else { return Ok(None) };
    let file = PathBuf::from(file);
    let bytes = crate::paths::read_private(&file).map_err(|e| format!("{HUB_TOKEN_FILE_ENV} names {}, which cannot be used: {e}", file.display()))?;
    let token = token_of(&bytes);
    if token.is_empty() {
        return Err(format!("{HUB_TOKEN_FILE_ENV} names {}, which holds no token on its first line", file.display()));
    }
    Ok(Some(token))
}

/// Why no control token could be read from `path`, cause first, in two short sentences: a
/// hub keeps its token in its own runtime directory, which this CLI does not share when either
/// was started with another `MCPDEV_RUNTIME_DIR`/`XDG_RUNTIME_DIR` (or by another user).
fn missing_file(path: &std::path::Path, e: &std::io::Error) -> String {
    let what = match e.kind() {
        std::io::ErrorKind::NotFound => "which does not exist".to_string(),
        _ => format!("which cannot be read ({e})"),
    };
    format!(
        "this CLI looks for the hub's control token in {}, {what}. Run it with the hub's MCPDEV_RUNTIME_DIR (or XDG_RUNTIME_DIR), or give the token in {HUB_TOKEN_FILE_ENV}",
        path.display()
    )
}

/// The control token to send to the hub at `host:port` (`host` as the URL spells it; IPv6 in
/// brackets or not), reached over TLS or not.
pub fn for_client(host: &str, port: u16, tls: bool) -> ForHub {
    match chosen() {
        Ok(Some(t)) if is_remote(&t) && !tls => {
            return ForHub::NotThisHub(format!(
                "the token given is a remote token, which goes only over TLS, and the hub is reached over plain http here: use --hub https://{host}:{port} (the hub serves it with --host-tls); nothing was sent"
            ));
        }
        Ok(Some(t)) => return ForHub::Send(t),
        Ok(None) => {}
        Err(why) => return ForHub::NotThisHub(why),
    }
    let path = token_path(port);
    let not_this = |why: String| {
        ForHub::NotThisHub(format!(
            "{why}, so the control token in {} is not sent there; for a hub on another machine, create a remote token on its machine (`mcpdev remote-token create NAME`) and give it here in {HUB_TOKEN_FILE_ENV} (a 0600 file) or {HUB_TOKEN_ENV}",
            path.display()
        ))
    };
    let Some(ips) = loopback_ips(host) else {
        return not_this(format!("{host} is not a loopback address of this machine"));
    };
    let contents = match crate::paths::read_private(&path) {
        Ok(bytes) => bytes,
        Err(e) => return ForHub::Missing(missing_file(&path, &e)),
    };
    let bound = String::from_utf8_lossy(&contents).lines().nth(1).and_then(|l| l.trim().parse::<SocketAddr>().ok());
    match bound {
        Some(bound) if ips.iter().all(|ip| covers(bound, *ip, port)) => ForHub::Send(token_of(&contents)),
        Some(bound) => not_this(format!("the hub that wrote its token for port {port} listens on {bound}, not on {host}")),
        // Every hub of this mcpdev writes its address, so such a file is a killed older hub's,
        // left behind: nothing is sent, as if there were no file (a hub that is starting there
        // is waited for, and one that answers says it wants a token).
        None => ForHub::Missing(format!("{} does not say which address its hub listens on (left by an older, killed hub?); set {HUB_TOKEN_ENV}, or restart that hub", path.display())),
    }
}

/// `host` as an IP, when it is a loopback literal. `None` for any name (it may resolve anywhere)
/// or other address.
fn loopback_ips(host: &str) -> Option<Vec<IpAddr>> {
    let ip = host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>().ok()?.to_canonical();
    ip.is_loopback().then(|| vec![ip])
}

/// For `--hub http://localhost:PORT`: the loopback address the hub that wrote the token file for
/// `port` bound (127.0.0.1 or [::1] for a hub on all addresses), to connect to instead of the
/// name. `None` when `host` is not `localhost` or no file says.
pub fn pin_localhost(host: &str, port: u16) -> Option<String> {
    if !host.eq_ignore_ascii_case("localhost") {
        return None;
    }
    let contents = crate::paths::read_private(&token_path(port)).ok()?;
    let bound = String::from_utf8_lossy(&contents).lines().nth(1)?.trim().parse::<SocketAddr>().ok()?;
    Some(match bound.ip().to_canonical() {
        IpAddr::V4(ip) if ip.is_unspecified() => "127.0.0.1".to_string(),
        IpAddr::V6(ip) if ip.is_unspecified() => "[::1]".to_string(),
        IpAddr::V4(ip) if ip.is_loopback() => ip.to_string(),
        IpAddr::V6(ip) if ip.is_loopback() => format!("[{ip}]"),
        _ => return None,
    })
}

/// Whether a hub bound to `bound` is what a connection to `ip:port` reaches.
fn covers(bound: SocketAddr, ip: IpAddr, port: u16) -> bool {
    let bound_ip = bound.ip().to_canonical();
    bound.port() == port && (bound_ip == ip || (bound_ip.is_unspecified() && bound_ip.is_ipv4() == ip.is_ipv4()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_literals_and_localhost_count() {
        assert_eq!(loopback_ips("127.0.0.1"), Some(vec!["127.0.0.1".parse().unwrap()]));
        assert_eq!(loopback_ips("[::1]"), Some(vec!["::1".parse().unwrap()]));
        assert_eq!(loopback_ips("::ffff:127.0.0.1"), Some(vec!["127.0.0.1".parse().unwrap()]));
        for remote in ["10.0.0.9", "192.168.1.20", "hub.example", "0.0.0.0", "[::]", "localhost", "localhost.evil.example"] {
            assert_eq!(loopback_ips(remote), None, "{remote}");
        }
    }

    #[test]
    fn the_bound_address_decides() {
        let at = |s: &str| s.parse::<SocketAddr>().unwrap();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(covers(at("127.0.0.1:8001"), ip("127.0.0.1"), 8001));
        assert!(!covers(at("127.0.0.1:8001"), ip("127.0.0.2"), 8001), "another loopback address may be another user's");
        assert!(!covers(at("127.0.0.1:8001"), ip("::1"), 8001));
        assert!(!covers(at("127.0.0.1:8001"), ip("127.0.0.1"), 8002));
        assert!(covers(at("0.0.0.0:8001"), ip("127.0.0.2"), 8001));
        assert!(!covers(at("0.0.0.0:8001"), ip("::1"), 8001), "[::1] is free for anyone to bind");
        assert!(covers(at("[::]:8001"), ip("::1"), 8001));
        assert_eq!(token_of(file_contents("abc", at("127.0.0.1:1")).as_bytes()), "abc");
    }
}
