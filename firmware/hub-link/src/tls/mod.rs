//! TLS to the hub: `wss://`, `https://` (OTA) and `mqtts://`, with `embedded-tls` (TLS 1.3,
//! `TLS_AES_128_GCM_SHA256`, ECDHE on P-256; `no_std`, no allocator of its own) and a verifier of
//! our own against the hub CA from the provisioning record ([`x509`]).
//!
//! Rules it enforces:
//! - A device with a CA ([`Trust`]) talks to its hub only over TLS, and only to a certificate that
//!   CA issued for the host it dialled; there is no "accept anyway". A plain URL is refused
//!   before any byte is sent (`connect.rs`).
//! - The handshake must prove the server holds the leaf's key: `embedded-tls` accepts a server
//!   Finished even when Certificate and CertificateVerify never came, so [`open`] refuses a
//!   session whose CertificateVerify was not verified by us.
//! - TCP connect plus handshake run within [`crate::Timing::connect`].
//! - `embedded-tls` reads are not cancel-safe (a record header half-read is lost), so the
//!   sessions never drop a read in the middle of a record: [`Stream::read_or`] lets a timer or a
//!   button press win only at a record boundary, which [`Gate`] tracks.

pub mod x509;
mod x509_path;

use alloc::string::String;
use alloc::vec::Vec;
use core::cell::Cell;
use core::future::Future;
use core::pin::pin;

use embassy_futures::select::{Either, select};
use embassy_time::{Duration, Instant, with_timeout};
use embedded_io_async::{ErrorKind, ErrorType, Read, Write};
use embedded_tls::{
    Aes128GcmSha256, CertificateRef, CertificateVerifyRef, CryptoProvider, SignatureScheme, TlsConfig, TlsConnection,
    TlsContext, TlsError, TlsVerifier,
};
use sha2::{Digest, Sha256};

use self::x509::{Cert, Refusal};

/// The largest TLS record the device takes in: 2^14 bytes of plaintext plus the most a TLS 1.3
/// record may add (RFC 8446 §5.2), plus its header. The hub does not negotiate smaller records.
pub const READ_RECORD_LEN: usize = 16_384 + 256 + 5;
/// The device's own records: any size works (a larger message goes out as several records);
/// 4 KiB plus the per-record overhead keeps a `tools/list` page to two records.
pub const WRITE_RECORD_LEN: usize = 4096 + embedded_tls::TLS_RECORD_OVERHEAD;

/// What the device trusts: the hub's CA, and its lower bound of the current time.
pub struct Trust {
    ca: Vec<u8>,
    /// Unix seconds known to have passed at `floor_at` (0: nothing known).
    floor: Cell<u64>,
    floor_at: Cell<Instant>,
}

impl Trust {
    /// `ca` is the CA's DER; `flashed_at` the flash time from the provisioning record (0: unknown).
    /// A CA this firmware cannot use is refused here, with the reason.
    pub fn new(ca: Vec<u8>, flashed_at: u64) -> Result<Self, Refusal> {
        Cert::parse(&ca)?;
        Ok(Self { ca, floor: Cell::new(flashed_at), floor_at: Cell::new(Instant::now()) })
    }

    /// The device's lower bound of "now", in Unix seconds (0: unknown).
    pub fn now(&self) -> u64 {
        match self.floor.get() {
            0 => 0,
            t => t + self.floor_at.get().elapsed().as_secs(),
        }
    }

    /// Raises the lower bound: `unix` seconds is the time an authenticated hub stated (the OTA
    /// answer's `server_time`, read over a verified connection). Never moves it back.
    pub fn saw_time(&self, unix: u64) {
        if unix > self.now() {
            self.floor.set(unix);
            self.floor_at.set(Instant::now());
        }
    }

    fn ca(&self) -> Result<Cert<'_>, Refusal> {
        Cert::parse(&self.ca)
    }
}

/// Why a TLS connection could not be opened.
#[derive(Debug, Clone)]
pub enum TlsFailure {
    /// The hub's certificate was refused.
    Certificate(Refusal),
    /// The TLS protocol failed (an alert from the hub, a malformed message, I/O).
    Handshake(TlsError),
}

