//! Issue 46 item 6: what the binaries load at start. On linux-gnu the unwinder is linked in
//! (`build/static_unwinder.rs`), so no process of ours maps `libgcc_s.so.1` and runs its
//! `cpuid`-heavy constructor, and a panic still unwinds and is caught.

#![cfg(all(target_os = "linux", target_env = "gnu"))]

use std::process::Command;

/// Whether the C compiler has the static unwinder; without it the build falls back to the
/// shared library (and cargo warns), so there is nothing to check.
fn static_unwinder_available() -> bool {
    let cc = std::env::var("CC").ok().filter(|c| !c.trim().is_empty()).unwrap_or_else(|| "cc".into());
    Command::new(cc.trim())
        .arg("-print-file-name=libgcc_eh.a")
        .output()
        .is_ok_and(|o| std::path::Path::new(String::from_utf8_lossy(&o.stdout).trim()).is_absolute())
}

#[test]
fn the_binary_does_not_load_libgcc_s() {
    if !static_unwinder_available() {
        eprintln!("skipped: no libgcc_eh.a here");
        return;
    }
    // glibc's loader lists what it would load, and runs nothing (what `ldd` does).
    let out = Command::new(env!("CARGO_BIN_EXE_mcpdev")).arg("--version").env("LD_TRACE_LOADED_OBJECTS", "1").output().unwrap();
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(listed.contains("libc.so"), "the loader listed nothing: {listed}");
    assert!(!listed.contains("libgcc_s"), "mcpdev loads libgcc_s: {listed}");
}

#[test]
fn a_panic_unwinds_through_the_linked_in_unwinder() {
    if !static_unwinder_available() {
        eprintln!("skipped: no libgcc_eh.a here");
        return;
    }
    // This test binary is linked like mcpdev: the unwinder it runs is the static one.
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    assert!(!maps.contains("libgcc_s"), "the test binary maps libgcc_s");
    let dropped = std::sync::atomic::AtomicBool::new(false);
    struct Guard<'a>(&'a std::sync::atomic::AtomicBool);
    impl Drop for Guard<'_> {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _guard = Guard(&dropped);
        panic!("unwind me");
    }));
    let payload = caught.expect_err("the panic was caught");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"unwind me"));
    assert!(dropped.load(std::sync::atomic::Ordering::SeqCst), "unwinding ran the frame's destructors");
}
