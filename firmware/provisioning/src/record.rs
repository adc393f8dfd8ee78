//! The record itself: [`Provisioning`], its encoder and [`decode`].

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use crate::crc::crc32;
use crate::url::HubUrl;
use crate::{MAGIC, MAX_RECORD_LEN, SECTOR_SIZE, VERSION, VERSION_PLAIN};

/// Bytes before the fields: magic, version, flags, field-area length.
const HEADER_LEN: usize = 8;
const CRC_LEN: usize = 4;
/// Bytes before each field's value: tag and u16 length.
const FIELD_HEAD_LEN: usize = 3;
/// The largest field area a record can have.
pub(crate) const MAX_FIELDS_LEN: usize = MAX_RECORD_LEN - HEADER_LEN - CRC_LEN;

/// One field of the record, with its tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    WifiSsid,
    WifiPassword,
    HubUrl,
    Token,
    ClientId,
    Led,
    DeviceKey,
    HubCa,
    FlashedAt,
}

impl Field {
    pub const ALL: [Field; 9] = [
        Field::WifiSsid,
        Field::WifiPassword,
        Field::HubUrl,
        Field::Token,
        Field::ClientId,
        Field::Led,
        Field::DeviceKey,
        Field::HubCa,
        Field::FlashedAt,
    ];

    pub const fn tag(self) -> u8 {
        match self {
            Field::WifiSsid => 0x01,
            Field::WifiPassword => 0x02,
            Field::HubUrl => 0x03,
            Field::Token => 0x04,
            Field::ClientId => 0x05,
            Field::Led => 0x06,
            Field::DeviceKey => 0x07,
            Field::HubCa => 0x08,
            Field::FlashedAt => 0x09,
        }
    }

    pub fn from_tag(tag: u8) -> Option<Field> {
        Field::ALL.into_iter().find(|f| f.tag() == tag)
    }

    /// The longest value allowed, in bytes.
    pub const fn max_len(self) -> usize {
        match self {
            Field::WifiSsid => 32,
            Field::WifiPassword => 64,
            Field::HubUrl => 256,
            Field::Token => 1024,
            Field::ClientId => 16,
            Field::Led => 2,
            Field::DeviceKey => MAX_DEVICE_KEY_LEN,
            Field::HubCa => MAX_HUB_CA_LEN,
            Field::FlashedAt => 8,
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            Field::WifiSsid => "Wi-Fi SSID",
            Field::WifiPassword => "Wi-Fi password",
            Field::HubUrl => "hub URL",
            Field::Token => "device token",
            Field::ClientId => "Client-Id",
            Field::Led => "LED setting",
            Field::DeviceKey => "device key",
            Field::HubCa => "hub CA certificate",
            Field::FlashedAt => "flash time",
        }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The shortest device key (a shorter one is guessable).
pub const MIN_DEVICE_KEY_LEN: usize = 16;
/// The longest device key (the hub takes up to 128).
pub const MAX_DEVICE_KEY_LEN: usize = 64;

/// The largest hub CA certificate (DER). The hub's own CA (`serve --tls auto`, ECDSA P-256) is
/// about 400 bytes.
pub const MAX_HUB_CA_LEN: usize = 2048;

/// The status LED the brightness tool drives (LEDC PWM).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LedConfig {
    pub gpio: u8,
    /// The LED lights when the pin is low (e.g. the ESP32-C3 SuperMini's blue LED).
    pub active_low: bool,
}

/// What a device is provisioned with.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Provisioning {
    pub wifi_ssid: String,
    /// Empty for an open network.
    pub wifi_password: String,
    /// `ws://host[:port]/path` (the hub), `mqtt://host[:port]` (a broker) or `http://host[:port]/path` (an OTA endpoint).
    pub hub_url: String,
    /// Empty when the hub needs none (then no `Authorization` header is sent).
    pub token: String,
    /// Overrides the MAC-derived Client-Id.
    pub client_id: Option<[u8; 16]>,
    /// Overrides the board's default LED pin.
    pub led: Option<LedConfig>,
    /// The secret sent as `Mcpdev-Device-Key` with OTA check-ins and `/activate` polls, which the
    /// hub binds the admission request to. Empty: none (records from older hosts).
    pub device_key: String,
    /// The hub's CA certificate (DER). Non-empty: the device connects only over TLS
    /// (`wss://`, `https://`, `mqtts://`) and only to a hub whose certificate this CA signed for
    /// the name or address it dialled; a plain `ws://`/`http://`/`mqtt://` URL, from the record
    /// or from an OTA answer, is refused. Records with a CA are format version 2.
    pub hub_ca: Vec<u8>,
    /// When the board was flashed, in Unix seconds (0: unknown). The device has no clock of its own;
    /// this is its lower bound for "now", so a hub certificate that expired before that is refused.
    pub flashed_at: u64,
}

