//! The cargo-fuzz entry point for the provisioning decoder (`firmware/fuzz/`), replayed on stable
//! by `tests/fuzz_corpus.rs`. Panics only when an invariant breaks: that panic is the finding.

use alloc::string::ToString;
use alloc::vec::Vec;

use crate::{HubUrl, MAGIC, MAX_RECORD_LEN, VERSION, crc32, decode, loggable_url};

/// Decodes the input as a sector, then again as the field area of a record with a right header
/// and CRC (random bytes almost never pass the CRC, so this is what reaches the field parser), and
/// parses the input as a hub URL.
///
/// Invariants: no panic; a decoded record validates, and encoding it decodes to the same record;
/// the loggable form of its hub URL never shows the query (where tokens go).
pub fn decode_record(data: &[u8]) {
    check(data);
    let fields = &data[..data.len().min(MAX_RECORD_LEN - 12)];
    let mut record = Vec::with_capacity(fields.len() + 12);
    record.extend_from_slice(&MAGIC);
    record.push(VERSION);
    record.push(data.first().copied().unwrap_or_default());
    record.extend_from_slice(&(fields.len() as u16).to_le_bytes());
    record.extend_from_slice(fields);
    let crc = crc32(&record);
    record.extend_from_slice(&crc.to_le_bytes());
    check(&record);
    if let Ok(text) = core::str::from_utf8(data) {
        let _ = HubUrl::parse(text);
    }
}

fn check(bytes: &[u8]) {
    let Ok(p) = decode(bytes) else { return };
    if let Err(e) = p.validate() {
        panic!("decode accepted a record that does not validate: {e}");
    }
    let again = p.encode().map(|b| decode(&b));
    assert!(matches!(again, Ok(Ok(ref q)) if *q == p), "a decoded record does not survive encode + decode");
    if let Some((base, _)) = p.hub_url.split_once('?') {
        let shown = loggable_url(&p.hub_url).to_string();
        assert_eq!(shown.strip_suffix("?(query redacted)"), Some(base), "the loggable hub URL shows its query");
    }
}
