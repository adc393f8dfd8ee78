//! The decoder and encoder against tungstenite, an independent implementation of RFC 6455: client
//! frames are made by tungstenite (masked, fragmented, split across reads anyhow) and must come out
//! as the messages that went in; the server's frames must parse in tungstenite as what was sent.

use std::io::Cursor;

use proptest::prelude::*;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{CloseCode, Control, Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::{Frame, FrameHeader};

use super::*;

const LIMIT: usize = 1 << 20;

/// One client frame, masked, as tungstenite writes it.
fn client(opcode: OpCode, payload: &[u8], fin: bool, mask: [u8; 4]) -> Vec<u8> {
    let header = FrameHeader { is_final: fin, opcode, mask: Some(mask), ..FrameHeader::default() };
    let frame = Frame::from_payload(header, payload.to_vec().into());
    let mut out = Vec::new();
    frame.format(&mut out).unwrap();
    out
}

fn text_frame(s: &str) -> Vec<u8> {
    client(OpCode::Data(Data::Text), s.as_bytes(), true, [1, 2, 3, 4])
}

fn decode(bytes: &[u8]) -> Result<Vec<Incoming>, (Vec<Incoming>, FrameError)> {
    let mut d = Decoder::new(LIMIT);
    let mut out = Vec::new();
    match d.feed(bytes, &mut out) {
        Ok(()) => Ok(out),
        Err(e) => Err((out, e)),
    }
}

fn error_of(bytes: &[u8]) -> FrameError {
    decode(bytes).expect_err("the stream is refused").1
}

#[test]
fn a_text_frame_fed_a_byte_at_a_time_comes_out_whole_and_leaves_nothing_held() {
    let bytes = text_frame("{\"type\":\"hello\"}");
    let mut d = Decoder::new(LIMIT);
    let mut out = Vec::new();
    for (i, b) in bytes.iter().enumerate() {
        d.feed(std::slice::from_ref(b), &mut out).unwrap();
        assert_eq!(out.is_empty(), i + 1 < bytes.len(), "byte {i}");
        assert_eq!(d.is_idle(), i + 1 == bytes.len(), "byte {i}");
    }
    assert_eq!(out, [Incoming::Text("{\"type\":\"hello\"}".into())]);
}

#[test]
fn a_fragmented_text_message_with_a_ping_between_its_frames_is_reassembled() {
    let word = "añb"; // the 2-byte ñ is cut between two frames
    let (a, b) = word.as_bytes().split_at(2);
    let mut bytes = client(OpCode::Data(Data::Text), a, false, [9, 8, 7, 6]);
    bytes.extend(client(OpCode::Control(Control::Ping), b"are you there", true, [5, 5, 5, 5]));
    bytes.extend(client(OpCode::Data(Data::Continue), b, true, [0xFF, 0, 0xFF, 0]));
    assert_eq!(decode(&bytes).unwrap(), [Incoming::Ping(b"are you there".to_vec()), Incoming::Text(word.into())]);
}

#[test]
fn binary_messages_keep_only_their_length_and_close_carries_its_code() {
    let mut bytes = client(OpCode::Data(Data::Binary), &[7; 300], false, [1, 1, 1, 1]);
    bytes.extend(client(OpCode::Data(Data::Continue), &[7; 200], true, [2, 2, 2, 2]));
    bytes.extend(client(OpCode::Control(Control::Pong), b"", true, [3, 3, 3, 3]));
    let mut close = Frame::close(Some(tokio_tungstenite::tungstenite::protocol::CloseFrame { code: CloseCode::Away, reason: "bye".into() }));
    close.header_mut().mask = Some([4, 4, 4, 4]);
    close.format(&mut bytes).unwrap();
    assert_eq!(decode(&bytes).unwrap(), [Incoming::Binary(500), Incoming::Pong, Incoming::Close(Some(1001))]);
}

#[test]
fn every_breach_of_the_rfc_is_refused_with_what_was_wrong() {
    let mut unmasked = Vec::new();
    Frame::message(b"hi".to_vec(), OpCode::Data(Data::Text), true).format(&mut unmasked).unwrap();
    assert_eq!(error_of(&unmasked), FrameError::Unmasked);

    let mut rsv = text_frame("x");
    rsv[0] |= 0x40;
    assert_eq!(error_of(&rsv), FrameError::ReservedBits(0x40));

    let mut unknown = text_frame("x");
    unknown[0] = 0x80 | 0x3;
    assert_eq!(error_of(&unknown), FrameError::UnknownOpcode(0x3));

    let long_ping = client(OpCode::Control(Control::Ping), &[0; 126], true, [1, 2, 3, 4]);
    assert_eq!(error_of(&long_ping), FrameError::BadControl { opcode: 0x9, len: 126, fin: true });
    let split_ping = client(OpCode::Control(Control::Ping), b"a", false, [1, 2, 3, 4]);
    assert_eq!(error_of(&split_ping), FrameError::BadControl { opcode: 0x9, len: 1, fin: false });

    let stray = client(OpCode::Data(Data::Continue), b"x", true, [1, 2, 3, 4]);
    assert_eq!(error_of(&stray), FrameError::StrayContinuation);

    let mut interleaved = client(OpCode::Data(Data::Text), b"a", false, [1, 2, 3, 4]);
    interleaved.extend(text_frame("b"));
    assert_eq!(error_of(&interleaved), FrameError::Interleaved);

    let bad_utf8 = client(OpCode::Data(Data::Text), &[0xC3, 0x28], true, [1, 2, 3, 4]);
    assert_eq!(error_of(&bad_utf8), FrameError::NotUtf8);

    // A 64-bit length with its top bit set, header only.
    let huge = [0x81, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4];
    assert_eq!(error_of(&huge), FrameError::BadLength);

    let mut after_close = client(OpCode::Control(Control::Close), b"", true, [1, 2, 3, 4]);
    after_close.extend(text_frame("late"));
    let (got, e) = decode(&after_close).unwrap_err();
    assert_eq!((got, e), (vec![Incoming::Close(None)], FrameError::AfterClose));
}

#[test]
fn a_message_over_the_limit_is_refused_by_its_header_before_its_bytes_arrive() {
    let mut d = Decoder::new(1000);
    let mut out = Vec::new();
    // Only the header of a 1001-byte frame: refused without waiting for (or keeping) a byte.
    let header = &client(OpCode::Data(Data::Text), &[b'a'; 1001], true, [1, 2, 3, 4])[..8];
    assert_eq!(d.feed(header, &mut out), Err(FrameError::TooLarge { len: 1001, limit: 1000 }));

    // Fragments that add up to more than the limit: refused at the fragment that crosses it.
    let mut d = Decoder::new(1000);
    let mut bytes = client(OpCode::Data(Data::Binary), &[0; 600], false, [1, 2, 3, 4]);
    bytes.extend(client(OpCode::Data(Data::Continue), &[0; 401], true, [1, 2, 3, 4]));
    assert_eq!(d.feed(&bytes, &mut out), Err(FrameError::TooLarge { len: 1001, limit: 1000 }));
    assert!(out.is_empty());

    // Exactly at the limit is fine.
    let mut d = Decoder::new(1000);
    d.feed(&client(OpCode::Data(Data::Text), &[b'a'; 1000], true, [1, 2, 3, 4]), &mut out).unwrap();
    assert_eq!(out, [Incoming::Text("a".repeat(1000))]);
}

#[test]
fn the_servers_frames_parse_in_tungstenite_as_what_was_sent() {
    for len in [0, 1, 125, 126, 127, 65_535, 65_536, 200_000] {
        let payload = "é".repeat(len / 2) + &"x".repeat(len % 2);
        let bytes = text(&payload);
        let mut cursor = Cursor::new(&bytes);
        let (header, length) = FrameHeader::parse(&mut cursor).unwrap().unwrap();
        assert!(header.is_final && header.mask.is_none() && header.opcode == OpCode::Data(Data::Text), "{len}: {header:?}");
        assert_eq!(length, payload.len() as u64);
        assert_eq!(&bytes[cursor.position() as usize..], payload.as_bytes());
    }
    let (header, length) = FrameHeader::parse(&mut Cursor::new(pong(b"p"))).unwrap().unwrap();
    assert_eq!((header.opcode, length), (OpCode::Control(Control::Pong), 1));
    let close_frame = close(Some(1000));
    let (header, length) = FrameHeader::parse(&mut Cursor::new(&close_frame)).unwrap().unwrap();
    assert_eq!((header.opcode, length, &close_frame[2..]), (OpCode::Control(Control::Close), 2, &[0x03, 0xE8][..]));
}

/// A message as a client might send it: its kind, payload, fragment sizes and masks.
fn message() -> impl Strategy<Value = (bool, Vec<u8>, Vec<usize>, [u8; 4])> {
    (any::<bool>(), prop::collection::vec(any::<u8>(), 0..3000), prop::collection::vec(1usize..700, 0..5), any::<[u8; 4]>())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Any mix of text and binary messages, each fragmented anyhow with pings between fragments,
    /// read in chunks of any size, comes out message for message.
    #[test]
    fn messages_survive_any_fragmentation_and_any_read_sizes(
        messages in prop::collection::vec(message(), 1..8),
        chunks in prop::collection::vec(1usize..2000, 1..20),
    ) {
        let mut bytes = Vec::new();
        let mut expected = Vec::new();
        for (is_text, payload, cuts, mask) in &messages {
            let payload = if *is_text { String::from_utf8_lossy(payload).into_owned().into_bytes() } else { payload.clone() };
            let mut pieces = Vec::new();
            let mut rest = &payload[..];
            for &cut in cuts {
                let (a, b) = rest.split_at(cut.min(rest.len()));
                pieces.push(a);
                rest = b;
            }
            pieces.push(rest);
            for (i, piece) in pieces.iter().enumerate() {
                let opcode = match (i, is_text) {
                    (0, true) => OpCode::Data(Data::Text),
                    (0, false) => OpCode::Data(Data::Binary),
                    _ => OpCode::Data(Data::Continue),
                };
                bytes.extend(client(opcode, piece, i + 1 == pieces.len(), *mask));
                if i + 1 < pieces.len() {
                    bytes.extend(client(OpCode::Control(Control::Ping), &mask[..], true, *mask));
                    expected.push(Incoming::Ping(mask.to_vec()));
                }
            }
            expected.push(if *is_text { Incoming::Text(String::from_utf8(payload).unwrap()) } else { Incoming::Binary(payload.len()) });
        }
        let mut d = Decoder::new(LIMIT);
        let mut got = Vec::new();
        let mut rest = &bytes[..];
        for &n in chunks.iter().cycle() {
            if rest.is_empty() {
                break;
            }
            let (a, b) = rest.split_at(n.min(rest.len()));
            d.feed(a, &mut got).unwrap();
            rest = b;
        }
        prop_assert_eq!(got, expected);
        prop_assert!(d.is_idle());
    }

    /// Whatever bytes arrive, the decoder ends in a message or an error, never a panic, and never
    /// holds more than the limit.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..4000)) {
        let mut d = Decoder::new(1000);
        let mut out = Vec::new();
        let _ = d.feed(&bytes, &mut out);
        if let Some(Message::Text(t)) = &d.message {
            prop_assert!(t.len() <= 1000);
        }
    }
}