/// Secrets stay out of logs.
impl fmt::Debug for Provisioning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Provisioning")
            .field("wifi_ssid", &self.wifi_ssid)
            .field("wifi_password", &Redacted(self.wifi_password.len()))
            .field("hub_url", &UrlWithoutQuery(&self.hub_url))
            .field("token", &Redacted(self.token.len()))
            .field("client_id", &self.client_id.as_ref().map(crate::format_uuid))
            .field("led", &self.led)
            .field("device_key", &Redacted(self.device_key.len()))
            .field("hub_ca", &HubCaLen(self.hub_ca.len()))
            .field("flashed_at", &self.flashed_at)
            .finish()
    }
}

struct Redacted(usize);

/// The CA is public; the log shows only whether there is one.
struct HubCaLen(usize);

impl fmt::Debug for HubCaLen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 { f.write_str("(none)") } else { write!(f, "({} bytes of DER)", self.0) }
    }
}

/// A URL's query may carry credentials (`?token=`): logs show only that there is one.
pub(crate) struct UrlWithoutQuery<'a>(pub &'a str);

impl fmt::Debug for UrlWithoutQuery<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for UrlWithoutQuery<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.split_once('?') {
            Some((base, _)) => write!(f, "{base}?(query redacted)"),
            None => f.write_str(self.0),
        }
    }
}

impl fmt::Debug for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 { f.write_str("(empty)") } else { write!(f, "({} bytes, redacted)", self.0) }
    }
}

/// Why a record could not be read. Each failure has its own variant so a device can say exactly
/// what is wrong with its flash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// The sector is erased (starts with `FF FF FF FF`): nothing was ever provisioned.
    Erased,
    /// The input ends before the record does.
    Truncated { needed: usize, available: usize },
    /// Something else than `"MCPP"` at the start.
    BadMagic([u8; 4]),
    /// A format version this decoder does not know.
    UnsupportedVersion(u8),
    /// The header announces a record larger than a sector.
    BadLength { len: usize, max: usize },
    /// The checksum does not match: the record was damaged or only partly written.
    BadCrc { stored: u32, computed: u32 },
    /// A field's header or value runs past the end of the field area.
    MalformedField { offset: usize },
    /// The same field twice.
    DuplicateField(Field),
    /// A field longer than its maximum.
    FieldTooLong { field: Field, len: usize, max: usize },
    /// A field that breaks its rule (not UTF-8, wrong size, bad URL, …).
    InvalidValue { field: Field, reason: &'static str },
    /// A required field is absent.
    MissingField(Field),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Erased => f.write_str("the provisioning sector is erased: nothing has been provisioned"),
            DecodeError::Truncated { needed, available } => {
                write!(f, "the record is truncated: {needed} bytes needed, {available} available")
            }
            DecodeError::BadMagic(m) => write!(f, "no provisioning record here (magic {m:02x?}, expected \"MCPP\")"),
            DecodeError::UnsupportedVersion(v) => {
                write!(f, "provisioning record version {v} is not supported (this firmware reads versions {VERSION_PLAIN} to {VERSION})")
            }
            DecodeError::BadLength { len, max } => write!(f, "the record claims {len} bytes, more than the {max} allowed"),
            DecodeError::BadCrc { stored, computed } => {
                write!(f, "the record is corrupt: CRC-32 {stored:08x} stored, {computed:08x} computed")
            }
            DecodeError::MalformedField { offset } => write!(f, "malformed field at byte {offset} of the record"),
            DecodeError::DuplicateField(field) => write!(f, "the {field} appears twice"),
            DecodeError::FieldTooLong { field, len, max } => {
                write!(f, "the {field} is {len} bytes long, at most {max} are allowed")
            }
            DecodeError::InvalidValue { field, reason } => write!(f, "invalid {field}: {reason}"),
            DecodeError::MissingField(field) => write!(f, "the {field} is missing"),
        }
    }
}