impl core::fmt::Display for TlsFailure {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            TlsFailure::Certificate(r) => write!(f, "{r}"),
            TlsFailure::Handshake(TlsError::HandshakeAborted(_, why)) => {
                write!(f, "the hub aborted the TLS handshake ({why:?}); it must offer TLS 1.3 with AES-128-GCM and P-256")
            }
            TlsFailure::Handshake(TlsError::Io(kind)) => write!(f, "TLS handshake: connection error ({kind:?})"),
            TlsFailure::Handshake(TlsError::IoError) => write!(f, "TLS handshake: the server closed the connection (is this port TLS?)"),
            TlsFailure::Handshake(e) => write!(f, "TLS handshake failed: {e:?}"),
        }
    }
}

/// The verifier `embedded-tls` calls during the handshake.
struct Verifier<'t> {
    trust: &'t Trust,
    host: &'t str,
    /// The leaf's key and the transcript up to the Certificate message, kept for CertificateVerify.
    leaf: Option<([u8; 65], Sha256)>,
    /// The reason the certificate was refused, for the log.
    refusal: Option<Refusal>,
    /// Set only once CertificateVerify checked out against a verified leaf.
    proven: bool,
}

impl TlsVerifier<Aes128GcmSha256> for Verifier<'_> {
    fn set_hostname_verification(&mut self, _hostname: &str) -> Result<(), TlsError> {
        // The host is ours already (the URL's, also sent as SNI when it is a name).
        Ok(())
    }

    fn verify_certificate(&mut self, transcript: &Sha256, cert: CertificateRef<'_>) -> Result<(), TlsError> {
        let mut chain: heapless::Vec<&[u8], 4> = heapless::Vec::new();
        for entry in cert.entries.iter() {
            if let embedded_tls::CertificateEntryRef::X509(der) = entry {
                // More than four certificates: the rest cannot be needed for a path of four.
                let _ = chain.push(*der);
            }
        }
        let verified = self.trust.ca().and_then(|ca| x509::verify_chain(&ca, &chain, self.host, self.trust.now()));
        match verified {
            Ok(leaf) => {
                let mut key = [0u8; 65];
                key.copy_from_slice(leaf.key());
                self.leaf = Some((key, transcript.clone()));
                Ok(())
            }
            Err(r) => {
                self.refusal = Some(r);
                Err(TlsError::InvalidCertificate)
            }
        }
    }

    fn verify_signature(&mut self, verify: CertificateVerifyRef<'_>) -> Result<(), TlsError> {
        let refuse = |v: &mut Self| {
            v.refusal = Some(Refusal::BadHandshakeSignature);
            Err(TlsError::InvalidSignature)
        };
        let Some((key, transcript)) = self.leaf.take() else { return refuse(self) };
        if verify.signature_scheme != SignatureScheme::EcdsaSecp256r1Sha256 {
            self.refusal = Some(Refusal::Unsupported);
            return Err(TlsError::InvalidSignatureScheme);
        }
        // RFC 8446 §4.4.3: 64 spaces, the context string, a zero byte, the transcript hash.
        let mut message = [0x20u8; 64 + 34 + 32];
        message[64..98].copy_from_slice(b"TLS 1.3, server CertificateVerify\0");
        message[98..].copy_from_slice(&transcript.finalize());
        if x509::verify_p256(&key, &message, verify.signature).is_err() {
            return refuse(self);
        }
        self.proven = true;
        Ok(())
    }
}

/// Random numbers for the handshake (the ECDHE key, the client random) from the board's
/// generator, which on the ESP32 is the hardware RNG (a true RNG while the radio is on).
struct BoardRng(fn() -> u32);

impl rand_core::RngCore for BoardRng {
    fn next_u32(&mut self) -> u32 {
        (self.0)()
    }
    fn next_u64(&mut self) -> u64 {
        u64::from((self.0)()) << 32 | u64::from((self.0)())
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for chunk in dest.chunks_mut(4) {
            let r = (self.0)().to_le_bytes();
            chunk.copy_from_slice(&r[..chunk.len()]);
        }
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

impl rand_core::CryptoRng for BoardRng {}

struct Provider<'t> {
    rng: BoardRng,
    verifier: Verifier<'t>,
}

impl CryptoProvider for Provider<'_> {
    type CipherSuite = Aes128GcmSha256;
    type Signature = &'static [u8];

