//! The chip's ROM loader over a serial port: connect (which also proves the port is an ESP chip),
//! write the parts (espflash skips regions whose MD5 already matches, and verifies), reset.

use std::borrow::Cow;

use espflash::connection::{Connection, ResetAfterOperation, ResetBeforeOperation};
use espflash::flasher::Flasher;
use espflash::image_format::Segment;
use espflash::target::ProgressCallbacks;

use super::image::Part;
use super::port::{SeenPort, list};
use crate::exit::{CodedError, Exit};

/// A connected chip, in its ROM loader (or espflash's stub).
pub struct Device {
    flasher: Flasher,
    /// The station MAC (`aa:bb:…`), which the firmware uses as its Device-Id.
    pub mac: Option<String>,
    pub chip: espflash::target::Chip,
}

/// Opens `port` and talks to the ROM loader; `expected` chip is checked when given. Any failure
/// is a port error (exit 8) listing the ports seen.
pub fn connect(port: &SeenPort, expected: Option<espflash::target::Chip>, baud: u32, verify: bool, seen: &[SeenPort]) -> Result<Device, CodedError> {
    let fail = |m: String| CodedError::new(Exit::Port, format!("{m}\n{}", list(seen)));
    let serial = serialport::new(&port.name, 115_200)
        .flow_control(serialport::FlowControl::None)
        .open_native()
        .map_err(|e| match e.kind() {
            serialport::ErrorKind::NoDevice | serialport::ErrorKind::Io(std::io::ErrorKind::NotFound) => {
                fail(format!("serial port {} is gone ({e})", port.name))
            }
            _ => fail(format!("cannot open serial port {} ({e}); on Linux, is the user in the dialout group?", port.name)),
        })?;
    let conn = Connection::new(serial, port.usb_info(), ResetAfterOperation::HardReset, ResetBeforeOperation::DefaultReset, 115_200);
    let mut flasher = Flasher::connect(conn, true, verify, true, expected, Some(baud))
        .map_err(|e| fail(format!("{} did not answer as an ESP chip ({e}); hold BOOT while pressing RESET, or check --chip", port.name)))?;
    let chip = flasher.chip();
    let mac = flasher.device_info().ok().and_then(|i| i.mac_address).map(|m| m.to_lowercase());
    Ok(Device { flasher, mac, chip })
}

impl Device {
    /// What the chip says about itself, for `flash --board-info`.
    pub fn board_info(&mut self) -> anyhow::Result<serde_json::Value> {
        let info = self.flasher.device_info().map_err(|e| anyhow::anyhow!("reading the board's information failed: {e}"))?;
        Ok(serde_json::json!({
            "chip": info.chip.to_string(),
            "revision": info.revision.map(|(major, minor)| format!("v{major}.{minor}")),
            "crystal": info.crystal_frequency.to_string(),
            "flash_size": info.flash_size.to_string(),
            "features": info.features,
            "mac": info.mac_address.map(|m| m.to_lowercase()),
        }))
    }

    /// Erases the whole flash (`flash --erase`).
    pub fn erase_all(&mut self) -> anyhow::Result<()> {
        self.flasher.erase_flash().map_err(|e| anyhow::anyhow!("erasing the flash failed: {e}"))
    }

    /// Writes every part in one pass (erase, write, verify by MD5 unless disabled).
    pub fn write(&mut self, parts: &[Part], progress: &mut dyn ProgressCallbacks) -> anyhow::Result<()> {
        // The loader writes whole words: pad with FF (erased flash) like espflash's write-bin.
        let segments: Vec<Segment<'_>> = parts
            .iter()
            .map(|p| {
                let data = if p.data.len() % 4 == 0 {
                    Cow::Borrowed(&p.data[..])
                } else {
                    let mut d = p.data.clone();
                    d.resize(p.data.len().next_multiple_of(4), 0xFF);
                    Cow::Owned(d)
                };
                Segment { addr: p.addr, data }
            })
            .collect();
        self.flasher.write_bins_to_flash(&segments, progress).map_err(|e| anyhow::anyhow!("flashing failed: {e}"))
    }

    /// Resets the chip into the flashed app and returns the port for the serial log.
    pub fn reset(mut self) -> anyhow::Result<()> {
        let chip = self.chip;
        self.flasher.connection().reset_after(true, chip).map_err(|e| anyhow::anyhow!("resetting the chip failed: {e}"))
    }
}
