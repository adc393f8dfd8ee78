//! `build.rs`'s choice of watched paths (`build/git_watch.rs`), run against real git repositories
//! in temporary directories: every path it returns exists (cargo reruns a build script whose
//! watched path is missing at every build, issue 45.7), and every way HEAD can move touches one
//! of them: a commit, a checkout, `git pack-refs`, a commit on a branch that is only packed, a
//! linked worktree, an unborn branch.

#[path = "../build/git_watch.rs"]
mod git_watch;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false"])
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q"]);
    dir
}

fn commit(dir: &Path, msg: &str) {
    git(dir, &["commit", "-q", "--allow-empty", "-m", msg]);
}

/// Every watched path exists; returned canonical, for comparing.
fn watched(dir: &Path) -> Vec<PathBuf> {
    let paths = git_watch::watched_paths(dir);
    for p in &paths {
        assert!(p.exists(), "{} is watched but missing: cargo would rerun build.rs at every build", p.display());
    }
    paths.iter().map(|p| p.canonicalize().unwrap()).collect()
}

/// The newest modification time among the watched paths, directories walked as cargo walks them.
fn newest(paths: &[PathBuf]) -> SystemTime {
    fn walk(p: &Path, best: &mut SystemTime) {
        let m = std::fs::metadata(p).unwrap();
        *best = (*best).max(m.modified().unwrap());
        if m.is_dir() {
            for e in std::fs::read_dir(p).unwrap() {
                walk(&e.unwrap().path(), best);
            }
        }
    }
    let mut best = SystemTime::UNIX_EPOCH;
    for p in paths {
        walk(p, &mut best);
    }
    best
}

/// Sets every watched path (and what a watched directory holds) back an hour; returns that time.
fn age(paths: &[PathBuf]) -> SystemTime {
    fn walk(p: &Path, t: SystemTime) {
        std::fs::File::options().read(true).open(p).unwrap().set_modified(t).unwrap();
        if p.is_dir() {
            for e in std::fs::read_dir(p).unwrap() {
                walk(&e.unwrap().path(), t);
            }
        }
    }
    let hour_ago = SystemTime::now() - std::time::Duration::from_secs(3600);
    for p in paths {
        walk(p, hour_ago);
    }
    hour_ago
}

/// `change` moves HEAD; what was watched before it must show a change (a newer mtime, or a file
/// gone), as cargo would see it. Mtimes are compared after setting every watched file back an
/// hour, so a coarse filesystem clock cannot hide a change.
fn assert_noticed(dir: &Path, what: &str, change: impl FnOnce()) {
    let before = watched(dir);
    let stamp = age(&before);
    change();
    let gone = before.iter().any(|p| !p.exists());
    let present: Vec<PathBuf> = before.iter().filter(|p| p.exists()).cloned().collect();
    assert!(gone || newest(&present) > stamp, "{what}: none of {before:?} changed, so a release build would keep the old commit");
}

fn names(paths: &[PathBuf]) -> Vec<String> {
    paths.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect()
}

#[test]
fn a_fresh_repository_without_packed_refs_watches_only_files_that_exist() {
    let dir = repo();
    commit(dir.path(), "one");
    assert!(!dir.path().join(".git/packed-refs").exists(), "a fresh repository has no packed-refs");
    let paths = watched(dir.path());
    let names = names(&paths);
    assert!(names.contains(&"HEAD".to_string()), "{names:?}");
    assert!(names.contains(&"main".to_string()), "the branch's loose ref is watched: {names:?}");
    assert!(!names.contains(&"packed-refs".to_string()), "{names:?}");
}

#[test]
fn outside_a_repository_nothing_is_watched() {
    let dir = tempfile::tempdir().unwrap();
    assert!(git_watch::watched_paths(dir.path()).is_empty());
}

#[test]
fn a_commit_a_checkout_and_packing_are_all_noticed() {
    let dir = repo();
    let d = dir.path();
    commit(d, "one");
    assert_noticed(d, "a commit", || commit(d, "two"));
    git(d, &["branch", "other"]);
    assert_noticed(d, "a checkout", || git(d, &["checkout", "-q", "other"]));
    assert_noticed(d, "git pack-refs", || git(d, &["pack-refs", "--all"]));
    // Now packed-refs exists and the branch has no loose file: both are handled without a
    // missing path, and the next commit (which writes a loose file) is noticed.
    let names = names(&watched(d));
    assert!(names.contains(&"packed-refs".to_string()), "{names:?}");
    assert_noticed(d, "a commit on a packed branch", || commit(d, "three"));
    assert!(names_of(d).contains(&"other".to_string()), "the new loose ref is watched again");
}

fn names_of(d: &Path) -> Vec<String> {
    names(&watched(d))
}

#[test]
fn an_unborn_branch_notices_its_first_commit() {
    let dir = repo();
    let d = dir.path();
    watched(d);
    assert_noticed(d, "the first commit", || commit(d, "one"));
    assert!(names_of(d).contains(&"main".to_string()));
}

#[test]
fn a_linked_worktree_watches_its_own_head_and_the_common_refs() {
    let dir = repo();
    let main = dir.path().join("main");
    std::fs::create_dir(&main).unwrap();
    git(&main, &["init", "-q"]);
    commit(&main, "one");
    let wt = dir.path().join("wt");
    git(&main, &["worktree", "add", "-q", "-b", "side", wt.to_str().unwrap()]);
    let paths = watched(&wt);
    let common = main.join(".git").canonicalize().unwrap();
    assert!(paths.iter().any(|p| p.ends_with("worktrees/wt/HEAD")), "the worktree's own HEAD: {paths:?}");
    assert!(paths.iter().any(|p| p.starts_with(&common) && p.ends_with("refs/heads/side")), "the branch in the common dir: {paths:?}");
    assert_noticed(&wt, "a commit in the worktree", || commit(&wt, "two"));
    // A commit in the main checkout on another branch does not move this worktree's HEAD, and
    // touches nothing it watches (no rebuild for a neighbour's commit).
    let before = watched(&wt);
    let hour_ago = age(&before);
    commit(&main, "elsewhere");
    assert!(before.iter().all(|p| p.exists()) && newest(&before) <= hour_ago, "a neighbour's commit touched {before:?}");
}
