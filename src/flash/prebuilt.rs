//! Prebuilt images: `--image FILE` (a merged bin for offset 0, e.g. `idf.py merge-bin` output or a
//! xiaozhi release) and ESP-IDF's `build/flash_args` (what `idf.py flash` writes: option lines, then
//! `OFFSET FILE` pairs with paths relative to the build folder).

use std::path::Path;

use anyhow::{Context, bail};

use super::image::Part;

/// A merged image, written at 0x0.
pub fn merged_image(path: &Path) -> anyhow::Result<Vec<Part>> {
    let data = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    anyhow::ensure!(!data.is_empty(), "{} is empty", path.display());
    anyhow::ensure!(data[0] == 0xE9, "{} is not an ESP image (first byte {:#04x}, expected 0xe9)", path.display(), data[0]);
    Ok(vec![Part { addr: 0, data }])
}

/// The parts a `flash_args` file names, read from the files next to it, in address order.
pub fn flash_args(path: &Path) -> anyhow::Result<Vec<Part>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let base = path.parent().unwrap_or(Path::new("."));
    let mut parts = Vec::new();
    for (offset, file) in parse_flash_args(&text).with_context(|| format!("in {}", path.display()))? {
        let full = base.join(&file);
        let data = std::fs::read(&full).with_context(|| format!("reading {} (named in {})", full.display(), path.display()))?;
        parts.push(Part { addr: offset, data });
    }
    parts.sort_by_key(|p| p.addr);
    Ok(parts)
}

/// `OFFSET FILE` pairs; `--option value` words (flash mode, frequency, size) are skipped: the
/// images' headers already carry them.
pub fn parse_flash_args(text: &str) -> anyhow::Result<Vec<(u32, String)>> {
    let mut pairs = Vec::new();
    let mut words = text.split_whitespace().peekable();
    while let Some(w) = words.next() {
        if w.starts_with("--") {
            // An option with its value (`--flash_mode dio`) or a bare flag.
            if words.peek().is_some_and(|v| !v.starts_with("--") && parse_offset(v).is_none()) {
                words.next();
            }
            continue;
        }
        let Some(offset) = parse_offset(w) else { bail!("expected a flash offset, found {w:?}") };
        let Some(file) = words.next() else { bail!("offset {w} has no file") };
        pairs.push((offset, file.to_string()));
    }
    anyhow::ensure!(!pairs.is_empty(), "no `OFFSET FILE` lines");
    Ok(pairs)
}

fn parse_offset(s: &str) -> Option<u32> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_an_esp_idf_flash_args_file() {
        let text = "--flash_mode dio --flash_freq 80m --flash_size 16MB\n0x0 bootloader/bootloader.bin\n\
0x100000 xiaozhi.bin\n0x8000 partition_table/partition-table.bin\n0xd000 ota_data_initial.bin\n";
        let pairs = parse_flash_args(text).unwrap();
        assert_eq!(pairs[0], (0, "bootloader/bootloader.bin".to_string()));
        assert_eq!(pairs[1], (0x100000, "xiaozhi.bin".to_string()));
        assert_eq!(pairs.len(), 4);
        assert!(parse_flash_args("--flash_mode dio\n").is_err());
        assert!(parse_flash_args("bootloader.bin 0x0\n").is_err());
    }

    #[test]
    fn flash_args_files_are_read_relative_to_the_build_folder() {
        let dir = std::env::temp_dir().join(format!("mcpdev-flash-args-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("bootloader")).unwrap();
        std::fs::write(dir.join("bootloader/bootloader.bin"), [0xE9, 1]).unwrap();
        std::fs::write(dir.join("app.bin"), [0xE9, 2]).unwrap();
        std::fs::write(dir.join("flash_args"), "--flash_mode dio\n0x10000 app.bin\n0x0 bootloader/bootloader.bin\n").unwrap();
        let parts = flash_args(&dir.join("flash_args")).unwrap();
        assert_eq!(parts, vec![Part { addr: 0, data: vec![0xE9, 1] }, Part { addr: 0x10000, data: vec![0xE9, 2] }]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