impl core::error::Error for DecodeError {}

/// Why a record could not be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EncodeError {
    FieldTooLong { field: Field, len: usize, max: usize },
    InvalidValue { field: Field, reason: &'static str },
    MissingField(Field),
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncodeError::FieldTooLong { field, len, max } => {
                write!(f, "the {field} is {len} bytes long, at most {max} are allowed")
            }
            EncodeError::InvalidValue { field, reason } => write!(f, "invalid {field}: {reason}"),
            EncodeError::MissingField(field) => write!(f, "the {field} is required"),
        }
    }
}

impl core::error::Error for EncodeError {}

/// A field-level problem, shared by the encoder and the decoder so both apply the same rules.
enum Problem {
    TooLong { len: usize, max: usize },
    Invalid(&'static str),
}

/// Checks one field's value against its rule.
fn check(field: Field, value: &[u8]) -> Result<(), Problem> {
    let max = field.max_len();
    if value.len() > max {
        return Err(Problem::TooLong { len: value.len(), max });
    }
    let text = || core::str::from_utf8(value).map_err(|_| Problem::Invalid("not UTF-8"));
    match field {
        Field::WifiSsid => {
            text()?;
            if value.is_empty() {
                return Err(Problem::Invalid("empty"));
            }
        }
        Field::WifiPassword => {
            text()?;
            match value.len() {
                0 => {}
                1..=7 => return Err(Problem::Invalid("a WPA2 passphrase has 8 to 63 characters")),
                64 if !value.iter().all(u8::is_ascii_hexdigit) => {
                    return Err(Problem::Invalid("a 64-character password must be the PSK in hex"));
                }
                _ => {}
            }
        }
        Field::HubUrl => {
            HubUrl::parse(text()?).map_err(|e| Problem::Invalid(e.as_str()))?;
        }
        Field::Token => {
            if !value.iter().all(|b| (0x20..0x7f).contains(b)) {
                return Err(Problem::Invalid("only printable ASCII can go into an HTTP header"));
            }
        }
        Field::ClientId => {
            if value.len() != 16 {
                return Err(Problem::Invalid("a Client-Id is a 16-byte UUID"));
            }
        }
        Field::DeviceKey => {
            if value.len() < MIN_DEVICE_KEY_LEN {
                return Err(Problem::Invalid("a device key has 16 to 64 characters"));
            }
            if !value.iter().all(u8::is_ascii_graphic) {
                return Err(Problem::Invalid("a device key is visible ASCII only (no spaces or controls)"));
            }
        }
        Field::HubCa => {
            // A DER certificate is a SEQUENCE with a long-form length; the firmware parses the
            // rest when it connects (and refuses a CA it cannot use, with the reason).
            if value.len() < 64 || value[0] != 0x30 {
                return Err(Problem::Invalid("the hub CA must be one X.509 certificate in DER (convert a PEM file first)"));
            }
        }
        Field::FlashedAt => {
            if value.len() != 8 {
                return Err(Problem::Invalid("the flash time is 8 bytes (Unix seconds, little-endian)"));
            }
        }
        Field::Led => {
            if value.len() != 2 {
                return Err(Problem::Invalid("the LED setting is 2 bytes: GPIO, flags"));
            }
            if value[1] & !1 != 0 {
                return Err(Problem::Invalid("unknown LED flags"));
            }
        }
    }
    Ok(())
}

/// A record with a hub CA must name a TLS URL: the CA is there so the device never talks to its
/// hub in clear text.
fn check_tls(hub_url: &str, hub_ca: &[u8]) -> Result<(), &'static str> {
    let tls = HubUrl::parse(hub_url).is_ok_and(|u| u.scheme.is_tls());
    if !hub_ca.is_empty() && !tls {
        return Err("a device with a hub CA connects only over TLS: the hub URL must be wss://, https:// or mqtts://");
    }
    Ok(())
}