    fn rng(&mut self) -> impl embedded_tls::CryptoRngCore {
        &mut self.rng
    }

    fn verifier(&mut self) -> Result<&mut impl TlsVerifier<Aes128GcmSha256>, TlsError> {
        Ok(&mut self.verifier)
    }
}

/// Where the incoming byte stream stands relative to TLS records: how much of a record header
/// has passed, and how much of its body is still to come.
#[derive(Debug, Clone, Copy, Default)]
pub struct RecordPos {
    header: [u8; 5],
    header_seen: u8,
    body_left: u16,
}

impl RecordPos {
    fn at_boundary(&self) -> bool {
        self.header_seen == 0 && self.body_left == 0
    }

    fn advance(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if self.body_left > 0 {
                let n = bytes.len().min(usize::from(self.body_left));
                self.body_left -= n as u16;
                bytes = &bytes[n..];
            } else {
                self.header[usize::from(self.header_seen)] = bytes[0];
                self.header_seen += 1;
                bytes = &bytes[1..];
                if self.header_seen == 5 {
                    self.header_seen = 0;
                    self.body_left = u16::from_be_bytes([self.header[3], self.header[4]]);
                }
            }
        }
    }
}

/// The TCP socket under the TLS connection, noting record boundaries as the bytes go by.
pub struct Gate<'p, S> {
    socket: S,
    pos: &'p Cell<RecordPos>,
}

impl<S: ErrorType> ErrorType for Gate<'_, S> {
    type Error = S::Error;
}

impl<S: Read> Read for Gate<'_, S> {
    async fn read(&mut self, buf: &mut [u8]) -> Result<usize, S::Error> {
        let n = self.socket.read(buf).await?;
        let mut pos = self.pos.get();
        pos.advance(&buf[..n]);
        self.pos.set(pos);
        Ok(n)
    }
}

impl<S: Write> Write for Gate<'_, S> {
    async fn write(&mut self, buf: &[u8]) -> Result<usize, S::Error> {
        self.socket.write(buf).await
    }
    async fn flush(&mut self) -> Result<(), S::Error> {
        self.socket.flush().await
    }
}

/// The connection to the hub or broker: plain TCP, or TLS over it.
#[allow(clippy::large_enum_variant, reason = "one per session, inside the attempt future; boxing it would put 1.3 KB more on the heap")]
pub enum Stream<'b, S: Read + Write> {
    Plain(S),
    Tls(TlsConnection<'b, Gate<'b, S>, Aes128GcmSha256>, &'b Cell<RecordPos>),
}

/// An error on a [`Stream`].
#[derive(Debug)]
pub enum LinkError<E> {
    Tcp(E),
    Tls(TlsError),
}

impl<E: core::fmt::Debug> core::fmt::Display for LinkError<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            LinkError::Tcp(e) => write!(f, "TCP: {e:?}"),
            LinkError::Tls(e) => write!(f, "TLS: {e:?}"),
        }
    }
}

impl<E: core::fmt::Debug> core::error::Error for LinkError<E> {}

impl<E: embedded_io_async::Error> embedded_io_async::Error for LinkError<E> {
    fn kind(&self) -> ErrorKind {
        match self {
            LinkError::Tcp(e) => e.kind(),
            LinkError::Tls(TlsError::Io(kind)) => *kind,
            LinkError::Tls(_) => ErrorKind::Other,
        }
    }
}

impl<S: Read + Write> ErrorType for Stream<'_, S> {
    type Error = LinkError<S::Error>;
}

impl<S: Read + Write> Read for Stream<'_, S> {
    async fn read(&mut self, buf: &mut [u8]) -> Result<usize, Self::Error> {
        match self {
            Stream::Plain(s) => s.read(buf).await.map_err(LinkError::Tcp),
            // A close_notify from the hub is the end of the stream.
            Stream::Tls(t, _) => match t.read(buf).await {
                Err(TlsError::ConnectionClosed) => Ok(0),
                other => other.map_err(LinkError::Tls),
            },
        }
    }
}

