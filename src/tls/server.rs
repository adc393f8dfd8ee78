//! The server side of TLS: the configuration every hub listener uses, a certificate that is
//! re-read when its files change, and a handshake with a deadline.
//!
//! Rules:
//! - [`config`]: TLS 1.2 and 1.3, forward-secret suites ([`super::provider`]), session tickets
//!   (a device that reconnects skips the full handshake), ALPN as the listener speaks.
//! - [`FileResolver`]: serves the certificate chain and key of two PEM files. A change of either
//!   file (certbot's renewal, `--tls auto`'s own) is picked up by the next handshake; connections
//!   already up keep the session they have, so no device is dropped. A half-written pair (a new
//!   certificate beside the old key) is not taken: the old pair stays until both match.
//! - [`accept`]: a handshake that has not finished by its deadline is dropped. The caller holds
//!   the connection's pre-hello permit across it, so slow or half-finished handshakes count
//!   against the same caps as connections that have not said hello.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// ALPN for the HTTP listeners (HTTP/1.1 only: WebSocket upgrades need it).
pub const HTTP1: &[&[u8]] = &[b"http/1.1"];

/// A server configuration serving `resolver`'s certificate, offering `alpn` (empty: none, as
/// MQTT clients expect).
pub fn config(resolver: Arc<dyn ResolvesServerCert>, alpn: &[&[u8]]) -> Arc<ServerConfig> {
    let mut config = ServerConfig::builder_with_provider(super::provider())
        .with_protocol_versions(super::VERSIONS)
        .expect("the ring provider supports TLS 1.2 and 1.3")
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    if let Ok(ticketer) = rustls::crypto::ring::Ticketer::new() {
        config.ticketer = ticketer;
    }
    Arc::new(config)
}

/// Why a certificate pair cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CertError(pub String);

/// A certificate chain and its key from two PEM files, re-read when they change.
#[derive(Debug)]
pub struct FileResolver {
    cert: PathBuf,
    key: PathBuf,
    current: RwLock<Loaded>,
}

#[derive(Debug)]
struct Loaded {
    key: Arc<CertifiedKey>,
    stamp: Stamp,
}

/// What tells a changed file: its modification time and length, both files.
type Stamp = [(Option<SystemTime>, u64); 2];

fn stamp(cert: &Path, key: &Path) -> Stamp {
    let of = |p: &Path| std::fs::metadata(p).map(|m| (m.modified().ok(), m.len())).unwrap_or((None, 0));
    [of(cert), of(key)]
}

/// Reads a chain and its key and checks that they belong together.
pub fn load_pair(cert: &Path, key: &Path) -> Result<Arc<CertifiedKey>, CertError> {
    let cert_pem = std::fs::read(cert).map_err(|e| CertError(format!("cannot read the certificate {}: {e}", cert.display())))?;
    let key_pem = std::fs::read(key).map_err(|e| CertError(format!("cannot read the key {}: {e}", key.display())))?;
    pair_from_pem(&cert_pem, &key_pem).map_err(|CertError(why)| CertError(format!("{} and {}: {why}", cert.display(), key.display())))
}

/// A chain and key from PEM text.
pub fn pair_from_pem(cert_pem: &[u8], key_pem: &[u8]) -> Result<Arc<CertifiedKey>, CertError> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem).filter_map(Result::ok).collect();
    if chain.is_empty() {
        return Err(CertError("the certificate file holds no PEM certificate".into()));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| CertError(format!("the key file holds no PEM private key ({e})")))?;
    let provider = super::provider();
    let signing = provider.key_provider.load_private_key(key).map_err(|e| CertError(format!("the private key cannot be used: {e}")))?;
    let certified = CertifiedKey::new(chain, signing);
    certified.keys_match().map_err(|_| CertError("the private key is not the certificate's (a half-renewed pair?)".into()))?;
    Ok(Arc::new(certified))
}

impl FileResolver {
    /// Reads the pair now; an error says which file and what is wrong.
    pub fn load(cert: &Path, key: &Path) -> Result<Arc<Self>, CertError> {
        let before = stamp(cert, key);
        let pair = load_pair(cert, key)?;
        Ok(Arc::new(Self { cert: cert.to_path_buf(), key: key.to_path_buf(), current: RwLock::new(Loaded { key: pair, stamp: before }) }))
    }

    /// Re-reads the pair if either file changed since it was read. `Ok(true)`: a new pair is
    /// served from the next handshake on. An error keeps the pair served until now (and is
    /// tried again at the next change).
    pub fn reload_if_changed(&self) -> Result<bool, CertError> {
        let now = stamp(&self.cert, &self.key);
        if self.current.read().unwrap_or_else(std::sync::PoisonError::into_inner).stamp == now {
            return Ok(false);
        }
        let pair = load_pair(&self.cert, &self.key);
        let mut current = self.current.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        current.stamp = now;
        current.key = pair?;
        Ok(true)
    }

