//! The receive-side frame parser, fed the way the firmware feeds it: arbitrary chunks of bytes.

use edge_ws::{FrameHeader, FrameType};
use proptest::prelude::*;
use ws_frames::{Frame, FrameError, Frames};

/// One frame on the wire, optionally masked.
fn frame(kind: FrameType, payload: &[u8], mask: Option<u32>) -> Vec<u8> {
    let header = FrameHeader { frame_type: kind, payload_len: payload.len() as u64, mask_key: mask };
    let mut out = vec![0u8; FrameHeader::MAX_LEN];
    let n = header.serialize(&mut out).unwrap();
    out.truncate(n);
    let start = out.len();
    out.extend_from_slice(payload);
    header.mask(&mut out[start..], 0);
    out
}

/// What the parser made of it, in an owned form.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Got {
    Text(String),
    Ping(Vec<u8>),
    Close(Option<u16>),
}

/// Feeds `wire` in chunks of the given sizes (cycled) through a buffer of `cap` bytes.
fn run(wire: &[u8], cap: usize, chunks: &[usize]) -> Result<Vec<Got>, FrameError> {
    let mut buf = vec![0u8; cap];
    let mut frames = Frames::default();
    let mut got = Vec::new();
    let mut pos = 0;
    let mut i = 0;
    while pos < wire.len() {
        let room = cap - frames.filled;
        assert!(room > 0, "the parser left the buffer full");
        let n = chunks[i % chunks.len()].max(1).min(room).min(wire.len() - pos);
        i += 1;
        buf[frames.filled..frames.filled + n].copy_from_slice(&wire[pos..pos + n]);
        frames.filled += n;
        pos += n;
        while let Some(f) = frames.next(&mut buf)? {
            match f {
                Frame::Text(t) => got.push(Got::Text(t.to_string())),
                Frame::Ping(p) => got.push(Got::Ping(p.to_vec())),
                Frame::Close(c) => got.push(Got::Close(c)),
                Frame::Skipped => {}
            }
            frames.consume(&mut buf);
        }
    }
    Ok(got)
}

fn text(s: &str) -> Got {
    Got::Text(s.to_string())
}

#[test]
fn single_and_back_to_back_frames() {
    let mut wire = frame(FrameType::Text(false), br#"{"type":"hello"}"#, None);
    wire.extend(frame(FrameType::Ping, b"p1", None));
    wire.extend(frame(FrameType::Text(false), b"second", Some(0x1234_5678)));
    wire.extend(frame(FrameType::Pong, b"ignored", None));
    wire.extend(frame(FrameType::Close, &1000u16.to_be_bytes(), None));
    let expected = vec![text(r#"{"type":"hello"}"#), Got::Ping(b"p1".to_vec()), text("second"), Got::Close(Some(1000))];
    assert_eq!(run(&wire, 256, &[4096]).unwrap(), expected, "all in one read");
    assert_eq!(run(&wire, 256, &[1]).unwrap(), expected, "one byte per read");
    assert_eq!(run(&wire, 256, &[3, 7, 2]).unwrap(), expected, "odd chunks");
}

#[test]
fn sixteen_bit_lengths_and_a_full_buffer() {
    let big = "x".repeat(1000);
    let wire = frame(FrameType::Text(false), big.as_bytes(), None);
    assert_eq!(wire.len(), 1004);
    assert_eq!(run(&wire, 1004, &[100]).unwrap(), vec![text(&big)], "exactly the buffer size");
    assert_eq!(run(&wire, 1003, &[100]), Err(FrameError::TooLarge));
}

#[test]
fn fragmented_text_with_a_ping_in_between() {
    let mut wire = frame(FrameType::Text(true), b"{\"type\":", None);
    wire.extend(frame(FrameType::Ping, b"", None));
    wire.extend(frame(FrameType::Continue(false), b"\"mcp\",", Some(7)));
    wire.extend(frame(FrameType::Continue(true), b"\"x\":1}", None));
    wire.extend(frame(FrameType::Text(false), b"after", None));
    let expected = vec![Got::Ping(vec![]), text("{\"type\":\"mcp\",\"x\":1}"), text("after")];
    for chunks in [&[4096][..], &[1], &[5, 2]] {
        assert_eq!(run(&wire, 64, chunks).unwrap(), expected, "{chunks:?}");
    }
}

#[test]
fn binary_audio_is_skipped_even_when_larger_than_the_buffer() {
    let mut wire = frame(FrameType::Binary(false), &[0xAB; 5000], None);
    wire.extend(frame(FrameType::Binary(true), &[1; 100], None));
    wire.extend(frame(FrameType::Continue(false), &[2; 3000], None));
    wire.extend(frame(FrameType::Continue(true), &[3; 10], None));
    wire.extend(frame(FrameType::Text(false), b"still in sync", None));
    for chunks in [&[4096][..], &[1000], &[7, 300]] {
        assert_eq!(run(&wire, 512, chunks).unwrap(), vec![text("still in sync")], "{chunks:?}");
    }
}

#[test]
fn errors() {
    let wire = frame(FrameType::Text(false), &[b'a'; 600], None);
    assert_eq!(run(&wire, 512, &[4096]), Err(FrameError::TooLarge));
    let wire = frame(FrameType::Text(false), b"\xff\xfe", None);
    assert_eq!(run(&wire, 512, &[4096]), Err(FrameError::NotUtf8));
    let wire = frame(FrameType::Continue(true), b"x", None);
    assert_eq!(run(&wire, 512, &[4096]), Err(FrameError::StrayContinuation));
    // A fragmented text message that outgrows the buffer.
    let mut wire = frame(FrameType::Text(true), &[b'a'; 300], None);
    wire.extend(frame(FrameType::Continue(true), &[b'b'; 300], None));
    assert_eq!(run(&wire, 512, &[4096]), Err(FrameError::TooLarge));
    // Reserved opcode 3.
    assert_eq!(run(&[0x83, 0x00], 512, &[4096]), Err(FrameError::Header));
}

#[test]
fn close_without_a_code() {
    assert_eq!(run(&frame(FrameType::Close, b"", None), 64, &[1]).unwrap(), vec![Got::Close(None)]);
}

proptest! {
    /// Any mix of text, ping and binary frames, cut into any chunks, comes out the same.
    #[test]
    fn chunking_never_changes_the_result(
        msgs in proptest::collection::vec((0u8..3, "[ -~]{0,300}", any::<bool>()), 1..12),
        chunks in proptest::collection::vec(1usize..700, 1..6),
    ) {
        let mut wire = Vec::new();
        let mut expected = Vec::new();
        for (kind, body, masked) in &msgs {
            let mask = masked.then_some(0xA5A5_5A5A);
            match kind {
                0 => { wire.extend(frame(FrameType::Text(false), body.as_bytes(), mask)); expected.push(text(body)); }
                1 => {
                    let p = &body.as_bytes()[..body.len().min(125)];
                    wire.extend(frame(FrameType::Ping, p, mask));
                    expected.push(Got::Ping(p.to_vec()));
                }
                _ => wire.extend(frame(FrameType::Binary(false), &body.repeat(5).into_bytes(), mask)),
            }
        }
        prop_assert_eq!(run(&wire, 512, &chunks).unwrap(), expected);
    }

    #[test]
    fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..2000), chunk in 1usize..600) {
        let _ = run(&bytes, 256, &[chunk]);
    }
}
