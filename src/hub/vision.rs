//! The hub's own vision endpoint: a camera tool uploads a photo (multipart `question` + a file
//! part, whatever its name: [`super::vision_upload`]),
//! the hub saves it to a folder and answers with a short description of it, so a camera can be
//! tried with no AI service.
//!
//! Each device has its own vision token ([`super::secret::Purpose::Vision`] of its approval, sent in its
//! `initialize`); an upload must carry the token of the Device-Id it names. File names are made
//! by the hub only (the MAC's hex digits, a timestamp and a counter), created inside the folder
//! without following links, and the folder is capped in files and bytes, the oldest uploads
//! removed first. The answer names the file, never the server-side path.
//!
//! Photos are private to the hub's user: the folder (by default `vision/` under
//! [`crate::paths::state_dir`], never the current directory) is created 0700 and each photo 0600;
//! an existing `--vision-dir` of this user's that others can enter is made 0700 (and logged),
//! one of another user's (or a shared one such as /tmp) is refused.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use axum::Json;
use axum::extract::{Multipart, State};
use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};
use tracing::{info, warn};

use super::Hub;
use crate::wire::identity::{bearer_token, format_mac, parse_mac};

/// Files the folder keeps by default.
pub const DEFAULT_MAX_FILES: usize = 200;
/// Bytes the folder keeps by default.
pub const DEFAULT_MAX_BYTES: u64 = 50 * 1024 * 1024;
/// The largest request the route reads (a photo from a device camera is far smaller).
pub const MAX_UPLOAD: usize = 8 * 1024 * 1024;

/// The body limit of the vision route: [`MAX_UPLOAD`], or less when the folder is smaller.
pub fn upload_limit(max_bytes: u64) -> usize {
    usize::try_from(max_bytes).unwrap_or(usize::MAX).saturating_add(64 * 1024).min(MAX_UPLOAD)
}

/// The folder uploads go to, with its caps.
#[derive(Debug)]
pub struct VisionStore {
    dir: PathBuf,
    max_files: usize,
    max_bytes: u64,
    /// Serialises saving and pruning; holds the next sequence number (no panicking code under it).
    seq: Mutex<u64>,
}

/// Why an upload was not saved.
#[derive(Debug)]
pub enum SaveError {
    /// Larger than the whole folder may hold.
    TooLarge { bytes: usize, max: u64 },
    Io(String),
}

impl VisionStore {
    pub fn new(dir: PathBuf, max_files: usize, max_bytes: u64) -> Self {
        Self { dir, max_files: max_files.max(1), max_bytes, seq: Mutex::new(0) }
    }