    /// Checks the files every `every` from a task of its own, for as long as the resolver lives;
    /// each change is logged.
    pub fn watch(self: &Arc<Self>, every: Duration) {
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(me) = weak.upgrade() else { return };
                match me.reload_if_changed() {
                    Ok(true) => tracing::info!(cert = %me.cert.display(), "TLS certificate changed on disk: new connections get the new one"),
                    Ok(false) => {}
                    Err(e) => tracing::warn!("TLS certificate changed on disk but cannot be used; still serving the previous one: {e}"),
                }
            }
        });
    }

    /// The chain served now (leaf first).
    pub fn chain(&self) -> Vec<CertificateDer<'static>> {
        self.current.read().unwrap_or_else(std::sync::PoisonError::into_inner).key.cert.clone()
    }

    pub fn cert_file(&self) -> &Path {
        &self.cert
    }
}

impl ResolvesServerCert for FileResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.read().unwrap_or_else(std::sync::PoisonError::into_inner).key.clone())
    }
}

/// A self-signed certificate for `localhost`, made once per process (fuzzing and tests).
pub fn self_signed() -> Arc<dyn ResolvesServerCert> {
    #[derive(Debug)]
    struct Fixed(Arc<CertifiedKey>);
    impl ResolvesServerCert for Fixed {
        fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
            Some(self.0.clone())
        }
    }
    Arc::new(Fixed(self_signed_key()))
}

/// The pair [`self_signed`] serves.
fn self_signed_key() -> Arc<CertifiedKey> {
    static KEY: std::sync::OnceLock<Arc<CertifiedKey>> = std::sync::OnceLock::new();
    KEY.get_or_init(|| {
        let made = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("a self-signed certificate");
        pair_from_pem(made.cert.pem().as_bytes(), made.signing_key.serialize_pem().as_bytes()).expect("the pair just made")
    })
    .clone()
}

/// Why a handshake did not finish.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    #[error("no TLS handshake within {0:?}")]
    Timeout(Duration),
    /// The client's first bytes are no TLS record at all: a plain-text client (MQTT, HTTP,
    /// WebSocket) on a TLS port. Named as such in the log, with what to do (issue 45.8).
    #[error("the client did not speak TLS (its first bytes are no TLS record): most likely a plain-text client (MQTT, HTTP or WebSocket) on this TLS port; it must use TLS here (mqtts://, https:// or wss://), or the plain port")]
    Plaintext,
    #[error("TLS handshake failed: {0}")]
    Failed(std::io::Error),
}

/// Whether a handshake failed on bytes that are no TLS record (a plain-text client).
fn is_plaintext(e: &std::io::Error) -> bool {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .is_some_and(|r| matches!(r, rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType)))
}

/// Runs the server's handshake on `io`, within `deadline`: a [`super::stream::ServerStream`], which
/// holds no buffer while the connection is idle.
pub async fn accept<IO>(config: &Arc<ServerConfig>, io: IO, deadline: Duration) -> Result<super::stream::ServerStream<IO>, HandshakeError>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    accept_by(config, io, tokio::time::Instant::now() + deadline, deadline).await
}