impl<S: Read + Write> Write for Stream<'_, S> {
    async fn write(&mut self, buf: &[u8]) -> Result<usize, Self::Error> {
        match self {
            Stream::Plain(s) => s.write(buf).await.map_err(LinkError::Tcp),
            Stream::Tls(t, _) => t.write(buf).await.map_err(LinkError::Tls),
        }
    }
    async fn flush(&mut self) -> Result<(), Self::Error> {
        match self {
            Stream::Plain(s) => s.flush().await.map_err(LinkError::Tcp),
            Stream::Tls(t, _) => t.flush().await.map_err(LinkError::Tls),
        }
    }
}

/// What [`Stream::read_or`] saw first.
pub enum ReadOr<R, O> {
    Read(R),
    Other(O),
    /// `other` finished while a TLS record was half-read; the read was finished too.
    Both(R, O),
}

impl<R, O> ReadOr<R, O> {
    /// The read's result and the other future's output, each if there is one.
    pub fn split(self) -> (Option<R>, Option<O>) {
        match self {
            ReadOr::Read(r) => (Some(r), None),
            ReadOr::Other(o) => (None, Some(o)),
            ReadOr::Both(r, o) => (Some(r), Some(o)),
        }
    }
}

/// The longest the rest of a half-read record may take once something else wants the session.
const RECORD_FINISH: Duration = Duration::from_secs(10);

impl<S: Read + Write> Stream<'_, S> {
    /// Reads, unless `other` finishes first; with TLS, `other` only interrupts the read at a
    /// record boundary (else the read is finished first, within 10 s, as the stream would be
    /// corrupt after a half-read record).
    pub async fn read_or<O: Future>(&mut self, buf: &mut [u8], other: O) -> ReadOr<Result<usize, LinkError<S::Error>>, O::Output> {
        let pos = match self {
            Stream::Tls(_, pos) => Some(*pos),
            Stream::Plain(_) => None,
        };
        let mut read = pin!(self.read(buf));
        match select(&mut read, other).await {
            Either::First(r) => ReadOr::Read(r),
            Either::Second(o) => match pos {
                Some(pos) if !pos.get().at_boundary() => match with_timeout(RECORD_FINISH, read).await {
                    Ok(r) => ReadOr::Both(r, o),
                    Err(_) => ReadOr::Both(Err(LinkError::Tls(TlsError::Io(ErrorKind::TimedOut))), o),
                },
                _ => ReadOr::Other(o),
            },
        }
    }
}

/// The two record buffers of a TLS connection ([`READ_RECORD_LEN`], [`WRITE_RECORD_LEN`]),
/// allocated by the first handshake and kept for the next ones (empty until then).
#[derive(Default)]
pub struct TlsBuffers {
    read: Vec<u8>,
    write: Vec<u8>,
}

/// The TLS handshake over `socket` with the hub at `host`, verified against `trust`.
pub async fn open<'b, S: Read + Write + 'b>(
    socket: S,
    host: &str,
    trust: &Trust,
    random: fn() -> u32,
    bufs: &'b mut TlsBuffers,
    pos: &'b Cell<RecordPos>,
) -> Result<Stream<'b, S>, TlsFailure> {
    pos.set(RecordPos::default());
    bufs.read.resize(READ_RECORD_LEN, 0);
    bufs.write.resize(WRITE_RECORD_LEN, 0);
    let mut tls = TlsConnection::new(Gate { socket, pos }, &mut bufs.read, &mut bufs.write);
    // SNI carries host names only (RFC 6066 §3: no IP literals).
    let is_ip = host.parse::<core::net::IpAddr>().is_ok();
    let config = if is_ip { TlsConfig::new() } else { TlsConfig::new().with_server_name(host) };
    let mut provider = Provider {
        rng: BoardRng(random),
        verifier: Verifier { trust, host, leaf: None, refusal: None, proven: false },
    };
    let opened = tls.open(TlsContext::new(&config, &mut provider)).await;
    outcome(opened, &provider.verifier).map(|()| Stream::Tls(tls, pos))
}

