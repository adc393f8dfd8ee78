//! Remote tokens: the control API's credentials for people on other machines.
//!
//! The control token ([`super::owner::ControlToken`]) is for the user who started the hub, on
//! this machine: a new one each run, in a file only that user reads. A person on another machine
//! (a remote CLI, `mcpdev dashboard --hub https://…`) gets a token of their own, named, that a
//! person on the hub's machine creates with `mcpdev remote-token create NAME`.
//!
//! Rules it enforces:
//! - A token is [`crate::links::control_token::REMOTE_TOKEN_PREFIX`] and 32 random bytes in hex.
//!   It is shown once, at creation; the state directory keeps only its SHA-256
//!   ([`FILE`], 0600 in the 0700 state directory; a file others can read is refused, and then no
//!   remote token is accepted). A list shows names, ids (the start of the hash) and creation
//!   times, never a secret.
//! - Names are 1 to 32 letters, digits, `.`, `-`, `_` (they are logged and shown); one token per
//!   name; at most [`MAX_TOKENS`].
//! - A revocation holds at once: the hub reads the file again whenever it changed before it
//!   checks a token (and each second, by the hub's watch of the file), and cancels the
//!   [`Lease`] of a token no longer in it, which ends everything the token opened
//!   ([`super::lease`]).
//! - Where a remote token is accepted (TLS, a host listener other machines reach) is decided by
//!   [`super::bearer`], not here.
//! - Two `remote-token` commands at once do not lose each other's change: each holds a lock
//!   (`flock` on `remote-tokens.lock`) across its read and write.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::lease::Lease;
use crate::links::control_token::REMOTE_TOKEN_PREFIX;

/// The file in the state directory that keeps the tokens' hashes.
pub const FILE: &str = "remote-tokens.json";
/// Most tokens a hub keeps.
pub const MAX_TOKENS: usize = 256;
/// Longest name.
pub const MAX_NAME: usize = 32;

/// One token as the file keeps it: never the secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub name: String,
    /// SHA-256 of the token, lower-case hex.
    pub sha256: String,
    /// When it was created (RFC 3339).
    pub created: String,
}

impl Entry {
    /// A short id for logs and lists: the first 12 hex digits of the hash (they tell nothing of
    /// the token).
    pub fn id(&self) -> &str {
        self.sha256.get(..12).unwrap_or(&self.sha256)
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Contents {
    version: u32,
    tokens: Vec<Entry>,
}

/// Why the store could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{0:?} is not a token name: 1 to {MAX_NAME} letters, digits, '.', '-' and '_', starting with a letter or digit")]
    BadName(String),
    #[error("a remote token named {0:?} exists already: revoke it first (`mcpdev remote-token revoke {0}`), or choose another name")]
    Exists(String),
    #[error("this hub keeps at most {MAX_TOKENS} remote tokens: revoke some first")]
    Full,
    #[error("{path}: {error}", path = .0.display(), error = .1)]
    Io(PathBuf, std::io::Error),
    #[error("{path} is not a remote-token file this mcpdev reads ({why}); move it away to start afresh", path = .0.display(), why = .1)]
    Unreadable(PathBuf, String),
}

/// Where the hub of this state directory keeps its remote tokens.
pub fn default_path() -> PathBuf {
    crate::paths::state_dir().join(FILE)
}

/// Whether `name` may name a token.
pub fn valid_name(name: &str) -> bool {
    (1..=MAX_NAME).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_')) && name.as_bytes()[0].is_ascii_alphanumeric()
}

fn sha256(token: &str) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// The tokens in `path` (none when there is no file).
pub fn list(path: &Path) -> Result<Vec<Entry>, StoreError> {
    match crate::paths::read_private(path) {
        Ok(bytes) => {
            let c: Contents = serde_json::from_slice(&bytes).map_err(|e| StoreError::Unreadable(path.to_path_buf(), e.to_string()))?;
            Ok(c.tokens)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(StoreError::Io(path.to_path_buf(), e)),
    }
}

fn save(path: &Path, tokens: Vec<Entry>) -> Result<(), StoreError> {
    let text = serde_json::to_string_pretty(&Contents { version: 1, tokens }).expect("plain data serializes");
    crate::paths::write_private(path, format!("{text}\n").as_bytes()).map_err(|e| StoreError::Io(path.to_path_buf(), e))
}

/// Runs `f` on the tokens in `path` while holding the store's lock, and writes what it returns.
fn change<T>(path: &Path, f: impl FnOnce(&mut Vec<Entry>) -> Result<T, StoreError>) -> Result<T, StoreError> {
    let lock_path = path.with_extension("lock");
    crate::paths::ensure_private_dir(lock_path.parent().unwrap_or(Path::new("."))).map_err(|e| StoreError::Io(lock_path.clone(), e))?;
    let lock = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&lock_path).map_err(|e| StoreError::Io(lock_path.clone(), e))?;
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a descriptor we own; released when `lock` is closed.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(StoreError::Io(lock_path, std::io::Error::last_os_error()));
        }
    }
    let mut tokens = list(path)?;
    let out = f(&mut tokens)?;
    save(path, tokens)?;
    drop(lock);
    Ok(out)
}

