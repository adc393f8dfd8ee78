//! The mcpdev **provisioning record**: what a device needs to reach its hub (Wi-Fi SSID and
//! password, hub URL, device token, optional board settings), kept in its own flash sector and
//! written at flash time, so that no secret is ever compiled into the firmware image.
//!
//! The host tool (`mcpdev flash`) uses [`Provisioning::encode`]; the firmware uses [`decode`].
//! Both share this crate, so they cannot disagree about the format.
//!
//! # Where it lives
//!
//! One 4 KiB flash sector at **`0xE000`** ([`FLASH_OFFSET`]). [`PARTITIONS_CSV`] is the partition
//! table that goes with it: espflash's default table with the `nvs` partition shortened by one
//! sector (`0x9000..0xE000`, 5 pages, still above NVS's 3-page minimum) and that sector declared as
//! `mcpdev` (type `0x40`, the first partition type ESP-IDF leaves to applications, subtype `0x00`;
//! espflash 4.7's partition-table parser panics on a `data` partition with an application
//! subtype, so a custom type it is).
//! `phy_init@0xF000` and `factory@0x10000` stay where espflash's default table puts them, so the app
//! offset and size are unchanged and the record's address does not depend on the flash size.
//! The firmware looks the `mcpdev` partition up in the partition table and falls back to
//! `0xE000` when the table has none (espflash's default table: there the sector is the last page
//! of the `nvs` partition, which nothing in this firmware uses).
//!
//! # Format (versions 1 and 2), all integers little-endian
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `"MCPP"` (`4D 43 50 50`) |
//! | 4 | 1 | format version: `02` when the record carries a hub CA (tag `08`), else `01` |
//! | 5 | 1 | flags, `00` (reserved; ignored by version-1 readers) |
//! | 6 | 2 | `N`, the length of the field area, u16 |
//! | 8 | N | fields, each `tag: u8, len: u16, value: [u8; len]` |
//! | 8+N | 4 | CRC-32 (IEEE 802.3, as zlib's `crc32`) of bytes `0 .. 8+N`, u32 |
//!
//! The whole record is at most [`MAX_RECORD_LEN`] bytes (one sector); the rest of the sector is
//! `FF` (erased). Fields ([`Field`]):
//!
//! | tag | field | value |
//! |---|---|---|
//! | `01` | Wi-Fi SSID | UTF-8, 1..=32 bytes, **required** |
//! | `02` | Wi-Fi password | UTF-8, empty (open network) or 8..=64 bytes |
//! | `03` | hub URL | `ws://host[:port][/path]`, `mqtt://host[:port]` or `http://host[:port]/path` (OTA), at most 256 bytes, **required** |
//! | `04` | device token | at most 1024 bytes of visible ASCII and spaces, sent as `Authorization` |
//! | `05` | Client-Id | 16 bytes, a binary UUID; if absent the firmware derives one from the MAC (see below) |
//! | `06` | status LED | 2 bytes: GPIO number, flags (bit 0: active low) |
//! | `07` | device key | 16..=64 bytes of visible ASCII (no spaces), a secret sent as `Mcpdev-Device-Key` |
//! | `08` | hub CA | one X.509 certificate in DER, 64..=2048 bytes; then the hub URL must be `wss://`, `https://` or `mqtts://` |
//! | `09` | flash time | 8 bytes, Unix seconds: the device's lower bound of "now" for certificate expiry |
//!
//! **Why version 2.** A version-1 reader skips unknown tags, so it would drop the hub CA and
//! connect in plain text. A record with a CA is therefore version 2, which such a reader refuses
//! ("unsupported version") instead; this crate reads both, and writes version 1 when there is no
//! CA, so records for plain hubs stay what older firmware reads.
//!
//! Unknown tags are skipped (a newer host may add optional fields); a tag that appears twice, a
//! field longer than its maximum or a value that breaks its rule makes the whole record invalid,
//! each with its own [`DecodeError`].
//!
//! # Client-Id and device key
//!
//! `mcpdev flash` writes a random Client-Id (tag `05`) and a random device key (tag `07`) for each
//! board, and keeps both per MAC in the host's state directory, so re-flashing a board keeps its
//! identity. The firmware sends the device key as `Mcpdev-Device-Key` with its OTA check-ins and
//! `/activate` polls; the hub binds the admission request to it, so a stranger who knows the MAC and
//! even the Client-Id cannot collect the device's token. The key is a secret: [`Provisioning`]'s
//! `Debug` never shows it.
//!
//! A record without a Client-Id (written by an older host) makes the firmware derive one from the
//! station MAC: a UUID version 5 of the lower-case `aa:bb:cc:dd:ee:ff` text in the OID namespace
//! ([`client_id_from_mac`]). That fallback is **predictable**: anyone who knows the MAC (every Wi-Fi
//! neighbour does) can compute it, so it proves nothing. Such a board should be re-flashed.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

mod crc;
/// The cargo-fuzz entry point (`firmware/fuzz/`); not an API.
#[doc(hidden)]
pub mod fuzz;
mod identity;
mod record;
mod url;

pub use crc::crc32;
pub use identity::{client_id_from_mac, format_mac, format_uuid};
pub use record::{
    DecodeError, EncodeError, Field, LedConfig, MAX_DEVICE_KEY_LEN, MAX_HUB_CA_LEN, MIN_DEVICE_KEY_LEN, Provisioning, decode,
};

/// Shows a URL without its query (which may carry credentials), for logs.
pub fn loggable_url(url: &str) -> impl core::fmt::Display + '_ {
    record::UrlWithoutQuery(url)
}
pub use url::{HubUrl, Scheme, UrlError};

/// Flash offset of the provisioning sector.
pub const FLASH_OFFSET: u32 = 0xE000;
/// Flash sector size; the record occupies (at most) one.
pub const SECTOR_SIZE: usize = 4096;
/// The largest record, header and CRC included.
pub const MAX_RECORD_LEN: usize = SECTOR_SIZE;
/// `"MCPP"`.
pub const MAGIC: [u8; 4] = *b"MCPP";
/// The newest format version this crate writes and reads: 2, for records with a hub CA.
pub const VERSION: u8 = 2;
/// The version of records without a hub CA (what firmware from before TLS reads); still read.
pub const VERSION_PLAIN: u8 = 1;
/// The partition label the firmware looks for.
pub const PARTITION_LABEL: &str = "mcpdev";
/// The partition's type (`0x40`, the first custom type ESP-IDF allows) and subtype.
pub const PARTITION_TYPE: u8 = 0x40;
pub const PARTITION_SUBTYPE: u8 = 0x00;

/// The partition table that reserves the provisioning sector (ESP-IDF CSV format, as
/// `espflash --partition-table` takes it). Also in `firmware/partitions.csv`.
pub const PARTITIONS_CSV: &str = "\
# mcpdev partition table: espflash's default layout, with the provisioning sector carved out of nvs.
# Name,   Type, SubType, Offset,  Size
nvs,      data, nvs,     0x9000,  0x5000
mcpdev,   0x40, 0x00,    0xE000,  0x1000
phy_init, data, phy,     0xF000,  0x1000
factory,  app,  factory, 0x10000, 0x3F0000
";