/// Whether a finished handshake may be used: only when it completed *and* our verifier checked
/// the chain and the CertificateVerify signature.
fn outcome(opened: Result<(), TlsError>, v: &Verifier<'_>) -> Result<(), TlsFailure> {
    match (opened, v.refusal, v.proven) {
        (_, Some(refusal), _) => Err(TlsFailure::Certificate(refusal)),
        (Err(e), None, _) => Err(TlsFailure::Handshake(e)),
        (Ok(()), None, true) => Ok(()),
        // The server finished the handshake without proving its key: never use that session.
        (Ok(()), None, false) => Err(TlsFailure::Certificate(Refusal::BadHandshakeSignature)),
    }
}

/// A TLS failure, logged with the host it concerns.
pub fn describe(host: &str, failure: &TlsFailure) -> String {
    alloc::format!("TLS to {host}: {failure}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ca_der() -> Vec<u8> {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn a_handshake_that_skipped_certificate_verify_is_refused() {
        // embedded-tls accepts a server Finished without Certificate/CertificateVerify; that
        // session must not be used even though `open` said Ok.
        let trust = Trust::new(ca_der(), 0).unwrap();
        let mut v = Verifier { trust: &trust, host: "10.0.0.2", leaf: None, refusal: None, proven: false };
        assert!(matches!(outcome(Ok(()), &v), Err(TlsFailure::Certificate(Refusal::BadHandshakeSignature))));
        // A CertificateVerify before (or without) a verified certificate proves nothing.
        let cv = CertificateVerifyRef { signature_scheme: SignatureScheme::EcdsaSecp256r1Sha256, signature: &[0x30, 0x06, 2, 1, 1, 2, 1, 1] };
        assert!(v.verify_signature(cv).is_err());
        assert_eq!(v.refusal, Some(Refusal::BadHandshakeSignature));
        assert!(!v.proven);
        assert!(matches!(outcome(Ok(()), &v), Err(TlsFailure::Certificate(Refusal::BadHandshakeSignature))));
        // Only a verified chain and signature pass.
        let ok = Verifier { trust: &trust, host: "10.0.0.2", leaf: None, refusal: None, proven: true };
        assert!(outcome(Ok(()), &ok).is_ok());
    }

    #[test]
    fn a_ca_that_is_not_der_is_refused_up_front() {
        assert_eq!(Trust::new(alloc::vec![0x30, 0x03, 1, 2, 3], 0).err(), Some(Refusal::Malformed));
        let ca = ca_der();
        assert_eq!(Trust::new(ca[..ca.len() - 1].to_vec(), 0).err(), Some(Refusal::Malformed));
        assert!(Trust::new(ca, 0).is_ok());
    }

    #[test]
    fn the_clock_only_moves_forward() {
        let trust = Trust::new(ca_der(), 1_800_000_000).unwrap();
        assert!(trust.now() >= 1_800_000_000);
        trust.saw_time(1_700_000_000);
        assert!(trust.now() >= 1_800_000_000, "an earlier server_time does not move the clock back");
        trust.saw_time(1_900_000_000);
        assert!(trust.now() >= 1_900_000_000);
        assert_eq!(Trust::new(ca_der(), 0).unwrap().now(), 0, "no flash time: nothing known");
    }

    #[test]
    fn record_boundaries_in_any_chunking() {
        // Two records: 3 bytes of body, then 0, then a header cut in two.
        let stream = [23, 3, 3, 0, 3, 1, 2, 3, 23, 3, 3, 0, 0, 21, 3];
        for cut in 0..stream.len() {
            let mut pos = RecordPos::default();
            pos.advance(&stream[..cut]);
            let boundary = matches!(cut, 0 | 8 | 13);
            assert_eq!(pos.at_boundary(), boundary, "after {cut} bytes");
            pos.advance(&stream[cut..]);
            assert!(!pos.at_boundary(), "a header is half-read at the end");
        }
    }
}
