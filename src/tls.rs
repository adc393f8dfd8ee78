//! TLS for mcpdev's HTTP clients (reqwest, rmcp's client) uses rustls with the *ring* provider:
//! pure Rust plus a little assembly, so building mcpdev needs no C toolchain or CMake for
//! `aws-lc-sys` (the provider reqwest would otherwise pull in). reqwest is built without a
//! provider of its own and takes the process default, which [`install_crypto_provider`] sets.

/// Makes ring the process-wide rustls provider, once. Call it before building any HTTP client;
/// calling it again is free.
pub fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Err means another provider was installed first, which serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
