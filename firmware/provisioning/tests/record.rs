//! The provisioning record on the host: round trips, the exact bytes, and every way a record in
//! flash can be wrong, each with its own error.

use proptest::prelude::*;
use provisioning::{
    DecodeError, EncodeError, FLASH_OFFSET, Field, LedConfig, MAX_RECORD_LEN, PARTITIONS_CSV, Provisioning, SECTOR_SIZE,
    crc32, decode,
};

fn full() -> Provisioning {
    Provisioning {
        wifi_ssid: "home-net".into(),
        wifi_password: "correct horse".into(),
        hub_url: "ws://192.168.1.20:8000/xiaozhi/v1/".into(),
        token: "s3cr3t-token".into(),
        client_id: Some([0x11; 16]),
        led: Some(LedConfig { gpio: 8, active_low: true }),
        device_key: "k3y-0123456789abcdef".into(),
        hub_ca: Vec::new(),
        flashed_at: 0,
    }
}

/// Bytes shaped like a DER certificate (the record checks only the outer SEQUENCE; the firmware
/// parses the rest when it connects).
fn fake_ca() -> Vec<u8> {
    let mut der = vec![0x30, 0x82, 0x01, 0x80];
    der.resize(0x184, 0xA5);
    der
}

fn with_ca() -> Provisioning {
    Provisioning {
        hub_url: "https://192.168.1.20:8443/xiaozhi/ota/".into(),
        hub_ca: fake_ca(),
        flashed_at: 1_795_000_000,
        ..full()
    }
}

fn minimal() -> Provisioning {
    Provisioning { wifi_ssid: "open".into(), hub_url: "ws://hub/".into(), ..Default::default() }
}