    /// Saves `bytes` for `mac` with extension `ext` (both already validated); the file name.
    pub fn save(&self, mac: &[u8; 6], ext: &str, bytes: &[u8]) -> Result<String, SaveError> {
        if bytes.len() as u64 > self.max_bytes {
            return Err(SaveError::TooLarge { bytes: bytes.len(), max: self.max_bytes });
        }
        let mut seq = self.seq.lock().unwrap_or_else(|e| e.into_inner());
        *seq += 1;
        let stamp = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis());
        let hexmac: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        let name = format!("{hexmac}-{stamp}-{}.{ext}", *seq);
        create_private_dir(&self.dir).map_err(|e| SaveError::Io(format!("cannot create the vision folder: {e}")))?;
        let meta = std::fs::symlink_metadata(&self.dir).map_err(|e| SaveError::Io(e.to_string()))?;
        if !meta.is_dir() {
            return Err(SaveError::Io("the vision folder is a link or not a folder; refusing to write through it".into()));
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::{MetadataExt, PermissionsExt};
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                // Ours (a `mkdir`ed --vision-dir): made private. Another user's, or a shared one
                // such as /tmp: refused, never changed.
                if Some(meta.uid()) != super::owner::my_uid() || meta.permissions().mode() & 0o1000 != 0 {
                    return Err(SaveError::Io(format!(
                        "the vision folder {} is open to other users (mode {mode:o}) and not this user's own; choose another --vision-dir",
                        self.dir.display()
                    )));
                }
                std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o700)).map_err(|e| SaveError::Io(format!("cannot make the vision folder private: {e}")))?;
                info!(dir = %self.dir.display(), was = %format!("{mode:o}"), "vision folder made private to this user (0700)");
            }
        }
        self.prune(self.max_files - 1, self.max_bytes - bytes.len() as u64);
        write_new(&self.dir.join(&name), bytes).map_err(|e| SaveError::Io(format!("cannot save the photo: {e}")))?;
        Ok(name)
    }

    /// Removes the oldest uploads until at most `files` remain, using at most `bytes`.
    fn prune(&self, files: usize, bytes: u64) {
        let mut kept = self.uploads();
        let mut total: u64 = kept.iter().map(|u| u.2).sum();
        kept.sort();
        let mut i = 0;
        while kept.len() - i > files || total > bytes {
            let Some((_, path, size)) = kept.get(i) else { break };
            match std::fs::remove_file(path) {
                Ok(()) => info!(file = %path.file_name().unwrap_or_default().to_string_lossy(), "vision folder full: removed the oldest upload"),
                Err(e) => warn!("cannot remove an old upload from the vision folder: {e}"),
            }
            total = total.saturating_sub(*size);
            i += 1;
        }
    }

    /// The uploads in the folder (regular files named as this store names them): their age (from
    /// the name: milliseconds, then sequence), path and size.
    fn uploads(&self) -> Vec<((u128, u64), PathBuf, u64)> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return Vec::new() };
        entries
            .filter_map(Result::ok)
            .filter_map(|e| {
                let age = e.file_name().to_str().and_then(upload_age)?;
                let meta = e.path().symlink_metadata().ok().filter(|m| m.is_file())?;
                Some((age, e.path(), meta.len()))
            })
            .collect()
    }

    /// Files and bytes the folder holds now.
    pub fn usage(&self) -> (usize, u64) {
        let u = self.uploads();
        (u.len(), u.iter().map(|u| u.2).sum())
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// The (milliseconds, sequence) of a name this store makes, `<12 hex>-<ms>-<seq>.<ext>`; `None`
/// for any other name.
fn upload_age(n: &str) -> Option<(u128, u64)> {
    let (stem, ext) = n.rsplit_once('.')?;
    let mut parts = stem.split('-');
    let (mac, ms, seq) = (parts.next()?, parts.next()?, parts.next()?);
    let ok = matches!(ext, "jpg" | "png" | "gif" | "webp" | "bin") && parts.next().is_none() && mac.len() == 12 && mac.bytes().all(|b| b.is_ascii_hexdigit());
    ok.then_some(())?;
    Some((ms.parse().ok()?, seq.parse().ok()?))
}

/// Creates `path` and writes `bytes` to it. `create_new` (O_CREAT|O_EXCL) never opens an existing
/// file and never follows a link planted at that name.
/// Creates a photo that only the hub's user can read (0600), never through a link or over a file.
fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)?.write_all(bytes)
}

/// Creates the folder (and missing parents) 0700; an existing one is left as it is.
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// Where photos go without `--vision-dir`: `vision/` in the state directory.
pub fn default_dir() -> PathBuf {
    crate::paths::state_dir().join("vision")
}

