//! WebSocket frames (RFC 6455) as the hub reads them from a device and writes them to it.
//!
//! [`Decoder`] is fed whatever a read returned and hands back whole messages. Between messages it
//! holds no buffer at all (only the few header bytes of a frame a read cut in two), so an idle
//! device costs the hub nothing here, whatever size its largest frame was. The encoder writes the
//! server's frames, never masked; a long text answer may go out fragmented ([`text_fragment`]:
//! a text frame, then continuations, the last one final), so its writer holds one fragment at a
//! time, never the whole message. Pure, no I/O.
//!
//! A relay ([`Decoder::relaying`]) reads either side of a device's session with its upstream: it
//! keeps binary payloads (audio is passed on byte for byte, [`Incoming::Data`]), and reading the
//! upstream it is the client, so the server's frames must be unmasked; [`client_frame`] writes
//! the masked frames a client sends.
//!
//! What a client sends is checked as RFC 6455 requires of a server: every frame masked, no
//! reserved bits (no extension is negotiated), known opcodes, control frames final and at most
//! 125 bytes, continuations only inside a fragmented message, text that is UTF-8 once whole, and
//! no message over the decoder's limit. A violation is an error and the connection ends.

use std::fmt;

/// Opcodes (RFC 6455 §5.2).
const CONTINUATION: u8 = 0x0;
const TEXT: u8 = 0x1;
const BINARY: u8 = 0x2;
const CLOSE: u8 = 0x8;
const PING: u8 = 0x9;
const PONG: u8 = 0xA;

/// Longest a control frame's payload may be.
const MAX_CONTROL: u64 = 125;

/// A whole message from the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incoming {
    Text(String),
    /// A binary message (xiaozhi audio): only its length is kept.
    Binary(usize),
    /// A binary message, whole, from a relaying decoder ([`Decoder::relaying`]).
    Data(Vec<u8>),
    Ping(Vec<u8>),
    Pong,
    /// The client closes, with its status code if it gave one.
    Close(Option<u16>),
}

/// Why a client's stream of frames cannot be read on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    Unmasked,
    /// A server's frame is masked (RFC 6455 §5.1: a client must close then).
    Masked,
    ReservedBits(u8),
    UnknownOpcode(u8),
    BadControl { opcode: u8, len: u64, fin: bool },
    BadLength,
    TooLarge { len: u64, limit: usize },
    StrayContinuation,
    Interleaved,
    NotUtf8,
    AfterClose,
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unmasked => write!(f, "a frame from the client is not masked (RFC 6455 §5.1)"),
            Self::Masked => write!(f, "a frame from the server is masked (RFC 6455 §5.1)"),
            Self::ReservedBits(bits) => write!(f, "a frame sets reserved bits {bits:#x} without a negotiated extension"),
            Self::UnknownOpcode(op) => write!(f, "a frame has the unknown opcode {op:#x}"),
            Self::BadControl { opcode, len, fin } => {
                write!(f, "a control frame (opcode {opcode:#x}) must be final and at most 125 bytes; this one is {len} bytes{}", if *fin { "" } else { " and fragmented" })
            }
            Self::BadLength => write!(f, "a frame's 64-bit length has its most significant bit set"),
            Self::TooLarge { len, limit } => write!(f, "a message of {len} bytes or more is over the {limit}-byte limit"),
            Self::StrayContinuation => write!(f, "a continuation frame arrived outside a fragmented message"),
            Self::Interleaved => write!(f, "a new message began before the last one's final frame"),
            Self::NotUtf8 => write!(f, "a text message is not valid UTF-8"),
            Self::AfterClose => write!(f, "a frame arrived after the client's close frame"),
        }
    }
}

impl std::error::Error for FrameError {}

/// The frame whose payload is being read.
#[derive(Debug, Clone, Copy)]
struct Frame {
    opcode: u8,
    fin: bool,
    mask: [u8; 4],
    /// Payload bytes read so far (also the mask's phase).
    read: u64,
    len: u64,
}

/// A fragmented or partly read message.
#[derive(Debug)]
enum Message {
    Text(Vec<u8>),
    Binary(u64),
    /// A binary message whose bytes are kept (a relaying decoder).
    Data(Vec<u8>),
}

/// Cuts a client's byte stream into messages; see the module docs.
#[derive(Debug)]
pub struct Decoder {
    limit: usize,
    head: [u8; 14],
    head_len: u8,
    frame: Option<Frame>,
    message: Option<Message>,
    /// The payload of the control frame being read (at most 125 bytes).
    control: Vec<u8>,
    closed: bool,
    /// Binary payloads are kept ([`Incoming::Data`]), not only counted.
    keep_binary: bool,
    /// The peer is a server: its frames must be unmasked (else a client: masked).
    from_server: bool,
}

impl Decoder {
    /// A decoder that refuses messages over `limit` bytes (text and binary alike).
    pub fn new(limit: usize) -> Self {
        Self { limit, head: [0; 14], head_len: 0, frame: None, message: None, control: Vec::new(), closed: false, keep_binary: false, from_server: false }
    }