/// As [`accept`], for a connection whose `deadline` began before this call and ends at `until`.
pub async fn accept_by<IO>(config: &Arc<ServerConfig>, io: IO, until: tokio::time::Instant, deadline: Duration) -> Result<super::stream::ServerStream<IO>, HandshakeError>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut stream = super::stream::ServerStream::new(io, config.clone()).map_err(|e| HandshakeError::Failed(std::io::Error::other(e)))?;
    match tokio::time::timeout_at(until, std::future::poll_fn(|cx| stream.poll_handshake(cx))).await {
        Ok(Ok(())) => Ok(stream),
        Ok(Err(e)) if is_plaintext(&e) => Err(HandshakeError::Plaintext),
        Ok(Err(e)) => Err(HandshakeError::Failed(e)),
        Err(_) => Err(HandshakeError::Timeout(deadline)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    async fn first_bytes(bytes: &[u8]) -> HandshakeError {
        crate::tls::install_crypto_provider();
        let config = config(self_signed(), &[]);
        let (mut client, server) = tokio::io::duplex(4096);
        client.write_all(bytes).await.unwrap();
        drop(client);
        accept(&config, server, Duration::from_secs(5)).await.err().expect("no handshake")
    }

    /// Issue 45.8: a plain MQTT CONNECT, or plain HTTP, on a TLS port is named as a plain-text
    /// client with what to do; a broken TLS record stays a handshake failure.
    #[tokio::test]
    async fn a_plain_text_client_on_a_tls_port_is_named_as_such() {
        let connect = [0x10, 0x10, 0x00, 0x04, b'M', b'Q', b'T', b'T', 0x04, 0x02, 0x00, 0x3c, 0x00, 0x04, b'a', b'b', b'c', b'd'];
        for bytes in [&connect[..], b"GET /xiaozhi/v1/ HTTP/1.1\r\nHost: x\r\n\r\n"] {
            let e = first_bytes(bytes).await;
            assert!(matches!(e, HandshakeError::Plaintext), "{e:?}");
            assert!(e.to_string().contains("plain-text client") && e.to_string().contains("mqtts://"), "{e}");
        }
        // A TLS handshake record whose body is junk: a TLS client that failed, not a plain one.
        let e = first_bytes(&[0x16, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5]).await;
        assert!(matches!(e, HandshakeError::Failed(_)), "{e:?}");
    }

    /// A client that trusts [`self_signed`] alone, and its server at the other end of a pipe.
    async fn connected(server: Arc<ServerConfig>, client: Arc<rustls::ClientConfig>) -> (crate::tls::stream::ServerStream<tokio::io::DuplexStream>, tokio_rustls::client::TlsStream<tokio::io::DuplexStream>) {
        let (near, far) = tokio::io::duplex(64 << 10);
        let connector = tokio_rustls::TlsConnector::from(client);
        let (server, client) = tokio::join!(accept(&server, far, Duration::from_secs(10)), connector.connect("localhost".try_into().unwrap(), near));
        (server.expect("the server's handshake"), client.expect("the client's handshake"))
    }

    fn client_config() -> Arc<rustls::ClientConfig> {
        let pin = crate::tls::parse_fingerprint(&crate::tls::fingerprint(&self_signed_key().cert[0])).unwrap();
        crate::tls::client::build(&crate::tls::client::Trust { pin: Some(pin), ..Default::default() }, &[]).unwrap()
    }

    /// Issue 46: an idle TLS connection holds no buffer, over TLS 1.3 and 1.2, after carrying a
    /// large message and small ones both ways; session tickets still resume; each side's
    /// close_notify reads as the end of the stream.
    #[tokio::test]
    async fn an_idle_tls_connection_holds_no_buffer_and_carries_every_byte() {
        use tokio::io::AsyncReadExt;
        crate::tls::install_crypto_provider();
        let tls12 = ServerConfig::builder_with_provider(super::super::provider())
            .with_protocol_versions(&[&rustls::version::TLS12])
            .unwrap()
            .with_no_client_auth()
            .with_cert_resolver(self_signed());
        let client = client_config();
        for (server, version) in [(config(self_signed(), &[]), rustls::ProtocolVersion::TLSv1_3), (Arc::new(tls12), rustls::ProtocolVersion::TLSv1_2)] {
            let (mut s, mut c) = connected(server.clone(), client.clone()).await;
            assert_eq!(c.get_ref().1.protocol_version(), Some(version));
            assert_eq!(s.buffered(), 0, "{version:?}: right after the handshake");
            let big: Vec<u8> = (0..(1u32 << 20) + 77).map(|i| (i * 31 % 251) as u8).collect();
            for message in [&big[..], b"{\"type\":\"hello\"}", &[7u8; 1]] {
                // Client to server, then back: the server echoes what it read.
                let (sent, got) = tokio::join!(async { c.write_all(message).await.and(c.flush().await) }, async {
                    let mut got = vec![0; message.len()];
                    s.read_exact(&mut got).await.map(|_| got)
                });
                sent.unwrap();
                let got = got.unwrap();
                assert!(got == message, "{version:?}: the server read what the client wrote");
                let (echoed, back) = tokio::join!(async { s.write_all(&got).await.and(s.flush().await) }, async {
                    let mut back = vec![0; message.len()];
                    c.read_exact(&mut back).await.map(|_| back)
                });
                echoed.unwrap();
                assert!(back.unwrap() == message, "{version:?}: the client read what the server wrote");
                assert_eq!(s.buffered(), 0, "{version:?}: idle after a message of {} bytes", message.len());
            }
            c.shutdown().await.unwrap();
            let mut rest = Vec::new();
            assert_eq!(s.read_to_end(&mut rest).await.unwrap(), 0, "{version:?}: the client's close_notify ends the stream");
            s.shutdown().await.unwrap();
            assert_eq!(c.read_to_end(&mut rest).await.unwrap(), 0, "{version:?}: the server's close_notify ends the stream");
            // The ticket (TLS 1.3) or session id (1.2) of the first connection resumes the next.
            let (_s, c) = connected(server, client.clone()).await;
            assert_eq!(c.get_ref().1.handshake_kind(), Some(rustls::HandshakeKind::Resumed), "{version:?}");
        }
    }
}