pub async fn explain(State(hub): State<Arc<Hub>>, headers: HeaderMap, mut form: Multipart) -> (StatusCode, Json<Value>) {
    let fail = |status: StatusCode, message: String| (status, Json(json!({"success": false, "message": message})));
    let raw_id = headers.get("device-id").and_then(|v| v.to_str().ok()).unwrap_or_default();
    let Ok(mac) = parse_mac(raw_id) else {
        warn!(device_id = %raw_id.chars().take(40).collect::<String>().escape_debug(), "vision upload refused: the Device-Id is not a MAC");
        return fail(StatusCode::BAD_REQUEST, "send the Device-Id header: the device's MAC (aa:bb:cc:dd:ee:ff)".into());
    };
    let device = format_mac(&mac);
    let token = headers.get("authorization").and_then(|v| v.to_str().ok()).map(bearer_token).unwrap_or_default();
    let configured = hub.config.vision_url.is_none() && hub.config.vision_token.as_deref().is_some_and(|t| !t.is_empty() && t == token);
    // A revoked device's uploads stop, whatever token it holds.
    let configured = configured && !hub.admission.is_revoked(&device);
    if !configured && !hub.admission.verify_vision(&device, &token) {
        warn!(%device, "vision upload refused: missing or wrong vision token");
        return fail(StatusCode::UNAUTHORIZED, "missing or wrong vision token: send the one this device got in `initialize` (Authorization: Bearer …)".into());
    }
    let (question, file_name, bytes) = match super::vision_upload::read(&mut form, upload_limit(hub.config.vision_max_bytes)).await {
        Ok(u) => (u.question, u.file_name, u.bytes),
        Err((status, message)) => {
            warn!(%device, "vision upload refused: {message}");
            return fail(status, message);
        }
    };
    let format = image_format(&bytes);
    let len = bytes.len();
    let saver = hub.clone();
    let saved = tokio::task::spawn_blocking(move || saver.vision.save(&mac, format.1, &bytes)).await.unwrap_or_else(|e| Err(SaveError::Io(format!("the save task failed: {e}"))));
    let saved = match saved {
        Ok(name) => name,
        Err(SaveError::TooLarge { bytes, max }) => {
            warn!(%device, bytes, max, "vision upload refused: larger than the vision folder's cap");
            return fail(StatusCode::PAYLOAD_TOO_LARGE, format!("the photo ({bytes} bytes) is larger than this hub keeps ({max} bytes)"));
        }
        Err(SaveError::Io(e)) => {
            warn!(%device, dir = %hub.vision.dir().display(), "vision upload not saved: {e}");
            return fail(StatusCode::INTERNAL_SERVER_ERROR, "the hub cannot save the photo; see the hub's log".into());
        }
    };
    let text = format!(
        "mcpdev received {file_name} ({} bytes, {}) for the question {question:?} and saved it as {saved}. \
         No AI service is attached to this hub, so this is only a description of the upload.",
        len,
        format.0,
    );
    info!(%device, file = %saved, bytes = len, "vision upload saved");
    (StatusCode::OK, Json(json!({"success": true, "text": text, "file": saved, "bytes": len})))
}

fn image_format(b: &[u8]) -> (&'static str, &'static str) {
    match b {
        [0xff, 0xd8, 0xff, ..] => ("JPEG", "jpg"),
        [0x89, b'P', b'N', b'G', ..] => ("PNG", "png"),
        [b'G', b'I', b'F', b'8', ..] => ("GIF", "gif"),
        [b'R', b'I', b'F', b'F', _, _, _, _, b'W', b'E', b'B', b'P', ..] => ("WebP", "webp"),
        _ => ("unknown format", "bin"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_folder_keeps_at_most_its_caps_oldest_first() {
        let dir = tempfile::tempdir().unwrap();
        let store = VisionStore::new(dir.path().join("v"), 3, 1000);
        let mac = [0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0x01];
        let names: Vec<String> = (0..5).map(|_| store.save(&mac, "jpg", &[1u8; 100]).unwrap()).collect();
        assert_eq!(store.usage(), (3, 300));
        assert!(names.iter().all(|n| upload_age(n).is_some() && !n.contains('/')), "{names:?}");
        assert!(!dir.path().join("v").join(&names[0]).exists() && dir.path().join("v").join(&names[4]).exists());
        store.save(&mac, "jpg", &[1u8; 900]).unwrap();
        assert_eq!(store.usage(), (2, 1000), "bytes are capped too: the oldest go until the new one fits");
        assert!(matches!(store.save(&mac, "jpg", &[1u8; 1001]), Err(SaveError::TooLarge { .. })));
        // A file the store did not make is left alone and not counted.
        std::fs::write(dir.path().join("v/notes.txt"), b"keep").unwrap();
        store.save(&mac, "png", &[1u8; 10]).unwrap();
        assert!(dir.path().join("v/notes.txt").exists());
    }

    #[cfg(unix)]
    #[test]
    fn a_linked_folder_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, dir.path().join("v")).unwrap();
        let store = VisionStore::new(dir.path().join("v"), 3, 1000);
        assert!(matches!(store.save(&[0; 6], "jpg", b"x"), Err(SaveError::Io(_))));
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    }
}