/// A server's frame, unmasked, as tungstenite writes it.
fn server(opcode: OpCode, payload: &[u8], fin: bool) -> Vec<u8> {
    let header = FrameHeader { is_final: fin, opcode, mask: None, ..FrameHeader::default() };
    let mut out = Vec::new();
    Frame::from_payload(header, payload.to_vec().into()).format(&mut out).unwrap();
    out
}

#[test]
fn a_relay_keeps_binary_payloads_and_reads_a_servers_unmasked_frames() {
    let audio: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
    // From a device (masked), fragmented across two frames and read a byte at a time.
    let mut stream = client(OpCode::Data(Data::Binary), &audio[..1000], false, [9, 8, 7, 6]);
    stream.extend(client(OpCode::Data(Data::Continue), &audio[1000..], true, [1, 1, 2, 3]));
    let mut d = Decoder::relaying(LIMIT, false);
    let mut out = Vec::new();
    for b in &stream {
        d.feed(std::slice::from_ref(b), &mut out).unwrap();
    }
    assert_eq!(out, vec![Incoming::Data(audio.clone())]);
    // From an upstream (unmasked): text and binary come out as sent; a masked frame is refused.
    let mut up = Decoder::relaying(LIMIT, true);
    let mut out = Vec::new();
    let mut stream = server(OpCode::Data(Data::Text), br#"{"type":"hello"}"#, true);
    stream.extend(server(OpCode::Data(Data::Binary), &audio, true));
    up.feed(&stream, &mut out).unwrap();
    assert_eq!(out, vec![Incoming::Text(r#"{"type":"hello"}"#.into()), Incoming::Data(audio)]);
    let mut up = Decoder::relaying(LIMIT, true);
    assert_eq!(up.feed(&text_frame("x"), &mut Vec::new()), Err(FrameError::Masked));
    // And a relay's decoder of a device still wants masks, and keeps the size limit.
    let mut dev = Decoder::relaying(16, false);
    assert_eq!(dev.feed(&server(OpCode::Data(Data::Text), b"x", true), &mut Vec::new()), Err(FrameError::Unmasked));
    let mut dev = Decoder::relaying(16, false);
    assert!(matches!(dev.feed(&client(OpCode::Data(Data::Binary), &[0; 17], true, [1, 2, 3, 4]), &mut Vec::new()), Err(FrameError::TooLarge { .. })));
}

#[test]
fn a_relays_client_frames_are_masked_and_read_back_as_sent() {
    for len in [0usize, 1, 125, 126, 65_535, 65_536] {
        let payload: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let frame = client_frame(Kind::Binary, &payload);
        assert_ne!(frame[1] & 0x80, 0, "masked");
        let mut d = Decoder::relaying(LIMIT, false);
        let mut out = Vec::new();
        d.feed(&frame, &mut out).unwrap();
        assert_eq!(out, vec![Incoming::Data(payload.clone())], "{len} bytes");
        // The server's own frame of the same payload parses in tungstenite as sent.
        let bytes = server_frame(Kind::Binary, &payload);
        let mut cursor = Cursor::new(&bytes);
        let (header, length) = FrameHeader::parse(&mut cursor).unwrap().unwrap();
        assert!(header.mask.is_none() && header.opcode == OpCode::Data(Data::Binary) && length == len as u64);
        assert_eq!(&bytes[cursor.position() as usize..], payload.as_slice());
    }
    let close = client_frame(Kind::Close, &4000u16.to_be_bytes());
    let mut d = Decoder::relaying(LIMIT, false);
    let mut out = Vec::new();
    d.feed(&close, &mut out).unwrap();
    assert_eq!(out, vec![Incoming::Close(Some(4000))]);
}

/// A long answer's fragments read as one text message: a text frame, continuations, the last
/// final, each carrying its part as written.
#[test]
fn a_fragmented_text_answer_is_a_text_frame_then_continuations() {
    let parts = ["[1,", &"2".repeat(70_000), ",3]"];
    let bytes: Vec<u8> = parts.iter().enumerate().flat_map(|(i, p)| text_fragment(p, i == 0, i == parts.len() - 1)).collect();
    let mut cursor = Cursor::new(&bytes);
    let mut seen = Vec::new();
    while (cursor.position() as usize) < bytes.len() {
        let (header, len) = FrameHeader::parse(&mut cursor).unwrap().unwrap();
        assert!(header.mask.is_none());
        let start = cursor.position() as usize;
        let end = start + len as usize;
        seen.push((header.is_final, header.opcode, String::from_utf8(bytes[start..end].to_vec()).unwrap()));
        cursor.set_position(end as u64);
    }
    let expected: Vec<(bool, OpCode, String)> = vec![
        (false, OpCode::Data(Data::Text), parts[0].into()),
        (false, OpCode::Data(Data::Continue), parts[1].into()),
        (true, OpCode::Data(Data::Continue), parts[2].into()),
    ];
    assert_eq!(seen, expected);
    // One fragment alone is an ordinary final text frame.
    assert_eq!(text_fragment("{}", true, true), text("{}"));
}