impl Provisioning {
    /// The fields as the record stores them, in tag order; absent optional fields are left out.
    fn fields(&self) -> Vec<(Field, Vec<u8>)> {
        let mut v = Vec::new();
        v.push((Field::WifiSsid, self.wifi_ssid.as_bytes().to_vec()));
        if !self.wifi_password.is_empty() {
            v.push((Field::WifiPassword, self.wifi_password.as_bytes().to_vec()));
        }
        v.push((Field::HubUrl, self.hub_url.as_bytes().to_vec()));
        if !self.token.is_empty() {
            v.push((Field::Token, self.token.as_bytes().to_vec()));
        }
        if let Some(id) = self.client_id {
            v.push((Field::ClientId, id.to_vec()));
        }
        if let Some(led) = self.led {
            v.push((Field::Led, alloc::vec![led.gpio, u8::from(led.active_low)]));
        }
        if !self.device_key.is_empty() {
            v.push((Field::DeviceKey, self.device_key.as_bytes().to_vec()));
        }
        if !self.hub_ca.is_empty() {
            v.push((Field::HubCa, self.hub_ca.clone()));
        }
        if self.flashed_at != 0 {
            v.push((Field::FlashedAt, self.flashed_at.to_le_bytes().to_vec()));
        }
        v
    }

    /// The format version this record needs: 2 when it carries a hub CA (a version-1 reader
    /// would skip the CA as an unknown field and connect without TLS), else 1, which older
    /// firmware reads too.
    pub fn version(&self) -> u8 {
        if self.hub_ca.is_empty() { VERSION_PLAIN } else { VERSION }
    }

    /// Checks every field as the decoder would.
    pub fn validate(&self) -> Result<(), EncodeError> {
        if self.wifi_ssid.is_empty() {
            return Err(EncodeError::MissingField(Field::WifiSsid));
        }
        if self.hub_url.is_empty() {
            return Err(EncodeError::MissingField(Field::HubUrl));
        }
        for (field, value) in self.fields() {
            check(field, &value).map_err(|p| match p {
                Problem::TooLong { len, max } => EncodeError::FieldTooLong { field, len, max },
                Problem::Invalid(reason) => EncodeError::InvalidValue { field, reason },
            })?;
        }
        check_tls(&self.hub_url, &self.hub_ca).map_err(|reason| EncodeError::InvalidValue { field: Field::HubUrl, reason })
    }

    /// The record's bytes (header, fields, CRC), without padding.
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        self.validate()?;
        let fields = self.fields();
        let fields_len: usize = fields.iter().map(|(_, v)| FIELD_HEAD_LEN + v.len()).sum();
        // The field maxima add up to well under a sector, so a valid record always fits.
        debug_assert!(fields_len <= MAX_FIELDS_LEN);
        let mut out = Vec::with_capacity(HEADER_LEN + fields_len + CRC_LEN);
        out.extend_from_slice(&MAGIC);
        out.push(self.version());
        out.push(0);
        out.extend_from_slice(&(fields_len as u16).to_le_bytes());
        for (field, value) in &fields {
            out.push(field.tag());
            out.extend_from_slice(&(value.len() as u16).to_le_bytes());
            out.extend_from_slice(value);
        }
        let crc = crc32(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        Ok(out)
    }

    /// The whole sector: the record, then `FF` up to [`SECTOR_SIZE`] (what erased flash reads as),
    /// ready to be written at [`FLASH_OFFSET`](crate::FLASH_OFFSET).
    pub fn encode_sector(&self) -> Result<Vec<u8>, EncodeError> {
        let mut out = self.encode()?;
        out.resize(SECTOR_SIZE, 0xFF);
        Ok(out)
    }
}