/// A record with arbitrary header values and fields, and a correct CRC.
fn raw(version: u8, fields: &[(u8, &[u8])]) -> Vec<u8> {
    let body: Vec<u8> = fields
        .iter()
        .flat_map(|(tag, v)| {
            let mut f = vec![*tag];
            f.extend_from_slice(&(v.len() as u16).to_le_bytes());
            f.extend_from_slice(v);
            f
        })
        .collect();
    let mut out = b"MCPP".to_vec();
    out.push(version);
    out.push(0);
    out.extend_from_slice(&(body.len() as u16).to_le_bytes());
    out.extend_from_slice(&body);
    let crc = crc32(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Recomputes the CRC after a test edited the record.
fn fix_crc(rec: &mut [u8]) {
    let end = rec.len() - 4;
    let crc = crc32(&rec[..end]);
    rec[end..].copy_from_slice(&crc.to_le_bytes());
}

#[test]
fn round_trip_full_and_minimal() {
    for p in [full(), minimal()] {
        let bytes = p.encode().unwrap();
        assert_eq!(decode(&bytes).unwrap(), p);
        let sector = p.encode_sector().unwrap();
        assert_eq!(sector.len(), SECTOR_SIZE);
        assert!(sector[bytes.len()..].iter().all(|b| *b == 0xFF));
        assert_eq!(decode(&sector).unwrap(), p, "bytes after the record are ignored");
    }
}

#[test]
fn exact_bytes_of_a_minimal_record() {
    let bytes = minimal().encode().unwrap();
    let mut expected = vec![b'M', b'C', b'P', b'P', 1, 0, 19, 0];
    expected.extend_from_slice(&[0x01, 4, 0]);
    expected.extend_from_slice(b"open");
    expected.extend_from_slice(&[0x03, 9, 0]);
    expected.extend_from_slice(b"ws://hub/");
    let crc = crc32(&expected);
    expected.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(bytes, expected);
    assert_eq!(bytes, raw(1, &[(1, b"open"), (3, b"ws://hub/")]));
}

#[test]
fn an_erased_sector_says_nothing_was_provisioned() {
    assert_eq!(decode(&[0xFF; SECTOR_SIZE]), Err(DecodeError::Erased));
}

#[test]
fn bad_magic() {
    let mut rec = full().encode().unwrap();
    rec[0] = b'X';
    assert_eq!(decode(&rec), Err(DecodeError::BadMagic(*b"XCPP")));
    assert_eq!(decode(&[0u8; 64]), Err(DecodeError::BadMagic([0; 4])));
}

#[test]
fn bad_crc_anywhere() {
    let good = full().encode().unwrap();
    for i in 8..good.len() {
        let mut rec = good.clone();
        rec[i] ^= 0x40;
        assert!(matches!(decode(&rec), Err(DecodeError::BadCrc { .. })), "byte {i}");
    }
    // A flipped flags byte is covered too.
    let mut rec = good.clone();
    rec[5] = 1;
    assert!(matches!(decode(&rec), Err(DecodeError::BadCrc { .. })));
}

#[test]
fn truncated() {
    let rec = full().encode().unwrap();
    assert_eq!(decode(&rec[..5]), Err(DecodeError::Truncated { needed: 8, available: 5 }));
    let cut = rec.len() - 1;
    assert_eq!(decode(&rec[..cut]), Err(DecodeError::Truncated { needed: rec.len(), available: cut }));
    // A write that stopped half-way leaves erased flash after it: the CRC catches that.
    let mut half = rec.clone();
    for b in &mut half[rec.len() / 2..] {
        *b = 0xFF;
    }
    assert!(matches!(decode(&half), Err(DecodeError::BadCrc { .. })));
}

#[test]
fn wrong_version() {
    let rec = raw(3, &[(1, b"x"), (3, b"ws://hub/")]);
    assert_eq!(decode(&rec), Err(DecodeError::UnsupportedVersion(3)));
    let rec = raw(0, &[(1, b"x"), (3, b"ws://hub/")]);
    assert_eq!(decode(&rec), Err(DecodeError::UnsupportedVersion(0)));
}

#[test]
fn length_beyond_a_sector() {
    let mut rec = vec![0u8; MAX_RECORD_LEN + 16];
    rec[..4].copy_from_slice(b"MCPP");
    rec[4] = 1;
    rec[6..8].copy_from_slice(&4090u16.to_le_bytes());
    assert_eq!(decode(&rec), Err(DecodeError::BadLength { len: 4102, max: MAX_RECORD_LEN }));
}

#[test]
fn over_long_fields_are_refused_by_both_sides() {
    let cases: [(Field, usize); 6] = [
        (Field::WifiSsid, 33),
        (Field::WifiPassword, 65),
        (Field::HubUrl, 257),
        (Field::Token, 1025),
        (Field::ClientId, 17),
        (Field::DeviceKey, 65),
    ];
    for (field, len) in cases {
        let value = vec![b'a'; len];
        let mut fields: Vec<(u8, &[u8])> = vec![(1, b"ssid"), (3, b"ws://hub/")];
        fields.retain(|(t, _)| *t != field.tag());
        fields.push((field.tag(), &value));
        assert_eq!(
            decode(&raw(1, &fields)),
            Err(DecodeError::FieldTooLong { field, len, max: len - 1 }),
            "{field}"
        );
    }
    let mut p = minimal();
    p.wifi_ssid = "s".repeat(33);
    assert_eq!(p.encode(), Err(EncodeError::FieldTooLong { field: Field::WifiSsid, len: 33, max: 32 }));
    let mut p = minimal();
    p.token = "t".repeat(1025);
    assert_eq!(p.encode(), Err(EncodeError::FieldTooLong { field: Field::Token, len: 1025, max: 1024 }));
    let mut p = minimal();
    p.device_key = "k".repeat(65);
    assert_eq!(p.encode(), Err(EncodeError::FieldTooLong { field: Field::DeviceKey, len: 65, max: 64 }));
}

#[test]
fn malformed_duplicate_and_missing_fields() {
    // A field header that claims more bytes than the field area holds.
    let mut rec = raw(1, &[(1, b"ssid"), (3, b"ws://hub/")]);
    rec[9] = 200;
    fix_crc(&mut rec);
    assert_eq!(decode(&rec), Err(DecodeError::MalformedField { offset: 8 }));
    // A dangling byte after the last field.
    let mut rec = raw(1, &[(1, b"ssid"), (3, b"ws://hub/"), (0x7f, b"")]);
    let n = rec.len();
    rec.truncate(n - 4 - 2); // keep 1 byte of the last field header
    let body_len = (rec.len() - 8) as u16;
    rec[6..8].copy_from_slice(&body_len.to_le_bytes());
    rec.extend_from_slice(&[0; 4]);
    fix_crc(&mut rec);
    assert_eq!(decode(&rec), Err(DecodeError::MalformedField { offset: n - 4 - 3 }));

    let rec = raw(1, &[(1, b"a"), (3, b"ws://hub/"), (1, b"b")]);
    assert_eq!(decode(&rec), Err(DecodeError::DuplicateField(Field::WifiSsid)));
    assert_eq!(decode(&raw(1, &[(3, b"ws://hub/")])), Err(DecodeError::MissingField(Field::WifiSsid)));
    assert_eq!(decode(&raw(1, &[(1, b"x")])), Err(DecodeError::MissingField(Field::HubUrl)));
    assert_eq!(Provisioning::default().encode(), Err(EncodeError::MissingField(Field::WifiSsid)));
}

#[test]
fn invalid_values() {
    let bad: [(u8, &[u8], Field); 15] = [
        (1, b"", Field::WifiSsid),
        (1, b"\xff\xfe", Field::WifiSsid),
        (2, b"short", Field::WifiPassword),
        (2, &[b'z'; 64], Field::WifiPassword),
        (3, b"ftp://hub/", Field::HubUrl),
        (3, b"ws://hub:99999/", Field::HubUrl),
        (4, b"line\r\nX-Injected: 1", Field::Token),
        (5, &[0; 15], Field::ClientId),
        (6, &[8, 2], Field::Led),
        (7, b"", Field::DeviceKey),
        (7, b"fifteen-chars-x", Field::DeviceKey),
        (7, b"has a space in the key", Field::DeviceKey),
        (7, b"0123456789abcdef\r\nX-Injected: 1", Field::DeviceKey),
        (7, b"0123456789abcdef\x1b[2J", Field::DeviceKey),
        (7, "0123456789abcdef\u{e9}".as_bytes(), Field::DeviceKey),
    ];
    for (tag, value, field) in bad {
        let mut fields: Vec<(u8, &[u8])> = vec![(1, b"ssid"), (3, b"ws://hub/")];
        fields.retain(|(t, _)| *t != tag);
        fields.push((tag, value));
        match decode(&raw(1, &fields)) {
            Err(DecodeError::InvalidValue { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{field}: {other:?}"),
        }
    }
    let mut p = minimal();
    p.hub_url = "gopher://hub/".into();
    assert!(matches!(p.encode(), Err(EncodeError::InvalidValue { field: Field::HubUrl, .. })));
    // A 64-digit hex PSK and a token with a space are fine.
    let mut p = minimal();
    p.wifi_password = "0123456789abcdef".repeat(4);
    p.token = "Bearer abc".into();
    assert_eq!(decode(&p.encode().unwrap()).unwrap(), p);
    // The encoder applies the device key's rule too, and takes both ends of its range.
    for bad in ["short-key", "0123456789abcdef\n", "0123456789 abcdef"] {
        let mut p = minimal();
        p.device_key = bad.into();
        assert!(matches!(p.encode(), Err(EncodeError::InvalidValue { field: Field::DeviceKey, .. })), "{bad:?}");
    }
    for good in ["k".repeat(16), "~".repeat(64)] {
        let mut p = minimal();
        p.device_key = good;
        assert_eq!(decode(&p.encode().unwrap()).unwrap(), p);
    }
}

#[test]
fn a_record_from_an_older_host_has_no_device_key() {
    let p = decode(&raw(1, &[(1, b"ssid"), (3, b"ws://hub/")])).unwrap();
    assert_eq!(p.device_key, "");
    assert_eq!(p.client_id, None);
    // And the key is written as tag 07, after the fields older readers know.
    let mut p = minimal();
    p.device_key = "0123456789abcdef".into();
    let bytes = p.encode().unwrap();
    let tail = &bytes[bytes.len() - 4 - 19..bytes.len() - 4];
    assert_eq!(tail, b"\x07\x10\x000123456789abcdef");
}

#[test]
fn unknown_tags_from_a_newer_host_are_skipped() {
    let rec = raw(1, &[(1, b"ssid"), (0x42, b"future"), (3, b"ws://hub/")]);
    let p = decode(&rec).unwrap();
    assert_eq!((p.wifi_ssid.as_str(), p.hub_url.as_str()), ("ssid", "ws://hub/"));
}

#[test]
fn debug_output_hides_the_secrets() {
    let text = format!("{:?}", full());
    assert!(!text.contains("correct horse") && !text.contains("s3cr3t") && !text.contains("k3y-"), "{text}");
    assert!(text.contains("device_key: (20 bytes, redacted)"), "{text}");
    assert!(text.contains("home-net"));
    let mut p = full();
    p.hub_url = "ws://hub/x?token=abc".into();
    let text = format!("{p:?}");
    assert!(text.contains("ws://hub/x?(query redacted)") && !text.contains("abc"), "{text}");
    assert_eq!(provisioning::loggable_url("ws://h/?k=v").to_string(), "ws://h/?(query redacted)");
}

#[test]
fn the_partition_table_file_matches_the_crate() {
    let file = include_str!("../../partitions.csv");
    assert_eq!(file, PARTITIONS_CSV);
    let line = PARTITIONS_CSV.lines().find(|l| l.starts_with("mcpdev,")).unwrap();
    assert!(line.contains(&format!("{FLASH_OFFSET:#X}").replace("0X", "0x")), "{line}");
}

fn text(max: usize) -> impl Strategy<Value = String> {
    proptest::collection::vec(proptest::char::range(' ', '~'), 0..=max).prop_map(|v| v.into_iter().collect())
}

proptest! {
    #[test]
    fn any_valid_record_round_trips(
        ssid in "[a-zA-Z0-9 _-]{1,32}",
        password in prop_oneof![Just(String::new()), "[ -~]{8,63}"],
        host in "[a-z][a-z0-9-]{0,30}",
        port in 1u16..,
        path in "(/[a-z0-9._-]{0,20}){0,4}",
        token in text(1024),
        client_id in proptest::option::of(any::<[u8; 16]>()),
        led in proptest::option::of((0u8..=30, any::<bool>())),
        device_key in prop_oneof![Just(String::new()), "[!-~]{16,64}"],
        ca_tail in proptest::option::of(proptest::collection::vec(any::<u8>(), 63..2048)),
        flashed_at in any::<u64>(),
    ) {
        // With a CA the URL must be a TLS one; the largest of every field still fits a sector.
        let (scheme, hub_ca) = match ca_tail {
            Some(tail) => ("wss", [&[0x30][..], &tail].concat()),
            None => ("ws", Vec::new()),
        };
        let p = Provisioning {
            wifi_ssid: ssid,
            wifi_password: password,
            hub_url: format!("{scheme}://{host}:{port}{path}"),
            token,
            client_id,
            led: led.map(|(gpio, active_low)| LedConfig { gpio, active_low }),
            device_key,
            hub_ca,
            flashed_at,
        };
        let bytes = p.encode().unwrap();
        prop_assert!(bytes.len() <= MAX_RECORD_LEN);
        prop_assert_eq!(decode(&bytes).unwrap(), p);
    }

    #[test]
    fn decoding_garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = decode(&bytes);
        // Garbage behind a valid header (with a matching CRC) is rejected cleanly too.
        let mut rec = b"MCPP\x01\x00".to_vec();
        rec.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
        rec.extend_from_slice(&bytes);
        let crc = crc32(&rec);
        rec.extend_from_slice(&crc.to_le_bytes());
        let _ = decode(&rec);
    }
}

#[test]
fn a_record_with_a_hub_ca_is_version_2_and_round_trips() {
    let p = with_ca();
    let bytes = p.encode().unwrap();
    assert_eq!(bytes[4], 2, "a record with a CA is version 2, so a reader from before TLS refuses it instead of skipping the CA");
    assert_eq!(decode(&bytes).unwrap(), p);
    // Tags 08 (the DER as is) and 09 (u64 LE).
    let ca_at = bytes.windows(3).position(|w| w == [0x08, 0x84, 0x01]).expect("tag 08 with the CA's length");
    assert_eq!(&bytes[ca_at + 3..ca_at + 3 + p.hub_ca.len()], &p.hub_ca[..]);
    let t_at = bytes.windows(3).position(|w| w == [0x09, 0x08, 0x00]).expect("tag 09, 8 bytes");
    assert_eq!(&bytes[t_at + 3..t_at + 11], &1_795_000_000u64.to_le_bytes());
    // Without a CA the record stays version 1, byte for byte what older firmware reads.
    assert_eq!(full().encode().unwrap()[4], 1);
    // The CA is public but long: Debug shows its size only.
    let shown = format!("{p:?}");
    assert!(shown.contains("hub_ca: (388 bytes of DER)") && shown.contains("flashed_at: 1795000000"), "{shown}");
}

#[test]
fn version_1_records_from_older_hosts_still_decode() {
    let rec = raw(1, &[(1, b"lab"), (3, b"ws://hub:8000/xiaozhi/v1/"), (4, b"tok")]);
    let p = decode(&rec).unwrap();
    assert_eq!((p.hub_url.as_str(), p.token.as_str(), p.hub_ca.len(), p.flashed_at), ("ws://hub:8000/xiaozhi/v1/", "tok", 0, 0));
    // A version-2 record without a CA is read as well.
    let rec = raw(2, &[(1, b"lab"), (3, b"ws://hub/")]);
    assert!(decode(&rec).is_ok());
}

#[test]
fn a_hub_ca_with_a_plain_url_is_refused_both_ways() {
    for url in ["ws://hub:8000/xiaozhi/v1/", "http://hub:8000/xiaozhi/ota/", "mqtt://hub"] {
        let p = Provisioning { hub_url: url.into(), ..with_ca() };
        let err = p.encode().unwrap_err();
        assert!(
            matches!(err, EncodeError::InvalidValue { field: Field::HubUrl, reason } if reason.contains("only over TLS")),
            "{url}: {err}"
        );
        let ca = fake_ca();
        let rec = raw(2, &[(1, b"lab"), (3, url.as_bytes()), (8, &ca)]);
        let err = decode(&rec).unwrap_err();
        assert!(err.to_string().contains("connects only over TLS"), "{url}: {err}");
    }
    for url in ["wss://hub:8443/xiaozhi/v1/", "https://hub:8443/xiaozhi/ota/", "mqtts://hub"] {
        assert!(Provisioning { hub_url: url.into(), ..with_ca() }.encode().is_ok(), "{url}");
    }
}

#[test]
fn a_hub_ca_that_is_not_der_is_refused() {
    for bad in [b"-----BEGIN CERTIFICATE-----\nMIIB".repeat(4), vec![0x30; 10], vec![0x31; 300]] {
        let p = Provisioning { hub_ca: bad, ..with_ca() };
        assert!(matches!(p.encode(), Err(EncodeError::InvalidValue { field: Field::HubCa, .. })));
    }
    let p = Provisioning { hub_ca: vec![0x30; 2049], ..with_ca() };
    assert_eq!(p.encode(), Err(EncodeError::FieldTooLong { field: Field::HubCa, len: 2049, max: 2048 }));
    let rec = raw(2, &[(1, b"lab"), (3, b"wss://hub/"), (9, &[1, 2, 3])]);
    assert!(matches!(decode(&rec), Err(DecodeError::InvalidValue { field: Field::FlashedAt, .. })));
}