    /// A relay's decoder: binary payloads are kept, and `from_server` reads a server's (unmasked)
    /// frames, as the client of an upstream does.
    pub fn relaying(limit: usize, from_server: bool) -> Self {
        Self { keep_binary: true, from_server, ..Self::new(limit) }
    }

    /// Bytes of a mask key in this peer's frame headers.
    fn mask_len(&self) -> usize {
        if self.from_server { 0 } else { 4 }
    }

    /// Whether nothing is held between messages (no partial frame, no partial message).
    pub fn is_idle(&self) -> bool {
        self.head_len == 0 && self.frame.is_none() && self.message.is_none()
    }

    /// Reads `input`, pushing each message it completes to `out`. On an error, `out` holds the
    /// messages before it, and the stream cannot go on. Nothing is read after a close frame.
    pub fn feed(&mut self, mut input: &[u8], out: &mut Vec<Incoming>) -> Result<(), FrameError> {
        while !input.is_empty() {
            if self.closed {
                return Err(FrameError::AfterClose);
            }
            match self.frame {
                None => {
                    let taken = self.read_header(input)?;
                    input = &input[taken..];
                }
                Some(frame) => {
                    let take = (frame.len - frame.read).min(input.len() as u64) as usize;
                    self.payload(frame, &input[..take]);
                    input = &input[take..];
                }
            }
            if let Some(frame) = self.frame
                && frame.read == frame.len
            {
                self.frame = None;
                if let Some(message) = self.end_frame(frame)? {
                    out.push(message);
                }
            }
        }
        Ok(())
    }

    /// Takes header bytes from `input`; once the header is whole, starts its frame. Returns how
    /// many bytes it took.
    fn read_header(&mut self, input: &[u8]) -> Result<usize, FrameError> {
        let mut taken = 0;
        loop {
            let have = self.head_len as usize;
            let want = if have < 2 { 2 } else { 2 + extended_len(self.head[1]) + self.mask_len() };
            if have == want {
                break;
            }
            let n = (want - have).min(input.len() - taken);
            if n == 0 {
                return Ok(taken);
            }
            self.head[have..have + n].copy_from_slice(&input[taken..taken + n]);
            self.head_len += n as u8;
            taken += n;
            if self.head_len == 2 && (self.head[1] & 0x80 != 0) == self.from_server {
                return Err(if self.from_server { FrameError::Masked } else { FrameError::Unmasked });
            }
        }
        self.head_len = 0;
        self.start_frame()?;
        Ok(taken)
    }

    /// Checks a whole header against what came before and starts reading its payload.
    fn start_frame(&mut self) -> Result<(), FrameError> {
        let (b0, b1) = (self.head[0], self.head[1]);
        let fin = b0 & 0x80 != 0;
        let opcode = b0 & 0x0F;
        if b0 & 0x70 != 0 {
            return Err(FrameError::ReservedBits(b0 & 0x70));
        }
        let ext = extended_len(b1);
        let len = match ext {
            0 => u64::from(b1 & 0x7F),
            2 => u64::from(u16::from_be_bytes([self.head[2], self.head[3]])),
            _ => u64::from_be_bytes(self.head[2..10].try_into().expect("8 bytes")),
        };
        if len >> 63 != 0 {
            return Err(FrameError::BadLength);
        }
        // A server's frames carry no mask: a zero key leaves them as they are.
        let mask = if self.from_server { [0; 4] } else { self.head[2 + ext..6 + ext].try_into().expect("4 bytes") };
        let limit = self.limit;
        let too_large = |so_far: u64| FrameError::TooLarge { len: so_far.saturating_add(len), limit };
        match opcode {
            CLOSE | PING | PONG => {
                if !fin || len > MAX_CONTROL {
                    return Err(FrameError::BadControl { opcode, len, fin });
                }
                self.control.clear();
            }
            TEXT | BINARY => {
                if self.message.is_some() {
                    return Err(FrameError::Interleaved);
                }
                if len > self.limit as u64 {
                    return Err(too_large(0));
                }
                self.message = Some(match opcode {
                    TEXT => Message::Text(Vec::new()),
                    _ if self.keep_binary => Message::Data(Vec::new()),
                    _ => Message::Binary(0),
                });
            }
            CONTINUATION => {
                let so_far = match &self.message {
                    Some(Message::Text(t) | Message::Data(t)) => t.len() as u64,
                    Some(Message::Binary(n)) => *n,
                    None => return Err(FrameError::StrayContinuation),
                };
                if so_far.saturating_add(len) > self.limit as u64 {
                    return Err(too_large(so_far));
                }
            }
            _ => return Err(FrameError::UnknownOpcode(opcode)),
        }
        self.frame = Some(Frame { opcode, fin, mask, read: 0, len });
        Ok(())
    }

