//! Building `firmware/` for one chip and finding the ELF.
//!
//! Cargo runs with its working directory in `firmware/` (cargo finds `.cargo/config.toml` and
//! `rust-toolchain.toml` from there), with the parent's toolchain and build settings removed: a
//! `cargo run`/`cargo test` parent sets `RUSTUP_TOOLCHAIN`, which would override the firmware's
//! pinned toolchain, and `RUSTFLAGS`/`CARGO_*` would change the target or the flags.
//!
//! The build adds `--remap-path-prefix` for the folders cargo unpacks the dependencies into (e.g.
//! `$CARGO_HOME/registry/src/index.crates.io-…/`), asked of `cargo metadata` on this machine: a
//! panic location then reads `smoltcp-0.13.1/src/…:line` instead of starting with this machine's
//! cargo home. That prefix was 117 × 59 bytes of the ESP32-C3 image (issue 14's 600 KB).

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

/// The `cargo build` command for one chip, environment cleaned; `source_dirs` (from
/// [`dependency_source_dirs`]) are cut from the paths rustc writes into the firmware.
pub fn command(dir: &Path, chip: Chip, quiet: bool, source_dirs: &[PathBuf]) -> Command {
    let mut cmd = cargo_in(dir);
    cmd.args(["build", "--release", "-p", FW_PACKAGE, "--target", chip.target(), "--features", chip.feature()]);
    if let Some(config) = remap_config(chip, source_dirs) {
        cmd.arg("--config").arg(config);
    }
    cmd.arg("--message-format=json-render-diagnostics");
    if quiet {
        cmd.arg("--quiet");
    }
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::inherit());
    cmd
}

/// A `--config` value adding `--remap-path-prefix=DIR=` for each of `source_dirs` to the chip
/// target's `rustflags`. Cargo joins arrays given with `--config` to those of
/// `firmware/.cargo/config.toml`, so its flags stay (`RUSTFLAGS` would replace them). Folders
/// whose path is not UTF-8 or holds a `=` are left as they are.
fn remap_config(chip: Chip, source_dirs: &[PathBuf]) -> Option<String> {
    let flags: Vec<String> = source_dirs
        .iter()
        .filter_map(|d| d.to_str())
        .filter(|d| !d.contains('='))
        .map(|d| toml_string(&format!("--remap-path-prefix={d}=")))
        .collect();
    if flags.is_empty() {
        return None;
    }
    Some(format!("target.{}.rustflags=[{}]", chip.target(), flags.join(", ")))
}

/// `s` as a TOML basic string.
fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The folders holding the sources of the firmware's non-workspace dependencies: the parent of
/// each such package's folder (for crates.io, `$CARGO_HOME/registry/src/index.crates.io-…`), from
/// `cargo metadata`, which also downloads what is missing, so a first build is trimmed like the
/// next ones.
pub fn dependency_source_dirs(dir: &Path, quiet: bool) -> anyhow::Result<Vec<PathBuf>> {
    let mut cmd = cargo_in(dir);
    cmd.args(["metadata", "--format-version", "1"]);
    if quiet {
        cmd.arg("--quiet");
    }
    let out = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .context("running cargo metadata (is cargo on PATH?)")?;
    if !out.status.success() {
        bail!("cargo metadata failed in {} ({})", dir.display(), out.status);
    }
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).context("reading cargo metadata's output")?;
    Ok(source_dirs_of(&meta))
}

/// [`dependency_source_dirs`] from `cargo metadata`'s JSON: sorted, each once.
fn source_dirs_of(meta: &serde_json::Value) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = meta["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| !p["source"].is_null())
        .filter_map(|p| Some(Path::new(p["manifest_path"].as_str()?).parent()?.parent()?.to_path_buf()))
        .collect();
    dirs.sort();
    dirs.dedup();
    dirs
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
    let source_dirs = dependency_source_dirs(dir, quiet)?;
    let mut child = command(dir, chip, quiet, &source_dirs).spawn().context("running cargo (is it on PATH?)")?;
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
        let cmd = command(Path::new("/fw"), Chip::Esp32c6, false, &[]);
        let args: Vec<_> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert!(args.windows(2).any(|w| w == ["--target", "riscv32imac-unknown-none-elf"]), "{args:?}");
        assert!(args.windows(2).any(|w| w == ["--features", "esp32c6"]), "{args:?}");
        assert_eq!(cmd.get_current_dir(), Some(Path::new("/fw")));
        // cargo test sets CARGO_PKG_NAME (and maybe RUSTUP_TOOLCHAIN) for this process, and
        // .ci/test CARGO_INCREMENTAL and CARGO_PROFILE_DEV_DEBUG (it runs the test binaries
        // itself, without cargo's): each one this process has is removed.
        let removed: Vec<_> = cmd.get_envs().filter(|(_, v)| v.is_none()).map(|(k, _)| k.to_string_lossy().into_owned()).collect();
        for key in ["CARGO_PKG_NAME", "RUSTUP_TOOLCHAIN", "CARGO_INCREMENTAL", "CARGO_PROFILE_DEV_DEBUG"] {
            if std::env::var_os(key).is_some() {
                assert!(removed.iter().any(|k| k == key), "{key}: {removed:?}");
            }
        }
        assert!(!removed.iter().any(|k| k == "CARGO_HOME"));
        assert!(!args.iter().any(|a| a == "--config"), "{args:?}");
    }

    #[test]
    fn dependency_folders_are_remapped_through_the_chip_targets_rustflags() {
        let meta = serde_json::json!({"packages": [
            {"name": "smoltcp", "source": "registry+https://github.com/rust-lang/crates.io-index",
             "manifest_path": "/home/u/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/smoltcp-0.13.1/Cargo.toml"},
            {"name": "serde", "source": "registry+https://github.com/rust-lang/crates.io-index",
             "manifest_path": "/home/u/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/serde-1.0.229/Cargo.toml"},
            {"name": "mcp-device", "source": null, "manifest_path": "/src/firmware/mcp-device/Cargo.toml"},
        ]});
        let dirs = source_dirs_of(&meta);
        assert_eq!(dirs, [PathBuf::from("/home/u/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f")]);
        let cmd = command(Path::new("/fw"), Chip::Esp32c3, false, &dirs);
        let args: Vec<_> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        let config = r#"target.riscv32imc-unknown-none-elf.rustflags=["--remap-path-prefix=/home/u/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f="]"#;
        assert!(args.windows(2).any(|w| w == ["--config", config]), "{args:?}");
    }

    #[test]
    fn remapped_folders_are_valid_toml_strings_and_odd_ones_are_skipped() {
        let dirs = [PathBuf::from(r#"C:\Users\a "b"\src"#), PathBuf::from("/a=b/src")];
        let config = remap_config(Chip::Esp32c6, &dirs).unwrap();
        let value = config.split_once('=').unwrap().1;
        let parsed: toml::Value = toml::from_str(&format!("v = {value}")).unwrap();
        assert_eq!(parsed["v"].as_array().unwrap().len(), 1, "{config}");
        assert_eq!(parsed["v"][0].as_str(), Some(r#"--remap-path-prefix=C:\Users\a "b"\src="#));
        assert_eq!(remap_config(Chip::Esp32c6, &[PathBuf::from("/a=b")]), None);
    }
}