/// Reads a record from the start of `bytes` (typically the whole sector; bytes after the record
/// are ignored).
pub fn decode(bytes: &[u8]) -> Result<Provisioning, DecodeError> {
    if bytes.len() >= MAGIC.len() && bytes[..MAGIC.len()].iter().all(|b| *b == 0xFF) {
        return Err(DecodeError::Erased);
    }
    if bytes.len() < HEADER_LEN {
        return Err(DecodeError::Truncated { needed: HEADER_LEN, available: bytes.len() });
    }
    let magic: [u8; 4] = [bytes[0], bytes[1], bytes[2], bytes[3]];
    if magic != MAGIC {
        return Err(DecodeError::BadMagic(magic));
    }
    if !(VERSION_PLAIN..=VERSION).contains(&bytes[4]) {
        return Err(DecodeError::UnsupportedVersion(bytes[4]));
    }
    let fields_len = usize::from(u16::from_le_bytes([bytes[6], bytes[7]]));
    let total = HEADER_LEN + fields_len + CRC_LEN;
    if total > MAX_RECORD_LEN {
        return Err(DecodeError::BadLength { len: total, max: MAX_RECORD_LEN });
    }
    if bytes.len() < total {
        return Err(DecodeError::Truncated { needed: total, available: bytes.len() });
    }
    let body_end = HEADER_LEN + fields_len;
    let stored = u32::from_le_bytes([bytes[body_end], bytes[body_end + 1], bytes[body_end + 2], bytes[body_end + 3]]);
    let computed = crc32(&bytes[..body_end]);
    if stored != computed {
        return Err(DecodeError::BadCrc { stored, computed });
    }

    let mut p = Provisioning::default();
    let mut seen = [false; Field::ALL.len()];
    let mut pos = HEADER_LEN;
    while pos < body_end {
        if body_end - pos < FIELD_HEAD_LEN {
            return Err(DecodeError::MalformedField { offset: pos });
        }
        let tag = bytes[pos];
        let len = usize::from(u16::from_le_bytes([bytes[pos + 1], bytes[pos + 2]]));
        let start = pos + FIELD_HEAD_LEN;
        if body_end - start < len {
            return Err(DecodeError::MalformedField { offset: pos });
        }
        let value = &bytes[start..start + len];
        pos = start + len;
        let Some(field) = Field::from_tag(tag) else {
            continue; // an optional field from a newer host
        };
        let index = Field::ALL.iter().position(|f| *f == field).unwrap_or_default();
        if core::mem::replace(&mut seen[index], true) {
            return Err(DecodeError::DuplicateField(field));
        }
        check(field, value).map_err(|problem| match problem {
            Problem::TooLong { len, max } => DecodeError::FieldTooLong { field, len, max },
            Problem::Invalid(reason) => DecodeError::InvalidValue { field, reason },
        })?;
        // `check` has verified UTF-8 for the text fields and ASCII for the token and the key.
        let text = || String::from(core::str::from_utf8(value).unwrap_or_default());
        match field {
            Field::WifiSsid => p.wifi_ssid = text(),
            Field::WifiPassword => p.wifi_password = text(),
            Field::HubUrl => p.hub_url = text(),
            Field::Token => p.token = text(),
            Field::ClientId => {
                let mut id = [0u8; 16];
                id.copy_from_slice(value);
                p.client_id = Some(id);
            }
            Field::Led => p.led = Some(LedConfig { gpio: value[0], active_low: value[1] & 1 != 0 }),
            Field::DeviceKey => p.device_key = text(),
            Field::HubCa => p.hub_ca = value.to_vec(),
            Field::FlashedAt => {
                let mut t = [0u8; 8];
                t.copy_from_slice(value);
                p.flashed_at = u64::from_le_bytes(t);
            }
        }
    }
    for required in [Field::WifiSsid, Field::HubUrl] {
        let index = Field::ALL.iter().position(|f| *f == required).unwrap_or_default();
        if !seen[index] {
            return Err(DecodeError::MissingField(required));
        }
    }
    check_tls(&p.hub_url, &p.hub_ca).map_err(|reason| DecodeError::InvalidValue { field: Field::HubUrl, reason })?;
    Ok(p)
}
