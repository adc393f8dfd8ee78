//! The commit a release binary was built from, for `mcpdev_build_info{commit}` on `/metrics`:
//! `MCPDEV_COMMIT` when the builder sets it (packagers, a tarball without `.git`), else
//! `git rev-parse` of the checkout. Only release builds ask git, and rebuild when HEAD moves: a
//! debug build says `unknown` and is not rebuilt at every commit. What is watched, and why only
//! paths that exist: `build/git_watch.rs`. The unwinder is linked in, not loaded:
//! `build/static_unwinder.rs`.

#[path = "build/git_watch.rs"]
mod git_watch;
#[path = "build/static_unwinder.rs"]
mod static_unwinder;

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=build/git_watch.rs");
    println!("cargo:rerun-if-changed=build/static_unwinder.rs");
    if let Ok(out) = std::env::var("OUT_DIR") {
        static_unwinder::link_statically(Path::new(&out));
    }
    println!("cargo:rerun-if-env-changed=MCPDEV_COMMIT");
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let dir = Path::new(&dir);
    let commit = match std::env::var("MCPDEV_COMMIT").ok().filter(|c| !c.trim().is_empty()) {
        Some(c) => c.trim().to_string(),
        None if release => {
            for path in git_watch::watched_paths(dir) {
                println!("cargo:rerun-if-changed={}", path.display());
            }
            git_watch::git_in(dir, &["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into())
        }
        None => "unknown".into(),
    };
    // Only hex digits and `unknown` reach a label (a hostile MCPDEV_COMMIT cannot break the exposition).
    let commit = if commit.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.') && commit.len() <= 64 { commit } else { "unknown".into() };
    println!("cargo:rustc-env=MCPDEV_COMMIT={commit}");
}
