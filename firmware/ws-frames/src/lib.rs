//! Incoming WebSocket frames, cut out of a receive buffer.
//!
//! The firmware reads whatever the TCP socket has into a buffer and asks [`Frames::next`] for
//! complete frames. Nothing here does I/O, so a read that is cancelled (by a timer or a button
//! in a `select`) loses nothing, and all of it is tested on the host.
//!
//! - Text messages come back as `&str`, also when the server fragmented them (reassembled, with
//!   control frames allowed in between, as RFC 6455 permits).
//! - Binary frames (xiaozhi audio) are skipped, even ones larger than the buffer.
//! - A text message larger than the buffer, a bad header, a stray continuation or invalid UTF-8
//!   is an error: the connection cannot be trusted after it.
//! - Frames from the server are normally unmasked; a masked one is unmasked.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

use alloc::vec::Vec;

use edge_ws::{FrameHeader, FrameType};

/// Why the stream cannot go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    Header,
    TooLarge,
    StrayContinuation,
    NotUtf8,
}

impl FrameError {
    pub fn as_str(self) -> &'static str {
        match self {
            FrameError::Header => "malformed frame header",
            FrameError::TooLarge => "text message larger than the receive buffer",
            FrameError::StrayContinuation => "continuation frame outside a message",
            FrameError::NotUtf8 => "text message is not UTF-8",
        }
    }
}

impl core::fmt::Display for FrameError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One complete incoming frame, borrowing the receive buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    Text(&'a str),
    Ping(&'a [u8]),
    Close(Option<u16>),
    /// Binary audio, Pongs, parts of an over-long binary message: nothing to do.
    Skipped,
}

/// Cuts frames out of the bytes received so far; cancel-safe because it only looks at the buffer.
#[derive(Debug, Default)]
pub struct Frames {
    /// Bytes of the receive buffer in use: read into `buf[filled..]`, then add what was read.
    pub filled: usize,
    /// Bytes at the start of the buffer that the last frame occupied, dropped by `consume`.
    used: usize,
    /// Bytes of an over-long binary frame still to be thrown away.
    skip: u64,
    /// A fragmented text message being reassembled; `None` outside one.
    text: Option<Vec<u8>>,
    /// Inside a fragmented binary message.
    binary: bool,
}

impl Frames {
    /// The next complete frame in `buf[..filled]`, if any. Call [`consume`](Self::consume) after
    /// using it.
    pub fn next<'a>(&mut self, buf: &'a mut [u8]) -> Result<Option<Frame<'a>>, FrameError> {
        if self.skip > 0 {
            let n = self.skip.min(self.filled as u64) as usize;
            self.skip -= n as u64;
            self.used = n;
            return Ok(if n == 0 { None } else { Some(Frame::Skipped) });
        }
        let (header, header_len) = match FrameHeader::deserialize(&buf[..self.filled]) {
            Ok(h) => h,
            Err(edge_ws::Error::Incomplete(_)) => return Ok(None),
            Err(_) => return Err(FrameError::Header),
        };
        let total = header_len as u64 + header.payload_len;
        if total > buf.len() as u64 {
            let binary = matches!(header.frame_type, FrameType::Binary(_))
                || (matches!(header.frame_type, FrameType::Continue(_)) && self.binary);
            if !binary {
                return Err(FrameError::TooLarge);
            }
            self.binary = !header.frame_type.is_final();
            let n = self.filled;
            self.skip = total - n as u64;
            self.used = n;
            return Ok(Some(Frame::Skipped));
        }
        let total = total as usize;
        if self.filled < total {
            return Ok(None);
        }
        self.used = total;
        header.mask(&mut buf[header_len..total], 0);
        if let FrameType::Continue(last) = header.frame_type
            && !self.binary
        {
            let Some(text) = self.text.as_mut() else { return Err(FrameError::StrayContinuation) };
            if text.len() + (total - header_len) > buf.len() {
                return Err(FrameError::TooLarge);
            }
            text.extend_from_slice(&buf[header_len..total]);
            if !last {
                return Ok(Some(Frame::Skipped));
            }
            let whole = self.text.take().unwrap_or_default();
            return self.reassembled(buf, whole);
        }
        let payload: &'a [u8] = &buf[header_len..total];
        Ok(Some(match header.frame_type {
            FrameType::Text(false) => Frame::Text(core::str::from_utf8(payload).map_err(|_| FrameError::NotUtf8)?),
            FrameType::Text(true) => {
                self.text = Some(payload.to_vec());
                Frame::Skipped
            }
            FrameType::Binary(fragmented) => {
                self.binary = fragmented;
                Frame::Skipped
            }
            FrameType::Continue(last) => {
                self.binary = !last;
                Frame::Skipped
            }
            FrameType::Ping => Frame::Ping(payload),
            FrameType::Pong => Frame::Skipped,
            FrameType::Close => {
                Frame::Close((payload.len() >= 2).then(|| u16::from_be_bytes([payload[0], payload[1]])))
            }
        }))
    }

    /// Puts a reassembled text message at the start of the buffer, ahead of the bytes not yet
    /// parsed, and returns it.
    fn reassembled<'a>(&mut self, buf: &'a mut [u8], whole: Vec<u8>) -> Result<Option<Frame<'a>>, FrameError> {
        let rest = self.filled - self.used;
        if whole.len() + rest > buf.len() {
            return Err(FrameError::TooLarge);
        }
        buf.copy_within(self.used..self.filled, whole.len());
        buf[..whole.len()].copy_from_slice(&whole);
        self.filled = whole.len() + rest;
        self.used = whole.len();
        let text = core::str::from_utf8(&buf[..whole.len()]).map_err(|_| FrameError::NotUtf8)?;
        Ok(Some(Frame::Text(text)))
    }

    /// Drops the frame `next` returned from the front of the buffer.
    pub fn consume(&mut self, buf: &mut [u8]) {
        buf.copy_within(self.used..self.filled, 0);
        self.filled -= self.used;
        self.used = 0;
    }
}
