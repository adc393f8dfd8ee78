//! Which files a release build watches to notice that HEAD moved (`build.rs`), shared with
//! `tests/build_script.rs`. Rules it enforces:
//! - Only paths that exist are returned: cargo reruns a build script whose `rerun-if-changed`
//!   path is missing at *every* build, so a checkout without `.git/packed-refs` rebuilt mcpdev
//!   each time (issue 45.7).
//! - Paths come from `git rev-parse --git-path`, so a linked worktree watches its own `HEAD` and
//!   the common directory's refs.
//! - A branch with no loose ref file (only in `packed-refs`, or not born yet) gets one when the
//!   next commit is made, and nothing else that is watched changes then: the directory that
//!   file will appear in is watched instead, until the ref file exists.
//! - `packed-refs` and `reftable/tables.list` are watched when they exist; when a loose ref is
//!   packed, its file goes away, which cargo notices by itself. A reftable repository rewrites
//!   `tables.list` at every ref update, so nothing else is watched there.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs git in `dir`: its trimmed stdout when it succeeds and says something.
pub fn git_in(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git").current_dir(dir).args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

/// The files (and at most one directory) whose change means HEAD may point elsewhere, for the
/// checkout at `dir`; empty outside a git checkout.
pub fn watched_paths(dir: &Path) -> Vec<PathBuf> {
    let git_path = |p: &str| git_in(dir, &["rev-parse", "--git-path", p]).map(|p| dir.join(p));
    let mut paths = Vec::new();
    let Some(head) = git_path("HEAD") else { return paths };
    paths.push(head);
    paths.extend(["packed-refs", "reftable/tables.list"].into_iter().filter_map(git_path));
    let reftable = paths.iter().any(|p| p.ends_with("tables.list") && p.exists());
    if reftable {
        // Every ref update rewrites tables.list: nothing else to watch.
    } else if let Some(branch) = git_in(dir, &["symbolic-ref", "-q", "HEAD"]).and_then(|r| git_path(&r)) {
        if branch.exists() {
            paths.push(branch);
        } else if let Some(parent) = branch.ancestors().skip(1).find(|p| p.is_dir()) {
            paths.push(parent.to_path_buf());
        }
    }
    paths.retain(|p| p.exists());
    paths.dedup();
    paths
}
