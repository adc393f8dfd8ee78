//! The flashable image, made with the espflash library: ESP-IDF bootloader (bundled in espflash),
//! the firmware's partition table (`provisioning::PARTITIONS_CSV`, which reserves the provisioning
//! sector) and the app from the ELF.

use anyhow::Context;
use espflash::flasher::{FlashData, FlashSettings, FlashSize};
use espflash::image_format::{ImageFormat, Segment, idf::IdfBootloaderFormat};

use super::Chip;

/// Flash size the image header announces (the boards are 4 MB; the table fits any larger flash).
pub const FLASH_SIZE: FlashSize = FlashSize::_4Mb;

/// One piece of flash content at an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub addr: u32,
    pub data: Vec<u8>,
}

/// The image's parts: bootloader, partition table and app, in address order.
#[derive(Debug)]
pub struct Image {
    pub parts: Vec<Part>,
    /// The app alone (what an OTA update or `espflash save-image` without `--merge` writes).
    pub app: Vec<u8>,
    /// The factory partition's size.
    pub partition_size: u64,
}

/// Makes the image from the firmware's ELF.
pub fn from_elf(elf: &[u8], chip: Chip) -> anyhow::Result<Image> {
    let table = tempfile_with(provisioning::PARTITIONS_CSV)?;
    let result = build(elf, chip, &table);
    let _ = std::fs::remove_file(&table);
    result
}

fn build(elf: &[u8], chip: Chip, table: &std::path::Path) -> anyhow::Result<Image> {
    let c = chip.espflash();
    let flash_data = FlashData::new(FlashSettings::new(None, Some(FLASH_SIZE), None), 0, None, c, c.default_xtal_frequency());
    let make = || -> anyhow::Result<ImageFormat<'_>> {
        let idf = IdfBootloaderFormat::new(elf, &flash_data, Some(table), None, None, None)
            .map_err(|e| anyhow::anyhow!("{e}"))
            .with_context(|| format!("making the {} image from the ELF", chip.name()))?;
        Ok(ImageFormat::EspIdf(idf))
    };
    let format = make()?;
    let partition_size = format.metadata().get("part_size").and_then(|s| s.parse().ok()).unwrap_or(0);
    let parts = format.flash_segments().iter().map(owned).collect();
    let app = make()?.ota_segments().first().map(|s| s.data().to_vec()).context("the image has no app segment")?;
    Ok(Image { parts, app, partition_size })
}

fn owned(s: &Segment<'_>) -> Part {
    Part { addr: s.addr, data: s.data().to_vec() }
}

/// The parts plus the provisioning sector (if any), sorted by address.
pub fn with_record(mut parts: Vec<Part>, record_sector: Option<Vec<u8>>) -> Vec<Part> {
    if let Some(data) = record_sector {
        parts.push(Part { addr: provisioning::FLASH_OFFSET, data });
    }
    parts.sort_by_key(|p| p.addr);
    parts
}

/// One file for offset 0: each part at its address, gaps filled with `FF` (erased flash). No
/// padding after the last part.
pub fn merge(parts: &[Part]) -> anyhow::Result<Vec<u8>> {
    let mut out: Vec<u8> = Vec::new();
    for p in parts {
        let addr = p.addr as usize;
        anyhow::ensure!(addr >= out.len(), "flash parts overlap at {:#x}", p.addr);
        out.resize(addr, 0xFF);
        out.extend_from_slice(&p.data);
    }
    Ok(out)
}

/// Writes `text` to a fresh file in the temp directory (espflash takes the table as a path).
fn tempfile_with(text: &str) -> anyhow::Result<std::path::PathBuf> {
    let path = std::env::temp_dir().join(format!("mcpdev-partitions-{}-{}.csv", std::process::id(), fastrand::u64(..)));
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_pads_gaps_with_ff_and_rejects_overlaps() {
        let parts = with_record(
            vec![Part { addr: 0x10, data: vec![3] }, Part { addr: 0, data: vec![1, 2] }],
            None,
        );
        assert_eq!(merge(&parts).unwrap(), [&[1, 2][..], &[0xFF; 14], &[3]].concat());
        let overlapping = [Part { addr: 0, data: vec![0; 4] }, Part { addr: 2, data: vec![0] }];
        assert!(merge(&overlapping).is_err());
    }

    #[test]
    fn the_record_lands_at_its_sector() {
        let parts = with_record(vec![Part { addr: 0x10000, data: vec![9] }, Part { addr: 0, data: vec![1] }], Some(vec![7; 4096]));
        let addrs: Vec<u32> = parts.iter().map(|p| p.addr).collect();
        assert_eq!(addrs, [0, provisioning::FLASH_OFFSET, 0x10000]);
    }
}
