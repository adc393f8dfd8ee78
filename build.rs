//! The commit a release binary was built from, for `mcpdev_build_info{commit}` on `/metrics`:
//! `MCPDEV_COMMIT` when the builder sets it (packagers, a tarball without `.git`), else
//! `git rev-parse` of the checkout. Only release builds ask git, and rebuild when HEAD moves: a
//! debug build says `unknown` and is not rebuilt at every commit.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=MCPDEV_COMMIT");
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    let commit = match std::env::var("MCPDEV_COMMIT").ok().filter(|c| !c.trim().is_empty()) {
        Some(c) => c.trim().to_string(),
        None if release => {
            for path in ["HEAD", "packed-refs"].iter().filter_map(|p| git(&["rev-parse", "--git-path", p])) {
                println!("cargo:rerun-if-changed={path}");
            }
            if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]).and_then(|r| git(&["rev-parse", "--git-path", &r])) {
                println!("cargo:rerun-if-changed={branch}");
            }
            git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into())
        }
        None => "unknown".into(),
    };
    // Only hex digits and `unknown` reach a label (a hostile MCPDEV_COMMIT cannot break the exposition).
    let commit = if commit.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.') && commit.len() <= 64 { commit } else { "unknown".into() };
    println!("cargo:rustc-env=MCPDEV_COMMIT={commit}");
}
