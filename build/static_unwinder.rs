//! The unwinder linked into the binaries, not loaded from `libgcc_s.so.1` (linux-gnu only).
//!
//! Rust's standard library asks for `-lgcc_s` (its `_Unwind_*` functions). Loading that library
//! costs a one-shot `mcpdev call` about 0.15 ms of its ~3 ms: one more object mapped and
//! searched, and its constructor `__cpu_indicator_init`, whose ten or so `cpuid` instructions
//! each trap to the hypervisor on a VM (13–17 µs each on the VM of benches/README.md's start-up
//! section). The same unwinder comes as the static archive `libgcc_eh.a` (what std itself links
//! for `crt-static`), and nothing of ours uses `__builtin_cpu_supports`, so linking it in keeps
//! every panic and unwind as it was and drops the library.
//!
//! Rules:
//! - The linker finds `-lgcc_s` first in a folder of ours, as a linker script that names the
//!   archive by its full path, as the C compiler reports it (`cc -print-file-name=libgcc_eh.a`).
//! - Only for linux-gnu without `crt-static`. If the compiler cannot be run or has no such
//!   archive, nothing changes: the binary loads `libgcc_s.so.1` as before, and cargo says why.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Makes `-lgcc_s` resolve to the static unwinder, when the target and the compiler allow it.
pub fn link_statically(out_dir: &Path) {
    println!("cargo:rerun-if-env-changed=CC");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let static_crt = var("CARGO_CFG_TARGET_FEATURE").split(',').any(|f| f == "crt-static");
    if var("CARGO_CFG_TARGET_OS") != "linux" || var("CARGO_CFG_TARGET_ENV") != "gnu" || static_crt {
        return;
    }
    let Some(archive) = archive() else {
        println!("cargo:warning=no libgcc_eh.a from `cc -print-file-name`: the binary loads libgcc_s.so.1 (a slower start)");
        return;
    };
    let dir = out_dir.join("static-unwinder");
    let script = format!("/* -lgcc_s: the same unwinder, linked in (build/static_unwinder.rs) */\nINPUT({})\n", archive.display());
    if std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(dir.join("libgcc_s.so"), script)).is_err() {
        return;
    }
    println!("cargo:rustc-link-search=native={}", dir.display());
}

/// The full path of `libgcc_eh.a` the target's C compiler links with, if it has one.
fn archive() -> Option<PathBuf> {
    let cc = std::env::var("CC").ok().filter(|c| !c.trim().is_empty()).unwrap_or_else(|| "cc".into());
    let out = Command::new(cc.trim()).arg("-print-file-name=libgcc_eh.a").output().ok()?;
    let path = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    // A compiler that does not know the file prints its bare name back.
    (out.status.success() && path.is_absolute() && path.is_file() && !path.to_string_lossy().contains(['(', ')', ' ', '"'])).then_some(path)
}
