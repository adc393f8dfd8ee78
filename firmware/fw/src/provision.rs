//! Reading the provisioning record from flash.

use alloc::vec;

use esp_bootloader_esp_idf::partitions::{self, PARTITION_TABLE_MAX_LEN};
use esp_storage::FlashStorage;
use log::{info, warn};
use provisioning::{DecodeError, FLASH_OFFSET, PARTITION_LABEL, PARTITION_SUBTYPE, PARTITION_TYPE, Provisioning, SECTOR_SIZE};

/// Why the device has no usable settings.
pub enum Missing {
    /// The flash could not be read at all.
    Flash(esp_storage::FlashStorageError),
    /// The sector was read, but holds no valid record.
    Record { offset: u32, error: DecodeError },
}

/// Where the record is: the `mcpdev` data partition, or the documented fixed sector.
fn record_offset(flash: &mut FlashStorage<'_>) -> u32 {
    let mut table = vec![0u8; PARTITION_TABLE_MAX_LEN];
    match partitions::read_partition_table(flash, &mut table) {
        Ok(table) => {
            let found = table.iter().find(|p| {
                p.raw_type() == PARTITION_TYPE && p.raw_subtype() == PARTITION_SUBTYPE && p.label_as_str() == PARTITION_LABEL
            });
            match found {
                Some(p) if p.len() as usize >= SECTOR_SIZE => return p.offset(),
                Some(p) => warn!("provisioning: partition '{PARTITION_LABEL}' is only {} bytes; ignoring it", p.len()),
                None => info!(
                    "provisioning: no '{PARTITION_LABEL}' partition in the partition table; using the fixed sector {FLASH_OFFSET:#x}"
                ),
            }
        }
        Err(e) => warn!("provisioning: cannot read the partition table ({e:?}); using the fixed sector {FLASH_OFFSET:#x}"),
    }
    FLASH_OFFSET
}

/// Reads and decodes the record; `Ok` carries the flash offset it was read from.
pub fn load(flash: &mut FlashStorage<'_>) -> Result<(u32, Provisioning), Missing> {
    let offset = record_offset(flash);
    let mut sector = vec![0u8; SECTOR_SIZE];
    flash.read(offset, &mut sector).map_err(Missing::Flash)?;
    let record = provisioning::decode(&sector).map_err(|error| Missing::Record { offset, error })?;
    Ok((offset, record))
}

/// Says plainly what is missing and how to fix it. Logged at boot and then every minute while the
/// device waits, so whoever opens the serial monitor later still sees it.
pub fn explain(missing: &Missing, device_id: &str) {
    match missing {
        Missing::Flash(e) => log::error!("provisioning: reading the flash failed: {e:?}"),
        Missing::Record { offset, error } => {
            log::error!("provisioning: no usable settings at flash offset {offset:#x}: {error}");
            match error {
                DecodeError::Erased => log::error!(
                    "provisioning: this device needs a Wi-Fi SSID, a Wi-Fi password (unless the network is open), \
                     the hub URL (ws://host:port/path) and, if the hub wants one, a device token"
                ),
                DecodeError::MissingField(field) => log::error!("provisioning: the record has no {field}"),
                _ => log::error!("provisioning: the record is damaged or from an incompatible tool; write it again"),
            }
            log::error!(
                "provisioning: write the record with `mcpdev flash` (it goes to {offset:#x}); \
                 the device ({device_id}) waits and does not reboot by itself"
            );
        }
    }
}
