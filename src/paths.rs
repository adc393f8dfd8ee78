//! Where the hub keeps what must outlive a run or stay private to the user who started it.
//!
//! - [`state_dir`]: `$MCPDEV_STATE_DIR`, else `$XDG_STATE_HOME/mcpdev`, else
//!   `~/.local/state/mcpdev`: the hub secret, admitted devices.
//! - [`runtime_dir`]: `$MCPDEV_RUNTIME_DIR`, else `$XDG_RUNTIME_DIR/mcpdev`, else the state
//!   directory: secrets that only live while a hub runs (the control API's token).
//!
//! - [`hub_tls_dir`]: `tls/` in the state directory, where `serve --tls auto` keeps the hub's CA
//!   and certificate; [`hub_ca_file`] is the CA that `mcpdev flash` provisions and clients trust.
//!
//! Both are created with mode 0700 and files in them are written with [`write_private`] (0600,
//! atomically), so another local user can read none of it.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The directory for lasting private state.
pub fn state_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("MCPDEV_STATE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join("mcpdev");
    }
    home().join(".local/state/mcpdev")
}

/// The directory for secrets that live only while a hub runs.
pub fn runtime_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("MCPDEV_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join("mcpdev");
    }
    state_dir()
}

/// Where `serve --tls auto` keeps the hub's CA (`ca.pem`, `ca.key`) and its certificate
/// (`hub.pem`, the chain; `hub.key`): 0700, every file 0600.
pub fn hub_tls_dir() -> PathBuf {
    state_dir().join("tls")
}

/// The hub's own CA certificate (PEM), made by `serve --tls auto`: what our firmware and the
/// CLI verify the hub against.
pub fn hub_ca_file() -> PathBuf {
    hub_tls_dir().join("ca.pem")
}

fn home() -> PathBuf {
    std::env::var_os("HOME").filter(|h| !h.is_empty()).map_or_else(|| PathBuf::from("."), PathBuf::from)
}

/// Creates `dir` (and its parents) if needed, and makes it private to this user (0700).
pub fn ensure_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Writes `bytes` to `path` so that only this user can read it (0600): into a temporary file in
/// the same directory, then renamed over `path`, so a reader never sees half a file. The
/// directory is made private (0700) too.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    ensure_private_dir(parent(path))?;
    write_replacing(path, bytes, Some(0o600))
}

/// Writes `bytes` to `path` whole, readable by its owner only (0600), leaving the directory as
/// it is: a secret written where the person asked (`remote-token create --out FILE`).
pub fn write_owner_only(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_replacing(path, bytes, Some(0o600))
}

/// Writes `bytes` to `path` whole (a temporary file renamed over it), leaving the directory's
/// permissions as they are: for files a script waits for, such as `serve --ready-file`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_replacing(path, bytes, None)
}

fn parent(path: &Path) -> &Path {
    path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

fn write_replacing(path: &Path, bytes: &[u8], mode: Option<u32>) -> std::io::Result<()> {
    let dir = parent(path);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", uuid::Uuid::new_v4().simple()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    if let Some(mode) = mode {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(mode);
    }
    #[cfg(not(unix))]
    let _ = mode;
    let result = (|| {
        let mut f = options.open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Why a key file could not be used.
#[derive(Debug)]
pub enum KeyFileError {
    Read(std::io::Error),
    Write(std::io::Error),
    /// It holds something other than the hex digits of a key of the expected length.
    NotHex,
}

/// A random key of `len` bytes kept in `path` as hex digits, private ([`write_private`],
/// [`read_private`]), created on first use. Two processes creating it at once both end up with
/// the one whose rename won: each reads back what is there.
pub fn load_or_create_key(path: &Path, len: usize) -> Result<Vec<u8>, KeyFileError> {
    let parse = |bytes: &[u8]| std::str::from_utf8(bytes).ok().and_then(|t| unhex(t.trim())).filter(|raw| raw.len() == len).ok_or(KeyFileError::NotHex);
    match read_private(path) {
        Ok(bytes) => parse(&bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            use ring::rand::SecureRandom;
            let mut raw = vec![0u8; len];
            ring::rand::SystemRandom::new().fill(&mut raw).map_err(|_| KeyFileError::Write(std::io::Error::other("the system random source failed")))?;
            write_private(path, hex(&raw).as_bytes()).map_err(KeyFileError::Write)?;
            parse(&read_private(path).map_err(KeyFileError::Read)?)
        }
        Err(e) => Err(KeyFileError::Read(e)),
    }
}

/// Lower-case hex digits of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes `s` spells in hex digits (either case), if it spells any.
pub fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| s.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok())).collect()
}

/// Reads a private file, refusing one that other users could read or write (a secret someone
/// else may have seen or planted is not a secret).
pub fn read_private(path: &Path) -> std::io::Result<Vec<u8>> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path)?;
        if meta.mode() & 0o077 != 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!("{} is readable or writable by other users (mode {:o}); run `chmod 600` on it or remove it", path.display(), meta.mode() & 0o777),
            ));
        }
    }
    std::fs::read(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_files_are_0600_and_replace_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/secret");
        write_private(&path, b"one").unwrap();
        write_private(&path, b"two").unwrap();
        assert_eq!(read_private(&path).unwrap(), b"two");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
            assert_eq!(std::fs::metadata(path.parent().unwrap()).unwrap().permissions().mode() & 0o777, 0o700);
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
            let err = read_private(&path).unwrap_err();
            assert!(err.to_string().contains("chmod 600"), "{err}");
        }
        assert_eq!(std::fs::read_dir(path.parent().unwrap()).unwrap().count(), 1, "no temporary file left behind");
    }
}