/// Makes a token named `name`: the token (shown once, kept nowhere) and its entry.
pub fn create(path: &Path, name: &str) -> Result<(String, Entry), StoreError> {
    if !valid_name(name) {
        return Err(StoreError::BadName(name.to_string()));
    }
    let mut bytes = [0u8; 32];
    super::secret::fill_random(&mut bytes).map_err(|e| StoreError::Io(path.to_path_buf(), std::io::Error::other(e.to_string())))?;
    let token = format!("{REMOTE_TOKEN_PREFIX}{}", super::secret::hex(&bytes));
    let entry = Entry { name: name.to_string(), sha256: crate::paths::hex(&sha256(&token)), created: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string() };
    change(path, |tokens| {
        if tokens.iter().any(|e| e.name == name) {
            return Err(StoreError::Exists(name.to_string()));
        }
        if tokens.len() >= MAX_TOKENS {
            return Err(StoreError::Full);
        }
        tokens.push(entry.clone());
        Ok(())
    })?;
    Ok((token, entry))
}

/// Removes the token named `name`; its entry, or `None` when there was none.
pub fn revoke(path: &Path, name: &str) -> Result<Option<Entry>, StoreError> {
    change(path, |tokens| {
        let at = tokens.iter().position(|e| e.name == name);
        Ok(at.map(|i| tokens.remove(i)))
    })
}

/// Who a remote token belongs to, as the hub checked it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub name: String,
    /// The short id of the token ([`Entry::id`]).
    pub id: String,
    hash: [u8; 32],
}

/// What identifies the file's version on disk: a change of any of these means read it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    modified: Option<std::time::SystemTime>,
    len: u64,
    inode: u64,
}

fn stamp(path: &Path) -> Option<Stamp> {
    let meta = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&meta);
    #[cfg(not(unix))]
    let inode = 0;
    Some(Stamp { modified: meta.modified().ok(), len: meta.len(), inode })
}

#[derive(Default)]
struct Loaded {
    stamp: Option<Stamp>,
    tokens: Vec<(Entry, [u8; 32])>,
    /// The lease of each token something was opened with; cancelled when the token goes.
    leases: std::collections::HashMap<[u8; 32], Lease>,
}

/// The hub's view of the remote tokens: read again whenever the file changed.
pub struct RemoteTokens {
    path: PathBuf,
    loaded: Mutex<Loaded>,
    changes: tokio::sync::watch::Sender<u64>,
}

