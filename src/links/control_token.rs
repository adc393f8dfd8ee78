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
//! - **A remote token goes only to the hub it was made for, checked by that hub's identity**,
//!   not by a URL: the token file `remote-token create` writes names the hub's CA on its second
//!   line ([`PIN_LINE`]), and the connection that carries the token must chain to it
//!   ([`hub_pin`]); without that line, the person must have named the hub's CA themselves
//!   (`MCPDEV_CA_FILE`, `MCPDEV_CA_FINGERPRINT`). The system's roots alone never carry it: any
//!   public certificate would do.
//! - **A `mcpdev.toml` in the working directory (a cloned repository's) never redirects a
//!   remote token**: when the hub's URL comes from it, nothing is sent, and the refusal names the
//!   file and how to confirm the hub (`--hub`, `MCPDEV_HUB`) ([`set_hub_from_working_directory`]).
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
/// The line of a token file (after the token) that names the hub's CA by its SHA-256:
/// `hub-ca-sha256 AB:CD:…`.
pub const PIN_LINE: &str = "hub-ca-sha256";

/// The file that named the hub in the working directory, when the hub's URL came from it.
static HUB_FROM_WORKING_DIRECTORY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Notes that the hub's URL came from `file`, a `mcpdev.toml` in the working directory (set once,
/// at start): no remote token is sent to it.
pub fn set_hub_from_working_directory(file: PathBuf) {
    let _ = HUB_FROM_WORKING_DIRECTORY.set(file);
}

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

/// What a token file (or `MCPDEV_HUB_TOKEN`) holds: the token, and the hub's CA if named.
struct Chosen {
    token: String,
    pin: Option<[u8; 32]>,
}

/// The pin a token file's later lines name ([`PIN_LINE`]), if any.
fn pin_of(contents: &str) -> Option<[u8; 32]> {
    contents.lines().skip(1).find_map(|l| l.trim().strip_prefix(PIN_LINE)).and_then(|f| crate::tls::parse_fingerprint(f.trim()))
}

/// The token the person gave: `MCPDEV_HUB_TOKEN`, else the file `MCPDEV_HUB_TOKEN_FILE` names.
/// `Err` says why the file cannot be used.
fn chosen() -> Result<Option<Chosen>, String> {
    if let Some(t) = std::env::var(HUB_TOKEN_ENV).ok().filter(|t| !t.trim().is_empty()) {
        return Ok(Some(Chosen { token: token_of(t.as_bytes()), pin: pin_of(&t) }));
    }
    let Some(file) = std::env::var_os(HUB_TOKEN_FILE_ENV).filter(|f| !f.is_empty()) else { return Ok(None) };
    let file = PathBuf::from(file);
    let bytes = crate::paths::read_private(&file).map_err(|e| format!("{HUB_TOKEN_FILE_ENV} names {}, which cannot be used: {e}", file.display()))?;
    let token = token_of(&bytes);
    if token.is_empty() {
        return Err(format!("{HUB_TOKEN_FILE_ENV} names {}, which holds no token on its first line", file.display()));
    }
    Ok(Some(Chosen { token, pin: pin_of(&String::from_utf8_lossy(&bytes)) }))
}

/// The hub CA the chosen remote token names, when it names one: a connection that carries the
/// token must chain to it ([`crate::tls::client::pinned_http_config`]).
pub fn hub_pin() -> Option<[u8; 32]> {
    chosen().ok().flatten().filter(|c| is_remote(&c.token)).and_then(|c| c.pin)
}

/// The chosen remote token, for an `https://` MCP endpoint (`--url`) the person named, when the
/// hub it goes to is checked by its identity: with the pin its file names (the connection must
/// chain to it), or with the CA the person gave (`MCPDEV_CA_FILE`, `MCPDEV_CA_FINGERPRINT`,
/// which the process's trust then is). `None`: nothing is sent.
pub fn remote_for_url() -> Option<(String, Option<[u8; 32]>)> {
    let chosen = chosen().ok().flatten().filter(|c| is_remote(&c.token))?;
    let trust = crate::tls::client::trust();
    (chosen.pin.is_some() || !trust.ca_files.is_empty() || trust.pin.is_some()).then_some((chosen.token, chosen.pin))
}

/// Why the chosen remote token may not go to `host:port` over TLS, if it may not (see the
/// module's rules).
fn remote_refusal(chosen: &Chosen, host: &str, port: u16) -> Option<String> {
    if let Some(file) = HUB_FROM_WORKING_DIRECTORY.get() {
        return Some(format!(
            "the hub {host}:{port} is named by {}, a mcpdev.toml in the working directory, which does not decide where your remote token goes: \
             if that is your hub, name it yourself (--hub https://{host}:{port}, or MCPDEV_HUB); nothing was sent",
            file.display()
        ));
    }
    let trust = crate::tls::client::trust();
    if chosen.pin.is_none() && trust.ca_files.is_empty() && trust.pin.is_none() {
        return Some(format!(
            "a remote token goes only to the hub it was made for, checked by that hub's certificate, and nothing names it here: \
             give the hub's CA (MCPDEV_CA_FILE=ca.pem, or MCPDEV_CA_FINGERPRINT), or use the file `mcpdev remote-token create` wrote \
             (its line `{PIN_LINE} …` names the hub's CA); nothing was sent to {host}:{port}"
        ));
    }
    None
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
        Ok(Some(c)) if is_remote(&c.token) && !tls => {
            return ForHub::NotThisHub(format!(
                "the token given is a remote token, which goes only over TLS, and the hub is reached over plain http here: use --hub https://{host}:{port} (the hub serves it with --host-tls); nothing was sent"
            ));
        }
        Ok(Some(c)) if is_remote(&c.token) => {
            return match remote_refusal(&c, host, port) {
                Some(why) => ForHub::NotThisHub(why),
                None => ForHub::Send(c.token),
            };
        }
        Ok(Some(c)) => return ForHub::Send(c.token),
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
    fn a_token_file_names_its_hubs_ca_on_a_later_line() {
        let fp = "AB:".repeat(31) + "AB";
        let file = format!("mcpdev_rt_{}\n{PIN_LINE} {fp}\n", "0".repeat(64));
        assert_eq!(token_of(file.as_bytes()), format!("mcpdev_rt_{}", "0".repeat(64)), "the token is the first line alone");
        assert_eq!(pin_of(&file), Some([0xAB; 32]));
        assert_eq!(pin_of(&format!("{PIN_LINE} {fp}")), None, "the first line is the token, never a pin");
        assert_eq!(pin_of(&format!("t\n{PIN_LINE} nonsense")), None);
        assert_eq!(pin_of("t\n"), None);
    }

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
