//! Building `firmware/` for one chip and finding the ELF.
//!
//! Cargo runs with its working directory in `firmware/` (cargo finds `.cargo/config.toml` and
//! `rust-toolchain.toml` from there), with the parent's toolchain and build settings removed: a
//! `cargo run`/`cargo test` parent sets `RUSTUP_TOOLCHAIN`, which would override the firmware's
//! pinned toolchain, and `RUSTFLAGS`/`CARGO_*` would change the target or the flags.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

use super::Chip;

/// The firmware's binary package.
pub const FW_PACKAGE: &str = "mcpdev-fw";

/// `--firmware-dir`, else the `firmware/` next to the sources mcpdev was built from, else `./firmware`.
pub fn firmware_dir(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    let dir = match explicit {
        Some(d) => d.to_path_buf(),
        None => {
            let beside_sources = Path::new(env!("CARGO_MANIFEST_DIR")).join("firmware");
            if beside_sources.join("Cargo.toml").is_file() { beside_sources } else { PathBuf::from("firmware") }
        }
    };
    if !dir.join("Cargo.toml").is_file() {
        bail!(crate::exit::CodedError::new(
            crate::exit::Exit::Usage,
            format!("no firmware workspace at {} (name it with --firmware-dir or MCPDEV_FIRMWARE_DIR)", dir.display())
        ));
    }
    Ok(dir)
}

/// The `cargo build` command for one chip, environment cleaned.
pub fn command(dir: &Path, chip: Chip, quiet: bool) -> Command {
    let mut cmd = cargo_in(dir);
    cmd.args(["build", "--release", "-p", FW_PACKAGE, "--target", chip.target(), "--features", chip.feature()]);
    cmd.arg("--message-format=json-render-diagnostics");
    if quiet {
        cmd.arg("--quiet");
    }
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::inherit());
    cmd
}

/// `cargo` in the firmware workspace `dir`, without the toolchain and build settings of a cargo
/// that may be running us (the workspace has its own toolchain file and profiles).
pub fn cargo_in(dir: &Path) -> Command {
    let mut cmd = Command::new("cargo");
    cmd.current_dir(dir);
    for (key, _) in std::env::vars_os() {
        let Some(k) = key.to_str() else { continue };
        // CARGO_HOME stays: it is where the registry cache and the cargo proxies live.
        let build_setting = k.starts_with("CARGO_") && k != "CARGO_HOME";
        if build_setting || matches!(k, "CARGO" | "RUSTUP_TOOLCHAIN" | "RUSTFLAGS" | "RUSTC" | "RUSTDOC" | "RUSTC_WRAPPER") {
            cmd.env_remove(&key);
        }
    }
    cmd
}

/// Builds the firmware for `chip` and returns the ELF's path. Cargo's own output (progress,
/// rendered diagnostics) goes to stderr.
pub fn build(dir: &Path, chip: Chip, quiet: bool) -> anyhow::Result<PathBuf> {
    let mut child = command(dir, chip, quiet).spawn().context("running cargo (is it on PATH?)")?;
    let stdout = child.stdout.take().expect("piped stdout");
    let mut elf = None;
    for line in std::io::BufReader::new(stdout).lines() {
        let line = line.context("reading cargo's output")?;
        if let Some(path) = executable_from_message(&line, FW_PACKAGE) {
            elf = Some(path);
        }
    }
    let status = child.wait().context("waiting for cargo")?;
    if !status.success() {
        bail!("building the firmware for {} failed (cargo: {status}); run from {}: cargo build --release -p {FW_PACKAGE} --target {} --features {}",
            chip.name(), dir.display(), chip.target(), chip.feature());
    }
    elf.with_context(|| format!("cargo built {FW_PACKAGE} but reported no executable"))
}

/// The executable of a `compiler-artifact` message for the cargo target `name` (the firmware's
/// is [`FW_PACKAGE`]), if this line is one.
pub fn executable_from_message(line: &str, name: &str) -> Option<PathBuf> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    if v["reason"] != "compiler-artifact" || v["target"]["name"] != name {
        return None;
    }
    v["executable"].as_str().map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_executable_in_cargo_messages() {
        let line = r#"{"reason":"compiler-artifact","package_id":"x","target":{"name":"mcpdev-fw","kind":["bin"]},"executable":"/f/target/riscv32imc-unknown-none-elf/release/mcpdev-fw","fresh":true}"#;
        assert_eq!(executable_from_message(line, FW_PACKAGE), Some(PathBuf::from("/f/target/riscv32imc-unknown-none-elf/release/mcpdev-fw")));
        let lib = r#"{"reason":"compiler-artifact","target":{"name":"mcp_device","kind":["lib"]},"executable":null}"#;
        assert_eq!(executable_from_message(lib, FW_PACKAGE), None);
        assert_eq!(executable_from_message(r#"{"reason":"build-finished","success":true}"#, FW_PACKAGE), None);
        assert_eq!(executable_from_message("not json", FW_PACKAGE), None);
    }

    #[test]
    fn the_parents_toolchain_and_flags_are_removed() {
        let cmd = command(Path::new("/fw"), Chip::Esp32c6, false);
        let args: Vec<_> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert!(args.windows(2).any(|w| w == ["--target", "riscv32imac-unknown-none-elf"]), "{args:?}");
        assert!(args.windows(2).any(|w| w == ["--features", "esp32c6"]), "{args:?}");
        assert_eq!(cmd.get_current_dir(), Some(Path::new("/fw")));
        // cargo test sets CARGO_PKG_NAME (and maybe RUSTUP_TOOLCHAIN) for this process: removed.
        let removed: Vec<_> = cmd.get_envs().filter(|(_, v)| v.is_none()).map(|(k, _)| k.to_string_lossy().into_owned()).collect();
        assert!(removed.iter().any(|k| k == "CARGO_PKG_NAME"), "{removed:?}");
        if std::env::var_os("RUSTUP_TOOLCHAIN").is_some() {
            assert!(removed.iter().any(|k| k == "RUSTUP_TOOLCHAIN"), "{removed:?}");
        }
        assert!(!removed.iter().any(|k| k == "CARGO_HOME"));
    }
}