impl RemoteTokens {
    pub fn new(path: PathBuf) -> Self {
        let this = Self { path, loaded: Mutex::default(), changes: tokio::sync::watch::Sender::new(0) };
        this.refresh();
        this
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Loaded> {
        // Nothing under this lock can panic; a poisoned one is still consistent.
        self.loaded.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Reads the file again if it changed since it was last read; tells the watchers when it did.
    pub fn refresh(&self) {
        let now = stamp(&self.path);
        if self.lock().stamp == now && now.is_some() {
            return;
        }
        // Read outside the lock; an unreadable file accepts no token (and says why, once per change).
        let tokens = match list(&self.path) {
            Ok(entries) => entries
                .into_iter()
                .filter_map(|e| {
                    let raw = crate::paths::unhex(&e.sha256).filter(|r| r.len() == 32)?;
                    let mut hash = [0u8; 32];
                    hash.copy_from_slice(&raw);
                    Some((e, hash))
                })
                .collect(),
            Err(e) => {
                tracing::warn!("no remote token is accepted: {e}");
                Vec::new()
            }
        };
        let changed = {
            let mut l = self.lock();
            let before: Vec<[u8; 32]> = l.tokens.iter().map(|(_, h)| *h).collect();
            let changed = before != tokens.iter().map(|(_, h)| *h).collect::<Vec<_>>();
            // A token no longer in the file ends everything it opened, now.
            l.leases.retain(|hash, lease| {
                let kept = tokens.iter().any(|(_, h)| h == hash);
                if !kept {
                    lease.0.cancel();
                }
                kept
            });
            l.stamp = now;
            l.tokens = tokens;
            changed
        };
        if changed {
            self.changes.send_modify(|n| *n += 1);
        }
    }

    /// The holder of `presented`, if it is one of this hub's remote tokens now.
    pub fn verify(&self, presented: &str) -> Option<Holder> {
        if !presented.starts_with(REMOTE_TOKEN_PREFIX) {
            return None;
        }
        self.refresh();
        let hash = sha256(presented);
        let l = self.lock();
        // Every entry is compared, in constant time: the time taken says nothing of which matched.
        let mut found = None;
        for (entry, h) in &l.tokens {
            if super::secret::constant_time_eq(h, &hash) {
                found = Some(Holder { name: entry.name.clone(), id: entry.id().to_string(), hash });
            }
        }
        found
    }

    /// Whether `holder`'s token is still one of this hub's (not revoked).
    pub fn holds(&self, holder: &Holder) -> bool {
        self.refresh();
        self.lock().tokens.iter().any(|(_, h)| *h == holder.hash)
    }

    /// The lease of what `holder`'s token opens: cancelled when the token is revoked (an ended
    /// lease if it is revoked already).
    pub fn lease(&self, holder: &Holder) -> Lease {
        let mut l = self.lock();
        if !l.tokens.iter().any(|(_, h)| *h == holder.hash) {
            return Lease::ended();
        }
        l.leases.entry(holder.hash).or_default().child()
    }

    /// Ticks whenever the set of tokens changed (a revocation): open connections check
    /// [`Self::holds`] then.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_kept_hashed_named_and_revocable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state").join(FILE);
        let hub = RemoteTokens::new(path.clone());
        let (alice, entry) = create(&path, "alice").unwrap();
        assert!(alice.starts_with(REMOTE_TOKEN_PREFIX) && alice.len() == REMOTE_TOKEN_PREFIX.len() + 64, "{alice}");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains(&alice[REMOTE_TOKEN_PREFIX.len()..]), "the file keeps no secret: {text}");
        assert!(text.contains(&entry.sha256));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        }
        assert!(matches!(create(&path, "alice"), Err(StoreError::Exists(_))));
        for bad in ["", "-x", "a b", "a\u{1b}[2J", &"x".repeat(33), "ä"] {
            assert!(matches!(create(&path, bad), Err(StoreError::BadName(_))), "{bad:?}");
        }
        let (bob, _) = create(&path, "bob").unwrap();
        let holder = hub.verify(&alice).expect("a fresh token is accepted at once");
        assert_eq!((holder.name.as_str(), holder.id.as_str()), ("alice", entry.id()));
        assert_eq!(hub.verify(&format!("{alice}0")), None);
        // One hex digit changed (the last, always: a token with no `a` in it would be unchanged
        // by replacing `a`s, which made this test fail one run in 60).
        let last = if alice.ends_with('0') { '1' } else { '0' };
        assert_eq!(hub.verify(&format!("{}{last}", &alice[..alice.len() - 1])), None);
        assert_eq!(hub.verify(&alice[REMOTE_TOKEN_PREFIX.len()..]), None, "the prefix is part of the token");
        let mut changes = hub.changes();
        changes.mark_unchanged();
        let (opened, bobs) = (hub.lease(&holder), hub.lease(&hub.verify(&bob).unwrap()));
        assert!(!opened.is_ended());
        assert_eq!(revoke(&path, "alice").unwrap().map(|e| e.name), Some("alice".into()));
        assert_eq!(revoke(&path, "alice").unwrap(), None);
        assert!(!hub.holds(&holder), "a revocation holds at once");
        assert!(changes.has_changed().unwrap(), "open connections are told");
        assert!(opened.is_ended(), "what the token opened ends with it");
        assert!(!bobs.is_ended(), "another person's does not");
        assert!(hub.lease(&holder).is_ended(), "a lease asked for after the revocation has ended already");
        assert_eq!(hub.verify(&alice), None);
        assert_eq!(hub.verify(&bob).map(|h| h.name), Some("bob".into()));
        assert_eq!(list(&path).unwrap().iter().map(|e| e.name.as_str()).collect::<Vec<_>>(), ["bob"]);
    }

    #[cfg(unix)]
    #[test]
    fn a_file_others_can_read_accepts_no_token() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE);
        let (token, _) = create(&path, "alice").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(RemoteTokens::new(path.clone()).verify(&token), None);
        assert!(matches!(list(&path), Err(StoreError::Io(..))));
    }
}