    /// Unmasks payload bytes into the message or control frame they belong to.
    fn payload(&mut self, frame: Frame, bytes: &[u8]) {
        let phase = frame.read;
        let unmasked = bytes.iter().enumerate().map(|(i, b)| b ^ frame.mask[((phase + i as u64) & 3) as usize]);
        match (frame.opcode, &mut self.message) {
            (TEXT | CONTINUATION, Some(Message::Text(text))) | (BINARY | CONTINUATION, Some(Message::Data(text))) => text.extend(unmasked),
            (BINARY | CONTINUATION, Some(Message::Binary(n))) => *n += bytes.len() as u64,
            _ => self.control.extend(unmasked),
        }
        if let Some(f) = self.frame.as_mut() {
            f.read += bytes.len() as u64;
        }
    }

    /// A frame's payload is all read: the message it ends, if any.
    fn end_frame(&mut self, frame: Frame) -> Result<Option<Incoming>, FrameError> {
        match frame.opcode {
            PING => return Ok(Some(Incoming::Ping(std::mem::take(&mut self.control)))),
            PONG => return Ok(Some(Incoming::Pong)),
            CLOSE => {
                self.closed = true;
                let code = (self.control.len() >= 2).then(|| u16::from_be_bytes([self.control[0], self.control[1]]));
                return Ok(Some(Incoming::Close(code)));
            }
            _ => {}
        }
        if !frame.fin {
            return Ok(None);
        }
        Ok(match self.message.take() {
            Some(Message::Text(bytes)) => Some(Incoming::Text(String::from_utf8(bytes).map_err(|_| FrameError::NotUtf8)?)),
            Some(Message::Binary(n)) => Some(Incoming::Binary(n as usize)),
            Some(Message::Data(bytes)) => Some(Incoming::Data(bytes)),
            None => None,
        })
    }
}

/// Bytes of extended payload length that follow the second header byte.
fn extended_len(b1: u8) -> usize {
    match b1 & 0x7F {
        126 => 2,
        127 => 8,
        _ => 0,
    }
}

/// A final, unmasked frame as a server sends it.
fn frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = head(opcode, payload.len(), 0, 0);
    out.extend_from_slice(payload);
    out
}

/// A frame header for `len` bytes of payload (`mask_bit` 0x80 for a client's), with room for
/// `extra` more bytes.
fn head(opcode: u8, len: usize, mask_bit: u8, extra: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 14 + extra);
    out.push(0x80 | opcode);
    match len {
        0..=125 => out.push(mask_bit | len as u8),
        126..=0xFFFF => {
            out.push(mask_bit | 126);
            out.extend_from_slice(&(len as u16).to_be_bytes());
        }
        _ => {
            out.push(mask_bit | 127);
            out.extend_from_slice(&(len as u64).to_be_bytes());
        }
    }
    out
}

/// What a relay passes on, as either side's frame: a text or binary message, or the control
/// frames it answers or ends with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Text,
    Binary,
    Pong,
    Close,
}

impl Kind {
    fn opcode(self) -> u8 {
        match self {
            Kind::Text => TEXT,
            Kind::Binary => BINARY,
            Kind::Pong => PONG,
            Kind::Close => CLOSE,
        }
    }
}

/// A final frame as a client sends it: masked with a fresh key (RFC 6455 §5.3).
pub fn client_frame(kind: Kind, payload: &[u8]) -> Vec<u8> {
    let key = fastrand::u32(..).to_be_bytes();
    let mut out = head(kind.opcode(), payload.len(), 0x80, 4);
    out.extend_from_slice(&key);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i & 3]));
    out
}

/// A final frame as a server sends it (unmasked).
pub fn server_frame(kind: Kind, payload: &[u8]) -> Vec<u8> {
    frame(kind.opcode(), payload)
}

/// A text frame.
pub fn text(payload: &str) -> Vec<u8> {
    frame(TEXT, payload.as_bytes())
}

/// One fragment of a text message (RFC 6455 §5.4): the first is a text frame, the others
/// continuations; `fin` on the last. Fragments of one message must not be interleaved with
/// another message's frames (control frames may come between them).
pub fn text_fragment(payload: &str, first: bool, fin: bool) -> Vec<u8> {
    let mut out = head(if first { TEXT } else { CONTINUATION }, payload.len(), 0, 0);
    if !fin {
        out[0] &= 0x7F;
    }
    out.extend_from_slice(payload.as_bytes());
    out
}

/// The answer to a ping (at most 125 bytes, as the decoder guarantees).
pub fn pong(payload: &[u8]) -> Vec<u8> {
    frame(PONG, payload)
}

/// A close frame, with a status code if one is given.
pub fn close(code: Option<u16>) -> Vec<u8> {
    match code {
        Some(c) => frame(CLOSE, &c.to_be_bytes()),
        None => frame(CLOSE, &[]),
    }
}

#[cfg(test)]
#[path = "ws_frame_tests.rs"]
mod tests;
